/**
 * runTraining's options for the lab executor: budget in bytes, configuration
 * overrides, the budgeted run's timeline (its markers counted against the
 * runtime's statistics), the last step's trace, per-step callbacks, infeasible
 * budgets returned instead of thrown, and cancellation.
 */
import assert from "node:assert/strict";
import { OutOfBudgetError, parseTrace, Runtime } from "@libra/runtime";
import { FrozenProfileCostModel } from "@libra/cost";
import {
  DEFAULT_WARMUP_CALLS,
  runTraining,
  type StepInfo,
  type TrainingPhase,
} from "./run_training.ts";

let native = "";
try {
  (await import("@libra/native")).cpuBackend();
} catch (e) {
  native = ` (skipped: the native cpu backend is unavailable: ${(e as Error).message})`;
}
const ignore = native !== "";

Deno.test({
  name:
    `runTraining: timeline markers match the runtime's counters; callbacks cover every step${native}`,
  ignore,
  fn() {
    const steps: StepInfo[] = [];
    const phases: TrainingPhase[] = [];
    // Steps as they end, and "evict" where the policy evicted in between.
    const log: string[] = [];
    const r = runTraining({
      model: "gpt",
      policy: "dtr-eq+swap",
      budgetRatio: 0.8,
      steps: 3,
      seed: 1,
      warmupCalls: 0,
      budgetedWarmupEvents: 0,
      timeline: true,
      recordLastStep: true,
      onStep: (s) => {
        steps.push(s);
        log.push(`${s.phase}${s.step}`);
      },
      onPhase: (p) => phases.push(p),
      onEvent: (e) => {
        if (e.type === "evict" && !e.eager && log.at(-1) !== "evict") log.push("evict");
      },
    });
    assert.deepEqual(phases, ["warm-up", "measure"]);
    // warm-up A B, B A, then two more pairs with the budget set; then measured pairs
    // alternate: A B, B A, A B
    assert.deepEqual(
      steps.map((s) => `${s.phase}${s.step}/${s.steps}`),
      [
        "warm-up0/2",
        "warm-up0/2",
        "warm-up1/2",
        "warm-up1/2",
        "warm-up2/4",
        "warm-up2/4",
        "warm-up3/4",
        "warm-up3/4",
        "baseline0/3",
        "budget0/3",
        "budget1/3",
        "baseline1/3",
        "baseline2/3",
        "budget2/3",
      ],
    );
    // The policy evicts in every step the budgeted copy runs under its budget, the last
    // two warm-up steps included, and in no other.
    assert.deepEqual(log, [
      ...["warm-up0", "warm-up0", "warm-up1", "warm-up1"],
      ...["warm-up2", "evict", "warm-up2", "evict", "warm-up3", "warm-up3"],
      ...["baseline0", "evict", "budget0", "evict", "budget1", "baseline1"],
      ...["baseline2", "evict", "budget2"],
    ]);
    assert.equal(r.measurement!.budgetedWarmupSteps, 2);
    const budgetSteps = steps.filter((s) => s.phase === "budget");
    assert.deepEqual(budgetSteps.map((s) => s.loss), r.losses.slice(4));
    assert.deepEqual(r.stepTimesMs, budgetSteps.map((s) => s.ms));
    assert.equal(r.baselineStepTimesMs.length, 3);
    assert.equal(steps.at(-1)!.peakBytes, r.peakBytes);
    const tl = r.timeline!;
    assert.ok(tl.bytes.length > 0);
    assert.ok(Math.max(...tl.bytes) <= r.budgetBytes, "timeline within the budget");
    const count = (k: string) => tl.markers.filter((m) => m.kind === k).length;
    assert.ok(r.stats.evictions > 0, "the budget forced evictions");
    assert.equal(count("drop"), r.stats.drops);
    assert.equal(count("swap-out"), r.stats.swapOuts);
    assert.equal(count("swap-in"), r.stats.swapIns);
    assert.equal(count("remat"), r.stats.remats);
    // the last budgeted step as a trace of its own: parses, with that step's calls
    const trace = parseTrace(r.trace!, "last");
    const calls = trace.events.filter((e) => e.kind === "call").length;
    assert.ok(calls > 0 && calls < r.stats.calls, `${calls} calls of ${r.stats.calls}`);
    assert.equal(r.outOfBudget, undefined);
  },
});

