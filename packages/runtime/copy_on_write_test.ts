/**
 * Copy-on-write before in-place updates: where the budget is ample (at least
 * the budget-free peak the engine measured), a training step's parameter
 * updates copy nothing (the gradients computed from the old parameters become
 * leaves); under a tighter budget, and without one, they copy, so values
 * computed from the old parameters stay recomputable. Results are bitwise
 * equal either way, and the measured time of the runtime's added kernels
 * (`addedKernelNs`) counts the copies, not the updates themselves.
 */

import assert from "node:assert/strict";
import { AdamW, createData, createModel, trainStep } from "@libra/nn";
import { manualSeed, withBackend } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Runtime } from "./runtime.ts";

function run(budget: (peak: number) => number | undefined) {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const perStep: { copies: number; added: number; evictions: number }[] = [];
  const losses: number[] = [];
  let weights: number[][] = [];
  withBackend(rt, () => {
    manualSeed(3);
    const model = createModel("gpt", "tiny", { backend: rt });
    const data = createData("gpt", "tiny", { seed: 3 });
    const opt = new AdamW(model.parameters(), { lr: 0.01 });
    for (let i = 0; i < 4; i++) {
      if (i === 2) {
        const b = budget(rt.stats.peakBytes);
        if (b !== undefined) rt.setBudget(b);
      }
      const s0 = rt.stats;
      losses.push(trainStep({ model, batch: data.next(), optimizer: opt, backend: rt }));
      const s1 = rt.stats;
      perStep.push({
        copies: s1.copies - s0.copies,
        added: s1.addedKernelNs - s0.addedKernelNs,
        evictions: s1.evictions - s0.evictions,
      });
      rt.endStep();
    }
    weights = model.parameters().map((p) => Array.from(p.toArray()));
    opt.dispose();
    model.dispose();
  });
  return { perStep, losses, weights, stats: rt.stats };
}

Deno.test("copy-on-write: none at an ample budget, copies without one and under a tight one, same bits", () => {
  const free = run(() => undefined);
  const ample = run((peak) => peak);
  const tight = run((peak) => Math.floor(peak * 0.8));
  // without a budget every step copies the parameters it updates
  for (const s of free.perStep) assert.ok(s.copies > 0, JSON.stringify(free.perStep));
  // at the budget-free peak: the first two (budget-free) steps copy, the budgeted ones do not
  assert.ok(ample.perStep[0]!.copies > 0 && ample.perStep[1]!.copies > 0);
  for (const s of ample.perStep.slice(2)) {
    assert.equal(s.copies, 0, JSON.stringify(ample.perStep));
    assert.equal(s.added, 0, "no kernel added: in-place updates are not counted as added");
    assert.equal(s.evictions, 0);
  }
  // below it the copies come back (the runtime may have to evict what was computed from them)
  for (const s of tight.perStep.slice(2)) assert.ok(s.copies > 0, JSON.stringify(tight.perStep));
  // the tight budget evicted (what was computed from the old parameters, among others)
  assert.ok(tight.stats.evictions > 0, JSON.stringify(tight.perStep));
  for (const r of [ample, tight]) {
    assert.deepEqual(r.losses, free.losses);
    assert.deepEqual(r.weights, free.weights);
  }
});

Deno.test("an in-place update keeps the node of a leaf no call read, and retires one that was read", () => {
  const ref = new ReferenceBackend();
  const rt = new Runtime({ backend: ref, timeline: false });
  const n = 4, bytes = 4 * n;
  const param = [1, 2, 3, 4], grad = [0.5, -1, 2, 0], mom = [0.1, 0.2, 0.3, 0.4];
  const p = rt.alloc(bytes), g = rt.alloc(bytes), m = rt.alloc(bytes), y = rt.alloc(bytes);
  rt.write(p, new Float32Array(param));
  rt.write(g, new Float32Array(grad));
  rt.write(m, new Float32Array(mom));
  rt.run("relu", [p], [y], [n]); // a recorded call reads the parameter, none the momentum
  // A runtime's buffer is its storage node.
  const node = (b: typeof p) => b as unknown as { tensors: unknown[] };
  const [p0, m0] = [node(p).tensors[0], node(m).tensors[0]];
  // lr 0.1, momentum 0.9, not the first step: buf = 0.9 buf + g; param -= 0.1 buf
  rt.run("sgd_update", [p, g, m], [], [n, 0.1, 0.9, 0, 0, 0, 0]);
  assert.equal(node(m).tensors[0], m0, "the unread momentum keeps its node");
  assert.notEqual(node(p).tensors[0], p0, "the parameter a call read takes a new leaf");
  // The same update on the bare backend is the oracle, bit for bit.
  const f32 = (be: { read(b: typeof p): Uint8Array }, b: typeof p) =>
    Array.from(new Float32Array(be.read(b).slice().buffer));
  const bare = new ReferenceBackend();
  const [bp, bg, bm] = [param, grad, mom].map((v) => {
    const b = bare.alloc(bytes);
    bare.write(b, new Float32Array(v));
    return b;
  }) as [typeof p, typeof p, typeof p];
  bare.run("sgd_update", [bp, bg, bm], [], [n, 0.1, 0.9, 0, 0, 0, 0]);
  assert.deepEqual(f32(rt, m), f32(bare, bm));
  assert.deepEqual(f32(rt, p), f32(bare, bp));
  assert.notDeepEqual(f32(rt, p), param, "the update changed the parameter");
  // the value computed from the old parameter is still the old one's relu
  assert.deepEqual(f32(rt, y), param);
  for (const b of [p, g, m, y]) rt.free(b);
});

