/**
 * The `Planner` contract: from a recorded trace and a budget, a static plan of
 * what to evict after which call and what to bring back before which call.
 * Planners (`libra`, `chen-sqrt`) implement {@link Planner}; the runtime runs a
 * plan through {@link planPolicy}, which turns it into an {@link EvictionPolicy}
 * with hooks, falling back to a dynamic policy if the plan under-evicts.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import type { StorageNode } from "@libra/lineage";
import { LookaheadPolicy, type LookaheadSchedule, type LookaheadVariant } from "./lookahead.ts";
import { SwapAwarePolicy } from "./policies.ts";
import {
  type EvictAction,
  type EvictionContext,
  type EvictionPolicy,
  needsOf,
  type PlanHooks,
  type PolicyNeeds,
  type Victim,
} from "./policy.ts";

/** One plan step. `call` is the 0-based index of a model call (CALL/MUTATE) in the trace. */
export interface PlanStep {
  /** Evict a tensor after `call` (before it with {@link before}), or restore it before `call`. */
  readonly kind: "evict" | "restore";
  /** Model call index. */
  readonly call: number;
  /** Tensor (handle) name. */
  readonly tensor: string;
  /** For `evict`: drop (recompute later) or swap. Default `drop`. */
  readonly action?: EvictAction;
  /**
   * For `evict`: run before `call` rather than after it, in the order the
   * plan lists it among that call's restores (so a plan frees a value it
   * brought back for a later restore once no later step of the call needs it).
   */
  readonly before?: boolean;
}

/** A static plan. */
export interface Plan {
  /** Planner that produced it. */
  readonly planner: string;
  /** Budget it was made for. */
  readonly budgetBytes: number;
  /**
   * Steps, grouped by call when run: before a call its restores and `before`
   * evictions in the order listed here, after it its other evictions.
   */
  readonly steps: readonly PlanStep[];
  /**
   * The step's use schedule, for plans that decide at each shortfall by the
   * known future (`lookahead`): when present, a {@link LookaheadPolicy} with
   * this variant chooses instead of the fallback.
   */
  readonly lookahead?: { readonly schedule: LookaheadSchedule; readonly variant: LookaheadVariant };
  /**
   * Optional: `"drop"` when what the plan leaves over the budget is only
   * dropped, as without host memory ({@link planPolicy} refuses the
   * fallback's swaps; a swap-aware fallback chooses as its base policy). The
   * `libra` planner sets it on an empty plan when its fallback alone replayed
   * best that way. A driver replays such a plan without host memory when it
   * swaps nothing ({@link planHostLimit}).
   */
  readonly fallbackAction?: "drop";
}

/**
 * The host memory to run `plan` with, where a driver would give it
 * `hostLimitBytes`: none when its fallback only drops and no step of it swaps.
 */
export function planHostLimit(plan: Plan, hostLimitBytes: number): number {
  if (plan.fallbackAction !== "drop") return hostLimitBytes;
  for (const s of plan.steps) if (s.kind === "evict" && s.action === "swap") return hostLimitBytes;
  return 0;
}

/** What a replay of a candidate plan reports (the runtime's simulator provides it). */
export interface PlanReplayResult {
  /** True when the step completed within the budget. */
  readonly feasible: boolean;
  /** Peak memory of the replay. */
  readonly peakBytes: number;
  /** Simulated overhead: (compute + recompute + swap stall) / compute. */
  readonly overhead: number;
  /** Compute of the step's own calls, ns (where the replay reports it). */
  readonly computeNs?: number;
  /** Recomputation, ns. */
  readonly recomputeNs?: number;
  /** Time compute waited for copies (exposed swap time), ns. */
  readonly stallNs?: number;
}

/** Services the runtime gives a planner. */
export interface PlannerContext {
  /** Replays the trace under `plan` at `budgetBytes` on the meta backend (validation). */
  replay(plan: Plan, budgetBytes: number): PlanReplayResult;
  /** Peak of a budget-free replay. */
  readonly baselinePeakBytes: number;
  /**
   * Memory in use after each model call of a budget-free replay (index = call),
   * then at the end of the step (outputs pinned): `calls + 1` entries. Planners
   * that account memory exactly (`checkmate`) need it; absent in contexts that
   * do not record it.
   */
  readonly baselineBytes?: readonly number[];
}

