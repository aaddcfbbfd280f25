/**
 * The real executor against the real packages: a tiny training run under a budget,
 * a simulation of a hand-written trace with a hand-computed answer, and the shared
 * ResNet-32 trace against the published DTR simulator's overheads.
 */
import assert from "node:assert/strict";
import { executeInThisThread, probeRealExecutor, realExecutor, thinSamples } from "./executor.ts";
import type { ProgressEvent, RunSpec } from "./run_executor.ts";

const probe = await probeRealExecutor();
const skip = probe.ok ? "" : ` (skipped: ${probe.detail})`;
const ctx = (events: ProgressEvent[] = [], trace?: string) => ({
  signal: new AbortController().signal,
  progress: (e: ProgressEvent) => events.push(e),
  ...(trace === undefined ? {} : { trace }),
});

const TRAIN: RunSpec = {
  kind: "train",
  model: "gpt",
  preset: "tiny",
  config: null,
  device: "cpu",
  budgetRatio: 0.9,
  budgetBytes: null,
  policy: "dtr-eq",
  costModel: "measured",
  // Measured costs follow timing noise: on a loaded 2-core machine one slow recomputation
  // passed the default limit (1.15 ms against 0.23 ms of budget-free compute) in a full run.
  // The thrash limit is not what this run checks.
  overheadLimit: 1000,
  steps: 3,
  seed: 3,
};

Deno.test("thinSamples() keeps each bucket's peak and the order", () => {
  const s: [number, number][] = Array.from({ length: 10 }, (_, i) => [i, i % 3 === 0 ? 100 : i]);
  assert.deepEqual(thinSamples(s, 20), s);
  assert.deepEqual(thinSamples(s, 5), [[0, 100], [3, 100], [5, 5], [6, 100], [9, 100]]);
});

Deno.test({
  name: `real executor: a tiny GPT under 90% of its peak, in its own process${skip}`,
  ignore: !probe.ok,
  async fn() {
    const events: ProgressEvent[] = [];
    const ex = realExecutor({ prewarm: true });
    const r = await ex.execute(TRAIN, ctx(events));
    // the next process (loaded meanwhile) serves the next run (a simulation)
    const sim = await ex.execute(
      { kind: "simulate", name: "chain", policies: ["lru"], ratios: [1] },
      ctx([], chainTrace()),
    );
    ex.close();
    assert.deepEqual(sim.points, [
      { policy: "lru", ratio: 1, feasible: true, overhead: 1, reason: null },
    ]);
    assert.equal(r.feasible, true, r.note ?? "");
    assert.equal(r.budgetBytes, Math.floor(0.9 * r.baselinePeakBytes!));
    assert.ok(r.peakBytes! <= r.budgetBytes!, `peak ${r.peakBytes} within ${r.budgetBytes}`);
    assert.ok(r.stats.evictions! > 0, "the budget forced evictions");
    // re-materialization is exact: the same losses as without a budget
    // the warm-up steps (two or more), then the three measured ones
    assert.ok(r.stats.warmupSteps! >= 2);
    assert.equal(r.loss.length, r.stats.warmupSteps! + 3);
    for (const l of r.loss) assert.equal(l.loss, l.baseline);
    assert.ok(r.overhead! > 0);
    assert.ok(r.memory!.samples.every(([, b]) => b <= r.budgetBytes!), "timeline within budget");
    assert.match(r.trace!, /"INSTRUCTION":"CALL"/);
    assert.deepEqual(events.filter((e) => e.phase !== "warm-up").at(-1)!.done, 6);
    // the timeline's markers are the runtime's evictions, within the budget
    const drops = r.memory!.markers.filter((m) => m.kind === "drop");
    assert.equal(drops.length, r.stats.drops, "one drop marker per policy drop");
    assert.ok(r.memory!.markers.every((m) => m.bytes <= r.budgetBytes!));
  },
});

