/**
 * Planners against the published heuristics on imported traces: one table per
 * trace and memory mode (device memory only; host memory as a second tier),
 * policy and planner rows, budget-ratio columns, and a goal row comparing the
 * best planner's extra compute (overhead - 1) with the best heuristic's. In
 * device mode, `checkmate` also gives the optimum of its problem per ratio
 * (exact where its MILP proves it, else a lower bound: MIP dual bound or LP
 * optimum) and the gap of the best planner to it; the per-call lower bound of
 * any schedule (`recomputeLowerBound`) stays as a row, since dynamic policies
 * may free values mid-stage, which checkmate's plans do not (unless it runs
 * with in-stage frees, `checkmateFrees`).
 * `deno task bench --traces ...` prints these tables and plots them.
 *
 * @module
 */

import {
  type CheckmatePlan,
  createPlanner,
  createPolicy,
  type Plan,
  planHostLimit,
  planPolicy,
  recomputeLowerBound,
} from "@libra/evict";
import type { Trace } from "@libra/lineage/trace";
import {
  DEFAULT_LINK,
  linkBandwidth,
  plannerContext,
  PUBLISHED_LEAF_RELEASE,
  replayTrace,
} from "@libra/runtime";
import type { PolicySummaryJson } from "./schema.ts";

/** Memory modes: device memory only, or host memory as a second tier. */
export type MemoryMode = "device" | "host";

/** Default ratio columns. */
export const COMPARE_RATIOS: readonly number[] = [0.5, 0.4, 0.3, 0.2, 0.15, 0.1];

/** The published heuristics (rows the goal compares against). */
export const HEURISTICS: readonly string[] = ["dtr-eq", "dtr-local", "msps", "lru"];

/** The planners compared (`checkmate` in device mode only: its plans and bound are device-only). */
export const COMPARED_PLANNERS: readonly string[] = [
  "lookahead",
  "libra",
  "chen-sqrt",
  "checkmate",
];

/** The optimum at one ratio, from `checkmate` (device memory only). */
export interface OptimalCell {
  readonly ratio: number;
  /** Overhead the optimum is at least: the MIP dual bound or the LP optimum; null when unsolved. */
  readonly bound: number | null;
  /** True when the MILP proved `bound` optimal (the optimum is `bound`). */
  readonly exact: boolean;
  /** HiGHS's status, or the error where no plan fits (`no plan fits ...`). */
  readonly status: string;
  /** Solver time, ms. */
  readonly solveMs: number;
}

/** One cell: a replay at one ratio. */
export interface CompareCell {
  readonly ratio: number;
  readonly feasible: boolean;
  readonly overhead: number | null;
  /** Why it is infeasible (`out of memory`, `thrashing`, ...), when it is. */
  readonly reason?: string;
  /** A planner's message where it found no plan (shown under the table). */
  readonly detail?: string;
  /** Of the overhead: recomputation over compute, and exposed copy time over compute. */
  readonly recompute?: number;
  readonly copy?: number;
}

/** One row. */
export interface CompareRow {
  /** Policy or planner name as run (`dtr-eq+swap` in host mode). */
  readonly name: string;
  readonly kind: "heuristic" | "planner";
  readonly cells: readonly CompareCell[];
}

/** One table. */
export interface CompareTable {
  readonly trace: string;
  readonly mode: MemoryMode;
  readonly ratios: readonly number[];
  readonly peakBytes: number;
  readonly rows: readonly CompareRow[];
  /**
   * Device memory only: a lower bound of the optimal overhead per ratio
   * (`recomputeLowerBound`, one call at a time), null in host mode.
   */
  readonly bound: readonly number[] | null;
  /**
   * Device memory only, where `checkmate` ran: the optimum of its problem
   * (plans that recompute whole calls before a call and evict after it, or
   * with {@link optimalFrees} also inside the stage) per ratio, or a lower
   * bound of it; null in host mode.
   */
  readonly optimal?: readonly OptimalCell[] | null;
  /** The optimum is over plans that also free values inside a stage (`checkmate` with `frees`). */
  readonly optimalFrees?: boolean;
}

