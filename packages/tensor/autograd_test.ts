import assert from "node:assert/strict";
import type { Backend } from "./backend.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import {
  analyticGrads,
  assertClose,
  type GradCase,
  gradcheck,
  randomValues,
} from "./_test_helpers.ts";
import * as T from "./mod.ts";

const { tensor, ones, zeros } = T;

/** Distinct values (no ties) for max-like ops, shuffled deterministically. */
function distinct(n: number, seed: number): number[] {
  const r = randomValues(n, seed);
  return r.map((v, i) => Math.fround(i * 0.37 - n * 0.18 + v * 0.01));
}

const pos: [number, number] = [0.5, 2];

const CASES: GradCase[] = [
  {
    name: "add same shape",
    inputs: [{ shape: [2, 3] }, { shape: [2, 3] }],
    build: ([a, b]) => T.add(a!, b!),
  },
  {
    name: "add broadcast rank and size-1 dims",
    inputs: [{ shape: [2, 1, 3] }, { shape: [4, 1] }],
    build: ([a, b]) => T.add(a!, b!),
  },
  {
    name: "sub broadcast",
    inputs: [{ shape: [3] }, { shape: [2, 3] }],
    build: ([a, b]) => T.sub(a!, b!),
  },
  {
    name: "mul broadcast",
    inputs: [{ shape: [2, 3] }, { shape: [2, 1] }],
    build: ([a, b]) => T.mul(a!, b!),
  },
  {
    name: "div broadcast",
    inputs: [{ shape: [2, 3] }, { shape: [3], range: pos }],
    build: ([a, b]) => T.div(a!, b!),
  },
  { name: "mul with itself", inputs: [{ shape: [4] }], build: ([a]) => T.mul(a!, a!) },
  { name: "add scalar", inputs: [{ shape: [3] }], build: ([a]) => T.add(a!, 2.5) },
  { name: "scalar minus x", inputs: [{ shape: [3] }], build: ([a]) => T.sub(2, a!) },
  { name: "x minus scalar", inputs: [{ shape: [3] }], build: ([a]) => T.sub(a!, 2) },
  { name: "mul scalar", inputs: [{ shape: [3] }], build: ([a]) => T.mul(-3, a!) },
  { name: "x div scalar", inputs: [{ shape: [3] }], build: ([a]) => T.div(a!, 4) },
  { name: "scalar div x", inputs: [{ shape: [3], range: pos }], build: ([a]) => T.div(2, a!) },
  { name: "pow 3", inputs: [{ shape: [4] }], build: ([a]) => T.pow(a!, 3) },
  { name: "pow -1.5", inputs: [{ shape: [4], range: pos }], build: ([a]) => T.pow(a!, -1.5) },
  { name: "neg", inputs: [{ shape: [4] }], build: ([a]) => T.neg(a!) },
  {
    name: "lstmCell",
    inputs: [{ shape: [3, 8] }, { shape: [3, 4] }],
    build: ([g, s]) => T.lstmCell(g!, s!),
  },
  {
    name: "lstmLayer (4 steps)",
    inputs: [{ shape: [2, 4, 8] }, { shape: [8, 2] }],
    build: ([xw, whh]) => T.lstmLayer(xw!, whh!),
  },
  {
    name: "lstmLayer (1 step: no recurrence)",
    inputs: [{ shape: [3, 1, 4] }, { shape: [4, 1] }],
    build: ([xw, whh]) => T.lstmLayer(xw!, whh!),
  },
  {
    // one input through two layers: their gradients add
    name: "lstmLayer twice on one input",
    inputs: [{ shape: [2, 3, 4] }, { shape: [4, 1] }],
    build: ([xw, whh]) => T.mul(T.lstmLayer(xw!, whh!), T.lstmLayer(T.mul(xw!, 0.5), whh!)),
  },
  {
    // two steps: the second cell's state is the first's output (its h half gets no gradient
    // from the cell; the product with h routes one to it)
    name: "lstmCell chained",
    inputs: [{ shape: [2, 4] }, { shape: [2, 4] }, { shape: [2, 2] }],
    build: ([g1, g2, s]) => {
      const s1 = T.lstmCell(g1!, s!);
      return T.mul(T.lstmCell(g2!, s1), s1);
    },
  },
  { name: "exp", inputs: [{ shape: [4] }], build: ([a]) => T.exp(a!) },
  { name: "log", inputs: [{ shape: [4], range: pos }], build: ([a]) => T.log(a!) },
  { name: "sqrt", inputs: [{ shape: [4], range: pos }], build: ([a]) => T.sqrt(a!) },
  { name: "rsqrt", inputs: [{ shape: [4], range: pos }], build: ([a]) => T.rsqrt(a!) },
  { name: "relu", inputs: [{ shape: [6] }], build: ([a]) => T.relu(a!) },
  { name: "gelu erf", inputs: [{ shape: [6], range: [-3, 3] }], build: ([a]) => T.gelu(a!) },
  {
    name: "gelu tanh",
    inputs: [{ shape: [6], range: [-3, 3] }],
    build: ([a]) => T.gelu(a!, "tanh"),
  },
  { name: "silu", inputs: [{ shape: [6], range: [-3, 3] }], build: ([a]) => T.silu(a!) },
  { name: "sigmoid", inputs: [{ shape: [6], range: [-3, 3] }], build: ([a]) => T.sigmoid(a!) },
  { name: "tanh", inputs: [{ shape: [6], range: [-2, 2] }], build: ([a]) => T.tanh(a!) },
  {
    name: "where broadcast",
    inputs: [
      { shape: [2, 3], values: [1, 0, 1, 0, 0, 1], grad: false },
      { shape: [3] },
      { shape: [2, 1] },
    ],
    build: ([c, a, b]) => T.where(c!, a!, b!),
  },
  {
    name: "broadcastTo",
    inputs: [{ shape: [3, 1] }],
    build: ([a]) => T.broadcastTo(a!, [2, 3, 4]),
  },
  { name: "sum all", inputs: [{ shape: [2, 3] }], build: ([a]) => T.sum(a!) },
  { name: "sum axis 0", inputs: [{ shape: [2, 3, 2] }], build: ([a]) => T.sum(a!, 0) },
  { name: "sum axis -1 keepdim", inputs: [{ shape: [2, 3] }], build: ([a]) => T.sum(a!, -1, true) },
  { name: "mean axis 1", inputs: [{ shape: [2, 3, 2] }], build: ([a]) => T.mean(a!, 1) },
  { name: "mean all", inputs: [{ shape: [5] }], build: ([a]) => T.mean(a!) },
  {
    name: "max axis 1",
    inputs: [{ shape: [2, 4, 2], values: distinct(16, 3) }],
    build: ([a]) => T.max(a!, 1),
  },
  { name: "max all", inputs: [{ shape: [6], values: distinct(6, 4) }], build: ([a]) => T.max(a!) },
  { name: "softmax", inputs: [{ shape: [3, 4], range: [-2, 2] }], build: ([a]) => T.softmax(a!) },
  {
    name: "logSoftmax",
    inputs: [{ shape: [3, 4], range: [-2, 2] }],
    build: ([a]) => T.logSoftmax(a!),
  },
  {
    name: "matmul",
    inputs: [{ shape: [2, 3] }, { shape: [3, 4] }],
    build: ([a, b]) => T.matmul(a!, b!),
  },
  {
    name: "linear",
    inputs: [{ shape: [2, 3] }, { shape: [4, 3] }, { shape: [4] }],
    build: ([x, w, b]) => T.linear(x!, w!, b!),
  },
  {
    name: "linear over a 3-d input",
    inputs: [{ shape: [2, 3, 2] }, { shape: [3, 2] }, { shape: [3] }],
    build: ([x, w, b]) => T.linear(x!, w!, b!),
  },
  {
    name: "matmul transA",
    inputs: [{ shape: [3, 2] }, { shape: [3, 4] }],
    build: ([a, b]) => T.matmul(a!, b!, { transA: true }),
  },
  {
    name: "matmul transB",
    inputs: [{ shape: [2, 3] }, { shape: [4, 3] }],
    build: ([a, b]) => T.matmul(a!, b!, { transB: true }),
  },
  {
    name: "matmul transA transB",
    inputs: [{ shape: [3, 2] }, { shape: [4, 3] }],
    build: ([a, b]) => T.matmul(a!, b!, { transA: true, transB: true }),
  },
  {
    name: "matmul batched",
    inputs: [{ shape: [2, 2, 3] }, { shape: [2, 3, 2] }],
    build: ([a, b]) => T.matmul(a!, b!),
  },
  {
    name: "matmul broadcast batch (shared weight)",
    inputs: [{ shape: [2, 2, 3] }, { shape: [3, 2] }],
    build: ([a, b]) => T.matmul(a!, b!),
  },
  {
    name: "matmul broadcast batch dims both sides",
    inputs: [{ shape: [2, 1, 2, 3] }, { shape: [3, 3, 2] }],
    build: ([a, b]) => T.matmul(a!, b!, { transB: false }),
  },
  {
    name: "matmul vector",
    inputs: [{ shape: [3] }, { shape: [3, 2] }],
    build: ([a, b]) => T.matmul(a!, b!),
  },
  {
    name: "matmul matrix-vector",
    inputs: [{ shape: [2, 3] }, { shape: [3] }],
    build: ([a, b]) => T.matmul(a!, b!),
  },
  { name: "permute", inputs: [{ shape: [2, 3, 4] }], build: ([a]) => T.permute(a!, [2, 0, 1]) },
  { name: "transpose", inputs: [{ shape: [2, 3] }], build: ([a]) => T.transpose(a!) },
  {
    name: "reshape/flatten/squeeze/unsqueeze",
    inputs: [{ shape: [2, 1, 3] }],
    build: ([a]) => T.mul(T.unsqueeze(T.squeeze(T.flatten(T.reshape(a!, [3, 2]), 0)), 0), 2),
  },
  { name: "slice", inputs: [{ shape: [3, 4] }], build: ([a]) => T.slice(a!, [1, 1], [2, -1]) },
  { name: "narrow", inputs: [{ shape: [2, 5] }], build: ([a]) => T.narrow(a!, 1, 1, 3) },
  {
    name: "concat axis 1",
    inputs: [{ shape: [2, 1, 2] }, { shape: [2, 3, 2] }],
    build: ([a, b]) => T.concat([a!, b!], 1),
  },
  {
    name: "indexSelect with repeats",
    inputs: [{ shape: [2, 4, 2] }, { shape: [5], dtype: "i32", values: [3, 0, 3, 1, 3] }],
    build: ([x, i]) => T.indexSelect(x!, 1, i!),
  },
  {
    name: "embedding with repeated ids",
    inputs: [{ shape: [5, 3] }, { shape: [2, 3], dtype: "i32", values: [4, 1, 4, 0, 4, 2] }],
    build: ([w, ids]) => T.embedding(w!, ids!),
  },
  {
    name: "conv2d stride 2 pad 1 with bias",
    inputs: [{ shape: [2, 2, 5, 5] }, { shape: [3, 2, 3, 3] }, { shape: [3] }],
    build: ([x, w, b]) => T.conv2d(x!, w!, b!, { stride: 2, padding: 1 }),
  },
  {
    name: "conv2d dilation 2, rectangular",
    inputs: [{ shape: [1, 2, 6, 5] }, { shape: [2, 2, 2, 3] }],
    build: ([x, w]) => T.conv2d(x!, w!, null, { dilation: [2, 1], padding: [1, 0] }),
  },
  {
    name: "maxPool2d 2x2",
    inputs: [{ shape: [1, 2, 4, 4], values: distinct(32, 5) }],
    build: ([x]) => T.maxPool2d(x!, { kernelSize: 2 }),
  },
  {
    name: "maxPool2d 3x3 stride 2 pad 1 (overlapping)",
    inputs: [{ shape: [1, 1, 5, 5], values: distinct(25, 6) }],
    build: ([x]) => T.maxPool2d(x!, { kernelSize: 3, stride: 2, padding: 1 }),
  },
  {
    name: "avgPool2d 3x3 stride 2 pad 1",
    inputs: [{ shape: [1, 2, 5, 5] }],
    build: ([x]) => T.avgPool2d(x!, { kernelSize: 3, stride: 2, padding: 1 }),
  },
  { name: "globalAvgPool", inputs: [{ shape: [2, 3, 2, 2] }], build: ([x]) => T.globalAvgPool(x!) },
  {
    name: "upsampleNearest2x",
    inputs: [{ shape: [1, 2, 2, 3] }],
    build: ([x]) => T.upsampleNearest2x(x!),
  },
  {
    name: "batchNorm training",
    inputs: [{ shape: [3, 2, 2, 2] }, { shape: [2], range: pos }, { shape: [2] }],
    build: ([x, g, b]) => T.batchNorm(x!, g!, b!, { training: true, eps: 1e-3 }),
  },
  {
    name: "batchNorm 2-D input training",
    inputs: [{ shape: [4, 3] }, { shape: [3], range: pos }, { shape: [3] }],
    build: ([x, g, b]) => T.batchNorm(x!, g!, b!),
  },
  {
    name: "batchNorm eval",
    inputs: [
      { shape: [2, 2, 3] },
      { shape: [2], range: pos },
      { shape: [2] },
      { shape: [2], grad: false },
      { shape: [2], range: pos, grad: false },
    ],
    build: ([x, g, b, rm, rv]) =>
      T.batchNorm(x!, g!, b!, { training: false, runningMean: rm!, runningVar: rv! }),
  },
  {
    name: "layerNorm",
    inputs: [{ shape: [2, 3, 4] }, { shape: [4], range: pos }, { shape: [4] }],
    build: ([x, g, b]) => T.layerNorm(x!, g!, b!),
  },
  {
    name: "rmsNorm",
    inputs: [{ shape: [3, 4] }, { shape: [4], range: pos }],
    build: ([x, g]) => T.rmsNorm(x!, g!),
  },
  { name: "dropout p=0.4", inputs: [{ shape: [4, 5] }], build: ([x]) => T.dropout(x!, 0.4) },
  {
    name: "crossEntropy",
    inputs: [{ shape: [3, 4], range: [-2, 2] }, { shape: [3], dtype: "i32", values: [2, 0, 3] }],
    build: ([l, t]) => T.crossEntropy(l!, t!),
  },
  {
    name: "crossEntropy 3-D logits",
    inputs: [{ shape: [2, 2, 3] }, { shape: [2, 2], dtype: "i32", values: [0, 2, 1, 1] }],
    build: ([l, t]) => T.crossEntropy(l!, t!),
  },
  { name: "mse", inputs: [{ shape: [2, 3] }, { shape: [2, 3] }], build: ([a, b]) => T.mse(a!, b!) },
  { name: "clone", inputs: [{ shape: [3] }], build: ([a]) => T.mul(T.clone(a!), a!) },
  {
    name: "composite: two-layer MLP with shared input",
    inputs: [{ shape: [2, 3] }, { shape: [3, 4] }, { shape: [4] }, { shape: [4, 2] }],
    build: ([x, w1, b1, w2]) => {
      const h = T.gelu(T.add(T.matmul(x!, w1!), b1!), "tanh");
      return T.add(T.matmul(h, w2!), T.sum(x!, 1, true));
    },
  },
];

