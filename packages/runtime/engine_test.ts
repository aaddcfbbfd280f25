import assert from "node:assert/strict";
import { AnalyticCostModel, DEVICE_PEAKS } from "@libra/cost";
import { createPolicy, type EvictionPolicy } from "@libra/evict";
import { NO_CLASS, type TensorNode } from "@libra/lineage";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Engine, RELEASE_SAMPLE } from "./engine.ts";
import { SEARCH_SAMPLE } from "./_eviction.ts";
import { slowOldest } from "./_policy_testing.ts";
import { OutOfBudgetError, ThrashingError } from "./errors.ts";
import { MetaExecutor, replayTrace } from "./simulator.ts";
import { Runtime } from "./runtime.ts";
import { formatTrace, parseTrace } from "./trace.ts";
import type { RuntimeEvent } from "./stats.ts";

const cost = new AnalyticCostModel();

function engine(budgetBytes = Infinity, policy = "dtr-eq") {
  return new Engine({
    budgetBytes,
    policy: createPolicy(policy),
    costModel: cost,
    executor: new MetaExecutor(),
    gc: false,
  });
}

/** x (pinned) -> a[10] -> b[20] -> c[40] -> d[80] on `e`, every value 8 bytes, references kept. */
function chain(e: Engine) {
  const x = e.leaf(8, "x", { pinned: true });
  const [a] = e.compute("f", [], [x], [{ bytes: 8, name: "a" }], 10) as [TensorNode];
  const [b] = e.compute("f", [], [a], [{ bytes: 8, name: "b" }], 20) as [TensorNode];
  const [c] = e.compute("f", [], [b], [{ bytes: 8, name: "c" }], 40) as [TensorNode];
  const [d] = e.compute("f", [], [c], [{ bytes: 8, name: "d" }], 80) as [TensorNode];
  return { x, a, b, c, d };
}

Deno.test("Engine re-materializes a 100k-long evicted chain without stack overflow", () => {
  const e = engine();
  const x = e.leaf(4, "x", { pinned: true });
  let t = x;
  const chain: TensorNode[] = [];
  for (let i = 0; i < 100_000; i++) {
    [t] = e.compute("f", [], [t], [{ bytes: 4 }], 1) as [TensorNode];
    chain.push(t);
  }
  for (const c of chain) e.evict(c.storage, "drop", "policy");
  assert.equal(e.used, 4);
  e.materialize(t);
  assert.ok(t.defined);
  assert.equal(e.stats.remats, 100_000);
  assert.equal(e.stats.recomputeNs, 100_000);
  assert.equal(e.used, 4 + 4 * 100_000);
});

/**
 * A policy that needs classes, calls `look` when it chooses and evicts `victim`
 * (its choices are the test's: the classes are what is under test).
 */
function probe(victim: () => TensorNode, look: () => void = () => {}): EvictionPolicy {
  return {
    name: "probe",
    needs: { equivalenceClasses: true },
    choose() {
      look();
      return [{ storage: victim().storage, action: "drop" }];
    },
  };
}

/**
 * Makes `e`'s policy choose once: with the budget at what is in use, a new
 * 8-byte value computed from `x` needs one victim. The budget is put back.
 */
function search(e: Engine, x: TensorNode): TensorNode {
  const budget = e.budgetBytes;
  e.setBudget(e.used);
  const [z] = e.compute("f", [], [x], [{ bytes: 8, name: "z" }], 1) as [TensorNode];
  e.setBudget(budget);
  return z;
}

