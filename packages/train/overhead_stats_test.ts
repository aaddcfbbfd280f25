import assert from "node:assert/strict";
import { binomialHalfCdf, medianInterval, processCpuMs } from "./overhead_stats.ts";

Deno.test("binomialHalfCdf matches sums of binomial coefficients", () => {
  // C(6,0) = 1, C(6,1) = 6, C(6,2) = 15; 2^6 = 64
  assert.equal(binomialHalfCdf(6, 0), 1 / 64);
  assert.equal(binomialHalfCdf(6, 1), 7 / 64);
  assert.equal(binomialHalfCdf(6, 2), 22 / 64);
  assert.equal(binomialHalfCdf(6, 6), 1);
  assert.equal(binomialHalfCdf(6, -1), 0);
  // symmetric: P(X <= k) + P(X <= n-k-1) = 1
  for (const n of [5, 9, 40, 301]) {
    for (const k of [0, 1, 2, Math.floor(n / 3)]) {
      assert.ok(Math.abs(binomialHalfCdf(n, k) + binomialHalfCdf(n, n - k - 1) - 1) < 1e-12);
    }
  }
  assert.throws(() => binomialHalfCdf(1.5, 0), /integer/);
});

Deno.test("medianInterval picks the widest-k order statistics that reach the level", () => {
  // 5 values: even [min, max] covers only 1 - 2/32 = 0.9375
  const five = medianInterval([5, 1, 4, 2, 3]);
  assert.deepEqual(five, { median: 3, low: 1, high: 5, confidence: 1 - 2 / 32, n: 5 });
  // 9 values: k = 2 covers 1 - 2 * 10/512 = 0.9609; k = 3 only 1 - 2 * 46/512 = 0.82
  const nine = medianInterval([9, 8, 7, 6, 5, 4, 3, 2, 1]);
  assert.equal(nine.median, 5);
  assert.equal(nine.low, 2);
  assert.equal(nine.high, 8);
  assert.ok(Math.abs(nine.confidence - (1 - 20 / 512)) < 1e-12);
  // a lower level narrows it
  const narrow = medianInterval([9, 8, 7, 6, 5, 4, 3, 2, 1], 0.8);
  assert.deepEqual([narrow.low, narrow.high], [3, 7]);
  assert.throws(() => medianInterval([]), /no values/);
  assert.throws(() => medianInterval([1, NaN]), /finite/);
});

Deno.test("medianInterval's interval covers the true median as often as it says (simulation)", () => {
  // Brute force on a skewed distribution with a known median (exp(1): ln 2).
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (const n of [6, 9, 15]) {
    let hit = 0, conf = 0;
    const trials = 4000;
    for (let t = 0; t < trials; t++) {
      const xs = Array.from({ length: n }, () => -Math.log(1 - rand()));
      const m = medianInterval(xs);
      conf = m.confidence;
      if (m.low <= Math.LN2 && Math.LN2 <= m.high) hit++;
    }
    assert.ok(conf >= 0.95, `n=${n}: confidence ${conf}`);
    assert.ok(
      Math.abs(hit / trials - conf) < 0.02,
      `n=${n}: covered ${hit / trials}, said ${conf}`,
    );
  }
});

Deno.test("processCpuMs grows with work done on this thread", () => {
  const a = processCpuMs();
  let x = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < 30) x += Math.sqrt(x + 1);
  const b = processCpuMs();
  assert.ok(x > 0);
  assert.ok(b - a >= 5, `30 ms of busy work counted ${b - a} ms of CPU`);
});
