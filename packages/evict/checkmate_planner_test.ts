import assert from "node:assert/strict";
import type { Trace } from "@libra/lineage/trace";
import { plannerContext, replayTrace } from "@libra/runtime";
import { buildProblem, type CheckmateProblem } from "./_checkmate_model.ts";
import { plannerConformance } from "./_conformance.ts";
import { chainTrace, TraceBuilder } from "./_planner_testing.ts";
import { CheckmatePlanner } from "./checkmate_planner.ts";
import { type Plan, planPolicy } from "./planner.ts";
import { createPlanner, PLANNER_NAMES } from "./planners.ts";

const K = 1024;

/**
 * x -> a; b = f(a), c = g(a); d = h(b, c); a backward pass reading them in
 * reverse. With `stem`, a is computed from x through s (x -> s -> a), which
 * is released once a is computed.
 */
function diamondTrace(stem = false): Trace {
  const b = new TraceBuilder().constant("x", K);
  if (stem) b.call("f", ["x"], "s", 2 * K, 100).call("f", ["s"], "a", K, 100).release("s");
  else b.call("f", ["x"], "a", K, 100);
  b.call("f", ["a"], "b", 2 * K, 300);
  b.call("f", ["a"], "c", K, 200).call("f", ["b", "c"], "d", K, 100);
  b.call("f_backward", ["d"], "gd", K, 100, true).release("d");
  b.call("f_backward", ["gd", "c"], "gc", K, 100, true).release("c");
  b.call("f_backward", ["gd", "b"], "gb", K, 100, true).release("gd").release("b");
  b.call("f_backward", ["gb", "gc", "a"], "ga", K, 100, true);
  return b.release("gb").release("gc").release("a").build();
}

/**
 * An encoder e1 -> e2 -> e3, a decoder reading skip connections e2 and e1,
 * and its backward pass. With `stem`, e2 is computed from e1 through m
 * (e1 -> m -> e2), released once e2 is computed.
 */
function unetTrace(stem = false): Trace {
  const b = new TraceBuilder().constant("x", K);
  b.call("enc", ["x"], "e1", 2 * K, 100);
  if (stem) b.call("enc", ["e1"], "m", 2 * K, 100).call("enc", ["m"], "e2", K, 100).release("m");
  else b.call("enc", ["e1"], "e2", K, 200);
  b.call("enc", ["e2"], "e3", K, 300).call("dec", ["e3", "e2"], "d2", K, 200);
  b.call("dec", ["d2", "e1"], "d1", 2 * K, 100);
  b.call("dec_backward", ["d1", "d2", "e1"], "g2", K, 100, true).release("d1");
  b.call("dec_backward", ["g2", "e3", "e2"], "g3", K, 100, true).release("g2").release("d2");
  b.call("enc_backward", ["g3", "e2"], "g4", K, 100, true).release("g3").release("e3");
  b.call("enc_backward", ["g4", "e1"], "g5", K, 100, true);
  return b.release("g4").release("e2").release("e1").build();
}

/** Every subset of `d`. */
function subsets<T>(d: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let m = 0; m < 1 << d.length; m++) out.push(d.filter((_, j) => (m >> j) & 1));
  return out;
}

/**
 * A dynamic program over the retained sets of every stage (each a subset of
 * the values whose retention is a decision there): the least summed
 * `stage(t, retained into t, retained into t + 1)` over the step, the last
 * stage retaining nothing further (`null`).
 */
function overRetention(
  p: CheckmateProblem,
  stage: (t: number, cur: number[], next: number[] | null) => number,
): number {
  const retainable = (t: number) => p.values.filter((v) => p.sVar(t, v.k)).map((v) => v.k);
  let best = new Map<string, { set: number[]; cost: number }>([["", { set: [], cost: 0 }]]);
  for (let t = 0; t < p.n; t++) {
    const next = new Map<string, { set: number[]; cost: number }>();
    for (const nx of subsets(retainable(t + 1))) {
      let c = Infinity;
      for (const { set, cost } of best.values()) c = Math.min(c, cost + stage(t, set, nx));
      if (c < Infinity) next.set(nx.join(","), { set: nx, cost: c });
    }
    best = next;
  }
  let end = Infinity;
  for (const { set, cost } of best.values()) end = Math.min(end, cost + stage(p.n, set, null));
  return end;
}