/** Options of {@link compareTrace}. */
export interface CompareOptions {
  readonly ratios?: readonly number[];
  readonly heuristics?: readonly string[];
  readonly planners?: readonly string[];
  /** Link of host memory (name or GB/s). Default: the runtime's default (`pcie5`). */
  readonly link?: string | number;
  /** Called after each row. */
  readonly onRow?: (row: CompareRow) => void;
  /** HiGHS time limit of `checkmate` per ratio, seconds. Default 120 (600 with `checkmateFrees`). */
  readonly optimalTimeLimitS?: number;
  /**
   * `checkmate` frees values inside a stage (its `frees` option): the optimum
   * is over that wider form of plans, and is the LP relaxation's bound on
   * large traces. Default false.
   */
  readonly checkmateFrees?: boolean;
}

/** Why a plan failed: the budget error's reason, else `failed: <message>` (a planner error is no OOM). */
function reasonOf(e: unknown): string {
  const r = (e as { reason?: unknown } | undefined)?.reason;
  if (typeof r === "string") return r;
  return `failed: ${e instanceof Error ? e.message : String(e)}`;
}

/**
 * Replays `trace` under every heuristic and planner at every ratio, in one
 * memory mode. In host mode the heuristics run as their `+swap` variants and
 * every run gets unlimited host memory over an asynchronous copy stream at
 * `options.link` (default `pcie5`, 55 GB/s); planners fall back to `dtr-eq` (or
 * `dtr-eq+swap`) for what their plan leaves over the budget. Every replay
 * follows the published simulator's semantics, as `libra simulate` does: the
 * budget-free baseline (whose peak the ratios scale) frees every storage no
 * handle refers to, and budgeted replays keep constants pinned, so the
 * heuristic rows are the published figures and the planners play by the same rules.
 */
export function compareTrace(
  label: string,
  trace: Trace,
  mode: MemoryMode,
  options: CompareOptions = {},
): CompareTable {
  const ratios = options.ratios ?? COMPARE_RATIOS;
  const host = mode === "host" ? Infinity : 0;
  const swap = mode === "host" ? "+swap" : "";
  // Host memory is reached over the default link by an asynchronous copy stream.
  const link = mode === "host" ? { link: options.link ?? DEFAULT_LINK } : {};
  const base = replayTrace(trace, {
    hostLimitBytes: host,
    timeline: mode === "device",
    leafRelease: PUBLISHED_LEAF_RELEASE.baseline,
    ...link,
  });
  const peak = base.stats.peakBytes;
  const bound = mode === "device"
    ? ratios.map((ratio) =>
      recomputeLowerBound(trace, Math.floor(ratio * peak), base.timeline.bytes).overhead
    )
    : null;
  const rows: CompareRow[] = [];
  const cell = (ratio: number, r: ReturnType<typeof replayTrace>): CompareCell =>
    r.feasible
      ? {
        ratio,
        feasible: true,
        overhead: r.overhead,
        recompute: r.stats.recomputeNs / r.stats.computeNs,
        copy: r.stats.swapStallNs / r.stats.computeNs,
      }
      : { ratio, feasible: false, overhead: null, reason: r.reason ?? reasonOf(r.error) };
  for (const h of options.heuristics ?? HEURISTICS) {
    const name = `${h}${swap}`;
    const cells = ratios.map((ratio) =>
      cell(
        ratio,
        replayTrace(trace, {
          policy: name,
          budgetBytes: Math.floor(ratio * peak),
          hostLimitBytes: host,
          knownFeasibleBytes: peak,
          leafRelease: PUBLISHED_LEAF_RELEASE.budgeted,
          ...link,
        }),
      )
    );
    const row: CompareRow = { name, kind: "heuristic", cells };
    rows.push(row);
    options.onRow?.(row);
  }
  const fallback = `dtr-eq${swap}`;
  const ctx = plannerContext(trace, {
    hostLimitBytes: host,
    fallback,
    leafRelease: PUBLISHED_LEAF_RELEASE.budgeted,
    ...link,
  });
  const planners = (options.planners ?? COMPARED_PLANNERS).filter((p) =>
    mode === "device" || p !== "checkmate"
  );
  let optimal: OptimalCell[] | null = null;
  for (const p of planners) {
    const planner = createPlanner(
      p,
      mode === "host" ? { swap: true, swapGbps: linkBandwidth(options.link ?? DEFAULT_LINK) } : {
        swap: false,
        timeLimitS: options.optimalTimeLimitS ?? (options.checkmateFrees === true ? 600 : 120),
        frees: options.checkmateFrees ?? false,
      },
    );
    if (p === "checkmate") optimal = [];
    const cells = ratios.map((ratio) => {
      const budgetBytes = Math.floor(ratio * peak);
      const t0 = performance.now();
      try {
        const plan: Plan = planner.plan(trace, budgetBytes, ctx);
        if (p === "checkmate") {
          const st = (plan as CheckmatePlan).stats;
          optimal!.push({
            ratio,
            bound: st.boundOverhead,
            exact: st.optimal,
            status: st.status,
            solveMs: st.solveMs,
          });
        }
        return cell(
          ratio,
          replayTrace(trace, {
            policy: planPolicy(plan, createPolicy(fallback)),
            budgetBytes,
            hostLimitBytes: planHostLimit(plan, host),
            knownFeasibleBytes: peak,
            leafRelease: PUBLISHED_LEAF_RELEASE.budgeted,
            ...link,
          }),
        );
      } catch (e) {
        if (p === "checkmate") {
          optimal!.push({
            ratio,
            bound: null,
            exact: false,
            status: e instanceof Error ? e.message : String(e),
            solveMs: performance.now() - t0,
          });
        }
        const reason = reasonOf(e);
        return reason.startsWith("failed")
          ? { ratio, feasible: false, overhead: null, reason }
          : { ratio, feasible: false, overhead: null, reason, detail: (e as Error).message };
      }
    });
    const row: CompareRow = { name: p, kind: "planner", cells };
    rows.push(row);
    options.onRow?.(row);
  }
  return {
    trace: label,
    mode,
    ratios,
    peakBytes: peak,
    rows,
    bound,
    optimal,
    ...(optimal !== null && options.checkmateFrees === true ? { optimalFrees: true } : {}),
  };
}

