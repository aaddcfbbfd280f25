import assert from "node:assert/strict";
import { type DeviceBuffer, KernelError } from "@libra/tensor/backend";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { OutOfBudgetError } from "./errors.ts";
import { Runtime } from "./runtime.ts";
import { formatTrace } from "./trace.ts";
import type { RuntimeEvent } from "./stats.ts";

function relu(x: number[]): number[] {
  return x.map((v) => (v > 0 ? v : 0));
}

Deno.test("Runtime: producing into one buffer over and over keeps lineage bounded", () => {
  const backend = new ReferenceBackend();
  const rt = new Runtime({ backend });
  const x = rt.alloc(16), y = rt.alloc(16);
  const input = [-1, 2, -3, 4];
  rt.write(x, new Float32Array(input));
  for (let i = 0; i < 1000; i++) rt.run("relu", [x], [y], [4]);
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], relu(input));
  const xs = rt.lineage.storages.get(1)!;
  // Only the latest relu can ever be replayed: the 999 before it read x for values now gone.
  assert.equal(xs.tensors[0]!.consumers.length, 1);
  assert.equal(rt.lineage.storages.size, 2);
  assert.equal(rt.stats.calls, 1000);
  // The backend holds exactly the two buffers' bytes: no reused buffer leaked, none lost.
  assert.equal(backend.memory().usedBytes, 32);
  assert.equal(backend.memory().peakBytes, 32);
  assert.equal(rt.memory().usedBytes, 32);
});

Deno.test("Runtime: under a budget a buffer produced into again holds no more device memory than its value", () => {
  const backend = new ReferenceBackend();
  const rt = new Runtime({ backend, budget: 1 << 20 });
  const x = rt.alloc(16), y = rt.alloc(16);
  rt.write(x, new Float32Array([3, -2, 1, -4]));
  for (let i = 0; i < 10; i++) rt.run("relu", [x], [y], [4]);
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], [3, 0, 1, 0]);
  assert.equal(backend.memory().usedBytes, 32);
  assert.equal(rt.stats.peakBytes, 32);
});

Deno.test("Runtime: events reach onEvent and subscribers only while subscribed", () => {
  const seen: string[] = [];
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    onEvent: (e) => seen.push(`opt:${e.type}`),
  });
  const x = rt.alloc(16), y = rt.alloc(16), z = rt.alloc(16);
  rt.write(x, new Float32Array([1, 2, 3, 4]));
  rt.run("relu", [x], [y], [4]);
  const got: RuntimeEvent[] = [];
  const off = rt.subscribe((e) => got.push(e));
  rt.run("relu", [y], [z], [4]);
  assert.equal(off(), true);
  rt.run("relu", [x], [y], [4]);
  assert.deepEqual(seen, ["opt:call", "opt:call", "opt:call"]);
  assert.deepEqual(got, [{ type: "call", index: 1, op: "relu", usedBytes: 48 }]);

  // Without any listener the runtime runs the same and builds no events.
  const quiet = new Runtime({ backend: new ReferenceBackend() });
  const q = quiet.alloc(16), r = quiet.alloc(16);
  quiet.write(q, new Float32Array([-5, 6, 0, -7]));
  quiet.run("relu", [q], [r], [4]);
  assert.deepEqual([...new Float32Array(quiet.read(r).buffer)], [0, 6, 0, 0]);
});

Deno.test("Runtime: a call with too-small buffers is rejected after a valid one of the same kernel", () => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  const x = rt.alloc(16), y = rt.alloc(16), small = rt.alloc(8);
  rt.write(x, new Float32Array(4));
  rt.run("relu", [x], [y], [4]);
  rt.run("relu", [x], [y], [4]);
  assert.throws(() => rt.run("relu", [x], [small], [4]), KernelError);
  assert.throws(() => rt.run("relu", [x], [y], [5]), KernelError);
  // The runtime stays usable and the valid call still runs.
  rt.run("relu", [x], [y], [4]);
  assert.equal(rt.stats.calls, 3);
});

