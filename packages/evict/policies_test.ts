import assert from "node:assert/strict";
import { context, evictionPolicyConformance, fixture } from "./_conformance.ts";
import {
  createPolicy,
  DtrEqPolicy,
  DtrLocalPolicy,
  DtrPolicy,
  isPolicyName,
  LruPolicy,
  MspsPolicy,
  POLICY_NAMES,
} from "./policies.ts";
import { plannerNeeds, planPolicy } from "./planner.ts";
import { createPlanner } from "./planners.ts";
import { LibraPlanner } from "./libra_planner.ts";
import { LookaheadPolicy } from "./lookahead.ts";
import { needsOf, type PlanControl, UNDECLARED_NEEDS } from "./policy.ts";

for (const n of POLICY_NAMES) {
  evictionPolicyConformance(n, () => createPolicy(n));
  evictionPolicyConformance(`${n}+swap`, () => createPolicy(`${n}+swap`));
  evictionPolicyConformance(
    `${n} (sqrt sampling)`,
    () => createPolicy(n, { mode: "sqrt", seed: 3 }),
  );
}
evictionPolicyConformance(
  "planPolicy(fallback dtr-eq)",
  () => planPolicy({ planner: "test", budgetBytes: 1, steps: [] }, createPolicy("dtr-eq")),
);

Deno.test("dtr-local scores c / (m * staleness) and evicts the lowest", () => {
  const { lineage, chain } = fixture();
  const ctx = context(lineage, chain, { clock: 1000 });
  const p = new DtrLocalPolicy();
  const s = chain[2]!; // cost 10 + 74 % 50 = 34, bytes 32 * (1 + 10 % 7) = 128, lastAccess 201
  assert.equal(s.compute, 34);
  assert.equal(s.bytes, 128);
  assert.equal(p.score(s, ctx), 34 / (128 * (1000 - 201)));
  const scores = chain.map((x) => p.score(x, ctx));
  const best = chain[scores.indexOf(Math.min(...scores))]!;
  assert.equal(p.choose(ctx)[0]!.storage, best);
  assert.equal(
    p.score(chain[7]!, context(lineage, chain, { clock: 701 })),
    Infinity,
    "staleness 0",
  );
});

Deno.test("dtr adds the evicted neighbourhood; dtr-eq the distinct neighbouring classes", () => {
  const { lineage, chain } = fixture();
  // Evict t1 and t3 (t2 between them), and t4's neighbour t5.
  for (const i of [1, 3, 5]) chain[i]!.residency = "evicted";
  const c = chain.map((s) => s.compute);
  const ctx = context(lineage, [chain[2]!, chain[4]!], { clock: 1000 });
  const m = (i: number) => chain[i]!.bytes * (1000 - chain[i]!.lastAccess);
  assert.equal(new DtrPolicy().score(chain[2]!, ctx), (c[2]! + c[1]! + c[3]!) / m(2));
  assert.equal(new DtrPolicy().score(chain[4]!, ctx), (c[4]! + c[3]! + c[5]!) / m(4));
  chain[1]!.eq = lineage.classes.add(c[1]!);
  chain[3]!.eq = lineage.classes.add(c[3]!);
  chain[5]!.eq = lineage.classes.add(c[5]!);
  assert.equal(new DtrEqPolicy().score(chain[2]!, ctx), (c[2]! + c[1]! + c[3]!) / m(2));
  lineage.classes.merge(chain[3]!.eq, chain[5]!.eq);
  lineage.classes.merge(chain[1]!.eq, chain[3]!.eq);
  // One class {t1, t3, t5} now: counted once, at its full value.
  const all = c[1]! + c[3]! + c[5]!;
  assert.equal(new DtrEqPolicy().score(chain[2]!, ctx), (c[2]! + all) / m(2));
  assert.equal(new DtrEqPolicy().score(chain[4]!, ctx), (c[4]! + all) / m(4));
});

