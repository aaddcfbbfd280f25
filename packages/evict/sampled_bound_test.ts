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

/** `arrayPool(items)` with the copied fields of each member in `slots`. */
function slotPool(items: StorageNode[]): EvictablePool {
  const slots = new Float64Array(items.length * SLOT_STRIDE);
  items.forEach((s, i) => {
    slots[i * SLOT_STRIDE + SLOT_LAST_ACCESS] = s.lastAccess;
    slots[i * SLOT_STRIDE + SLOT_COMPUTE] = s.compute;
    slots[i * SLOT_STRIDE + SLOT_BYTES] = s.bytes;
  });
  return {
    ...arrayPool(items),
    get size() {
      return items.length;
    },
    slots,
    positionOf: (s) => items.indexOf(s),
  };
}

/**
 * A random graph: `n` calls over earlier values (one or two inputs), costs
 * and sizes from small ranges (so that scores tie), about a third evicted
 * (with `dtr-eq` classes), access times with ties, some never accessed, some
 * at the clock (zero staleness), some empty storages. Negative costs when
 * `negative`. Returns the lineage and the resident droppable storages.
 */
function randomState(seed: number, n: number, negative: boolean) {
  const rng = mulberry32(seed);
  const g = new Lineage();
  const x = g.addLeaf(64, "x");
  x.storage.residency = "resident";
  const ts: TensorNode[] = [x];
  for (let i = 0; i < n; i++) {
    const a = ts[Math.floor(rng() * ts.length)]!;
    const inputs = rng() < 0.3 ? [a, ts[Math.floor(rng() * ts.length)]!] : [a];
    const bytes = rng() < 0.05 ? 0 : 16 * (1 + Math.floor(rng() * 4));
    const cost = negative && rng() < 0.2 ? -5 : 1 + Math.floor(rng() * 6);
    const [t] = g.addCall("f", [], inputs, [{ bytes }], cost) as [TensorNode];
    t.storage.residency = "resident";
    ts.push(t);
  }
  const clock = 100;
  for (const t of ts) {
    const r = rng();
    t.storage.lastAccess = r < 0.1 ? -Infinity : r < 0.15 ? clock : Math.floor(rng() * 20) * 5;
  }
  for (const t of ts.slice(1)) {
    if (rng() < 0.35) {
      t.storage.residency = "evicted";
      g.joinEvictedClass(t.storage);
    }
  }
  // Some re-materializations leave their classes (their values drop, perhaps below zero).
  for (const t of ts.slice(1)) {
    if (t.storage.residency === "evicted" && rng() < 0.15) {
      g.leaveClass(t.storage);
      t.storage.residency = "resident";
    }
  }
  const pool = ts.map((t) => t.storage).filter((s) => s.residency === "resident" && s.droppable);
  return { lineage: g, pool, clock };
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

/**
 * Two sampled searches of `policy` with the same seed over `pool`: `plain`
 * over a pool without slots, `ranked` over one with them (same candidates
 * drawn); `k` is the sample size.
 */
function twins(
  policy: string,
  search: { seed: number; minBytes?: number },
  lineage: Lineage,
  pool: StorageNode[],
  clock: number,
) {
  const plain = createPolicy(policy, { mode: "sqrt", ...search }) as ScorePolicy;
  const ranked = createPolicy(policy, { mode: "sqrt", ...search }) as ScorePolicy;
  return {
    plain,
    ranked,
    plainCtx: ctxOf(lineage, arrayPool(pool), clock),
    rankedCtx: ctxOf(lineage, slotPool(pool), clock),
    k: Math.ceil(Math.sqrt(pool.length)),
  };
}

for (const policy of ["dtr-eq", "dtr-local"]) {
  for (const minBytes of [0, 32]) {
    Deno.test(`sampling ranked by slot bounds picks the plain sample's victims: ${policy}, minBytes ${minBytes}`, () => {
      let fewer = 0, trials = 0;
      for (let seed = 1; seed <= 60; seed++) {
        const negative = seed % 4 === 0;
        const { lineage, pool, clock } = randomState(seed, 40 + seed * 7, negative);
        if (pool.length <= 16) continue;
        trials++;
        const { plain, ranked, plainCtx, rankedCtx, k } = twins(
          policy,
          { seed, minBytes },
          lineage,
          pool,
          clock,
        );
        for (let c = 0; c < 20; c++) {
          const want = plain.choose(plainCtx);
          const got = ranked.choose(rankedCtx);
          assert.equal(got.length, want.length);
          assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}, choice ${c}`);
          if (ranked.scored < plain.scored && ranked.scored < k) fewer++;
        }
      }
      assert.ok(trials >= 40, `enough pools to sample (${trials})`);
      assert.ok(fewer > 0, "the bounds spared some scoring");
    });
  }
}

Deno.test("dtr-eq's slot bound waits for non-negative classes", () => {
  const { lineage } = randomState(4, 200, true);
  assert.equal(lineage.classesNonNegative, false, "a negative compute joined a class");
  const { lineage: l2 } = randomState(5, 200, false);
  assert.equal(l2.classesNonNegative, true);
});

Deno.test("dtr-eq's kept floors pick the plain sample's victims as classes grow and shrink", () => {
  let spared = 0, trials = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const rng = mulberry32(1000 + seed);
    const { lineage, pool: resident, clock } = randomState(seed, 120 + seed * 5, false);
    // Half of the resident storages form the pool; the others (and the evicted ones)
    // change between searches: evictions grow classes, re-materializations shrink them.
    const pool = resident.filter((_, i) => i % 2 === 0);
    const others = resident.filter((_, i) => i % 2 === 1);
    if (pool.length <= 16) continue;
    trials++;
    const { plain, ranked, plainCtx, rankedCtx, k } = twins(
      "dtr-eq",
      { seed },
      lineage,
      pool,
      clock,
    );
    for (let c = 0; c < 60; c++) {
      const want = plain.choose(plainCtx);
      const got = ranked.choose(rankedCtx);
      assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}, choice ${c}`);
      if (ranked.scored < k / 4) spared++;
      // Mostly quiet stretches (the floors kept), now and then a change.
      const r = rng();
      if (r < 0.15) {
        const s = others[Math.floor(rng() * others.length)]!;
        if (s.residency === "resident") {
          s.residency = "evicted";
          lineage.joinEvictedClass(s);
        }
      } else if (r < 0.3) {
        // Any evicted storage: most classes next to the pool predate the searches.
        const evicted = [...lineage.storages.values()].filter((s) => s.residency === "evicted");
        const s = evicted[Math.floor(rng() * evicted.length)];
        if (s !== undefined) {
          lineage.leaveClass(s);
          s.residency = "resident";
        }
      }
    }
  }
  assert.ok(trials >= 20, `enough pools to sample (${trials})`);
  assert.ok(spared > 0, "kept floors spared scoring");
});
