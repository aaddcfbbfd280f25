/**
 * Per-step traces (`Runtime.endStep()` then `Runtime.trace()`): values carried
 * over from earlier steps get names distinct from the step's own outputs, the
 * step's own names repeat step to step, a step's trace replays in the
 * simulator with the live step's decisions, and a plan made on one step's
 * trace runs the next steps bitwise-exactly.
 */

import assert from "node:assert/strict";
import { AnalyticCostModel, DEVICE_PEAKS } from "@libra/cost";
import { createPlanner, createPolicy } from "@libra/evict";
import type { Trace } from "@libra/lineage/trace";
import { createData, createModel, SGD, trainStep } from "@libra/nn";
import { manualSeed } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Runtime } from "./runtime.ts";
import { plannerContext, replayTrace } from "./simulator.ts";
import { formatTrace, parseTrace } from "./trace.ts";

interface StepRecord {
  trace: Trace | null;
  decisions: string[];
  peakBytes: number;
  computeNs: number;
  remats: number;
}

/**
 * `n` SGD steps (momentum 0.9) of the tiny GPT on `rt` with `endStep()` after
 * each; `before(i)` runs before step i. Returns per-step records, losses and
 * the final weights.
 */
function train(rt: Runtime, n: number, before?: (i: number) => void) {
  manualSeed(3);
  const model = createModel("gpt", "tiny", { backend: rt });
  const data = createData("gpt", "tiny", { seed: 1 });
  const opt = new SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
  const steps: StepRecord[] = [];
  const losses: number[] = [];
  for (let i = 0; i < n; i++) {
    before?.(i);
    const d0 = rt.engine.decisions.length;
    const s0 = { ...rt.stats };
    losses.push(trainStep({ model, batch: data.next(), optimizer: opt, backend: rt }));
    steps.push({
      trace: (() => {
        try {
          return rt.trace();
        } catch {
          return null;
        }
      })(),
      decisions: rt.engine.decisions.slice(d0),
      peakBytes: rt.stats.peakBytes,
      computeNs: rt.stats.computeNs - s0.computeNs,
      remats: rt.stats.remats - s0.remats,
    });
    rt.endStep();
    rt.resetPeak();
  }
  const weights = model.parameters().map((p) => Array.from(p.toArray()));
  return { steps, losses, weights };
}

function names(trace: Trace) {
  const constants = trace.events.flatMap((e) => e.kind === "constant" ? [e.name] : []);
  const results = trace.events.flatMap((e) =>
    e.kind === "call" ? e.results.map((r) => r.name) : []
  );
  return { constants, results };
}

const analytic = new AnalyticCostModel(DEVICE_PEAKS.cpu!);

/**
 * Replays the part of a live step's trace before its first MUTATE (the
 * simulator runs MUTATE out of place, the live runtime in place, so they
 * differ from there on) and checks the replay's timeline (bytes in use after
 * every call, drops, re-materializations) against the live one, whose step
 * began at call `base`. Returns the number of calls compared.
 */
function sameAsLive(rt: Runtime, base: number, trace: Trace, budget: number, policy: string) {
  const events = trace.events;
  const firstMutate = events.findIndex((e) => e.kind === "mutate");
  assert.ok(firstMutate > 0, "SGD updates in place");
  const head = events.slice(0, firstMutate);
  const calls = head.filter((e) => e.kind === "call").length;
  const sim = replayTrace(parseTrace(formatTrace({ events: head })), {
    budgetBytes: budget,
    policy,
    timeline: true,
    leafRelease: "keep-if-needed",
  });
  // (at its end a replay re-materializes every value still referenced, which the cut trace has many of)
  const oom = sim.timeline.markers.find((m) => m.kind === "oom");
  assert.ok(sim.feasible || oom!.call >= calls, sim.error?.message);
  const tl = rt.timeline;
  const liveMarks = tl.markers
    .map((m) => ({ ...m, call: m.call - base }))
    .filter((m) => m.call >= 0 && m.call < calls);
  const simMarks = sim.timeline.markers.filter((m) => m.call < calls);
  assert.deepEqual(simMarks, liveMarks, `${policy}: same drops and re-materializations`);
  const livePoints = tl.calls.flatMap((c, i) =>
    c - base >= 0 && c - base < calls ? [[c - base, tl.bytes[i]]] : []
  );
  const simPoints = sim.timeline.calls.flatMap((c, i) =>
    c < calls ? [[c, sim.timeline.bytes[i]]] : []
  );
  assert.equal(simPoints.length, calls);
  assert.deepEqual(simPoints, livePoints, `${policy}: same bytes in use after every call`);
  return { calls, drops: liveMarks.filter((m) => m.kind === "drop").length };
}