for (const c of CASES) {
  Deno.test(`gradient of ${c.name} matches f64 finite differences`, () => {
    gradcheck(c);
  });
}

// ---------------------------------------------------------------- f32 backends

async function nativeBackend(): Promise<Backend | string> {
  try {
    const mod = await import("@libra/native");
    return mod.cpuBackend();
  } catch (e) {
    return `@libra/native cpu backend unavailable (${(e as Error).message.split("\n")[0]})`;
  }
}

const f32Backends: [string, () => Backend][] = [["reference f32", () => new ReferenceBackend()]];
const native = await nativeBackend();
if (typeof native === "string") {
  console.log(`autograd_test: skipping native cpu gradient checks: ${native}`);
  Deno.test({ name: `gradients on native cpu (skipped: ${native})`, ignore: true, fn() {} });
} else f32Backends.push(["native cpu", () => native]);

const f64 = new Map<string, (Float64Array | null)[]>();
function f64Grads(c: GradCase): (Float64Array | null)[] {
  let g = f64.get(c.name);
  if (!g) {
    g = analyticGrads(c, new ReferenceBackend({ precision: "f64" }));
    f64.set(c.name, g);
  }
  return g;
}

for (const [label, make] of f32Backends) {
  Deno.test(`gradients on ${label} agree with the checked f64 gradients`, async (t) => {
    const be = make();
    for (const c of CASES) {
      await t.step(c.name, () => {
        const before = be.memory().usedBytes;
        const want = f64Grads(c);
        const got = analyticGrads(c, be);
        want.forEach((w, i) => {
          if (!w) return;
          let scale = 0;
          for (const v of w) scale = Math.max(scale, Math.abs(v));
          assertClose(got[i]!, w, 1e-4 * Math.max(1, scale), 2e-3, `${c.name} input ${i}`);
        });
        assert.equal(be.memory().usedBytes, before, "memory returns to its level before the case");
      });
    }
  });
}

