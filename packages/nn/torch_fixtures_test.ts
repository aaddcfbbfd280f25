/**
 * Agreement with PyTorch 1.13: fixtures from scripts/make_torch_fixtures.py
 * (weights, inputs, outputs, loss, gradients, BatchNorm running statistics,
 * optimizer trajectories). Layers, losses and optimizers run on the f32
 * ReferenceBackend; whole models on it and on the native cpu backend.
 *
 * Tolerances (|ours - torch| <= atol + rtol |torch|):
 * - single layers, losses and optimizers: atol 1e-5, rtol 1e-4;
 * - whole models (outputs, loss, every parameter gradient): atol 5e-5, rtol 1e-3.
 */

import assert from "node:assert/strict";
import {
  type Backend,
  fromTypedArray,
  setDefaultBackend,
  type Tensor,
  tidy,
  withBackend,
} from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import {
  assertClose,
  type Fixture,
  loadFixture,
  nativeBackend,
  nativeSkipReason,
} from "./_testing.ts";
import {
  BatchNorm2d,
  CausalSelfAttention,
  Conv2d,
  Embedding,
  type Layer,
  LayerNorm,
  RMSNorm,
} from "./layers.ts";
import { crossEntropyLoss, mseLoss } from "./loss.ts";
import type { Module } from "./module.ts";
import { AdamW, type Optimizer, SGD } from "./optim.ts";
import type { HostTensor } from "./safetensors.ts";
import { createModel, type ModelName } from "./zoo.ts";

setDefaultBackend(new ReferenceBackend());

const LAYER_TOL = { atol: 1e-5, rtol: 1e-4 };
const MODEL_TOL = { atol: 5e-5, rtol: 1e-3 };

function up(h: HostTensor, requiresGrad = false): Tensor {
  return fromTypedArray(h.data, h.shape, { requiresGrad });
}

/** Loads weights, runs forward and `sum(y * gradOutput)` backward, compares everything. */
async function checkLayer(name: string, build: (c: Record<string, number>) => Layer, input = "x") {
  const f = await loadFixture(name);
  const layer = build(f.config as Record<string, number>);
  layer.loadStateDict(f.withPrefix("param."));
  tidy(() => {
    const x = up(f.get(`input.${input}`), input === "x");
    const y = layer.forward(x);
    assert.deepEqual(y.shape, f.get("expected.output").shape);
    assertClose(`${name} output`, y.toTypedArray(), f.get("expected.output").data, LAYER_TOL);
    y.mul(up(f.get("input.gradOutput"))).sum().backward();
    for (const [k, p] of layer.namedParameters()) {
      assertClose(`${name} grad ${k}`, p.grad!.toTypedArray(), f.get(`grad.${k}`).data, LAYER_TOL);
    }
    if (f.tensors.has(`grad.input.${input}`)) {
      assertClose(
        `${name} grad x`,
        x.grad!.toTypedArray(),
        f.get(`grad.input.${input}`).data,
        LAYER_TOL,
      );
    }
  });
  checkBuffers(name, layer, f, LAYER_TOL);
  layer.dispose();
  return { f, layer };
}

function checkBuffers(name: string, m: Module, f: Fixture, tol: typeof LAYER_TOL): void {
  const after = f.withPrefix("buffer_after.");
  for (const [k, b] of m.namedBuffers()) {
    const want = after.get(k);
    assert.ok(want, `${name}: fixture lacks buffer_after.${k}`);
    assertClose(`${name} buffer ${k}`, b.toTypedArray(), want.data, tol);
  }
}

Deno.test("Conv2d (stride 2, padding 1, dilation 2, bias) matches PyTorch forward and gradients", async () => {
  await checkLayer("conv2d", (c) =>
    new Conv2d(c.inChannels!, c.outChannels!, c.kernelSize!, {
      stride: c.stride!,
      padding: c.padding!,
      dilation: c.dilation!,
    }));
});

Deno.test("BatchNorm2d matches PyTorch in training (output, gradients, running stats) and eval", async () => {
  const f = await loadFixture("batchnorm2d");
  const bn = new BatchNorm2d(3, { eps: 1e-5, momentum: 0.1 });
  bn.loadStateDict(f.withPrefix("param."));
  tidy(() => {
    const x = up(f.get("input.x"), true);
    const y = bn.forward(x);
    assertClose("bn output", y.toTypedArray(), f.get("expected.output").data, LAYER_TOL);
    y.mul(up(f.get("input.gradOutput"))).sum().backward();
    assertClose("bn grad x", x.grad!.toTypedArray(), f.get("grad.input.x").data, LAYER_TOL);
    assertClose(
      "bn grad weight",
      bn.weight.grad!.toTypedArray(),
      f.get("grad.weight").data,
      LAYER_TOL,
    );
    assertClose("bn grad bias", bn.bias.grad!.toTypedArray(), f.get("grad.bias").data, LAYER_TOL);
  });
  checkBuffers("bn", bn, f, LAYER_TOL);
  bn.eval();
  tidy(() => {
    const y = bn.forward(up(f.get("input.x")));
    assertClose("bn eval output", y.toTypedArray(), f.get("expected.evalOutput").data, LAYER_TOL);
  });
  bn.dispose();
});

Deno.test("LayerNorm matches PyTorch forward and gradients", async () => {
  await checkLayer("layernorm", (c) => new LayerNorm(c.dim!, c.eps!));
});

Deno.test("RMSNorm matches the PyTorch formula x * rsqrt(mean(x^2) + eps) * weight", async () => {
  await checkLayer("rmsnorm", (c) => new RMSNorm(c.dim!, c.eps!));
});