let freeBase = 0;
const freeRt = new Runtime({ backend: new ReferenceBackend(), record: true, costModel: analytic });
const free = train(freeRt, 3, (i) => {
  if (i === 1) freeBase = freeRt.engine.callIndex;
});

Deno.test("a step's trace after endStep() names carried-over values apart from the step's own", () => {
  const [, second, third] = free.steps;
  const n2 = names(second!.trace!), n3 = names(third!.trace!);
  assert.ok(n2.constants.length > 0 && n2.results.length > 0);
  const all = [...n2.constants, ...n2.results];
  assert.equal(new Set(all).size, all.length, "every name is defined once in the step's trace");
  assert.ok(n2.constants.some((c) => /^s0\.c\d+\.\d+$/.test(c)), "computed values of step 0");
  assert.deepEqual(n3.results, n2.results, "a step's own outputs keep their names step to step");
  // parameters and momentum buffers keep the name they got at the end of the step that made them
  const carried = (ns: string[]) => ns.filter((c) => c.startsWith("s0.")).sort();
  assert.deepEqual(carried(n3.constants), carried(n2.constants));
  const r = replayTrace(parseTrace(formatTrace(second!.trace!)), { leafRelease: "keep-if-needed" });
  assert.ok(r.feasible, "the whole step replays");
  assert.equal(r.stats.computeNs, second!.computeNs);
  sameAsLive(freeRt, freeBase, second!.trace!, Infinity, "dtr-eq");
});

for (const policy of ["dtr-eq", "dtr", "msps"]) {
  Deno.test(`a replay of a later step's trace makes that live step's decisions (${policy})`, () => {
    const budget = Math.floor(0.75 * free.steps[1]!.peakBytes);
    const rt = new Runtime({
      backend: new ReferenceBackend(),
      budget,
      policy,
      costModel: analytic,
      record: true,
    });
    let base = 0;
    const live = train(rt, 2, () => base = rt.engine.callIndex).steps[1]!;
    const { drops } = sameAsLive(rt, base, live.trace!, budget, policy);
    assert.ok(drops > 0, "the budget forced evictions in step 1");
  });
}

for (const planner of ["chen-sqrt", "libra"]) {
  Deno.test(`Runtime.applyPlan() runs a ${planner} plan made on one step's trace on the next steps exactly`, () => {
    const trace = parseTrace(formatTrace(free.steps[1]!.trace!));
    const budget = Math.floor(0.75 * free.steps[1]!.peakBytes);
    const ctx = plannerContext(trace, { leafRelease: "keep-if-needed" });
    const plan = createPlanner(planner).plan(trace, budget, ctx);
    assert.ok(plan.steps.length > 0, "the planner evicts something");
    const rt = new Runtime({ backend: new ReferenceBackend(), budget, costModel: analytic });
    const planned: string[] = [];
    rt.subscribe((e) => {
      if (e.type === "evict" && !e.eager) planned.push(e.name);
    });
    const out = train(rt, 3, (i) => {
      if (i === 1) rt.applyPlan(plan, createPolicy("dtr-eq"));
    });
    const names = new Set(plan.steps.map((s) => s.tensor));
    assert.ok(planned.some((n) => names.has(n)), "planned tensors were found and evicted by name");
    assert.deepEqual(out.losses, free.losses, "losses");
    assert.deepEqual(out.weights, free.weights, "updated weights");
    for (const s of out.steps) assert.ok(s.peakBytes <= budget, `${s.peakBytes} <= ${budget}`);
  });
}
