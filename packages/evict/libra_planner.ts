/**
 * The `libra` planner (Libra, HPC Asia 2025), as a static {@link Planner}.
 *
 * 1. Profile one step (the trace) and find the peak and the call where it occurs.
 * 2. Candidates: activations (values produced by forward calls) alive at the
 *    peak, produced before it and not read by the peak call, in topological
 *    (production) order. Values no call reads again (a handle the program
 *    keeps to the end of the step) are candidates too: dropped, never restored;
 *    not those the program reads on the host (a READ, as a loss's `item()`).
 * 3. Memory-reduction estimate: take the first candidates until the
 *    estimated peak fits the budget, all swapped; repeat wherever a new peak
 *    appears in the estimate.
 * 4. Greedy refinement: turn swaps into recomputations where a replay on the
 *    meta backend (`ctx.replay`) shows the peak does not get worse (or still
 *    fits the budget), and keep the swaps where it would. Swaps are tried in
 *    topological order, in groups halved on failure, so a plan with few
 *    rejected conversions needs few replays.
 * 5. Validate: if the replayed plan still exceeds the budget (recomputation
 *    needs transient memory the estimate does not see), tighten the target by
 *    the difference and go back to 3.
 *
 * 5b. Where swaps are allowed, make two more plans by steps 3-5: without the
 *    refinement (every chosen value read again stays swapped), and with one
 *    that turns a group of swaps into recomputations only where that lowers
 *    the overhead of the plan replayed at the budget; keep the one of the
 *    three that replays best. Libra preferred recomputation because its
 *    swaps were synchronous; with swaps on a copy stream that overlaps
 *    compute (the replay's `link`), swapping is often the cheaper.
 * 5c. Where swaps are allowed, plans that bring the peak only part of the
 *    way down (the budget plus a fraction of the gap to the profiled peak,
 *    {@link LibraOptions.partialGoals}), refined `"none"` and `"cost"`, the
 *    rest left to the fallback: the swaps that compute can hide, and the
 *    fallback's choices for the last bytes. The best replay of all is kept; a
 *    plan that leaves more of the gap to the fallback must replay 0.5% better
 *    to replace one that leaves less (the fallback's searches and evictions
 *    cost live what a replay does not count: on gpt small at 0.5, a plan going
 *    halfway replayed 0.01% better and measured ~8% worse).
 * 5d. Where swaps are allowed, a plan whose candidates include the values
 *    produced in the backward pass, every one swapped: a peak inside the
 *    backward pass may have no forward value alive to evict (the unrolled
 *    GAN's), but gradients that wait there for a later use.
 * 6. Keep the best of the plan, the fallback policy alone (an empty plan)
 *    and the fallback alone dropping only, as without host memory (an empty
 *    plan with `fallbackAction: "drop"`), by their replays at the budget: the
 *    plan is never worse there than the fallback, nor than its base policy
 *    (`dtr-eq`) without host memory.
 *
 * Candidates are taken by benefit: values not read again first, then most
 * bytes freed per nanosecond of recomputation.
 *
 * Each chosen tensor is evicted after its last use before the peak (its last
 * forward use) and brought back before its first use after it (its first
 * backward use). Libra's own swaps were synchronous; here a swap-in is issued
 * early enough for the copy (bytes over the swap cost model's bandwidth) to
 * overlap the compute of the calls before the use, but never inside the
 * window where the tensor must be out.
 *
 * @module
 */

import { SwapCost } from "@libra/cost";
import type { Trace } from "@libra/lineage/trace";
import type {
  Plan,
  Planner,
  PlannerContext,
  PlannerNeeds,
  PlanReplayResult,
  PlanStep,
} from "./planner.ts";
import type { EvictAction } from "./policy.ts";
import {
  analyzeTrace,
  gapAround,
  memoryProfile,
  type TraceAnalysis,
  type ValueInfo,
} from "./_trace_analysis.ts";

