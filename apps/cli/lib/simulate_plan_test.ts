import assert from "node:assert/strict";
import { ChenSqrtPlanner, createPolicy, planPolicy } from "@libra/evict";
import { parseTrace, readTrace, replayTrace } from "@libra/runtime";
import { main } from "../commands/simulate.ts";
import { plannerSimulation, simulatePlanner } from "./simulate_plan.ts";

/** x -> h0..h8 forward (1 KiB, 100 ns each), backward reads them in reverse. */
function chain() {
  const L = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x"}`,
  ];
  const call = (op: string, args: string[], res: string) =>
    L.push(
      `{"ARGS":${
        JSON.stringify(args)
      },"INSTRUCTION":"CALL","NAME":"${op}","RESULT":["${res}"],"TIME":"100"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"${res}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${res}"}`,
    );
  let prev = "x";
  for (let i = 0; i < 9; i++) {
    call("f", [prev], `h${i}`);
    prev = `h${i}`;
  }
  L.push(`{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}`);
  let g = "";
  for (let i = 8; i >= 0; i--) {
    call("f_backward", g === "" ? [`h${i}`] : [`h${i}`, g], `g${i}`);
    if (g !== "") L.push(`{"INSTRUCTION":"RELEASE","NAME":"${g}"}`);
    L.push(`{"INSTRUCTION":"RELEASE","NAME":"h${i}"}`);
    g = `g${i}`;
  }
  return parseTrace(L.join("\n"));
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

Deno.test("libra simulate --policy libra|chen-sqrt prints the planners' rows", async () => {
  const f = await Deno.makeTempFile({ suffix: ".log" });
  const { formatTrace } = await import("@libra/runtime");
  await Deno.writeTextFile(f, formatTrace(chain()));
  const out: string[] = [];
  const log = console.log;
  console.log = (m: string) => out.push(m);
  try {
    for (const policy of ["libra", "chen-sqrt"]) {
      out.length = 0;
      assert.equal(
        await main(["--trace", f, "--policy", policy, "--ratios", "0.8,0.5", "--json"]),
        0,
      );
      const r = JSON.parse(out.join(""));
      assert.equal(r.results.length, 2);
      for (const row of r.results) assert.ok(!row.feasible || row.overhead >= 1);
    }
  } finally {
    console.log = log;
    await Deno.remove(f);
  }
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
