import assert from "node:assert/strict";
import { ChenSqrtPlanner, createPolicy, planPolicy } from "@libra/evict";
import { DEFAULT_LINK, parseTrace, readTrace, replayTrace, simulateTrace } from "@libra/runtime";
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
    leafRelease: "keep-pinned",
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

/**
 * The shared published logs with their published budget-free peaks, and at how many of the
 * ratios 0.9..0.1 libra is better than dtr-eq (README).
 */
const PUBLISHED: [string, number, number][] = [
  ["resnet32-56", 10061179152, 9],
  ["unet-6", 8415764640, 7],
  ["unroll_gan-512", 252677418, 8],
];
const published = await Promise.all(
  PUBLISHED.map(async ([name, peak, better]) => {
    try {
      return { name, peak, better, trace: await readTrace(`../shared/traces/${name}.log`) };
    } catch {
      console.log(`skipping the libra vs dtr-eq comparison on ${name}: the log is absent`);
      return null;
    }
  }),
);
for (const log of published) {
  if (log === null) continue;
  Deno.test(`simulatePlanner(libra) on ${log.name}: the published baseline, and never worse than dtr-eq at ratios 0.9..0.1 (swaps over PCIe 5, as libra simulate)`, () => {
    const ratios = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1];
    const options = { ratios, overheadLimit: 2, link: DEFAULT_LINK };
    const dtr = simulateTrace(log.trace, { ...options, policy: "dtr-eq" });
    const libra = simulatePlanner(log.trace, "libra", options);
    // the same semantics as the dynamic policies' rows: the same budget-free peak, published
    assert.equal(libra.baseline.peakBytes, log.peak);
    assert.equal(dtr.baseline.peakBytes, log.peak);
    let better = 0;
    for (const [i, d] of dtr.results.entries()) {
      const l = libra.results[i]!;
      assert.equal(l.budgetBytes, d.budgetBytes);
      if (d.feasible) {
        assert.ok(l.feasible, `${log.name} at ${d.ratio}: dtr-eq fits, libra does not`);
        assert.ok(
          l.overhead! <= d.overhead!,
          `${log.name} at ${d.ratio}: libra ${l.overhead} > dtr-eq ${d.overhead}`,
        );
        if (l.overhead! < d.overhead!) better++;
      } else if (l.feasible) better++;
      if (l.feasible) assert.ok(l.peakBytes <= l.budgetBytes);
    }
    assert.ok(better >= log.better, `${log.name}: libra better than dtr-eq at ${better} ratios`);
  });
}