Deno.test({
  name:
    `runTraining: budgetBytes gives the ratio's run; config overrides change the model${native}`,
  ignore,
  fn() {
    const byRatio = runTraining({ model: "mlp", policy: "dtr-eq", budgetRatio: 0.985, steps: 2 });
    const byBytes = runTraining({
      model: "mlp",
      policy: "dtr-eq",
      budgetBytes: byRatio.budgetBytes,
      steps: 2,
    });
    assert.equal(byBytes.budgetBytes, byRatio.budgetBytes);
    assert.deepEqual(byBytes.losses, byRatio.losses);
    // (the peak under the budget depends on measured kernel times: only its bound is fixed)
    assert.ok(byBytes.peakBytes <= byBytes.budgetBytes);
    assert.throws(
      () => runTraining({ model: "mlp", policy: "dtr-eq", steps: 1 }),
      /exactly one of budgetRatio and budgetBytes/,
    );
    // a wider hidden layer: 64 instead of 32 units holds more parameters and activations
    const wide = runTraining({
      model: "mlp",
      policy: "dtr-eq",
      budgetRatio: 1,
      steps: 1,
      config: { hidden: [64, 32] },
    });
    assert.ok(wide.baselinePeakBytes > byRatio.baselinePeakBytes);
  },
});

Deno.test({
  name: `runTraining: an infeasible budget throws, or is returned with allowInfeasible${native}`,
  ignore,
  fn() {
    for (const policy of ["dtr-eq", "chen-sqrt"]) {
      const o = {
        model: "gpt",
        policy,
        budgetRatio: 0.01,
        steps: 2,
        warmupCalls: 0,
        budgetedWarmupEvents: 0,
      };
      assert.throws(() => runTraining(o), OutOfBudgetError);
      const r = runTraining({ ...o, allowInfeasible: true, timeline: true, recordLastStep: true });
      assert.ok(r.outOfBudget instanceof OutOfBudgetError, policy);
      assert.match(r.outOfBudget.message, /budget/);
      // the two warm-up steps ran, the first budgeted one did not finish
      assert.equal(r.losses.length, 2);
      assert.equal(r.measurement, undefined);
      assert.ok(r.baselineLosses.length <= 3);
      assert.equal(r.trace, undefined);
    }
  },
});

Deno.test({
  name: `runTraining: an aborted signal stops the run before the next step${native}`,
  ignore,
  fn() {
    const stop = new AbortController();
    assert.throws(
      () =>
        runTraining({
          model: "mlp",
          policy: "dtr-eq",
          budgetRatio: 0.985,
          steps: 3,
          signal: stop.signal,
          onStep: (s) => s.phase === "budget" && stop.abort(),
        }),
      /canceled before budget step 2\/3/,
    );
  },
});

