/**
 * Trace simulations run the static planners (`libra`, `chen-sqrt`) through the planner
 * path of `@libra/train/simulate-plan`, next to dynamic policies: checked against
 * `simulatePlanner` called directly on the same trace.
 */
import assert from "node:assert/strict";
import { parseTrace } from "@libra/runtime";
import { simulatePlanner } from "@libra/train/simulate-plan";
import { executeInThisThread } from "./executor.ts";

const CHAIN = new URL("../../packages/train/testdata/chain.log", import.meta.url);

Deno.test("a trace simulation runs libra and chen-sqrt by planning, beside dtr-eq", async () => {
  const text = await Deno.readTextFile(CHAIN);
  const ratios = [1, 0.6, 0.3];
  const policies = ["libra", "dtr-eq", "chen-sqrt"];
  const r = await executeInThisThread(
    { kind: "simulate", name: "chain", policies, ratios },
    { signal: new AbortController().signal, progress: () => {}, trace: text },
  );
  for (const planner of ["libra", "chen-sqrt"]) {
    const oracle = simulatePlanner(parseTrace(text, "chain"), planner, { ratios });
    assert.deepEqual(
      r.points.filter((p) => p.policy === planner),
      oracle.results.map((x) => ({
        policy: planner,
        ratio: x.ratio,
        feasible: x.feasible,
        overhead: x.overhead,
        reason: x.feasible ? null : x.reason ?? null,
      })),
    );
  }
  assert.equal(r.points.filter((p) => p.policy === "dtr-eq").length, 3);
  // the memory timeline replays libra's plan (the first policy) at its smallest feasible ratio
  const smallest = Math.min(
    ...r.points.filter((p) => p.policy === "libra" && p.feasible).map((p) => p.ratio),
  );
  assert.ok(r.memory, r.note ?? "no timeline");
  assert.match(r.note!, new RegExp(`libra at its smallest feasible ratio \\(${smallest}\\)`));
  assert.ok(r.memory.samples.every(([, b]) => b <= r.memory!.budgetBytes), "within the budget");
});
