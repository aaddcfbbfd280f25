import assert from "node:assert/strict";
import { compileTrace, fastReplay } from "./_sim_core.ts";
import { lstmLikeTrace } from "./_synth_trace.ts";
import { simulateTrace } from "./simulator.ts";
import { parseTrace } from "./trace.ts";

const TRACES = new URL("../../../shared/traces/", import.meta.url);
async function shared(name: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(new URL(name, TRACES));
  } catch {
    return null;
  }
}

const C = (n: string, m: number) => [
  `{"INSTRUCTION":"CONSTANT","NAME":"${n}"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"${m}","NAME":"${n}"}`,
];
const CALL = (res: string[], args: string[], time: number, mem: [number, number][]) => [
  `{"ARGS":${JSON.stringify(args)},"INSTRUCTION":"CALL","NAME":"f","RESULT":${
    JSON.stringify(res)
  },"TIME":"${time}"}`,
  ...res.flatMap((r, i) => [
    `{"INSTRUCTION":"MEMORY","MEMORY":"${mem[i]![0]}","NAME":"${r}"}`,
    `{"ALIAS":"${mem[i]![1]}","INSTRUCTION":"ALIAS","NAME":"${r}"}`,
  ]),
];
const REL = (n: string) => `{"INSTRUCTION":"RELEASE","NAME":"${n}"}`;
const compile = (lines: string[]) => compileTrace(parseTrace(lines.join("\n")));

Deno.test("fast replay: the baseline frees constants once unreferenced; budgeted replays keep them", () => {
  // w (100, constant) is read once and released; then a chain of 3 x 100.
  const L = [
    ...C("w", 100),
    ...CALL(["a"], ["w"], 10, [[100, -1]]),
    REL("w"),
    ...CALL(["b"], ["a"], 10, [[100, -1]]),
    REL("a"),
    ...CALL(["c"], ["b"], 10, [[100, -1]]),
  ];
  const c = compile(L);
  const base = fastReplay(c, { budgetBytes: Infinity, policy: "dtr-eq", overheadLimit: 2 });
  assert.equal(base.peakBytes, 200, "w is gone before b: never more than two of 100");
  assert.equal(base.computeNs, 30);
  // Under a budget w stays (pinned): a, then b evicts a (released: eager), c fits in 300.
  const r = fastReplay(c, { budgetBytes: 300, policy: "dtr-eq", overheadLimit: 2 });
  assert.ok(r.feasible);
  assert.equal(r.peakBytes, 300);
  assert.equal(r.eagerDrops, 1, "a, released, is evicted at once; w (pinned) stays");
  assert.equal(r.evictions, 0);
  const tight = fastReplay(c, { budgetBytes: 200, policy: "dtr-eq", overheadLimit: 2 });
  assert.equal(tight.reason, "out of memory", "w, a (locked, b reads it) and b do not fit 200");
});

Deno.test("fast replay: a view costs its own op again after its storage comes back", () => {
  // a = f(x) (100, 7 ns); v = view(a) (alias 0, 3 ns); b = g(x) (100, 5 ns, released); h = k(v) (10, 5 ns).
  const L = [
    ...C("x", 10),
    ...CALL(["a"], ["x"], 7, [[100, -1]]),
    ...CALL(["v"], ["a"], 3, [[0, 0]]),
    REL("a"),
    ...CALL(["b"], ["x"], 5, [[100, -1]]),
    REL("b"),
    ...CALL(["h"], ["v"], 5, [[10, -1]]),
  ];
  const c = compile(L);
  const base = fastReplay(c, { budgetBytes: Infinity, policy: "lru", overheadLimit: 2 });
  assert.equal(base.peakBytes, 210);
  assert.equal(base.computeNs, 20);
  // 150: b evicts a's storage; h needs v: a is recomputed (7), then the view's op (3).
  const r = fastReplay(c, { budgetBytes: 150, policy: "lru", overheadLimit: Infinity });
  assert.ok(r.feasible);
  assert.equal(r.evictions, 1);
  assert.equal(r.eagerDrops, 1, "b");
  assert.equal(r.remats, 2);
  assert.equal(r.recomputeNs, 10);
  assert.equal(r.overhead, 30 / 20);
  assert.equal(r.peakBytes, 120);
});

