import assert from "node:assert/strict";
import type { Backend } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { createPolicy, type EvictionPolicy } from "@libra/evict";
import { OutOfBudgetError } from "./errors.ts";
import { Runtime } from "./runtime.ts";
import { trainMlp } from "./_mlp_testing.ts";

interface StepResult {
  losses: number[];
  grads: number[][];
  weights: number[][];
  peak: number;
}

/**
 * Two SGD steps of a 4-layer MLP with dropout, built directly on @libra/tensor
 * ops and autograd. Returns the losses, the last gradients and the weights.
 */
function train(backend: Backend, afterStep?: () => void): StepResult {
  const r = trainMlp(backend, {
    seed: 7,
    dims: [24, 48, 48, 48, 10],
    batch: 128,
    label: (i) => (i * 7) % 10,
    dropout: 0.25,
    steps: 2,
    readGrads: true,
    ...(afterStep ? { afterStep } : {}),
  });
  return { ...r, peak: backend.memory().peakBytes };
}

const reference = train(new ReferenceBackend());

Deno.test("Runtime without a budget gives bitwise the reference results", () => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  const r = train(rt);
  assert.deepEqual(r.losses, reference.losses);
  assert.deepEqual(r.grads, reference.grads);
  assert.deepEqual(r.weights, reference.weights);
});

const free = (() => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  train(rt);
  return rt.stats.peakBytes;
})();

for (
  const policy of ["dtr-eq", "dtr", "dtr-local", "msps", "lru", "largest", "random", "dtr-eq+swap"]
) {
  for (const ratio of [0.7, 0.5]) {
    Deno.test(`Runtime(${policy}, ratio ${ratio}) is bitwise exact and stays under the budget`, () => {
      const budget = Math.floor(free * ratio);
      const rt = new Runtime({ backend: new ReferenceBackend(), budget, policy });
      const r = train(rt);
      assert.deepEqual(r.losses, reference.losses, "losses");
      assert.deepEqual(r.grads, reference.grads, "gradients");
      assert.deepEqual(r.weights, reference.weights, "updated weights");
      const st = rt.stats;
      assert.ok(st.peakBytes <= budget, `peak ${st.peakBytes} > budget ${budget}`);
      for (const b of rt.timeline.bytes) assert.ok(b <= budget);
      assert.ok(st.evictions > 0, "the budget forced evictions");
      assert.ok(st.remats > 0 || st.swapIns > 0, "evicted values were re-materialized");
    });
  }
}

Deno.test("Runtime with a { ratio } budget measures the first step, then holds the budget", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), budget: { ratio: 0.6 } });
  let steps = 0;
  const r = train(rt, () => {
    if (steps++ === 0) {
      rt.endStep();
      rt.resetPeak();
    }
  });
  assert.deepEqual(r.weights, reference.weights);
  assert.ok(rt.budgetBytes < Infinity);
  assert.ok(rt.stats.peakBytes <= rt.budgetBytes, `${rt.stats.peakBytes} <= ${rt.budgetBytes}`);
});

Deno.test("Runtime throws OutOfBudgetError with its facts and stays usable", () => {
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    budget: { ratio: 0.5, peakBytes: free },
  });
  const a = rt.alloc(4096), b = rt.alloc(4096);
  rt.write(a, new Float32Array(1024).fill(-1));
  rt.setBudget(6000);
  let err: unknown;
  try {
    rt.run("relu", [a], [b], [1024]);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OutOfBudgetError, String(err));
  assert.equal(err.neededBytes, 4096);
  assert.equal(err.usedBytes, 4096);
  assert.equal(err.evictableBytes, 0, "a leaf cannot be dropped and swapping is off");
  assert.equal(err.budgetBytes, 6000);
  assert.equal(err.knownFeasibleBytes, free);
  assert.match(err.message, /4096 bytes needed/);
  assert.equal(rt.memory().usedBytes, 4096, "nothing leaked");
  rt.setBudget(8192);
  rt.run("relu", [a], [b], [1024]);
  assert.deepEqual(Array.from(new Float32Array(rt.read(b).buffer)).slice(0, 2), [0, 0]);
});

