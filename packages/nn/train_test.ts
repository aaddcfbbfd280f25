import assert from "node:assert/strict";
import { fromTypedArray, manualSeed, setDefaultBackend, tidy } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { vectorData } from "./data.ts";
import { Dropout } from "./layers.ts";
import { crossEntropyLoss, mseLoss } from "./loss.ts";
import { MLP } from "./mlp.ts";
import { AdamW, SGD } from "./optim.ts";
import { train, trainStep } from "./train.ts";
import { createData, createModel, MODEL_NAMES } from "./zoo.ts";
import type { Backend } from "@libra/tensor";

const backend = new ReferenceBackend();
setDefaultBackend(backend);

Deno.test("train() reports per-step loss, time and memory; memory after step N equals step 1", () => {
  manualSeed(0);
  const model = new MLP({ inFeatures: 6, hidden: [16], outFeatures: 3 });
  const opt = new SGD(model.parameters(), { lr: 0.1, momentum: 0.9, weightDecay: 1e-4 });
  const steps: number[] = [];
  const r = train({
    model,
    data: vectorData({ features: 6, classes: 3, batchSize: 32, seed: 1 }),
    optimizer: opt,
    steps: 30,
    onStep: (s) => steps.push(s.step),
  });
  assert.deepEqual(steps, Array.from({ length: 30 }, (_, i) => i));
  assert.equal(r.losses.length, 30);
  assert.ok(r.times.every((t) => t > 0));
  assert.ok(r.usedBytes.every((b) => b === r.usedBytes[0]), `${r.usedBytes}`);
  // parameters + one momentum buffer per parameter, nothing else
  assert.equal(r.usedBytes[0], 2 * 4 * model.numParameters());
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  assert.ok(mean(r.losses.slice(-5)) < 0.7 * mean(r.losses.slice(0, 5)), `${r.losses}`);
  opt.dispose();
  model.dispose();
  assert.equal(backend.memory().usedBytes, 0);
});

Deno.test("optimizers skip parameters without gradients and zeroGrad() frees gradients", () => {
  const a = fromTypedArray(new Float32Array([1, 2]), [2], { requiresGrad: true });
  const b = fromTypedArray(new Float32Array([3]), [1], { requiresGrad: true });
  const opt = new AdamW([a, b], { lr: 0.1, weightDecay: 0 });
  tidy(() => a.mul(a).sum().backward());
  opt.step();
  // Adam's first step moves each element by lr * sign(g)
  assert.deepEqual(a.toArray().map((v) => Math.round(v * 1e5) / 1e5), [0.9, 1.9]);
  assert.deepEqual(b.toArray(), [3]);
  opt.zeroGrad();
  assert.equal(a.grad, null);
  opt.dispose();
  a.dispose();
  b.dispose();
});

Deno.test("Dropout is the identity in eval mode and for p = 0; in training it zeroes and rescales", () => {
  manualSeed(9);
  tidy(() => {
    const x = fromTypedArray(Float32Array.from({ length: 1000 }, () => 1), [1000]);
    const d = new Dropout(0.25);
    const y = d.forward(x).toArray();
    const kept = y.filter((v) => v !== 0);
    assert.ok(kept.every((v) => Math.abs(v - 1 / 0.75) < 1e-6));
    assert.ok(Math.abs(kept.length / 1000 - 0.75) < 0.05, `kept ${kept.length}`);
    d.eval();
    assert.equal(d.forward(x), x);
    assert.equal(new Dropout(0).forward(x), x);
  });
  assert.throws(() => new Dropout(1.5), /p must be in \[0, 1\], got 1.5/);
});

Deno.test("losses reject mismatched shapes and dtypes with the shapes in the message", () => {
  tidy(() => {
    const logits = fromTypedArray(new Float32Array(6), [2, 3]);
    assert.throws(
      () => crossEntropyLoss(logits, fromTypedArray(new Int32Array(3), [3])),
      /logits \[2,3\] do not match targets \[3\]/,
    );
    assert.throws(
      () => crossEntropyLoss(logits, fromTypedArray(new Float32Array(2), [2])),
      /targets must be i32/,
    );
    assert.throws(
      () => mseLoss(logits, fromTypedArray(new Float32Array(6), [3, 2])),
      /\[2,3\] and \[3,2\] differ/,
    );
  });
});

