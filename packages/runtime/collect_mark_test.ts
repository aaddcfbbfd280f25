/**
 * A collection frees exactly the storages no one can need: those the program
 * does not hold (no handle, pin or lock) that no held value can be recomputed
 * from. The collector finds them from the unreferenced storages up; the
 * oracle marks down from every held storage (through the producers of
 * droppable storages, as recomputation goes) and takes what it did not reach,
 * computed before each collection of random programs under a budget (views,
 * evictions, in-place updates that cut lineage, leaves replaced and
 * released), and compared storage by storage.
 */

import assert from "node:assert/strict";
import type { StorageNode } from "@libra/lineage";
import type { Engine } from "./engine.ts";
import { randomProgram } from "./_program_testing.ts";

/** The ids of the table's storages a mark from every held storage does not reach (empty ones kept). */
function unreachable(e: Engine): number[] {
  const held = (s: StorageNode) => s.extRefs > 0 || s.pinned || s.locks > 0;
  const reached = new Set<StorageNode>();
  const stack: StorageNode[] = [];
  for (const s of e.lineage.storages.values()) {
    if (held(s)) {
      reached.add(s);
      stack.push(s);
    }
  }
  while (stack.length > 0) {
    const cur = stack.pop()!;
    const root = cur.tensors[0];
    if (root?.producer == null || !root.producer.replayable) continue; // not droppable
    for (const t of cur.tensors) {
      const p = t.producer;
      if (p === null || !p.replayable) continue;
      for (const inp of p.inputs) {
        const n = inp.storage;
        if (n.residency === "freed" || reached.has(n)) continue;
        reached.add(n);
        stack.push(n);
      }
    }
  }
  const out: number[] = [];
  for (const s of e.lineage.storages.values()) {
    if (!reached.has(s) && s.residency !== "empty") out.push(s.id);
  }
  return out;
}

/** Collects on `e`, checking what it frees against {@link unreachable}; returns how many it freed. */
function checkedCollect(e: Engine, where: string): number {
  const expected = unreachable(e);
  const before = new Set([...e.lineage.storages.values()].map((s) => s.id));
  const freed = e.collect();
  const after = new Set([...e.lineage.storages.values()].map((s) => s.id));
  const gone = [...before].filter((id) => !after.has(id)).sort((a, b) => a - b);
  assert.deepEqual(gone, expected, `${where}: freed storages`);
  assert.equal(freed, expected.length, `${where}: count freed`);
  return freed;
}

Deno.test("a collection frees exactly what no held value can be recomputed from", () => {
  let freed = 0, kept = 0, evictions = 0, outOfBudget = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const r = randomProgram(seed, { collect: checkedCollect });
    freed += r.freed;
    kept += r.kept;
    evictions += r.evictions;
    outOfBudget += r.outOfBudget;
  }
  // The programs exercise both sides: lineage freed, and unreferenced lineage kept for
  // held values (checked storage by storage above), under evictions.
  assert.ok(freed > 1000, `${freed} freed`);
  assert.ok(kept > 1000, `${kept} kept`);
  assert.ok(evictions > 100, `${evictions} evictions`);
  assert.ok(outOfBudget <= 30, `${outOfBudget} steps ended out of budget`);
});
