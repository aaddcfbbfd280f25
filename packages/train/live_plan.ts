/**
 * Static plans on live training steps: cut one step out of a trace the
 * `Runtime` recorded ({@link stepTrace}), plan it, and run the plan on later
 * live steps through the Runtime's plan hooks ({@link LivePlan}).
 *
 * A plan names tensors of the recorded step (`t123`); a later step has other
 * tensors. The live plan maps them by position: the r-th output of the k-th
 * model call of the step (counting from {@link LivePlan.beginStep}) stands for
 * the r-th output of the k-th call of the recorded step. If a live call's
 * kernel differs from the recorded one, the step has taken another path and
 * the plan stops for the rest of that step (the fallback policy keeps the
 * budget); {@link LivePlan.mismatches} counts such steps.
 *
 * @module
 */

import { type EvictionPolicy, type Plan, type PlanControl, planPolicy } from "@libra/evict";
import type { StorageNode, TensorNode } from "@libra/lineage";
import type { Trace, TraceEvent } from "@libra/lineage/trace";
import type { Engine } from "@libra/runtime";

/**
 * The events `[from, to)` of a recorded trace as a trace of their own: every
 * value still referenced at `from` becomes a CONSTANT up front (in the order
 * it was defined), so the slice replays alone with the same memory in use.
 */
export function stepTrace(trace: Trace, from: number, to: number = trace.events.length): Trace {
  if (!(0 <= from && from <= to && to <= trace.events.length)) {
    throw new RangeError(
      `stepTrace: bad event range [${from}, ${to}) of a trace with ${trace.events.length} events`,
    );
  }
  // name -> shared reference cell of its value
  const handles = new Map<string, { bytes: number; refs: number; order: number }>();
  let order = 0;
  const define = (name: string, bytes: number) => {
    handles.set(name, { bytes, refs: 1, order: order++ });
  };
  const drop = (name: string) => {
    const h = handles.get(name);
    if (h === undefined) return;
    h.refs--;
    handles.delete(name);
  };
  for (let i = 0; i < from; i++) {
    const e = trace.events[i]!;
    switch (e.kind) {
      case "constant":
        drop(e.name);
        define(e.name, e.bytes);
        break;
      case "call":
        for (const r of e.results) {
          drop(r.name);
          if (r.alias >= 0) {
            const base = handles.get(e.args[r.alias] ?? "");
            if (base) {
              base.refs++;
              handles.set(r.name, base);
            }
          } else define(r.name, r.bytes);
        }
        break;
      case "mutate":
        break; // same name, same bytes
      case "copy": {
        const h = handles.get(e.src);
        if (h) {
          h.refs++;
          handles.set(e.dst, h);
        }
        break;
      }
      case "copyFrom": {
        drop(e.dst);
        const h = handles.get(e.src);
        if (h) {
          h.refs++;
          handles.set(e.dst, h);
        }
        break;
      }
      case "release":
        drop(e.name);
        break;
      case "annotate":
      case "read":
        break;
    }
  }
  // One CONSTANT per live value; further names of the same value become COPYs.
  const head: TraceEvent[] = [];
  const firstName = new Map<object, string>();
  const live = [...handles.entries()].sort((a, b) => a[1].order - b[1].order);
  for (const [name, h] of live) {
    const first = firstName.get(h);
    if (first === undefined) {
      firstName.set(h, name);
      head.push({ kind: "constant", name, bytes: h.bytes, line: 0 });
    } else head.push({ kind: "copy", dst: name, src: first, line: 0 });
  }
  return {
    events: [...head, ...trace.events.slice(from, to)],
    source: `${trace.source ?? "trace"}[events ${from}..${to})`,
  };
}

/** A plan running on live steps. See the module doc. */
export class LivePlan {
  /** The policy to give the `Runtime` (the plan's hooks around `fallback`). */
  readonly policy: EvictionPolicy;
  /** The plan. */
  readonly plan: Plan;
  /** Steps in which a live call differed from the recorded step (the plan stopped there). */
  mismatches = 0;
  /** Plan steps the runtime carried out (evictions and restores that found their tensor). */
  applied = 0;
  /** Plan steps that did not apply (tensor not resident / not evicted at that point). */
  skipped = 0;

  /** Sets {@link mismatches}, {@link applied} and {@link skipped} back to 0 (steps not to count). */
  resetCounts(): void {
    this.mismatches = 0;
    this.applied = 0;
    this.skipped = 0;
  }

