/**
 * A collection prunes only around the storages freed since the last one. The
 * oracle is what a prune of the whole table guarantees, checked over every
 * live storage after every collection of random programs: no consumer list
 * names a call whose outputs are all freed, and no kept neighbour list names a
 * freed storage.
 */

import assert from "node:assert/strict";
import type { CallNode } from "@libra/lineage";
import type { Engine } from "./engine.ts";
import { randomProgram } from "./_program_testing.ts";

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

Deno.test("a collection's pruning around what was freed leaves no dead call or freed neighbour listed", () => {
  let collections = 0, freed = 0, evictions = 0, lists = 0, outOfBudget = 0;
  for (let seed = 1; seed <= 30; seed++) {
    // Checked after every collection, on its own or asked for.
    let seen = 0;
    const check = (e: Engine, where: string) => {
      for (const s of e.lineage.storages.values()) if (s.neighborList !== null) lists++;
      if (e.stats.collections === seen) return;
      collections += e.stats.collections - seen;
      seen = e.stats.collections;
      const v = pruneViolation(e);
      assert.equal(v, null, `${where}: ${v}`);
    };
    const r = randomProgram(seed, {
      collect(e, where) {
        const n = e.collect();
        check(e, where);
        return n;
      },
      afterCall: check,
    });
    freed += r.freed;
    evictions += r.evictions;
    outOfBudget += r.outOfBudget;
  }
  // The programs exercise what the check is about: collections that free lineage, and
  // neighbour lists kept by the searches of evictions.
  assert.ok(collections >= 30 * 10, `${collections} collections`);
  assert.ok(freed > 1000, `${freed} storages freed by collections`);
  assert.ok(evictions > 1000, `${evictions} evictions`);
  assert.ok(lists > 1000, `${lists} kept neighbour lists seen`);
  assert.ok(outOfBudget <= 30, `${outOfBudget} steps ended out of budget`);
});
