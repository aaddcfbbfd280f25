import assert from "node:assert/strict";
import { etaMs, formatEta, phaseText } from "./progress.ts";

Deno.test("the estimate of time left follows the pace so far", () => {
  // 2 of 8 units in 10 s: 6 more at 5 s each
  assert.equal(etaMs(10_000, 2, 8), 30_000);
  assert.equal(etaMs(10_000, 0, 8), null, "no pace before the first unit");
  assert.equal(etaMs(10_000, 8, 8), 0);
  assert.equal(formatEta(30_000), "30 s");
  assert.equal(formatEta(200_000), "3 min 20 s");
  assert.equal(formatEta(3_900_000), "1 h 5 min");
  assert.equal(phaseText("budget"), "Training under the memory budget");
  assert.equal(phaseText("mystery"), "mystery");
});
