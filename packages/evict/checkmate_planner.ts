/**
 * The `checkmate` planner: optimal rematerialization on the recorded order of
 * calls (Checkmate, Jain et al., MLSys 2020), solved with HiGHS.
 *
 * The problem (`_checkmate_model.ts`): at every stage (a call, and the end of
 * the step) which values are retained (`S`) and which earlier calls are
 * recomputed first (`R`), so each call's inputs are on the device, the memory
 * of every stage fits the budget, and the compute of the recomputations is
 * least. In two forms: the stage form (default) frees nothing inside a stage
 * (what a stage recomputes stays until its call has run); with `frees`
 * (Checkmate's own form, `_checkmate_milp.ts`), a value a stage brought back
 * or kept for its recomputations goes right after its last use there. Two
 * ways to solve either:
 *
 * - `milp`: the exact MILP over binary `R` and `S`. Optimal where HiGHS proves
 *   it; where the time limit stops it first, the plan is the best solution
 *   found and the statistics give the MIP dual bound (no plan does better).
 * - `lp`: the LP relaxation, then Checkmate's two-phase rounding: `S` rounded
 *   by thresholds and at random, `R` then follows from `S` by the dependency
 *   closure, and the cheapest rounding whose memory fits is kept. The LP
 *   optimum is a lower bound of the optimum (`boundOverhead`). Where no
 *   rounding fits, the relaxation is solved again at a lower budget (while the
 *   time limit lasts); where none fits then, the plan is empty (the fallback
 *   policy alone) and the statistics keep the bound. With `frees`, the stage
 *   form's MILP (a plan of that form fits with frees too) is solved first and
 *   its plan is one of the candidates (`stageSeed`), and then the MILP around
 *   the best candidate (`neighbourhood`: its decisions fixed where the
 *   relaxation agrees with it, RINS) while the time limit lasts. The best
 *   candidate is improved greedily in either case.
 *
 * `auto` (default) solves the MILP when the model has at most `maxExactVars`
 * decisions, else the relaxation. The plan restores the recomputed values
 * before each call (with `frees`, evicting between the restores what the
 * stage no longer needs) and evicts what is not retained after it; its replay
 * with `ctx.replay` is in the statistics.
 *
 * The bound is over plans of the form solved (whole calls recomputed before a
 * call, in call order, each at most once per stage; device memory only). In
 * the stage form a dynamic policy may free a value in the middle of a stage,
 * which the form does not.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import { mulberry32 } from "@libra/util/rng";
import { type LpModel, solveModel } from "./_highs.ts";
import { checkmateModel, US } from "./_checkmate_milp.ts";
import {
  buildProblem,
  type CheckmateProblem,
  evaluate,
  type Evaluation,
  type Retention,
} from "./_checkmate_model.ts";
import type { Plan, Planner, PlannerContext, PlanStep } from "./planner.ts";

/** Options of {@link CheckmatePlanner}. */
export interface CheckmateOptions {
  /** `milp` (exact), `lp` (relaxation and rounding) or `auto` (default: by size). */
  solver?: "milp" | "lp" | "auto";
  /** HiGHS time limit per solve, seconds. Default 120. */
  timeLimitS?: number;
  /**
   * Most decisions (`R` and `S` variables) for which `auto` solves the MILP.
   * Default 100000, with {@link frees} 5000 (its model has several times the
   * rows and columns).
   */
  maxExactVars?: number;
  /** Random roundings tried besides the thresholds. Default 64. */
  roundings?: number;
  /** Seed of the random roundings. Default 1. */
  seed?: number;
  /**
   * Largest model (`R` and `S` decisions) to solve at all; larger ones are a
   * RangeError with `reason: "too large"`. Default 1,000,000.
   */
  maxVars?: number;
  /** Time for the greedy improvement of the rounded plan, ms. Default 30000. */
  improveMs?: number;
  /**
   * Free values inside a stage (Checkmate's `FREE`): a value a stage brought
   * back or kept for its recomputations goes right after its last use there,
   * by evictions before the call. Default false: nothing is freed inside a
   * stage (a smaller model).
   */
  frees?: boolean;
  /**
   * HiGHS's method for the LP relaxation: `simplex` or `ipm` (interior point,
   * with crossover). Default `ipm` with {@link frees} (its relaxation has
   * several times the rows, where the simplex method is slow), else `simplex`.
   */
  lpMethod?: "simplex" | "ipm";
  /**
   * With {@link frees} and the `lp` solver: solve the stage form's MILP first
   * (within the time limit) and keep its plan among the roundings, as the
   * start of the greedy improvement where it is the best. Default true.
   */
  stageSeed?: boolean;
  /**
   * With {@link frees} and the `lp` solver: solve the MILP around the best
   * rounding (its decisions fixed where the relaxation agrees, the rest
   * exactly) while the time limit lasts. Default true.
   */
  neighbourhood?: boolean;
}

