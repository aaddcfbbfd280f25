import assert from "node:assert/strict";
import { parseOptions } from "./options.ts";
import {
  aggregate,
  chooseTimelines,
  expandPlan,
  planWorkloads,
  runSuite,
  traceLabel,
} from "./runner.ts";
import { Progress, type ProgressSink } from "./progress.ts";
import { testEngine } from "./_test_engine.ts";

function quietProgress(): { sink: ProgressSink; lines: string[] } {
  const lines: string[] = [];
  let t = 0;
  return { lines, sink: { write: (s) => lines.push(s), isTerminal: false, now: () => (t += 10) } };
}

Deno.test("planWorkloads() makes live and recorded workloads per model/preset and one per trace", () => {
  const w = planWorkloads({
    models: ["mlp"],
    presets: ["tiny", "small"],
    traces: ["/x/a.log", "/y/a.log"],
    skip: [],
  });
  assert.deepEqual(w.map((x) => x.id), [
    "live:mlp/tiny",
    "sim:mlp/tiny",
    "live:mlp/small",
    "sim:mlp/small",
    "trace:a",
    "trace:a-2",
  ]);
  assert.deepEqual(
    planWorkloads({ models: ["mlp"], presets: ["tiny"], traces: ["a.log"], skip: ["live"] }).map((
      x,
    ) => x.id),
    ["sim:mlp/tiny", "trace:a"],
  );
  assert.deepEqual(
    planWorkloads({ models: ["mlp"], presets: ["tiny"], traces: ["a.log"], skip: ["simulated"] })
      .map((x) => x.id),
    ["live:mlp/tiny"],
  );
  assert.equal(traceLabel("../shared/traces/resnet32-56.log"), "resnet32-56");
});

Deno.test("expandPlan() crosses workloads, policies and descending ratios", () => {
  const w = planWorkloads({ models: [], presets: ["tiny"], traces: ["t.log"], skip: [] });
  const p = expandPlan(w, ["a", "b"], [0.5, 1]);
  assert.deepEqual(p.map((e) => `${e.policy}@${e.ratio}`), ["a@1", "a@0.5", "b@1", "b@0.5"]);
});

Deno.test("aggregate() takes medians over repeats and overhead over feasible repeats only", () => {
  const w = planWorkloads({ models: [], presets: [], traces: ["t.log"], skip: [] })[0]!;
  const m = (feasible: boolean, overhead: number | null, ev: number, bk: number) => ({
    feasible,
    overhead,
    evictions: ev,
    remats: 0,
    swapBytes: 0,
    bookkeepingMs: bk,
    peakBytes: 10,
    timeMs: null,
    baselineTimeMs: null,
    error: feasible ? null : "oob",
  });
  const r = aggregate({ workload: w, policy: "p", ratio: 0.5 }, 50, [
    m(true, 1.2, 4, 3),
    m(false, null, 9, 1),
    m(true, 1.4, 5, 2),
  ]);
  assert.equal(r.feasible, false);
  assert.equal(r.feasibleRepeats, 2);
  assert.deepEqual(r.overhead, { median: 1.2999999999999998, min: 1.2, max: 1.4 });
  assert.deepEqual(r.evictions, { median: 5, min: 4, max: 9 });
  assert.deepEqual(r.bookkeepingMs, { median: 2, min: 1, max: 3 });
  assert.equal(r.error, "oob");
});

Deno.test("runSuite() passes floor(peak * ratio) budgets and summarizes per policy and model", async () => {
  const engine = testEngine();
  const o = parseOptions([
    "--models",
    "mlp",
    "--policies",
    "dtr-eq,lru",
    "--ratios",
    "1,0.5,0.3,0.2",
    "--repeat",
    "3",
    "--traces",
    "none",
  ], () => []);
  const { sink } = quietProgress();
  const progress = new Progress(0, sink);
  const s = await runSuite(o, engine, progress);
  assert.equal(progress.done, progress.total, "progress reaches total");
  assert.deepEqual(s.workloads.map((w) => [w.id, w.baselinePeakBytes]), [["live:mlp/tiny", 2000], [
    "sim:mlp/tiny",
    1000,
  ]]);
  assert.deepEqual(s.workloads[0]!.baselineTimeMs, { median: 100, min: 100, max: 100 });
  // Budgets: live peak 2000 -> 2000, 1000, 600, 400; simulated peak 1000 -> 1000, 500, 300, 200.
  const live = s.results.filter((r) => r.kind === "live" && r.policy === "lru");
  assert.deepEqual(live.map((r) => r.budgetBytes), [2000, 1000, 600, 400]);
  assert.ok(engine.calls.includes("simulate dtr-eq 200"));
  // lru is feasible down to 0.4, dtr-eq down to 0.2 (test engine's MIN_RATIO).
  const smallest = Object.fromEntries(
    s.summary.policies.map((p) => [`${p.workload} ${p.policy}`, p.smallestFeasibleRatio]),
  );
  assert.deepEqual(smallest, {
    "live:mlp/tiny dtr-eq": 0.2,
    "live:mlp/tiny lru": 0.5,
    "sim:mlp/tiny dtr-eq": 0.2,
    "sim:mlp/tiny lru": 0.5,
  });
  // Overhead = 1 + slope * (1/ratio - 1): dtr-eq at 0.5 -> 1.1, lru at 0.5 -> 1.3.
  const at05 = s.results.find((r) =>
    r.workload === "sim:mlp/tiny" && r.policy === "lru" && r.ratio === 0.5
  )!;
  assert.ok(Math.abs(at05.overhead!.median - 1.3) < 1e-12);
  assert.equal(at05.evictions.median, 50);
  assert.equal(at05.remats.median, 25);
  // Bookkeeping cycles 1,2,3 over runs, so each experiment's three repeats span 1..3.
  assert.deepEqual(at05.bookkeepingMs, { median: 2, min: 1, max: 3 });
  const best = s.summary.best.filter((b) => b.workload === "sim:mlp/tiny");
  assert.deepEqual(best.map((b) => [b.ratio, b.policy]), [[1, "dtr-eq"], [0.5, "dtr-eq"], [
    0.3,
    "dtr-eq",
  ], [0.2, "dtr-eq"]]);
  // Timelines: the first policy (dtr-eq) at its smallest feasible ratio (0.2) and nearest 0.5.
  assert.deepEqual(s.timelines.map((t) => `${t.workload} ${t.policy}@${t.ratio}`), [
    "live:mlp/tiny dtr-eq@0.2",
    "live:mlp/tiny dtr-eq@0.5",
    "sim:mlp/tiny dtr-eq@0.2",
    "sim:mlp/tiny dtr-eq@0.5",
  ]);
  assert.equal(s.timelines[2]!.budgetBytes, 200);
  assert.equal(s.failures.length, 0);
});

