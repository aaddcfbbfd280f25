/**
 * Belady-style eviction from a known step: the schedule of every storage's
 * uses in a recorded trace ({@link buildSchedule}) and the policy that evicts
 * by it ({@link LookaheadPolicy}).
 *
 * At a memory shortfall during call `k`, each evictable storage `s` scores
 *
 *     cost(s) / (bytes(s) * dist(s)^p)
 *
 * (lower = evict first), where `dist(s)` is the compute time from call `k` to
 * the next call that needs `s` (a call reading it, or, with `need:
 * "children"`, the next need of an evicted storage that recomputing needs `s`
 * for), and `cost(s)` is what bringing it back at that need costs: its
 * producer plus the evicted ancestors the recomputation replays (`cost:
 * "ancestors"`), or DTR's evicted-neighbourhood estimates (`"eq"`, `"nbhd"`).
 * A storage nothing needs again (no handle left and no evicted dependant) or
 * whose next need is the end of the step costs nothing to evict until then.
 * Where host memory is allowed, a victim is swapped instead of dropped when
 * the copy costs less than the recomputation.
 *
 * @module
 */

import type { StorageNode } from "@libra/lineage";
import type { Trace } from "@libra/lineage/trace";
import { analyzeTrace, memoryProfile } from "./_trace_analysis.ts";
import {
  type EvictAction,
  type EvictionContext,
  type PlanHooks,
  type PolicyNeeds,
  ScorePolicy,
  type SearchOptions,
  type Victim,
} from "./policy.ts";

/** Uses of one storage (one definition of a root name). */
export interface ScheduledValue {
  /** Call index that defines it (-1: before the step). */
  readonly def: number;
  /** Call indices that read it, ascending; the step's end (`calls`) when it is an output. */
  readonly uses: readonly number[];
}

/** The use schedule of a recorded step. */
export interface LookaheadSchedule {
  /** Model calls (CALL and MUTATE) in the step. */
  readonly calls: number;
  /** `startNs[k]`: compute time of calls `[0, k)`, length `calls + 1`. */
  readonly startNs: readonly number[];
  /** Estimated bytes in use at each call without a budget (eager frees only). */
  readonly memBytes: readonly number[];
  /** Storage root name -> its definitions in call order. */
  readonly values: Readonly<Record<string, readonly ScheduledValue[]>>;
}

/** Scoring variant of {@link LookaheadPolicy}. */
export interface LookaheadVariant {
  /** Cost of bringing a victim back. Default `"ancestors"`. */
  readonly cost?: "ancestors" | "eq" | "nbhd" | "local";
  /** Next need: direct reads only, or also the needs of evicted dependants. Default `"children"`. */
  readonly need?: "direct" | "children";
  /** Exponent of the distance. Default 1. */
  readonly power?: number;
  /**
   * What the distance measures: compute time until the next need (`"time"`),
   * or only the part of it spent in calls whose budget-free memory exceeds the
   * budget (`"short"`: freeing memory is worth something only there). Default `"short"`.
   */
  readonly dist?: "time" | "short";
  /** Swap victims where host memory allows and a swap costs less. Default true. */
  readonly swap?: boolean;
  /**
   * Bandwidth of an asynchronous copy stream (GB/s): a swap at a shortfall
   * costs twice the copy time (the memory is free once copied out; the copy
   * back is waited for). Default: twice the cost model's swap cost.
   */
  readonly swapGbps?: number;
  /**
   * Stops the replay (throws {@link LookaheadWorkLimitError}) once the
   * victims it dropped that are needed again would cost more than this to
   * recompute (the sum of their drop costs at the time of choosing, ns): a
   * planner's replays of candidates that thrash end early instead of running
   * to an overhead of 20. Default: no limit.
   */
  readonly workLimitNs?: number;
}

/** Thrown by a {@link LookaheadPolicy} whose victims passed its `workLimitNs`. */
export class LookaheadWorkLimitError extends Error {
  /** The limit passed, ns. */
  readonly limitNs: number;
  /** A message naming the limit. */
  constructor(limitNs: number) {
    super(`lookahead: the victims' cost of coming back passed the work limit of ${limitNs} ns`);
    this.name = "LookaheadWorkLimitError";
    this.limitNs = limitNs;
  }
}

/**
 * The use schedule of `trace`, naming storages as the trace replay does: a
 * CALL's fresh result by its name, a MUTATE's new version by the mutated
 * argument's name followed by `$`.
 */