Deno.test("Runtime: a call in the place of a checked one of the step before is checked itself", () => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  const x = rt.alloc(16), y = rt.alloc(16), small = rt.alloc(8);
  rt.write(x, new Float32Array([-1, 2, -3, 4]));
  rt.endStep();
  const step = () => {
    rt.run("relu", [x], [y], [4]); // the step's call 0
    rt.run("neg", [y], [small], [2]); // call 1
  };
  step();
  rt.endStep();
  step();
  rt.endStep();
  // Call 0 of the next step: another size, other params, another kernel, too few inputs.
  assert.throws(() => rt.run("relu", [x], [small], [4]), KernelError);
  assert.throws(() => rt.run("relu", [x], [y], [5]), KernelError);
  assert.throws(() => rt.run("neg", [x], [small], [4]), KernelError);
  assert.throws(() => rt.run("add", [x], [y], [4]), KernelError);
  // The calls it repeats still run, and compute what they computed.
  step();
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], [0, 2, 0, 4]);
  assert.deepEqual([...new Float32Array(rt.read(small).buffer)], [-0, -2]);
  assert.equal(rt.stats.calls, 6);
});

Deno.test("Runtime: a call with a long signature (conv2d's 14 params) in the place of a checked one is checked itself", () => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  const x = rt.alloc(64), w = rt.alloc(36), y = rt.alloc(16);
  rt.write(x, new Float32Array(16).map((_, i) => i));
  rt.write(w, new Float32Array(9).fill(1));
  rt.endStep();
  // N C H W K R S, strides, pads, dilations, no bias: a 2x2 output of 3x3 window sums.
  const params = [1, 1, 4, 4, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0];
  rt.run("conv2d", [x, w], [y], params);
  rt.endStep();
  // Padded by 1, the output is 4x4: 64 bytes, and the buffer holds 16.
  const padded = params.map((p, i) => (i === 9 || i === 10 ? 1 : p));
  assert.throws(() => rt.run("conv2d", [x, w], [y], padded), KernelError);
  rt.run("conv2d", [x, w], [y], params);
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], [45, 54, 81, 90]);
});

Deno.test("OutOfBudgetError: the budget known to work completed every step, never the one that failed", () => {
  // Step 0 fits 8192 bytes; step 1 holds a third value and needs 12288.
  const steps = (rt: Runtime) => {
    const leaf = (v: number) => {
      const b = rt.alloc(4096);
      rt.write(b, new Float32Array(1024).fill(v));
      return b;
    };
    const a = leaf(1), b = leaf(2);
    rt.endStep();
    void a, b;
    return () => leaf(3);
  };
  const under = new Runtime({ backend: new ReferenceBackend(), budget: 8192 });
  const third = steps(under);
  assert.throws(third, (e: unknown) => {
    assert.ok(e instanceof OutOfBudgetError);
    // before the fix: "a budget of 8192 bytes is known to work", the budget that just failed
    assert.equal(e.knownFeasibleBytes, undefined);
    assert.match(e.message, /no larger budget is known to work yet/);
    return true;
  });
  // Without a budget, step 0 peaked at 12288 (a value freed before its end); under 8192
  // the next step fails, and 12288, which every step so far fit, is what is reported.
  const rt = new Runtime({ backend: new ReferenceBackend() });
  const x = rt.alloc(4096), y = rt.alloc(4096), z = rt.alloc(4096);
  for (const [i, b] of [x, y, z].entries()) rt.write(b, new Float32Array(1024).fill(i));
  rt.free(z);
  rt.endStep();
  rt.setBudget(8192);
  const w = rt.alloc(4096);
  assert.throws(() => rt.write(w, new Float32Array(1024)), (e: unknown) => {
    assert.ok(e instanceof OutOfBudgetError);
    assert.equal(e.budgetBytes, 8192);
    assert.equal(e.knownFeasibleBytes, 12288);
    assert.match(e.message, /a budget of 12288 bytes is known to work/);
    return true;
  });
});

Deno.test("Runtime: a partial write keeps the rest of a value that bringing back its dependents evicted", () => {
  // a -> b -> c -> e, c freed (dropped), e dropped by pressure. Writing part of b
  // first makes e independent of b (recomputing c and e), which under lru and a
  // 3-buffer budget evicts b itself; the write must still find b's other bytes.
  const rt = new Runtime({ backend: new ReferenceBackend(), policy: "lru", budget: 192 });
  const n = 16;
  const a = rt.alloc(64), b = rt.alloc(64), c = rt.alloc(64), e = rt.alloc(64);
  const xs = Array.from({ length: n }, (_, i) => i - 4);
  rt.write(a, Float32Array.from(xs));
  rt.run("relu", [a], [b], [n]);
  rt.run("relu", [b], [c], [n]);
  rt.run("relu", [c], [e], [n]);
  rt.free(c);
  const d = rt.alloc(64);
  rt.run("relu", [a], [d], [n]);
  rt.write(b, new Float32Array(4).fill(-7), 0);
  const relu = xs.map((x) => Math.max(x, 0));
  assert.deepEqual(Array.from(new Float32Array(rt.read(b).buffer)), [
    -7,
    -7,
    -7,
    -7,
    ...relu.slice(4),
  ]);
  assert.deepEqual(
    Array.from(new Float32Array(rt.read(e).buffer)),
    relu,
    "e kept the old b's values",
  );
  assert.ok(rt.stats.evictions > 0);
});