/**
 * The least recomputation by exhaustive search, independent of the MILP: a
 * dynamic program over stages whose state is the set of values retained into
 * the stage (every subset of the values that may be retained there); a
 * stage's recomputation is the closure of what its call reads and what it
 * newly retains, and its memory the budget-free memory less the values not
 * held plus every recomputed call's outputs. Infinity when nothing fits.
 */
function bruteForce(p: CheckmateProblem, budget: number): number {
  const holds = (t: number, set: readonly number[], v: number) => p.forced(t, v) || set.includes(v);
  // cost of stage t holding `cur`, retaining `next` into t + 1 (Infinity: impossible)
  const stage = (t: number, cur: number[], next: number[] | null): number => {
    const need: number[] = [];
    if (t < p.n) {
      need.push(...p.calls[t]!.inputs);
      for (const v of p.values) {
        if (holds(t + 1, next!, v.k) && !holds(t, cur, v.k) && v.producer !== t) need.push(v.k);
      }
    } else for (const v of p.values) if (v.output && !holds(t, cur, v.k)) need.push(v.k);
    const rec = new Set<number>();
    while (need.length > 0) {
      const v = need.pop()!;
      if (holds(t, cur, v)) continue;
      const i = p.values[v]!.producer;
      if (rec.has(i)) continue;
      if (!p.rCand[t]!.includes(i)) return Infinity;
      rec.add(i);
      need.push(...p.calls[i]!.inputs);
    }
    let mem = p.base[t]!, cost = 0;
    for (const v of p.values) {
      if (v.producer < t && t < v.end && !holds(t, cur, v.k)) mem -= v.bytes;
    }
    for (const i of rec) {
      mem += p.calls[i]!.outBytes;
      cost += p.calls[i]!.costNs;
    }
    return mem <= budget ? cost : Infinity;
  };
  return overRetention(p, stage);
}

/**
 * The least recomputation with in-stage frees by exhaustive search, written
 * apart from the model: a dynamic program over the retained sets as in
 * {@link bruteForce}, but a stage tries every subset of its candidate calls
 * (not the closure), runs them in call order (each needs its inputs on the
 * device; a call whose output is on the device is not run again), and counts
 * memory by liveness: at each point of the stage a value counts when it is on
 * the device and just produced, or read later in the stage (by a later
 * recomputation or the call), or retained into the next stage (an output of
 * the step, at the end); a value the runtime may not drop (forced) always.
 */
function bruteForceFrees(p: CheckmateProblem, budget: number): number {
  const stage = (t: number, cur: number[], next: number[] | null): number => {
    const start = new Set(p.values.filter((v) => p.forced(t, v.k)).map((v) => v.k));
    for (const v of cur) start.add(v);
    const reads = t < p.n ? p.calls[t]!.inputs : [];
    const keepAfter = (v: number) =>
      t < p.n ? next!.includes(v) || p.forced(t + 1, v) : p.values[v]!.output;
    let best = Infinity;
    for (const r of subsets(p.rCand[t]!)) {
      const on = new Set(start);
      let ok = true, cost = 0;
      for (const i of r) {
        const c = p.calls[i]!;
        if (!c.inputs.every((v) => on.has(v)) || c.outputs.some((v) => on.has(v))) ok = false;
        for (const v of c.outputs) on.add(v);
        cost += c.costNs;
      }
      if (!ok || cost >= best || !reads.every((v) => on.has(v))) continue;
      if (t < p.n && !next!.every((v) => on.has(v) || p.values[v]!.producer === t)) continue;
      if (t === p.n && !p.values.every((v) => !v.output || on.has(v.k))) continue;
      // budget-free memory less every managed value the program holds (forced ones stay)
      let fixed = p.base[t]!;
      for (const v of p.values) {
        if (v.producer < t && t < v.end && !p.forced(t, v.k)) fixed -= v.bytes;
      }
      const live = (v: number, k: number) =>
        !p.forced(t, v) &&
        (reads.includes(v) || keepAfter(v) ||
          r.slice(k).some((j) => p.calls[j]!.inputs.includes(v)));
      const have = new Set(start);
      let peak = -Infinity;
      r.forEach((i, k) => {
        for (const v of p.calls[i]!.outputs) have.add(v);
        let mem = fixed - (t < p.n ? p.calls[t]!.outBytes : 0);
        for (const v of have) {
          if (live(v, k) || (p.calls[i]!.outputs.includes(v) && !p.forced(t, v))) {
            mem += p.values[v]!.bytes;
          }
        }
        peak = Math.max(peak, mem);
      });
      let mem = fixed;
      for (const v of have) if (live(v, r.length)) mem += p.values[v]!.bytes;
      peak = Math.max(peak, mem);
      if (peak <= budget) best = cost;
    }
    return best;
  };
  return overRetention(p, stage);
}