Deno.test("Engine keeps dtr-eq classes: merge on evict, subtract on re-materialize, never split", () => {
  // x -> a[10] -> b[20] -> c[40] -> d[80], all 8 bytes, references kept; the first
  // search (which evicts a) starts the classes.
  const e = engine(1024);
  const { x, a, b, c, d } = chain(e);
  e.setPolicy(probe(() => a));
  search(e, x);
  e.evict(c.storage, "drop", "policy");
  assert.notEqual(
    e.lineage.classValueOf(a.storage),
    e.lineage.classValueOf(c.storage)! + 1,
    "two classes",
  );
  assert.equal(e.lineage.classValueOf(a.storage), 10);
  assert.equal(e.lineage.classValueOf(c.storage), 40);
  assert.equal(e.lineage.neighborClassCost(b.storage), 50);
  e.evict(b.storage, "drop", "policy");
  assert.equal(e.lineage.classValueOf(a.storage), 70, "b joined a and c into one class");
  assert.equal(e.lineage.neighborClassCost(d.storage), 70);
  e.materialize(b); // recomputes a then b
  assert.equal(e.lineage.classOf(a.storage), NO_CLASS);
  assert.equal(
    e.lineage.classValueOf(c.storage),
    40,
    "subtracted a and b; the class is not split",
  );
  assert.equal(e.stats.remats, 2);
});

Deno.test("Engine keeps equivalence classes only for a policy that needs them", () => {
  // x -> a[10] -> b[20] -> c[40] -> d[80]; drop a and c under lru (no classes), then
  // install a policy that needs them: at its first search the evicted storages form
  // the classes of their regions.
  const e = engine(1024, "lru");
  const { x, a, b, c, d } = chain(e);
  e.evict(a.storage, "drop", "policy");
  e.evict(c.storage, "drop", "policy");
  assert.equal(e.lineage.classOf(a.storage), NO_CLASS, "lru reads no classes: none kept");
  assert.equal(e.lineage.classOf(c.storage), NO_CLASS);
  const seen: (number | null)[] = [];
  const value = (t: TensorNode) => {
    return e.lineage.classValueOf(t.storage) ?? null;
  };
  e.setPolicy(probe(() => b, () => seen.push(value(a), value(c))));
  assert.equal(e.lineage.classOf(a.storage), NO_CLASS, "none before the policy chooses");
  search(e, x);
  assert.deepEqual(seen, [10, 40], "{a} and {c} are separate regions when it chooses");
  assert.equal(value(a), 70, "kept from then on: its victim b joins a and c");
  assert.equal(e.lineage.neighborClassCost(d.storage), 70);
  e.setPolicy(createPolicy("lru"));
  e.evict(d.storage, "drop", "policy");
  assert.equal(value(d), 150, "once on, classes stay on");
});

Deno.test("Engine keeps equivalence classes from the first search on, not for a budget never reached", () => {
  // x -> a[10] -> b[20] -> c[40] -> d[80]; drops with no search keep no classes (a run
  // whose budget is never reached would merge them on every free for nothing); the
  // first search starts them from the evicted regions of the moment.
  const e = engine();
  const { x, a, b, c, d } = chain(e);
  const seen: (number | null)[] = [];
  e.setPolicy(probe(() => c, () => {
    seen.push(e.lineage.classValueOf(b.storage) ?? null);
  }));
  e.evict(a.storage, "drop", "policy");
  e.evict(b.storage, "drop", "policy");
  assert.equal(e.lineage.classOf(a.storage), NO_CLASS, "no search: no classes");
  e.setBudget(1024);
  assert.equal(e.lineage.classOf(a.storage), NO_CLASS, "a budget alone starts none");
  search(e, x);
  assert.deepEqual(seen, [30], "{a, b} is one region when the policy chooses");
  assert.equal(e.lineage.classValueOf(a.storage), 70, "kept from then on: c joins");
  assert.equal(e.lineage.neighborClassCost(d.storage), 70);
  e.materialize(c); // recomputes a, b, then c: each leaves the class
  assert.equal(e.stats.remats, 3);
  for (const t of [a, b, c]) assert.equal(e.lineage.classOf(t.storage), NO_CLASS);
});

