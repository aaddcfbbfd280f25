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
import type { EvictAction, EvictionContext, EvictionPolicy, PlanHooks, Victim } from "./policy.ts";

/** One plan step. `call` is the 0-based index of a model call (CALL/MUTATE) in the trace. */
export interface PlanStep {
  /** Evict a tensor after `call`, or restore it before `call`. */
  readonly kind: "evict" | "restore";
  /** Model call index. */
  readonly call: number;
  /** Tensor (handle) name. */
  readonly tensor: string;
  /** For `evict`: drop (recompute later) or swap. Default `drop`. */
  readonly action?: EvictAction;
}

/** A static plan. */
export interface Plan {
  /** Planner that produced it. */
  readonly planner: string;
  /** Budget it was made for. */
  readonly budgetBytes: number;
  /** Steps (any order; grouped by call when run). */
  readonly steps: readonly PlanStep[];
}

/** What a replay of a candidate plan reports (the runtime's simulator provides it). */
export interface PlanReplayResult {
  readonly feasible: boolean;
  readonly peakBytes: number;
  readonly overhead: number;
}

/** Services the runtime gives a planner. */
export interface PlannerContext {
  /** Replays the trace under `plan` at `budgetBytes` on the meta backend (validation). */
  replay(plan: Plan, budgetBytes: number): PlanReplayResult;
  /** Peak of a budget-free replay. */
  readonly baselinePeakBytes: number;
}

/** The `Planner` contract (DESIGN.md). */
export interface Planner {
  readonly name: string;
  plan(trace: Trace, budgetBytes: number, ctx: PlannerContext): Plan;
}

/**
 * Runs a plan as a policy: its hooks evict/restore the planned tensors around
 * each call; when memory still runs short, `fallback` chooses.
 */
export function planPolicy(plan: Plan, fallback: EvictionPolicy): EvictionPolicy {
  const before = new Map<number, PlanStep[]>();
  const after = new Map<number, PlanStep[]>();
  for (const s of plan.steps) {
    const m = s.kind === "evict" ? after : before;
    let list = m.get(s.call);
    if (!list) m.set(s.call, list = []);
    list.push(s);
  }
  const hooks: PlanHooks = {
    beforeCall(index, ctl) {
      for (const s of before.get(index) ?? []) ctl.restore(s.tensor);
    },
    afterCall(index, ctl) {
      for (const s of after.get(index) ?? []) ctl.evict(s.tensor, s.action ?? "drop");
    },
  };
  return {
    name: `${plan.planner}(plan)`,
    hooks,
    choose(ctx: EvictionContext): Victim[] {
      return fallback.choose(ctx);
    },
  };
}
