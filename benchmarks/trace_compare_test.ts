import assert from "node:assert/strict";
import { readTrace, replayTrace, simulateTrace } from "@libra/runtime";
import { chainTrace } from "../packages/evict/_planner_testing.ts";
import {
  compareSummaries,
  type CompareTable,
  compareTrace,
  gapAt,
  goalAt,
  renderCompare,
  smallestFeasible,
} from "./trace_compare.ts";

const table: CompareTable = {
  trace: "t",
  mode: "device",
  ratios: [0.5, 0.2],
  peakBytes: 2 ** 30,
  bound: [1.05, 1.3],
  rows: [
    {
      name: "dtr-eq",
      kind: "heuristic",
      cells: [
        { ratio: 0.5, feasible: true, overhead: 1.2 },
        { ratio: 0.2, feasible: false, overhead: null, reason: "out of memory" },
      ],
    },
    {
      name: "lookahead",
      kind: "planner",
      cells: [
        { ratio: 0.5, feasible: true, overhead: 1.1 },
        { ratio: 0.2, feasible: true, overhead: 1.5 },
      ],
    },
  ],
};

Deno.test("goalAt() divides the best planner's extra compute by the best heuristic's; a planner alone feasible says so", () => {
  assert.ok(Math.abs((goalAt(table, 0) as number) - 0.5) < 1e-12);
  assert.equal(goalAt(table, 1), "planner only");
  assert.equal(smallestFeasible(table, "planner"), 0.2);
  assert.equal(smallestFeasible(table, "heuristic"), 0.5);
});

Deno.test("renderCompare() prints a row per policy, ratio columns, OOM cells and the goal row", () => {
  const text = renderCompare(table);
  const lines = text.split("\n");
  assert.match(lines[0]!, /^t, device memory only/);
  assert.match(lines[1]!, /0\.50\s+0\.20$/);
  assert.match(text, /dtr-eq\s+1\.200\s+OOM/);
  assert.match(text, /lookahead\s+1\.100\s+1\.500/);
  assert.match(text, /goal: planner\/heuristic extra\s+0\.50\s+planner/);
  assert.match(text, /smallest feasible ratio: planners 0\.2, heuristics 0\.5/);
  assert.match(text, /any schedule >= \(per call\)\s+1\.050\s+1\.300/);
  assert.equal(compareSummaries(table).at(-1)!.policy, "optimal >=");
  // with checkmate's optimum: exact at 0.5, a bound at 0.2; the gap of the best planner
  const withOpt: CompareTable = {
    ...table,
    optimal: [
      { ratio: 0.5, bound: 1.08, exact: true, status: "Optimal", solveMs: 1 },
      { ratio: 0.2, bound: 1.4, exact: false, status: "Time limit reached", solveMs: 1 },
    ],
  };
  assert.ok(Math.abs(gapAt(withOpt, 0)! - 0.02) < 1e-12);
  assert.ok(Math.abs(gapAt(withOpt, 1)! - 0.1) < 1e-12);
  const t2 = renderCompare(withOpt);
  assert.match(t2, /optimal \(checkmate\)\s+=1\.080\s+>=1\.400/);
  assert.match(t2, /gap: best planner - optimal\s+0\.020\s+<=0\.100/);
  assert.match(
    renderCompare({ ...withOpt, optimalFrees: true }),
    /optimal \(checkmate, in-stage frees\)\s+=1\.080\s+>=1\.400/,
  );
  const opt = compareSummaries(withOpt).at(-1)!;
  assert.equal(opt.policy, "optimal");
  assert.deepEqual(opt.curve.map((c) => c.overhead), [1.08, 1.4]);
  assert.equal(compareSummaries(table)[1]!.smallestFeasibleRatio, 0.2);
});

