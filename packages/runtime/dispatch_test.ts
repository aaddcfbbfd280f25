import assert from "node:assert/strict";
import {
  type Backend,
  crossEntropy,
  dropout,
  manualSeed,
  matmul,
  normal,
  relu,
  sgdUpdate,
  type Tensor,
  tensor,
  tidy,
  withBackend,
  zeros,
} from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { StorageNode } from "@libra/lineage";
import { Runtime } from "./runtime.ts";

/** Three SGD steps of an MLP with dropout (in-place updates, a step end after each); the losses. */
function train(rt: Runtime): number[] {
  return withBackend(rt as Backend, () => {
    manualSeed(3);
    const dims = [16, 40, 40, 40, 8];
    const ws: Tensor[] = [];
    const bufs: Tensor[] = [];
    for (let i = 0; i < dims.length - 1; i++) {
      const w = normal([dims[i]!, dims[i + 1]!], { std: 0.2 });
      w.requiresGrad = true;
      ws.push(w);
      bufs.push(zeros([dims[i]!, dims[i + 1]!]));
    }
    const x = normal([96, 16]);
    const y = tensor(new Int32Array(Array.from({ length: 96 }, (_, i) => (i * 5) % 8)), [96], {
      dtype: "i32",
    });
    const losses: number[] = [];
    for (let step = 0; step < 3; step++) {
      const loss = tidy(() => {
        let h: Tensor = x;
        for (let i = 0; i < ws.length; i++) {
          h = matmul(h, ws[i]!);
          if (i < ws.length - 1) h = dropout(relu(h), 0.2);
        }
        const l = crossEntropy(h, y);
        l.backward();
        return l;
      });
      losses.push(loss.item());
      loss.dispose();
      ws.forEach((w, i) => {
        sgdUpdate(w, w.grad!, bufs[i]!, { lr: 0.1, momentum: 0.9, firstStep: step === 0 });
        w.grad!.dispose();
        w.grad = null;
      });
      rt.endStep();
    }
    return losses;
  });
}

const free = (() => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  train(rt);
  return rt.stats.peakBytes;
})();

/** A run with the lineage's lists of evicted neighbours kept (the fast path) or walked anew. */
function run(policy: string, ratio: number, mode: "full" | "sqrt", lists: boolean) {
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    budget: Math.floor(free * ratio),
    policy,
    search: { mode },
    timeline: false,
  });
  rt.engine.recordDecisions = true;
  const lin = rt.lineage;
  lin.cachesNeighborLists = lists;
  let walks = 0;
  const walk = lin.evictedNeighbors.bind(lin);
  lin.evictedNeighbors = (s: StorageNode, out?: StorageNode[]) => {
    walks++;
    return walk(s, out);
  };
  const losses = train(rt);
  return { losses, decisions: rt.engine.decisions, stats: rt.stats, walks };
}

// Not the `+swap` policies: a live swap's measured time advances the clock, so their
// decisions follow machine noise from one run to the next.
for (const policy of ["dtr-eq", "dtr", "msps", "lru"]) {
  for (const ratio of [0.8, 0.6]) {
    for (const mode of ["full", "sqrt"] as const) {
      Deno.test(`kept neighbour lists change no decision: ${policy}, ratio ${ratio}, ${mode}`, () => {
        const slow = run(policy, ratio, mode, false);
        const fast = run(policy, ratio, mode, true);
        assert.ok(slow.decisions.length > 0, "the budget forced evictions");
        assert.deepEqual(fast.decisions, slow.decisions);
        assert.deepEqual(fast.losses, slow.losses);
        for (const k of ["evictions", "remats", "swapIns", "computeNs", "peakBytes"] as const) {
          assert.equal(fast.stats[k], slow.stats[k], k);
        }
        // dtr-eq scores read the neighbours' classes: the kept lists spare walks.
        if (policy.startsWith("dtr-eq")) assert.ok(fast.walks < slow.walks, "lists were reused");
        else assert.equal(fast.walks, slow.walks);
      });
    }
  }
}