// ---------------------------------------------------------------- engine behaviour

const be = new ReferenceBackend();
T.setDefaultBackend(be);

Deno.test("backward accumulates into .grad across calls and through shared inputs", () => {
  const x = tensor([1, 2, 3], [3], { requiresGrad: true });
  const y = T.tidy(() => T.add(T.mul(x, x), x).sum()); // d/dx = 2x + 1
  y.backward();
  assert.deepEqual(x.grad!.toArray(), [3, 5, 7]);
  const z = T.tidy(() => T.mul(x, 2).sum());
  z.backward();
  assert.deepEqual(x.grad!.toArray(), [5, 7, 9]);
  for (const t of [x, y, z]) t.dispose();
  assert.equal(be.memory().usedBytes, 0);
});

Deno.test("lstmLayer computes what its steps as lstmCell ops compute, values and gradients", () => {
  const [B, S, H] = [2, 5, 3];
  const vals = (n: number, seed: number) => T.tensor(randomValues(n, seed, -2, 2));
  const xw = vals(B * S * 4 * H, 1).reshape([B, S, 4 * H]);
  const whh = vals(4 * H * H, 2).reshape([4 * H, H]);
  const w = vals(B * S * H, 3).reshape([B, S, H]); // weights of the loss
  xw.requiresGrad = true;
  whh.requiresGrad = true;
  const layer = T.tidy(() => T.lstmLayer(xw, whh));
  T.tidy(() => T.mul(layer, w).sum()).backward();
  const [gx, gw] = [xw.grad!.toArray(), whh.grad!.toArray()];
  xw.grad = null;
  whh.grad = null;
  // the same steps as ops: slice, the recurrent product, the cell, h's slice
  const steps = T.tidy(() => {
    let s = T.zeros([B, 2 * H]);
    const hs: T.Tensor[] = [];
    for (let t = 0; t < S; t++) {
      let g = T.narrow(xw, 1, t, 1).reshape([B, 4 * H]);
      if (t > 0) g = T.add(g, T.matmul(hs[t - 1]!, whh, { transB: true }));
      s = T.lstmCell(g, s);
      hs.push(T.narrow(s, 1, 0, H));
    }
    return T.concat(hs.map((h) => h.reshape([B, 1, H])), 1);
  });
  assertClose(
    new Float64Array(layer.toArray()),
    new Float64Array(steps.toArray()),
    1e-6,
    1e-6,
    "h",
  );
  T.tidy(() => T.mul(steps, w).sum()).backward();
  assertClose(new Float64Array(gx), new Float64Array(xw.grad!.toArray()), 1e-5, 1e-5, "xw grad");
  assertClose(new Float64Array(gw), new Float64Array(whh.grad!.toArray()), 1e-5, 1e-5, "whh grad");
  for (const t of [xw, whh, w, layer, steps]) t.dispose();
});