/** Options of {@link LibraPlanner}. */
export interface LibraOptions {
  /** Swap cost model (bytes to ns, one way). Default: `new SwapCost()` (12 GB/s). */
  swapCost?: { swapCost(bytes: number): number };
  /** Allow swaps. Default true; false plans recomputation only (no host memory needed). */
  swap?: boolean;
  /** Issue swap-ins early so copies overlap compute. Default true. */
  prefetch?: boolean;
  /**
   * Most replays each plan may run (estimate, refinement, validation), a
   * final one each aside. Default 64.
   */
  maxReplays?: number;
  /** Most estimate-refine-validate rounds. Default 6. */
  maxRounds?: number;
  /**
   * The refinements (step 4) to make a plan with, keeping the plan that
   * replays best (step 5b); the first is tried first and wins ties. Default
   * `["peak", "none", "cost"]`; a planner without swaps refines nothing and
   * makes one plan.
   */
  refinements?: readonly Refinement[];
  /**
   * Step 5c: also make plans that bring the peak only to the budget plus
   * these fractions (each in (0, 1)) of the gap between the profiled peak and
   * the budget, the rest left to the fallback, each refined `"none"` and
   * `"cost"`. Default `[0.1, 0.25, 0.4, 0.55, 0.7, 0.85]`; `[]` makes none.
   * Without swaps none are made.
   */
  partialGoals?: readonly number[];
  /**
   * Step 5d: also make a plan whose candidates include values produced in
   * the backward pass (gradients alive across a peak inside it), every one
   * swapped. Default true; without swaps none is made.
   */
  backwardCandidates?: boolean;
  /**
   * Replay the fallback policy alone too, with its swaps and dropping only,
   * and keep the better (step 6). Default true.
   */
  compareFallback?: boolean;
}

/** What {@link LibraPlanner} reports about a plan. */
export interface LibraPlanStats {
  /** Call index of the budget-free (estimated) peak. */
  readonly peakCall: number;
  /** Estimated budget-free peak, bytes. */
  readonly profiledPeakBytes: number;
  /** Distinct candidates considered at all peaks. */
  readonly candidates: number;
  /** Tensors swapped by the final plan. */
  readonly swaps: number;
  /** Tensors dropped (recomputed) by the final plan. */
  readonly recomputes: number;
  /** Tensors dropped after their last use that no call reads again (held, not needed): free. */
  readonly unusedDrops: number;
  /** Swaps turned into recomputations by refinement. */
  readonly converted: number;
  /** Replays run (`ctx.replay`). */
  readonly replays: number;
  /** Estimate-refine-validate rounds. */
  readonly rounds: number;
  /** Estimated peak of the plan (no transient recompute memory), bytes. */
  readonly estimatedPeakBytes: number;
  /** Peak of the plan replayed without a budget (the plan alone), bytes. */
  readonly planPeakBytes: number;
  /** True when the plan alone keeps the replay within the budget (no fallback evictions needed). */
  readonly fitsWithoutFallback: boolean;
  /** Overhead of the plan replayed at the budget (swaps charged synchronously). */
  readonly replayOverhead: number;
  /** Feasibility of that replay. */
  readonly replayFeasible: boolean;
  /**
   * True when the fallback policy alone replayed better and the plan is
   * empty (with `fallbackAction: "drop"` when it did so dropping only).
   */
  readonly keptFallback: boolean;
  /**
   * The refinement (step 4) of the plan kept (null when a fallback alone
   * was): `"peak"`, Libra's (swaps turned into recomputations wherever the
   * peak allows); `"none"` (every chosen value read again stays swapped);
   * `"cost"` (turned into recomputations only where that lowers the
   * overhead of the plan replayed at the budget). With swaps on a copy
   * stream that overlaps compute, a swap often costs less than the
   * recomputation Libra's refinement turns it into.
   */
  readonly refinement: Refinement | null;
  /**
   * 0 when the plan alone is meant to bring the peak down to the budget;
   * else the fraction of (profiled peak - budget) it leaves for the fallback
   * to evict (step 5c), because such a plan replayed better.
   */
  readonly partial: number;
  /**
   * True when the plan kept is the one that also took values produced in the
   * backward pass as candidates (step 5d), every one swapped.
   */
  readonly backwardCandidates: boolean;
  /**
   * Estimated overhead with prefetching: (compute + recompute of dropped
   * tensors' producers + the part of each swap copy that compute does not hide) / compute.
   */
  readonly estimatedOverhead: number;
}

/** A plan made by {@link LibraPlanner}, with its statistics. */
export interface LibraPlan extends Plan {
  /** What the planner did. */
  readonly stats: LibraPlanStats;
}

