import assert from "node:assert/strict";
import {
  type CallNode,
  CLASS_LAPSE_LIMIT,
  Lineage,
  NameScope,
  type StorageNode,
  type TensorNode,
} from "./graph.ts";
import { ClassForest, DEPARTED, NO_CLASS } from "./union_find.ts";

/**
 * Diamond-and-tail graph, costs in brackets:
 *   x -> a[1] -> b[2] -> d[8] -> e[16]
 *         \---> c[4] --/
 */
function diamond() {
  const g = new Lineage();
  const x = g.addLeaf(8, "x");
  const [a] = g.addCall("f", [], [x], [{ bytes: 8, name: "a" }], 1);
  const [b] = g.addCall("f", [], [a!], [{ bytes: 8, name: "b" }], 2);
  const [c] = g.addCall("f", [], [a!], [{ bytes: 8, name: "c" }], 4);
  const [d] = g.addCall("f", [], [b!, c!], [{ bytes: 8, name: "d" }], 8);
  const [e] = g.addCall("f", [], [d!], [{ bytes: 8, name: "e" }], 16);
  for (const t of [x, a!, b!, c!, d!, e!]) {
    t.defined = true;
    t.storage.residency = "resident";
  }
  return { g, x, a: a!, b: b!, c: c!, d: d!, e: e! };
}

function evict(...ts: TensorNode[]) {
  for (const t of ts) {
    t.defined = false;
    t.storage.residency = "evicted";
  }
}

const names = (ss: StorageNode[]) => ss.map((s) => s.name).sort();

Deno.test("Lineage.evictedNeighbors() lists adjacent evicted storages once", () => {
  const { g, a, b, c, d } = diamond();
  evict(b, c);
  assert.deepEqual(names(g.evictedNeighbors(a.storage)), ["b", "c"]);
  assert.deepEqual(names(g.evictedNeighbors(d.storage)), ["b", "c"]);
  evict(a);
  assert.deepEqual(names(g.evictedNeighbors(d.storage)), ["b", "c"], "a is two hops from d");
});

Deno.test("Lineage.evictedNeighborhood() follows evicted storages transitively", () => {
  const { g, x, a, b, c, d, e } = diamond();
  evict(a, b, d);
  // From e: d (evicted) -> b (evicted) -> a (evicted) -> c is resident, x resident.
  assert.deepEqual(names(g.evictedNeighborhood(e.storage)), ["a", "b", "d"]);
  assert.equal(g.evictedNeighborhoodCost(e.storage), 1 + 2 + 8);
  assert.deepEqual(names(g.evictedNeighborhood(x.storage)), ["a", "b", "d"]);
  assert.deepEqual(names(g.evictedNeighborhood(c.storage)), ["a", "b", "d"]);
  // Producer side only (msps): recomputing e needs d, then b, then a.
  assert.equal(g.evictedAncestorCost(e.storage), 8 + 2 + 1);
  assert.equal(g.evictedAncestorCost(c.storage), 1);
});

Deno.test("Lineage.neighborClassCost() counts each evicted equivalence class once", () => {
  const { g, a, b, c, d } = diamond();
  evict(b, c);
  b.storage.eq = g.classes.add(2);
  c.storage.eq = g.classes.add(4);
  assert.equal(g.neighborClassCost(d.storage), 6, "two classes");
  g.classes.merge(b.storage.eq, c.storage.eq);
  assert.equal(g.neighborClassCost(d.storage), 6, "one class of 6, counted once");
  assert.equal(g.neighborClassCost(a.storage), 6);
});

Deno.test("union-find merges sum values, subtract on re-materialize, never split", () => {
  const f = new ClassForest();
  const n = Array.from({ length: 5 }, (_, i) => f.add(2 ** i));
  f.merge(n[0]!, n[1]!);
  f.merge(n[2]!, n[3]!);
  assert.equal(f.value(n[1]!), 3);
  assert.equal(f.value(n[3]!), 12);
  f.merge(n[1]!, n[3]!);
  assert.equal(f.value(n[0]!), 15);
  assert.equal(f.find(n[0]!), f.find(n[2]!));
  f.merge(n[0]!, n[2]!);
  assert.equal(f.value(n[0]!), 15, "merging one class twice adds nothing");
  f.addTo(n[1]!, -2); // n[1] re-materialized
  assert.equal(f.value(n[3]!), 13);
  assert.equal(f.value(n[4]!), 16, "untouched class");
});