export function buildSchedule(trace: Trace): LookaheadSchedule {
  const values: Record<string, { def: number; uses: number[] }[]> = Object.create(null);
  const handle = new Map<string, { def: number; uses: number[] }>();
  const define = (name: string, def: number) => {
    const v = { def, uses: [] as number[] };
    (values[name] ??= []).push(v);
    return v;
  };
  const startNs: number[] = [0];
  let k = 0;
  for (const e of trace.events) {
    switch (e.kind) {
      case "constant":
        handle.set(e.name, define(e.name, k - 1));
        break;
      case "call":
      case "mutate": {
        for (const a of e.args) {
          const v = handle.get(a);
          if (v !== undefined && v.uses[v.uses.length - 1] !== k) v.uses.push(k);
        }
        if (e.kind === "call") {
          for (const r of e.results) {
            if (r.alias >= 0) {
              const base = handle.get(e.args[r.alias] ?? "");
              if (base !== undefined) handle.set(r.name, base);
              else handle.delete(r.name);
            } else handle.set(r.name, define(r.name, k));
          }
        } else {
          for (const m of e.mutate) {
            const name = e.args[m];
            if (name !== undefined) handle.set(name, define(`${name}$`, k));
          }
        }
        startNs.push(startNs[k]! + e.timeNs);
        k++;
        break;
      }
      case "copy":
      case "copyFrom": {
        const v = handle.get(e.src);
        if (v !== undefined) handle.set(e.dst, v);
        break;
      }
      case "release":
        handle.delete(e.name);
        break;
      case "read": {
        // Read on the host before call k: needed there as by that call.
        const v = handle.get(e.name);
        if (v !== undefined && v.uses[v.uses.length - 1] !== k) v.uses.push(k);
        break;
      }
      case "annotate":
        break;
    }
  }
  for (const v of new Set(handle.values())) v.uses.push(k);
  const memBytes = memoryProfile(analyzeTrace(trace));
  if (memBytes.length !== k) {
    throw new Error(`buildSchedule: ${memBytes.length} profiled calls, ${k} scheduled`);
  }
  return { calls: k, startNs, memBytes, values };
}

/** First element of sorted `a` that is >= `x` (Infinity when none). */
function firstAtLeast(a: readonly number[], x: number): number {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo < a.length ? a[lo]! : Infinity;
}

/** Options of {@link LookaheadPolicy}. */
export interface LookaheadPolicyOptions extends LookaheadVariant {
  /** Name of a storage in the schedule (default: its root tensor's name). */
  nameOf?: (s: StorageNode) => string | undefined;
  /** Candidate search. */
  search?: SearchOptions;
  /** The budget (for `dist: "short"`). Default: Infinity. */
  budgetBytes?: number;
}

/**
 * Evicts by the known future (see the module doc). Its hooks follow the call
 * index; plan hooks given to the constructor run after its own.
 */
export class LookaheadPolicy extends ScorePolicy {
  /** Always `"lookahead"`. */
  readonly name: string = "lookahead";
  /** Follows the call index, then runs the plan hooks given to the constructor. */
  readonly hooks: PlanHooks;
  /**
   * What its drop cost reads (`eq`: equivalence classes, `nbhd`: evicted
   * regions). It swaps when the runtime has host memory but asks for none.
   */
  override readonly needs: PolicyNeeds;
  readonly #s: LookaheadSchedule;
  readonly #cost: NonNullable<LookaheadVariant["cost"]>;
  readonly #children: boolean;
  readonly #power: number;
  readonly #swap: boolean;
  readonly #gbps: number | undefined;
  readonly #workLimitNs: number;
  #workNs = 0;
  /** Prefix sums of the time the distance counts, length `calls + 1`. */
  readonly #at: Float64Array;
  readonly #nameOf: (s: StorageNode) => string | undefined;
  #cur = 0;
  #memo = new Map<StorageNode, number>();
  #memoAt = -1;
  #choose = 0;

  /** A policy over the use `schedule` of a recorded step; `plan` hooks run after its own. */
  constructor(schedule: LookaheadSchedule, options: LookaheadPolicyOptions = {}, plan?: PlanHooks) {
    super(options.search);
    this.#s = schedule;
    this.#cost = options.cost ?? "ancestors";
    this.needs = this.#cost === "eq"
      ? { equivalenceClasses: true }
      : this.#cost === "nbhd"
      ? { regions: true }
      : {};
    this.#children = (options.need ?? "children") === "children";
    this.#power = options.power ?? 1;
    this.#swap = options.swap ?? true;
    this.#gbps = options.swapGbps;
    this.#workLimitNs = options.workLimitNs ?? Infinity;
    this.#nameOf = options.nameOf ?? ((s) => s.name);
    const n = schedule.calls;
    const short = (options.dist ?? "short") === "short";
    const budget = options.budgetBytes ?? Infinity;
    this.#at = new Float64Array(n + 1);
    for (let k = 0; k < n; k++) {
      const t = schedule.startNs[k + 1]! - schedule.startNs[k]!;
      // Outside the short calls time still counts a little, so ties break by distance.
      const w = !short || schedule.memBytes[k]! > budget ? 1 : 1e-3;
      this.#at[k + 1] = this.#at[k]! + t * w;
    }
    this.hooks = {
      beforeCall: (index, ctl) => {
        this.#cur = index;
        plan?.beforeCall?.(index, ctl);
      },
      afterCall: (index, ctl) => {
        this.#cur = index + 1;
        plan?.afterCall?.(index, ctl);
      },
    };
  }