Deno.test("fast replay: COPY, COPY_FROM and MUTATE move references as the published parser does", () => {
  const L = [
    ...C("x", 100),
    ...CALL(["a"], ["x"], 10, [[100, -1]]),
    `{"DST":"k","INSTRUCTION":"COPY","SRC":"a"}`,
    REL("a"),
    ...CALL(["b"], ["x"], 10, [[100, -1]]),
    // k now names b: a loses its last reference and is evicted eagerly.
    `{"DST":"k","INSTRUCTION":"COPY_FROM","SRC":"b"}`,
    // in-place on b (through k): a new version of 100, the old one released
    `{"ARGS":["k","x"],"INSTRUCTION":"MUTATE","MUTATE":["0"],"NAME":"add_","TIME":"10"}`,
  ];
  const c = compile(L);
  const base = fastReplay(c, { budgetBytes: Infinity, policy: "dtr-eq", overheadLimit: 2 });
  // x + a, then x + a + b (300), then a freed; mutate: x + b + b' (300).
  assert.equal(base.peakBytes, 300);
  assert.equal(base.computeNs, 30);
  assert.equal(base.endBytes, 300, "b is still named by b; b' by k");
});

const resnet = await shared("resnet32-56.log");
const unet = await shared("unet-6.log");

for (const [name, text] of [["resnet32-56.log", resnet], ["unet-6.log", unet]] as const) {
  Deno.test({
    name: `fast replay makes the Engine's decisions on ${name} (dtr-eq, dtr-local, msps, lru)`,
    ignore: text === null,
    fn() {
      const t = parseTrace(text!);
      const ratios = [0.9, 0.7, 0.5, 0.4, 0.3, 0.2];
      for (const policy of ["dtr-eq", "dtr-local", "msps", "lru"]) {
        const a = simulateTrace(t, { policy, ratios, engine: "engine" });
        const b = simulateTrace(t, { policy, ratios, engine: "fast" });
        assert.equal(b.baseline.peakBytes, a.baseline.peakBytes);
        assert.equal(b.baseline.computeNs, a.baseline.computeNs);
        for (let i = 0; i < ratios.length; i++) {
          const x = a.results[i]!, y = b.results[i]!;
          const at = `${policy} at ${ratios[i]}`;
          assert.equal(y.feasible, x.feasible, at);
          assert.equal(y.reason, x.reason, at);
          if (x.feasible) {
            assert.equal(y.overhead, x.overhead, at);
            assert.equal(y.evictions, x.evictions, at);
            assert.equal(y.remats, x.remats, at);
            assert.equal(y.peakBytes, x.peakBytes, at);
          }
        }
      }
    },
  });
}

Deno.test("fast replay agrees with the Engine on a small LSTM-like trace (dtr-eq, dtr-local, msps)", () => {
  const t = parseTrace(lstmLikeTrace({ steps: 6, layers: 2, seed: 3 }));
  for (const policy of ["dtr-eq", "dtr-local", "msps"]) {
    const ratios = [0.9, 0.7, 0.5];
    const a = simulateTrace(t, { policy, ratios, engine: "engine" });
    const b = simulateTrace(t, { policy, ratios });
    assert.deepEqual(
      b.results.map((r) => [r.feasible, r.overhead, r.evictions]),
      a.results.map((r) => [r.feasible, r.overhead, r.evictions]),
      policy,
    );
  }
});

Deno.test("fast replay stops at the thrash limit and reports out of memory apart", () => {
  const t = parseTrace(lstmLikeTrace({ steps: 6, layers: 2, seed: 3 }));
  const c = compileTrace(t);
  const base = fastReplay(c, { budgetBytes: Infinity, policy: "dtr-eq", overheadLimit: 2 });
  let thrash = 0, oom = 0;
  for (const ratio of [0.95, 0.9, 0.8, 0.7, 0.6, 0.3]) {
    const budgetBytes = Math.floor(ratio * base.peakBytes);
    const free = fastReplay(c, { budgetBytes, policy: "lru", overheadLimit: Infinity });
    const r = fastReplay(c, { budgetBytes, policy: "lru", overheadLimit: 2 });
    if (free.feasible && free.overhead <= 2) assert.equal(r.overhead, free.overhead);
    if (free.feasible && free.overhead > 2) {
      assert.equal(r.reason, "thrashing");
      assert.ok(r.recomputeNs > c.computeNs && r.recomputeNs <= free.recomputeNs);
      thrash++;
    }
    if (!free.feasible) {
      assert.equal(free.reason, "out of memory");
      oom++;
    }
  }
  assert.ok(thrash > 0 && oom > 0, `thrash ${thrash}, oom ${oom}`);
});

