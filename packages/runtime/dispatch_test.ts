import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { StorageNode, TensorNode } from "@libra/lineage";
import { createPolicy, type ScorePolicy } from "@libra/evict";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { Runtime } from "./runtime.ts";
import { trainSteppedMlp } from "./_mlp_testing.ts";

/** Three SGD steps of an MLP with dropout (in-place updates, a step end after each); the losses. */
function train(rt: Runtime): number[] {
  return trainSteppedMlp(rt, { seed: 3, batch: 96, label: (i) => (i * 5) % 8 }).losses;
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

/** A sampled dtr-eq run, with its kept floors (the fast path) or without them. */
function sampledPolicy(floors: boolean) {
  const policy = createPolicy("dtr-eq", { mode: "sqrt" }) as ScorePolicy;
  // Without a floor epoch the search keeps no floors: every bound is c / (m x staleness).
  if (!floors) Object.defineProperty(policy, "floorEpoch", { value: undefined });
  const counted = { policy, scored: 0 };
  const choose = policy.choose.bind(policy);
  policy.choose = (ctx) => {
    const v = choose(ctx);
    counted.scored += policy.scored;
    return v;
  };
  return counted;
}

function sampled(ratio: number, floors: boolean) {
  const counted = sampledPolicy(floors);
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    budget: Math.floor(free * ratio),
    policy: counted.policy,
    timeline: false,
  });
  rt.engine.recordDecisions = true;
  const losses = train(rt);
  return { losses, decisions: rt.engine.decisions, stats: rt.stats, scored: counted.scored };
}

for (const ratio of [0.8, 0.6, 0.5]) {
  Deno.test(`dtr-eq's kept floors change no decision: ratio ${ratio}`, () => {
    const plain = sampled(ratio, false);
    const fast = sampled(ratio, true);
    assert.ok(plain.stats.remats > 0, "the budget forced re-materializations");
    assert.deepEqual(fast.decisions, plain.decisions);
    assert.deepEqual(fast.losses, plain.losses);
    assert.ok(fast.scored <= plain.scored, `${fast.scored} <= ${plain.scored} scored`);
  });
}

Deno.test("dtr-eq's kept floors spare scoring in a long forward chain (same decisions)", () => {
  // The dispatch bench's stream in small: each call computes relu of the last value and
  // frees the one 600 calls older, restarting from the input every 64 calls, under a
  // budget 90% of the live values: one eviction every few calls, no re-materialization.
  const chain = (floors: boolean) => {
    const counted = sampledPolicy(floors);
    const live = 600, n = 16;
    const rt = new Runtime({
      backend: new ReferenceBackend(),
      budget: Math.floor(0.9 * live * 4 * n),
      policy: counted.policy,
      timeline: false,
    });
    rt.engine.recordDecisions = true;
    const x = rt.alloc(4 * n);
    rt.write(x, new Float32Array(n).map((_, i) => i - 7));
    const ring: DeviceBuffer[] = [];
    let prev = x;
    for (let i = 0; i < 4000; i++) {
      if (i % 64 === 0) prev = x;
      const y = rt.alloc(4 * n);
      rt.run("relu", [prev], [y], [n]);
      if (ring.length === live) rt.free(ring[i % live]!);
      ring[i % live] = prev = y;
      if ((i + 1) % 1000 === 0) rt.endStep();
    }
    return { decisions: rt.engine.decisions, scored: counted.scored, stats: rt.stats };
  };
  const plain = chain(false), fast = chain(true);
  assert.ok(plain.stats.evictions > 1000, `evictions: ${plain.stats.evictions}`);
  assert.deepEqual(fast.decisions, plain.decisions);
  // Deterministic: 3482 against 6381 when written.
  assert.ok(fast.scored < 0.7 * plain.scored, `${fast.scored} vs ${plain.scored} scored`);
});

Deno.test("training leaves the shared empty tensor and consumer lists empty", () => {
  // New storages and tensors share one empty list each until their first entry;
  // a push onto it would give every later one a phantom entry.
  run("dtr-eq", 0.6, "sqrt", true);
  run("lru", 0.8, "full", true);
  const s = new StorageNode(0, 4);
  assert.equal(s.tensors.length, 0);
  assert.equal(new TensorNode(0, "t", s, null, 0).consumers.length, 0);
});