Deno.test("linear gives bitwise matmul(x, w^T) + b and its gradients, on each backend", async () => {
  const backends: Backend[] = [new ReferenceBackend()];
  try {
    backends.push((await import("@libra/native")).cpuBackend());
  } catch (e) {
    console.log(`linear test: native cpu skipped (${(e as Error).message.split("\n")[0]})`);
  }
  for (const backend of backends) {
    const t = (n: number, seed: number, shape: number[]) =>
      T.fromTypedArray(Float32Array.from(randomValues(n, seed, -2, 2)), shape, {
        backend,
        requiresGrad: true,
      });
    const [B, S, K, N] = [3, 4, 37, 29];
    const x = t(B * S * K, 1, [B, S, K]), w = t(N * K, 2, [N, K]), b = t(N, 3, [N]);
    const lw = T.fromTypedArray(Float32Array.from(randomValues(B * S * N, 4)), [B, S, N], {
      backend,
    });
    const run = (f: () => T.Tensor) => {
      const y = T.tidy(f);
      T.tidy(() => T.mul(y, lw).sum()).backward();
      const out = [y, x.grad!, w.grad!, b.grad!].map((g) => Array.from(g.toTypedArray()));
      for (const p of [x, w, b]) {
        p.grad!.dispose();
        p.grad = null;
      }
      y.dispose();
      return out;
    };
    const fused = run(() => T.linear(x, w, b));
    const composed = run(() =>
      T.add(T.matmul(x.reshape([B * S, K]), w, { transB: true }), b).reshape([B, S, N])
    );
    ["y", "x grad", "w grad", "b grad"].forEach((what, i) =>
      assert.deepEqual(fused[i], composed[i], `${backend.name}: ${what}`)
    );
    for (const p of [x, w, b, lw]) p.dispose();
  }
});