Deno.test({
  name: `real executor: a planner (chen-sqrt) trains through the same path as \`libra run\`${skip}`,
  ignore: !probe.ok,
  async fn() {
    const events: ProgressEvent[] = [];
    // 0.8, not lower: the runtime's thrash limit (2x the budget-free compute) stops
    // chen-sqrt's recomputation near 0.6 on some runs of this machine
    // analytic costs: the thrash limit then compares the model's estimates, which no
    // load on the machine moves (per-call timings of tiny kernels carry the timer's cost)
    const spec = {
      ...TRAIN,
      model: "gpt",
      policy: "chen-sqrt",
      budgetRatio: 0.8,
      steps: 2,
      costModel: "analytic",
    };
    const r = await executeInThisThread(spec, ctx(events));
    assert.equal(r.feasible, true, r.note ?? "");
    assert.equal(r.budgetBytes, Math.floor(0.8 * r.baselinePeakBytes!));
    assert.ok(r.peakBytes! <= r.budgetBytes!, `peak ${r.peakBytes} within ${r.budgetBytes}`);
    for (const l of r.loss) assert.equal(l.loss, l.baseline);
    assert.ok(r.stats.planSteps! > 0 && r.stats.planApplied! > 0, JSON.stringify(r.stats));
    assert.ok(r.memory!.samples.length > 0);
    assert.ok(r.memory!.samples.every(([, b]) => b <= r.budgetBytes!), "timeline within budget");
    assert.ok(r.memory!.markers.some((m) => m.kind === "drop" || m.kind === "remat"));
    assert.ok(events.some((e) => e.phase === "plan"), "a plan phase is reported");
    // the two copies' measured steps, interleaved, count to 2 x 2
    assert.equal(events.at(-1)!.done, 4);
    assert.equal(events.at(-1)!.total, 4);
    // an infeasible budget: succeeded with feasible false and the runtime's reason
    const bad = await executeInThisThread({ ...spec, budgetRatio: 0.01 }, ctx());
    assert.equal(bad.feasible, false);
    assert.match(bad.note!, /budget/);
    assert.equal(bad.trace, null);
  },
});

Deno.test({
  name: `real executor: a canceled run stops before its next step${skip}`,
  ignore: !probe.ok,
  async fn() {
    const stop = new AbortController();
    const p = executeInThisThread(TRAIN, {
      signal: stop.signal,
      // the first measured pair is baseline then budget: stop after it
      progress: (e) => e.phase === "budget" && e.done === 2 && stop.abort(),
    });
    await assert.rejects(p, /canceled before budget step 2\/3/);
  },
});

Deno.test({
  name: `real executor: an impossible budget is reported infeasible, not failed${skip}`,
  ignore: !probe.ok,
  async fn() {
    const r = await executeInThisThread({ ...TRAIN, budgetRatio: 0.2 }, ctx());
    assert.equal(r.feasible, false);
    assert.equal(r.overhead, null);
    assert.match(r.note!, /out of budget/);
    assert.deepEqual(r.points, [
      { policy: "dtr-eq", ratio: 0.2, feasible: false, overhead: null, reason: "out of memory" },
    ]);
    assert.equal(r.reason, "out of memory");
  },
});

Deno.test({
  name: `real executor: unknown names fail with the available ones${skip}`,
  ignore: !probe.ok,
  async fn() {
    await assert.rejects(executeInThisThread({ ...TRAIN, model: "vgg" }, ctx()), /"vgg".*mlp/);
    await assert.rejects(executeInThisThread({ ...TRAIN, policy: "fifo" }, ctx()), /dtr-eq/);
    await assert.rejects(
      executeInThisThread({ ...TRAIN, costModel: "psychic" }, ctx()),
      /unknown cost model "psychic".*analytic, profiled, measured/,
    );
  },
});