/** What {@link CheckmatePlanner} reports. */
export interface CheckmateStats {
  /** How the plan was found. */
  readonly solver: "milp" | "lp";
  /** Whether the model frees values inside a stage ({@link CheckmateOptions.frees}). */
  readonly frees: boolean;
  /** HiGHS's status of the solve the plan comes from (`Optimal`, `Time limit reached`, ...). */
  readonly status: string;
  /** True when the MILP proved the plan optimal. */
  readonly optimal: boolean;
  /** True when a solve stopped at the time limit. */
  readonly timeLimitReached: boolean;
  /** Recomputation of the plan in the model, ns (NaN where no rounding fits and the plan is empty). */
  readonly recomputeNs: number;
  /** (compute + that recomputation) / compute. */
  readonly overhead: number;
  /** Lower bound of the least recomputation: MIP dual bound or LP optimum, ns. */
  readonly boundNs: number;
  /** (compute + bound) / compute: the optimum is at least this. */
  readonly boundOverhead: number;
  /**
   * Which rounding gave the plan (`exact` for the MILP's own solution;
   * `none fits: fallback alone` where no rounding fits and the plan is empty).
   */
  readonly rounding: string;
  /** Decisions in the model (`R` and `S` variables) and memory rows. */
  readonly size: { readonly r: number; readonly s: number; readonly stages: number };
  /** Solver time, ms. */
  readonly solveMs: number;
  /** Overhead of the plan replayed with `ctx.replay` at the budget. */
  readonly replayOverhead: number;
  /** Feasibility of that replay. */
  readonly replayFeasible: boolean;
  /** Largest memory of the plan in the model, bytes (NaN where the plan is empty). */
  readonly peakBytes: number;
}

/** A plan made by {@link CheckmatePlanner}. */
export interface CheckmatePlan extends Plan {
  /** How it was found, its bound and its replay. */
  readonly stats: CheckmateStats;
}

/** The stages between two uses of a value (or its last use and the end) where retaining it is a decision. */
interface Gap {
  readonly v: number;
  readonly stages: readonly number[];
  /** Mean of the relaxation's `S` over them. */
  readonly mean: number;
}

function gaps(p: CheckmateProblem, lp: (name: string) => number): Gap[] {
  const out: Gap[] = [];
  for (const v of p.values) {
    const points = [v.producer, ...v.uses.filter((u) => u > v.producer)];
    if (v.output) points.push(p.n);
    for (let j = 1; j < points.length; j++) {
      const stages: number[] = [];
      let sum = 0;
      for (let t = points[j - 1]! + 1; t <= points[j]!; t++) {
        if (p.sVar(t, v.k)) {
          stages.push(t);
          sum += lp(`s${t}_${v.k}`);
        }
      }
      if (stages.length > 0) out.push({ v: v.k, stages, mean: sum / stages.length });
    }
  }
  return out;
}

function byGaps(p: CheckmateProblem, gs: readonly Gap[], pick: (x: number) => boolean): Retention {
  const keep: Set<number>[] = [];
  for (let t = 0; t <= p.n; t++) keep.push(new Set());
  for (const g of gs) if (pick(g.mean)) { for (const t of g.stages) keep[t]!.add(g.v); }
  return keep;
}