/** {@link LibraOptions.partialGoals} by default. */
export const DEFAULT_PARTIAL_GOALS: readonly number[] = [0.1, 0.25, 0.4, 0.55, 0.7, 0.85];

/** The refinements of step 5c's plans: they swap, or recompute where that costs less. */
const PARTIAL_REFINEMENTS = ["none", "cost"] as const;

/** Step 4's rule for turning a swap into a recomputation (see {@link LibraPlanStats.refinement}). */
export type Refinement = "peak" | "none" | "cost";

/** What every plan of one trace starts from (step 1), computed once per `plan`. */
interface StepProfile {
  /** prefix[k] = compute of calls [0, k). */
  prefix: Float64Array;
  /** The call where the budget-free (estimated) memory peaks. */
  peakCall: number;
  /** That peak, bytes. */
  profiledPeak: number;
}

function stepProfile(a: TraceAnalysis): StepProfile {
  const n = a.calls.length;
  const prefix = new Float64Array(n + 1);
  for (let k = 0; k < n; k++) prefix[k + 1] = prefix[k]! + a.calls[k]!.timeNs;
  const base = memoryProfile(a);
  let peakCall = 0;
  for (let k = 1; k < n; k++) if (base[k]! > base[peakCall]!) peakCall = k;
  return { prefix, peakCall, profiledPeak: n > 0 ? base[peakCall]! : 0 };
}

/** One run of steps 3-5 ({@link LibraPlanner}'s `#planOnce`). */
interface Attempt {
  plan: Plan;
  /** Its replay at the budget. */
  final: PlanReplayResult;
  choices: Map<string, Choice>;
  /** Its refinement (step 4). */
  refine: Refinement;
  /** The fraction of (profiled peak - budget) it leaves for the fallback (step 5c), or 0. */
  partial: number;
  /** Its candidates include values made in the backward pass (step 5d). */
  backward: boolean;
  replays: number;
  rounds: number;
  converted: number;
  considered: number;
  /** Swaps the refinement was offered (0: none to keep, nothing to try without it). */
  swapsTried: number;
  estimatedPeak: number;
  planPeak: number;
}

/**
 * True when replay `r` is feasible and `than` is not, or has a higher overhead (than `r`'s
 * by more than `margin` of `r`'s).
 */
function better(r: PlanReplayResult, than: PlanReplayResult, margin = 0): boolean {
  return r.feasible && (!than.feasible || r.overhead * (1 + margin) < than.overhead);
}

/**
 * How much better a plan that leaves more of the gap to the fallback must replay to be kept
 * (see {@link LibraPlanner.plan}).
 */
const FALLBACK_MARGIN = 0.005;

interface Choice {
  readonly v: ValueInfo;
  /** Evict after this call (last use before the window). */
  readonly prev: number;
  /** First use after the window. */
  readonly next: number;
  action: EvictAction;
  /** Earliest call the restore may be issued before (the tensor must be out until then). */
  minRestore: number;
  /** Restore before this call. */
  restoreAt: number;
}

/**
 * The `libra` planner. See the module doc.
 *
 * @example
 * ```ts
 * import { LibraPlanner } from "@libra/evict";
 * const p = new LibraPlanner({ swap: false });
 * if (p.name !== "libra") throw new Error(p.name);
 * ```
 */
export class LibraPlanner implements Planner {
  /** Always `"libra"`. */
  readonly name: string = "libra";
  /**
   * Swapping plans (unless `swap: false`) get host memory and a swap-aware
   * fallback (`dtr-eq+swap`: plain `dtr-eq` would score leaves, which cost
   * nothing to recompute by its formula, first and swap them all).
   */
  readonly needs: PlannerNeeds;
  readonly #swapCost: { swapCost(bytes: number): number };
  readonly #swap: boolean;
  readonly #prefetch: boolean;
  readonly #maxReplays: number;
  readonly #maxRounds: number;
  readonly #compareFallback: boolean;