Deno.test({
  name:
    `runTraining: the measurement pairs interleaved steps, with intervals, CPU time and accounting${native}`,
  ignore,
  fn() {
    const r = runTraining({
      model: "mlp",
      policy: "dtr-eq",
      budgetRatio: 0.985,
      steps: 6,
      seed: 2,
      warmupCalls: 0,
      budgetedWarmupEvents: 0,
    });
    const m = r.measurement!;
    assert.equal(m.method, "interleaved");
    assert.equal(m.pairs, 6);
    assert.equal(m.warmupSteps, 2 + 2);
    assert.equal(m.budgetedWarmupSteps, 2);
    assert.equal(r.losses.length, 4 + 6);
    for (const p of [m.wall, m.cpu]) {
      assert.equal(p.ratios.length, 6);
      p.ratios.forEach((x, i) => assert.equal(x, p.budgetMs[i]! / p.baselineMs[i]!));
      // 6 pairs: [min, max] of the ratios, covering the median with 1 - 2/64
      assert.equal(p.low, Math.min(...p.ratios));
      assert.equal(p.high, Math.max(...p.ratios));
      assert.equal(p.confidence, 1 - 2 / 64);
      assert.ok(p.low <= p.median && p.median <= p.high);
    }
    assert.deepEqual(m.wall.budgetMs, r.stepTimesMs);
    assert.deepEqual(m.wall.baselineMs, r.baselineStepTimesMs);
    assert.equal(r.overhead, m.wall.median);
    const a = m.accounted;
    assert.ok(Math.abs(a.computeMs - r.baselineTimeMs) < 1e-6);
    assert.ok(
      Math.abs(
        a.sumsOverhead -
          (a.computeMs + a.recomputeMs + a.bookkeepingMs + a.dispatchMs + a.swapStallMs) /
            a.computeMs,
      ) < 1e-12,
    );
    // One accounted ratio a pair, each at least 1; the overhead is their median (of six: the
    // mean of the middle two), and the pairs' added times sum to what the totals say.
    assert.equal(a.ratios.length, 6);
    for (const x of a.ratios) assert.ok(x >= 1);
    const sorted = [...a.ratios].sort((x, y) => x - y);
    assert.ok(Math.abs(a.overhead - (sorted[2]! + sorted[3]!) / 2) < 1e-12);
    const added = a.ratios.reduce((s, x, i) => s + (x - 1) * m.wall.baselineMs[i]!, 0);
    assert.ok(
      Math.abs(added - (a.recomputeMs + a.bookkeepingMs + a.dispatchMs + a.swapStallMs)) < 1e-6,
    );
    assert.ok(a.dispatchMs > 0, "the sampled kernel calls were timed");
    assert.ok(r.stats.remats > 0 && a.recomputeMs > 0, "the budget forced recomputation");
    assert.equal(m.disagreement, m.wall.median / a.overhead - 1);
    assert.equal(m.warning !== null, Math.abs(m.disagreement) > 0.1);
    assert.equal(m.costModel, "analytic");
    const load = m.loadAverage;
    assert.equal(m.busy !== null, load !== null && load[0]! > navigator.hardwareConcurrency);
    if (m.busy !== null) assert.match(m.busy, /CPU-time ratio \d\.\d{3}/);
    // both copies trained the same model: bitwise the same losses, warm-up included
    assert.equal(r.losses.length, 10);
    assert.deepEqual(r.losses, r.baselineLosses);
  },
});

Deno.test({
  name: `runTraining: the same run makes the same decisions (analytic and profiled costs)${native}`,
  ignore,
  fn() {
    const o = {
      model: "gpt",
      policy: "dtr-eq",
      budgetRatio: 0.7,
      steps: 2,
      recordDecisions: true,
    } as const;
    const a = runTraining(o), b = runTraining(o);
    assert.ok(a.decisions!.length > 0, "the budget forced evictions");
    assert.deepEqual(a.decisions, b.decisions);
    assert.equal(a.stats.remats, b.stats.remats);
    // profiled: the warm-up's kernel times, frozen: every budgeted step repeats the
    // first one's decisions (the same calls at the same costs)
    const profile = new FrozenProfileCostModel();
    const p = runTraining({ ...o, costModel: profile, steps: 3 });
    assert.ok(profile.frozen && profile.recordedCalls > 0);
    const perStep = p.decisions!.length / 3;
    assert.ok(Number.isInteger(perStep) && perStep > 0, `${p.decisions!.length} decisions`);
    const strip = (d: string) => d.replace(/^(\w+):s\d+\./, "$1:");
    const first = p.decisions!.slice(0, perStep).map(strip);
    assert.deepEqual(p.decisions!.slice(perStep, 2 * perStep).map(strip), first);
    assert.throws(
      () => runTraining({ ...o, costModel: "psychic" as "analytic" }),
      /unknown cost model "psychic"/,
    );
  },
});

Deno.test({
  name:
    `runTraining: a warm-up slowed on the clock runs the same steps, and the run the same losses${native}`,
  ignore,
  fn() {
    const o = {
      model: "gpt",
      policy: "dtr-eq",
      budgetRatio: 0.8,
      steps: 2,
      costModel: "analytic",
    } as const;
    const a = runTraining(o);
    // The same run, each warm-up step 25 ms longer (a loaded machine): a warm-up limited
    // by the clock (4 s, then 2 s under the budget) took ~70 steps of this one's 100.
    const b = runTraining({
      ...o,
      onStep: (s: StepInfo) => {
        if (s.phase !== "warm-up") return;
        const t0 = performance.now();
        while (performance.now() - t0 < 25) { /* busy: the clock runs, nothing else does */ }
      },
    });
    const budgeted = (r: typeof a) => r.measurement!.budgetedWarmupSteps;
    assert.ok(a.warmupSteps - budgeted(a) > 70, `${a.warmupSteps} warm-up steps`);
    assert.ok(budgeted(a) > 2, `${budgeted(a)} budgeted`);
    assert.equal(b.warmupSteps, a.warmupSteps);
    assert.equal(budgeted(b), budgeted(a));
    assert.deepEqual(b.losses, a.losses);
    assert.deepEqual(b.baselineLosses, a.baselineLosses);
  },
});

