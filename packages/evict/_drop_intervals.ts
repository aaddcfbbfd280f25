/**
 * Eviction intervals chosen by a MILP over the recorded step (HiGHS).
 *
 * Every stored value is out of the device, if at all, between two of its
 * consecutive uses: evicted after `prev`, back before `next`. Choosing a set
 * of such intervals is a covering problem: at every call whose budget-free
 * memory ({@link memoryProfile}) exceeds the target, the intervals spanning it
 * must free the excess; each dropped interval costs the recomputation of its
 * value at `next` (plus the recomputation of inputs that are no longer held
 * then), each swapped one the copy time the compute does not hide. Two
 * intervals conflict when recomputing one needs the other's value on the
 * device while it is out; the MILP forbids both at once.
 *
 * @module
 */

import { highs, LpModel } from "./_highs.ts";
import type { TraceAnalysis, ValueInfo } from "./_trace_analysis.ts";
import { memoryProfile } from "./_trace_analysis.ts";

/** A candidate interval. */
export interface Interval {
  readonly v: ValueInfo;
  /** Drop (recompute when needed) or swap. */
  readonly action: "drop" | "swap";
  /** Evict after this call. */
  readonly prev: number;
  /** First call the eviction frees memory at (`prev + 1`; later for a swap-out still copying). */
  readonly from: number;
  /** Next call that reads the value (`calls` when none in the step). */
  readonly next: number;
  /**
   * Bring back before this call (<= `next`): earlier than `next` when a value
   * computed from it is recomputed there (the recomputation needs it back).
   */
  readonly restore: number;
  /** Candidates of one gap between uses share a group (at most one is chosen). */
  readonly group: number;
  /** Cost: recomputation at `restore` (0 when not needed again), or exposed copy time, ns. */
  readonly costNs: number;
}

/** Options of {@link chooseIntervals}. */
export interface IntervalOptions {
  /**
   * Swaps over an asynchronous copy stream of this bandwidth (GB/s = bytes
   * per ns): a swap-out frees its memory once copied, a swap-in is issued
   * early enough for the compute before the use to hide it. Undefined: no swaps.
   */
  swapGbps?: number;
  /**
   * Room left for copies queueing on the one stream: a swap-out counts as
   * freeing memory, and a swap-in is issued, `swapSlack` copy times after the
   * eviction and before the use. Default 3.
   */
  swapSlack?: number;
  /** Largest share of the step's compute time the copy stream may be busy (round trips). Default 0.5. */
  copyShare?: number;
  /** Host memory for swaps, bytes. Default Infinity. */
  hostLimitBytes?: number;
  /**
   * Values smaller than this are no candidates (a model of thousands of
   * tiny values the excess hardly notices solves slower). Default 0.
   */
  minBytes?: number;
  /** Solver time limit, seconds. Default 20. */
  timeLimitS?: number;
  /** Largest model (nonzeros in its rows) to solve; larger ones are skipped (status `Too large`). Default 400000. */
  maxNonzeros?: number;
  /** Relative MIP gap at which HiGHS stops. Default 0.002. */
  mipRelGap?: number;
  /** Solve the LP relaxation only and round up (every fractional interval taken). Default false. */
  relax?: boolean;
}

/** What {@link chooseIntervals} found. */
export interface IntervalChoice {
  readonly chosen: Interval[];
  /** Solver status (`Optimal`, `Time limit reached`, ...; `Empty` when nothing had to go). */
  readonly status: string;
  /** {@link intervalCostNs} of the chosen intervals (estimated extra ns). */
  readonly objectiveNs: number;
  /** Largest excess over the target the chosen intervals leave at a call (estimate), bytes. */
  readonly uncoveredBytes: number;
  /** Candidate intervals and overflowing calls in the model. */
  readonly size: { intervals: number; calls: number };
  /**
   * With `relax`: the LP optimum in ns (tie-breaks and slack included), a
   * lower bound of the MILP's; NaN otherwise.
   */
  readonly relaxedNs: number;
}