  /** Next call (>= the current one) that reads `s` directly; Infinity when none. */
  #nextUse(s: StorageNode): number {
    if (s.extRefs <= 0) return Infinity; // no handle left: only recomputations need it
    const name = this.#nameOf(s);
    const defs = name === undefined ? undefined : this.#s.values[name];
    if (defs === undefined || defs.length === 0) return this.#cur; // unknown: assume needed now
    let v = defs[0]!;
    for (const d of defs) {
      if (d.def <= this.#cur) v = d;
      else break;
    }
    return firstAtLeast(v.uses, this.#cur);
  }

  /** Next need of `s`: its next use, or the next need of an evicted storage recomputed from it. */
  #nextNeed(s: StorageNode): number {
    if (!this.#children) return this.#nextUse(s);
    if (this.#memoAt !== this.#choose) {
      this.#memo.clear();
      this.#memoAt = this.#choose;
    }
    const hit = this.#memo.get(s);
    if (hit !== undefined) return hit;
    // Post-order over evicted dependants with an explicit stack.
    const stack: { s: StorageNode; kids: StorageNode[]; i: number; best: number }[] = [];
    const open = new Set<StorageNode>();
    const push = (n: StorageNode) => {
      const kids: StorageNode[] = [];
      for (const t of n.tensors) {
        for (const c of t.consumers) {
          for (const o of c.outputs) {
            const m = o.storage;
            if (m !== n && m.residency === "evicted") kids.push(m);
          }
        }
      }
      open.add(n);
      stack.push({ s: n, kids, i: 0, best: this.#nextUse(n) });
    };
    push(s);
    let result = Infinity;
    while (stack.length > 0) {
      const f = stack[stack.length - 1]!;
      if (f.i < f.kids.length) {
        const m = f.kids[f.i++]!;
        const known = this.#memo.get(m);
        if (known !== undefined) f.best = Math.min(f.best, known);
        else if (!open.has(m)) push(m);
        continue;
      }
      stack.pop();
      open.delete(f.s);
      this.#memo.set(f.s, f.best);
      result = f.best;
      const parent = stack[stack.length - 1];
      if (parent) parent.best = Math.min(parent.best, f.best);
    }
    return result;
  }

  #dist(next: number): number {
    const st = this.#at;
    const n = this.#s.calls;
    const from = st[Math.min(Math.max(this.#cur, 0), n)]!;
    const to = st[Math.min(next, n)]!;
    return Math.max(to - from, 0) + 1;
  }

  #dropCost(s: StorageNode, ctx: EvictionContext): number {
    switch (this.#cost) {
      case "ancestors":
        return s.compute + ctx.lineage.evictedAncestorCost(s);
      case "eq":
        return s.compute + ctx.lineage.neighborClassCost(s);
      case "nbhd":
        return s.compute + ctx.lineage.evictedNeighborhoodCost(s);
      case "local":
        return s.compute;
    }
  }

  /** Cost of evicting `s` by `action` (Infinity when not allowed). */
  #costOf(s: StorageNode, ctx: EvictionContext, action: EvictAction): number {
    if (action === "drop") return ctx.canDrop(s) ? this.#dropCost(s, ctx) : Infinity;
    if (!this.#swap || !ctx.canSwap(s)) return Infinity;
    return 2 * (this.#gbps !== undefined ? s.bytes / this.#gbps : ctx.costModel.swapCost(s.bytes));
  }

  /** Picks victims like every score policy, counting the searches. */
  override choose(ctx: EvictionContext): Victim[] {
    this.#choose++;
    const victims = super.choose(ctx);
    if (this.#workLimitNs < Infinity) {
      for (const v of victims) {
        // Only recomputation counts (a swap's copy mostly overlaps compute).
        if (v.action !== "drop" || this.#nextNeed(v.storage) === Infinity) continue;
        this.#workNs += this.#costOf(v.storage, ctx, "drop");
      }
      if (this.#workNs > this.#workLimitNs) throw new LookaheadWorkLimitError(this.#workLimitNs);
    }
    return victims;
  }

  /** Cost of bringing `s` back at its next need per byte and per (distance to that need)^power; 0 when nothing needs it again. */
  score(s: StorageNode, ctx: EvictionContext): number {
    const next = this.#nextNeed(s);
    if (next === Infinity) return 0; // nothing needs it again: free
    const c = Math.min(this.#costOf(s, ctx, "drop"), this.#costOf(s, ctx, "swap"));
    return c / (s.bytes * this.#dist(next) ** this.#power);
  }

  /** The cheaper of dropping and swapping (swap when dropping is not allowed). */
  override action(s: StorageNode, ctx: EvictionContext): EvictAction {
    const drop = this.#costOf(s, ctx, "drop");
    const swap = this.#costOf(s, ctx, "swap");
    return swap < drop ? "swap" : ctx.canDrop(s) ? "drop" : "swap";
  }
}
