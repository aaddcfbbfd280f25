import assert from "node:assert/strict";
import { MetaBackend } from "@libra/tensor";
import { runTraining } from "@libra/train/run-training";
import { estimateInThisThread, formatBytes, threadEstimator } from "./estimate.ts";
import type { TrainSpec } from "./run_executor.ts";

const SPEC: TrainSpec = {
  kind: "train",
  model: "mlp",
  preset: "tiny",
  config: null,
  device: "cpu",
  budgetRatio: 1,
  budgetBytes: null,
  policy: "lru",
  costModel: "measured",
  steps: 1,
  seed: 0,
};

Deno.test("estimateInThisThread() matches the budget-free peak of runTraining on the meta backend", async () => {
  const cases: [string, string, Record<string, unknown> | null][] = [
    ["mlp", "tiny", null],
    ["mlp", "tiny", { hidden: [16384, 16384] }],
    ["gpt", "tiny", null],
    ["resnet", "tiny", null],
    ["unet", "tiny", null],
    ["lstm", "tiny", null],
  ];
  for (const [model, preset, config] of cases) {
    const e = await estimateInThisThread({ ...SPEC, model, preset, config });
    const r = runTraining({
      model,
      preset,
      config,
      policy: "lru",
      budgetRatio: 1,
      steps: 1,
      backend: new MetaBackend(),
    });
    assert.equal(e.tensorBytes, r.baselinePeakBytes, `${model} ${JSON.stringify(config)}`);
    assert.equal(e.totalBytes, e.tensorBytes + e.dataBytes);
  }
});

Deno.test("threadEstimator() estimates off the calling thread and reports build errors", async () => {
  const est = threadEstimator();
  try {
    const big = await est.estimate({ ...SPEC, config: { hidden: [16384, 16384] } });
    assert.ok(big.totalBytes > 4 * 2 ** 30, formatBytes(big.totalBytes));
    await assert.rejects(est.estimate({ ...SPEC, model: "gpt", config: { nHead: 3 } }), /3/);
  } finally {
    est.close();
  }
});

Deno.test("formatBytes() picks a binary unit", () => {
  assert.equal(formatBytes(512), "512 bytes");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(4313320644), "4.0 GiB");
});
