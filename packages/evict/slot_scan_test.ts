import assert from "node:assert/strict";
import { AnalyticCostModel } from "@libra/cost";
import { Lineage, type StorageNode, type TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { arrayPool } from "./_conformance.ts";
import {
  createPolicy,
  type EvictablePool,
  type EvictionContext,
  type ScorePolicy,
  SLOT_BYTES,
  SLOT_COMPUTE,
  SLOT_LAST_ACCESS,
  SLOT_STRIDE,
} from "./mod.ts";

/**
 * Pools over the same members for the full scan: `plain` iterates them in
 * insertion order `byAge`; `slotted` holds them at other positions (a
 * shuffle, as removals leave a real pool), with their copied fields in slots
 * and `order()` giving the positions in insertion order (`at`: those
 * positions, instead of a shuffle).
 */
function pools(byAge: StorageNode[], rng: () => number, at?: StorageNode[]) {
  const items = at ?? [...byAge];
  for (let i = items.length - 1; i > 0 && at === undefined; i--) {
    const j = Math.floor(rng() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  const slots = new Float64Array(items.length * SLOT_STRIDE);
  items.forEach((s, i) => {
    slots[i * SLOT_STRIDE + SLOT_LAST_ACCESS] = s.lastAccess;
    slots[i * SLOT_STRIDE + SLOT_COMPUTE] = s.compute;
    slots[i * SLOT_STRIDE + SLOT_BYTES] = s.bytes;
  });
  const positions = byAge.map((s) => items.indexOf(s));
  const slotted: EvictablePool = {
    get size() {
      return items.length;
    },
    at: (i) => items[i]!,
    [Symbol.iterator]: () => byAge[Symbol.iterator](),
    slots,
    order(out) {
      out.set(positions);
      return out;
    },
    positionOf: (s) => items.indexOf(s),
  };
  return { plain: arrayPool(byAge), slotted };
}

/**
 * A random graph of `n` calls (one or two inputs, small ranges of costs and
 * sizes so that scores tie; access times with ties, some never accessed,
 * some at the clock; some empty storages; negative costs when `negative`;
 * one cost, size and access time for all when `flat`, so that many tie),
 * about a third evicted with `dtr-eq` classes, some re-materialized since.
 * Returns the lineage and the resident droppable storages, in creation order.
 */
function randomState(seed: number, n: number, negative: boolean, flat = false) {
  const rng = mulberry32(seed);
  const g = new Lineage();
  const x = g.addLeaf(64, "x");
  x.storage.residency = "resident";
  const ts: TensorNode[] = [x];
  for (let i = 0; i < n; i++) {
    const a = ts[Math.floor(rng() * ts.length)]!;
    const inputs = rng() < 0.3 ? [a, ts[Math.floor(rng() * ts.length)]!] : [a];
    let bytes = rng() < 0.05 ? 0 : 16 * (1 + Math.floor(rng() * 4));
    let cost = negative && rng() < 0.2 ? -5 : rng() < 0.05 ? 0 : 1 + Math.floor(rng() * 6);
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

function ctxOf(lineage: Lineage, pool: EvictablePool, clock: number): EvictionContext {
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

for (const policy of ["dtr-eq", "dtr-local"]) {
  for (const minBytes of [0, 32]) {
    Deno.test(`the full scan over slots picks the plain scan's victims: ${policy}, minBytes ${minBytes}`, () => {
      let fewer = 0, zeros = 0;
      for (let seed = 1; seed <= 60; seed++) {
        const { lineage, pool, clock, rng } = randomState(
          seed,
          30 + seed * 5,
          seed % 4 === 0,
          seed % 5 === 0,
        );
        const { plain, slotted } = pools(pool, rng);
        const a = createPolicy(policy, { minBytes }) as ScorePolicy;
        const b = createPolicy(policy, { minBytes }) as ScorePolicy;
        const want = a.choose(ctxOf(lineage, plain, clock));
        const got = b.choose(ctxOf(lineage, slotted, clock));
        assert.equal(got.length, want.length, `seed ${seed}`);
        assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}`);
        if (b.scored < a.scored) fewer++;
        if (want.length > 0 && a.score(want[0]!.storage, ctxOf(lineage, plain, clock)) === 0) {
          zeros++;
        }
      }
      assert.ok(fewer >= 30, `the bounds spared scoring in most pools (${fewer} of 60)`);
      assert.ok(zeros > 0, "some scans stopped at a zero score");
    });
  }
}

Deno.test("dtr-eq's full scan over slots keeps picking the plain scan's victims as classes grow and shrink", () => {
  let spared = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const { lineage, pool: resident, clock, rng } = randomState(seed, 150 + seed * 5, false);
    const byAge = resident.filter((_, i) => i % 2 === 0);
    const others = resident.filter((_, i) => i % 2 === 1);
    const { plain, slotted } = pools(byAge, rng);
    const a = createPolicy("dtr-eq") as ScorePolicy;
    const b = createPolicy("dtr-eq") as ScorePolicy;
    for (let c = 0; c < 40; c++) {
      const want = a.choose(ctxOf(lineage, plain, clock));
      const got = b.choose(ctxOf(lineage, slotted, clock));
      assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}, choice ${c}`);
      if (b.scored < byAge.length / 4) spared++;
      const r = rng();
      if (r < 0.2) {
        const s = others[Math.floor(rng() * others.length)]!;
        if (s.residency === "resident") {
          s.residency = "evicted";
          lineage.joinEvictedClass(s);
        }
      } else if (r < 0.35) {
        const evicted = [...lineage.storages.values()].filter((s) => s.residency === "evicted");
        const s = evicted[Math.floor(rng() * evicted.length)];
        if (s !== undefined) {
          lineage.leaveClass(s);
          s.residency = "resident";
        }
      }
    }
  }
  assert.ok(spared > 0, "kept floors spared scoring");
});

Deno.test("the full scan over slots breaks ties by pool order after scoring members of bound zero", () => {
  // x -> e[5] (evicted) -> z[0]; x -> a[3], x -> b[3]: z's bound is zero but its score is
  // not (e is next to it); a and b tie at the lowest score, b the later in pool order.
  for (const at of [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1]]) {
    const g = new Lineage();
    const x = g.addLeaf(64, "x");
    x.storage.residency = "resident";
    const [e] = g.addCall("f", [], [x], [{ bytes: 32 }], 5) as [TensorNode];
    const [z] = g.addCall("f", [], [e], [{ bytes: 32 }], 0) as [TensorNode];
    const [a] = g.addCall("f", [], [x], [{ bytes: 32 }], 3) as [TensorNode];
    const [b] = g.addCall("f", [], [x], [{ bytes: 32 }], 3) as [TensorNode];
    for (const t of [z, a, b]) {
      t.storage.residency = "resident";
      t.storage.lastAccess = 50;
    }
    e.storage.residency = "evicted";
    g.joinEvictedClass(e.storage);
    const byAge = [z.storage, a.storage, b.storage];
    const { plain, slotted } = pools(byAge, () => 0, at.map((i) => byAge[i]!));
    const want = createPolicy("dtr-eq").choose(ctxOf(g, plain, 100));
    const got = createPolicy("dtr-eq").choose(ctxOf(g, slotted, 100));
    assert.equal(want[0]?.storage, b.storage, "the plain scan: the later of the tied");
    assert.equal(got[0]?.storage, b.storage, `positions ${at}`);
  }
});
