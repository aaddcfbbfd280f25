import assert from "node:assert/strict";
import { Lineage, type StorageNode, type TensorNode } from "@libra/lineage";
import { arrayPool } from "./_conformance.ts";
import { churn, ctxOf, randomState, slotPool } from "./_slot_testing.ts";
import { createPolicy, type ScorePolicy } from "./mod.ts";

/**
 * Pools over the same members for the full scan: `plain` iterates them in
 * insertion order `byAge`; `slotted` holds them at other positions (a
 * shuffle, as removals leave a real pool; `at`: those positions instead),
 * with their copied fields in slots and `order()` giving the positions in
 * insertion order.
 */
function pools(byAge: StorageNode[], rng: () => number, at?: StorageNode[]) {
  const items = at ?? [...byAge];
  for (let i = items.length - 1; i > 0 && at === undefined; i--) {
    const j = Math.floor(rng() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return { plain: arrayPool(byAge), slotted: slotPool(items, byAge) };
}

for (const policy of ["dtr-eq", "dtr-local"]) {
  for (const minBytes of [0, 32]) {
    Deno.test(`the full scan over slots picks the plain scan's victims: ${policy}, minBytes ${minBytes}`, () => {
      let fewer = 0, zeros = 0;
      for (let seed = 1; seed <= 60; seed++) {
        const { lineage, pool, clock, rng } = randomState(seed, 30 + seed * 5, {
          negative: seed % 4 === 0,
          zeroCosts: true,
          flat: seed % 5 === 0,
        });
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
    const { lineage, pool: resident, clock, rng } = randomState(seed, 150 + seed * 5, {
      zeroCosts: true,
    });
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
      churn(lineage, others, rng, 0.2, 0.35);
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

Deno.test("dtr-eq's kept floor lapses when another member of a neighbour's class is re-materialized", () => {
  // x -> a0 -> a1 -> a2 -> m, and y -> q. With a0..a2 evicted (one class of 1000 + 1 + 1),
  // m scores high and q is the victim, m's floor is kept; a0 comes back (it is no neighbour of
  // m): m's cost falls to 2 and m is the victim. A floor still at 1002 would rule it out.
  const g = new Lineage();
  const x = g.addLeaf(8, "x"), y = g.addLeaf(8, "y");
  const a0 = g.addCall("f", [], [x], [{ bytes: 8, name: "a0" }], 1000)[0]!;
  const a1 = g.addCall("f", [], [a0], [{ bytes: 8, name: "a1" }], 1)[0]!;
  const a2 = g.addCall("f", [], [a1], [{ bytes: 8, name: "a2" }], 1)[0]!;
  const m = g.addCall("f", [], [a2], [{ bytes: 8, name: "m" }], 1)[0]!;
  const q = g.addCall("f", [], [y], [{ bytes: 8, name: "q" }], 10)[0]!;
  for (const t of [x, y, a0, a1, a2, m, q]) {
    t.storage.residency = "resident";
    t.storage.lastAccess = 0;
  }
  for (const t of [a0, a1, a2]) {
    t.storage.residency = "evicted";
    g.joinEvictedClass(t.storage);
  }
  const members = [m.storage, q.storage];
  const { plain, slotted } = pools(members, () => 0.5, members);
  const a = createPolicy("dtr-eq") as ScorePolicy;
  const b = createPolicy("dtr-eq") as ScorePolicy;
  // Floors are kept from the second search of an epoch on.
  for (let i = 0; i < 2; i++) {
    assert.equal(b.choose(ctxOf(g, slotted, 1))[0]?.storage, q.storage);
    assert.equal(a.choose(ctxOf(g, plain, 1))[0]?.storage, q.storage);
  }
  assert.equal(b.scored, 2, "m was scored: its floor is kept");
  assert.equal(b.choose(ctxOf(g, slotted, 1))[0]?.storage, q.storage);
  assert.equal(b.scored, 1, "m's kept floor rules it out");
  a0.storage.residency = "resident";
  g.leaveClass(a0.storage);
  assert.equal(a.choose(ctxOf(g, plain, 1))[0]?.storage, m.storage, "the plain scan's victim");
  assert.equal(b.choose(ctxOf(g, slotted, 1))[0]?.storage, m.storage, "the slotted scan's");
});

Deno.test("dtr-eq's full scan over slots scores what it must when many bounds fall below the first score", () => {
  // Half the members are computed from an evicted storage of a random cost (its own class):
  // their scores lie far above their bounds; the others have no evicted neighbour and a random
  // cost of their own: score and bound are one. A search scores many members in order of
  // bound, past the first few, and must stop only at a bound above the lowest score.
  let many = 0;
  for (let seed = 1; seed <= 40; seed++) {
    let r = seed * 7919;
    const rng = () => (r = (r * 1103515245 + 12345) % 2147483648) / 2147483648;
    const g = new Lineage();
    const x = g.addLeaf(8, "x");
    x.storage.residency = "resident";
    const members: StorageNode[] = [];
    for (let i = 0; i < 120; i++) {
      const bytes = 8 * (1 + Math.floor(rng() * 3));
      const cost = 1 + Math.floor(rng() * 1000);
      let m: TensorNode;
      if (rng() < 0.5) {
        const e = g.addCall("f", [], [x], [{ bytes: 8 }], cost)[0]!;
        m = g.addCall("f", [], [e], [{ bytes }], 1)[0]!;
        e.storage.residency = "evicted";
        g.joinEvictedClass(e.storage);
      } else m = g.addCall("f", [], [x], [{ bytes }], cost)[0]!;
      m.storage.residency = "resident";
      m.storage.lastAccess = Math.floor(rng() * 90);
      members.push(m.storage);
    }
    const { plain, slotted } = pools(members, rng);
    const a = createPolicy("dtr-eq") as ScorePolicy;
    const b = createPolicy("dtr-eq") as ScorePolicy;
    const want = a.choose(ctxOf(g, plain, 100));
    const got = b.choose(ctxOf(g, slotted, 100));
    assert.equal(got[0]?.storage.id, want[0]?.storage.id, `seed ${seed}`);
    if (b.scored > 8) many++;
  }
  assert.ok(many >= 20, `most searches scored past the first few (${many} of 40)`);
});

Deno.test("dtr-eq's full scan over slots: members of infinite bound (accessed at the clock) are scored too", () => {
  // Every member was accessed at the clock: every bound and score is Infinity, and the
  // plain scan's victim is the last member (ties go to the later one).
  const g = new Lineage();
  const x = g.addLeaf(8, "x");
  x.storage.residency = "resident";
  const members: StorageNode[] = [];
  for (let i = 0; i < 5; i++) {
    const t = g.addCall("f", [], [x], [{ bytes: 8 }], 1 + i)[0]!;
    t.storage.residency = "resident";
    t.storage.lastAccess = 7;
    members.push(t.storage);
  }
  const { plain, slotted } = pools(members, () => 0.5, members);
  const want = (createPolicy("dtr-eq") as ScorePolicy).choose(ctxOf(g, plain, 7));
  const got = (createPolicy("dtr-eq") as ScorePolicy).choose(ctxOf(g, slotted, 7));
  assert.equal(want[0]?.storage, members[4]);
  assert.equal(got[0]?.storage, want[0]?.storage);
});
