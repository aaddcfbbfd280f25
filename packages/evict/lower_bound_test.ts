import assert from "node:assert/strict";
import { plannerContext, replayTrace } from "@libra/runtime";
import { chainTrace, TraceBuilder } from "./_planner_testing.ts";
import { LookaheadPlanner } from "./lookahead_planner.ts";
import { recomputeLowerBound } from "./lower_bound.ts";

const KiB = 1024;

function memAt(t: ReturnType<typeof chainTrace>): number[] {
  return replayTrace(t, { timeline: true }).timeline.bytes;
}

Deno.test("recomputeLowerBound() on a chain of 4 at 5 KiB: one 100 ns activation must go at the peak", () => {
  const t = chainTrace(4);
  const b = recomputeLowerBound(t, 5 * KiB, memAt(t));
  assert.equal(b.recomputeNs, 100);
  assert.equal(b.overhead, 900 / 800);
  assert.equal(b.call, 4);
  // the bound is reached here: lookahead recomputes one activation
  const ctx = plannerContext(t);
  assert.equal(new LookaheadPlanner().plan(t, 5 * KiB, ctx).stats.replayOverhead, b.overhead);
  assert.equal(
    recomputeLowerBound(t, 6 * KiB, memAt(t)).overhead,
    1,
    "nothing must go at the peak",
  );
});

Deno.test("recomputeLowerBound() takes the cheapest bytes per ns and counts unneeded values as free", () => {
  // x; a = f(x) 2 KiB 100 ns; b = f(a) 1 KiB 300 ns; u = f(x) 1 KiB 50 ns (never read
  // again, released at the end); c = g(b) 1 KiB reads b, then reads of a and b.
  const t = new TraceBuilder().constant("x", KiB)
    .call("f", ["x"], "a", 2 * KiB, 100)
    .call("f", ["a"], "b", KiB, 300)
    .call("f", ["x"], "u", KiB, 50)
    .call("g", ["x"], "c", KiB, 10)
    .call("h", ["a", "b", "c"], "d", KiB, 10)
    .release("u").build();
  const mem = memAt(t);
  // at call 3 (c): x, a, b, u, c = 6 KiB; a budget of 4 KiB needs 2 KiB out of a, b, u:
  // u (1 KiB, free: not needed again), then half of a (1 KiB of 2 KiB at 100 ns) = 50 ns.
  assert.equal(mem[3], 6 * KiB);
  const b = recomputeLowerBound(t, 4 * KiB, mem);
  // (call 2 needs as much: 5 KiB there, 1 KiB of a out; the first call wins the tie)
  assert.equal(b.recomputeNs, 50);
  assert.equal(b.call, 2);
  // every replay at that budget costs at least the bound
  const dtr = replayTrace(t, { budgetBytes: 4 * KiB });
  assert.ok(!dtr.feasible || dtr.overhead >= b.overhead);
});

Deno.test("recomputeLowerBound() never exceeds what the policies and lookahead achieve on chains", () => {
  for (const n of [4, 6, 8]) {
    const t = chainTrace(n);
    const peak = replayTrace(t).stats.peakBytes;
    for (const f of [0.9, 0.75, 0.6]) {
      const budget = Math.floor(f * peak);
      const bound = recomputeLowerBound(t, budget, memAt(t)).overhead;
      for (const policy of ["dtr-eq", "msps", "lru"]) {
        const r = replayTrace(t, { budgetBytes: budget, policy, overheadLimit: Infinity });
        if (r.feasible) assert.ok(r.overhead >= bound - 1e-12, `${policy} chain ${n} at ${f}`);
      }
      const la = new LookaheadPlanner().plan(t, budget, plannerContext(t));
      if (la.stats.replayFeasible) assert.ok(la.stats.replayOverhead >= bound - 1e-12);
    }
  }
});