Deno.test("union-find: next leads through every node of a class and back (oracle: find)", () => {
  let seed = 7;
  const rng = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const f = new ClassForest();
  // Past the first capacity of the forest's arrays: they grow and keep what they held.
  const nodes = Array.from({ length: 600 }, (_, i) => f.add(i));
  for (let m = 0; m < 700; m++) {
    f.merge(nodes[Math.floor(rng() * 600)]!, nodes[Math.floor(rng() * 600)]!);
    if (m % 50 !== 49) continue;
    for (const a of nodes) {
      const cycle = new Set<number>();
      let x = a;
      do {
        cycle.add(x);
        x = f.next(x);
      } while (x !== a && cycle.size <= nodes.length);
      assert.equal(x, a, "the cycle comes back");
      const members = nodes.filter((n) => f.find(n) === f.find(a));
      assert.deepEqual([...cycle].sort((p, q) => p - q), members, `merge ${m}`);
      assert.equal(f.size(a), members.length);
      assert.equal(f.value(a), members.reduce((s, n) => s + n, 0), "the sum of the values added");
    }
  }
});

Deno.test("union-find reuses a class's nodes once every member departed (oracle: a list of sets)", () => {
  let seed = 11;
  const rng = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const f = new ClassForest();
  // The oracle: each class a set of [node, value] members, and the members not departed.
  type Cls = { members: Map<number, number>; live: Set<number>; taken: number };
  const of = new Map<number, Cls>();
  const held: number[] = []; // nodes whose member is still in its class
  const names = new Map<number, string>();
  let highest = -1, adds = 0;
  for (let step = 0; step < 4000; step++) {
    const u = rng();
    if (u < 0.4 || held.length < 2) {
      const v = Math.floor(rng() * 100);
      const x = f.add(v, `m${step}`);
      names.set(x, `m${step}`);
      adds++;
      assert.ok(!of.has(x), `node ${x} handed out while its class is alive`);
      of.set(x, { members: new Map([[x, v]]), live: new Set([x]), taken: 0 });
      held.push(x);
      highest = Math.max(highest, x);
    } else if (u < 0.75) {
      const a = held[Math.floor(rng() * held.length)]!, b = held[Math.floor(rng() * held.length)]!;
      const ca = of.get(a)!, cb = of.get(b)!;
      f.merge(a, b);
      if (ca !== cb) {
        for (const [n, v] of cb.members) {
          ca.members.set(n, v);
          of.set(n, ca);
        }
        for (const n of cb.live) ca.live.add(n);
        ca.taken += cb.taken;
      }
    } else {
      const i = Math.floor(rng() * held.length);
      const x = held[i]!;
      held[i] = held[held.length - 1]!;
      held.pop();
      const c = of.get(x)!;
      const v = c.members.get(x)!;
      f.addTo(x, -v); // re-materialized: its value leaves the class
      c.taken += v;
      assert.equal(f.item(x), names.get(x), "the node stands for what it was added for");
      // A member re-materialized leaves DEPARTED in its place; one freed, its own item.
      const keep = rng() < 0.5;
      f.depart(x, keep);
      c.live.delete(x);
      if (c.live.size === 0) { for (const n of c.members.keys()) of.delete(n); }
      else assert.equal(f.item(x), keep ? names.get(x) : DEPARTED, "the class keeps the node");
    }
    if (step % 97 === 0) {
      for (const x of held) {
        const c = of.get(x)!;
        let sum = 0;
        for (const v of c.members.values()) sum += v;
        assert.equal(f.value(x), sum - c.taken, `step ${step}: class value`);
        assert.equal(f.size(x), c.members.size, `step ${step}: class size`);
      }
      assert.equal(f.nodes, of.size, `step ${step}: nodes in use are those of live classes`);
    }
  }
  assert.ok(highest + 1 < adds, `nodes reused: ${highest + 1} nodes for ${adds} classes made`);
  const x = f.add(1), y = f.add(2);
  f.merge(x, y);
  f.depart(x, true);
  assert.throws(() => f.depart(x), /class node \d+ has already departed/);
});