Deno.test("Runtime accepts only the live buffers it allocated", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const other = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const a = rt.alloc(16), b = other.alloc(16);
  rt.write(a, new Float32Array(4).fill(2));
  assert.throws(
    () => rt.write(b, new Float32Array(4)),
    /write: buffer \d+ was not allocated by this runtime/,
  );
  assert.throws(() => rt.read(new ReferenceBackend().alloc(16)), /not allocated by this runtime/);
  // A storage of its own lineage that is no buffer (a value's tombstone, a copy) is none either.
  const leaf = rt.lineage.addLeaf(16, "x");
  assert.throws(() => rt.read(leaf.storage), /read: buffer \d+ was not allocated by this runtime/);
  const y = rt.alloc(16);
  rt.run("relu", [a], [y], [4]);
  rt.free(a);
  assert.throws(() => rt.run("relu", [a], [y], [4]), /relu: buffer \d+ was already freed/);
  assert.throws(() => rt.free(a), /free: buffer \d+ was already freed/);
  assert.deepEqual(Array.from(new Float32Array(rt.read(y).slice().buffer)), [2, 2, 2, 2]);
  assert.ok(a.id !== y.id && a.bytes === 16, "ids tell buffers apart; bytes as asked");
});

Deno.test("Runtime refuses a call that writes one buffer as two outputs", () => {
  // rms_norm_backward over one row of 4: both outputs (gx, ggamma) hold 4 floats.
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const [x, gy, rstd, gamma, out] = [16, 16, 4, 16, 16].map((bytes) => {
    const b = rt.alloc(bytes);
    rt.write(b, new Float32Array(bytes / 4).fill(1));
    return b;
  }) as [DeviceBuffer, DeviceBuffer, DeviceBuffer, DeviceBuffer, DeviceBuffer];
  assert.throws(
    () => rt.run("rms_norm_backward", [x, gy, rstd, gamma], [out, out], [1, 4]),
    /rms_norm_backward: output buffer \d+ is also output 0/,
  );
  const other = rt.alloc(16);
  rt.run("rms_norm_backward", [x, gy, rstd, gamma], [out, other], [1, 4]);
  assert.equal(rt.stats.calls, 1, "the refused call was not recorded");
});

Deno.test("Runtime.startRecording between steps gives the trace a runtime recording all along gives", () => {
  const program = (rt: Runtime, startAt: number | null) => {
    const w = rt.alloc(16);
    rt.write(w, new Float32Array([1, -2, 3, -4]));
    let carried: DeviceBuffer | null = null;
    for (let step = 0; step < 3; step++) {
      if (step === startAt) rt.startRecording();
      const x = rt.alloc(16), y = rt.alloc(16), z = rt.alloc(16);
      rt.write(x, new Float32Array([step, -1, 2, -3]));
      rt.run("add", [x, w], [y], [1, 4, 1, 1]);
      rt.run("relu", [carried ?? y], [z], [4]);
      rt.free(x);
      rt.free(y);
      if (carried !== null) rt.free(carried);
      carried = z; // lives into the next step: a CONSTANT of its trace
      if (step === 2) return formatTrace(rt.trace());
      rt.endStep();
    }
    throw new Error("unreachable");
  };
  const all = program(new Runtime({ backend: new ReferenceBackend(), record: true }), null);
  const late = program(new Runtime({ backend: new ReferenceBackend() }), 2);
  assert.match(all, /"CONSTANT","NAME":"s1\.c1\.0"/, "the carried value is declared");
  assert.match(all, /"INSTRUCTION":"CALL"/);
  assert.equal(late, all);
  assert.throws(
    () => new Runtime({ backend: new ReferenceBackend() }).trace(),
    /startRecording\(\)/,
  );
});