/** Recompute cost of `v` at call `at`: its producer plus inputs no longer held then (transitively). */
function recomputeNs(a: TraceAnalysis, v: ValueInfo, at: number): number {
  let sum = 0;
  const seen = new Set<number>();
  const stack = [v];
  while (stack.length > 0) {
    const u = stack.pop()!;
    if (seen.has(u.id) || u.producer < 0) continue;
    seen.add(u.id);
    const call = a.calls[u.producer]!;
    sum += call.timeNs;
    for (const r of call.reads) {
      const p = a.values[r]!;
      if (p.producer >= 0 && p.freeAt <= at && seen.size < 64) stack.push(p);
    }
  }
  return sum;
}

/** The candidate intervals spanning at least one call where `mem` exceeds `target`. */
export function candidateIntervals(
  a: TraceAnalysis,
  mem: readonly number[],
  target: number,
  swapGbps?: number,
  swapSlack = 3,
): Interval[] {
  const n = a.calls.length;
  // start[k] = compute before call k
  const start = new Float64Array(n + 1);
  for (let k = 0; k < n; k++) start[k + 1] = start[k]! + a.calls[k]!.timeNs;
  // over[k] = number of overflowing calls before k
  const over = new Int32Array(n + 1);
  for (let k = 0; k < n; k++) over[k + 1] = over[k]! + (mem[k]! > target ? 1 : 0);
  // children[v]: values whose producer reads v
  const children: ValueInfo[][] = a.values.map(() => []);
  for (const c of a.values) {
    if (c.producer < 0) continue;
    for (const r of a.calls[c.producer]!.reads) children[r]!.push(c);
  }
  const out: Interval[] = [];
  let group = 0;
  for (const v of a.values) {
    if (!v.addressable || v.producer < 0 || v.bytes === 0) continue;
    const end = Number.isFinite(v.freeAt) ? v.freeAt : n;
    const points = [v.producer, ...v.uses.filter((u) => u > v.producer)];
    for (let i = 0; i < points.length; i++) {
      const prev = points[i]!;
      const last = i + 1 === points.length;
      const next = last ? n : points[i + 1]!;
      const to = Math.min(next, end);
      if (to <= prev + 1 || over[to]! - over[prev + 1]! === 0) continue;
      // After the last use: free to drop when the program lets go of it in
      // the step; an output must be back (recomputed) at the end.
      const needed = !last || !Number.isFinite(v.freeAt);
      const g = group++;
      const restores = new Set<number>([next]);
      if (needed) {
        for (const c of children[v.id]!) {
          for (const u of c.uses) if (u > prev + 1 && u < to) restores.add(u);
        }
      }
      for (const r of [...restores].sort((x, y) => x - y)) {
        if (over[Math.min(r, to)]! - over[prev + 1]! === 0) continue;
        const costNs = needed ? recomputeNs(a, v, r) : 0;
        out.push({ v, action: "drop", prev, from: prev + 1, next, restore: r, group: g, costNs });
      }
      if (swapGbps !== undefined && !last) {
        const d = v.bytes / swapGbps;
        const lead = swapSlack * d;
        // memory is free once the swap-out is copied; the swap-in is issued
        // `d` of compute before the use when the gap allows
        let from = prev + 1;
        while (from < to && start[from]! - start[prev + 1]! < lead) from++;
        let r = next;
        while (r > from && start[next]! - start[r]! < lead) r--;
        if (from < r && over[r]! - over[from]! > 0) {
          const costNs = Math.max(0, d - (start[next]! - start[r]!));
          out.push({ v, action: "swap", prev, from, next, restore: r, group: g, costNs });
        }
      }
    }
  }
  return out;
}

/**
 * Estimated extra time of a set of intervals: their costs, plus the producer
 * of each dropped input recomputed again for a chain (a dropped interval's
 * restore falls inside a dropped interval of an input of its producer).
 */
export function intervalCostNs(a: TraceAnalysis, chosen: readonly Interval[]): number {
  const n = a.calls.length;
  let sum = 0;
  for (const iv of chosen) {
    sum += iv.costNs;
    if (iv.action !== "drop" || iv.restore >= n || iv.costNs === 0) continue;
    const reads = a.calls[iv.v.producer]!.reads;
    for (const o of chosen) {
      if (
        o.action === "drop" && reads.includes(o.v.id) && o.prev < iv.restore &&
        iv.restore < o.restore
      ) {
        sum += a.calls[o.v.producer]!.timeNs;
      }
    }
  }
  return sum;
}

