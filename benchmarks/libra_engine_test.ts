/**
 * The suite on the real packages: the simulator path on a hand-made trace with
 * answers derived by hand, reproducibility of feasibility and eviction counts,
 * the shared DTR traces against the published overheads, and live runs.
 */
import assert from "node:assert/strict";
import { parseOptions } from "./options.ts";
import { runSuite, type SuiteResult } from "./runner.ts";
import { Progress } from "./progress.ts";
import { createLibraEngine } from "./_libra_engine.ts";
import { runTraining } from "@libra/train/run-training";
import { DEFAULT_SEARCH, parseTrace, RECORDED_STEP_REPLAY, replayTrace } from "@libra/runtime";
import { AnalyticCostModel } from "@libra/cost";

const CHAIN = new URL("./testdata/chain.log", import.meta.url).pathname;
const SHARED = "../shared/traces";
const DYNAMIC = "dtr,dtr-eq,dtr-local,msps,lru,largest,random";

async function suite(args: string[]): Promise<SuiteResult> {
  const o = parseOptions(["--skip", "micro,plots", ...args], () => []);
  const engine = await createLibraEngine(o);
  return runSuite(
    o,
    engine,
    new Progress(0, { write: () => {}, isTerminal: false, now: () => performance.now() }),
  );
}

function sharedTraces(): string[] | null {
  try {
    return [...Deno.readDirSync(SHARED)].filter((e) => e.name.endsWith(".log")).map((e) =>
      `${SHARED}/${e.name}`
    ).sort();
  } catch {
    return null;
  }
}

const nativeBuilt = (() => {
  try {
    Deno.statSync(new URL("../native/build/libra_cpu.so", import.meta.url));
    return true;
  } catch {
    return false;
  }
})();

// testdata/chain.log: constant x and y1..y4 = f(previous), then b3 = g(y4, y3),
// b2 = g(b3, y2), b1 = g(b2, y1), releasing each value after its last use; every
// storage is 100 bytes and every call costs 10 ns. By hand: the budget-free peak
// is 600 bytes (x, y1..y4, b3) and compute is 70 ns; when b3 is made, x (a
// constant), y3, y4 (its inputs) and b3 must be resident, so 400 bytes is the
// least any policy can work with; at 504 bytes one 100-byte value must go and be
// recomputed, so the overhead is (70 + 10k) / 70 with k >= 1.
Deno.test("simulated: the chain trace's peak, compute and feasibility match the hand analysis", async () => {
  const s = await suite([
    "--models",
    "none",
    "--traces",
    CHAIN,
    "--policies",
    DYNAMIC,
    "--ratios",
    "1,0.84,0.67,0.6",
    "--repeat",
    "1",
  ]);
  assert.deepEqual(
    s.workloads.map((w) => [w.id, w.baselinePeakBytes, w.computeMs! * 1e6, w.calls]),
    [["trace:chain", 600, 70, 7]],
  );
  for (const p of s.summary.policies) {
    assert.equal(p.smallestFeasibleRatio, 0.67, `${p.policy}: 402 bytes work, 360 do not`);
  }
  for (const r of s.results) {
    assert.equal(r.budgetBytes, Math.floor(600 * r.ratio + 1e-9));
    assert.ok(
      r.peakBytes.max <= r.budgetBytes,
      `${r.policy}@${r.ratio}: peak ${r.peakBytes.max} within budget`,
    );
    if (r.ratio === 1) assert.equal(r.overhead!.median, 1);
    if (r.ratio === 0.84) {
      const k = (r.overhead!.median * 70 - 70) / 10;
      assert.ok(
        k >= 1 && Math.abs(k - Math.round(k)) < 1e-9,
        `${r.policy}: overhead ${r.overhead!.median} = (70 + 10k)/70`,
      );
    }
    if (r.ratio === 0.6) assert.equal(r.feasible, false);
  }
});

Deno.test("simulated: the same command gives the same feasibility and eviction counts", async () => {
  const traces = [CHAIN, ...(sharedTraces() ?? [])];
  if (traces.length === 1) console.log(`  (${SHARED} absent: checking the chain trace only)`);
  const args = [
    "--models",
    "none",
    "--traces",
    ...traces,
    "--policies",
    "dtr,dtr-eq,lru,random",
    "--ratios",
    "1,0.7,0.5,0.3",
    "--repeat",
    "2",
  ];
  const pick = (s: SuiteResult) =>
    s.results.map((r) =>
      `${r.workload} ${r.policy}@${r.ratio} ${r.feasible} ${r.evictions.min}-${r.evictions.max} ${r.remats.median}`
    );
  const a = pick(await suite(args));
  const b = pick(await suite(args));
  assert.deepEqual(a, b);
  // Repeats within one run agree too (min = max).
  for (const line of a) assert.match(line, / (\d+)-\1 /, line);
});

