import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { StorageNode } from "@libra/lineage";
import { Runtime } from "./runtime.ts";
import { trainMlp } from "./_mlp_testing.ts";

/** Three SGD steps of an MLP with dropout (in-place updates, a step end after each); the losses. */
function train(rt: Runtime): number[] {
  return trainMlp(rt, {
    seed: 3,
    dims: [16, 40, 40, 40, 8],
    batch: 96,
    label: (i) => (i * 5) % 8,
    dropout: 0.2,
    steps: 3,
    afterStep: () => rt.endStep(),
  }).losses;
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