Deno.test("Runtime swaps leaves to a bounded host pool and back, bit for bit", () => {
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    budget: 10 * 1024,
    policy: "lru+swap",
    hostLimitBytes: 8 * 1024,
  });
  const data = [1, 2, 3].map((k) => Float32Array.from({ length: 1024 }, (_, i) => Math.sin(i * k)));
  const bufs = data.map((d) => {
    const b = rt.alloc(4096);
    rt.write(b, d);
    return b;
  });
  assert.equal(rt.stats.swapOuts, 1, "the third leaf pushed the first to host");
  for (const [i, b] of bufs.entries()) {
    assert.deepEqual(new Float32Array(rt.read(b).buffer), data[i], `leaf ${i}`);
  }
  assert.ok(rt.stats.swapIns >= 1);
  assert.ok(rt.engine.hostUsed <= 8 * 1024);
  assert.ok(rt.stats.peakBytes <= 10 * 1024);
  const extra = [rt.alloc(4096), rt.alloc(4096)];
  assert.throws(
    () => {
      for (const b of extra) rt.write(b, new Float32Array(1024));
    },
    OutOfBudgetError,
    "host pool full and leaves cannot be dropped",
  );
  rt.free(bufs[0]!);
  rt.write(extra[1]!, new Float32Array(1024).fill(5));
  assert.equal(new Float32Array(rt.read(extra[1]!).buffer)[7], 5);
});

Deno.test("Runtime.prefetch() brings a swapped buffer back before it is read", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), budget: 8192, policy: "lru+swap" });
  const a = rt.alloc(4096), b = rt.alloc(4096), c = rt.alloc(4096);
  const va = Float32Array.from({ length: 1024 }, (_, i) => i);
  const vb = Float32Array.from({ length: 1024 }, (_, i) => -i);
  rt.write(a, va);
  rt.write(b, vb);
  rt.write(c, new Float32Array(1024).fill(2)); // pushes a or b out
  assert.equal(rt.stats.swapOuts, 1);
  rt.free(c);
  rt.prefetch(a);
  rt.prefetch(b);
  assert.equal(rt.stats.swapIns, 1, "prefetch swapped the evicted one in (the other was resident)");
  assert.deepEqual(new Float32Array(rt.read(a).buffer), va);
  assert.deepEqual(new Float32Array(rt.read(b).buffer), vb);
  assert.equal(rt.stats.swapIns, 1, "the reads found both resident");
});

Deno.test("Runtime without host memory keeps only droppable storages in the pool", () => {
  // The policy's search skips the per-candidate drop check on this promise
  // (EvictionContext.onlyDroppable); check it at every choice of a budgeted run
  // with overwrites, in-place updates and frees, and that the run is the same.
  for (const policy of ["dtr-eq", "lru"]) {
    for (const ratio of [0.7, 0.5]) {
      const inner = createPolicy(policy);
      let checked = 0;
      const checking: EvictionPolicy = {
        name: inner.name,
        ...(inner.needs !== undefined ? { needs: inner.needs } : {}),
        choose(ctx) {
          assert.equal(ctx.onlyDroppable, true);
          for (const s of ctx.pool) {
            assert.ok(s.droppable, `${s.name} in the pool is not droppable`);
            checked++;
          }
          return inner.choose(ctx);
        },
      };
      const budget = Math.floor(free * ratio);
      const rt = new Runtime({ backend: new ReferenceBackend(), budget, policy: checking });
      const r = train(rt);
      assert.deepEqual(r.weights, reference.weights);
      assert.ok(checked > 0 && rt.stats.evictions > 0, `${policy} ${ratio}: choices were checked`);
    }
  }
});