Deno.test("linear names a bad shape", () => {
  assert.throws(
    () => T.linear(T.zeros([2, 3]), T.zeros([4, 2]), T.zeros([4])),
    /linear: x \[2,3\], w \[4,2\] and b \[4\] must be \[\.\.\., k\], \[n, k\] and \[n\]/,
  );
  assert.throws(() => T.linear(T.zeros([2, 3]), T.zeros([4, 3]), T.zeros([3])), /must be/);
  const y = T.linear(T.zeros([0, 3]), T.zeros([4, 3]), T.tensor([1, 2, 3, 4]));
  assert.deepEqual(y.shape, [0, 4]);
  const z = T.linear(T.zeros([2, 0]), T.zeros([2, 0]), T.tensor([1, 2]));
  assert.deepEqual(z.toArray(), [1, 2, 1, 2], "k = 0: b on every row");
  y.dispose();
  z.dispose();
});

Deno.test("lstmLayer names a bad shape", () => {
  const xw = T.zeros([2, 3, 8]);
  assert.throws(
    () => T.lstmLayer(T.zeros([2, 3, 7]), T.zeros([8, 2])),
    /xw must be \[batch, steps, 4 hidden\]/,
  );
  assert.throws(
    () => T.lstmLayer(xw, T.zeros([8, 3])),
    /whh must be \[8, 2\] for xw \[2,3,8\], got \[8,3\]/,
  );
  const empty = T.lstmLayer(T.zeros([2, 0, 8]), T.zeros([8, 2]));
  assert.deepEqual(empty.shape, [2, 0, 2]);
  for (const t of [xw, empty]) t.dispose();
});