Deno.test("a static cost model prices each in-place update by the bytes it writes, shared buffers once", () => {
  // The model's rule is the oracle: a call costs the bytes it writes.
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    timeline: false,
    costModel: {
      name: "bytes",
      staticCallCost: true,
      measures: false,
      callCost: (c) => c.totalBytes,
      swapCost: () => 0,
    },
  });
  const n = 4, bytes = 4 * n;
  const [p, g, m] = [1, 2, 3].map((v) => {
    const b = rt.alloc(bytes);
    rt.write(b, new Float32Array(n).fill(v));
    return b;
  }) as [ReturnType<Runtime["alloc"]>, ReturnType<Runtime["alloc"]>, ReturnType<Runtime["alloc"]>];
  const sgd = [n, 0.1, 0.9, 0, 0, 0, 0];
  const priced = (ins: ReturnType<Runtime["alloc"]>[]) => {
    const before = rt.stats.computeNs;
    rt.run("sgd_update", ins, [], sgd);
    return rt.stats.computeNs - before;
  };
  assert.equal(priced([p, g, m]), 2 * bytes, "parameter and momentum");
  // Same kernel, params and sizes, but the parameter is its own momentum: one buffer written.
  assert.equal(priced([p, g, p]), bytes);
  assert.equal(priced([p, g, m]), 2 * bytes);
  for (const b of [p, g, m]) rt.free(b);
});

Deno.test("an update of many tensors in one call retires each read parameter and keeps each unread leaf, as single updates would", () => {
  const n = 3, bytes = 4 * n, count = 12; // more than 8 written storages: the set path
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const bare = new ReferenceBackend();
  const vals = (k: number, s: number) => Float32Array.from({ length: n }, (_, i) => k + s * i);
  const node = (b: unknown) => b as { tensors: unknown[] };
  const on = (be: ReferenceBackend | Runtime, k: number, s: number) => {
    const b = be.alloc(bytes);
    be.write(b, vals(k, s));
    return b;
  };
  const ins: ReturnType<Runtime["alloc"]>[] = [], bareIns: ReturnType<Runtime["alloc"]>[] = [];
  const read: ReturnType<Runtime["alloc"]>[] = [];
  for (let k = 0; k < count; k++) {
    for (const s of [1, -0.5, 0.25]) {
      ins.push(on(rt, k, s));
      bareIns.push(on(bare, k, s));
    }
    if (k % 2 === 0) {
      const y = rt.alloc(bytes);
      rt.run("relu", [ins[3 * k]!], [y], [n]); // a recorded call reads the even parameters
      read.push(y);
    }
  }
  const before = ins.map((b) => node(b).tensors[0]);
  const params = [count, 0.1, 0.9, 0, 0, 0, 0, ...new Array(count).fill(n)];
  rt.run("sgd_update_multi", ins, [], params);
  bare.run("sgd_update_multi", bareIns, [], params);
  const f32 = (be: ReferenceBackend | Runtime, b: unknown) =>
    Array.from(new Float32Array(be.read(b as ReturnType<Runtime["alloc"]>).slice().buffer));
  for (let k = 0; k < count; k++) {
    const [p, m] = [3 * k, 3 * k + 2];
    assert.deepEqual(f32(rt, ins[p]), f32(bare, bareIns[p]), `param ${k}`);
    assert.deepEqual(f32(rt, ins[m]), f32(bare, bareIns[m]), `momentum ${k}`);
    assert.equal(node(ins[m]).tensors[0], before[m], `momentum ${k} keeps its node`);
    if (k % 2 === 0) {
      assert.notEqual(node(ins[p]).tensors[0], before[p], `param ${k} was read: a new leaf`);
      // the value computed from the old parameter is still the old one's relu
      assert.deepEqual(f32(rt, read[k / 2]), Array.from(vals(k, 1)).map((v) => Math.max(v, 0)));
    } else assert.equal(node(ins[p]).tensors[0], before[p], `param ${k} unread: its node`);
  }
  for (const b of [...ins, ...read]) rt.free(b);
});