Deno.test("trainStep() of every tiny model reads the device exactly once (the loss) and leaves only parameters and state", () => {
  const inner = new ReferenceBackend();
  let reads = 0, runs = 0;
  const counting = new Proxy(inner, {
    get(target, prop) {
      if (prop === "read") {
        return (...args: Parameters<Backend["read"]>) => (reads++, target.read(...args));
      }
      if (prop === "run") {
        return (...args: Parameters<Backend["run"]>) => (runs++, target.run(...args));
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Backend;
  for (const name of MODEL_NAMES) {
    manualSeed(0);
    const model = createModel(name, "tiny", { backend: counting });
    const opt = new AdamW(model.parameters());
    const batch = createData(name, "tiny", { batchSize: 2 }).next();
    const before = inner.memory().usedBytes;
    reads = runs = 0;
    const loss = trainStep({ model, batch, optimizer: opt });
    assert.ok(Number.isFinite(loss));
    assert.equal(reads, 1, `${name}: device reads in one step`);
    assert.ok(runs > 10, `${name}: ${runs} kernel calls`);
    // AdamW's two moments per parameter are the only new allocations
    assert.equal(inner.memory().usedBytes - before, 2 * 4 * model.numParameters(), name);
    opt.dispose();
    model.dispose();
  }
  assert.equal(inner.memory().usedBytes, 0);
});

Deno.test("SGD without momentum updates p -= lr (g + wd p) on every backend and allocates no momentum state", async () => {
  const backends: [string, Backend][] = [["reference", new ReferenceBackend()]];
  try {
    const { cpuBackend } = await import("@libra/native");
    backends.push(["native cpu", cpuBackend()]);
  } catch (e) {
    console.log(`SGD momentum-0 test: native cpu skipped (${(e as Error).message.split("\n")[0]})`);
  }
  for (const [name, backend] of backends) {
    const p = fromTypedArray(new Float32Array([1, -2, 3]), [3], { backend, requiresGrad: true });
    p.grad = fromTypedArray(new Float32Array([0.5, 0.25, -1]), [3], { backend });
    const opt = new SGD([p], { lr: 0.1, weightDecay: 0.01 });
    const before = backend.memory().usedBytes;
    opt.step();
    assert.equal(backend.memory().usedBytes, before, `${name}: no momentum buffers`);
    const expected = [1, -2, 3].map((x, i) => x - 0.1 * ([0.5, 0.25, -1][i]! + 0.01 * x));
    const got = Array.from(p.toTypedArray() as Float32Array);
    got.forEach((v, i) =>
      assert.ok(Math.abs(v - expected[i]!) < 1e-6, `${name}[${i}]: ${v} vs ${expected[i]}`)
    );
    opt.dispose();
    p.grad.dispose();
    p.dispose();
  }
});

Deno.test("SGD and AdamW: one kernel call a step (foreach) gives bitwise the per-parameter results, with a parameter joining late", async () => {
  const backends: [string, Backend][] = [["reference", new ReferenceBackend()]];
  try {
    const { cpuBackend } = await import("@libra/native");
    backends.push(["native cpu", cpuBackend()]);
  } catch (e) {
    console.log(`foreach test: native cpu skipped (${(e as Error).message.split("\n")[0]})`);
  }
  const sizes = [5, 3, 4];
  const value = (k: number, n: number, s: number) =>
    Float32Array.from({ length: n }, (_, i) => Math.sin(1.7 * k + 0.3 * i + s));
  const run = (backend: Backend, kind: "sgd" | "adamw", foreach: boolean) => {
    const params = sizes.map((n, k) =>
      fromTypedArray(value(k, n, 0), [n], { backend, requiresGrad: true })
    );
    const opt = kind === "sgd"
      ? new SGD(params, { lr: 0.1, momentum: 0.9, weightDecay: 0.01, nesterov: true, foreach })
      : new AdamW(params, { lr: 0.05, foreach });
    const calls: number[] = [];
    for (let step = 1; step <= 3; step++) {
      // The last parameter has no gradient on the first step: it starts a step late.
      params.forEach((p, k) => {
        if (step > 1 || k < 2) {
          p.grad = fromTypedArray(value(k, p.size, step), [p.size], { backend });
        }
      });
      // The update calls (the native backend's profile counts calls by kernel).
      const prof = backend as {
        startProfile?: () => void;
        stopProfile?: () => { name: string; calls: number }[];
      };
      prof.startProfile?.();
      opt.step();
      const by = prof.stopProfile?.() ?? [];
      calls.push(
        by.filter((e) => e.name.endsWith("_update") || e.name.endsWith("_multi"))
          .reduce((a, e) => a + e.calls, 0),
      );
      opt.zeroGrad();
    }
    const out = params.map((p) => Array.from(p.toTypedArray() as Float32Array));
    opt.dispose();
    for (const p of params) p.dispose();
    return { out, calls };
  };
  for (const [name, backend] of backends) {
    for (const kind of ["sgd", "adamw"] as const) {
      const one = run(backend, kind, true), each = run(backend, kind, false);
      assert.deepEqual(one.out, each.out, `${name} ${kind}: foreach and per-parameter differ`);
      assert.notDeepEqual(
        one.out[2],
        Array.from(value(2, 4, 0)),
        `${name} ${kind}: late one moved`,
      );
      if (name === "native cpu") {
        // Step 2: the late parameter's first update is a call of its own; AdamW's step 3
        // too (its step count stays one behind).
        const want = kind === "sgd" ? [1, 2, 1] : [1, 2, 2];
        assert.deepEqual(one.calls, want, `${name} ${kind} foreach calls`);
        assert.deepEqual(each.calls, [2, 3, 3], `${name} ${kind} per-parameter calls`);
      }
    }
  }
});