/** Retention read from a solution (`S` above `cut`, or drawn with its value as the probability). */
function retention(
  p: CheckmateProblem,
  value: (name: string) => number,
  pick: (x: number) => boolean,
): Retention {
  const keep: Set<number>[] = [];
  for (let t = 0; t <= p.n; t++) {
    const s = new Set<number>();
    for (const v of p.values) if (p.sVar(t, v.k) && pick(value(`s${t}_${v.k}`))) s.add(v.k);
    keep.push(s);
  }
  return keep;
}

/**
 * The least memory stage `t` needs whatever is retained: its budget-free
 * memory less every managed value the program holds there and call `t` does
 * not read. A budget below it at some stage has no plan.
 */
function floorOf(p: CheckmateProblem): { bytes: number; stage: number } {
  let best = { bytes: 0, stage: 0 };
  for (let t = 0; t <= p.n; t++) {
    const reads = new Set(t < p.n ? p.calls[t]!.inputs : []);
    let mem = p.base[t]!;
    for (const v of p.values) {
      if (
        v.producer < t && t < v.end && !reads.has(v.k) && !(t === p.n && v.output) &&
        !p.forced(t, v.k)
      ) {
        mem -= v.bytes;
      }
    }
    if (mem > best.bytes) best = { bytes: mem, stage: t };
  }
  return best;
}

/**
 * The `checkmate` planner. See the module doc.
 *
 * @example
 * ```ts
 * import { CheckmatePlanner } from "@libra/evict";
 * if (new CheckmatePlanner({ solver: "lp" }).name !== "checkmate") throw new Error("name");
 * ```
 */
export class CheckmatePlanner implements Planner {
  /** Always `"checkmate"`. */
  readonly name: string = "checkmate";
  readonly #solver: "milp" | "lp" | "auto";
  readonly #timeLimitS: number;
  readonly #maxExact: number;
  readonly #roundings: number;
  readonly #seed: number;
  readonly #improveMs: number;
  readonly #maxVars: number;
  readonly #frees: boolean;
  readonly #lpMethod: "simplex" | "ipm";
  readonly #stageSeed: boolean;
  readonly #neighbourhood: boolean;

