import assert from "node:assert/strict";
import { manualSeed, setDefaultBackend, tidy, zeros } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { BatchNorm2d, Conv2d, Dropout, Linear, ModuleList, ReLU, Sequential } from "./layers.ts";
import { Module, StateDictError } from "./module.ts";
import { createModel } from "./zoo.ts";

const backend = new ReferenceBackend();
setDefaultBackend(backend);

class Net extends Module {
  readonly body = this.child(
    "body",
    new Sequential(new Conv2d(2, 3, 3, { bias: false }), new BatchNorm2d(3), new ReLU()),
  );
  readonly heads = this.child("heads", new ModuleList([new Linear(3, 2), new Linear(3, 1)]));
  readonly drop = this.child("drop", new Dropout(0.1));
}

Deno.test("namedParameters() uses PyTorch dotted names in registration order; buffers are separate", () => {
  const net = new Net();
  assert.deepEqual(net.namedParameters().map(([n, t]) => `${n}:${t.shape}`), [
    "body.0.weight:3,2,3,3",
    "body.1.weight:3",
    "body.1.bias:3",
    "heads.0.weight:2,3",
    "heads.0.bias:2",
    "heads.1.weight:1,3",
    "heads.1.bias:1",
  ]);
  assert.deepEqual(net.namedBuffers().map(([n]) => n), [
    "body.1.running_mean",
    "body.1.running_var",
  ]);
  assert.equal(net.parameters().length, 7);
  assert.equal(net.numParameters(), 54 + 3 + 3 + 6 + 2 + 3 + 1);
  assert.ok(net.parameters().every((p) => p.requiresGrad));
  assert.deepEqual([...net.stateDict().keys()].slice(0, 5), [
    "body.0.weight",
    "body.1.weight",
    "body.1.bias",
    "body.1.running_mean",
    "body.1.running_var",
  ]);
  net.dispose();
});

Deno.test("a tied weight is listed once (GPT's head shares wte.weight)", () => {
  const cfg = { vocabSize: 5, contextLength: 4, nLayer: 1, nHead: 1, nEmbd: 4 };
  const tied = createModel("gpt", cfg);
  const untied = createModel("gpt", { ...cfg, tiedHead: false });
  assert.ok(!tied.namedParameters().some(([n]) => n.startsWith("lm_head")));
  assert.equal(untied.numParameters() - tied.numParameters(), 5 * 4);
  tied.dispose();
  untied.dispose();
});

Deno.test("train()/eval() propagate to every descendant", () => {
  const net = new Net();
  net.eval();
  assert.ok(net.namedModules().every(([, m]) => !m.training));
  net.train();
  assert.ok(net.namedModules().every(([, m]) => m.training));
  assert.deepEqual(net.namedModules().map(([n]) => n), [
    "",
    "body",
    "body.0",
    "body.1",
    "body.2",
    "heads",
    "heads.0",
    "heads.1",
    "drop",
  ]);
  net.dispose();
});

Deno.test("loadStateDict() is strict: lists missing, unexpected and mis-shaped keys and writes nothing", () => {
  manualSeed(1);
  const a = new Net();
  const sd = a.stateDictToHost();
  const before = a.heads.at(0).weight.toArray();
  sd.delete("heads.1.bias");
  sd.set("extra.weight", { dtype: "f32", shape: [1], data: new Float32Array(1) });
  sd.set("heads.0.weight", { dtype: "f32", shape: [3, 2], data: new Float32Array(6) });
  assert.throws(() => a.loadStateDict(sd), (e: unknown) => {
    assert.ok(e instanceof StateDictError);
    assert.deepEqual(e.missing, ["heads.1.bias"]);
    assert.deepEqual(e.unexpected, ["extra.weight"]);
    assert.deepEqual(e.mismatched, ["heads.0.weight: expected f32[2, 3], got f32[3, 2]"]);
    assert.match(
      e.message,
      /missing keys: heads\.1\.bias\. unexpected keys: extra\.weight\. mis-shaped keys: heads\.0\.weight/,
    );
    return true;
  });
  assert.deepEqual(a.heads.at(0).weight.toArray(), before, "a failed strict load writes nothing");
  const r = a.loadStateDict(sd, { strict: false });
  assert.deepEqual(r.missing, ["heads.1.bias"]);
  assert.deepEqual(a.heads.at(0).weight.toArray(), before, "mis-shaped keys are skipped");
  a.dispose();
});

Deno.test("loadStateDict() copies in place, so a second model becomes identical and references stay valid", () => {
  manualSeed(2);
  const a = new Net();
  manualSeed(3);
  const b = new Net();
  const w = b.heads.at(1).weight;
  assert.notDeepEqual(w.toArray(), a.heads.at(1).weight.toArray());
  b.loadStateDict(a.stateDictToHost());
  assert.equal(b.heads.at(1).weight, w);
  for (const [k, t] of b.stateDict()) {
    assert.deepEqual(t.toArray(), a.stateDict().get(k)!.toArray(), k);
  }
  a.dispose();
  b.dispose();
});

Deno.test("saveSafetensors()/loadSafetensors() round-trip a model and report a wrong architecture", async () => {
  const dir = await Deno.makeTempDir();
  try {
    manualSeed(4);
    const a = createModel("mlp", "tiny");
    await a.saveSafetensors(`${dir}/m.safetensors`, { note: "test" });
    manualSeed(5);
    const b = createModel("mlp", "tiny");
    await b.loadSafetensors(`${dir}/m.safetensors`);
    for (const [k, t] of b.stateDict()) {
      assert.deepEqual(t.toArray(), a.stateDict().get(k)!.toArray(), k);
    }
    const c = createModel("mlp", { inFeatures: 16, hidden: [32], outFeatures: 4 });
    await assert.rejects(
      () => c.loadSafetensors(`${dir}/m.safetensors`),
      /unexpected keys: layers\.4\.bias, layers\.4\.weight.*mis-shaped keys: layers\.2\.weight: expected f32\[4, 32\], got f32\[32, 32\].*m\.safetensors/s,
    );
    for (const m of [a, b, c]) m.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("dispose() frees every parameter, buffer and gradient", () => {
  const used = backend.memory().usedBytes;
  const net = new Net();
  tidy(() => net.heads.at(0).forward(zeros([4, 3])).sum().backward());
  assert.ok(net.heads.at(0).weight.grad !== null);
  net.dispose();
  assert.equal(backend.memory().usedBytes, used);
});

Deno.test("registering a name twice or a dotted name throws", () => {
  class Bad extends Module {
    constructor(name: string, twice: boolean) {
      super();
      this.child(name, new ReLU());
      if (twice) this.child(name, new ReLU());
    }
  }
  assert.throws(() => new Bad("a", true), /"a" is already registered in Bad/);
  assert.throws(() => new Bad("a.b", false), /must be non-empty and contain no "\."/);
});

Deno.test("loadStateDict() accepts PyTorch's BatchNorm num_batches_tracked and nothing else extra", () => {
  const net = new Net();
  const sd = net.stateDictToHost();
  sd.set("body.1.num_batches_tracked", { dtype: "i32", shape: [], data: new Int32Array([7]) });
  net.loadStateDict(sd);
  sd.set("heads.0.num_batches_tracked", { dtype: "i32", shape: [], data: new Int32Array([7]) });
  assert.throws(() => net.loadStateDict(sd), /unexpected keys: heads\.0\.num_batches_tracked/);
  net.dispose();
});