Deno.test("msps divides c plus evicted ancestors by size; lru picks the oldest access", () => {
  const { lineage, chain } = fixture();
  chain[0]!.residency = "evicted";
  chain[1]!.residency = "evicted";
  const ctx = context(lineage, chain.slice(2));
  const c = chain.map((s) => s.compute);
  assert.equal(new MspsPolicy().score(chain[2]!, ctx), (c[2]! + c[1]! + c[0]!) / chain[2]!.bytes);
  assert.equal(new LruPolicy().choose(ctx)[0]!.storage, chain[2]);
});

Deno.test("swap-aware policies swap when the copy is cheaper than recomputation", () => {
  const { lineage, chain } = fixture();
  const cheapSwap = {
    ...context(lineage, chain, { swap: true }),
    costModel: { name: "x", callCost: () => 0, swapCost: () => 0.001 },
  };
  const v = createPolicy("dtr-eq+swap").choose(cheapSwap);
  assert.equal(v[0]!.action, "swap");
  const dearSwap = {
    ...cheapSwap,
    costModel: { name: "x", callCost: () => 0, swapCost: () => 1e12 },
  };
  assert.equal(createPolicy("dtr-eq+swap").choose(dearSwap)[0]!.action, "drop");
});

Deno.test("candidate search skips storages under minBytes unless nothing else is left", () => {
  const { lineage, chain } = fixture();
  const small = chain.filter((s) => s.bytes < 100);
  const p = createPolicy("largest", { minBytes: 100 });
  assert.ok(p.choose(context(lineage, chain))[0]!.storage.bytes >= 100);
  const lru = createPolicy("lru", { minBytes: 100 });
  assert.ok(lru.choose(context(lineage, chain))[0]!.storage.bytes >= 100, "small storages skipped");
  assert.equal(lru.choose(context(lineage, small)).length, 1, "falls back to small ones");
});

