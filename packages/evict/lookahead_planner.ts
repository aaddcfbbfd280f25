/**
 * The `lookahead` planner: Belady-style eviction with the whole step known.
 *
 * A training step repeats, so the recorded step tells, at every call, when
 * each tensor is needed next. The plan carries that use schedule
 * ({@link buildSchedule}); at each memory shortfall a {@link LookaheadPolicy}
 * evicts the storages with the least cost of bringing them back at their next
 * need per byte and per nanosecond until then (see `lookahead.ts`).
 *
 * Planning replays a few scoring variants on the meta backend (`ctx.replay`)
 * and keeps the one with the lowest replayed overhead; a plain `dtr-eq` run
 * (the fallback alone) is a candidate too, so the plan is never worse than it
 * in the replay. It also replays static plans of eviction intervals chosen by
 * a MILP (`_drop_intervals.ts`), with the best variant covering what they
 * leave over. Replays that cannot win stop early (see `workLimitNs`).
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import { chooseIntervals, type IntervalChoice } from "./_drop_intervals.ts";
import { analyzeTrace } from "./_trace_analysis.ts";
import { buildSchedule, type LookaheadVariant, LookaheadWorkLimitError } from "./lookahead.ts";
import type { Plan, Planner, PlannerContext, PlanReplayResult, PlanStep } from "./planner.ts";

/** Options of {@link LookaheadPlanner}. */
export interface LookaheadOptions {
  /** Variants to try (default {@link LOOKAHEAD_VARIANTS}). */
  variants?: readonly LookaheadVariant[];
  /** Also try the fallback policy alone and keep it when it replays better. Default true. */
  tryFallback?: boolean;
  /**
   * Targets (fractions of the budget) at which a static plan of eviction
   * intervals is chosen by a MILP and replayed (the best dynamic variant
   * covers what it leaves over). Default [1, 0.97, 0.93]; [] skips it.
   */
  intervalTargets?: readonly number[];
  /**
   * MILP time limit per interval plan, seconds. Default 10. (Named apart from
   * `checkmate`'s `timeLimitS`, which `createPlanner` passes to every planner.)
   */
  intervalTimeLimitS?: number;
  /**
   * Bandwidth of the replay's asynchronous copy stream, GB/s (where it has
   * host memory): interval plans may swap, a swap-in prefetched so the compute
   * hides it, and shortfall choices price swaps by copy time. Each variant is
   * also tried without swaps. Undefined: interval plans only drop.
   */
  swapGbps?: number;
}

/** The variants tried by default. */
export const LOOKAHEAD_VARIANTS: readonly LookaheadVariant[] = [
  { cost: "ancestors", need: "children", dist: "short", power: 1 },
  { cost: "ancestors", need: "children", dist: "short", power: 0.75 },
  { cost: "ancestors", need: "children", dist: "short", power: 0.5 },
  { cost: "ancestors", need: "children", dist: "short", power: 0.25 },
  { cost: "ancestors", need: "children", dist: "time", power: 1 },
  { cost: "ancestors", need: "children", dist: "time", power: 0.25 },
  { cost: "ancestors", need: "direct", dist: "short", power: 0.5 },
  { cost: "eq", need: "children", dist: "short", power: 0.5 },
  { cost: "eq", need: "direct", dist: "short", power: 0.5 },
  { cost: "eq", need: "children", dist: "time", power: 0.5 },
  { cost: "local", need: "children", dist: "short", power: 1 },
];

/** One candidate the planner replayed. */
export interface LookaheadTrial {
  /** `"fallback"` or the variant as `cost/need/power`. */
  readonly variant: string;
  /** Whether its replay fit the budget. */
  readonly feasible: boolean;
  /** Overhead of its replay. */
  readonly overhead: number;
  /** Planning (solver) plus replay time of this candidate, ms. */
  readonly ms: number;
  /** Why it was not replayed (`overhead` is NaN then). */
  readonly note?: string;
}