// A chain x -> a -> b -> c of 100-byte tensors, each call 10 ns, then a final call
// that reads a and c. Budget-free peak: all four live = 400 (plus the output, 500).
function chainTrace(): string {
  const lines = [
    `{"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}`,
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}`,
  ];
  let prev = "x";
  for (const n of ["a", "b", "c"]) {
    lines.push(
      `{"ARGS":["${prev}"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["${n}"],"TIME":"10"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"${n}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${n}"}`,
    );
    prev = n;
  }
  lines.push(
    `{"ARGS":["a","c"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["y"],"TIME":"10"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"y"}`,
    `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
  );
  return lines.join("\n");
}

Deno.test({
  name: `real executor: simulating an uploaded trace gives one curve per policy${skip}`,
  ignore: !probe.ok,
  async fn() {
    const r = await executeInThisThread(
      { kind: "simulate", name: "chain", policies: ["dtr-eq", "lru"], ratios: [1, 0.2] },
      ctx([], chainTrace()),
    );
    assert.equal(r.baselinePeakBytes, 500);
    assert.equal(r.points.length, 4);
    const at1 = r.points.filter((p) => p.ratio === 1);
    assert.deepEqual(at1.map((p) => [p.feasible, p.overhead]), [[true, 1], [true, 1]]);
    // 100 bytes cannot hold a call's input and output at once
    assert.ok(r.points.filter((p) => p.ratio === 0.2).every((p) => !p.feasible));
    assert.equal(r.stats.calls, 4);
  },
});

Deno.test({
  name: `real executor: a malformed trace fails with the line number${skip}`,
  ignore: !probe.ok,
  async fn() {
    const bad = chainTrace() +
      `\n{"INSTRUCTION":"CALL","NAME":"h","ARGS":["nope"],"RESULT":["z"],"TIME":"1"}`;
    await assert.rejects(
      executeInThisThread(
        { kind: "simulate", name: "bad", policies: ["lru"], ratios: [1] },
        ctx([], bad),
      ),
      /bad:16: CALL: undefined name "nope"/,
    );
  },
});

const RESNET = new URL("../../../shared/traces/resnet32-56.log", import.meta.url);
const haveResnet = await Deno.stat(RESNET).then(() => true, () => false);
Deno.test({
  name: haveResnet
    ? `real executor: ResNet-32 trace under dtr-eq lands near the published overheads${skip}`
    : "real executor: ResNet-32 trace (skipped: ../shared/traces/resnet32-56.log is absent)",
  ignore: !haveResnet || !probe.ok,
  async fn() {
    const r = await executeInThisThread(
      { kind: "simulate", name: "resnet32-56", policies: ["dtr-eq"], ratios: [0.8, 0.5, 0.1] },
      ctx([], await Deno.readTextFile(RESNET)),
    );
    assert.equal(r.baselinePeakBytes, 10061179152); // issue 4's acceptance figure
    const [p8, p5, p1] = r.points;
    // published DTR simulator: 0.8 -> 1.025, 0.5 -> 1.107, 0.1 -> infeasible
    assert.ok(Math.abs(p8!.overhead! / 1.025 - 1) < 0.05, `0.8: ${p8!.overhead}`);
    assert.ok(Math.abs(p5!.overhead! / 1.107 - 1) < 0.05, `0.5: ${p5!.overhead}`);
    assert.equal(p1!.feasible, false);
    assert.ok(r.memory!.samples.every(([, b]) => b <= r.memory!.budgetBytes));
  },
});

Deno.test({
  name: `real executor: the same losses, peak and budget as \`libra run --json\`${skip}`,
  ignore: !probe.ok,
  async fn() {
    // The CLI's default cost model: the same decisions, so the same budgeted warm-up (it runs
    // until 1000 evictions and re-materializations) and the same losses.
    const spec = {
      ...TRAIN,
      model: "gpt",
      budgetRatio: 0.8,
      seed: 0,
      costModel: "analytic",
    } as const;
    const main = new URL("../cli/main.ts", import.meta.url).pathname;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", main, "run", "--model", "gpt", "--preset", "tiny", "--policy", "dtr-eq"],
        ...["--budget-ratio", "0.8", "--steps", "3", "--json"],
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const cli = JSON.parse(new TextDecoder().decode(out.stdout));
    // The library's thread count is process-wide and an earlier test module may have left it
    // set; the subprocess ran with the default, and some kernels' results depend on it to the
    // last bit (gpt tiny at 0.8 with 1 and 2 threads: some losses differ).
    (await import("@libra/native")).cpuBackend().setThreads(0);
    const r = await executeInThisThread(spec, ctx());
    assert.deepEqual(r.loss.map((l) => l.loss), cli.losses);
    assert.deepEqual(r.loss.map((l) => l.baseline), cli.baselineLosses);
    assert.equal(r.baselinePeakBytes, cli.baselinePeakBytes);
    assert.equal(r.budgetBytes, cli.budgetBytes);
  },
});

Deno.test({
  name:
    `real executor: a run above its process's memory limit is stopped, the caller lives on${skip}`,
  ignore: !probe.ok,
  async fn() {
    // 8192x8192 weights: ~1 GiB of native buffers with gradients and momentum
    const ex = realExecutor({ memoryLimitBytes: 300 * 2 ** 20 });
    const before = Deno.memoryUsage().rss;
    await assert.rejects(
      ex.execute({ ...TRAIN, model: "mlp", config: { hidden: [8192, 8192] } }, ctx()),
      /the run's process used \d+ MiB of memory, above its limit of 300 MiB/,
    );
    assert.ok(Deno.memoryUsage().rss - before < 200 * 2 ** 20, "the memory was not ours");
    // a canceled run's process is killed
    const stop = new AbortController();
    const p = ex.execute(TRAIN, { signal: stop.signal, progress: () => stop.abort() });
    await assert.rejects(p, /canceled: the run's process was stopped/);
    ex.close();
  },
});

Deno.test({
  name:
    `real executor: a run past its thrash limit is infeasible for thrashing, one that cannot fit for out of memory${skip}`,
  ignore: !probe.ok,
  async fn() {
    const { runTraining } = await import("@libra/train/run-training");
    const spec = { ...TRAIN, costModel: "analytic", steps: 2, seed: 0 } as const;
    // at 90 % the tiny GPT recomputes: under the default limit (2.0) it fits, under a
    // limit of 1.0001 the first recomputation passes it
    const fits = await executeInThisThread(spec, ctx());
    assert.equal(fits.feasible, true, fits.note ?? "");
    assert.equal(fits.reason, null);
    assert.equal(fits.points[0]!.reason, null);
    const thrash = await executeInThisThread({ ...spec, overheadLimit: 1.0001 }, ctx());
    // the oracle: runTraining itself, with the same limit, stops for the same reason
    const direct = runTraining({
      model: "gpt",
      preset: "tiny",
      policy: spec.policy,
      budgetRatio: 0.9,
      steps: 2,
      seed: 0,
      costModel: "analytic",
      allowInfeasible: true,
      overheadLimit: 1.0001,
    });
    assert.equal(direct.outOfBudget?.reason, "thrashing");
    assert.equal(thrash.feasible, false);
    assert.equal(thrash.reason, "thrashing");
    assert.deepEqual(thrash.points, [
      { policy: spec.policy, ratio: 0.9, feasible: false, overhead: null, reason: "thrashing" },
    ]);
    assert.match(thrash.note!, /overhead limit 1\.0001/);
    const oom = await executeInThisThread({ ...spec, budgetRatio: 0.05 }, ctx());
    assert.equal(oom.reason, "out of memory");
    assert.match(oom.note!, /out of budget/);
  },
});

Deno.test({
  name: `real executor: a simulation replays under its thrash limit and reports each reason${skip}`,
  ignore: !probe.ok,
  async fn() {
    const { parseTrace, simulateTrace } = await import("@libra/runtime");
    const ratios = [1, 0.8, 0.6, 0.4, 0.2];
    const reasons = async (overheadLimit?: number) => {
      const spec = {
        kind: "simulate" as const,
        name: "chain",
        policies: ["dtr-eq", "lru"],
        ratios,
        ...(overheadLimit === undefined ? {} : { overheadLimit }),
      };
      const r = await executeInThisThread(spec, ctx([], chainTrace()));
      // the oracle: the runtime's simulator with the same limit (2.0 when none is given)
      for (const policy of spec.policies) {
        const o = simulateTrace(parseTrace(chainTrace(), "chain"), {
          policy,
          ratios,
          overheadLimit: overheadLimit ?? 2,
        });
        assert.deepEqual(
          r.points.filter((p) => p.policy === policy),
          o.results.map((x) => ({
            policy,
            ratio: x.ratio,
            feasible: x.feasible,
            overhead: x.overhead,
            reason: x.reason ?? null,
          })),
        );
      }
      return r.points.filter((p) => p.policy === "dtr-eq").map((p) => p.reason);
    };
    // a tight limit turns the recomputing ratios into thrashing; the default lets them run
    // until they do not fit
    assert.deepEqual(await reasons(1.1), [
      null,
      "thrashing",
      "thrashing",
      "out of memory",
      "out of memory",
    ]);
    assert.deepEqual(await reasons(), [
      null,
      "out of memory",
      "out of memory",
      "out of memory",
      "out of memory",
    ]);
  },
});
