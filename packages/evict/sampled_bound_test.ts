import assert from "node:assert/strict";
import type { Lineage, StorageNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { arrayPool } from "./_conformance.ts";
import { churn, ctxOf, randomState, slotPool } from "./_slot_testing.ts";
import { createPolicy, DtrEqPolicy, type ScorePolicy, SLOT_STRIDE } from "./mod.ts";

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
        const { lineage, pool, clock } = randomState(seed, 40 + seed * 7, { negative });
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

for (const policy of ["dtr-eq", "dtr-local"]) {
  Deno.test(`sampling ranked by slot bounds scores no more storages than must be: ${policy}`, () => {
    // A sampled storage must be scored when its local bound (compute / (bytes x staleness),
    // which its score never falls below) does not exceed the victim's score: nothing else
    // shows it is no tie or lower. The plain search's pool records what it draws.
    let trials = 0, below = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const { lineage, pool, clock } = randomState(seed, 40 + seed * 7);
      if (pool.length <= 16) continue;
      trials++;
      const drawn: StorageNode[] = [];
      const recording = {
        ...arrayPool(pool),
        at: (i: number) => {
          drawn.push(pool[i]!);
          return pool[i]!;
        },
      };
      const { plain, ranked, rankedCtx, k } = twins(policy, { seed }, lineage, pool, clock);
      const plainCtx = ctxOf(lineage, recording, clock);
      for (let c = 0; c < 20; c++) {
        drawn.length = 0;
        const want = plain.choose(plainCtx);
        const got = ranked.choose(rankedCtx);
        assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}, choice ${c}`);
        assert.equal(drawn.length, k);
        const victim = want[0]!.storage, worst = plain.score(victim, plainCtx);
        let must = 0;
        for (const s of drawn) {
          const den = s.bytes * (clock - s.lastAccess);
          let b = den > 0 ? s.compute / den : Infinity;
          if (b !== b) b = -Infinity;
          if (b <= worst) must++;
        }
        assert.ok(
          ranked.scored <= must,
          `seed ${seed}, choice ${c}: scored ${ranked.scored}, ${must} must be`,
        );
        if (ranked.scored < must) below++;
      }
    }
    assert.ok(trials >= 40, `enough pools to sample (${trials})`);
    if (policy === "dtr-eq") {
      assert.ok(below > 0, "kept floors ruled out some storages local bounds could not");
    }
  });
}

Deno.test("dtr-eq's slot bound waits for non-negative classes", () => {
  const { lineage } = randomState(4, 200, { negative: true });
  assert.equal(lineage.classesNonNegative, false, "a negative compute joined a class");
  const { lineage: l2 } = randomState(5, 200);
  assert.equal(l2.classesNonNegative, true);
});

Deno.test("dtr-eq's kept floors pick the plain sample's victims as classes grow and shrink", () => {
  let spared = 0, trials = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const rng = mulberry32(1000 + seed);
    const { lineage, pool: resident, clock } = randomState(seed, 120 + seed * 5);
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
      churn(lineage, others, rng, 0.15, 0.3);
    }
  }
  assert.ok(trials >= 20, `enough pools to sample (${trials})`);
  assert.ok(spared > 0, "kept floors spared scoring");
});

/** `dtr-eq` without the floors its victims give their neighbours (the searches before them). */
class DtrEqUnraised extends DtrEqPolicy {
  protected override evictedFloor(): undefined {
    return undefined;
  }
}

/**
 * Evicts `seed`'s random pool down to 17 members, each victim chosen by a
 * sampled `dtr-eq` search over slots (`ranked`) and checked against the plain
 * search (the same draws, every candidate scored), storages outside the pool
 * evicted and re-materialized now and then; returns the victims' ids and the
 * storages `ranked` scored in all (undefined when the pool is too small).
 */
function evictDown(seed: number, ranked: ScorePolicy) {
  const rng = mulberry32(2000 + seed);
  const { lineage, pool: resident, clock } = randomState(seed, 150 + seed * 5);
  const items = resident.filter((_, i) => i % 3 !== 0);
  const others = resident.filter((_, i) => i % 3 === 0);
  if (items.length <= 40) return undefined;
  // One member list under both pools; a victim leaves it as the runtime's pool moves its
  // last member (with its slot) in.
  const pool = { ...slotPool(items), positionOf: (s: StorageNode) => items.indexOf(s) };
  Object.defineProperty(pool, "size", { get: () => items.length });
  const plain = createPolicy("dtr-eq", { mode: "sqrt", seed }) as ScorePolicy;
  const plainCtx = ctxOf(lineage, arrayPool(items), clock);
  const rankedCtx = ctxOf(lineage, pool, clock);
  const victims: number[] = [];
  let scored = 0;
  while (items.length > 17) {
    const want = plain.choose(plainCtx)[0]!.storage;
    assert.equal(ranked.choose(rankedCtx)[0]?.storage.id, want.id, `seed ${seed}`);
    scored += ranked.scored;
    victims.push(want.id);
    want.residency = "evicted";
    lineage.joinEvictedClass(want);
    const i = items.indexOf(want), last = items.length - 1;
    pool.slots!.copyWithin(i * SLOT_STRIDE, last * SLOT_STRIDE, (last + 1) * SLOT_STRIDE);
    items[i] = items[last]!;
    items.pop();
    churn(lineage, others, rng, 0.1, 0.2);
  }
  return { victims, scored };
}

Deno.test("dtr-eq's floors raised next to its victims pick the plain sample's victims as they are evicted", () => {
  let raisedScored = 0, unraisedScored = 0, trials = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const raised = evictDown(seed, createPolicy("dtr-eq", { mode: "sqrt", seed }) as ScorePolicy);
    const unraised = evictDown(seed, new DtrEqUnraised({ mode: "sqrt", seed }));
    if (raised === undefined || unraised === undefined) continue;
    trials++;
    assert.deepEqual(raised.victims, unraised.victims);
    raisedScored += raised.scored;
    unraisedScored += unraised.scored;
  }
  assert.ok(trials >= 20, `enough pools to sample (${trials})`);
  assert.ok(
    raisedScored < unraisedScored,
    `raised floors spared scoring (${raisedScored} vs ${unraisedScored})`,
  );
});