/** What {@link LookaheadPlanner} reports. */
export interface LookaheadPlanStats {
  /** The variant kept (`"fallback"`: the fallback policy alone replayed best). */
  readonly chosen: string;
  /** Every candidate with its replay. */
  readonly trials: readonly LookaheadTrial[];
  /** Replayed overhead of the kept plan. */
  readonly replayOverhead: number;
  /** Feasibility of that replay. */
  readonly replayFeasible: boolean;
  /** Of the replayed overhead, recomputation over compute (NaN where the replay does not say). */
  readonly recomputeOverhead: number;
  /** Of the replayed overhead, exposed copy time (compute waiting on swaps) over compute. */
  readonly copyOverhead: number;
  /** Why interval plans were not tried (a model too large for the solver). */
  readonly skipped: readonly string[];
}

/** A plan made by {@link LookaheadPlanner}. */
export interface LookaheadPlan extends Plan {
  /** What the planner tried and kept. */
  readonly stats: LookaheadPlanStats;
}

/** Name of a variant in statistics. */
export function variantName(v: LookaheadVariant): string {
  const swap = v.swap === false ? "/noswap" : v.swapGbps !== undefined ? "/swap" : "";
  return `${v.cost ?? "ancestors"}/${v.need ?? "children"}/${v.dist ?? "short"}/${
    v.power ?? 1
  }${swap}`;
}

/**
 * The `lookahead` planner. See the module doc.
 *
 * @example
 * ```ts
 * import { LookaheadPlanner } from "@libra/evict";
 * if (new LookaheadPlanner().name !== "lookahead") throw new Error("name");
 * ```
 */
export class LookaheadPlanner implements Planner {
  /** Always `"lookahead"`. */
  readonly name: string = "lookahead";
  readonly #variants: readonly LookaheadVariant[];
  readonly #tryFallback: boolean;
  readonly #targets: readonly number[];
  readonly #timeLimitS: number;
  readonly #gbps: number | undefined;

  /** A lookahead planner with `options` (variants, interval targets, time limit). */
  constructor(options: LookaheadOptions = {}) {
    this.#gbps = options.swapGbps;
    this.#targets = options.intervalTargets ?? [1, 0.97, 0.93];
    this.#timeLimitS = options.intervalTimeLimitS ?? 10;
    this.#variants = options.variants ?? LOOKAHEAD_VARIANTS;
    this.#tryFallback = options.tryFallback ?? true;
    if (this.#variants.length === 0 && !this.#tryFallback) {
      throw new RangeError("lookahead: no variants to try and tryFallback is false");
    }
  }

