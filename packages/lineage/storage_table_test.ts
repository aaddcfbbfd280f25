import assert from "node:assert/strict";
import { mulberry32 } from "@libra/util/rng";
import { StorageNode, StorageTable } from "./mod.ts";

Deno.test("StorageTable answers as a Map does under random adds and removes (oracle: Map)", () => {
  const rng = mulberry32(7);
  const table = new StorageTable();
  const oracle = new Map<number, StorageNode>();
  let next = 1;
  for (let op = 0; op < 20_000; op++) {
    // Phases of growth and of shrinking, so holes pile up and get squeezed out.
    const grow = Math.floor(op / 2500) % 2 === 0 ? 0.7 : 0.3;
    if (rng() < grow || oracle.size === 0) {
      const s = new StorageNode(next, next % 97);
      next += 1 + Math.floor(rng() * 3);
      table.add(s);
      oracle.set(s.id, s);
    } else {
      const ids = [...oracle.keys()];
      const id = rng() < 0.9 ? ids[Math.floor(rng() * ids.length)]! : next + 5;
      assert.equal(table.remove(id), oracle.delete(id));
    }
    if (op % 997 === 0) {
      assert.equal(table.size, oracle.size);
      assert.deepEqual([...table.keys()], [...oracle.keys()]);
      assert.deepEqual([...table.values()], [...oracle.values()]);
      assert.deepEqual([...table], [...oracle]);
      const seen: number[] = [];
      table.forEach((s, id, m) => {
        assert.equal(s.id, id);
        assert.equal(m, table);
        seen.push(id);
      });
      assert.deepEqual(seen, [...oracle.keys()]);
      for (let id = 0; id < next + 2; id++) {
        assert.equal(table.get(id), oracle.get(id));
        assert.equal(table.has(id), oracle.has(id));
      }
    }
  }
});

Deno.test("StorageTable: removing members while iterating skips them, as a Map's iterator does", () => {
  const table = new StorageTable();
  const nodes = Array.from({ length: 10 }, (_, i) => new StorageNode(i + 1, 4));
  for (const s of nodes) table.add(s);
  const visited: number[] = [];
  for (const s of table.values()) {
    visited.push(s.id);
    if (s.id === 3) {
      table.remove(4); // ahead: not visited
      table.remove(2); // behind: already visited
    }
  }
  assert.deepEqual(visited, [1, 2, 3, 5, 6, 7, 8, 9, 10]);
  assert.equal(table.size, 8);
});

Deno.test("StorageTable rejects an id not above the last one added", () => {
  const table = new StorageTable();
  table.add(new StorageNode(5, 4));
  assert.throws(() => table.add(new StorageNode(5, 4)), /id 5 is not above the last \(5\)/);
  assert.throws(() => table.add(new StorageNode(2, 4)), /id 2 is not above the last \(5\)/);
});

Deno.test("StorageTable finds every id however unevenly the ids are spread and looked up (oracle: Map)", () => {
  const rng = mulberry32(11);
  // Runs of consecutive ids between jumps of up to a million, looked up in random order,
  // in order, and in reverse: the search starts from where it last found one.
  const table = new StorageTable();
  const oracle = new Map<number, StorageNode>();
  let next = 1;
  for (let i = 0; i < 6000; i++) {
    const s = new StorageNode(next, 8);
    table.add(s);
    oracle.set(next, s);
    next += rng() < 0.02 ? 1 + Math.floor(rng() * 1e6) : 1;
    if (rng() < 0.3) {
      const ids = [...oracle.keys()];
      const id = ids[Math.floor(rng() * ids.length)]!;
      assert.equal(table.remove(id), oracle.delete(id));
    }
  }
  const ids = [...oracle.keys()];
  const shuffled = ids.map((id) => [rng(), id] as const).sort((a, b) => a[0] - b[0]);
  for (const order of [ids, [...ids].reverse(), shuffled.map(([, id]) => id)]) {
    for (const id of order) {
      for (const probe of [id - 1, id, id + 1]) assert.equal(table.get(probe), oracle.get(probe));
    }
  }
  assert.equal(table.get(0), undefined);
  assert.equal(table.get(next + 7), undefined);
  // Removed in order, then in reverse: each found once.
  for (const id of ids.slice(0, 2000)) assert.equal(table.remove(id), true);
  for (const id of ids.slice(2000).reverse()) assert.equal(table.remove(id), true);
  assert.equal(table.size, 0);
});

/** A table of ids 1..n with all but every `keep`th removed (holes enough for a squeeze), and its oracle. */
function holed(n: number, keep: number): { table: StorageTable; oracle: Map<number, StorageNode> } {
  const table = new StorageTable();
  const oracle = new Map<number, StorageNode>();
  for (let id = 1; id <= n; id++) {
    const s = new StorageNode(id, 8);
    table.add(s);
    if (id % keep === 0) oracle.set(id, s);
  }
  for (let id = 1; id <= n; id++) if (id % keep !== 0) table.remove(id);
  return { table, oracle };
}

Deno.test("StorageTable: an add that squeezes during an iteration leaves the iteration on the old members", () => {
  const { table, oracle } = holed(3000, 6); // 500 members, 2500 holes: the next add squeezes
  const visited: number[] = [];
  let added = false;
  for (const s of table.values()) {
    visited.push(s.id);
    if (!added) {
      added = true;
      const t = new StorageNode(5000, 8);
      table.add(t);
      oracle.set(t.id, t);
    }
  }
  // Every member there when the walk began, once, in order.
  assert.deepEqual(visited, [...oracle.keys()].filter((id) => id < 5000));
  assert.deepEqual([...table.keys()], [...oracle.keys()]);
  for (const id of [6, 2998, 3000, 5000, 7]) assert.equal(table.get(id), oracle.get(id));
  // With no iteration in progress the squeezes compact in place; the answers stay a Map's.
  for (let id = 5001; id <= 9000; id++) {
    const s = new StorageNode(id, 8);
    table.add(s);
    oracle.set(id, s);
    if (id % 3 !== 0) {
      table.remove(id - 1);
      oracle.delete(id - 1);
    }
  }
  assert.equal(table.size, oracle.size);
  assert.deepEqual([...table.values()], [...oracle.values()]);
  for (let id = 0; id <= 9001; id++) assert.equal(table.get(id), oracle.get(id));
});

Deno.test("StorageTable: an iterator left open keeps its walk valid through later squeezes", () => {
  const { table, oracle } = holed(3000, 5);
  const it = table.values();
  const first = it.next().value!;
  // Never closed: every squeeze from now on writes new lists.
  for (let id = 3001; id <= 8000; id++) {
    const s = new StorageNode(id, 8);
    table.add(s);
    oracle.set(id, s);
    table.remove(id - 1);
    oracle.delete(id - 1);
  }
  // The open walk goes on over the list it began on, as the first add's squeeze left it (the
  // members of then, 3000 among them: removed after that squeeze, from the new list).
  const rest: number[] = [];
  for (let r = it.next(); !r.done; r = it.next()) rest.push(r.value.id);
  assert.equal(first.id, 5);
  assert.deepEqual(rest, Array.from({ length: 599 }, (_, i) => 10 + 5 * i));
  assert.deepEqual([...table.keys()], [...oracle.keys()]);
  for (let id = 0; id <= 8001; id++) assert.equal(table.get(id), oracle.get(id));
});
