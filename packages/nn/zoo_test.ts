import assert from "node:assert/strict";
import {
  fromTypedArray,
  manualSeed,
  MetaBackend,
  type Tensor,
  tidy,
  withBackend,
  zeros,
} from "@libra/tensor";
import { nativeBackend, nativeSkipReason } from "./_testing.ts";
import { crossEntropyLoss } from "./loss.ts";
import { AdamW } from "./optim.ts";
import { cosineWithWarmup } from "./schedule.ts";
import { train } from "./train.ts";
import {
  createData,
  createModel,
  getPreset,
  type InputSpec,
  isModelName,
  MODEL_NAMES,
  modelEntry,
  type ModelName,
  MODELS,
  PRESETS,
} from "./zoo.ts";

/** The input a preset expects and the output shape its model must produce. */
function io(
  name: ModelName,
  preset: string,
): { x: number[]; ids: boolean; out: number[]; targets: number[] } {
  const p = getPreset(name, preset);
  const { batchSize: B, imageSize: S = 0, seqLen: T = 0 } = p.input as InputSpec;
  // deno-lint-ignore no-explicit-any
  const c = p.config as any;
  switch (name) {
    case "mlp":
      return { x: [B, c.inFeatures], ids: false, out: [B, c.outFeatures], targets: [B] };
    case "resnet":
      return { x: [B, c.inChannels, S, S], ids: false, out: [B, c.numClasses], targets: [B] };
    case "unet":
      return {
        x: [B, c.inChannels, S, S],
        ids: false,
        out: [B, c.numClasses, S, S],
        targets: [B, S, S],
      };
    default:
      return { x: [B, T], ids: true, out: [B, T, c.vocabSize], targets: [B, T] };
  }
}

// Published parameter counts: ResNet-32 0.46M (He et al. 2016, table 6); ResNet-50 25.56M
// (torchvision); GPT-2 small 124.44M with the tied head (Hugging Face).
const KNOWN_PARAMS: Record<string, number> = {
  "resnet/resnet50": 25_557_032,
  "gpt/paper": 124_439_808,
};

for (const name of MODEL_NAMES) {
  for (const preset of Object.keys(PRESETS[name])) {
    Deno.test(`createModel("${name}", "${preset}") runs a full training step on the meta backend with the right shapes`, () => {
      const meta = new MetaBackend();
      const model = createModel(name, preset, { backend: meta });
      const paramBytes = model.numParameters() * 4;
      const bufferBytes = model.namedBuffers().reduce((a, [, b]) => a + b.size * 4, 0);
      assert.equal(meta.memory().usedBytes, paramBytes + bufferBytes);
      const known = KNOWN_PARAMS[`${name}/${preset}`];
      if (known !== undefined) assert.equal(model.numParameters(), known);
      if (name === "resnet" && preset === "paper") {
        assert.ok(Math.abs(model.numParameters() - 0.46e6) < 0.02e6, `${model.numParameters()}`);
      }
      const s = io(name, preset);
      const opt = new AdamW(model.parameters());
      tidy(() => {
        const x = zeros(s.x, { backend: meta, dtype: s.ids ? "i32" : "f32" });
        const y = model.forward(x);
        assert.deepEqual(y.shape, s.out);
        const loss = crossEntropyLoss(y, zeros(s.targets, { backend: meta, dtype: "i32" }));
        loss.backward();
        opt.step();
        opt.zeroGrad();
      });
      // only parameters, buffers and the two AdamW moments remain
      assert.equal(meta.memory().usedBytes, 3 * paramBytes + bufferBytes);
      opt.dispose();
      model.dispose();
      assert.equal(meta.memory().usedBytes, 0);
    });
  }
}

const native = await nativeBackend();

/**
 * Stated margins: with AdamW (lr 0.01, no weight decay) for 40 steps on the
 * matching synthetic data, the mean loss of the last 3 steps is at most 0.7x
 * the mean of the first 3 for every tiny model (measured: 0.20-0.51).
 */
const STEPS = 40, RATIO = 0.7;