/** Replays `plan` with no fallback policy: memory must fit by the plan alone. */
function replayAlone(trace: Trace, plan: Plan) {
  return replayTrace(trace, {
    budgetBytes: plan.budgetBytes,
    policy: planPolicy(plan, { name: "none", choose: () => [] }),
  });
}

const graphs: [string, Trace][] = [
  ["chain of 4", chainTrace(4)],
  ["diamond", diamondTrace()],
  ["U-Net-like", unetTrace()],
];

for (const [name, trace] of graphs) {
  Deno.test(`checkmate on a ${name}: the MILP finds the brute-force optimum, the replay costs it, the LP bounds it and its rounding fits`, () => {
    const ctx = plannerContext(trace);
    const p = buildProblem(trace, ctx.baselineBytes!);
    const peak = ctx.baselinePeakBytes;
    let solved = 0, recomputing = 0;
    for (let budget = peak; budget >= peak / 3; budget -= 256) {
      const opt = bruteForce(p, budget);
      if (opt === Infinity) {
        assert.throws(
          () => new CheckmatePlanner({ solver: "milp" }).plan(trace, budget, ctx),
          /no plan fits the budget/,
        );
        continue;
      }
      solved++;
      if (opt > 0) recomputing++;
      const exact = new CheckmatePlanner({ solver: "milp" }).plan(trace, budget, ctx);
      assert.equal(exact.stats.status, "Optimal");
      assert.ok(exact.stats.optimal);
      assert.equal(exact.stats.recomputeNs, opt, `budget ${budget}`);
      const alone = replayAlone(trace, exact);
      assert.ok(alone.feasible, `budget ${budget}: the plan alone fits`);
      assert.equal(alone.stats.recomputeNs, opt, "the replay recomputes what the model says");
      assert.equal(alone.stats.peakBytes, exact.stats.peakBytes, "and peaks where it says");
      assert.equal(exact.stats.replayOverhead, alone.overhead);
      const lp = new CheckmatePlanner({ solver: "lp" }).plan(trace, budget, ctx);
      assert.ok(lp.stats.boundNs <= opt + 1e-6, `LP bound ${lp.stats.boundNs} > optimum ${opt}`);
      assert.ok(lp.stats.recomputeNs >= opt);
      const r = replayAlone(trace, lp);
      assert.ok(r.feasible, `budget ${budget}: the rounded plan fits`);
      assert.equal(r.stats.recomputeNs, lp.stats.recomputeNs);
    }
    assert.ok(
      solved >= 3 && recomputing >= 2,
      `${solved} feasible budgets, ${recomputing} recompute`,
    );
  });
}

const stemmed: [string, Trace][] = [
  ["chain of 4", chainTrace(4)],
  ["diamond with a stem", diamondTrace(true)],
  ["U-Net-like with a stem", unetTrace(true)],
];

