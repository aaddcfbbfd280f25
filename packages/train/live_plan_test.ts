import assert from "node:assert/strict";
import {
  CheckmatePlanner,
  ChenSqrtPlanner,
  createPolicy,
  LibraPlanner,
  LookaheadPlanner,
  type Planner,
  PLANNER_NAMES,
  plannerNeeds,
  planPolicy,
} from "@libra/evict";
import type { Trace } from "@libra/lineage/trace";
import { cpuBackend } from "@libra/native";
import { createData, createModel, MODEL_NAMES, SGD, trainStep } from "@libra/nn";
import {
  plannerContext,
  RECORDED_STEP_REPLAY,
  replayTrace,
  Runtime,
  type RuntimeEvent,
} from "@libra/runtime";
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

type ModelName = (typeof MODEL_NAMES)[number];

/** Trains `steps` steps of a seeded tiny `name` model on `rt`; returns losses and final weights. */
function train(name: ModelName, rt: Runtime, steps: number, before?: (i: number) => void) {
  return withBackend(rt, () => {
    manualSeed(7);
    const model = createModel(name, "tiny", { backend: rt });
    const data = createData(name, "tiny", { seed: 7 });
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

/**
 * Evictions and re-materializations in order, each with the step's last call before it (by
 * the engine's call events; -1 before its first) and what it was.
 */
type Moves = { call: number; what: string }[];

/** Logs runtime events into a {@link Moves} list; `base()` is the step's first call index. */
function moves(base: () => number) {
  let call = -1;
  return {
    start() {
      call = -1;
    },
    on(e: RuntimeEvent, log: Moves) {
      if (e.type === "call") call = e.index - base();
      else if (e.type === "evict") log.push({ call, what: `${e.action} ${e.bytes}` });
      else if (e.type === "remat") log.push({ call, what: `${e.how} ${e.bytes}` });
    },
  };
}

const PLANNERS: [string, () => Planner][] = [
  ["chen-sqrt", () => new ChenSqrtPlanner()],
  // the plan itself, not the fallback alone where that replays better
  ["libra", () => new LibraPlanner({ compareFallback: false })],
  // lookahead's own plan (not the fallback alone): static intervals and shortfall choices by the recorded uses
  ["lookahead", () => new LookaheadPlanner({ tryFallback: false })],
  // the MILP's plan (exact on these small steps)
  ["checkmate", () => new CheckmatePlanner({ timeLimitS: 60 })],
  // with in-stage frees: evictions between the restores before a call
  [
    "checkmate (in-stage frees)",
    () => new CheckmatePlanner({ timeLimitS: 30, frees: true, improveMs: 2000 }),
  ],
];

Deno.test("LivePlan installs no hooks for a plan without steps: the runtime runs its fallback as without a plan", () => {
  const trace: Trace = {
    events: [
      { kind: "constant", name: "w", bytes: 8, line: 1 },
      {
        kind: "call",
        op: "relu",
        args: ["w"],
        results: [{ name: "y", bytes: 8, alias: -1 }],
        timeNs: 1,
        backward: false,
        line: 2,
      },
    ],
  };
  const empty = new LivePlan(
    { planner: "t", budgetBytes: 8, steps: [] },
    trace,
    createPolicy("lru"),
  );
  assert.equal(empty.policy.hooks, undefined);
  const one = new LivePlan(
    { planner: "t", budgetBytes: 8, steps: [{ kind: "evict", call: 0, tensor: "y" }] },
    trace,
    createPolicy("lru"),
  );
  assert.ok(one.policy.hooks?.afterCall !== undefined);
});

Deno.test("the live plan tests cover every registered planner", () => {
  const names = new Set(PLANNERS.map(([, make]) => make().name));
  assert.deepEqual([...names].sort(), [...PLANNER_NAMES].sort());
});

for (const model of MODEL_NAMES) {
  for (const [name, make] of PLANNERS) {
    livePlanTest(model, name, make);
  }
}

function livePlanTest(model: ModelName, name: string, make: () => Planner) {
  Deno.test({
    name:
      `LivePlan: a ${name} plan of a recorded tiny ${model} step runs the next live steps bitwise-exactly within the budget`,
    ignore: backend === undefined,
    fn() {
      const b = backend!;
      // Record two budget-free steps; plan the second (steady state).
      const rec = new Runtime({ backend: b, record: true, timeline: false });
      let trace: Trace | undefined;
      withBackend(rec, () => {
        manualSeed(7);
        const m = createModel(model, "tiny", { backend: rec });
        const data = createData(model, "tiny", { seed: 7 });
        const opt = new SGD(m.parameters(), { lr: 0.05, momentum: 0.9 });
        for (let i = 0; i < 2; i++) {
          const batch = data.next();
          const from = rec.trace().events.length;
          trainStep({ model: m, batch, optimizer: opt, backend: rec });
          if (i === 1) trace = stepTrace(rec.trace(), from);
          // no endStep: names stay unique across the recording (see run_training.ts)
        }
      });
      if (trace === undefined) throw new Error("no step recorded");
      // As `libra run` gives it: host memory only to a planner whose plans swap.
      const planner = make();
      const needs = plannerNeeds(planner);
      const hostLimitBytes = needs.swaps ? Infinity : 0;
      const ctx = plannerContext(trace, {
        hostLimitBytes,
        fallback: needs.fallback,
        ...RECORDED_STEP_REPLAY,
      });
      // The floor (the largest call's inputs and outputs, with the parameters and optimizer
      // state) is ~0.97 of the mlp's peak (its parameters, gradients and momentum are most of
      // it; its few activations are freed as the backward pass uses them) and ~0.89 of the
      // lstm's (its fused calls leave no tensor for a product alone).
      const ratio = model === "mlp" ? 0.985 : model === "lstm" ? 0.92 : 0.8;
      const budget = Math.floor(ratio * ctx.baselinePeakBytes);
      const plan = planner.plan(trace, budget, ctx);
      if (name === "lookahead") assert.ok(plan.lookahead !== undefined, "a lookahead plan");
      else assert.ok(plan.steps.length > 0, "the plan evicts something");
      // The mlp's and the lstm's optimal plans free nothing between restores: their fused calls
      // (a linear layer's product and bias, an lstm step with its product with W_hh) leave no
      // value restored and done with before a call.
      if (name.includes("in-stage frees") && model !== "lstm" && model !== "mlp") {
        assert.ok(plan.steps.some((s) => s.before === true), "the plan evicts before a call");
      }

      const free = train(model, new Runtime({ backend: b, timeline: false }), 3);
      const live = new LivePlan(plan, trace, createPolicy(needs.fallback));
      const rt = new Runtime({
        backend: b,
        budget,
        policy: live.policy,
        hostLimitBytes,
        timeline: false,
      });
      live.attach(rt.engine);
      // per live step: non-eager evictions, plan steps carried out / not, and what it evicted
      // and re-materialized, by call of the step
      const perStep: { evictions: number; applied: number; skipped: number; log: Moves }[] = [];
      let stepBase = 0;
      const liveMoves = moves(() => stepBase);
      rt.subscribe((e) => {
        const st = perStep.at(-1);
        if (st === undefined) return; // setting up the model
        if (e.type === "evict" && !e.eager) st.evictions++;
        liveMoves.on(e, st.log);
      });
      let mark = { applied: 0, skipped: 0 };
      const close = () => {
        const last = perStep.at(-1);
        if (last === undefined) return;
        last.applied = live.applied - mark.applied;
        last.skipped = live.skipped - mark.skipped;
        mark = { applied: live.applied, skipped: live.skipped };
      };
      const run = train(model, rt, 3, () => {
        close();
        perStep.push({ evictions: 0, applied: 0, skipped: 0, log: [] });
        stepBase = rt.engine.callIndex;
        liveMoves.start();
        live.beginStep();
      });
      close();
      assert.deepEqual(run.losses, free.losses, "losses bitwise equal");
      assert.deepEqual(run.weights, free.weights, "updated weights bitwise equal");
      assert.ok(rt.stats.peakBytes <= budget, `${rt.stats.peakBytes} <= ${budget}`);
      const planned = plan.steps.filter((s) => s.kind === "evict").length;
      // a restore "before" the end of the step (an output) has no live call to run before
      const calls = trace.events.filter((e) => e.kind === "call" || e.kind === "mutate").length;
      const runnable = plan.steps.filter((s) => s.call < calls).length;
      // Step 1 differs from the recorded step where the optimizer creates its
      // state (the plan stops there); steps 2 and 3 are the recorded step: the
      // whole plan runs, every planned eviction among the step's evictions.
      assert.ok(live.mismatches <= 1, "only step 1 (optimizer state creation) differs");
      for (const [i, st] of perStep.entries()) {
        if (i === 0) continue;
        assert.equal(st.applied + st.skipped, runnable, `step ${i + 1}: ${JSON.stringify(st)}`);
        assert.ok(
          st.skipped <= plan.steps.length - planned,
          `step ${i + 1}: an eviction did not apply`,
        );
        assert.ok(
          st.evictions >= planned,
          `step ${i + 1}: ${st.evictions} evictions, ${planned} planned`,
        );
      }
      // The steady live steps do what the plan's replay on the recorded step does: the same
      // evictions (the plan's, the fallback's, eager ones) and re-materializations, call by
      // call, the update included (a value the replay never brings back, read live, would be
      // recomputed: a loss read on the host). No thrash limit: the live runtime here has no
      // budget-free compute to hold recomputation to.
      const replayLog: Moves = [];
      const replayMoves = moves(() => 0);
      const replay = replayTrace(trace, {
        ...RECORDED_STEP_REPLAY,
        budgetBytes: budget,
        hostLimitBytes,
        overheadLimit: Infinity,
        policy: planPolicy(plan, createPolicy(needs.fallback)),
        onEvent: (e) => replayMoves.on(e, replayLog),
      });
      assert.ok(replay.feasible, replay.error?.message);
      assert.ok(replayLog.length > 0, "the replay evicts");
      for (const [i, st] of perStep.entries()) {
        if (i === 0) continue;
        assert.deepEqual(st.log, replayLog, `step ${i + 1}: as replayed`);
      }
      const events = perStep.map((s) => s.evictions);
      assert.ok(events.some((n) => n > 0), "something was evicted");
    },
  });
}