for (const name of MODEL_NAMES) {
  Deno.test({
    name:
      `tiny ${name}: loss falls to <= ${RATIO}x within ${STEPS} steps and memory stays flat (native cpu)`,
    ignore: native === null,
    fn() {
      manualSeed(0);
      const model = createModel(name, "tiny", { backend: native! });
      const data = createData(name, "tiny", { seed: 1 });
      const opt = new AdamW(model.parameters(), { lr: 0.01, weightDecay: 0 });
      const r = train({ model, data, optimizer: opt, steps: STEPS });
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const first = mean(r.losses.slice(0, 3)), last = mean(r.losses.slice(-3));
      assert.ok(r.losses.every(Number.isFinite));
      assert.ok(last <= RATIO * first, `${name}: loss ${first.toFixed(4)} -> ${last.toFixed(4)}`);
      // memory after step N equals memory after step 1
      assert.ok(r.usedBytes.every((b) => b === r.usedBytes[0]), `usedBytes ${r.usedBytes}`);
      opt.dispose();
      model.dispose();
    },
  });
}
if (native === null) console.log(`zoo_test: training tests skipped: ${nativeSkipReason()}`);

Deno.test({
  name: "train() is deterministic with dropout (seeded Philox) and follows a schedule",
  ignore: native === null,
  fn() {
    const run = () => {
      manualSeed(3);
      const cfg = { ...getPreset("gpt", "tiny").config, dropout: 0.1 };
      const model = createModel("gpt", cfg, { backend: native! });
      const opt = new AdamW(model.parameters(), { lr: 0.01 });
      const lrs: number[] = [];
      const r = train({
        model,
        data: createData("gpt", cfg, { seed: 2, batchSize: 4, seqLen: 8 }),
        optimizer: opt,
        steps: 4,
        schedule: cosineWithWarmup({ baseLr: 0.01, warmupSteps: 2, totalSteps: 4 }),
        onStep: (s) => lrs.push(s.lr),
      });
      opt.dispose();
      model.dispose();
      return { losses: r.losses, lrs };
    };
    const a = run(), b = run();
    assert.deepEqual(a.losses, b.losses);
    assert.deepEqual(a.lrs, [0.005, 0.01, 0.01, 0.005]);
  },
});

Deno.test({
  name: "eval mode disables dropout: two forward passes agree; training mode differs",
  ignore: native === null,
  fn() {
    manualSeed(4);
    const model = createModel("gpt", { ...getPreset("gpt", "tiny").config, dropout: 0.5 }, {
      backend: native!,
    });
    const ids = fromTypedArray(new Int32Array([1, 2, 3, 4]), [1, 4], { backend: native! });
    const fwd = (): number[] => tidy(() => (model.forward(ids) as Tensor).toArray());
    model.eval();
    assert.deepEqual(fwd(), fwd());
    model.train();
    assert.notDeepEqual(fwd(), fwd());
    ids.dispose();
    model.dispose();
  },
});

Deno.test("createModel() and getPreset() reject unknown names and presets, listing the options", () => {
  assert.throws(
    () => createModel("vgg" as ModelName),
    /unknown model "vgg"; available: mlp, resnet, gpt, unet, lstm/,
  );
  assert.throws(
    () => createModel("gpt", "huge"),
    /unknown preset "huge" for gpt; available: tiny, small, paper/,
  );
});

Deno.test("the registry is the one list: names, presets and factories come from MODELS", () => {
  assert.deepEqual([...MODEL_NAMES], Object.keys(MODELS));
  for (const name of MODEL_NAMES) {
    assert.equal(PRESETS[name], MODELS[name].presets);
    assert.ok(isModelName(name));
    const meta = new MetaBackend();
    const m = createModel(name, "tiny", { backend: meta });
    // the registry's own factory builds the same model class with the same parameter count
    const entry = modelEntry(name as "gpt"); // one family at a time; the cast only names a K
    const direct = withBackend(meta, () => entry.build(getPreset(name as "gpt", "tiny").config));
    assert.equal(m.constructor, direct.constructor);
    assert.equal(m.numParameters(), direct.numParameters());
    m.dispose();
    direct.dispose();
  }
});

Deno.test("unknown model names are errors everywhere, never a silent fallback to another family", () => {
  for (const bad of ["vgg", "LSTM", "toString", "__proto__", ""]) {
    assert.equal(isModelName(bad), false, bad);
    const want = new RegExp(`unknown model "${bad.replace(/[_]/g, "_")}"; available: `);
    assert.throws(
      () => createModel(bad as ModelName, "tiny", { backend: new MetaBackend() }),
      want,
    );
    assert.throws(() => createData(bad as ModelName, "tiny"), want);
    assert.throws(() => getPreset(bad as ModelName, "tiny"), want);
    assert.throws(() => modelEntry(bad as ModelName), want);
  }
  assert.throws(() => createModel("gpt", "constructor"), /unknown preset "constructor" for gpt/);
});