/**
 * The best planner's overhead less the optimum at column `i` (an upper bound
 * of the gap where the optimum is only bounded); null where either is missing.
 */
export function gapAt(t: CompareTable, i: number): number | null {
  const o = t.optimal?.[i]?.bound ?? null;
  const p = bestAt(t, "planner", i);
  return o === null || p === null ? null : p - o;
}

/** Best feasible overhead among rows of `kind` at column `i` (null: none feasible). */
export function bestAt(t: CompareTable, kind: CompareRow["kind"], i: number): number | null {
  let best: number | null = null;
  for (const r of t.rows) {
    const c = r.cells[i]!;
    if (r.kind === kind && c.feasible && (best === null || c.overhead! < best)) best = c.overhead;
  }
  return best;
}

/**
 * The goal at column `i`: best planner's extra compute over the best
 * heuristic's (`ratio`), or `"planner only"` where no heuristic is feasible
 * and a planner is, or null where no planner is feasible.
 */
export function goalAt(t: CompareTable, i: number): number | "planner only" | null {
  const p = bestAt(t, "planner", i);
  const h = bestAt(t, "heuristic", i);
  if (p === null) return null;
  if (h === null) return "planner only";
  return h > 1 ? (p - 1) / (h - 1) : p > 1 ? Infinity : 1;
}

/** Smallest ratio with a feasible cell among rows of `kind` (null: none). */
export function smallestFeasible(t: CompareTable, kind: CompareRow["kind"]): number | null {
  let best: number | null = null;
  for (const r of t.rows) {
    if (r.kind !== kind) continue;
    for (const c of r.cells) if (c.feasible && (best === null || c.ratio < best)) best = c.ratio;
  }
  return best;
}