Deno.test("createPolicy() rejects unknown names, listing the known ones", () => {
  assert.throws(
    () => createPolicy("belady"),
    /unknown eviction policy "belady" \(policies: dtr, dtr-eq/,
  );
});

Deno.test("policies declare what they read; planners declare their fallback and host memory", () => {
  // What each score reads, from its formula (see policies.ts): dtr walks evicted
  // regions, dtr-eq reads equivalence classes, the rest read only the storage.
  const expected: Record<string, { equivalenceClasses: boolean; regions: boolean }> = {
    "dtr": { equivalenceClasses: false, regions: true },
    "dtr-eq": { equivalenceClasses: true, regions: false },
    "dtr-local": { equivalenceClasses: false, regions: false },
    "msps": { equivalenceClasses: false, regions: false },
    "lru": { equivalenceClasses: false, regions: false },
    "largest": { equivalenceClasses: false, regions: false },
    "random": { equivalenceClasses: false, regions: false },
  };
  assert.deepEqual(Object.keys(expected).sort(), [...POLICY_NAMES].sort());
  for (const [name, reads] of Object.entries(expected)) {
    assert.deepEqual(needsOf(createPolicy(name)), { swaps: false, ...reads }, name);
    assert.deepEqual(needsOf(createPolicy(`${name}+swap`)), { swaps: true, ...reads }, name);
    assert.ok(isPolicyName(name) && isPolicyName(`${name}+swap`), name);
  }
  assert.ok(!isPolicyName("libra") && !isPolicyName("lru+swap+swap") && !isPolicyName(""));
  // A policy object that declares nothing keeps the classes a reader of them would need.
  const bare = { name: "lru+swap", choose: () => [] };
  assert.deepEqual(needsOf(bare), UNDECLARED_NEEDS);
  assert.equal(needsOf(bare).swaps, false, "a name is not a capability");
  // A plan runs with its fallback's needs (a lookahead plan with its policy's).
  const plan = { planner: "test", budgetBytes: 1, steps: [] };
  assert.deepEqual(needsOf(planPolicy(plan, createPolicy("dtr-eq+swap"))), {
    swaps: true,
    equivalenceClasses: true,
    regions: false,
  });
  assert.deepEqual(needsOf(planPolicy(plan, createPolicy("lru"))), needsOf(createPolicy("lru")));
  assert.deepEqual(plannerNeeds(createPlanner("libra")), { swaps: true, fallback: "dtr-eq+swap" });
  assert.deepEqual(plannerNeeds(new LibraPlanner({ swap: false })), {
    swaps: false,
    fallback: "dtr-eq",
  });
  for (const p of ["chen-sqrt", "lookahead"]) {
    assert.deepEqual(plannerNeeds(createPlanner(p)), { swaps: false, fallback: "dtr-eq" }, p);
  }
  for (
    const [cost, reads] of [
      ["ancestors", {}],
      ["local", {}],
      ["eq", { equivalenceClasses: true }],
      ["nbhd", { regions: true }],
    ] as const
  ) {
    const p = new LookaheadPolicy({ calls: 0, startNs: [0], memBytes: [0], values: {} }, { cost });
    assert.deepEqual(p.needs, reads, cost);
  }
});

Deno.test("planPolicy runs a call's restores and `before` evictions in plan order before it, other evictions after it", () => {
  const plan = {
    planner: "test",
    budgetBytes: 1,
    steps: [
      { kind: "evict" as const, call: 1, tensor: "z" },
      { kind: "restore" as const, call: 1, tensor: "a" },
      { kind: "restore" as const, call: 1, tensor: "b" },
      { kind: "evict" as const, call: 1, tensor: "a", before: true },
      { kind: "restore" as const, call: 1, tensor: "c" },
      { kind: "evict" as const, call: 1, tensor: "b", before: true, action: "swap" as const },
      { kind: "evict" as const, call: 0, tensor: "y", action: "swap" as const },
    ],
  };
  const log: string[] = [];
  const ctl = {
    evict: (name: string, action: string) => (log.push(`${action} ${name}`), true),
    restore: (name: string) => (log.push(`restore ${name}`), true),
  };
  const hooks = planPolicy(plan, createPolicy("dtr-eq")).hooks!;
  for (const i of [0, 1, 2]) {
    log.push(`before ${i}`);
    hooks.beforeCall!(i, ctl);
    log.push(`after ${i}`);
    hooks.afterCall!(i, ctl);
  }
  assert.deepEqual(log, [
    "before 0",
    "after 0",
    "swap y",
    "before 1",
    "restore a",
    "restore b",
    "drop a",
    "restore c",
    "swap b",
    "after 1",
    "drop z",
    "before 2",
    "after 2",
  ]);
});

Deno.test("planPolicy installs hooks only for a plan with steps, and they run its steps at their calls", () => {
  const empty = { planner: "test", budgetBytes: 1, steps: [] };
  for (const fallbackAction of [undefined, "drop"] as const) {
    const p = { ...empty, ...(fallbackAction ? { fallbackAction } : {}) };
    assert.equal(planPolicy(p, createPolicy("dtr-eq")).hooks, undefined, "nothing to hook");
  }
  const done: string[] = [];
  const ctl: PlanControl = {
    evict: (t, a) => (done.push(`evict ${t} ${a}`), true),
    restore: (t) => (done.push(`restore ${t}`), true),
  };
  const hooks = planPolicy({
    ...empty,
    steps: [
      { kind: "evict", call: 2, tensor: "a", action: "swap" },
      { kind: "restore", call: 3, tensor: "a" },
      { kind: "evict", call: 3, tensor: "b", before: true },
    ],
  }, createPolicy("dtr-eq")).hooks!;
  for (let i = 0; i < 5; i++) {
    hooks.beforeCall!(i, ctl);
    hooks.afterCall!(i, ctl);
  }
  assert.deepEqual(done, ["evict a swap", "restore a", "evict b drop"]);
});
