import assert from "node:assert/strict";
import { plannerContext, replayTrace } from "@libra/runtime";
import { plannerConformance } from "./_conformance.ts";
import { chainTrace, TraceBuilder } from "./_planner_testing.ts";
import { buildSchedule, LookaheadWorkLimitError } from "./lookahead.ts";
import { LookaheadPlanner } from "./lookahead_planner.ts";
import { planPolicy } from "./planner.ts";
import { createPolicy } from "./policies.ts";

const KiB = 1024;

plannerConformance(
  "lookahead (chain of 6)",
  () => new LookaheadPlanner(),
  chainTrace(6),
  plannerContext(chainTrace(6)),
  [0.9, 0.75, 0.5],
);

/**
 * x; a, b, c = f(x) (1 KiB, 100 ns each); then reads a, b, c, a, b, c (each
 * read makes a 1-byte value released at once); a, b, c are released at the
 * end. At 3 KiB + 1 byte only two of a, b, c fit beside x.
 */
function cyclicTrace() {
  const b = new TraceBuilder().constant("x", KiB);
  for (const n of ["a", "b", "c"]) b.call("f", ["x"], n, KiB, 100);
  let i = 0;
  for (const n of ["a", "b", "c", "a", "b", "c"]) {
    b.call("g", [n], `u${i}`, 1, 10).release(`u${i}`);
    i++;
  }
  return b.release("a").release("b").release("c").build();
}

Deno.test("buildSchedule() lists every storage's reads, the step's end for outputs, and the compute before each call", () => {
  const s = buildSchedule(cyclicTrace());
  assert.equal(s.calls, 9);
  assert.deepEqual(s.values["a"], [{ def: 0, uses: [3, 6] }]);
  assert.deepEqual(s.values["c"], [{ def: 2, uses: [5, 8] }]);
  assert.deepEqual(s.values["x"], [{ def: -1, uses: [0, 1, 2, 9] }]);
  assert.deepEqual(s.values["u0"], [{ def: 3, uses: [] }]);
  assert.deepEqual(s.startNs, [0, 100, 200, 300, 310, 320, 330, 340, 350, 360]);
});

Deno.test("buildSchedule() counts a host read (READ) before call k as a use at k", () => {
  const t = cyclicTrace();
  // Read b on the host after call 3 (g of a): b is needed at call 4 anyway, a read after
  // call 6 adds a use at 7.
  const at = (calls: number) => {
    let seen = 0;
    return t.events.findIndex((e) => (e.kind === "call" ? ++seen : seen) > calls);
  };
  const events = [...t.events];
  events.splice(at(7), 0, { kind: "read", name: "a", line: 0 });
  events.splice(at(4), 0, { kind: "read", name: "b", line: 0 });
  const s = buildSchedule({ events });
  assert.deepEqual(s.values["a"], [{ def: 0, uses: [3, 6, 7] }]);
  assert.deepEqual(s.values["b"], [{ def: 1, uses: [4, 7] }]);
});

Deno.test("lookahead evicts the value needed furthest ahead (Belady): 3 recomputations (the optimum) where staleness needs more", () => {
  const t = cyclicTrace();
  const budget = 3 * KiB + 1;
  const dtr = replayTrace(t, { budgetBytes: budget });
  const lookahead = planPolicy(
    {
      planner: "t",
      budgetBytes: budget,
      steps: [],
      lookahead: { schedule: buildSchedule(t), variant: {} },
    },
    createPolicy("dtr-eq"),
  );
  const la = replayTrace(t, { budgetBytes: budget, policy: lookahead });
  // By hand: c evicts b (read after a); reading b evicts a (read after c);
  // reading a evicts c; reading c at the end: 3 recomputations of 100 ns.
  // Belady's choice is optimal for equal sizes and costs; staleness evicts
  // the value read next at least once more.
  assert.equal(la.stats.remats, 3);
  assert.equal(la.overhead, (360 + 300) / 360);
  assert.ok(dtr.stats.remats > 3, `dtr-eq: ${dtr.stats.remats} recomputations`);
  const plan = new LookaheadPlanner().plan(t, budget, plannerContext(t));
  assert.equal(plan.stats.replayOverhead, la.overhead);
  // all of the overhead is recomputation (no host memory, no copies)
  assert.equal(plan.stats.recomputeOverhead, 300 / 360);
  assert.equal(plan.stats.copyOverhead, 0);
  assert.notEqual(plan.stats.chosen, "fallback");
});

Deno.test("LookaheadPolicy stops a replay once its victims' cost of coming back passes workLimitNs", () => {
  const t = cyclicTrace();
  const budget = 3 * KiB + 1;
  const run = (workLimitNs: number) =>
    replayTrace(t, {
      budgetBytes: budget,
      policy: planPolicy(
        {
          planner: "t",
          budgetBytes: budget,
          steps: [],
          lookahead: { schedule: buildSchedule(t), variant: { workLimitNs } },
        },
        createPolicy("dtr-eq"),
      ),
    });
  // By hand (the Belady test above): three victims, each needed again and
  // brought back by its 100 ns producer (x stays), so 300 ns in all.
  assert.equal(run(300).stats.remats, 3);
  assert.throws(() => run(299), LookaheadWorkLimitError);
  // The planner's replays stop there; the plan it keeps has no limit.
  const plan = new LookaheadPlanner().plan(t, budget, plannerContext(t));
  assert.equal(plan.lookahead?.variant.workLimitNs, undefined);
});
