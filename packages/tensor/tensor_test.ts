import assert from "node:assert/strict";
import { MetaBackend } from "./meta_backend.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import * as T from "./mod.ts";

const be = new ReferenceBackend();
T.setDefaultBackend(be);

Deno.test("tidy frees everything created inside except what it returns (nested, arrays, objects)", () => {
  const base = be.memory().usedBytes;
  const out = T.tidy(() => {
    const a = T.ones([4]); // 16 bytes, freed
    const inner = T.tidy(() => {
      const b = T.mul(a, 2); // returned: moves to the outer scope
      T.add(b, 1); // freed by the inner scope
      return b;
    });
    assert.equal(inner.disposed, false);
    return { pair: [T.add(inner, 3), 7] as const, label: "x" };
  });
  assert.equal(be.memory().usedBytes, base + 16, "only the returned tensor is left");
  assert.deepEqual(out.pair[0].toArray(), [5, 5, 5, 5]);
  out.pair[0].dispose();
  assert.equal(be.memory().usedBytes, base);
});

Deno.test("tidy frees tensors when fn throws, and rejects async functions", () => {
  const base = be.memory().usedBytes;
  assert.throws(() =>
    T.tidy(() => {
      T.zeros([8]);
      throw new Error("boom");
    }), /boom/);
  assert.equal(be.memory().usedBytes, base);
  assert.throws(() => T.tidy(() => Promise.resolve(1)), /synchronous/);
});

Deno.test("keep() exempts a tensor from scopes; dispose is idempotent", () => {
  const base = be.memory().usedBytes;
  let kept: T.Tensor | null = null;
  T.tidy(() => {
    kept = T.keep(T.zeros([3]));
    T.zeros([5]);
  });
  assert.equal(be.memory().usedBytes, base + 12);
  kept!.dispose();
  kept!.dispose();
  assert.equal(be.memory().usedBytes, base);
});

Deno.test("using disposes at the end of the block", () => {
  const base = be.memory().usedBytes;
  {
    using t = T.ones([10]);
    assert.equal(be.memory().usedBytes, base + 40);
    assert.equal(t.sum().item(), 10);
  }
  // t.sum() escaped (no scope): 4 bytes remain until collected or disposed
  assert.equal(be.memory().usedBytes, base + 4);
});

Deno.test("views share one storage, freed when the last handle goes", () => {
  const base = be.memory().usedBytes;
  const x = T.arange(6);
  const v = x.reshape([2, 3]);
  const d = v.detach();
  assert.equal(v.storage, x.storage);
  assert.equal(d.storage, x.storage);
  assert.equal(x.storage.refs, 3);
  x.dispose();
  v.dispose();
  assert.equal(be.memory().usedBytes, base + 24, "still referenced by d");
  assert.deepEqual(d.toArray(), [0, 1, 2, 3, 4, 5]);
  d.dispose();
  assert.equal(be.memory().usedBytes, base);
  assert.equal(x.storage.live, false);
});

Deno.test("disposing a leaf frees its gradient too", () => {
  const base = be.memory().usedBytes;
  const w = T.ones([4], { requiresGrad: true });
  const loss = T.tidy(() => w.mul(w).sum());
  loss.backward();
  loss.dispose();
  assert.equal(be.memory().usedBytes, base + 32);
  w.dispose();
  assert.equal(be.memory().usedBytes, base);
});

Deno.test("a training-style loop keeps memory flat (tidy per step, grads replaced)", () => {
  const w = T.normal([8, 4], { requiresGrad: true, seed: 1 });
  const x = T.normal([16, 8], { seed: 2 });
  const usage: number[] = [];
  for (let step = 0; step < 5; step++) {
    const loss = T.tidy(() => T.matmul(x, w).relu().mean());
    loss.backward();
    loss.dispose();
    w.grad!.dispose();
    w.grad = null;
    usage.push(be.memory().usedBytes);
  }
  assert.ok(usage.every((u) => u === usage[0]), `memory per step: ${usage}`);
  w.dispose();
  x.dispose();
});

Deno.test("default backend: withBackend scopes it, getDefaultBackend throws a clear error when unset", () => {
  const meta = new MetaBackend();
  const t = T.withBackend(meta, () => T.zeros([256]));
  assert.equal(t.backend, meta);
  assert.equal(T.getDefaultBackend(), be);
  t.dispose();
  T.setDefaultBackend(null);
  try {
    assert.throws(() => T.getDefaultBackend(), /no default backend: call setDefaultBackend/);
    assert.throws(() => T.zeros([1]), /no default backend/);
  } finally {
    T.setDefaultBackend(be);
  }
});

Deno.test("a model forward and backward runs on the meta backend (sizes only) and frees everything", () => {
  const meta = new MetaBackend();
  T.withBackend(meta, () => {
    const w1 = T.zeros([64, 32], { requiresGrad: true });
    const w2 = T.zeros([32, 10], { requiresGrad: true });
    const x = T.zeros([16, 64]);
    const targets = T.zeros([16], { dtype: "i32" });
    const loss = T.tidy(() => {
      const h = T.dropout(T.gelu(T.matmul(x, w1)), 0.1);
      const y = T.layerNorm(T.matmul(h, w2), T.ones([10]), T.zeros([10]));
      return T.crossEntropy(y, targets);
    });
    loss.backward();
    assert.deepEqual(w1.grad!.shape, [64, 32]);
    assert.throws(() => loss.item(), /meta/);
    for (const t of [loss, w1, w2, x, targets]) t.dispose();
  });
  assert.equal(meta.memory().usedBytes, 0);
  assert.ok(meta.calls > 10);
});

Deno.test("FinalizationRegistry frees the storage of an undisposed, unreachable tensor", async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    console.log("skipped: run with --v8-flags=--expose-gc to exercise the FinalizationRegistry");
    return;
  }
  const local = new ReferenceBackend();
  (() => {
    T.zeros([1024], { backend: local });
  })();
  for (let i = 0; i < 20 && local.memory().usedBytes > 0; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(local.memory().usedBytes, 0);
});

Deno.test("toTypedArray/toArray/item/toString", () => {
  T.tidy(() => {
    const t = T.tensor([[1.5, 2], [3, 4]]);
    assert.ok(t.toTypedArray() instanceof Float32Array);
    assert.deepEqual(t.toArray(), [1.5, 2, 3, 4]);
    assert.throws(() => t.item(), /item: tensor \[2,2\] has 4 elements, not 1/);
    assert.equal(t.toString(), "Tensor([2,2], f32, reference)");
    assert.equal(t.ndim, 2);
    assert.equal(t.device, "cpu");
    assert.equal(t.size, 4);
  });
});