  /** A Checkmate planner with `options`. */
  constructor(options: CheckmateOptions = {}) {
    this.#solver = options.solver ?? "auto";
    if (!["milp", "lp", "auto"].includes(this.#solver)) {
      throw new RangeError(`checkmate: solver must be milp, lp or auto, got ${this.#solver}`);
    }
    this.#timeLimitS = options.timeLimitS ?? 120;
    if (!(this.#timeLimitS > 0)) {
      throw new RangeError(`checkmate: timeLimitS must be > 0, got ${this.#timeLimitS}`);
    }
    this.#maxExact = options.maxExactVars ?? (options.frees === true ? 5_000 : 100_000);
    this.#roundings = options.roundings ?? 64;
    this.#seed = options.seed ?? 1;
    this.#improveMs = options.improveMs ?? 30_000;
    this.#maxVars = options.maxVars ?? 1_000_000;
    this.#frees = options.frees ?? false;
    this.#lpMethod = options.lpMethod ?? (this.#frees ? "ipm" : "simplex");
    this.#stageSeed = options.stageSeed ?? true;
    this.#neighbourhood = options.neighbourhood ?? true;
    if (!["simplex", "ipm"].includes(this.#lpMethod)) {
      throw new RangeError(`checkmate: lpMethod must be simplex or ipm, got ${this.#lpMethod}`);
    }
  }

  /**
   * Solves the problem of `trace` at `budgetBytes` (see the module doc) and
   * replays the plan with `ctx.replay`. Throws a RangeError naming the stage
   * when no plan fits the budget. `ctx.baselineBytes` is required.
   */
  plan(trace: Trace, budgetBytes: number, ctx: PlannerContext): CheckmatePlan {
    if (!(budgetBytes > 0)) {
      throw new RangeError(`checkmate: budget must be > 0 bytes, got ${budgetBytes}`);
    }
    if (ctx.baselineBytes === undefined) {
      throw new Error(
        "checkmate: the planner context has no budget-free memory per call (baselineBytes); " +
          "make it with plannerContext() of @libra/runtime",
      );
    }
    const calls = ctx.baselineBytes.length - 1;
    const tooLarge = (what: string) =>
      Object.assign(
        new RangeError(
          `checkmate: the model is too large for the solver (${what}; the limit is ${this.#maxVars} decisions)`,
        ),
        { reason: "too large" },
      );
    // R alone has up to calls^2 / 2 candidates: skip what cannot fit before building it
    if ((calls * (calls + 1)) / 2 > 8 * this.#maxVars) throw tooLarge(`${calls} calls`);
    const p = buildProblem(trace, ctx.baselineBytes);
    const floor = floorOf(p);
    const stageName = floor.stage === p.n ? "the end of the step" : `call ${floor.stage}`;
    const infeasible = (why: string) =>
      Object.assign(
        new RangeError(`checkmate: no plan fits the budget of ${budgetBytes} bytes (${why})`),
        { reason: "out of memory" },
      );
    if (floor.bytes > budgetBytes) {
      throw infeasible(
        `stage ${stageName} needs at least ${floor.bytes} bytes with every other value dropped`,
      );
    }
    let r = 0, s = 0;
    for (let t = 0; t <= p.n; t++) {
      r += p.rCand[t]!.length;
      for (const v of p.values) if (p.sVar(t, v.k)) s++;
    }
    const size = { r, s, stages: p.n + 1 };
    if (r + s > this.#maxVars) throw tooLarge(`${r + s} decisions over ${p.n + 1} stages`);
    const solver = this.#solver === "auto"
      ? (r + s <= this.#maxExact ? "milp" : "lp")
      : this.#solver;
    const t0 = performance.now();
    const frees = this.#frees;
    let best: { keep: Retention; ev: Evaluation; rounding: string } | undefined;
    let status = "", boundNs = NaN, optimal = false, timeLimitReached = false;
    const fits = (ev: Evaluation) => Number.isFinite(ev.recomputeNs) && ev.peak <= budgetBytes;
    const consider = (keep: Retention, rounding: string) => {
      const ev = evaluate(p, keep, frees);
      if (fits(ev) && (best === undefined || ev.recomputeNs < best.ev.recomputeNs)) {
        best = { keep, ev, rounding };
      }
    };
    const form = frees
      ? "with values freed after their last use in a stage"
      : "what a stage recomputes stays until its call has run";
    if (solver === "milp") {
      const sol = solveModel(checkmateModel(p, budgetBytes, frees), {
        timeLimitS: this.#timeLimitS,
      });
      status = sol.status;
      timeLimitReached = status === "Time limit reached";
      if (status === "Infeasible") throw infeasible(`the MILP is infeasible: ${form}`);
      boundNs = Number.isFinite(sol.bound) ? Math.max(0, sol.bound * US) : NaN;
      if (sol.hasSolution) {
        consider(retention(p, sol.value, (x) => x > 0.5), "exact");
        optimal = status === "Optimal";
      }
    }
    if (best === undefined && frees && solver === "lp" && this.#stageSeed) {
      // a plan that frees nothing inside a stage fits with frees too: the stage
      // form's MILP (a smaller model) seeds the rounding and the greedy improvement
      const sol = solveModel(checkmateModel(p, budgetBytes, false), {
        timeLimitS: this.#timeLimitS,
      });
      timeLimitReached ||= sol.status === "Time limit reached";
      if (sol.hasSolution) consider(retention(p, sol.value, (x) => x > 0.5), "stage form");
    }
    if (best === undefined || (frees && solver === "lp")) {
      // the relaxation, then rounding; a tighter budget where nothing fits
      const rand = mulberry32(this.#seed);
      for (const f of [1, 0.97, 0.92, 0.85, 0.75]) {
        // tighter budgets only while the time limit lasts
        if (f < 1 && performance.now() - t0 > this.#timeLimitS * 1e3) break;
        // (after a MILP stopped by its limit, the relaxation still gets 10 s)
        const sol = solveModel(checkmateModel(p, f * budgetBytes, frees), {
          relax: true,
          method: this.#lpMethod,
          timeLimitS: solver === "lp" ? this.#timeLimitS : Math.max(10, this.#timeLimitS),
        });
        if (f === 1) {
          if (sol.status === "Infeasible") {
            throw infeasible(`the LP relaxation is infeasible: ${form}`);
          }
          if (solver === "lp") status = sol.status;
          const lpBound = sol.status === "Optimal" ? sol.bound * US : 0;
          boundNs = Number.isFinite(boundNs) ? Math.max(boundNs, lpBound) : lpBound;
          timeLimitReached ||= sol.status === "Time limit reached";
        }
        if (!sol.hasSolution) continue;
        // every threshold, then `roundings` random draws, of one way to round
        const roundAll = (
          round: (pick: (x: number) => boolean) => Retention,
          label: string,
        ) => {
          for (const cut of [0.5, 0.3, 0.7, 0.1, 0.9, 0.2, 0.4, 0.6, 0.8, 0.01, 0.99]) {
            consider(round((x) => x >= cut), `${label}threshold ${cut}@${f}`);
          }
          for (let k = 0; k < this.#roundings; k++) {
            consider(round((x) => rand() < x), `${label}random ${k}@${f}`);
          }
        };
        roundAll((pick) => retention(p, sol.value, pick), "");
        // the same by gaps between uses: a gap's mean decides all its stages
        const gs = gaps(p, sol.value);
        roundAll((pick) => byGaps(p, gs, pick), "gap ");
        if (best !== undefined && frees && f === 1 && this.#neighbourhood) {
          // the MILP around the best plan: decisions where the relaxation agrees with it
          // are fixed (RINS), the others are solved exactly while the time limit lasts
          const left = this.#timeLimitS - (performance.now() - t0) / 1e3;
          const b = best as { keep: Retention; ev: Evaluation; rounding: string };
          if (left > 1) {
            const m = checkmateModel(p, budgetBytes, true);
            const start = new Map<string, number>();
            const open = neighbourhood(p, m, b.keep, b.ev, sol.value, start);
            const sub = solveModel(m, { timeLimitS: left, start });
            timeLimitReached ||= sub.status === "Time limit reached";
            if (sub.hasSolution) {
              consider(retention(p, sub.value, (x) => x > 0.5), `neighbourhood of ${open}`);
            }
          }
        }
        if (best !== undefined) {
          const b = best as { keep: Retention; ev: Evaluation; rounding: string };
          const ev = improve(
            p,
            b.keep,
            b.ev,
            budgetBytes,
            gs,
            performance.now() + this.#improveMs,
            frees,
          );
          if (ev.recomputeNs < b.ev.recomputeNs) {
            best = { ...b, ev, rounding: `${b.rounding}+greedy` };
          }
          break;
        }
      }
    }
    const solveMs = performance.now() - t0;
    // No rounding fits: the fallback policy alone (an empty plan), with the bound.
    const b = (best ?? { keep: [], ev: undefined, rounding: "none fits: fallback alone" }) as {
      keep: Retention;
      ev: Evaluation | undefined;
      rounding: string;
    };
    const plan: Plan = {
      planner: this.name,
      budgetBytes,
      steps: b.ev === undefined ? [] : planSteps(p, b.keep, b.ev),
    };
    const rep = ctx.replay(plan, budgetBytes);
    const c = p.computeNs > 0 ? p.computeNs : 1;
    const recomputeNs = b.ev?.recomputeNs ?? NaN;
    if (!Number.isFinite(boundNs)) boundNs = 0;
    if (optimal) boundNs = Math.max(boundNs, recomputeNs);
    if (recomputeNs < boundNs) boundNs = recomputeNs;
    return {
      ...plan,
      stats: {
        solver,
        frees,
        status,
        optimal,
        timeLimitReached,
        recomputeNs,
        overhead: (p.computeNs + recomputeNs) / c,
        boundNs,
        boundOverhead: (p.computeNs + boundNs) / c,
        rounding: b.rounding,
        size,
        solveMs,
        replayOverhead: rep.overhead,
        replayFeasible: rep.feasible,
        peakBytes: b.ev?.peak ?? NaN,
      },
    };
  }
}

/**
 * Fixes in `m` every `R` and `S` decision at the value of the plan (`keep`,
 * `ev`) where the relaxation's value `lp` is integral and the same, and puts
 * the plan's values into `start` (a MIP start); returns how many are left open.
 */
function neighbourhood(
  p: CheckmateProblem,
  m: LpModel,
  keep: Retention,
  ev: Evaluation,
  lp: (name: string) => number,
  start: Map<string, number>,
): number {
  let open = 0;
  const fix = (name: string, inPlan: boolean) => {
    const v = inPlan ? 1 : 0;
    start.set(name, v);
    if (Math.abs(lp(name) - v) < 1e-6) m.fix(name, v);
    else open++;
  };
  for (let t = 0; t <= p.n; t++) {
    const rec = new Set(ev.recompute[t]!);
    for (const i of p.rCand[t]!) fix(`r${t}_${i}`, rec.has(i));
    for (const v of p.values) if (p.sVar(t, v.k)) fix(`s${t}_${v.k}`, keep[t]?.has(v.k) ?? false);
  }
  return open;
}

/**
 * Greedy improvement of a rounded retention (`keep`, changed in place): for
 * each value and each gap before one of its uses (or the end of the step),
 * retain it over the whole gap where that lowers the recomputation and the
 * memory still fits; gaps the relaxation retains most are tried first.
 * Passes repeat until one finds nothing or the deadline passes.
 */
function improve(
  p: CheckmateProblem,
  keep: Retention,
  start: Evaluation,
  budget: number,
  gs: readonly Gap[],
  deadline: number,
  frees: boolean,
): Evaluation {
  const moves = [...gs].sort((a, b) => b.mean - a.mean);
  const sets = keep as Set<number>[];
  let cur = start;
  for (let improved = true; improved && performance.now() < deadline;) {
    improved = false;
    for (const mv of moves) {
      if (performance.now() >= deadline) break;
      const added = mv.stages.filter((t) => !sets[t]!.has(mv.v));
      if (added.length === 0) continue;
      for (const t of added) sets[t]!.add(mv.v);
      const ev = evaluate(p, keep, frees);
      if (ev.peak <= budget && ev.recomputeNs < cur.recomputeNs) {
        cur = ev;
        improved = true;
      } else for (const t of added) sets[t]!.delete(mv.v);
    }
  }
  return cur;
}

/**
 * The plan of a retention and its recomputation: before call `t`, restore one
 * not-held output of each call recomputed at `t` (in call order), with the
 * in-stage frees of the evaluation as evictions before the call right after
 * the restore of their last use; after call `t`, drop each value still on the
 * device that is not retained into `t + 1`.
 */
function planSteps(p: CheckmateProblem, keep: Retention, ev: Evaluation): PlanStep[] {
  const steps: PlanStep[] = [];
  const held = (t: number, v: number) => p.held(keep, t, v);
  for (let t = 0; t < p.n; t++) {
    const rec = new Set(ev.recompute[t]!);
    const fr = ev.frees[t] ?? [];
    const gone = new Set<number>();
    const evictBefore = (k: number) => {
      for (const v of fr[k] ?? []) {
        gone.add(v);
        steps.push({ kind: "evict", call: t, tensor: p.values[v]!.name, before: true });
      }
    };
    evictBefore(0);
    ev.recompute[t]!.forEach((i, k) => {
      const v = p.calls[i]!.outputs.find((v) => !held(t, v));
      if (v !== undefined) steps.push({ kind: "restore", call: t, tensor: p.values[v]!.name });
      evictBefore(k + 1);
    });
    for (const v of p.values) {
      const resident = held(t, v.k) || rec.has(v.producer) || v.producer === t;
      if (!resident || held(t + 1, v.k) || gone.has(v.k)) continue;
      // held by the program after the call, or recomputed after its release
      if (t + 1 < v.end || v.end <= t) {
        steps.push({ kind: "evict", call: t, tensor: v.name, action: "drop" });
      }
    }
  }
  return steps;
}
