/**
 * A collection prunes only around the storages freed since the last one. The
 * oracle is what a prune of the whole table guarantees, checked over every
 * live storage after every collection of random programs: no consumer list
 * names a call whose outputs are all freed, and no kept neighbour list names a
 * freed storage.
 */

import assert from "node:assert/strict";
import { AnalyticCostModel } from "@libra/cost";
import { createPolicy } from "@libra/evict";
import type { CallNode, TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { Engine } from "./engine.ts";
import { MetaExecutor } from "./simulator.ts";
import { OutOfBudgetError } from "./errors.ts";

/** What a full prune leaves true, or the first storage it does not hold for. */
function pruneViolation(e: Engine): string | null {
  const dead = (c: CallNode) => c.outputs.every((o) => o.storage.residency === "freed");
  for (const s of e.lineage.storages.values()) {
    for (const t of s.tensors) {
      for (const c of t.consumers) {
        if (dead(c)) return `${s.name} still lists dead call ${c.op}#${c.id}`;
      }
    }
    const list = s.neighborList;
    if (list !== null && list.some((n) => n.residency === "freed")) {
      const f = list.find((n) => n.residency === "freed")!;
      return `${s.name}'s kept neighbour list (at ${s.neighborListAt}) names freed ${f.name} (id ${f.id}, tensors ${f.tensors.length}) ${
        JSON.stringify(f.tensors.map((t) => [
          t.producer?.op,
          t.producer?.inputs.map((i) => i.storage.name),
          t.consumers.length,
        ]))
      } s producer ins ${
        JSON.stringify(s.tensors.map((t) =>
          t.producer?.inputs.map((i) =>
            i.storage.name + ":" + i.storage.residency
          )
        ))
      }`;
    }
  }
  return null;
}

/**
 * A random program on an engine under a budget (dtr-eq: evicted classes and
 * kept neighbour lists): values from one or two live values or leaves,
 * releases, in-place updates of leaves (copy-on-write or invalidation), and
 * collections, automatic and explicit, each followed by the check.
 */
function randomProgram(
  seed: number,
): { collections: number; freed: number; evictions: number; lists: number } {
  const rng = mulberry32(seed);
  const e = new Engine({
    budgetBytes: 20 * 64,
    policy: createPolicy("dtr-eq"),
    costModel: new AnalyticCostModel(),
    executor: new MetaExecutor(),
    timeline: false,
  });
  const leaves: TensorNode[] = [];
  for (let i = 0; i < 4; i++) {
    leaves.push(e.leaf(64, `w${i}`));
  }
  let live: TensorNode[] = [];
  let collections = 0, freed = 0, lists = 0, ooms = 0;
  const pick = () =>
    live.length > 0 && rng() < 0.8
      ? live[Math.floor(rng() * live.length)]!
      : leaves[Math.floor(rng() * leaves.length)]!;
  for (let step = 0; step < 12; step++) {
    for (let i = 0; i < 60; i++) {
      const ins = rng() < 0.3 ? [pick(), pick()] : [pick()];
      const outs = rng() < 0.2 ? [{ bytes: 64 }, { bytes: 64 }] : [{ bytes: 64 }];
      let made: TensorNode[];
      try {
        made = e.compute("f", [], ins, outs, 1 + Math.floor(rng() * 50));
      } catch (err) {
        // Values cut from their lineage by invalidation cannot be dropped: they may fill
        // the budget. The step ends there.
        if (!(err instanceof OutOfBudgetError)) throw err;
        ooms++;
        break;
      }
      live.push(...made);
      // Release some values (lineage kept while something computed from them is held).
      while (live.length > 30 || (live.length > 0 && rng() < 0.3)) {
        const j = Math.floor(rng() * live.length);
        e.release(live[j]!);
        live.splice(j, 1);
      }
      if (rng() < 0.03) {
        // A leaf replaced by a new one (a host write): freed once nothing needs it.
        const j = Math.floor(rng() * leaves.length);
        e.release(leaves[j]!);
        leaves[j] = e.leaf(64, `v${step}.${i}`);
      }
      if (rng() < 0.05) {
        // An in-place update of a leaf: its readers' lineage is preserved or cut.
        const j = Math.floor(rng() * leaves.length), w = leaves[j]!, s = w.storage;
        if (s.residency === "resident") {
          // The old tensor moves away (to a copy, or a tombstone: what was computed from it
          // is then cut from it); `s` takes the new value.
          let ext: number;
          try {
            ext = e.overwrite(s, rng() < 0.8);
          } catch (err) {
            // Invalidation brings back the held values computed from `s`: they may not fit.
            if (!(err instanceof OutOfBudgetError)) throw err;
            ooms++;
            break;
          }
          leaves[j] = e.adoptLeaf(s, ext, w.name);
        }
      }
      const before = e.stats.collections;
      if (rng() < 0.05) freed += e.collect();
      for (const s of e.lineage.storages.values()) if (s.neighborList !== null) lists++;
      if (e.stats.collections > before) {
        collections += e.stats.collections - before;
        const v = pruneViolation(e);
        assert.equal(v, null, `seed ${seed}, step ${step}, call ${i}: ${v}`);
      }
    }
    // A step's end: everything but the leaves released, then collected.
    for (const t of live) e.release(t);
    live = [];
    freed += e.collect();
    collections++;
    const v = pruneViolation(e);
    assert.equal(v, null, `seed ${seed}, end of step ${step}: ${v}`);
  }
  assert.ok(ooms <= 3, `seed ${seed}: ${ooms} steps ended out of budget`);
  return { collections, freed, evictions: e.stats.evictions, lists };
}

Deno.test("a collection's pruning around what was freed leaves no dead call or freed neighbour listed", () => {
  let collections = 0, freed = 0, evictions = 0, lists = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const r = randomProgram(seed);
    collections += r.collections;
    freed += r.freed;
    evictions += r.evictions;
    lists += r.lists;
  }
  // The programs exercise what the check is about: collections that free lineage, and
  // neighbour lists kept by the searches of evictions.
  assert.ok(collections >= 30 * 12, `${collections} collections`);
  assert.ok(freed > 1000, `${freed} storages freed by collections`);
  assert.ok(evictions > 1000, `${evictions} evictions`);
  assert.ok(lists > 1000, `${lists} kept neighbour lists seen`);
});