Deno.test("backward(grad) seeds a non-scalar output; scalar-less backward throws", () => {
  const x = tensor([1, 2], [2], { requiresGrad: true });
  const y = T.mul(x, 3);
  assert.throws(() => y.backward(), /non-scalar tensor \[2\]/);
  const g = tensor([1, -1]);
  y.backward(g);
  assert.deepEqual(x.grad!.toArray(), [3, -3]);
  assert.throws(
    () => y.backward(tensor([1, 2, 3])),
    /gradient shape \[3\] differs from tensor shape \[2\]/,
  );
  T.tidy(() => {});
  for (const t of [x, y, g]) t.dispose();
});

Deno.test("a second backward through a freed graph throws a clear error", () => {
  const x = tensor([1, 2], [2], { requiresGrad: true });
  const y = T.exp(x).sum();
  y.backward();
  assert.throws(() => y.backward(), /already used by an earlier backward/);
  x.dispose();
  y.dispose();
});

Deno.test("noGrad records nothing; detach cuts the graph; requiresGrad only on f32 leaves", () => {
  const x = tensor([1, 2], [2], { requiresGrad: true });
  const a = T.noGrad(() => T.mul(x, 2));
  assert.equal(a.requiresGrad, false);
  assert.equal(a.node, null);
  const d = T.mul(x, 2).detach();
  assert.equal(d.requiresGrad, false);
  const y = T.mul(x, 2);
  assert.throws(() => {
    y.requiresGrad = false;
  }, /only leaf tensors/);
  const ids = tensor([1], [1], { dtype: "i32" });
  assert.throws(() => {
    ids.requiresGrad = true;
  }, /only f32/);
  assert.throws(() => a.sum().backward(), /does not require grad/);
  for (const t of [x, a, d, y, ids]) t.dispose();
});