Deno.test({
  name:
    `runTraining: interleaved copies with dropout draw the same numbers (bitwise losses)${native}`,
  ignore,
  fn() {
    const r = runTraining({
      model: "gpt",
      policy: "dtr-eq",
      budgetRatio: 0.7,
      steps: 2,
      warmupCalls: 0,
      budgetedWarmupEvents: 0,
      config: { dropout: 0.2 },
    });
    assert.ok(r.stats.remats > 0);
    // two warm-up steps without the budget and two with it, then the two measured
    assert.equal(r.losses.length, 6);
    assert.deepEqual(r.losses, r.baselineLosses);
  },
});

Deno.test({
  name:
    `runTraining: the warm-up runs past its minimum steps until warmupCalls runtime calls${native}`,
  ignore,
  fn() {
    // Only the budget-free warm-up counts calls: no budgeted steps after it here.
    const o = {
      model: "gpt",
      policy: "dtr-eq",
      budgetRatio: 0.9,
      steps: 1,
      budgetedWarmupSteps: 0,
    };
    // The calls of the first k steps, counted by runs of exactly k warm-up steps.
    const upTo = [0];
    for (let k = 1; k <= 12; k++) {
      const m = runTraining({ ...o, warmupSteps: k, warmupCalls: 0 }).measurement!;
      assert.equal(m.warmupSteps, k);
      upTo.push(m.warmupCalls);
    }
    assert.ok(upTo[12]! > upTo[11]! && upTo[1]! > 0);
    for (const calls of [1, upTo[5]!, upTo[5]! + 1, upTo[11]!]) {
      const r = runTraining({ ...o, warmupCalls: calls });
      const m = r.measurement!;
      let want = 2;
      while (upTo[want]! < calls) want++;
      assert.equal(m.warmupSteps, want, `warmupCalls ${calls}`);
      assert.equal(m.warmupCalls, upTo[want]);
      assert.equal(r.losses.length, want + 1);
      assert.equal(r.baselineLosses.length, want + 1);
    }
    // A run's own warm-up (the default) reaches the default number of calls.
    const d = runTraining(o).measurement!;
    assert.ok(d.warmupCalls >= DEFAULT_WARMUP_CALLS || d.warmupSteps === 100, `${d.warmupCalls}`);
    assert.throws(() => runTraining({ ...o, warmupCalls: -1 }), /warmupCalls must be .* got -1/);
  },
});

Deno.test({
  name:
    `runTraining: the budgeted warm-up runs past its minimum steps until budgetedWarmupEvents evictions and re-materializations, and only while its steps evict${native}`,
  ignore,
  fn() {
    const o = { model: "gpt", policy: "dtr-eq", budgetRatio: 0.9, steps: 1, warmupCalls: 0 };
    const E = 40;
    // Evictions (not the eager ones) and re-materializations so far, read at each step's end.
    let made = 0;
    const at = new Map<number, number>();
    const r = runTraining({
      ...o,
      budgetedWarmupEvents: E,
      onEvent: (e) => {
        if ((e.type === "evict" && !e.eager) || e.type === "remat") made++;
      },
      onStep: (s) => {
        if (s.phase === "warm-up") at.set(s.step, made);
      },
    });
    const m = r.measurement!;
    const free = m.warmupSteps - m.budgetedWarmupSteps;
    const before = at.get(free - 1)!;
    const through = (k: number) => at.get(free + k)! - before;
    assert.equal(before, 0, "nothing evicted without a budget");
    assert.ok(m.budgetedWarmupSteps > 2, `${m.budgetedWarmupSteps} budgeted warm-up steps`);
    assert.ok(through(m.budgetedWarmupSteps - 1) >= E, "it ran until E events");
    assert.ok(through(m.budgetedWarmupSteps - 2) < E, "and stopped at the first step that made E");
    assert.equal(r.losses.length, m.warmupSteps + 1);
    // One event is made by the minimum steps; a step that evicts nothing adds none.
    assert.equal(
      runTraining({ ...o, budgetedWarmupEvents: 1 }).measurement!.budgetedWarmupSteps,
      2,
    );
    const full = runTraining({ ...o, budgetRatio: 1, budgetedWarmupEvents: 1_000_000 });
    assert.equal(full.stats.evictions, 0);
    assert.equal(full.measurement!.budgetedWarmupSteps, 2);
    assert.throws(
      () => runTraining({ ...o, budgetedWarmupEvents: 1.5 }),
      /budgetedWarmupEvents must be an integer in 0\.\.1000000, got 1\.5/,
    );
  },
});