/**
 * Chooses intervals so the estimated memory fits `target` at the least
 * estimated extra time (see the module doc). Throws when HiGHS reports an
 * error; an infeasible model (the target cannot be met by evicting stored
 * values) returns the status and no intervals.
 */
export function chooseIntervals(
  a: TraceAnalysis,
  target: number,
  options: IntervalOptions = {},
): IntervalChoice {
  const mem = memoryProfile(a);
  const n = a.calls.length;
  const minBytes = options.minBytes ?? 0;
  const ivs = candidateIntervals(a, mem, target, options.swapGbps, options.swapSlack)
    .filter((iv) => iv.v.bytes >= minBytes);
  const overCalls: number[] = [];
  for (let k = 0; k < n; k++) if (mem[k]! > target) overCalls.push(k);
  const size = { intervals: ivs.length, calls: overCalls.length };
  if (overCalls.length === 0) {
    return { chosen: [], status: "Empty", objectiveNs: 0, uncoveredBytes: 0, size, relaxedNs: NaN };
  }
  // Units that keep the coefficients near 1..1e4 (HiGHS's tolerances are absolute).
  const MB = Math.max(...mem) / 1e4, US = 1e3;
  const m = new LpModel();
  let nonzeros = 0;
  const row = (expr: [number, string][], sense: "<=" | ">=" | "=", rhs: number) => {
    nonzeros += expr.length;
    m.row(expr, sense, rhs);
  };
  const byValue = new Map<number, { iv: Interval; x: string }[]>();
  const groups = new Map<number, [number, string][]>();
  const hostLimited = Number.isFinite(options.hostLimitBytes ?? Infinity);
  // Coverage as running sums: y_k, the bytes the chosen intervals free at
  // call k, is y_{k-1} plus the intervals that start freeing at k less those
  // that stop, so each interval enters two rows rather than one per call it
  // spans (on unroll_gan-512.log, 17,000 nonzeros instead of millions).
  const last = overCalls[overCalls.length - 1]!;
  const delta = new Map<number, [number, string][]>();
  const hostDelta = new Map<number, [number, string][]>();
  const change = (d: Map<number, [number, string][]>, k: number, c: number, x: string) => {
    if (k > last) return; // past the last overflowing call: no row reads it
    let l = d.get(k);
    if (!l) d.set(k, l = []);
    l.push([c, x]);
  };
  ivs.forEach((iv, i) => {
    const x = `x${i}`;
    m.binary(x);
    // Ties go to fewer intervals, then to the latest restore.
    m.objective.push([iv.costNs / US + 1e-3 + (1e-4 * (iv.next - iv.restore)) / n, x]);
    let gl = groups.get(iv.group);
    if (!gl) groups.set(iv.group, gl = []);
    gl.push([1, x]);
    const to = Math.min(iv.restore, Number.isFinite(iv.v.freeAt) ? iv.v.freeAt : n);
    if (to > iv.from) {
      change(delta, iv.from, iv.v.bytes / MB, x);
      change(delta, to, -iv.v.bytes / MB, x);
      if (iv.action === "swap" && hostLimited) {
        change(hostDelta, iv.from, iv.v.bytes / MB, x);
        change(hostDelta, to, -iv.v.bytes / MB, x);
      }
    }
    let l = byValue.get(iv.v.id);
    if (!l) byValue.set(iv.v.id, l = []);
    l.push({ iv, x });
  });
  // y{k} = y{k-1} + sum of changes at k (y before the first change is 0).
  const runningSums = (d: Map<number, [number, string][]>, y: string): Map<number, string> => {
    const at = new Map<number, string>();
    let prev: string | undefined;
    for (const k of [...d.keys()].sort((p, q) => p - q)) {
      const name = `${y}${k}`;
      const terms: [number, string][] = [[1, name]];
      if (prev !== undefined) terms.push([-1, prev]);
      for (const [c, x] of d.get(k)!) terms.push([-c, x]);
      row(terms, "=", 0);
      at.set(k, name);
      prev = name;
    }
    return at;
  };
  /** The running sum in effect at call k (the last change at or before k). */
  const sumAt = (at: Map<number, string>, keys: number[], k: number): string | undefined => {
    let lo = 0, hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (keys[mid]! <= k) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 ? at.get(keys[lo - 1]!) : undefined;
  };
  const freed = runningSums(delta, "y");
  const freedKeys = [...freed.keys()].sort((p, q) => p - q);
  for (const gl of groups.values()) if (gl.length > 1) row(gl, "<=", 1);
  // Where the candidates cannot free enough, a slack at a high price lets the
  // model free what it can (the replay's fallback policy covers the rest).
  let maxPerMB = 1;
  for (const iv of ivs) maxPerMB = Math.max(maxPerMB, iv.costNs / US / (iv.v.bytes / MB));
  overCalls.forEach((k, i) => {
    const sl = `s${i}`;
    m.objective.push([maxPerMB * 100, sl]);
    const y = sumAt(freed, freedKeys, k);
    row(y === undefined ? [[1, sl]] : [[1, y], [1, sl]], ">=", (mem[k]! - target) / MB);
  });
  if (hostLimited) {
    const host = runningSums(hostDelta, "h");
    for (const h of host.values()) row([[1, h]], "<=", options.hostLimitBytes! / MB);
  }
  // The copy stream is one: the round trips must fit in a share of the step's
  // compute, or copies queue behind each other and compute waits.
  if (options.swapGbps !== undefined) {
    const copies: [number, string][] = [];
    ivs.forEach((iv, i) => {
      if (iv.action === "swap") copies.push([(2 * iv.v.bytes / options.swapGbps!) / US, `x${i}`]);
    });
    row(copies, "<=", ((options.copyShare ?? 0.5) * a.computeNs) / US);
  }
  // Recomputing v at its restore needs its producer's inputs on the device
  // then. An input swapped out then conflicts; an input dropped then is
  // recomputed too (a chain): z >= x + x' - 1 charges its producer once more.
  // Its own candidates that come back by then cost nothing extra.
  let zs = 0;
  for (const [, list] of byValue) {
    for (const { iv, x } of list) {
      if (iv.action !== "drop" || iv.restore >= n || iv.costNs === 0) continue;
      const q = iv.restore;
      for (const r of a.calls[iv.v.producer]!.reads) {
        for (const o of byValue.get(r) ?? []) {
          if (!(o.iv.prev < q && q < o.iv.restore)) continue;
          if (o.iv.action === "swap") row([[1, x], [1, o.x]], "<=", 1);
          else {
            const z = `z${zs++}`;
            m.objective.push([a.calls[o.iv.v.producer]!.timeNs / US, z]);
            row([[1, z], [-1, x], [-1, o.x]], ">=", -1);
          }
        }
      }
    }
  }
  const noPlan = (status: string) => ({
    chosen: [],
    status,
    objectiveNs: Infinity,
    uncoveredBytes: Infinity,
    size,
    relaxedNs: NaN,
  });
  const maxNonzeros = options.maxNonzeros ?? 400_000;
  if (nonzeros > maxNonzeros) {
    return noPlan(`Too large (${nonzeros} nonzeros, limit ${maxNonzeros})`);
  }
  const relax = options.relax ?? false;
  const r = highs().solve(
    m.text(relax),
    {
      time_limit: options.timeLimitS ?? 20,
      output_flag: false,
      mip_rel_gap: options.mipRelGap ?? 0.002,
    } as Parameters<ReturnType<typeof highs>["solve"]>[1],
  );
  const status = r.Status as string;
  const cols = r.Columns as Record<string, { Primal?: number }>;
  if (cols === undefined || !(status === "Optimal" || status === "Time limit reached")) {
    return noPlan(status);
  }
  const chosen: Interval[] = [];
  const cut = relax ? 1e-6 : 0.5;
  ivs.forEach((iv, i) => {
    if ((cols[`x${i}`]?.Primal ?? 0) > cut) chosen.push(iv);
  });
  const objectiveNs = intervalCostNs(a, chosen);
  let uncoveredBytes = 0;
  for (const k of overCalls) {
    let used = mem[k]!;
    for (const iv of chosen) {
      const to = Math.min(iv.restore, Number.isFinite(iv.v.freeAt) ? iv.v.freeAt : n);
      if (iv.from <= k && k < to) used -= iv.v.bytes;
    }
    uncoveredBytes = Math.max(uncoveredBytes, used - target);
  }
  const relaxedNs = relax && status === "Optimal" ? Number(r.ObjectiveValue) * US : NaN;
  return { chosen, status, objectiveNs, uncoveredBytes, size, relaxedNs };
}