Deno.test("only inputs that need gradients get them (frozen weights stay null)", () => {
  const x = tensor([[1, 2]]);
  const w = tensor([[1], [1]], undefined, { requiresGrad: true });
  const y = T.matmul(x, w).sum();
  y.backward();
  assert.equal(x.grad, null);
  assert.deepEqual(w.grad!.toArray(), [1, 2]);
  for (const t of [x, w, y]) t.dispose();
});

Deno.test("saved tensors are released during backward, intermediate grads freed", () => {
  const base = be.memory().usedBytes;
  const x = T.fromTypedArray(new Float32Array(256).fill(0.5), [256], { requiresGrad: true });
  const afterX = be.memory().usedBytes;
  const loss = T.tidy(() => T.exp(T.exp(T.exp(x))).sum());
  // the chain holds three saved outputs (exp saves y) of 1 KiB each, plus the loss.
  assert.equal(be.memory().usedBytes - afterX, 3 * 1024 + 4);
  loss.backward();
  // left: x, x.grad, loss (all saved tensors and intermediate gradients freed).
  assert.equal(be.memory().usedBytes - base, 1024 + 1024 + 4);
  loss.dispose();
  x.dispose();
  assert.equal(be.memory().usedBytes, base);
});

Deno.test("disposing the output of an unused graph frees what it saved", () => {
  const base = be.memory().usedBytes;
  const x = tensor([1, 2, 3], [3], { requiresGrad: true });
  const h = T.exp(x);
  const y = T.tidy(() => T.mul(h, h).sum());
  h.dispose(); // still saved by the mul node
  assert.ok(be.memory().usedBytes > base + 12);
  y.dispose();
  assert.equal(be.memory().usedBytes, base + 12);
  x.dispose();
  assert.equal(be.memory().usedBytes, base);
});

Deno.test("a long chain of 20000 ops back-propagates without recursion", () => {
  const x = tensor([1], [1], { requiresGrad: true });
  let y = x;
  T.tidy(() => {
    for (let i = 0; i < 20000; i++) y = T.add(y, 0);
    T.keep(y);
  });
  y.sum().backward();
  assert.deepEqual(x.grad!.toArray(), [1]);
  y.dispose();
  x.dispose();
});

Deno.test("gradient of dropout uses the same mask as the forward (recomputation exact)", () => {
  T.manualSeed(99);
  const x = T.ones([64], { requiresGrad: true });
  const y = T.dropout(x, 0.5);
  const fwd = y.toArray();
  y.sum().backward();
  assert.deepEqual(x.grad!.toArray(), fwd);
  assert.ok(fwd.some((v) => v === 0) && fwd.some((v) => v === 2));
  x.dispose();
  y.dispose();
  const z = T.zeros([2]);
  assert.deepEqual(T.dropout(z, 0.5, false).toArray(), [0, 0]);
  z.dispose();
});

