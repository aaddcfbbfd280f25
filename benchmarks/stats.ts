/**
 * The suite's arithmetic: budgets from ratios, aggregation of repeated
 * measurements, and the per-policy and per-model summaries (smallest feasible
 * ratio, overhead curve, best policy at each ratio). Pure functions on plain
 * data, so the tests check them on hand-computed inputs.
 *
 * @module
 */

import { median } from "@libra/util/stats";

/** Median, minimum and maximum of a set of repeated measurements. */
export interface Spread {
  /** Median (mean of the two middle values for an even count). */
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

/**
 * Median, minimum and maximum of `values`.
 *
 * @example
 * ```ts
 * import { spread } from "./stats.ts";
 * const s = spread([3, 1, 2, 10]);
 * if (s.median !== 2.5 || s.min !== 1 || s.max !== 10) throw new Error("spread");
 * ```
 */
export function spread(values: readonly number[]): Spread {
  if (values.length === 0) {
    throw new RangeError("spread: no values to aggregate (need at least one)");
  }
  for (const v of values) {
    if (!Number.isFinite(v)) {
      throw new RangeError(
        `spread: values must be finite numbers, got ${v} in [${values.join(", ")}]`,
      );
    }
  }
  return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
}

/**
 * The budget in bytes for a budget ratio (ARCHITECTURE.md: budget ratio = budget /
 * budget-free peak). Rounded down so the budget never exceeds the ratio.
 *
 * @example
 * ```ts
 * import { budgetBytes } from "./stats.ts";
 * if (budgetBytes(1000, 0.35) !== 350) throw new Error("budget");
 * ```
 */
export function budgetBytes(peakBytes: number, ratio: number): number {
  if (!Number.isFinite(peakBytes) || peakBytes < 0) {
    throw new RangeError(
      `budgetBytes: peak must be a non-negative number of bytes, got ${peakBytes}`,
    );
  }
  if (!Number.isFinite(ratio) || ratio <= 0) {
    throw new RangeError(`budgetBytes: ratio must be a positive number, got ${ratio}`);
  }
  // The epsilon keeps 0.35 * 1000 = 349.99999999999994 from losing a byte.
  return Math.floor(peakBytes * ratio + 1e-9);
}

/** The ratio a budget represents, the inverse of {@link budgetBytes}. */
export function ratioOf(budget: number, peakBytes: number): number {
  if (!(peakBytes > 0)) throw new RangeError(`ratioOf: peak must be positive, got ${peakBytes}`);
  return budget / peakBytes;
}

/** The fields of a result the summaries need. */
export interface CurveInput {
  readonly workload: string;
  readonly policy: string;
  readonly ratio: number;
  readonly feasible: boolean;
  /** Median overhead; null when infeasible. */
  readonly overhead: number | null;
}

/** One point of an overhead curve. */
export interface CurvePoint {
  readonly ratio: number;
  readonly feasible: boolean;
  readonly overhead: number | null;
}

/** Summary per (workload, policy). */
export interface PolicySummary {
  readonly workload: string;
  readonly policy: string;
  /** Lowest tested ratio at which the step completed; null when none did. */
  readonly smallestFeasibleRatio: number | null;
  /**
   * True when some ratio above {@link smallestFeasibleRatio} was infeasible
   * (feasibility was not monotone in the budget, which a careful reader wants to know).
   */
  readonly nonMonotone: boolean;
  /** The overhead curve, ratios descending. */
  readonly curve: readonly CurvePoint[];
}

/** Best policy of one workload at one ratio. */
export interface BestAtRatio {
  readonly workload: string;
  readonly ratio: number;
  /** Feasible policy with the lowest median overhead (ties: name order); null if none was feasible. */
  readonly policy: string | null;
  readonly overhead: number | null;
}

function key(a: string, b: string): string {
  return `${a}\u0000${b}`;
}

/**
 * Smallest feasible ratio and overhead curve per (workload, policy), in the
 * order the pairs first appear in `results`.
 */
export function policySummaries(results: readonly CurveInput[]): PolicySummary[] {
  const groups = new Map<string, CurveInput[]>();
  for (const r of results) {
    const k = key(r.workload, r.policy);
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  const out: PolicySummary[] = [];
  for (const g of groups.values()) {
    const curve = [...g].sort((a, b) => b.ratio - a.ratio).map((r) => ({
      ratio: r.ratio,
      feasible: r.feasible,
      overhead: r.feasible ? r.overhead : null,
    }));
    let smallest: number | null = null;
    for (const p of curve) if (p.feasible) smallest = p.ratio;
    const nonMonotone = smallest !== null && curve.some((p) => !p.feasible && p.ratio > smallest!);
    out.push({
      workload: g[0]!.workload,
      policy: g[0]!.policy,
      smallestFeasibleRatio: smallest,
      nonMonotone,
      curve,
    });
  }
  return out;
}

/** The best feasible policy per (workload, ratio), ratios descending within each workload. */
export function bestPolicies(results: readonly CurveInput[]): BestAtRatio[] {
  const groups = new Map<string, CurveInput[]>();
  for (const r of results) {
    const k = key(r.workload, String(r.ratio));
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  const out: BestAtRatio[] = [];
  for (const g of groups.values()) {
    let best: CurveInput | null = null;
    for (const r of g) {
      if (!r.feasible || r.overhead === null) continue;
      if (
        best === null || r.overhead < best.overhead! ||
        (r.overhead === best.overhead && r.policy < best.policy)
      ) best = r;
    }
    out.push({
      workload: g[0]!.workload,
      ratio: g[0]!.ratio,
      policy: best?.policy ?? null,
      overhead: best?.overhead ?? null,
    });
  }
  const order = new Map<string, number>();
  for (const r of results) if (!order.has(r.workload)) order.set(r.workload, order.size);
  return out.sort((a, b) => order.get(a.workload)! - order.get(b.workload)! || b.ratio - a.ratio);
}

/**
 * Keeps at most `max` points of a series, always including the first, the
 * last and the highest (so a downsampled memory timeline keeps its peak).
 */
export function downsample<T>(points: readonly T[], max: number, value: (p: T) => number): T[] {
  if (max < 3) throw new RangeError(`downsample: max must be at least 3, got ${max}`);
  if (points.length <= max) return [...points];
  let peak = 0;
  for (let i = 1; i < points.length; i++) if (value(points[i]!) > value(points[peak]!)) peak = i;
  const keep = new Set<number>([0, points.length - 1, peak]);
  const step = (points.length - 1) / (max - 3 + 1);
  for (let x = step; keep.size < max && x < points.length - 1; x += step) keep.add(Math.round(x));
  return [...keep].sort((a, b) => a - b).map((i) => points[i]!);
}
