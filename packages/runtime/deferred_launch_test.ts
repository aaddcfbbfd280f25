import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { Backend, DeviceBuffer } from "@libra/tensor/backend";
import type { KernelName } from "@libra/tensor/kernels";
import { LAUNCH_QUEUE } from "./_live_executor.ts";
import { Runtime } from "./runtime.ts";
import { trainSteppedMlp as train } from "./_mlp_testing.ts";

/** What reached the wrapped backend, in order: launches and frees, by buffer. */
type Event = { kind: "run"; op: string; bufs: DeviceBuffer[] } | {
  kind: "free";
  buf: DeviceBuffer;
};

/**
 * A reference backend that logs its launches and frees, claims `device`, and
 * fails the launch of `failOn` (when given).
 */
function logging(device: "cpu" | "cuda" = "cpu", failOn?: string) {
  const inner = new ReferenceBackend();
  const log: Event[] = [];
  const b: Backend = Object.create(inner);
  Object.defineProperty(b, "device", { value: device });
  for (const m of ["alloc", "read", "write", "memory", "sync", "resetPeak"] as const) {
    // deno-lint-ignore no-explicit-any
    (b as any)[m] = (inner[m] as (...a: unknown[]) => unknown).bind(inner);
  }
  b.free = (buf) => {
    log.push({ kind: "free", buf });
    inner.free(buf);
  };
  b.run = (op: KernelName, ins, outs, params) => {
    log.push({ kind: "run", op, bufs: [...ins, ...outs] });
    if (op === failOn) throw new Error(`${op}: injected failure`);
    inner.run(op, ins, outs, params);
  };
  return { backend: b, log, runs: () => log.filter((e) => e.kind === "run").length };
}

const free = (() => {
  const rt = new Runtime({ backend: new ReferenceBackend(), deferLaunches: false });
  train(rt);
  return rt.stats.peakBytes;
})();

for (const ratio of [Infinity, 0.6]) {
  Deno.test(`deferred launches give bitwise the results of immediate ones (ratio ${ratio})`, () => {
    const run = (defer: boolean) => {
      const { backend, log } = logging();
      const rt = new Runtime({
        backend,
        deferLaunches: defer,
        ...(ratio === Infinity ? {} : { budget: Math.floor(free * ratio) }),
      });
      const r = train(rt);
      return { r, log, stats: rt.stats };
    };
    const now = run(false), later = run(true);
    assert.deepEqual(later.r.losses, now.r.losses);
    assert.deepEqual(later.r.weights, now.r.weights);
    // The same kernels reached the backend, in the same order.
    const ops = (log: Event[]) => log.flatMap((e) => e.kind === "run" ? [e.op] : []);
    assert.deepEqual(ops(later.log), ops(now.log));
    assert.equal(later.stats.evictions, now.stats.evictions);
    if (ratio !== Infinity) assert.ok(now.stats.evictions > 0, "the budget evicts");
  });
}

Deno.test("a deferred launch waits for a read, and a buffer a queued launch names is freed after it", () => {
  const { backend, log, runs } = logging();
  const rt = new Runtime({ backend });
  const x = rt.alloc(16), y = rt.alloc(16);
  rt.write(x, new Float32Array([1, -2, 3, -4]));
  const before = runs();
  rt.run("relu", [x], [y], [4]);
  assert.equal(runs(), before, "queued, not launched");
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], [1, 0, 3, 0]);
  assert.equal(runs(), before + 1, "launched by the read");

  // Every backend free comes after the launches queued before it that name the buffer.
  const r = train(new Runtime({ backend, budget: Math.floor(free * 0.6) }));
  assert.ok(r.losses.every(Number.isFinite));
  const lastUse = new Map<DeviceBuffer, number>();
  log.forEach((e, i) => {
    if (e.kind === "run") { for (const b of e.bufs) lastUse.set(b, i); }
    else assert.ok((lastUse.get(e.buf) ?? -1) < i, "freed after its last launch");
  });
  assert.ok(log.some((e) => e.kind === "free"), "the run freed buffers");
});

Deno.test("the queue holds at most LAUNCH_QUEUE launches, and a cuda backend's launch at once", () => {
  const cpu = logging();
  const rt = new Runtime({ backend: cpu.backend });
  const x = rt.alloc(16);
  rt.write(x, new Float32Array([1, 2, 3, 4]));
  const outs = Array.from({ length: LAUNCH_QUEUE + 1 }, () => rt.alloc(16));
  const before = cpu.runs();
  for (const o of outs) rt.run("relu", [x], [o], [4]);
  assert.equal(cpu.runs() - before, LAUNCH_QUEUE, "the full queue ran before the last launch");

  const gpu = logging("cuda");
  const rg = new Runtime({ backend: gpu.backend });
  const a = rg.alloc(16), b = rg.alloc(16);
  rg.write(a, new Float32Array([1, 2, 3, 4]));
  const n = gpu.runs();
  rg.run("relu", [a], [b], [4]);
  assert.equal(gpu.runs(), n + 1);
});

Deno.test("a failed deferred launch is reported at the next flush, and nothing launches after it", () => {
  const { backend } = logging("cpu", "neg");
  const rt = new Runtime({ backend });
  const x = rt.alloc(16), y = rt.alloc(16), z = rt.alloc(16);
  rt.write(x, new Float32Array([1, 2, 3, 4]));
  rt.run("neg", [x], [y], [4]);
  rt.run("relu", [y], [z], [4]);
  assert.throws(
    () => rt.read(z),
    /deferred launch of neg \(1 of 2 queued\) failed.*launched after it.*injected failure/,
  );
  const w = rt.alloc(16);
  assert.throws(() => rt.run("relu", [x], [w], [4]), /launches nothing more/);
  // Nor reads what was never computed.
  assert.throws(() => rt.read(x), /launches nothing more/);
});
