/**
 * Random graphs and pools shared by the tests of the searches over a pool's
 * slots (`sampled_bound_test.ts`, `slot_scan_test.ts`): each compares a
 * search reading the slots with the plain one over the same members.
 *
 * @module
 */

import { AnalyticCostModel } from "@libra/cost";
import { Lineage, type StorageNode, type TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { arrayPool } from "./_conformance.ts";
import {
  type EvictablePool,
  type EvictionContext,
  SLOT_BYTES,
  SLOT_COMPUTE,
  SLOT_LAST_ACCESS,
  SLOT_STRIDE,
} from "./policy.ts";

/** What {@link randomState} varies. */
export interface StateOptions {
  /** Some costs -5 (classes may go negative). */
  negative?: boolean;
  /** Some costs 0 (bounds of zero whose scores are not). */
  zeroCosts?: boolean;
  /** One size and access time for all, and one cost but a few zeros: many ties. */
  flat?: boolean;
}

/**
 * A random graph: `n` calls over earlier values (one or two inputs), costs
 * and sizes from small ranges (so that scores tie), about a third evicted
 * (with `dtr-eq` classes), some re-materialized since (their classes' values
 * drop, perhaps below zero), access times with ties, some never accessed,
 * some at the clock (zero staleness), some empty storages. Returns the
 * lineage, the resident droppable storages in creation order, the clock and
 * the generator (for what a test draws next).
 */
export function randomState(seed: number, n: number, options: StateOptions = {}) {
  const { negative = false, zeroCosts = false, flat = false } = options;
  const rng = mulberry32(seed);
  const g = new Lineage();
  const x = g.addLeaf(64, "x");
  x.storage.residency = "resident";
  const ts: TensorNode[] = [x];
  for (let i = 0; i < n; i++) {
    const a = ts[Math.floor(rng() * ts.length)]!;
    const inputs = rng() < 0.3 ? [a, ts[Math.floor(rng() * ts.length)]!] : [a];
    let bytes = rng() < 0.05 ? 0 : 16 * (1 + Math.floor(rng() * 4));
    let cost = negative && rng() < 0.2
      ? -5
      : zeroCosts && rng() < 0.05
      ? 0
      : 1 + Math.floor(rng() * 6);
    if (flat) [bytes, cost] = [32, rng() < 0.1 ? 0 : 3];
    const [t] = g.addCall("f", [], inputs, [{ bytes }], cost) as [TensorNode];
    t.storage.residency = "resident";
    ts.push(t);
  }
  const clock = 100;
  for (const t of ts) {
    const r = rng();
    t.storage.lastAccess = flat
      ? 50
      : r < 0.1
      ? -Infinity
      : r < 0.15
      ? clock
      : Math.floor(rng() * 20) * 5;
  }
  for (const t of ts.slice(1)) {
    if (rng() < 0.35) {
      t.storage.residency = "evicted";
      g.joinEvictedClass(t.storage);
    }
  }
  for (const t of ts.slice(1)) {
    if (t.storage.residency === "evicted" && rng() < 0.15) {
      g.leaveClass(t.storage);
      t.storage.residency = "resident";
    }
  }
  const pool = ts.map((t) => t.storage).filter((s) => s.residency === "resident" && s.droppable);
  return { lineage: g, pool, clock, rng };
}

/** A context over `pool` (drops only, no host memory). */
export function ctxOf(lineage: Lineage, pool: EvictablePool, clock: number): EvictionContext {
  return {
    clock,
    pool,
    lineage,
    costModel: new AnalyticCostModel(),
    bytesNeeded: 1,
    canDrop: (s) => s.droppable,
    canSwap: () => false,
    onlyDroppable: true,
  };
}

/**
 * A pool holding `items` at those positions, iterating `byAge` (default: in
 * that order), with each member's copied fields in slots, `order()` and
 * `positionOf()`.
 */
export function slotPool(items: StorageNode[], byAge: StorageNode[] = items): EvictablePool {
  const slots = new Float64Array(items.length * SLOT_STRIDE);
  items.forEach((s, i) => {
    slots[i * SLOT_STRIDE + SLOT_LAST_ACCESS] = s.lastAccess;
    slots[i * SLOT_STRIDE + SLOT_COMPUTE] = s.compute;
    slots[i * SLOT_STRIDE + SLOT_BYTES] = s.bytes;
  });
  const positions = byAge.map((s) => items.indexOf(s));
  return {
    ...arrayPool(byAge),
    get size() {
      return items.length;
    },
    at: (i) => items[i]!,
    slots,
    order(out) {
      out.set(positions);
      return out;
    },
    positionOf: (s) => items.indexOf(s),
  };
}

/**
 * Between two searches, now and then a change, by a draw `r` of `rng`: below
 * `evictBelow` one of `others` (if resident) is evicted into a class, growing
 * classes; else below `rematBelow` one evicted storage of `lineage` is
 * re-materialized, shrinking its class (most classes next to the pool
 * predate the searches).
 */
export function churn(
  lineage: Lineage,
  others: StorageNode[],
  rng: () => number,
  evictBelow: number,
  rematBelow: number,
): void {
  const r = rng();
  if (r < evictBelow) {
    const s = others[Math.floor(rng() * others.length)]!;
    if (s.residency === "resident") {
      s.residency = "evicted";
      lineage.joinEvictedClass(s);
    }
  } else if (r < rematBelow) {
    const evicted = [...lineage.storages.values()].filter((s) => s.residency === "evicted");
    const s = evicted[Math.floor(rng() * evicted.length)];
    if (s !== undefined) {
      lineage.leaveClass(s);
      s.residency = "resident";
    }
  }
}
