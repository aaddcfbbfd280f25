import assert from "node:assert/strict";
import { ChenSqrtPlanner, createPolicy, planPolicy } from "@libra/evict";
import { parseTrace, readTrace, replayTrace } from "@libra/runtime";
import { plannerSimulation, simulatePlanner } from "./simulate_plan.ts";

/** x -> h0..h8 forward (1 KiB, 100 ns each), backward reads them in reverse (testdata/chain.log). */
const CHAIN = new URL("./testdata/chain.log", import.meta.url);
function chain() {
  return parseTrace(Deno.readTextFileSync(CHAIN));
}

Deno.test("simulatePlanner() replays the planner's plan at each ratio", () => {
  const t = chain();
  const r = simulatePlanner(t, "chen-sqrt", { ratios: [1, 0.7, 0.3] });
  assert.equal(r.baseline.peakBytes, 11 * 1024);
  assert.equal(r.baseline.computeNs, 1800);
  // the same plan replayed by hand gives the same row
  const budget = Math.floor(0.7 * 11 * 1024);
  const plan = new ChenSqrtPlanner().plan(t, budget);
  const ref = replayTrace(t, {
    budgetBytes: budget,
    hostLimitBytes: 0,
    policy: planPolicy(plan, createPolicy("dtr-eq")),
  });
  const row = r.results[1]!;
  assert.equal(row.feasible, ref.feasible);
  assert.equal(row.overhead, ref.overhead);
  assert.equal(row.peakBytes, ref.stats.peakBytes);
  assert.ok(row.peakBytes <= row.budgetBytes);
  assert.equal(r.results[2]!.feasible, false, "3 KiB is below the chain's minimum of 4 KiB");
  assert.throws(() => plannerSimulation("nope"), /unknown planner "nope"/);
});

const RESNET = "../shared/traces/resnet32-56.log";
let resnet: Awaited<ReturnType<typeof readTrace>> | undefined;
try {
  resnet = await readTrace(RESNET);
} catch {
  console.log(`skipping the resnet32-56 planner simulation: ${RESNET} is absent`);
}
Deno.test({
  name: "simulatePlanner(libra) on resnet32-56 is feasible within the budget at 0.5",
  ignore: resnet === undefined,
  fn() {
    const r = simulatePlanner(resnet!, "libra", { ratios: [0.5] });
    assert.equal(r.baseline.peakBytes, 10061179152);
    const row = r.results[0]!;
    assert.ok(row.feasible && row.peakBytes <= row.budgetBytes);
    assert.ok(row.overhead! > 1 && row.overhead! < 2);
  },
});