/** What a planner's plans need from the runtime that runs them (see {@link plannerNeeds}). */
export interface PlannerNeeds {
  /** Its plans swap: the runtime gives them host memory unless told otherwise. */
  readonly swaps?: boolean;
  /**
   * The dynamic policy (a `createPolicy` name) that evicts whatever a plan
   * leaves over the budget. Default `"dtr-eq"`.
   */
  readonly fallback?: string;
}

/** The `Planner` contract (ARCHITECTURE.md). */
export interface Planner {
  /** Name, e.g. `"libra"` (for reports; drivers read {@link needs}, never the name). */
  readonly name: string;
  /** What its plans need from the runtime (default: no host memory, `dtr-eq` as fallback). */
  readonly needs?: PlannerNeeds;
  /** Makes a static plan for `trace` at `budgetBytes`; `ctx` replays candidate plans. */
  plan(trace: Trace, budgetBytes: number, ctx: PlannerContext): Plan;
}

/** `planner`'s needs with the defaults filled in. */
export function plannerNeeds(planner: Planner): Readonly<Required<PlannerNeeds>> {
  return {
    swaps: planner.needs?.swaps === true,
    fallback: planner.needs?.fallback ?? "dtr-eq",
  };
}

/** Options of {@link planPolicy}. */
export interface PlanPolicyOptions {
  /**
   * The name a storage has in the planned trace (default: its root tensor's
   * name); a live run maps its tensors to the recorded step's names.
   */
  nameOf?: (s: StorageNode) => string | undefined;
}

/**
 * Runs a plan as a policy: its hooks evict/restore the planned tensors around
 * each call (before a call, restores and `before` evictions in plan order); when memory still runs short, `fallback` chooses (or, for a plan
 * with a use schedule, a {@link LookaheadPolicy} reading it).
 */
export function planPolicy(
  plan: Plan,
  fallback: EvictionPolicy,
  options: PlanPolicyOptions = {},
): EvictionPolicy {
  const before = new Map<number, PlanStep[]>();
  const after = new Map<number, PlanStep[]>();
  for (const s of plan.steps) {
    const m = s.kind === "evict" && s.before !== true ? after : before;
    let list = m.get(s.call);
    if (!list) m.set(s.call, list = []);
    list.push(s);
  }
  // A plan of no steps installs no hooks: the runtime then skips what it keeps for them at
  // every call (each call's outputs by index, the hook calls themselves).
  const hooks: PlanHooks | undefined = plan.steps.length === 0 ? undefined : {
    beforeCall(index, ctl) {
      const list = before.get(index);
      if (list === undefined) return;
      for (const s of list) {
        if (s.kind === "restore") ctl.restore(s.tensor);
        else ctl.evict(s.tensor, s.action ?? "drop");
      }
    },
    afterCall(index, ctl) {
      const list = after.get(index);
      if (list === undefined) return;
      for (const s of list) ctl.evict(s.tensor, s.action ?? "drop");
    },
  };
  if (plan.lookahead !== undefined) {
    const p = new LookaheadPolicy(plan.lookahead.schedule, {
      ...plan.lookahead.variant,
      budgetBytes: plan.budgetBytes,
      ...(options.nameOf ? { nameOf: options.nameOf } : {}),
    }, hooks);
    return {
      name: `${plan.planner}(plan)`,
      needs: p.needs,
      hooks: p.hooks,
      choose: (ctx) => p.choose(ctx),
      startStep: () => p.startStep(),
    };
  }
  if (plan.fallbackAction === "drop") {
    const base = fallback instanceof SwapAwarePolicy ? fallback.base : fallback;
    return {
      name: `${plan.planner}(plan)`,
      // What the base policy reads; host memory only when a step swaps.
      needs: { ...needsOf(base), swaps: planHostLimit(plan, 1) > 0 },
      ...(hooks ? { hooks } : {}),
      choose(ctx: EvictionContext): Victim[] {
        if (ctx.onlyDroppable === true) return base.choose(ctx);
        const dropping: EvictionContext = Object.create(ctx);
        (dropping as { canSwap: (s: StorageNode) => boolean }).canSwap = () => false;
        return base.choose(dropping);
      },
      startStep: () => base.startStep?.(),
    };
  }
  return {
    name: `${plan.planner}(plan)`,
    // What the fallback reads, kept from the first call on; host memory when it swaps.
    needs: needsOf(fallback) as PolicyNeeds,
    ...(hooks ? { hooks } : {}),
    choose(ctx: EvictionContext): Victim[] {
      return fallback.choose(ctx);
    },
    startStep: () => fallback.startStep?.(),
  };
}