Deno.test("batchNorm training updates running stats in place (PyTorch momentum, unbiased var)", () => {
  const x = tensor([[1, 10], [3, 20], [8, 30]]); // N=3, C=2
  const rm = zeros([2]), rv = ones([2]);
  const y = T.batchNorm(x, ones([2]), zeros([2]), {
    runningMean: rm,
    runningVar: rv,
    momentum: 0.5,
  });
  const m0 = 4, v0 = ((1 - 4) ** 2 + (3 - 4) ** 2 + (8 - 4) ** 2) / 2;
  const m1 = 20, v1 = (100 + 0 + 100) / 2;
  assertClose(rm.toArray(), [0.5 * m0, 0.5 * m1], 1e-5, 1e-6);
  assertClose(rv.toArray(), [0.5 + 0.5 * v0, 0.5 + 0.5 * v1], 1e-4, 1e-6);
  const ev = T.batchNorm(x, ones([2]), zeros([2]), {
    runningMean: rm,
    runningVar: rv,
    training: false,
    eps: 0,
  });
  assertClose(
    ev.toArray().slice(0, 2),
    [(1 - 2) / Math.sqrt(0.5 + 0.5 * v0), (10 - 10) / Math.sqrt(0.5 + 0.5 * v1)],
    1e-5,
    1e-5,
  );
  T.tidy(() => {});
  for (const t of [x, rm, rv, y, ev]) t.dispose();
});

Deno.test("max splits its gradient evenly among tied maxima, as PyTorch does", async (t) => {
  const be = new ReferenceBackend({ precision: "f64" });
  /** Gradient of sum(weights * max(x, axis, keepdim)) with respect to x. */
  const gradOf = (
    values: number[],
    shape: number[],
    axis?: number,
    keepdim = false,
    weights?: number[],
  ): number[] =>
    T.withBackend(be, () => {
      const x = T.tensor(values, shape, { requiresGrad: true });
      const m = T.max(x, axis, keepdim);
      const y = weights ? T.sum(T.mul(m, T.tensor(weights, m.shape))) : T.sum(m);
      y.backward();
      const g = x.grad!.toArray() as number[];
      x.dispose();
      return g;
    });
  const close = (got: number[], want: number[], msg: string) => {
    assert.equal(got.length, want.length, msg);
    got.forEach((g, i) => {
      if (Number.isNaN(want[i]!)) assert.ok(Number.isNaN(g), `${msg}[${i}]: ${g} is not NaN`);
      else assert.ok(Math.abs(g - want[i]!) < 1e-6, `${msg}[${i}]: ${g} != ${want[i]}`);
    });
  };

  await t.step("x.max(): a two-way tie matches central finite differences", () => {
    const x = [1, 3, 3, 2];
    const got = gradOf(x, [4]);
    const h = 1e-3;
    const fd = x.map((_, i) => {
      const up = x.map((v, j) => (j === i ? v + h : v));
      const dn = x.map((v, j) => (j === i ? v - h : v));
      return (Math.max(...up) - Math.max(...dn)) / (2 * h);
    });
    close(got, fd, "fd");
    close(got, [0, 0.5, 0.5, 0], "hand");
  });
  await t.step("x.max(): a three-way tie shares a third each (torch: grad / mask.sum())", () => {
    close(gradOf([3, 1, 3, 3], [2, 2]), [1 / 3, 0, 1 / 3, 1 / 3], "3-way");
  });
  await t.step("x.max() with NaN maxima: the NaNs share the gradient", () => {
    close(gradOf([1, NaN, 2, NaN], [4]), [0, 0.5, 0, 0.5], "nan");
  });
  await t.step(
    "max(x, axis) splits per slice like torch.amax, scaled by the output gradient",
    () => {
      close(
        gradOf([1, 3, 3, 2, 2, 0, 5, 4, 1], [3, 3], 1, false, [1, 2, 3]),
        [0, 0.5, 0.5, 1, 1, 0, 3, 0, 0],
        "axis 1",
      );
      close(gradOf([1, 2, 1, 0], [2, 2], 0, true), [0.5, 1, 0.5, 0], "axis 0 keepdim");
      close(gradOf([7, 7, 7], [3], -1), [1 / 3, 1 / 3, 1 / 3], "axis -1");
      // torch.amax: a NaN maximum matches nothing (NaN != NaN), so grad / 0 * 0 is NaN on that row
      close(gradOf([1, NaN, 2, 3], [2, 2], 1), [NaN, NaN, 0, 1], "axis 1 with a NaN row");
    },
  );
});