  /** A Libra planner with `options`. */
  constructor(options: LibraOptions = {}) {
    this.#swapCost = options.swapCost ?? new SwapCost();
    this.#swap = options.swap ?? true;
    this.needs = this.#swap
      ? { swaps: true, fallback: "dtr-eq+swap" }
      : { swaps: false, fallback: "dtr-eq" };
    this.#prefetch = options.prefetch ?? true;
    this.#maxReplays = options.maxReplays ?? 64;
    this.#maxRounds = options.maxRounds ?? 6;
    this.#compareFallback = options.compareFallback ?? true;
    const refinements = options.refinements ?? ["peak", "none", "cost"];
    if (refinements.length === 0) throw new RangeError("libra: refinements must not be empty");
    for (const r of refinements) {
      if (r !== "peak" && r !== "none" && r !== "cost") {
        throw new RangeError(`libra: unknown refinement "${r}" (peak, none, cost)`);
      }
    }
    this.#refinements = this.#swap ? [...refinements] : ["peak"];
    const goals = options.partialGoals ?? DEFAULT_PARTIAL_GOALS;
    for (const f of goals) {
      if (!(f > 0 && f < 1)) {
        throw new RangeError(`libra: a partial goal must be in (0, 1), got ${f}`);
      }
    }
    this.#partialGoals = this.#swap ? [...goals] : [];
    this.#backwardCandidates = this.#swap && (options.backwardCandidates ?? true);
  }

  readonly #backwardCandidates: boolean;

  readonly #partialGoals: readonly number[];

  readonly #refinements: readonly Refinement[];