Deno.test("Runtime gives host memory by a policy's declared needs, not its name", () => {
  const backend = new ReferenceBackend();
  const named = { name: "lru+swap", choose: () => [] };
  const declared = { name: "mine", needs: { swaps: true }, choose: () => [] };
  const host = (policy: typeof named) => {
    const rt = new Runtime({ backend, policy, budget: 64 });
    const buf = rt.alloc(64);
    rt.write(buf, new Float32Array(16));
    // A leaf cannot be dropped: it may only be swapped, which needs host memory.
    const s = rt.engine.lineage.storages.values().next().value!;
    return rt.engine.evictableBytes === s.bytes;
  };
  assert.equal(host(named), false, "a +swap name alone gives no host memory");
  assert.equal(host(declared), true);
  assert.equal(host(createPolicy("lru+swap") as typeof named), true);
});

Deno.test("Engine never exceeds the budget and reports OutOfBudgetError facts on a random graph", () => {
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (const policy of ["dtr-eq", "dtr", "lru", "msps", "random"]) {
    const lines: string[] = [];
    const live: string[] = [];
    for (let i = 0; i < 4; i++) {
      lines.push(
        `{"INSTRUCTION":"CONSTANT","NAME":"p${i}"}`,
        `{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"p${i}"}`,
      );
      live.push(`p${i}`);
    }
    for (let i = 0; i < 300; i++) {
      const args = [live[live.length - 1 - Math.floor(rnd() * 3)]!, live[Math.floor(rnd() * 4)]!];
      const bytes = 32 * (1 + Math.floor(rnd() * 8));
      lines.push(
        `{"ARGS":${
          JSON.stringify(args)
        },"INSTRUCTION":"CALL","NAME":"op","RESULT":["t${i}"],"TIME":"${
          1 + Math.floor(rnd() * 100)
        }"}`,
        `{"INSTRUCTION":"MEMORY","MEMORY":"${bytes}","NAME":"t${i}"}`,
        `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"t${i}"}`,
      );
      live.push(`t${i}`);
      while (live.length > 14 || (live.length > 8 && rnd() < 0.3)) {
        const k = 4 + Math.floor(rnd() * (live.length - 5));
        lines.push(`{"INSTRUCTION":"RELEASE","NAME":"${live[k]}"}`);
        live.splice(k, 1);
      }
    }
    for (const n of live.slice(4, -1)) lines.push(`{"INSTRUCTION":"RELEASE","NAME":"${n}"}`);
    const trace = parseTrace(lines.join("\n"));
    const free = replayTrace(trace).stats.peakBytes;
    let feasibleSeen = false, infeasibleSeen = false;
    for (const ratio of [0.9, 0.6, 0.4, 0.2, 0.05, 0.01]) {
      const budget = Math.floor(ratio * free);
      const r = replayTrace(trace, {
        policy,
        budgetBytes: budget,
        timeline: true,
        knownFeasibleBytes: free,
      });
      assert.ok(
        r.stats.peakBytes <= budget,
        `${policy} ${ratio}: peak ${r.stats.peakBytes} > ${budget}`,
      );
      for (const b of r.timeline.bytes) assert.ok(b <= budget);
      if (Deno.env.get("DBG")) {
        console.log(
          policy,
          ratio,
          r.feasible,
          r.stats.peakBytes,
          budget,
          r.error?.message,
          r.stats.calls,
        );
      }
      if (r.feasible) {
        feasibleSeen = true;
        assert.ok(r.overhead >= 1);
      } else {
        infeasibleSeen = true;
        const err = r.error!;
        assert.ok(err instanceof OutOfBudgetError);
        assert.equal(err.budgetBytes, budget);
        assert.equal(err.knownFeasibleBytes, free);
        if (err instanceof ThrashingError) {
          assert.equal(err.reason, "thrashing");
          assert.ok(
            err.recomputeNs + err.stallNs > (err.overheadLimit - 1) * err.baselineComputeNs,
            "it really thrashed",
          );
        } else {
          assert.equal(err.reason, "out of memory");
          assert.ok(err.usedBytes + err.neededBytes > budget, "it really did not fit");
        }
        assert.ok(err.usedBytes <= budget);
      }
    }
    assert.ok(
      feasibleSeen && infeasibleSeen,
      `${policy}: both outcomes exercised (free peak ${free})`,
    );
  }
});