Deno.test("runSuite() is deterministic: the same options give the same feasibility and evictions", async () => {
  const o = parseOptions([
    "--models",
    "mlp",
    "--policies",
    "dtr-eq,lru,largest",
    "--repeat",
    "2",
    "--traces",
    "none",
  ], () => []);
  const pick = (s: Awaited<ReturnType<typeof runSuite>>) =>
    s.results.map((r) => [r.workload, r.policy, r.ratio, r.feasible, r.evictions.median]);
  const a = await runSuite(o, testEngine(), new Progress(0, quietProgress().sink));
  const b = await runSuite(o, testEngine(), new Progress(0, quietProgress().sink));
  assert.deepEqual(pick(a), pick(b));
});

Deno.test("runSuite() records a workload that fails to prepare as skipped and a failure", async () => {
  const o = parseOptions([
    "--models",
    "broken,mlp",
    "--policies",
    "lru",
    "--ratios",
    "1",
    "--repeat",
    "1",
    "--traces",
    "none",
    "--skip",
    "plots",
  ], () => []);
  const { sink, lines } = quietProgress();
  const progress = new Progress(0, sink);
  const s = await runSuite(o, testEngine({ failingModels: ["broken"] }), progress);
  assert.deepEqual(s.skipped.map((x) => x.what), ["live:broken/tiny", "sim:broken/tiny"]);
  assert.match(s.skipped[0]!.reason, /cannot build broken/);
  assert.equal(s.failures.length, 2);
  assert.deepEqual(s.workloads.map((w) => w.id), ["live:mlp/tiny", "sim:mlp/tiny"]);
  assert.equal(progress.done, progress.total);
  assert.ok(lines.some((l) => /broken\/tiny failed to prepare/.test(l)));
});

Deno.test("runSuite() skips live workloads with the engine's reason when live runs are unavailable", async () => {
  const o = parseOptions([
    "--models",
    "mlp",
    "--policies",
    "lru",
    "--ratios",
    "1",
    "--repeat",
    "1",
    "--traces",
    "none",
  ], () => []);
  const s = await runSuite(
    o,
    testEngine({ liveUnavailable: "@libra/nn has no createModel yet" }),
    new Progress(0, quietProgress().sink),
  );
  assert.deepEqual(s.skipped, [
    { what: "live:mlp/tiny", reason: "@libra/nn has no createModel yet" },
    { what: "sim:mlp/tiny", reason: "@libra/nn has no createModel yet" },
  ]);
  assert.equal(s.failures.length, 0);
});

Deno.test("chooseTimelines() honours explicit choices that exist", () => {
  const r = [{ workload: "w", policy: "lru", ratio: 0.5, feasible: true }];
  assert.deepEqual(
    chooseTimelines(r, ["w"], ["dtr"], [{ policy: "lru", ratio: 0.5 }, {
      policy: "lru",
      ratio: 0.9,
    }]),
    [{ workload: "w", policy: "lru", ratio: 0.5 }],
  );
});

Deno.test("runSuite() runs a policy the live path does not support on simulated workloads only", async () => {
  const o = parseOptions([
    "--models",
    "mlp",
    "--policies",
    "lru,largest",
    "--ratios",
    "1",
    "--repeat",
    "1",
    "--traces",
    "none",
    "--skip",
    "plots",
  ], () => []);
  const progress = new Progress(0, quietProgress().sink);
  const s = await runSuite(o, testEngine(), progress);
  assert.deepEqual(s.results.map((r) => `${r.workload} ${r.policy}`), [
    "live:mlp/tiny lru",
    "sim:mlp/tiny lru",
    "sim:mlp/tiny largest",
  ]);
  assert.deepEqual(s.skipped, [{
    what: "live runs of largest",
    reason: "largest is simulated only in the test engine",
  }]);
  assert.equal(progress.done, progress.total);
});