  /** Makes the plan for `trace` at `budgetBytes`, checking each refinement with `ctx.replay`. */
  plan(trace: Trace, budgetBytes: number, ctx: PlannerContext): LibraPlan {
    if (!(budgetBytes > 0)) {
      throw new RangeError(`libra: budget must be > 0 bytes, got ${budgetBytes}`);
    }
    const a = analyzeTrace(trace);
    const profile = stepProfile(a);
    const { prefix, peakCall, profiledPeak } = profile;
    const gap = profiledPeak - budgetBytes;
    let replays = 0;
    let best: Attempt | null = null;
    // Steps 3-5 with refinement `refine`, leaving `partial` x the gap to the fallback: kept
    // when it replays better than every plan before it (the first wins ties).
    const consider = (refine: Refinement, partial = 0, backward = false): Attempt => {
      const goal = budgetBytes + partial * gap;
      const t = this.#planOnce(a, profile, budgetBytes, ctx, refine, goal, partial, backward);
      replays += t.replays;
      // A plan that leaves more to the fallback must replay better by a margin: its searches
      // and evictions cost live what a replay does not count.
      if (
        best === null ||
        (t.partial > best.partial
          ? better(t.final, best.final, FALLBACK_MARGIN)
          : better(t.final, best.final))
      ) best = t;
      return t;
    };
    // Each refinement: Libra's, none, and one that converts only what lowers the overhead
    // (step 5b); without swaps to refine, every refinement makes the same plan.
    const [first, ...others] = this.#refinements;
    if (consider(first!).swapsTried > 0) {
      for (const r of others) consider(r);
      // Step 5c: plans that bring the peak only part of the way down.
      if (gap > 0) {
        for (const f of this.#partialGoals) for (const r of PARTIAL_REFINEMENTS) consider(r, f);
      }
    }
    // Step 5d: candidates from the backward pass too (a peak inside it may have no forward
    // value to evict), every one swapped.
    if (this.#backwardCandidates) consider("none", 0, true);
    const kept: Attempt = best!;
    let { plan, final } = kept;
    const { choices } = kept;
    const n = a.calls.length;
    // Never worse than the fallback policy alone, with its swaps or dropping only (as
    // without host memory): replay both and keep the best of the three.
    let keptFallback = false;
    if (this.#compareFallback) {
      const alone: Plan = { planner: this.name, budgetBytes, steps: [] };
      const dropping: Plan = { ...alone, fallbackAction: "drop" };
      for (const candidate of [alone, dropping]) {
        replays++;
        const r = ctx.replay(candidate, budgetBytes);
        if (better(r, final)) {
          final = r;
          plan = candidate;
          keptFallback = true;
        }
      }
    }
    if (keptFallback) choices.clear();
    let swapsN = 0, drops = 0, unused = 0, recompute = 0, exposed = 0;
    for (const c of choices.values()) {
      if (c.next >= n) unused++;
      else if (c.action === "drop") {
        drops++;
        recompute += a.calls[c.v.producer]!.timeNs;
      } else {
        swapsN++;
        const t = this.#swapCost.swapCost(c.v.bytes);
        // Swap-in: hidden by the compute between the restore and the use.
        exposed += Math.max(0, t - (prefix[c.next]! - prefix[c.restoreAt]!));
        // Swap-out: hidden by the compute while the tensor is out.
        exposed += Math.max(0, t - (prefix[c.restoreAt]! - prefix[c.prev + 1]!));
      }
    }
    const stats: LibraPlanStats = {
      peakCall,
      profiledPeakBytes: profiledPeak,
      candidates: kept.considered,
      swaps: swapsN,
      recomputes: drops,
      unusedDrops: unused,
      converted: keptFallback ? 0 : kept.converted,
      replays,
      rounds: kept.rounds,
      estimatedPeakBytes: kept.estimatedPeak,
      planPeakBytes: kept.planPeak,
      fitsWithoutFallback: kept.planPeak <= budgetBytes,
      replayOverhead: final.overhead,
      replayFeasible: final.feasible,
      keptFallback,
      refinement: keptFallback ? null : kept.refine,
      partial: keptFallback ? 0 : kept.partial,
      backwardCandidates: !keptFallback && kept.backward,
      estimatedOverhead: a.computeNs > 0 ? (a.computeNs + recompute + exposed) / a.computeNs : 1,
    };
    return { ...plan, stats };
  }

  /**
   * Steps 3-5 on the analysed trace `a` (step 1: `profile`) with the
   * refinement (step 4) `refine`, bringing the peak to `goal` (the budget,
   * or above it by `partial` of the gap), with candidates from the backward
   * pass too when `backward`: the plan, its replay at the budget and what the
   * statistics need.
   */
  #planOnce(
    a: TraceAnalysis,
    profile: StepProfile,
    budgetBytes: number,
    ctx: PlannerContext,
    refine: Refinement,
    goal: number,
    partial: number,
    backward: boolean,
  ): Attempt {
    const n = a.calls.length;
    const { prefix, profiledPeak } = profile;
    const choices = new Map<string, Choice>();
    const considered = new Set<number>();
    let replays = 0;
    const replay = (budget: number) => {
      replays++;
      return ctx.replay(this.#toPlan(choices, budgetBytes, n), budget);
    };
    const windows = (v: ValueInfo): [number, number][] | undefined => {
      let w: [number, number][] | undefined;
      for (const c of byValue.get(v.id) ?? []) (w ??= []).push([c.prev + 1, c.restoreAt]);
      return w;
    };
    const byValue = new Map<number, Choice[]>();

    const restoreFor = (c: Choice): number => {
      if (c.next >= n) return n;
      if (c.action === "drop" || !this.#prefetch) return c.next;
      const need = this.#swapCost.swapCost(c.v.bytes);
      // Latest r with compute of [r, next) >= the copy time, not before minRestore.
      let r = c.next;
      while (r > c.minRestore && prefix[c.next]! - prefix[r]! < need) r--;
      return Math.max(r, c.minRestore);
    };

    // Step 3: the memory-reduction estimate, against `target`.
    const estimate = (target: number): number => {
      for (let guard = 0; guard < 4 * n + 16; guard++) {
        const mem = memoryProfile(a, windows);
        let p = 0;
        for (let k = 1; k < n; k++) if (mem[k]! > mem[p]!) p = k;
        if (n === 0 || mem[p]! <= target) return n === 0 ? 0 : mem[p]!;
        // A prefetch that brings a tensor back inside the peak is issued later instead.
        let moved = false;
        for (const c of choices.values()) {
          if (c.action === "swap" && c.restoreAt <= p && p < c.next && p > c.prev) {
            c.minRestore = p + 1;
            c.restoreAt = restoreFor(c);
            moved = true;
          }
        }
        if (moved) continue;
        const cands: { v: ValueInfo; prev: number; next: number }[] = [];
        for (const v of a.values) {
          if (!v.addressable || v.producer < 0 || (v.backward && !backward) || v.producer >= p) {
            continue;
          }
          if (v.freeAt <= p || v.bytes === 0) continue;
          const g = gapAround(v, p);
          if (g.prev >= p) continue;
          if (choices.has(`${v.id}:${g.prev}`)) continue;
          cands.push({ v, prev: g.prev, next: Number.isFinite(g.next) ? g.next : n });
        }
        if (cands.length === 0) return mem[p]!;
        // By benefit: values no call reads again (a program may hold a handle
        // to the end of the step) first, dropped for free; then most bytes
        // freed per ns of recomputation; topological order among equals.
        const benefit = (c: { v: ValueInfo; next: number }) =>
          c.next >= n ? Infinity : c.v.bytes / Math.max(1, a.calls[c.v.producer]!.timeNs);
        cands.sort((x, y) =>
          benefit(y) - benefit(x) ||
          x.v.producer - y.v.producer ||
          x.v.id - y.v.id
        );
        let need = mem[p]! - target;
        for (const c of cands) {
          considered.add(c.v.id);
          const ch: Choice = {
            v: c.v,
            prev: c.prev,
            next: c.next,
            action: this.#swap && c.next < n ? "swap" : "drop",
            minRestore: p + 1,
            restoreAt: c.next,
          };
          ch.restoreAt = restoreFor(ch);
          choices.set(`${c.v.id}:${c.prev}`, ch);
          let list = byValue.get(c.v.id);
          if (!list) byValue.set(c.v.id, list = []);
          list.push(ch);
          need -= c.v.bytes;
          if (need <= 0) break;
        }
      }
      return Math.max(...memoryProfile(a, windows));
    };

    let target = goal;
    let estimatedPeak = profiledPeak;
    let planPeak = Infinity;
    let converted = 0;
    let rounds = 0;
    let swapsTried = 0;
    while (rounds < this.#maxRounds && replays < this.#maxReplays) {
      rounds++;
      estimatedPeak = estimate(target);
      planPeak = replay(Infinity).peakBytes;
      // Step 4: greedy refinement, swaps -> recomputations, in groups.
      const swaps = [...choices.values()].filter((c) => c.action === "swap");
      swapsTried += swaps.length;
      if (refine === "none") swaps.length = 0;
      swaps.sort((x, y) => x.v.producer - y.v.producer);
      // "cost": a conversion must lower the overhead of the plan replayed at the budget.
      let current = refine === "cost" && swaps.length > 0 ? replay(budgetBytes) : null;
      const convertedBefore = converted;
      const tryGroup = (group: Choice[]): void => {
        if (group.length === 0 || replays >= this.#maxReplays) return;
        for (const c of group) {
          c.action = "drop";
          c.restoreAt = c.next;
        }
        if (current !== null) {
          const r = replay(budgetBytes);
          if (better(r, current)) {
            current = r;
            converted += group.length;
            return;
          }
        } else {
          const peak = replay(Infinity).peakBytes;
          if (peak <= Math.max(planPeak, goal)) {
            planPeak = peak;
            converted += group.length;
            return;
          }
        }
        for (const c of group) {
          c.action = "swap";
          c.restoreAt = restoreFor(c);
        }
        if (group.length === 1) return;
        const h = group.length >> 1;
        tryGroup(group.slice(0, h));
        tryGroup(group.slice(h));
      };
      tryGroup(swaps);
      if (current !== null && converted > convertedBefore && replays < this.#maxReplays) {
        planPeak = replay(Infinity).peakBytes;
      }
      if (planPeak <= goal) break;
      // Step 5: the replay saw memory the estimate did not; tighten and go again.
      const next = target - (planPeak - goal);
      if (!(next > 0) || next >= target) break;
      target = next;
    }

    const plan = this.#toPlan(choices, budgetBytes, n);
    replays++;
    const final = ctx.replay(plan, budgetBytes);
    return {
      plan,
      final,
      choices,
      refine,
      partial,
      backward,
      replays,
      rounds,
      converted,
      considered: considered.size,
      swapsTried,
      estimatedPeak,
      planPeak,
    };
  }

  #toPlan(choices: Map<string, Choice>, budgetBytes: number, calls: number): Plan {
    const steps: (PlanStep & { order: number })[] = [];
    for (const c of choices.values()) {
      steps.push({
        kind: "evict",
        call: c.prev,
        tensor: c.v.name,
        action: c.action,
        order: c.v.producer,
      });
      if (c.restoreAt < calls) {
        steps.push({ kind: "restore", call: c.restoreAt, tensor: c.v.name, order: c.v.producer });
      }
    }
    steps.sort((x, y) => x.call - y.call || x.order - y.order);
    return {
      planner: this.name,
      budgetBytes,
      steps: steps.map(({ order: _, ...s }) => s),
    };
  }
}