Deno.test("runTraining: steps and warm-up are capped; bad options name the value", () => {
  const o = { model: "mlp", policy: "dtr-eq", budgetRatio: 1 };
  assert.throws(
    () => runTraining({ ...o, steps: 10_001 }),
    /steps must be an integer in 1\.\.10000, got 10001/,
  );
  assert.throws(() => runTraining({ ...o, steps: 1e12 }), /got 1000000000000/);
  assert.throws(() => runTraining({ ...o, steps: 2.5 }), /got 2\.5/);
  assert.throws(
    () => runTraining({ ...o, warmupSteps: 0 }),
    /warmupSteps must be an integer in 1\.\.100/,
  );
  assert.throws(() => runTraining({ ...o, lr: -1 }), /lr must be a finite number > 0, got -1/);
});

Deno.test({
  name:
    `runTraining: a plan's counts are the measured steps', as the statistics are (budgeted warm-up steps not counted)${native}`,
  ignore,
  fn() {
    for (const policy of ["libra", "chen-sqrt"]) {
      const r = runTraining({
        model: "mlp",
        policy,
        budgetRatio: 0.985,
        steps: 3,
        warmupCalls: 0,
        budgetedWarmupEvents: 0,
      });
      assert.equal(r.measurement!.budgetedWarmupSteps, 2);
      const p = r.plan!;
      assert.equal(p.mismatchedSteps, 0, policy);
      // Every scheduled action is applied or skipped once per measured step.
      assert.equal(p.applied + p.skipped, p.steps * 3, `${policy}: ${JSON.stringify(p)}`);
    }
  },
});

Deno.test({
  name: `runTraining: a budgeted step's time includes the runtime's end of step${native}`,
  ignore,
  fn() {
    // The end of each step made slow (a busy wait): every budgeted step's time holds it, and
    // the budget-free steps (no runtime) are far shorter.
    const wait = 15;
    const proto = Runtime.prototype;
    const endStep = proto.endStep;
    proto.endStep = function (this: Runtime) {
      const t0 = performance.now();
      while (performance.now() - t0 < wait) { /* busy */ }
      endStep.call(this);
    };
    let r;
    try {
      r = runTraining({
        model: "mlp",
        policy: "dtr-eq",
        budgetRatio: 0.985,
        steps: 3,
        warmupCalls: 0,
        budgetedWarmupEvents: 0,
      });
    } finally {
      proto.endStep = endStep;
    }
    for (const ms of r.stepTimesMs) assert.ok(ms >= wait, `budgeted step of ${ms} ms`);
    for (const ms of r.baselineStepTimesMs) assert.ok(ms < wait, `budget-free step of ${ms} ms`);
  },
});

Deno.test({
  name:
    `runTraining: the kernel-free JIT warm-up changes no loss or decision, planners included${native}`,
  ignore,
  fn() {
    for (const policy of ["dtr-eq", "libra"]) {
      const o = {
        model: "gpt",
        policy,
        budgetRatio: 0.7,
        steps: 2,
        warmupCalls: 3000,
        recordDecisions: true,
      };
      const on = runTraining(o), off = runTraining({ ...o, jitWarmup: false });
      // The kernel-free copy ran its calls (whole steps, so at least as many), the other none.
      assert.ok(on.measurement!.jitWarmupCalls >= 3000, `${on.measurement!.jitWarmupCalls}`);
      assert.equal(off.measurement!.jitWarmupCalls, 0);
      assert.ok(on.stats.evictions > 0, `${policy} evicts`);
      assert.deepEqual(on.losses, off.losses, policy);
      assert.deepEqual(on.baselineLosses, off.baselineLosses, policy);
      assert.deepEqual(on.decisions, off.decisions, policy);
      assert.equal(on.stats.remats, off.stats.remats, policy);
    }
  },
});
