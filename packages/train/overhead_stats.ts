/**
 * The statistics of a live overhead measurement: the median of paired ratios
 * (budgeted step / budget-free step of the same pair) with a distribution-free
 * confidence interval from order statistics, and process CPU time.
 *
 * @module
 */

import process from "node:process";

/** A median with its confidence interval. */
export interface MedianInterval {
  /** Median (mean of the two middle values for an even count). */
  median: number;
  /** Lower end of the interval (an order statistic of the values). */
  low: number;
  /** Upper end of the interval. */
  high: number;
  /**
   * The interval's actual coverage of the true median, from the binomial
   * distribution: at least the level asked for when there are enough values
   * (6 for 95%), else the most that `[min, max]` gives (0.9375 for 5 values).
   */
  confidence: number;
  /** Number of values. */
  n: number;
}

/** P(X <= k) for X ~ Binomial(n, 1/2), exactly (n <= 1000). */
export function binomialHalfCdf(n: number, k: number): number {
  if (!Number.isInteger(n) || n < 0 || n > 1000) {
    throw new RangeError(`binomialHalfCdf: n must be an integer in 0..1000, got ${n}`);
  }
  if (k < 0) return 0;
  if (k >= n) return 1;
  if (n <= 50) {
    // exact: the coefficients are integers below 2^53 and 2^n is a power of two
    let c = 1, sum = 1;
    for (let i = 1; i <= k; i++) {
      c = (c * (n - i + 1)) / i;
      sum += c;
    }
    return sum / 2 ** n;
  }
  let logC = 0, sum = 0;
  const log2n = n * Math.LN2;
  for (let i = 0; i <= k; i++) {
    if (i > 0) logC += Math.log((n - i + 1) / i);
    sum += Math.exp(logC - log2n);
  }
  return Math.min(1, sum);
}

/**
 * The median of `values` and the order-statistics interval
 * `[x(k), x(n-k+1)]` with the largest `k` whose coverage
 * `1 - 2 P(Binomial(n, 1/2) <= k-1)` is at least `level`; with too few values
 * for `level`, `[min, max]` and the coverage it has.
 *
 * @example
 * ```ts
 * import { medianInterval } from "./overhead_stats.ts";
 * const m = medianInterval([1.02, 0.99, 1.0, 1.05, 0.98, 1.01]);
 * if (m.median !== 1.005 || m.low !== 0.98 || m.high !== 1.05) throw new Error("interval");
 * if (m.confidence !== 1 - 2 / 64) throw new Error("coverage of [min, max] of 6");
 * ```
 */
export function medianInterval(values: readonly number[], level = 0.95): MedianInterval {
  if (values.length === 0) throw new RangeError("medianInterval: no values");
  if (!(level > 0 && level < 1)) {
    throw new RangeError(`medianInterval: level must be in (0, 1), got ${level}`);
  }
  for (const v of values) {
    if (!Number.isFinite(v)) {
      throw new RangeError(`medianInterval: values must be finite, got ${v} in [${values}]`);
    }
  }
  const s = [...values].sort((a, b) => a - b);
  const n = s.length, mid = n >> 1;
  const median = n % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  let k = 1;
  const coverage = (k: number) => 1 - 2 * binomialHalfCdf(n, k - 1);
  while (k + 1 <= (n + 1) / 2 && coverage(k + 1) >= level) k++;
  return { median, low: s[k - 1]!, high: s[n - k]!, confidence: coverage(k), n };
}

/** CPU time of this process (all threads, user + system) in ms. */
export function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