Deno.test("Engine events report calls, evictions and re-materializations", () => {
  const events: RuntimeEvent[] = [];
  const e = new Engine({
    budgetBytes: 24,
    policy: createPolicy("lru"),
    costModel: cost,
    executor: new MetaExecutor(),
    onEvent: (ev) => events.push(ev),
  });
  const x = e.leaf(8, "x", { pinned: true });
  const [a] = e.compute("f", [], [x], [{ bytes: 8, name: "a" }], 1) as [TensorNode];
  const [b] = e.compute("f", [], [a], [{ bytes: 8, name: "b" }], 1) as [TensorNode];
  e.compute("f", [], [b], [{ bytes: 8, name: "c" }], 1);
  e.materialize(a);
  const kinds = events.map((ev) =>
    ev.type === "evict" ? `evict:${ev.name}` : ev.type === "remat" ? `remat:${ev.name}` : ev.type
  );
  assert.deepEqual(kinds, ["call", "call", "evict:a", "call", "evict:b", "remat:a"]);
  assert.deepEqual(e.timeline.markers.map((m) => m.kind), ["drop", "drop", "remat"]);
});

/** A small MLP forward and backward written as raw kernel calls on a Runtime. */
function mlpStep(rt: Runtime): void {
  const B = 64, D = 32;
  const f = (n: number, v: (i: number) => number) =>
    Float32Array.from({ length: n }, (_, i) => v(i));
  const w = [0, 1, 2].map((k) => {
    const b = rt.alloc(D * D * 4);
    rt.write(b, f(D * D, (i) => Math.sin(i * 0.37 + k) * 0.2));
    return b;
  });
  const x = rt.alloc(B * D * 4);
  rt.write(x, f(B * D, (i) => Math.cos(i * 0.11)));
  const mm = (a: typeof x, b: typeof x, ta = 0, tb = 0, m = B, k = D, n = D) => {
    const y = rt.alloc(m * n * 4);
    rt.run("matmul", [a, b], [y], [1, m, n, k, ta, tb, 0, 0]);
    return y;
  };
  const hs = [x];
  const zs: typeof hs = [];
  for (let l = 0; l < 3; l++) {
    const z = mm(hs[l]!, w[l]!);
    const h = rt.alloc(B * D * 4);
    rt.run("relu", [z], [h], [B * D]);
    zs.push(z);
    hs.push(h);
  }
  let g = rt.alloc(B * D * 4);
  rt.run("mul_scalar", [hs[3]!], [g], [B * D, 1 / B]);
  for (let l = 2; l >= 0; l--) {
    const gz = rt.alloc(B * D * 4);
    rt.run("relu_backward", [zs[l]!, g], [gz], [B * D]);
    rt.free(g);
    const gw = mm(hs[l]!, gz, 1, 0, D, B, D);
    const ng = mm(gz, w[l]!, 0, 1, B, D, D);
    rt.free(gz);
    rt.read(gw);
    rt.free(gw);
    rt.free(zs[l]!);
    if (l > 0) rt.free(hs[l]!);
    g = ng;
  }
  rt.free(g);
  rt.free(hs[3]!);
}

Deno.test("a simulated replay of a recorded live step makes the same eviction decisions", () => {
  const analytic = new AnalyticCostModel(DEVICE_PEAKS.cpu!);
  const probe = new Runtime({ backend: new ReferenceBackend(), costModel: analytic });
  mlpStep(probe);
  const free = probe.stats.peakBytes;
  for (const policy of ["dtr-eq", "dtr", "msps"]) {
    const budget = Math.floor(0.6 * free);
    const rt = new Runtime({
      backend: new ReferenceBackend(),
      budget,
      policy,
      costModel: analytic,
      record: true,
    });
    rt.engine.recordDecisions = true;
    mlpStep(rt);
    const live = rt.engine.decisions;
    assert.ok(live.length > 0, "the budget forced evictions");
    const trace = parseTrace(formatTrace(rt.trace()));
    const sim = replayTrace(trace, {
      budgetBytes: budget,
      policy,
      recordDecisions: true,
      leafRelease: "keep-if-needed",
    });
    assert.ok(sim.feasible);
    assert.deepEqual(sim.decisions.slice(0, live.length), live, policy);
    assert.equal(sim.stats.computeNs, rt.stats.computeNs);
    assert.equal(sim.stats.peakBytes, rt.stats.peakBytes, "same peak");
    assert.equal(sim.stats.remats, rt.stats.remats, "same recomputations");
  }
});