Deno.test("simulated: dtr-eq on the shared logs gives the published overheads (the published simulator's semantics, as libra simulate)", async () => {
  const traces = sharedTraces();
  const published: [string, number, Record<string, number | null>][] = [
    ["resnet32-56", 10061179152, { "0.8": 1.025, "0.5": 1.107, "0.2": 1.332, "0.1": null }],
    // at 0.4 U-Net runs out of memory in the published simulator (the Engine's default constant
    // handling, which the bench used before, fitted it at 1.406)
    ["unet-6", 8415764640, { "0.5": 1.159, "0.4": null }],
  ];
  for (const [name, peak, want] of published) {
    if (traces === null || !traces.some((x) => x.endsWith(`${name}.log`))) {
      console.log(`  skipped: ${SHARED}/${name}.log is absent`);
      continue;
    }
    const s = await suite([
      "--models",
      "none",
      "--traces",
      `${SHARED}/${name}.log`,
      "--policies",
      "dtr-eq",
      "--ratios",
      Object.keys(want).join(","),
      "--repeat",
      "1",
    ]);
    assert.equal(s.workloads[0]!.baselinePeakBytes, peak);
    for (const r of s.results) {
      const w = want[String(r.ratio)];
      if (w === null) assert.equal(r.feasible, false, `${name} at ${r.ratio} is infeasible`);
      else {
        assert.ok(
          Math.abs(r.overhead!.median - w!) < 5e-4,
          `${name} at ${r.ratio}: ${r.overhead!.median} vs ${w}`,
        );
      }
    }
  }
});

Deno.test({
  name: "live: tiny models train under budgets; analytic costs make eviction counts reproducible",
  ignore: !nativeBuilt,
  fn: async () => {
    const args = [
      "--models",
      "mlp",
      "--skip",
      "simulated",
      "--policies",
      "dtr-eq,lru",
      "--ratios",
      "1,0.9,0.85",
      "--repeat",
      "2",
      "--steps",
      "2",
      "--cost-model",
      "analytic",
      "--traces",
      "none",
    ];
    const a = await suite(args);
    const b = await suite(args);
    const w = a.workloads[0]!;
    assert.equal(w.kind, "live");
    assert.ok(w.baselinePeakBytes > 0);
    const at1 = a.results.filter((r) => r.ratio === 1);
    for (const r of at1) {
      assert.ok(r.feasible, `${r.policy} fits at the budget-free peak`);
      assert.equal(r.evictions.max, 0, "nothing to evict at ratio 1");
      assert.ok(r.overhead!.min > 0);
      for (const m of r.measurements) assert.ok(m.timeMs! > 0 && m.baselineTimeMs! > 0);
    }
    for (const r of a.results) {
      assert.ok(r.peakBytes.max <= r.budgetBytes, `${r.policy}@${r.ratio} stays within budget`);
    }
    const pick = (s: SuiteResult) =>
      s.results.map((r) =>
        `${r.policy}@${r.ratio} ${r.feasible} ${r.evictions.min}-${r.evictions.max}`
      );
    assert.deepEqual(pick(a), pick(b));
  },
});

Deno.test("simulated: static planners plan per budget, within the budget, at no cost when nothing must go", async () => {
  const s = await suite([
    "--models",
    "none",
    "--traces",
    CHAIN,
    "--policies",
    "libra,chen-sqrt",
    "--ratios",
    "1,0.84",
    "--repeat",
    "2",
  ]);
  const libra1 = s.results.find((r) => r.policy === "libra" && r.ratio === 1)!;
  assert.equal(libra1.overhead!.median, 1, "libra evicts nothing when the budget is the peak");
  assert.equal(libra1.evictions.max, 0);
  for (const r of s.results) {
    assert.ok(r.feasible, `${r.policy}@${r.ratio}`);
    assert.ok(r.peakBytes.max <= r.budgetBytes);
    // A plan is made once and reused: both repeats replay the same decisions.
    assert.equal(r.evictions.min, r.evictions.max);
  }
  // chen-sqrt checkpoints whatever the budget, so it recomputes even at ratio 1.
  const chen1 = s.results.find((r) => r.policy === "chen-sqrt" && r.ratio === 1)!;
  assert.ok(chen1.remats.median > 0 && chen1.overhead!.median > 1);
});

