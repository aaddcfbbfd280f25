/**
 * The conformance suites every {@link EvictionPolicy} and every
 * {@link Planner} passes. Call them from the implementation's test file.
 *
 * @module
 */

import assert from "node:assert/strict";
import { AnalyticCostModel } from "@libra/cost";
import { Lineage, type StorageNode } from "@libra/lineage";
import type { Trace } from "@libra/lineage/trace";
import type { Plan, Planner, PlannerContext } from "./planner.ts";
import type { EvictablePool, EvictionContext, EvictionPolicy } from "./policy.ts";

/** A pool over an array, in array order. */
export function arrayPool(items: StorageNode[]): EvictablePool {
  return {
    get size() {
      return items.length;
    },
    at: (i) => items[i]!,
    [Symbol.iterator]: () => items[Symbol.iterator](),
  };
}

/**
 * A hand-built fixture: a leaf `x` and a chain of 8 computed storages of
 * varied sizes, costs and access times, all resident.
 */
export function fixture(): { lineage: Lineage; leaf: StorageNode; chain: StorageNode[] } {
  const g = new Lineage();
  const x = g.addLeaf(64, "x");
  x.defined = true;
  x.storage.residency = "resident";
  let t = x;
  const chain: StorageNode[] = [];
  for (let i = 0; i < 8; i++) {
    [t] = g.addCall(
      "f",
      [],
      [t],
      [{ bytes: 32 * (1 + ((i * 5) % 7)), name: `t${i}` }],
      10 + ((i * 37) % 50),
    ) as [
      typeof t,
    ];
    t.defined = true;
    t.storage.residency = "resident";
    t.storage.lastAccess = 1 + i * 100;
    chain.push(t.storage);
  }
  return { lineage: g, leaf: x.storage, chain };
}

/** An eviction context over `pool`. */
export function context(
  lineage: Lineage,
  pool: StorageNode[],
  options: { clock?: number; swap?: boolean; bytesNeeded?: number } = {},
): EvictionContext {
  const cost = new AnalyticCostModel();
  return {
    clock: options.clock ?? 10_000,
    pool: arrayPool(pool),
    lineage,
    costModel: cost,
    bytesNeeded: options.bytesNeeded ?? 1,
    canDrop: (s) => s.droppable,
    canSwap: () => options.swap ?? false,
  };
}

/** Registers `Deno.test`s checking the `EvictionPolicy` contract for `make()`. */
export function evictionPolicyConformance(name: string, make: () => EvictionPolicy): void {
  Deno.test(`${name}: choose() returns a pool member with an allowed action`, () => {
    const { lineage, chain } = fixture();
    const p = make();
    const v = p.choose(context(lineage, chain));
    assert.ok(v.length >= 1, "at least one victim");
    for (const x of v) {
      assert.ok(chain.includes(x.storage), "victims come from the pool");
      assert.equal(x.action, "drop", "swapping is not allowed here");
    }
  });
  Deno.test(`${name}: choose() returns nothing when nothing may be evicted`, () => {
    const { lineage, leaf } = fixture();
    const p = make();
    assert.deepEqual(p.choose(context(lineage, [])), [], "empty pool");
    assert.deepEqual(
      p.choose(context(lineage, [leaf])),
      [],
      "a leaf cannot be dropped and swapping is off",
    );
  });
  Deno.test(`${name}: a leaf is only ever swapped`, () => {
    const { lineage, leaf, chain } = fixture();
    const p = make();
    for (let i = 0; i < 5; i++) {
      for (const x of p.choose(context(lineage, [leaf, ...chain.slice(i)], { swap: true }))) {
        if (x.storage === leaf) assert.equal(x.action, "swap");
        else assert.ok(x.action === "drop" || x.action === "swap");
      }
    }
  });
  Deno.test(`${name}: choose() is deterministic for a fresh policy`, () => {
    const a = fixture(), b = fixture();
    const va = make().choose(context(a.lineage, a.chain)).map((v) => v.storage.name);
    const vb = make().choose(context(b.lineage, b.chain)).map((v) => v.storage.name);
    assert.deepEqual(va, vb);
  });
  Deno.test(`${name}: has a name`, () => {
    assert.ok(make().name.length > 0);
  });
}

/**
 * Registers `Deno.test`s checking the `Planner` contract: plans name tensors of
 * the trace and model-call indices in range, and a plan made for a feasible
 * budget replays feasibly within it. `ctx` comes from the runtime
 * (`plannerContext(trace)` in `@libra/runtime`).
 */
export function plannerConformance(
  name: string,
  make: () => Planner,
  trace: Trace,
  ctx: PlannerContext,
  ratios: readonly number[] = [0.9, 0.7],
): void {
  const names = new Set<string>();
  let calls = 0;
  for (const e of trace.events) {
    if (e.kind === "constant") names.add(e.name);
    if (e.kind === "call") {
      calls++;
      for (const r of e.results) names.add(r.name);
    }
    if (e.kind === "mutate") calls++;
    if (e.kind === "copy") names.add(e.dst);
  }
  for (const ratio of ratios) {
    Deno.test(`${name}: a plan at ratio ${ratio} is well-formed and replays within the budget`, () => {
      const budget = Math.floor(ratio * ctx.baselinePeakBytes);
      const plan: Plan = make().plan(trace, budget, ctx);
      assert.equal(plan.budgetBytes, budget);
      for (const s of plan.steps) {
        assert.ok(names.has(s.tensor), `unknown tensor ${s.tensor}`);
        assert.ok(
          Number.isInteger(s.call) && s.call >= 0 && s.call < calls,
          `call ${s.call} out of range`,
        );
        assert.ok(s.kind === "evict" || s.kind === "restore");
      }
      const r = ctx.replay(plan, budget);
      assert.ok(r.feasible, `infeasible at ratio ${ratio}`);
      assert.ok(r.peakBytes <= budget);
      assert.ok(r.overhead >= 1);
    });
  }
}