/** The table as text (fixed-width columns), with the goal row and a feasibility line. */
export function renderCompare(t: CompareTable): string {
  const head = ["policy / planner", ...t.ratios.map((r) => r.toFixed(2))];
  const body: string[][] = t.rows.map((r) => [
    r.name,
    ...r.cells.map((c) =>
      c.feasible
        ? c.overhead!.toFixed(3)
        : c.reason === "thrashing"
        ? "thrash"
        : c.reason === "too large"
        ? "skip"
        : c.reason?.startsWith("failed") === true
        ? "error"
        : "OOM"
    ),
  ]);
  if (t.bound !== null) {
    body.push(["any schedule >= (per call)", ...t.bound.map((b) => b.toFixed(3))]);
  }
  if (t.optimal) {
    body.push([
      t.optimalFrees === true ? "optimal (checkmate, in-stage frees)" : "optimal (checkmate)",
      ...t.optimal.map((o) =>
        o.bound === null ? "-" : `${o.exact ? "=" : ">="}${o.bound.toFixed(3)}`
      ),
    ]);
    body.push([
      "gap: best planner - optimal",
      ...t.ratios.map((_, i) => {
        const g = gapAt(t, i);
        return g === null ? "-" : `${t.optimal![i]!.exact ? "" : "<="}${g.toFixed(3)}`;
      }),
    ]);
  }
  for (const r of t.rows) {
    if (r.kind !== "planner" || !r.cells.some((c) => (c.copy ?? 0) > 0)) continue;
    body.push([
      `  ${r.name}: exposed copy part`,
      ...r.cells.map((c) => (c.feasible && c.copy !== undefined ? c.copy.toFixed(3) : "-")),
    ]);
  }
  body.push([
    "goal: planner/heuristic extra",
    ...t.ratios.map((_, i) => {
      const g = goalAt(t, i);
      return g === null ? "-" : g === "planner only" ? "planner" : g.toFixed(2);
    }),
  ]);
  const widths = head.map((h, j) => Math.max(h.length, ...body.map((row) => row[j]!.length)));
  const line = (row: string[]) =>
    row.map((s, j) => (j === 0 ? s.padEnd(widths[j]!) : s.padStart(widths[j]!))).join("  ");
  const sp = smallestFeasible(t, "planner"), sh = smallestFeasible(t, "heuristic");
  const errors = t.rows.flatMap((r) =>
    r.cells.flatMap((c) =>
      c.reason?.startsWith("failed") === true
        ? [`error: ${r.name} at ${c.ratio}: ${c.reason.slice("failed: ".length)}`]
        : c.detail !== undefined
        ? [`note: ${r.name} at ${c.ratio}: ${c.detail}`]
        : []
    )
  );
  return [
    `${t.trace}, ${
      t.mode === "device" ? "device memory only" : "host memory as a second tier"
    } (overhead by budget ratio; peak ${(t.peakBytes / 2 ** 30).toFixed(2)} GiB):`,
    line(head),
    widths.map((w) => "-".repeat(w)).join("  "),
    ...body.map(line),
    `smallest feasible ratio: planners ${sp ?? "none"}, heuristics ${sh ?? "none"}`,
    ...errors,
  ].join("\n");
}

/**
 * The table as policy summaries (for `overheadPlot`); the optimum, where
 * `checkmate` ran, as `optimal` (its bound where not proven), else the per-call
 * bound, where there is one, as `optimal >=`.
 */
export function compareSummaries(t: CompareTable): PolicySummaryJson[] {
  const workload = `${t.trace} (${t.mode})`;
  const rows: CompareRow[] = [...t.rows];
  if (t.optimal) {
    rows.push({
      name: "optimal",
      kind: "heuristic",
      cells: t.optimal.map((o) =>
        o.bound === null
          ? { ratio: o.ratio, feasible: false, overhead: null }
          : { ratio: o.ratio, feasible: true, overhead: o.bound }
      ),
    });
  } else if (t.bound !== null) {
    rows.push({
      name: "optimal >=",
      kind: "heuristic",
      cells: t.bound.map((b, i) => ({ ratio: t.ratios[i]!, feasible: true, overhead: b })),
    });
  }
  return rows.map((r) => {
    const feasible = r.cells.filter((c) => c.feasible).map((c) => c.ratio);
    return {
      workload,
      policy: r.name,
      smallestFeasibleRatio: feasible.length > 0 ? Math.min(...feasible) : null,
      nonMonotone: false,
      curve: r.cells.map((c) => ({ ratio: c.ratio, feasible: c.feasible, overhead: c.overhead })),
    };
  });
}