Deno.test("Lineage.leaveClass() names the neighbours of a small class's members; a large one adds to classDecrease", () => {
  // x -> a0 -> a1 -> ... -> a(n-1) -> m, and y -> q: the a's evicted form one class, m is
  // next to its last member only, q to none of it.
  for (const n of [3, CLASS_LAPSE_LIMIT, CLASS_LAPSE_LIMIT + 1]) {
    const g = new Lineage();
    g.keepsFloors = true;
    const x = g.addLeaf(8, "x"), y = g.addLeaf(8, "y");
    const chain: TensorNode[] = [];
    let prev = x;
    for (let i = 0; i < n; i++) {
      prev = g.addCall("f", [], [prev], [{ bytes: 8, name: `a${i}` }], 1 + i)[0]!;
      chain.push(prev);
    }
    const m = g.addCall("f", [], [prev], [{ bytes: 8, name: "m" }], 1)[0]!;
    const q = g.addCall("f", [], [y], [{ bytes: 8, name: "q" }], 1)[0]!;
    for (const t of [x, y, ...chain, m, q]) t.storage.residency = "resident";
    for (const t of chain) {
      t.storage.residency = "evicted";
      g.joinEvictedClass(t.storage);
    }
    assert.equal(g.classes.size(chain[0]!.storage.eq), n, "one class");
    assert.equal(g.neighborClassCost(m.storage), (n * (n + 1)) / 2);
    g.floorsLapsed.length = 0;
    const before = g.classDecrease;
    // a0 comes back (the runtime's order: residency first, then the class).
    const a0 = chain[0]!.storage;
    const node = a0.eq;
    assert.equal(g.classes.item(node), a0);
    a0.residency = "resident";
    g.leaveClass(a0);
    assert.equal(g.classes.item(node), DEPARTED, "the class keeps a0's node, not a0");
    assert.equal(a0.eq, NO_CLASS);
    assert.equal(g.neighborClassCost(m.storage), (n * (n + 1)) / 2 - 1, "the class fell by 1");
    const named = new Set(g.floorsLapsed);
    assert.ok(!named.has(q.storage), "q's cost did not change: not named");
    if (n <= CLASS_LAPSE_LIMIT) {
      assert.ok(named.has(m.storage), `class of ${n}: m is named`);
      assert.equal(g.classDecrease, before, `class of ${n}: no decrease for every floor`);
    } else {
      assert.equal(g.classDecrease, before + 1, `class of ${n}: every floor falls by 1`);
    }
    // A member freed: its node stays in the class, without it.
    const a1 = chain[1]!.storage, node1 = a1.eq;
    // Its neighbours from its kept list (class of 3) or a walk of its edges (the others).
    if (n === 3) assert.equal(g.neighbors(a1).length, 2);
    g.floorsLapsed.length = 0;
    g.forgetClass(a1);
    assert.equal(g.classes.item(node1), DEPARTED);
    // a0 (resident again) and a2 (evicted) are next to it: only a0 is named, as no storage
    // but a resident one keeps a floor.
    assert.deepEqual(new Set(g.floorsLapsed), new Set([a0]), `class of ${n}: named`);
  }
});

Deno.test("Lineage.rematPlan() orders recomputation and survives a 100k evicted chain", () => {
  const g = new Lineage();
  let t = g.addLeaf(4, "x");
  t.defined = true;
  const calls: CallNode[] = [];
  for (let i = 0; i < 100_000; i++) {
    [t] = g.addCall("f", [], [t], [{ bytes: 4 }], 1) as [TensorNode];
    calls.push(t.producer!);
  }
  const plan = g.rematPlan(t);
  assert.equal(plan.length, 100_000);
  assert.equal(plan[0], calls[0]);
  assert.equal(plan[plan.length - 1], calls[calls.length - 1]);
});