  readonly #calls: { op: string; inPlace: boolean; results: string[] }[] = [];
  readonly #live = new Map<string, TensorNode>();
  readonly #names = new WeakMap<StorageNode, string>();
  #engine: Engine | undefined;
  #offset = 0;
  #active = false;

  /**
   * Applies `plan` to the live steps that follow the recorded `trace`.
   *
   * @param plan a plan made for `trace`
   * @param trace the recorded step the plan was made for (see {@link stepTrace})
   * @param fallback chooses when the plan alone does not keep memory within the budget
   */
  constructor(plan: Plan, trace: Trace, fallback: EvictionPolicy) {
    this.plan = plan;
    for (const e of trace.events) {
      if (e.kind === "call") {
        this.#calls.push({ op: e.op, inPlace: false, results: e.results.map((r) => r.name) });
      } else if (e.kind === "mutate") this.#calls.push({ op: e.op, inPlace: true, results: [] });
    }
    // A plan that decides at shortfalls by the recorded step's uses (lookahead)
    // names live storages by the recorded names of the tensors they hold.
    const inner = planPolicy(plan, fallback, { nameOf: (s) => this.#names.get(s) });
    // A plan without hooks (no steps, no lookahead) has nothing to follow: the runtime runs
    // its fallback without hooks, as without a plan (no outputs kept by index, no hook calls).
    if (inner.hooks === undefined) {
      this.policy = inner;
      return;
    }
    const n = this.#calls.length;
    // Only a plan that names live storages at shortfalls (lookahead) reads the names.
    const named = plan.lookahead !== undefined;
    const count = (ok: boolean) => ok ? this.applied++ : this.skipped++;
    // The runtime passes the same control to every hook: it is wrapped once, not on
    // every call (two objects and three closures a call, for a plan that mostly waits).
    let wrappedFor: PlanControl | null = null;
    let wrapped: PlanControl | null = null;
    const ctlOf = (ctl: PlanControl): PlanControl => {
      if (ctl !== wrappedFor || wrapped === null) {
        wrappedFor = ctl;
        wrapped = {
          evict: (name: string, action: "drop" | "swap") => {
            const ok = ctl.evict(name, action);
            count(ok);
            return ok;
          },
          restore: (name: string) => {
            const ok = ctl.restore(name);
            count(ok);
            return ok;
          },
        };
      }
      return wrapped;
    };
    this.policy = {
      name: inner.name,
      ...(inner.needs !== undefined ? { needs: inner.needs } : {}),
      choose: (ctx) => inner.choose(ctx),
      startStep: () => inner.startStep?.(),
      hooks: {
        beforeCall: (index, ctl) => {
          const k = index - this.#offset;
          if (!this.#active || k < 0 || k >= n) return;
          inner.hooks?.beforeCall?.(k, ctlOf(ctl));
        },
        afterCall: (index, ctl) => {
          const k = index - this.#offset;
          if (!this.#active || k < 0 || k >= n || this.#engine === undefined) return;
          const rec = this.#calls[k]!;
          const outs = this.#engine.lastOutputs;
          const op = outs[0]?.producer?.op;
          if (
            rec.inPlace ? outs.length !== 0 : op !== rec.op || outs.length !== rec.results.length
          ) {
            this.#active = false;
            this.mismatches++;
            return;
          }
          const results = rec.results;
          for (let j = 0; j < results.length; j++) {
            const t = outs[j]!;
            this.#live.set(results[j]!, t);
            if (named && !t.isAlias) this.#names.set(t.storage, results[j]!);
          }
          inner.hooks?.afterCall?.(k, ctlOf(ctl));
        },
      },
    };
  }

  /** Connects the plan to the runtime's engine (`runtime.engine`) that runs {@link policy}. */
  attach(engine: Engine): void {
    this.#engine = engine;
    engine.resolveName = (name) => this.#live.get(name)?.storage;
  }

  /** Call before each live step: the next model call is call 0 of the recorded step. */
  beginStep(): void {
    if (this.#engine === undefined) {
      throw new Error("LivePlan.beginStep(): attach(runtime.engine) first");
    }
    // Hooks see call indices relative to the engine's step base where it has one.
    const base = (this.#engine as { stepBase?: number }).stepBase ?? 0;
    this.#offset = this.#engine.callIndex - base;
    this.#live.clear();
    this.#active = true;
  }
}