Deno.test("Runtime.applyPlan() steers a live step by step-relative names and call indices", () => {
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    record: true,
    costModel: new AnalyticCostModel(),
  });
  mlpStep(rt);
  const trace = parseTrace(formatTrace(rt.trace()));
  rt.endStep();
  const call1 = trace.events.filter((e) => e.kind === "call")[1]!;
  assert.equal(
    call1.kind === "call" && call1.results[0]!.name,
    "c1.0",
    "outputs are named c<call>.<k>",
  );
  const plan = {
    planner: "hand",
    budgetBytes: Infinity,
    steps: [{ kind: "evict" as const, call: 1, tensor: "c1.0" }],
  };
  const before = { ...rt.stats };
  rt.applyPlan(plan);
  mlpStep(rt);
  assert.equal(rt.stats.evictions - before.evictions, 1, "the planned eviction happened");
  assert.equal(rt.stats.remats - before.remats, 1, "h1 was recomputed for the backward pass");
  const sim = replayTrace(trace, {
    policy: evict.planPolicy(plan, evict.createPolicy("dtr-eq")),
    leafRelease: "keep-if-needed",
  });
  assert.equal(sim.stats.evictions, 1);
  assert.equal(sim.stats.remats, 1, "the simulator agrees");
  const second = rt.trace();
  assert.ok(
    second.events.slice(0, 4).every((e) => e.kind === "constant"),
    "a new step's trace declares live values",
  );
});

const evict = await import("@libra/evict");

Deno.test("Engine keeps the evictable pool once a budget is set", () => {
  // Without a budget no policy chooses: the pool stays empty (no removal and insertion per
  // call's input). A budget fills it with every evictable storage of the moment, in the
  // order they were made, and the engine evicts from it as usual.
  const e = engine(Infinity, "lru");
  const x = e.leaf(8, "x", { pinned: true });
  const ts: TensorNode[] = [];
  let prev = x;
  for (let i = 0; i < 6; i++) {
    prev = e.compute("f", [], [prev], [{ bytes: 8, name: `v${i}` }], 10)[0]!;
    ts.push(prev);
  }
  assert.equal(e.evictableBytes, 0, "no budget: no pool");
  e.setBudget(7 * 8); // x and the six values: the next output makes room by one eviction
  assert.equal(e.evictableBytes, 6 * 8, "every computed value is evictable (x is pinned)");
  // lru evicts the least recently used: v0, whose last access (reading it for v1) is oldest.
  e.compute("f", [], [ts[5]!], [{ bytes: 8, name: "w" }], 10);
  assert.equal(ts[0]!.storage.residency, "evicted");
  assert.equal(e.stats.evictions, 1);
  for (const t of ts.slice(1)) assert.equal(t.storage.residency, "resident");
});