Deno.test("simulated: a run past --time-limit is reported infeasible with the reason, not hung", async () => {
  // A 400-call chain and its backward pass: at a small budget every backward step
  // recomputes a long prefix, thousands of events, far more than 1 ms of work.
  const n = 400;
  const lines = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x0"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x0"}`,
  ];
  const call = (res: string, args: string[], op: string) =>
    lines.push(
      JSON.stringify({ ARGS: args, INSTRUCTION: "CALL", NAME: op, RESULT: [res], TIME: "10" }),
      `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"${res}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${res}"}`,
    );
  for (let i = 1; i <= n; i++) call(`x${i}`, [`x${i - 1}`], "f");
  call(`g${n}`, [`x${n}`], "f_backward");
  for (let i = n - 1; i >= 1; i--) {
    call(`g${i}`, [`g${i + 1}`, `x${i}`], "f_backward");
    lines.push(
      `{"INSTRUCTION":"RELEASE","NAME":"g${i + 1}"}`,
      `{"INSTRUCTION":"RELEASE","NAME":"x${i + 1}"}`,
    );
  }
  const path = await Deno.makeTempFile({ suffix: ".log" });
  try {
    await Deno.writeTextFile(path, lines.join("\n") + "\n");
    const s = await suite([
      "--models",
      "none",
      "--traces",
      path,
      "--policies",
      "lru",
      "--ratios",
      "0.05",
      "--repeat",
      "1",
      "--time-limit",
      "0.001",
    ]);
    const r = s.results[0]!;
    assert.equal(r.feasible, false);
    assert.match(r.error!, /^time limit: stopped after 0\.001 s/);
    assert.equal(r.reason, "time limit");
    assert.ok(r.evictions.median > 0, "evictions counted before the stop");
    assert.equal(s.failures.length, 0, "a time limit is an outcome, not a failure");
  } finally {
    await Deno.remove(path);
  }
});

Deno.test("simulated: infeasible results carry the reason: thrashing past --overhead-limit, out of memory below the floor", async () => {
  // The chain trace (above): at 504 bytes one value is recomputed, overhead (70 + 10k) / 70 with
  // k >= 1, so a thrash limit of 1.05 stops it; at 360 bytes no policy fits.
  const s = await suite([
    "--models",
    "none",
    "--traces",
    CHAIN,
    "--policies",
    "dtr-eq",
    "--ratios",
    "0.84,0.6",
    "--repeat",
    "1",
    "--overhead-limit",
    "1.05",
  ]);
  const at = (ratio: number) => s.results.find((r) => r.ratio === ratio)!;
  assert.equal(at(0.84).feasible, false);
  assert.equal(at(0.84).reason, "thrashing");
  assert.equal(at(0.84).measurements[0]!.reason, "thrashing");
  assert.equal(at(0.6).reason, "out of memory");
});

// The oracle of sim: rows: runTraining's budget-free copy (its peak) and its last budgeted
// step, recorded by the live runtime and replayed by the simulator at the same budget as
// the runtime runs a step (RECORDED_STEP_REPLAY). mlp tiny's SGD update mutates 12 values
// in one call: replayed with a new version of each, its step ran out of memory at 0.9.
for (const [model, ratio] of [["gpt", 0.7], ["mlp", 0.9]] as const) {
  Deno.test({
    name:
      `recorded (sim:${model}/tiny): a steady-state step, replayed as live: the live budget-free peak, and at ratio ${ratio} the live run's own budgeted step's replay`,
    ignore: !nativeBuilt,
    fn: async () => {
      const o = parseOptions(["--cost-model", "analytic", "--seed", "0"], () => []);
      const engine = await createLibraEngine(o);
      const s = {
        device: "cpu" as const,
        seed: 0,
        costModel: "analytic" as const,
        timeLimitMs: 60_000,
        overheadLimit: Infinity,
        timeline: false,
        steps: 1,
      };
      const recorded = await engine.recordTrace(model, "tiny", s);
      const live = runTraining({
        model,
        preset: "tiny",
        policy: "dtr-eq",
        budgetRatio: ratio,
        steps: 1,
        seed: 0,
        warmupCalls: 0,
        budgetedWarmupSteps: 0,
        overheadLimit: Infinity,
        recordLastStep: true,
      });
      assert.equal(recorded.peakBytes, live.baselinePeakBytes);
      const own = replayTrace(parseTrace(live.trace!), {
        costModel: new AnalyticCostModel(),
        ...RECORDED_STEP_REPLAY,
        budgetBytes: live.budgetBytes,
        policy: "dtr-eq",
        search: { ...DEFAULT_SEARCH, seed: 0 },
      });
      assert.ok(own.feasible && own.stats.evictions > 0, `the live step evicts at ${ratio}`);
      const sim = await engine.simulate(recorded, "dtr-eq", live.budgetBytes, s);
      assert.equal(sim.feasible, true, sim.error ?? "");
      // The live step itself (its runtime's counts), and its trace replayed.
      assert.equal(sim.evictions, live.stats.evictions);
      assert.equal(sim.remats, live.stats.remats);
      assert.equal(sim.evictions, own.stats.evictions);
      assert.equal(sim.remats, own.stats.remats);
      assert.equal(sim.overhead, own.overhead);
      // The suite's live row at that budget counts per measured step, as its sim: row does
      // (each steady-state step evicts alike: totals over 3 steps would read 3x).
      const model3 = await engine.prepareModel(model, "tiny", { ...s, steps: 3 });
      const row = await engine.live(model3, "dtr-eq", live.budgetBytes, { ...s, steps: 3 });
      assert.equal(row.feasible, true, row.error ?? "");
      assert.equal(row.evictions, sim.evictions);
      assert.equal(row.remats, sim.remats);
    },
  });
}