Deno.test("compareTrace() replays each heuristic as `libra simulate` does and plans each planner", () => {
  const t = chainTrace(6);
  const peak = replayTrace(t, { leafRelease: "free" }).stats.peakBytes;
  const c = compareTrace("chain", t, "device", {
    ratios: [0.75],
    heuristics: ["dtr-eq"],
    planners: ["lookahead", "checkmate"],
  });
  assert.equal(c.peakBytes, peak);
  assert.deepEqual(c.rows.map((r) => r.name), ["dtr-eq", "lookahead", "checkmate"]);
  // checkmate's MILP solves the chain: its plan replays at the optimum it proves
  const o = c.optimal![0]!;
  assert.ok(o.exact && o.status === "Optimal");
  assert.equal(c.rows[2]!.cells[0]!.overhead, o.bound);
  assert.ok(gapAt(c, 0)! <= 1e-12, "no planner beats the optimum of its problem here");
  // heuristics replay as `libra simulate` does (the published simulator's semantics)
  const direct = simulateTrace(t, { policy: "dtr-eq", ratios: [0.75], engine: "engine" })
    .results[0]!;
  assert.equal(c.rows[0]!.cells[0]!.overhead, direct.overhead);
  assert.ok(c.rows[1]!.cells[0]!.feasible);
  assert.ok(
    c.rows[1]!.cells[0]!.overhead! <= direct.overhead!,
    "lookahead keeps dtr-eq when better",
  );
  const host = compareTrace("chain", t, "host", {
    ratios: [0.75],
    heuristics: ["dtr-eq"],
    planners: ["checkmate"],
  });
  assert.deepEqual(host.rows.map((r) => r.name), ["dtr-eq+swap"], "checkmate is device-only");
  assert.equal(host.optimal, null);
  // with in-stage frees: the optimum of the wider form, at most the stage form's, and its plan
  // replays at it (the chain is small enough for the exact MILP)
  const free = compareTrace("chain", t, "device", {
    ratios: [0.75],
    heuristics: [],
    planners: ["checkmate"],
    checkmateFrees: true,
  });
  assert.ok(free.optimalFrees);
  const of = free.optimal![0]!;
  assert.ok(of.exact && of.bound! <= o.bound! + 1e-12);
  assert.equal(free.rows[0]!.cells[0]!.overhead, of.bound);
  assert.equal(c.optimalFrees, undefined);
});

Deno.test("renderCompare() shows a planner's error as such, not as OOM, and names it", () => {
  const failed: CompareTable = {
    ...table,
    rows: [
      table.rows[0]!,
      {
        name: "checkmate",
        kind: "planner",
        cells: [
          { ratio: 0.5, feasible: false, overhead: null, reason: "failed: solver crashed" },
          {
            ratio: 0.2,
            feasible: false,
            overhead: null,
            reason: "out of memory",
            detail: "no plan fits",
          },
        ],
      },
    ],
  };
  const text = renderCompare(failed);
  assert.match(text, /checkmate\s+error\s+OOM/);
  assert.match(text, /^error: checkmate at 0\.5: solver crashed$/m);
  assert.match(text, /^note: checkmate at 0\.2: no plan fits$/m);
});

const SHARED = "../shared/traces";
/** Published h_DTR^eq figures (overhead; null = OOM) by log and ratio 0.5, 0.4, 0.3, 0.2. */
const PUBLISHED: Record<string, (number | null)[]> = {
  "resnet32-56.log": [1.107, 1.14, 1.179, 1.332],
  "unet-6.log": [1.159, null, null, null],
};

for (const [log, want] of Object.entries(PUBLISHED)) {
  Deno.test(`compareTrace()'s dtr-eq row is the published figures on ${log}`, async () => {
    let trace;
    try {
      trace = await readTrace(`${SHARED}/${log}`);
    } catch {
      console.log(`  ${SHARED}/${log} is absent: skipped`);
      return;
    }
    const c = compareTrace(log, trace, "device", {
      ratios: [0.5, 0.4, 0.3, 0.2],
      heuristics: ["dtr-eq"],
      planners: [],
    });
    const got = c.rows[0]!.cells.map((x) => (x.feasible ? Number(x.overhead!.toFixed(3)) : null));
    assert.deepEqual(got, want);
  });
}