for (const [name, trace] of stemmed) {
  Deno.test(`checkmate with in-stage frees on a ${name}: the MILP finds the brute-force optimum, below the stage form's where freeing matters, and the replay alone fits and costs it`, () => {
    const ctx = plannerContext(trace);
    const p = buildProblem(trace, ctx.baselineBytes!);
    const peak = ctx.baselinePeakBytes;
    let solved = 0, better = 0;
    for (let budget = peak; budget >= peak / 4; budget -= 256) {
      const opt = bruteForceFrees(p, budget);
      const stageForm = bruteForce(p, budget);
      assert.ok(opt <= stageForm, `budget ${budget}: freeing inside a stage never costs more`);
      if (opt === Infinity) {
        assert.throws(
          () => new CheckmatePlanner({ solver: "milp", frees: true }).plan(trace, budget, ctx),
          /no plan fits the budget/,
        );
        continue;
      }
      solved++;
      if (opt < stageForm) better++;
      const exact = new CheckmatePlanner({ solver: "milp", frees: true }).plan(trace, budget, ctx);
      assert.equal(exact.stats.status, "Optimal");
      assert.equal(exact.stats.recomputeNs, opt, `budget ${budget}`);
      const alone = replayAlone(trace, exact);
      assert.ok(alone.feasible, `budget ${budget}: the plan alone fits (${alone.error})`);
      assert.ok(alone.stats.peakBytes <= budget);
      assert.equal(alone.stats.recomputeNs, opt, "the replay recomputes what the model says");
      assert.equal(alone.stats.peakBytes, exact.stats.peakBytes, "and peaks where it says");
      const lp = new CheckmatePlanner({ solver: "lp", frees: true }).plan(trace, budget, ctx);
      assert.ok(lp.stats.boundNs <= opt + 1e-6, `LP bound ${lp.stats.boundNs} > optimum ${opt}`);
      if (Number.isFinite(lp.stats.recomputeNs)) {
        assert.ok(lp.stats.recomputeNs >= opt);
        const r = replayAlone(trace, lp);
        assert.ok(r.feasible, `budget ${budget}: the rounded plan fits`);
        assert.equal(r.stats.recomputeNs, lp.stats.recomputeNs);
      }
    }
    assert.ok(
      solved >= 3 && better >= 1,
      `${solved} feasible budgets, ${better} better with frees`,
    );
  });
}

Deno.test("checkmate: a budget below what a stage needs is reported infeasible, naming the stage", () => {
  const t = unetTrace();
  const ctx = plannerContext(t);
  assert.throws(
    () => new CheckmatePlanner().plan(t, 3 * K, ctx),
    (e: Error & { reason?: string }) =>
      e instanceof RangeError && e.reason === "out of memory" &&
      /no plan fits the budget of 3072 bytes/.test(e.message) &&
      /stage call \d+ needs at least \d+ bytes with every other value dropped/.test(e.message),
  );
  assert.throws(() => new CheckmatePlanner().plan(t, 0, ctx), /budget must be > 0/);
  assert.throws(() => new CheckmatePlanner({ timeLimitS: 0 }), /timeLimitS must be > 0/);
  assert.throws(
    () => new CheckmatePlanner({ maxVars: 10 }).plan(t, 8 * K, ctx),
    (e: Error & { reason?: string }) =>
      e.reason === "too large" && /decisions over 10 stages; the limit is 10/.test(e.message),
  );
  assert.throws(
    () => new CheckmatePlanner().plan(t, 8 * K, { ...ctx, baselineBytes: undefined } as never),
    /baselineBytes/,
  );
});

Deno.test("checkmate: a MILP stopped by its time limit says so, with a plan and a bound below it", () => {
  const t = chainTrace(40);
  const ctx = plannerContext(t);
  const budget = Math.floor(0.6 * ctx.baselinePeakBytes);
  const plan = new CheckmatePlanner({ solver: "milp", timeLimitS: 1e-3 }).plan(t, budget, ctx);
  assert.equal(plan.stats.status, "Time limit reached");
  assert.ok(plan.stats.timeLimitReached);
  assert.ok(!plan.stats.optimal);
  assert.ok(Number.isFinite(plan.stats.boundNs) && plan.stats.boundNs <= plan.stats.recomputeNs);
  assert.ok(plan.stats.replayFeasible);
  // Tighter, the MILP finds nothing in time and no rounding of the relaxation fits:
  // the fallback alone, and the LP bound.
  const tight = Math.floor(0.3 * ctx.baselinePeakBytes);
  const none = new CheckmatePlanner({ solver: "milp", timeLimitS: 1e-3 }).plan(t, tight, ctx);
  assert.equal(none.stats.rounding, "none fits: fallback alone");
  assert.deepEqual(none.steps, []);
  assert.ok(Number.isNaN(none.stats.recomputeNs));
  // the MILP's dual bound there after 30 s was 3000 ns: the LP bound is positive and below it
  assert.ok(none.stats.boundNs > 0 && none.stats.boundNs <= 3000 + 1e-6, `${none.stats.boundNs}`);
});

Deno.test("checkmate is a registered planner", () => {
  assert.ok(PLANNER_NAMES.includes("checkmate"));
  assert.equal(createPlanner("checkmate").name, "checkmate");
});

plannerConformance(
  "checkmate (chain of 6)",
  () => new CheckmatePlanner(),
  chainTrace(6),
  plannerContext(chainTrace(6)),
  [0.9, 0.75],
);
