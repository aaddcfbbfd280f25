/**
 * Copy-on-write before in-place updates: where the budget is ample (at least
 * the budget-free peak the engine measured), a training step's parameter
 * updates copy nothing (the gradients computed from the old parameters become
 * leaves); under a tighter budget, and without one, they copy, so values
 * computed from the old parameters stay recomputable. Results are bitwise
 * equal either way, and the measured time of the runtime's added kernels
 * (`addedKernelNs`) counts the copies, not the updates themselves.
 */

import assert from "node:assert/strict";
import { AdamW, createData, createModel, trainStep } from "@libra/nn";
import { manualSeed, withBackend } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Runtime } from "./runtime.ts";

function run(budget: (peak: number) => number | undefined) {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const perStep: { copies: number; added: number; evictions: number }[] = [];
  const losses: number[] = [];
  let weights: number[][] = [];
  withBackend(rt, () => {
    manualSeed(3);
    const model = createModel("mlp", "tiny", { backend: rt });
    const data = createData("mlp", "tiny", { seed: 3 });
    const opt = new AdamW(model.parameters(), { lr: 0.01 });
    for (let i = 0; i < 4; i++) {
      if (i === 2) {
        const b = budget(rt.stats.peakBytes);
        if (b !== undefined) rt.setBudget(b);
      }
      const s0 = rt.stats;
      losses.push(trainStep({ model, batch: data.next(), optimizer: opt, backend: rt }));
      const s1 = rt.stats;
      perStep.push({
        copies: s1.copies - s0.copies,
        added: s1.addedKernelNs - s0.addedKernelNs,
        evictions: s1.evictions - s0.evictions,
      });
      rt.endStep();
    }
    weights = model.parameters().map((p) => Array.from(p.toArray()));
    opt.dispose();
    model.dispose();
  });
  return { perStep, losses, weights, stats: rt.stats };
}

Deno.test("copy-on-write: none at an ample budget, copies without one and under a tight one, same bits", () => {
  const free = run(() => undefined);
  const ample = run((peak) => peak);
  const tight = run((peak) => Math.floor(peak * 0.7));
  // without a budget every step copies the parameters it updates (2 layers: weights and biases)
  for (const s of free.perStep) assert.ok(s.copies > 0, JSON.stringify(free.perStep));
  // at the budget-free peak: the first two (budget-free) steps copy, the budgeted ones do not
  assert.ok(ample.perStep[0]!.copies > 0 && ample.perStep[1]!.copies > 0);
  for (const s of ample.perStep.slice(2)) {
    assert.equal(s.copies, 0, JSON.stringify(ample.perStep));
    assert.equal(s.added, 0, "no kernel added: in-place updates are not counted as added");
    assert.equal(s.evictions, 0);
  }
  // below it the copies come back (the runtime may have to evict what was computed from them)
  for (const s of tight.perStep.slice(2)) assert.ok(s.copies > 0, JSON.stringify(tight.perStep));
  assert.ok(
    tight.stats.peakBytes <= Math.floor(free.stats.peakBytes * 0.7) || tight.stats.evictions >= 0,
  );
  for (const r of [ample, tight]) {
    assert.deepEqual(r.losses, free.losses);
    assert.deepEqual(r.weights, free.weights);
  }
});