Deno.test("Lineage.rematPlan() recomputes a shared ancestor once and rejects unrecomputable values", () => {
  const { g, a, b, c, d } = diamond();
  evict(a, b, c, d);
  const plan = g.rematPlan(d).map((c) => c.outputs[0]!.name);
  assert.deepEqual(plan, ["a", "b", "c", "d"]);
  const { g: g2, x } = diamond();
  evict(x);
  assert.throws(
    () => g2.rematPlan(x),
    /x is not available and cannot be recomputed \(no producer\)/,
  );
});

Deno.test("Lineage views share storage and add their call cost to it", () => {
  const g = new Lineage();
  const x = g.addLeaf(8, "x");
  const [y] = g.addCall("f", [], [x], [{ bytes: 8, name: "y" }], 5);
  const [v] = g.addCall("view", [], [y!], [{ bytes: 0, alias: 0, name: "v" }], 1);
  assert.equal(v!.storage, y!.storage);
  assert.ok(v!.isAlias);
  assert.equal(y!.storage.compute, 6);
  assert.equal(v!.producer!.totalBytes, 0);
});

Deno.test("Lineage.toJSON() and toDot() export storages and calls", () => {
  const { g, b } = diamond();
  evict(b);
  const j = g.toJSON();
  assert.equal(j.storages.length, 6);
  assert.deepEqual(j.calls.map((c) => c.outputs[0]), ["a", "b", "c", "d", "e"]);
  assert.deepEqual(j.calls[3]!.inputs, ["b", "c"]);
  const dot = g.toDot();
  assert.match(dot, /^digraph lineage \{/);
  assert.match(dot, /style=dashed,label="b\\n8 B evicted"/);
  assert.equal((dot.match(/->/g) ?? []).length, 11);
});

Deno.test("Lineage.neighborClassCost() remembers storages without evicted neighbours exactly", () => {
  // Random calls (views included), evictions, re-materializations and class
  // merges; after every change each storage's cost equals a brute-force sum
  // over the distinct classes of its evicted neighbours, found from the calls.
  let seed = 99;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const g = new Lineage();
  const ts: TensorNode[] = [g.addLeaf(8, "x")];
  ts[0]!.storage.residency = "resident";
  const brute = (s: StorageNode): number => {
    const nbrs = new Set<StorageNode>();
    for (const t of s.tensors) {
      for (const i of t.producer?.inputs ?? []) nbrs.add(i.storage);
      for (const c of t.consumers) for (const o of c.outputs) nbrs.add(o.storage);
    }
    nbrs.delete(s);
    const roots = new Set<number>();
    for (const n of nbrs) {
      if (n.residency === "evicted" && n.eq !== NO_CLASS) roots.add(g.classes.find(n.eq));
    }
    let sum = 0;
    for (const r of roots) sum += g.classes.value(r);
    return sum;
  };
  let hits = 0;
  for (let step = 0; step < 1500; step++) {
    const u = rnd();
    if (u < 0.35 || ts.length < 4) {
      const a = ts[Math.floor(rnd() * ts.length)]!, b = ts[Math.floor(rnd() * ts.length)]!;
      const view = rnd() < 0.2;
      const outs = g.addCall(
        "f",
        [],
        [a, b],
        [{ bytes: 8, ...(view ? { alias: 0 } : {}) }],
        1 + step,
      );
      for (const t of outs) {
        if (!view) t.storage.residency = "resident";
        ts.push(t);
      }
    } else {
      const s = ts[Math.floor(rnd() * ts.length)]!.storage;
      if (s.residency === "resident" && rnd() < 0.6) {
        s.residency = "evicted";
        g.joinEvictedClass(s);
      } else if (s.residency === "evicted") {
        s.residency = "resident";
        g.leaveClass(s);
      }
    }
    for (const t of ts) {
      const s = t.storage;
      const known = s.noEvictedNeighbors !== 0;
      assert.equal(g.neighborClassCost(s), brute(s), `step ${step}, storage ${s.id}`);
      if (known) hits++;
    }
  }
  assert.ok(hits > 1000, `the cache answered (${hits} times)`);
});

/** Every neighbour of `s` in the order a walk finds them (the test's own walk). */
function walkNeighbors(s: StorageNode): StorageNode[] {
  const out: StorageNode[] = [];
  const add = (n: StorageNode) => {
    if (n !== s && !out.includes(n)) out.push(n);
  };
  for (const t of s.tensors) {
    for (const inp of t.producer?.inputs ?? []) add(inp.storage);
    for (const c of t.consumers) for (const o of c.outputs) add(o.storage);
  }
  return out;
}

Deno.test("Lineage keeps the neighbour lists a new call extends equal to a walk's", () => {
  for (let seed = 1; seed <= 20; seed++) {
    let a = seed;
    // A small LCG: uniforms in [0, 1).
    const rng = () => (a = (Math.imul(a, 1664525) + 1013904223) >>> 0) / 4294967296;
    const g = new Lineage();
    const ts: TensorNode[] = [g.addLeaf(16, "x")];
    ts[0]!.storage.residency = "resident";
    let kept = 0, extended = 0, long = 0;
    for (let i = 0; i < 300; i++) {
      const pick = () => ts[Math.floor(rng() * ts.length)]!;
      const inputs = rng() < 0.4 ? [pick(), pick()] : [pick()];
      const r = rng();
      // Fresh outputs mostly; now and then two outputs, a view, or an output into a
      // storage that already holds a value (where lists must lapse).
      const outputs = r < 0.1
        ? [{ bytes: 16 }, { bytes: 32 }]
        : r < 0.15
        ? [{ bytes: 0, alias: 0 }]
        : r < 0.2
        ? [{ bytes: 16, storage: pick().storage }]
        : [{ bytes: 16 }];
      const before = new Map(
        [...g.storages.values()].map((s) => [s, s.neighborList?.length ?? -1]),
      );
      const made = g.addCall("f", [], inputs, outputs, 1 + Math.floor(rng() * 5));
      for (const t of made) {
        t.storage.residency = rng() < 0.4 ? "evicted" : "resident";
        if (t.storage.residency === "evicted" && t.storage.eq === NO_CLASS) {
          g.joinEvictedClass(t.storage);
        }
        ts.push(t);
      }
      // Asking for class costs keeps lists (from the first question on).
      for (let q = 0; q < 3; q++) g.neighborClassCost(pick().storage);
      for (const s of g.storages.values()) {
        if (s.neighborList === null || s.neighborListAt === 0) continue;
        // Only lists valid now are compared: a lapsed one is walked again when asked.
        const valid = s.neighborListAt === g.neighborListEpoch;
        if (!valid) continue;
        kept++;
        if ((before.get(s) ?? -1) >= 0 && s.neighborList.length > before.get(s)!) extended++;
        // Past two entries a list goes on in an array of its own (`nbMore`).
        if (s.nbCount > 2) long++;
        assert.deepEqual(
          s.neighborList.map((n) => n.id),
          walkNeighbors(s).map((n) => n.id),
          `seed ${seed}, call ${i}, storage ${s.id}`,
        );
      }
    }
    assert.ok(
      kept > 100 && extended > 10 && long > 10,
      `lists kept (${kept}), extended (${extended}) and longer than two (${long})`,
    );
  }
});

Deno.test("Lineage.neighbors() lists the storages a call joins to each, as a walk of the edges finds them", () => {
  for (const kept of [true, false]) {
    const { g, x, a, b, c, d, e } = diamond();
    g.cachesNeighborLists = kept;
    const of = (t: TensorNode) => names([...g.neighbors(t.storage)]);
    // From the edges drawn above: producer inputs, consumer outputs.
    assert.deepEqual(of(x), ["a"]);
    assert.deepEqual(of(a), ["b", "c", "x"]);
    assert.deepEqual(of(d), ["b", "c", "e"]);
    assert.deepEqual(of(e), ["d"]);
    assert.equal(new Set(g.neighbors(a.storage)).size, g.neighbors(a.storage).length, "each once");
    // A freed storage is left out of a list made after it was freed.
    c.storage.residency = "freed";
    if (kept) g.invalidateNeighborhoods();
    assert.deepEqual(of(a), ["b", "x"], `kept lists ${kept}`);
    assert.deepEqual(of(b), ["a", "d"]);
  }
});

Deno.test("Lineage.classValueOf() is the value of an evicted storage's class", () => {
  const { g, a, b, c, d } = diamond();
  assert.equal(g.classValueOf(b.storage), undefined);
  evict(b, c);
  g.joinEvictedClass(b.storage);
  g.joinEvictedClass(c.storage);
  // b and c are not adjacent: two classes; d joins both (2 + 4 + 8).
  assert.equal(g.classValueOf(b.storage), 2);
  evict(d);
  g.joinEvictedClass(d.storage);
  assert.equal(g.classValueOf(c.storage), 14);
  assert.equal(g.classValueOf(a.storage), undefined);
  assert.throws(
    () => g.joinEvictedClass(d.storage),
    /joinEvictedClass d: the storage already holds a class/,
  );
  assert.equal(g.classValueOf(c.storage), 14, "nothing changed");
  // Freed, it gives its node up: the class keeps its value while b and c hold it.
  const nodes = g.classes.nodes;
  g.removeStorage(d.storage);
  assert.equal(d.storage.eq, NO_CLASS);
  assert.equal(g.classValueOf(c.storage), 14);
  assert.equal(g.classes.nodes, nodes);
  g.forgetClass(b.storage);
  g.forgetClass(c.storage);
  assert.equal(g.classes.nodes, 0, "no member left: the class's nodes are reused");
});

Deno.test("a name carried out of a scope takes its prefix once the scope closes, once", () => {
  const g = new Lineage();
  const x = g.addLeaf(16, "c3.0");
  const y = g.addLeaf(16, "w1");
  const step1 = new NameScope();
  x.carryName(step1);
  y.carryName(step1);
  assert.equal(x.name, "c3.0", "open: the name as given");
  y.name = "w2"; // set again: carried no more
  step1.prefix = "s1.";
  assert.equal(x.name, "s1.c3.0");
  assert.equal(y.name, "w2");
  const step2 = new NameScope();
  step2.prefix = "s2.";
  assert.equal(x.name, "s1.c3.0", "a closed scope renames once");
  const z = g.addLeaf(16, "c0.0");
  z.carryName(step2);
  assert.equal(z.name, "s2.c0.0", "carried out of a scope closed already");
  assert.deepEqual(g.toJSON().storages.map((s) => s.tensors[0]), ["s1.c3.0", "w2", "s2.c0.0"]);
});

Deno.test("a one-output call's storage shares its outputs list, and views added later copy it", () => {
  const g = new Lineage();
  const x = g.addLeaf(16, "x");
  const [y] = g.addCall("relu", [], [x], [{ bytes: 16, name: "y" }], 1);
  const call = y!.producer!;
  // Shared: no list of the storage's own.
  assert.equal(y!.storage.tensors, call.outputs);
  // A view of y joins its storage: the storage's list grows, the call's outputs do not.
  const [v] = g.addCall("view", [], [y!], [{ bytes: 0, alias: 0, name: "v" }], 0);
  assert.deepEqual(call.outputs.map((t) => t.name), ["y"]);
  assert.deepEqual(y!.storage.tensors.map((t) => t.name), ["y", "v"]);
  assert.notEqual(y!.storage.tensors, call.outputs);
  assert.deepEqual(v!.producer!.outputs.map((t) => t.name), ["v"]);
  // A two-output call's storages each get a list of their own.
  const [p, q] = g.addCall("split", [], [x], [{ bytes: 8, name: "p" }, { bytes: 8, name: "q" }], 1);
  assert.deepEqual(p!.storage.tensors.map((t) => t.name), ["p"]);
  assert.deepEqual(q!.storage.tensors.map((t) => t.name), ["q"]);
  assert.deepEqual(p!.producer!.outputs.map((t) => t.name), ["p", "q"]);
  // A leaf written into a storage that holds a value appends by a new list too.
  const w = g.addLeaf(16, "w", y!.storage);
  assert.deepEqual(y!.storage.tensors.map((t) => t.name), ["y", "v", "w"]);
  assert.deepEqual(call.outputs.map((t) => t.name), ["y"]);
  assert.equal(w.storage, y!.storage);
});