Deno.test("msps charges a storage the compute of its evicted upstream region (hand-computed)", () => {
  // w (1, constant); a = f(w) (100 B, 50 ns); b = g(a) (100 B, 5 ns); a released (evicted at
  // once: b's upstream region is {a}); c = k(w) (100 B, 20 ns); d = m(w) (100 B, 1 ns) needs
  // room under 300 B: msps scores b (5 + 50) / 100 = 0.55 and c 20 / 100 = 0.2, evicts c.
  // c and d are released; e = n(b) (100 B, 1 ns) finds b resident: nothing is recomputed.
  // Had b been evicted, e would replay a and b (55 ns).
  const L = [
    ...C("w", 1),
    ...CALL(["a"], ["w"], 50, [[100, -1]]),
    ...CALL(["b"], ["a"], 5, [[100, -1]]),
    REL("a"),
    ...CALL(["c"], ["w"], 20, [[100, -1]]),
    ...CALL(["d"], ["w"], 1, [[100, -1]]),
    REL("c"),
    REL("d"),
    ...CALL(["e"], ["b"], 1, [[100, -1]]),
  ];
  const c = compile(L);
  for (const uncachedRegions of [false, true]) {
    const r = fastReplay(c, {
      budgetBytes: 300,
      policy: "msps",
      overheadLimit: 2,
      uncachedRegions,
    });
    assert.ok(r.feasible);
    assert.equal(r.evictions, 1);
    assert.equal(r.remats, 0, "c went, not b");
    assert.equal(r.overhead, 1);
  }
  // lru evicts the stalest, b: e replays a and b.
  const lru = fastReplay(c, { budgetBytes: 300, policy: "lru", overheadLimit: 2 });
  assert.equal(lru.recomputeNs, 55);
});

Deno.test("dtr and msps: the cached region search makes the choices of a fresh walk of every candidate", async () => {
  const traces: [string, string][] = [];
  for (const seed of [1, 2, 3, 4]) {
    traces.push([
      `lstm-like seed ${seed}`,
      lstmLikeTrace({ steps: 12, layers: 1 + (seed % 3), seed }),
    ]);
  }
  for (const name of ["resnet32-56.log", "unet-6.log"]) {
    const text = await shared(name);
    if (text !== null) traces.push([name, text]);
  }
  for (const [name, text] of traces) {
    const c = compileTrace(parseTrace(text));
    const base = fastReplay(c, { budgetBytes: Infinity, policy: "dtr", overheadLimit: 2 });
    for (const policy of ["dtr", "msps"]) {
      for (const ratio of [0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15]) {
        const o = { budgetBytes: Math.floor(ratio * base.peakBytes), policy, overheadLimit: 3 };
        const a = fastReplay(c, o);
        const b = fastReplay(c, { ...o, uncachedRegions: true });
        const at = `${name}, ${policy} at ${ratio}`;
        assert.deepEqual(
          [a.feasible, a.reason, a.overhead, a.evictions, a.remats, a.peakBytes, a.eagerDrops],
          [b.feasible, b.reason, b.overhead, b.evictions, b.remats, b.peakBytes, b.eagerDrops],
          at,
        );
      }
    }
  }
});

Deno.test("dtr, msps, dtr-eq, lru, largest: the fast search chooses what a scan scoring every candidate afresh chooses, choice by choice", () => {
  // LSTM-like traces of several shapes and seeds (their evicted regions are long chains
  // that rematerializations cut), budgets from loose to thrashing; the whole sequence of
  // evicted storages must be the same as the uncached reference's.
  let choices = 0;
  const shapes: [number, number, number][] = [[16, 1, 5], [10, 2, 6], [8, 3, 7], [20, 2, 8]];
  for (const [steps, layers, seed] of shapes) {
    const c = compileTrace(parseTrace(lstmLikeTrace({ steps, layers, seed })));
    const base = fastReplay(c, { budgetBytes: Infinity, policy: "dtr", overheadLimit: 2 });
    for (const policy of ["dtr", "msps", "dtr-eq", "lru", "largest"]) {
      for (const ratio of [0.7, 0.5, 0.35, 0.3, 0.25, 0.2]) {
        const o = { budgetBytes: Math.floor(ratio * base.peakBytes), policy, overheadLimit: 4 };
        const a: number[] = [], b: number[] = [];
        const x = fastReplay(c, { ...o, choices: a });
        const y = fastReplay(c, { ...o, choices: b, uncachedRegions: true });
        const at = `steps ${steps}, layers ${layers}, seed ${seed}: ${policy} at ${ratio}`;
        assert.equal(a.length, x.evictions, at);
        assert.deepEqual(a, b, at);
        assert.deepEqual([x.reason, x.overhead, x.remats], [y.reason, y.overhead, y.remats], at);
        choices += a.length;
      }
    }
  }
  assert.ok(choices > 1000, `only ${choices} choices compared`);
});
