/**
 * Finite-difference gradient checks of every layer and of one block of each
 * model family. Everything runs on the ReferenceBackend in f64 precision, so
 * central differences (h = 1e-6) of `sum(forward(x) * r)` (fixed random `r`)
 * are accurate to ~1e-9; analytic gradients must agree within atol 1e-6,
 * rtol 1e-5 for every parameter and the input (up to 10 sampled elements per
 * tensor).
 */

import assert from "node:assert/strict";
import {
  fromTypedArray,
  manualSeed,
  noGrad,
  randomState,
  setRandomState,
  type Tensor,
  tidy,
  withBackend,
} from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Rng } from "@libra/util/rng";
import { GPTBlock } from "./gpt.ts";
import {
  BatchNorm2d,
  CausalSelfAttention,
  Conv2d,
  Dropout,
  Embedding,
  GELU,
  type Layer,
  LayerNorm,
  Linear,
  RMSNorm,
} from "./layers.ts";
import { LSTM } from "./lstm.ts";
import { MLP } from "./mlp.ts";
import { BasicBlock, Bottleneck } from "./resnet.ts";
import { DoubleConv, UNet } from "./unet.ts";

interface Case {
  name: string;
  build: () => Layer;
  shape: number[];
  /** i32 ids in [0, n) instead of f32 input. */
  ids?: number;
}

const CASES: Case[] = [
  { name: "Linear", build: () => new Linear(3, 4), shape: [2, 3] },
  { name: "Linear on [B, T, C]", build: () => new Linear(3, 2), shape: [2, 2, 3] },
  {
    name: "Conv2d (stride 2, padding 1, dilation 2)",
    build: () => new Conv2d(2, 3, 3, { stride: 2, padding: 1, dilation: 2 }),
    shape: [2, 2, 5, 6],
  },
  { name: "BatchNorm2d (training)", build: () => new BatchNorm2d(3), shape: [3, 3, 2, 2] },
  { name: "GELU (tanh)", build: () => new GELU("tanh"), shape: [2, 5] },
  { name: "GELU (erf)", build: () => new GELU(), shape: [2, 5] },
  // every forward replays the same generator state, so the mask is fixed
  { name: "Dropout (p = 0.3)", build: () => new Dropout(0.3), shape: [4, 5] },
  { name: "LayerNorm", build: () => new LayerNorm(5), shape: [3, 5] },
  { name: "RMSNorm", build: () => new RMSNorm(5), shape: [3, 5] },
  { name: "Embedding", build: () => new Embedding(6, 3), shape: [2, 4], ids: 6 },
  { name: "CausalSelfAttention", build: () => new CausalSelfAttention(4, 2), shape: [2, 3, 4] },
  {
    name: "mlp: MLP",
    build: () => new MLP({ inFeatures: 4, hidden: [5], outFeatures: 3 }),
    shape: [3, 4],
  },
  {
    name: "resnet: BasicBlock with downsample",
    build: () => new BasicBlock(2, 3, 2),
    shape: [2, 2, 4, 4],
  },
  { name: "resnet: Bottleneck", build: () => new Bottleneck(4, 2, 1), shape: [2, 4, 3, 3] },
  { name: "gpt: GPTBlock", build: () => new GPTBlock(4, 2), shape: [2, 3, 4] },
  { name: "unet: DoubleConv", build: () => new DoubleConv(2, 3), shape: [2, 2, 4, 4] },
  {
    name: "unet: UNet depth 1",
    build: () => new UNet({ inChannels: 1, numClasses: 2, baseWidth: 2, depth: 1 }),
    shape: [2, 1, 4, 4],
  },
  { name: "lstm: LSTM (2 layers, 3 steps)", build: () => new LSTM(3, 4, 2), shape: [2, 3, 3] },
];

const H = 1e-6;
const TOL = { atol: 1e-6, rtol: 1e-5 };

function sampleIndices(n: number, rng: Rng): number[] {
  if (n <= 10) return Array.from({ length: n }, (_, i) => i);
  const s = new Set<number>();
  while (s.size < 10) s.add(rng.int(n));
  return [...s];
}

for (const c of CASES) {
  Deno.test(`${c.name}: gradients of parameters and input match f64 finite differences`, () => {
    const be = new ReferenceBackend({ precision: "f64" });
    withBackend(be, () => {
      manualSeed(7);
      const layer = c.build();
      const rng = new Rng(c.name.length * 31 + 1);
      const n = c.shape.reduce((a, b) => a * b, 1);
      const x = c.ids
        ? fromTypedArray(Int32Array.from({ length: n }, () => rng.int(c.ids!)), c.shape)
        : fromTypedArray(Float32Array.from({ length: n }, () => rng.normal()), c.shape, {
          requiresGrad: true,
        });
      const outShape = noGrad(() => tidy(() => [...layer.forward(x).shape]));
      manualSeed(8);
      const r = fromTypedArray(
        Float32Array.from({ length: outShape.reduce((a, b) => a * b, 1) }, () => rng.normal()),
        outShape,
      );
      const rngState = randomState();
      const lossOf = (): Tensor => {
        setRandomState(rngState);
        return layer.forward(x).mul(r).sum();
      };
      tidy(() => lossOf().backward());
      const targets: [string, Tensor][] = [...layer.namedParameters()];
      if (!c.ids) targets.push(["input", x]);
      for (const [name, t] of targets) {
        assert.ok(t.grad, `${c.name}: ${name} got no gradient`);
        const analytic = be.readF64(t.grad.storage.buffer, t.size);
        const base = be.readF64(t.storage.buffer, t.size);
        for (const j of sampleIndices(t.size, rng)) {
          const at = (v: number): number => {
            be.write(t.storage.buffer, Float64Array.of(v), 4 * j);
            return noGrad(() => tidy(() => be.readF64(lossOf().storage.buffer, 1)[0]!));
          };
          const numeric = (at(base[j]! + H) - at(base[j]! - H)) / (2 * H);
          be.write(t.storage.buffer, Float64Array.of(base[j]!), 4 * j);
          const a = analytic[j]!;
          assert.ok(
            Math.abs(a - numeric) <= TOL.atol + TOL.rtol * Math.abs(numeric),
            `${c.name}: d/d ${name}[${j}] analytic ${a}, finite differences ${numeric}`,
          );
        }
      }
      layer.dispose();
      x.dispose();
      r.dispose();
    });
    assert.equal(be.memory().usedBytes, 0, `${c.name}: memory left`);
  });
}