Deno.test("Embedding matches PyTorch forward and scatter-add gradient (repeated ids)", async () => {
  const f = await loadFixture("embedding");
  const emb = new Embedding(7, 3);
  emb.loadStateDict(f.withPrefix("param."));
  tidy(() => {
    const y = emb.forward(up(f.get("input.ids")));
    assertClose("embedding output", y.toTypedArray(), f.get("expected.output").data, LAYER_TOL);
    y.mul(up(f.get("input.gradOutput"))).sum().backward();
    assertClose(
      "embedding grad",
      emb.weight.grad!.toTypedArray(),
      f.get("grad.weight").data,
      LAYER_TOL,
    );
  });
  emb.dispose();
});

Deno.test("CausalSelfAttention matches PyTorch forward and gradients", async () => {
  await checkLayer("attention", (c) => new CausalSelfAttention(c.nEmbd!, c.nHead!));
});

Deno.test("crossEntropyLoss and mseLoss match PyTorch values and gradients", async () => {
  const f = await loadFixture("losses");
  tidy(() => {
    const logits = up(f.get("input.logits"), true);
    const ce = crossEntropyLoss(logits, up(f.get("input.targets")));
    assertClose("cross-entropy", [ce.item()], f.get("expected.crossEntropy").data, LAYER_TOL);
    ce.backward();
    assertClose(
      "cross-entropy grad",
      logits.grad!.toTypedArray(),
      f.get("grad.input.logits").data,
      LAYER_TOL,
    );
    const a = up(f.get("input.a"), true);
    const m = mseLoss(a, up(f.get("input.b")));
    assertClose("mse", [m.item()], f.get("expected.mse").data, LAYER_TOL);
    m.backward();
    assertClose("mse grad", a.grad!.toTypedArray(), f.get("grad.input.a").data, LAYER_TOL);
  });
});

for (const name of ["sgd", "adamw"] as const) {
  Deno.test(`${name === "sgd" ? "SGD (momentum, weight decay)" : "AdamW"} follows PyTorch for 3 steps`, async () => {
    const f = await loadFixture(name);
    const c = f.config as Record<string, number>;
    const w = up(f.get("param.w"), true), b = up(f.get("param.b"), true);
    const opt: Optimizer = name === "sgd"
      ? new SGD([w, b], { lr: c.lr!, momentum: c.momentum!, weightDecay: c.weightDecay! })
      : new AdamW([w, b], {
        lr: c.lr!,
        beta1: c.beta1!,
        beta2: c.beta2!,
        eps: c.eps!,
        weightDecay: c.weightDecay!,
      });
    for (let k = 0; k < 3; k++) {
      w.grad = up(f.get(`grad${k}.w`));
      b.grad = up(f.get(`grad${k}.b`));
      opt.step();
      opt.zeroGrad();
      assertClose(`${name} step ${k} w`, w.toTypedArray(), f.get(`step${k}.w`).data, LAYER_TOL);
      assertClose(`${name} step ${k} b`, b.toTypedArray(), f.get(`step${k}.b`).data, LAYER_TOL);
    }
    opt.dispose();
    w.dispose();
    b.dispose();
  });
}

const MODEL_CASES: [string, ModelName][] = [
  ["mlp", "mlp"],
  ["resnet_basic", "resnet"],
  ["resnet_bottleneck", "resnet"],
  ["gpt", "gpt"],
  ["gpt_untied", "gpt"],
  ["unet", "unet"],
  ["lstm", "lstm"],
];

const reference = new ReferenceBackend();
const native = await nativeBackend();
const BACKENDS: [string, Backend | null][] = [["reference f32", reference], ["native cpu", native]];

for (const [label, be] of BACKENDS) {
  for (const [fixture, family] of MODEL_CASES) {
    Deno.test({
      name:
        `createModel("${family}") on ${label} loads the PyTorch state dict of ${fixture} and matches output, loss, every gradient and running stats`,
      ignore: be === null,
      async fn() {
        const f = await loadFixture(fixture);
        withBackend(be!, () => checkModel(fixture, family, f));
      },
    });
  }
}
if (native === null) console.log(`torch_fixtures_test: native runs skipped: ${nativeSkipReason()}`);

function checkModel(fixture: string, family: ModelName, f: Fixture): void {
  // deno-lint-ignore no-explicit-any
  const model = createModel(family, f.config as any);
  // strict: the PyTorch names and shapes must match ours exactly
  model.loadStateDict(f.withPrefix("param."));
  model.train();
  tidy(() => {
    const out = model.forward(up(f.get("input.x")));
    assert.deepEqual(out.shape, f.get("expected.output").shape);
    assertClose(`${fixture} output`, out.toTypedArray(), f.get("expected.output").data, MODEL_TOL);
    const loss = crossEntropyLoss(out, up(f.get("input.targets")));
    assertClose(`${fixture} loss`, [loss.item()], f.get("expected.loss").data, MODEL_TOL);
    loss.backward();
  });
  const grads = f.withPrefix("grad.");
  const named = model.namedParameters();
  assert.equal(named.length, [...grads.keys()].filter((k) => !k.startsWith("input.")).length);
  for (const [k, p] of named) {
    assertClose(`${fixture} grad ${k}`, p.grad!.toTypedArray(), grads.get(k)!.data, MODEL_TOL);
  }
  checkBuffers(fixture, model, f, MODEL_TOL);
  model.dispose();
}
