import assert from "node:assert/strict";
import { cosineWithWarmup } from "./schedule.ts";

Deno.test("cosineWithWarmup() ramps linearly, then follows half a cosine to minLr", () => {
  const lr = cosineWithWarmup({ baseLr: 0.1, warmupSteps: 4, totalSteps: 12, minLr: 0.01 });
  // warm-up: 0.1 * (s + 1) / 4
  [0.025, 0.05, 0.075, 0.1].forEach((want, s) => assert.ok(Math.abs(lr(s) - want) < 1e-15));
  // cosine part: progress (s - 4) / 8; at progress 0.5: 0.01 + 0.045 * (1 + cos(pi/2)) = 0.055
  assert.ok(Math.abs(lr(4) - 0.1) < 1e-15);
  assert.ok(Math.abs(lr(8) - 0.055) < 1e-15);
  // progress 0.25: 0.01 + 0.045 * (1 + sqrt(2)/2)
  assert.ok(Math.abs(lr(6) - (0.01 + 0.045 * (1 + Math.SQRT1_2))) < 1e-15);
  assert.equal(lr(12), 0.01);
  assert.equal(lr(100), 0.01);
  for (let s = 4; s < 12; s++) assert.ok(lr(s + 1) <= lr(s), `monotone after warm-up at ${s}`);
});

Deno.test("cosineWithWarmup() rejects a warm-up as long as the run", () => {
  assert.throws(
    () => cosineWithWarmup({ baseLr: 1, warmupSteps: 5, totalSteps: 5 }),
    /warmupSteps=5, totalSteps=5/,
  );
});
