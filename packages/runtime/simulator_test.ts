import assert from "node:assert/strict";
import { plannerConformance } from "@libra/evict/conformance";
import type { Plan, Planner } from "@libra/evict";
import { parseTrace } from "./trace.ts";
import { plannerContext, replayTrace, simulateTrace } from "./simulator.ts";

/** x -> a -> b -> c -> d -> loss, then a backward that reads them in reverse. 1 KiB each. */
function chainTrace() {
  const L: string[] = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x"}`,
  ];
  const call = (op: string, args: string[], res: string, time: number) =>
    L.push(
      `{"ARGS":${
        JSON.stringify(args)
      },"INSTRUCTION":"CALL","NAME":"${op}","RESULT":["${res}"],"TIME":"${time}"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"${res}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${res}"}`,
    );
  const fw = ["a", "b", "c", "d"];
  let prev = "x";
  for (const n of fw) {
    call("f", [prev], n, 100);
    prev = n;
  }
  L.push(`{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}`);
  let g = "d";
  for (const n of [...fw].reverse()) {
    call("f_backward", [n, g], `g${n}`, 200);
    if (g !== "d") L.push(`{"INSTRUCTION":"RELEASE","NAME":"${g}"}`);
    L.push(`{"INSTRUCTION":"RELEASE","NAME":"${n}"}`);
    g = `g${n}`;
  }
  return parseTrace(L.join("\n"));
}

Deno.test("simulateTrace() reports the baseline and one row per ratio", () => {
  const r = simulateTrace(chainTrace(), { policy: "dtr-eq", ratios: [1, 0.8, 0.7, 0.5] });
  assert.equal(r.baseline.computeNs, 4 * 100 + 4 * 200);
  assert.equal(r.baseline.peakBytes, 1024 * 6, "x, a..d and gd");
  assert.deepEqual(r.results.map((x) => x.feasible), [true, true, true, false]);
  assert.equal(r.results[0]!.overhead, 1);
  assert.ok(r.results[2]!.overhead! > 1, "4 KiB of 6 needs recomputation");
  for (const row of r.results) assert.ok(!row.feasible || row.peakBytes <= row.budgetBytes);
  assert.throws(() => simulateTrace(chainTrace(), { ratios: [0] }), /ratio must be > 0/);
});

Deno.test("a plan's hooks evict after and restore before the planned calls", () => {
  const trace = chainTrace();
  const plan: Plan = {
    planner: "hand",
    budgetBytes: Infinity,
    steps: [
      { kind: "evict", call: 1, tensor: "a", action: "drop" },
      { kind: "restore", call: 6, tensor: "a" },
    ],
  };
  const ctx = plannerContext(trace);
  const r = replayTrace(trace, {
    policy: (() => {
      const { planPolicy, createPolicy } = evict;
      return planPolicy(plan, createPolicy("dtr-eq"));
    })(),
    recordDecisions: true,
    timeline: true,
  });
  assert.ok(r.feasible);
  assert.equal(r.stats.evictions, 1);
  assert.equal(r.stats.remats, 1, "a is recomputed once, before the call that reads it");
  assert.equal(r.stats.peakBytes, ctx.baselinePeakBytes - 1024, "a was out of memory at the peak");
});

const evict = await import("@libra/evict");

const noopPlanner: Planner = {
  name: "noop",
  plan: (_t, budgetBytes) => ({ planner: "noop", budgetBytes, steps: [] }),
};
plannerConformance(
  "noop planner (dtr-eq fallback)",
  () => noopPlanner,
  chainTrace(),
  plannerContext(chainTrace()),
);

Deno.test("the thrash limit stops a replay once recomputation passes (X - 1) x the compute", () => {
  const trace = chainTrace();
  const compute = 4 * 100 + 4 * 200;
  // 4 KiB of 6: the backward recomputes part of the chain.
  const free = replayTrace(trace, { budgetBytes: 4 * 1024, overheadLimit: Infinity });
  assert.ok(free.feasible);
  const extra = free.stats.recomputeNs;
  assert.ok(extra > 0);
  assert.equal(free.overhead, (compute + extra) / compute);
  // A limit just above the final overhead lets it finish; just below stops it.
  const above = replayTrace(trace, {
    budgetBytes: 4 * 1024,
    overheadLimit: 1 + (extra + 0.5) / compute,
  });
  assert.ok(above.feasible);
  assert.equal(above.overhead, free.overhead);
  const below = replayTrace(trace, {
    budgetBytes: 4 * 1024,
    overheadLimit: 1 + (extra - 0.5) / compute,
  });
  assert.equal(below.feasible, false);
  assert.equal(below.reason, "thrashing");
  assert.equal(below.overhead, Infinity);
  assert.equal(below.stats.recomputeNs, extra, "stopped by the last recomputation");
  // The budget that cannot hold a call's operands is out of memory, not thrashing.
  const oom = replayTrace(trace, { budgetBytes: 2 * 1024 });
  assert.equal(oom.reason, "out of memory");
  assert.throws(() => replayTrace(trace, { overheadLimit: 0.5 }), /overhead limit must be/);
});

Deno.test("simulateTrace() reports thrashing as its own reason", () => {
  const free = simulateTrace(chainTrace(), { ratios: [4 / 6], overheadLimit: Infinity });
  const over = free.results[0]!.overhead!;
  assert.ok(over > 1);
  const r = simulateTrace(chainTrace(), { ratios: [4 / 6, 2 / 6], overheadLimit: over - 1e-6 });
  assert.deepEqual(r.results.map((x) => [x.feasible, x.reason]), [
    [false, "thrashing"],
    [false, "out of memory"],
  ]);
});

Deno.test('replayTrace(mutate: "in-place") runs an update as the runtime does: unread leaves in place, a read value copied while a value computed from it is held', () => {
  // p (a weight, 1 KiB) and m (momentum, 1 KiB, no call reads it), x (1 KiB); y = f(p, x) is
  // held while the update writes p and m; `release` says whether y goes first.
  const lines = (releaseY: boolean) =>
    [
      `{"INSTRUCTION":"CONSTANT","NAME":"p"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"p"}`,
      `{"INSTRUCTION":"CONSTANT","NAME":"m"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"m"}`,
      `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x"}`,
      `{"ARGS":["p","x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"10"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"y"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
      ...(releaseY ? [`{"INSTRUCTION":"RELEASE","NAME":"y"}`] : []),
      `{"ARGS":["p","m"],"INSTRUCTION":"MUTATE","MUTATE":[0,1],"NAME":"upd","TIME":"10"}`,
    ].join("\n");
  /** Bytes in use after the update. */
  const after = (releaseY: boolean, mutate: "copy" | "in-place") => {
    const r = replayTrace(parseTrace(lines(releaseY), "upd.log"), {
      mutate,
      leafRelease: "keep-if-needed",
      timeline: true,
    });
    assert.ok(r.feasible);
    assert.equal(r.stats.computeNs, 20, "both calls priced at their TIME");
    assert.equal(r.timeline.bytes.length, 2);
    return r.timeline.bytes[1]!;
  };
  const K = 1024;
  // out of place: new versions of p and m beside the old ones
  assert.equal(after(false, "copy"), 6 * K);
  assert.equal(after(true, "copy"), 5 * K);
  // in place: m where it is, p copied (y, computed from the old p, is held)
  assert.equal(after(false, "in-place"), 5 * K);
  // y released: evicted with its lineage kept (until a collection), which may recompute it
  // from the old p, so p is still copied; m changes where it is
  assert.equal(after(true, "in-place"), 4 * K);
});
