/**
 * runTraining's options for the lab executor: budget in bytes, configuration
 * overrides, the budgeted run's timeline (its markers counted against the
 * runtime's statistics), the last step's trace, per-step callbacks, infeasible
 * budgets returned instead of thrown, and cancellation.
 */
import assert from "node:assert/strict";
import { OutOfBudgetError, parseTrace } from "@libra/runtime";
import { runTraining, type StepInfo, type TrainingPhase } from "./run_training.ts";

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
    const r = runTraining({
      model: "mlp",
      policy: "dtr-eq+swap",
      budgetRatio: 0.8,
      steps: 3,
      seed: 1,
      timeline: true,
      recordLastStep: true,
      onStep: (s) => steps.push(s),
      onPhase: (p) => phases.push(p),
    });
    assert.deepEqual(phases, ["warm-up", "baseline", "budget"]);
    assert.deepEqual(
      steps.map((s) => `${s.phase}${s.step}/${s.steps}`),
      ["warm-up0/2", "warm-up1/2", ...[0, 1, 2].map((i) => `baseline${i}/3`)].concat(
        [0, 1, 2].map((i) => `budget${i}/3`),
      ),
    );
    assert.deepEqual(steps.filter((s) => s.phase === "budget").map((s) => s.loss), r.losses);
    assert.deepEqual(r.stepTimesMs, steps.filter((s) => s.phase === "budget").map((s) => s.ms));
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
    const byRatio = runTraining({ model: "mlp", policy: "dtr-eq", budgetRatio: 0.7, steps: 2 });
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
      const o = { model: "gpt", policy, budgetRatio: 0.01, steps: 2 };
      assert.throws(() => runTraining(o), OutOfBudgetError);
      const r = runTraining({ ...o, allowInfeasible: true, timeline: true, recordLastStep: true });
      assert.ok(r.outOfBudget instanceof OutOfBudgetError, policy);
      assert.match(r.outOfBudget.message, /budget/);
      assert.ok(r.losses.length < 2);
      assert.equal(r.baselineLosses.length, 2);
      assert.equal(r.trace, undefined);
      assert.ok(r.peakBytes <= r.budgetBytes);
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
          budgetRatio: 0.9,
          steps: 3,
          signal: stop.signal,
          onStep: (s) => s.phase === "budget" && stop.abort(),
        }),
      /canceled before budget step 2\/3/,
    );
  },
});