Deno.test("Engine times a sample of its searches, each counted for the searches it stands for", () => {
  // Searches of 1 ms (the oldest evictable value), a budget of three 8-byte values (x, the
  // input, the output), every value kept: each call from the second evicts one. Clock
  // reads are counted outside the spin (which reads the clock it saved).
  const clock = performance.now.bind(performance);
  const e = new Engine({
    budgetBytes: 24,
    policy: slowOldest(1, clock),
    costModel: cost,
    executor: new MetaExecutor(),
    gc: false,
    timeline: false,
  });
  const x = e.leaf(8, "x", { pinned: true });
  let prev = x;
  let reads = 0;
  const original = performance.now;
  performance.now = () => {
    reads++;
    return clock();
  };
  try {
    for (let i = 0; i < 20 * SEARCH_SAMPLE; i++) {
      prev = e.compute("f", [], [prev], [{ bytes: 8 }], 1)[0]!;
    }
  } finally {
    performance.now = original;
  }
  const n = e.stats.evictions;
  assert.ok(n >= 20 * SEARCH_SAMPLE - 2, `${n} evictions`);
  // Timed every search, three reads each; a sample of one in SEARCH_SAMPLE, about 3 / 16.
  assert.ok(reads < n / 2, `${reads} clock reads for ${n} searches`);
  // Each timed search counts for its gap: all but the last gap's (up to 2 x SEARCH_SAMPLE
  // - 1 searches) are counted, each about 1 ms.
  const ms = e.stats.policyNs / 1e6;
  assert.ok(ms >= n - (2 * SEARCH_SAMPLE - 1), `${ms} ms of searches counted for ${n}`);
  assert.ok(ms <= 1.5 * n, `${ms} ms of searches counted for ${n}`);
  assert.ok(e.stats.bookkeepingNs >= e.stats.policyNs, "the searches are bookkeeping");
});

Deno.test("Engine times one release in RELEASE_SAMPLE into the bookkeeping", () => {
  // x (pinned) -> a chain of values, each released once computed (eager drops).
  const e = engine();
  const x = e.leaf(8, "x", { pinned: true });
  let prev = x;
  const step = () => {
    const [t] = e.compute("f", [], [prev], [{ bytes: 8 }], 1) as [TensorNode];
    if (prev !== x) e.release(prev);
    prev = t;
  };
  step();
  for (let i = 1; i < RELEASE_SAMPLE; i++) step(); // RELEASE_SAMPLE - 1 releases
  assert.equal(e.stats.bookkeepingNs, 0, "no release timed yet");
  for (let i = 0; i < 100 * RELEASE_SAMPLE; i++) step();
  assert.ok(e.stats.bookkeepingNs > 0, "the sampled releases were timed");
  assert.equal(e.stats.eagerDrops, 101 * RELEASE_SAMPLE - 1);
});

Deno.test("Engine.lockInputs nests: each unlockInputs takes off what was locked since its mark; a throwing withInputs unlocks", () => {
  const e = engine();
  const { a, b, c } = chain(e);
  const locks = () => [a, b, c].map((t) => t.storage.locks);
  const outer = e.lockInputs([a, b]);
  const inner = e.lockInputs([c, a]);
  assert.deepEqual(locks(), [2, 1, 1]);
  e.unlockInputs(inner);
  assert.deepEqual(locks(), [1, 1, 0]);
  e.unlockInputs(outer);
  assert.deepEqual(locks(), [0, 0, 0]);
  assert.throws(
    () =>
      e.withInputs([a, c], () => {
        assert.deepEqual(locks(), [1, 0, 1]);
        e.withInputs([a], () => {
          throw new Error("kernel failed");
        });
      }),
    /kernel failed/,
  );
  assert.deepEqual(locks(), [0, 0, 0]);
});

Deno.test("Engine.lockInputs: when an input cannot be brought back, what it locked before comes off", () => {
  const e = engine(48);
  const { a, b, c, d } = chain(e);
  const [f] = e.compute("f", [], [d], [{ bytes: 8, name: "f" }], 160) as [TensorNode];
  e.evict(b.storage, "drop", "policy");
  const [g] = e.compute("f", [], [f], [{ bytes: 8, name: "g" }], 320) as [TensorNode];
  assert.equal(e.used, 48);
  // b's recomputation needs 8 bytes: every other value is pinned or locked first.
  assert.throws(() => e.lockInputs([a, c, d, f, g, b]), OutOfBudgetError);
  assert.deepEqual([a, b, c, d, f, g].map((t) => t.storage.locks), [0, 0, 0, 0, 0, 0]);
  assert.equal(b.storage.residency, "evicted");
});

