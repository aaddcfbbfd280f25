/**
 * The `dtr` policy's cached neighbourhood costs and bounded scan choose the
 * same victims, in the same order, as the plain algorithm (a walk of the
 * evicted neighbourhood of every candidate at every eviction), on a recorded
 * training step of the tiny LSTM replayed at several budgets, with integer
 * costs (summed per evicted component) and fractional ones (walked, cached).
 */

import assert from "node:assert/strict";
import { AnalyticCostModel, type CostModel, DEVICE_PEAKS } from "@libra/cost";
import { createPolicy, type EvictionContext, ScorePolicy } from "@libra/evict";
import type { StorageNode } from "@libra/lineage";
import { AdamW, createData, createModel, trainStep } from "@libra/nn";
import { manualSeed } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Runtime } from "./runtime.ts";
import { replayTrace } from "./simulator.ts";

/** The plain `dtr`: walks e*(s) for every candidate, sums in walk order, scans the whole pool. */
class PlainDtr extends ScorePolicy {
  readonly name = "dtr";
  score(s: StorageNode, ctx: EvictionContext): number {
    let n = 0;
    for (const x of ctx.lineage.evictedNeighborhood(s)) n += x.compute;
    const den = s.bytes * (ctx.clock - s.lastAccess);
    return den > 0 ? (s.compute + n) / den : Infinity;
  }
}

const rec = new Runtime({
  backend: new ReferenceBackend(),
  record: true,
  costModel: new AnalyticCostModel(DEVICE_PEAKS.cpu!),
});
manualSeed(11);
const model = createModel("lstm", "tiny", { backend: rec });
const data = createData("lstm", "tiny", { seed: 5 });
const opt = new AdamW(model.parameters(), { lr: 0.01 });
trainStep({ model, batch: data.next(), optimizer: opt, backend: rec });
rec.endStep();
trainStep({ model, batch: data.next(), optimizer: opt, backend: rec });
const trace = rec.trace();
const peak = replayTrace(trace).stats.peakBytes;

for (const costs of ["integer", "fractional"] as const) {
  Deno.test(`dtr: cached neighbourhood costs give the plain walk's decisions (${costs} costs)`, () => {
    const times = new Map<number, number>();
    let i = 0;
    for (const e of trace.events) {
      if (e.kind === "call" || e.kind === "mutate") times.set(i++, e.timeNs);
    }
    // trace times times 1.37: fractional ns, so sums depend on their order
    const costModel: CostModel | undefined = costs === "integer" ? undefined : {
      name: "fractional",
      callCost: (c) => (times.get(c.index ?? -1) ?? 0) * 1.37,
      swapCost: (b) => b / 10,
    };
    let compared = 0;
    for (const ratio of [0.75, 0.65]) {
      const budgetBytes = Math.floor(ratio * peak);
      const run = (policy: ScorePolicy | ReturnType<typeof createPolicy>) =>
        replayTrace(trace, {
          budgetBytes,
          policy,
          recordDecisions: true,
          ...(costModel ? { costModel } : {}),
        });
      const fast = run(createPolicy("dtr"));
      const plain = run(new PlainDtr());
      assert.equal(fast.feasible, plain.feasible, `ratio ${ratio}`);
      assert.deepEqual(fast.decisions, plain.decisions, `ratio ${ratio}: same eviction sequence`);
      assert.equal(fast.stats.remats, plain.stats.remats);
      assert.equal(fast.stats.peakBytes, plain.stats.peakBytes);
      compared += fast.decisions.length;
    }
    assert.ok(compared > 100, `the budgets forced evictions (${compared})`);
  });
}
