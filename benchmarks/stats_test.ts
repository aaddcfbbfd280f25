import assert from "node:assert/strict";
import {
  bestPolicies,
  budgetBytes,
  downsample,
  policySummaries,
  ratioOf,
  spread,
} from "./stats.ts";

Deno.test("spread() gives median, min and max for odd and even counts", () => {
  assert.deepEqual(spread([5]), { median: 5, min: 5, max: 5 });
  assert.deepEqual(spread([3, 1, 2]), { median: 2, min: 1, max: 3 });
  assert.deepEqual(spread([4, 1, 3, 2]), { median: 2.5, min: 1, max: 4 });
  // The input is not reordered.
  const xs = [9, 7, 8];
  spread(xs);
  assert.deepEqual(xs, [9, 7, 8]);
});

Deno.test("spread() rejects empty and non-finite input with the values", () => {
  assert.throws(() => spread([]), /no values/);
  assert.throws(() => spread([1, NaN]), /finite.*1, NaN/);
});

Deno.test("budgetBytes() is floor(peak * ratio) without losing a byte to rounding", () => {
  assert.equal(budgetBytes(1000, 1), 1000);
  assert.equal(budgetBytes(1000, 0.35), 350); // 1000 * 0.35 = 349.99999999999994 in binary
  assert.equal(budgetBytes(10061179152, 0.5), 5030589576);
  assert.equal(budgetBytes(7, 0.5), 3);
  assert.throws(() => budgetBytes(1000, 0), /positive/);
  assert.throws(() => budgetBytes(-1, 0.5), /non-negative/);
  assert.equal(ratioOf(250, 1000), 0.25);
});

const results = [
  { workload: "w", policy: "a", ratio: 1, feasible: true, overhead: 1 },
  { workload: "w", policy: "a", ratio: 0.5, feasible: true, overhead: 1.2 },
  { workload: "w", policy: "a", ratio: 0.2, feasible: false, overhead: null },
  { workload: "w", policy: "b", ratio: 1, feasible: true, overhead: 1.01 },
  { workload: "w", policy: "b", ratio: 0.5, feasible: true, overhead: 1.1 },
  { workload: "w", policy: "b", ratio: 0.2, feasible: true, overhead: 1.9 },
  { workload: "v", policy: "a", ratio: 0.5, feasible: false, overhead: null },
  { workload: "v", policy: "a", ratio: 0.2, feasible: true, overhead: 1.5 },
  { workload: "v", policy: "a", ratio: 1, feasible: true, overhead: 1 },
];

Deno.test("policySummaries() finds the smallest feasible ratio and sorts the curve", () => {
  const s = policySummaries(results);
  assert.deepEqual(s.map((x) => [x.workload, x.policy, x.smallestFeasibleRatio, x.nonMonotone]), [
    ["w", "a", 0.5, false],
    ["w", "b", 0.2, false],
    ["v", "a", 0.2, true],
  ]);
  assert.deepEqual(s[0]!.curve, [
    { ratio: 1, feasible: true, overhead: 1 },
    { ratio: 0.5, feasible: true, overhead: 1.2 },
    { ratio: 0.2, feasible: false, overhead: null },
  ]);
});

Deno.test("policySummaries() reports null when no ratio was feasible", () => {
  const s = policySummaries([{
    workload: "w",
    policy: "x",
    ratio: 0.1,
    feasible: false,
    overhead: null,
  }]);
  assert.equal(s[0]!.smallestFeasibleRatio, null);
  assert.equal(s[0]!.nonMonotone, false);
});

Deno.test("bestPolicies() picks the lowest overhead among feasible policies per ratio", () => {
  assert.deepEqual(bestPolicies(results), [
    { workload: "w", ratio: 1, policy: "a", overhead: 1 },
    { workload: "w", ratio: 0.5, policy: "b", overhead: 1.1 },
    { workload: "w", ratio: 0.2, policy: "b", overhead: 1.9 },
    { workload: "v", ratio: 1, policy: "a", overhead: 1 },
    { workload: "v", ratio: 0.5, policy: null, overhead: null },
    { workload: "v", ratio: 0.2, policy: "a", overhead: 1.5 },
  ]);
});

Deno.test("bestPolicies() breaks ties by policy name", () => {
  const r = bestPolicies([
    { workload: "w", policy: "z", ratio: 1, feasible: true, overhead: 1 },
    { workload: "w", policy: "m", ratio: 1, feasible: true, overhead: 1 },
  ]);
  assert.equal(r[0]!.policy, "m");
});

Deno.test("downsample() keeps first, last and peak and at most max points", () => {
  const pts = Array.from({ length: 10_000 }, (_, i) => ({ i, v: i === 4321 ? 1e9 : i % 17 }));
  const d = downsample(pts, 100, (p) => p.v);
  assert.ok(d.length <= 100 && d.length >= 90, `got ${d.length} points`);
  assert.equal(d[0]!.i, 0);
  assert.equal(d[d.length - 1]!.i, 9999);
  assert.ok(d.some((p) => p.i === 4321), "peak kept");
  for (let k = 1; k < d.length; k++) assert.ok(d[k]!.i > d[k - 1]!.i, "in order");
  assert.equal(downsample([1, 2, 3], 5, (x) => x).length, 3);
});