  /** Replays each variant (and the fallback alone) with `ctx.replay` and keeps the lowest overhead. */
  plan(trace: Trace, budgetBytes: number, ctx: PlannerContext): LookaheadPlan {
    if (!(budgetBytes > 0)) {
      throw new RangeError(`lookahead: budget must be > 0 bytes, got ${budgetBytes}`);
    }
    const schedule = buildSchedule(trace);
    const trials: LookaheadTrial[] = [];
    const skipped: string[] = [];
    let best:
      | { plan: Plan; name: string; feasible: boolean; overhead: number; r: PlanReplayResult }
      | undefined;
    let t0 = performance.now();
    // A candidate whose drops would cost more than the step's compute to undo
    // is past the thrash limit of the final replay (overhead 2), and one whose
    // drops cost four times the best replay's extra time will not beat it:
    // its replay stops there (a plan that thrashes can replay for minutes).
    const computeNs = schedule.startNs[schedule.calls]!;
    const consider = (plan: Plan, name: string) => {
      const kept = best as { feasible: boolean; overhead: number } | undefined;
      const workLimitNs = Math.min(
        computeNs,
        kept?.feasible ? 4 * (kept.overhead - 1) * computeNs + 1e-3 * computeNs : Infinity,
      );
      const limited = plan.lookahead === undefined ? plan : {
        ...plan,
        lookahead: { ...plan.lookahead, variant: { ...plan.lookahead.variant, workLimitNs } },
      };
      let r: PlanReplayResult;
      let note: string | undefined;
      try {
        r = ctx.replay(limited, budgetBytes);
      } catch (e) {
        if (!(e instanceof LookaheadWorkLimitError)) throw e;
        r = { feasible: false, peakBytes: NaN, overhead: Infinity };
        note = `stopped: its drops passed ${Math.round(workLimitNs)} ns of recomputation`;
      }
      const t1 = performance.now();
      trials.push({
        variant: name,
        feasible: r.feasible,
        overhead: r.overhead,
        ms: t1 - t0,
        ...(note !== undefined ? { note } : {}),
      });
      t0 = t1;
      if (beats(r, best)) best = { plan, name, feasible: r.feasible, overhead: r.overhead, r };
    };
    const gbps = this.#gbps;
    const variants = gbps === undefined
      ? this.#variants
      : this.#variants.flatMap((v) => [{ ...v, swapGbps: gbps }, { ...v, swap: false }]);
    const a = analyzeTrace(trace);
    let peakBytes = 0;
    for (const b of schedule.memBytes) peakBytes = Math.max(peakBytes, b);
    const tried = new Set<string>();
    /** Replays the plan of `choice`, unless its estimate is no better than the best replay. */
    const tryChoice = (choice: IntervalChoice, name: string, variant: LookaheadVariant) => {
      if (choice.chosen.length === 0 || tried.has(name)) return;
      tried.add(name);
      const steps: PlanStep[] = [];
      // Two chosen intervals of one value from one use (restored at different calls) evict it once.
      const evicts = new Set<string>();
      for (const iv of choice.chosen) {
        const key = `${iv.prev}:${iv.v.name}`;
        if (!evicts.has(key)) {
          evicts.add(key);
          steps.push({ kind: "evict", call: iv.prev, tensor: iv.v.name, action: iv.action });
        }
        if (iv.restore < iv.next || (iv.action === "swap" && iv.next < a.calls.length)) {
          steps.push({ kind: "restore", call: iv.restore, tensor: iv.v.name });
        }
      }
      steps.sort((x, y) => x.call - y.call);
      // The solver's estimate of a plan's extra time is near its replay
      // where it covers the excess (it misses chains the fallback adds, and
      // prices swaps' copies as if the compute hid less of them); a plan
      // estimated at twice the best replay's extra time or more is not
      // replayed (a poor incumbent at the time limit can thrash for minutes).
      const kept = best as { feasible: boolean; overhead: number } | undefined;
      const bestExtraNs = kept?.feasible ? (kept.overhead - 1) * a.computeNs : Infinity;
      if (choice.objectiveNs >= 2 * bestExtraNs) {
        trials.push({
          variant: name,
          feasible: false,
          overhead: NaN,
          ms: performance.now() - t0,
          note: `not replayed: estimated ${Math.round(choice.objectiveNs)} ns extra, best ${
            Math.round(bestExtraNs)
          } ns`,
        });
        t0 = performance.now();
        return;
      }
      consider(
        { planner: this.name, budgetBytes, steps, lookahead: { schedule, variant } },
        name,
      );
    };
    /** The interval plan's LP rounding at `f` of the budget with `variant` covering the rest. */
    const relaxed = (f: number, variant: LookaheadVariant, share?: number) => {
      const options = {
        timeLimitS: this.#timeLimitS,
        // values under 1/10,000 of the largest excess hardly move the cover
        minBytes: 1e-4 * (peakBytes - f * budgetBytes),
        ...(share !== undefined ? { swapGbps: gbps!, copyShare: share } : {}),
      };
      const name = `intervals${share !== undefined ? `+swap(${share})` : ""}@${f}+${
        variantName(variant)
      }`;
      return {
        options,
        name,
        lp: chooseIntervals(a, f * budgetBytes, { ...options, relax: true }),
      };
    };
    let dynamic: { variant: LookaheadVariant; feasible: boolean; overhead: number } | undefined;
    for (const v of variants) {
      consider({
        planner: this.name,
        budgetBytes,
        steps: [],
        lookahead: { schedule, variant: v },
      }, variantName(v));
      const t = trials[trials.length - 1]!;
      if (beats(t, dynamic)) dynamic = { variant: v, feasible: t.feasible, overhead: t.overhead };
      if (v === variants[0] && this.#targets.length > 0) {
        // One interval plan early (an LP, seconds): a feasible replay bounds
        // the work of the variants after it, which at low budgets thrash.
        const { name, lp } = relaxed(this.#targets[0]!, v, gbps === undefined ? undefined : 0.8);
        if (!lp.status.startsWith("Too large")) tryChoice(lp, `${name}/lp`, v);
      }
    }
    if (this.#targets.length > 0) {
      const variant = dynamic?.variant ?? {};
      // Drop-only plans at each target; with host memory also plans that swap,
      // at a few shares of the copy stream (a busy stream makes compute wait).
      const runs: { f: number; share?: number }[] =
        (gbps === undefined ? this.#targets : this.#targets.slice(0, 1)).map((f) => ({ f }));
      if (gbps !== undefined && this.#targets.length > 0) {
        for (const share of [0.8, 0.5, 0.3]) runs.push({ f: 1, share });
      }
      // Share of the step's compute the copies of the last optimal swap plan keep the stream busy.
      let usedShare = Infinity;
      for (const { f, share } of runs) {
        // Shares are tried loosest first; a tighter one that still admits the
        // last optimal plan's copies has the same optimum.
        if (share !== undefined && share >= usedShare) continue;
        // The LP relaxation first (seconds where the MILP may spend its whole
        // limit on a poor incumbent), every fractional interval taken.
        const { options, name, lp } = relaxed(f, variant, share);
        if (lp.status.startsWith("Too large")) {
          skipped.push(lp.status);
          break;
        }
        tryChoice(lp, `${name}/lp`, variant);
        // A rounding within 1% of the relaxation's optimum (a lower bound of
        // the MILP's) leaves the MILP nothing to win.
        const near = lp.status === "Optimal" && lp.objectiveNs <= 1.01 * lp.relaxedNs;
        const choice = near ? lp : chooseIntervals(a, f * budgetBytes, options);
        if (share !== undefined && choice.status === "Optimal") {
          let copyNs = 0;
          for (const iv of choice.chosen) {
            if (iv.action === "swap") copyNs += 2 * iv.v.bytes / gbps!;
          }
          usedShare = copyNs / a.computeNs;
        }
        if (near) continue;
        if (choice.chosen.length === 0 && choice.status === "Time limit reached") {
          skipped.push(
            `no interval plan within ${this.#timeLimitS} s (${choice.size.intervals} intervals, ${choice.size.calls} calls over the target)`,
          );
          continue;
        }
        tryChoice(choice, name, variant);
      }
    }
    if (this.#tryFallback) consider({ planner: this.name, budgetBytes, steps: [] }, "fallback");
    const b = best!;
    return {
      ...b.plan,
      stats: {
        chosen: b.name,
        trials,
        replayOverhead: b.overhead,
        replayFeasible: b.feasible,
        recomputeOverhead: b.r.computeNs ? (b.r.recomputeNs ?? 0) / b.r.computeNs : NaN,
        copyOverhead: b.r.computeNs ? (b.r.stallNs ?? 0) / b.r.computeNs : NaN,
        skipped,
      },
    };
  }
}

/** A replay `r` beats `kept` (none yet, or feasible where it is not, or lower overhead). */
function beats(
  r: { readonly feasible: boolean; readonly overhead: number },
  kept: { readonly feasible: boolean; readonly overhead: number } | undefined,
): boolean {
  return kept === undefined || (r.feasible && (!kept.feasible || r.overhead < kept.overhead));
}
