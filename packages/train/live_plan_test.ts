import assert from "node:assert/strict";
import {
  ChenSqrtPlanner,
  createPolicy,
  LibraPlanner,
  LookaheadPlanner,
  type Planner,
} from "@libra/evict";
import type { Trace } from "@libra/lineage/trace";
import { cpuBackend } from "@libra/native";
import { createData, createModel, SGD, trainStep } from "@libra/nn";
import { plannerContext, replayTrace, Runtime } from "@libra/runtime";
import { type Backend, manualSeed, withBackend } from "@libra/tensor";
import { LivePlan, stepTrace } from "./live_plan.ts";

Deno.test("stepTrace() turns values live at the cut into constants and keeps the step's events", () => {
  const t: Trace = {
    events: [
      { kind: "constant", name: "w", bytes: 8, line: 1 },
      { kind: "constant", name: "old", bytes: 4, line: 2 },
      {
        kind: "call",
        op: "f",
        args: ["w"],
        results: [{ name: "a", bytes: 16, alias: -1 }, { name: "v", bytes: 0, alias: 0 }],
        timeNs: 1,
        backward: false,
        line: 3,
      },
      { kind: "release", name: "old", line: 4 },
      { kind: "copy", dst: "a2", src: "a", line: 5 },
      // the step
      {
        kind: "call",
        op: "g",
        args: ["a", "v"],
        results: [{ name: "b", bytes: 16, alias: -1 }],
        timeNs: 1,
        backward: false,
        line: 6,
      },
      { kind: "release", name: "a", line: 7 },
    ],
  };
  const s = stepTrace(t, 5);
  assert.deepEqual(s.events.slice(0, 4), [
    { kind: "constant", name: "w", bytes: 8, line: 0 },
    { kind: "copy", dst: "v", src: "w", line: 0 },
    { kind: "constant", name: "a", bytes: 16, line: 0 },
    { kind: "copy", dst: "a2", src: "a", line: 0 },
  ]);
  assert.deepEqual(s.events.slice(4), t.events.slice(5));
  // w (8) + a (16) + b (16) live at the step's only call
  assert.equal(replayTrace(s).stats.peakBytes, 40);
  assert.throws(() => stepTrace(t, 6, 3), /bad event range/);
});

let backend: Backend | undefined;
let why = "";
try {
  backend = cpuBackend();
} catch (e) {
  why = (e as Error).message.split("\n")[0]!;
  console.log(`skipping live plan tests: native cpu backend unavailable (${why})`);
}

/** Trains `steps` steps of a seeded tiny resnet on `rt`; returns losses and final weights. */
function train(rt: Runtime, steps: number, before?: (i: number) => void) {
  return withBackend(rt, () => {
    manualSeed(7);
    const model = createModel("resnet", "tiny", { backend: rt });
    const data = createData("resnet", "tiny", { seed: 7 });
    const opt = new SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
    const marks: number[] = [];
    const losses: number[] = [];
    for (let i = 0; i < steps; i++) {
      const batch = data.next();
      before?.(i);
      marks.push(rt.engine.callIndex);
      losses.push(trainStep({ model, batch, optimizer: opt, backend: rt }));
      rt.endStep();
    }
    const weights = model.parameters().map((p) => Array.from(p.toTypedArray()));
    return { losses, weights };
  });
}

for (
  const [name, make] of [
    ["chen-sqrt", () => new ChenSqrtPlanner()],
    // the plan itself, not the fallback alone where that replays better
    ["libra", () => new LibraPlanner({ compareFallback: false })],
    // lookahead's own plan (not the fallback alone): static intervals and shortfall choices by the recorded uses
    ["lookahead", () => new LookaheadPlanner({ tryFallback: false })],
  ] as [string, () => Planner][]
) {
  Deno.test({
    name:
      `LivePlan: a ${name} plan of a recorded step runs the next live steps bitwise-exactly within the budget`,
    ignore: backend === undefined,
    fn() {
      const b = backend!;
      // Record two budget-free steps; plan the second (steady state).
      const rec = new Runtime({ backend: b, record: true, timeline: false });
      let trace: Trace | undefined;
      withBackend(rec, () => {
        manualSeed(7);
        const model = createModel("resnet", "tiny", { backend: rec });
        const data = createData("resnet", "tiny", { seed: 7 });
        const opt = new SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
        for (let i = 0; i < 2; i++) {
          const batch = data.next();
          const from = rec.trace().events.length;
          trainStep({ model, batch, optimizer: opt, backend: rec });
          if (i === 1) trace = stepTrace(rec.trace(), from);
          // no endStep: names stay unique across the recording (see run_training.ts)
        }
      });
      if (trace === undefined) throw new Error("no step recorded");
      const ctx = plannerContext(trace, { hostLimitBytes: Infinity });
      const budget = Math.floor(0.8 * ctx.baselinePeakBytes);
      const plan = make().plan(trace, budget, ctx);
      if (name === "lookahead") assert.ok(plan.lookahead !== undefined, "a lookahead plan");
      else assert.ok(plan.steps.length > 0, "the plan evicts something");

      const free = train(new Runtime({ backend: b, timeline: false }), 3);
      const live = new LivePlan(plan, trace, createPolicy("dtr-eq"));
      const rt = new Runtime({
        backend: b,
        budget,
        policy: live.policy,
        hostLimitBytes: Infinity,
        timeline: false,
      });
      live.attach(rt.engine);
      const events: string[] = [];
      rt.subscribe((e) => {
        if (e.type === "evict" && !e.eager) events.push(e.name);
      });
      const run = train(rt, 3, () => live.beginStep());
      assert.deepEqual(run.losses, free.losses, "losses bitwise equal");
      assert.deepEqual(run.weights, free.weights, "updated weights bitwise equal");
      assert.ok(rt.stats.peakBytes <= budget, `${rt.stats.peakBytes} <= ${budget}`);
      const planned = plan.steps.filter((s) => s.kind === "evict").length;
      // every step takes the plan: at least its evictions ran in each of the 3 steps
      // (step 1 differs from the recorded one only in the optimizer, after the plan)
      assert.ok(live.applied >= 3 * planned, `applied ${live.applied} of ${3 * planned} evictions`);
      assert.ok(live.mismatches <= 1, "only step 1 (optimizer state creation) differs");
      assert.ok(events.length >= 3 * planned);
      assert.ok(events.length > 0, "something was evicted");
    },
  });
}