Deno.test("Engine: an in-place update of a value a view's call read leaves the view defined", () => {
  // v views x, computed by a call that also read leaf w. Overwriting w (its readers' lineage
  // cut) freezes that call: v must be brought back first, even where its storage was evicted
  // and only x was needed since, or it could never be computed again.
  const e = new Engine({
    budgetBytes: Infinity,
    policy: createPolicy("dtr-eq"),
    costModel: new AnalyticCostModel(),
    executor: new MetaExecutor(),
    timeline: false,
  });
  const a = e.leaf(64, "a"), w = e.leaf(64, "w");
  const [x] = e.compute("f", [], [a], [{ bytes: 64, name: "x" }], 10);
  const [v, y] = e.compute("g", [], [x!, w], [{ bytes: 0, alias: 0, name: "v" }, {
    bytes: 64,
    name: "y",
  }], 10);
  e.release(y!);
  e.evict(x!.storage, "drop", "policy");
  assert.ok(!v!.defined && !x!.defined, "x's storage dropped: x and its view undefined");
  e.materialize(x!); // x needed again (its view is not)
  assert.ok(x!.defined && !v!.defined);
  e.overwrite(w.storage, false);
  assert.ok(v!.defined, "the view was brought back before its call was frozen");
  assert.equal(v!.producer!.replayable, false);
  // Held through v and cut from w: its storage can no longer be dropped, only swapped.
  assert.equal(x!.storage.droppable, false);
});

Deno.test("OutOfBudgetError names the locked bytes and the chain of re-materializations it failed in", () => {
  // x (pinned) feeds p1..p3 and a; b = g(a, p1), c = g(b, p2), d = g(c, p3); a..d evicted.
  // Bringing d back recomputes c, b, a in turn, each frame locking its input on the device
  // (p3, p2, p1, then x) while it waits: 32 bytes locked, nothing evictable for a's 8.
  const e = engine(64);
  const x = e.leaf(8, "x", { pinned: true });
  const ps = [1, 2, 3].map((i) =>
    (e.compute("p", [], [x], [{ bytes: 8, name: `p${i}` }], 5) as [TensorNode])[0]
  );
  const [a] = e.compute("g", [], [x], [{ bytes: 8, name: "a" }], 10) as [TensorNode];
  const [b] = e.compute("g", [], [a, ps[0]!], [{ bytes: 8, name: "b" }], 10) as [TensorNode];
  const [c] = e.compute("g", [], [b, ps[1]!], [{ bytes: 8, name: "c" }], 10) as [TensorNode];
  const [d] = e.compute("g", [], [c, ps[2]!], [{ bytes: 8, name: "d" }], 10) as [TensorNode];
  for (const t of [a, b, c, d]) e.evict(t.storage, "drop", "policy");
  e.setBudget(36);
  const err = thrown(() => e.materialize(d));
  assert.ok(err instanceof OutOfBudgetError, String(err));
  assert.equal(err.usedBytes, 32);
  assert.equal(err.evictableBytes, 0);
  assert.equal(err.lockedBytes, 32);
  assert.equal(err.keptBytes, 0);
  assert.equal(err.rematDepth, 4);
  assert.match(err.message, /32 locked as inputs of calls running or being re-materialized/);
  assert.match(
    err.message,
    /a chain of 4 evicted values.* Raise the budget or use a policy that can swap\.$/,
  );
  // Nothing stays locked. Under 12 bytes a's recomputation evicts the p's and fails alone.
  assert.deepEqual([x, ...ps].map((t) => t.storage.locks), [0, 0, 0, 0]);
  e.setBudget(12);
  const one = thrown(() => e.materialize(a));
  assert.ok(one instanceof OutOfBudgetError, String(one));
  assert.equal(one.rematDepth, 1);
  assert.equal(one.lockedBytes, 8); // x, a's input
  assert.equal(one.usedBytes, 8);
  assert.match(one.message, /re-materializing an evicted value a call needed/);
});

/** What `f` throws (undefined when it returns). */
function thrown(f: () => void): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  return undefined;
}
