/**
 * NativeBackend beyond the kernels: the shared Backend conformance suite, buffer
 * lifetimes (dispose, FinalizationRegistry under --expose-gc), host buffers,
 * the loader's errors, and OpenBLAS vs the portable sgemm.
 */

import assert from "node:assert/strict";
import { KernelError } from "@libra/tensor/backend";
import { backendConformance } from "../tensor/_conformance.ts";
import { loadLibrary, openLibrary } from "./_loader.ts";
import {
  cpuBackend,
  cudaBackend,
  LibraryLoadError,
  type NativeBackend,
  NativeBuffer,
  NoDeviceError,
} from "./mod.ts";

backendConformance("cpu", () => cpuBackend());
backendConformance("cpu(portable)", () => cpuBackend({ variant: "portable" }));

let cudaWhy = "";
try {
  cudaBackend();
} catch (e) {
  if (!(e instanceof NoDeviceError || e instanceof LibraryLoadError)) throw e;
  cudaWhy = e.message;
}
if (cudaWhy) {
  console.warn(`native_backend_test: cuda conformance skipped (${cudaWhy})`);
  Deno.test({
    name: `cuda: Backend conformance (skipped: ${cudaWhy})`,
    ignore: true,
    fn() {},
  });
} else {
  backendConformance("cuda", () => cudaBackend());
}

Deno.test("cudaBackend() throws a typed error instead of crashing without a GPU", () => {
  if (!cudaWhy) return; // a GPU is present: nothing to check here
  assert.throws(() => cudaBackend(), (e: unknown) => {
    assert.ok(e instanceof NoDeviceError || e instanceof LibraryLoadError, String(e));
    if (e instanceof NoDeviceError) assert.match(e.message, /no CUDA device/);
    return true;
  });
});

Deno.test("cpuBackend() reports its build, device and threads", () => {
  const b = cpuBackend();
  assert.match(b.buildInfo, /^cpu \((openblas|portable), openmp\)$/);
  assert.match(b.deviceName, /^cpu: /);
  assert.ok(b.threads() >= 1);
  assert.deepEqual(b.missingKernels(), []);
  const p = cpuBackend({ variant: "portable" });
  assert.equal(p.buildInfo, "cpu (portable, openmp)");
  assert.equal(p.name, "cpu(portable)");
});

Deno.test("setThreads changes the worker count and <= 0 restores the default", () => {
  const b = cpuBackend();
  const def = b.threads();
  b.setThreads(1);
  assert.equal(b.threads(), 1);
  b.setThreads(0);
  assert.equal(b.threads(), def);
});

Deno.test("NativeBuffer: using/dispose frees once; freed and foreign buffers throw", () => {
  const b = cpuBackend();
  const other = cpuBackend();
  const before = b.memory().usedBytes;
  let kept: NativeBuffer;
  {
    using buf = b.alloc(64);
    kept = buf;
    assert.equal(b.memory().usedBytes, before + 64);
  }
  assert.equal(kept.freed, true);
  assert.equal(b.memory().usedBytes, before);
  kept[Symbol.dispose](); // idempotent
  assert.throws(() => b.read(kept), /already freed/);
  assert.throws(() => b.free(kept), /already freed/);
  using foreign = other.alloc(8);
  assert.throws(() => b.read(foreign), /not allocated by this cpu backend/);
  assert.throws(
    () => new NativeBuffer(Symbol("x"), b, 1, 8, 0n, Deno.UnsafePointer.create(8n)!),
    /use backend.alloc/,
  );
});

Deno.test("capacityBytes turns over-allocation into an OutOfMemoryError", () => {
  const b = cpuBackend({ capacityBytes: 100 });
  using a = b.alloc(60);
  assert.throws(() => b.alloc(41), (e: unknown) => {
    assert.equal((e as Error).name, "OutOfMemoryError");
    assert.match((e as Error).message, /41 bytes requested, 60 of 100 in use/);
    return true;
  });
  assert.equal(b.memory().peakBytes, 60);
  assert.equal(a.bytes, 60);
});

/** Lets the FinalizationRegistry callbacks run: collect, then yield to the event loop. */
async function collect(b: NativeBackend, until: () => boolean, rounds = 50): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < rounds && !until(); i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  void b;
}

Deno.test({
  name: "dropped buffers are freed by the FinalizationRegistry (--v8-flags=--expose-gc)",
  ignore: typeof (globalThis as { gc?: unknown }).gc !== "function",
  async fn() {
    const b = cpuBackend();
    const base = b.memory().usedBytes;
    (() => {
      for (let i = 0; i < 100; i++) b.alloc(1 << 16); // dropped without free
    })();
    assert.equal(b.memory().usedBytes, base + 100 * (1 << 16));
    assert.equal(b.stats().liveBuffers, 100);
    await collect(b, () => b.stats().finalizedBuffers === 100);
    assert.equal(b.stats().finalizedBuffers, 100);
    assert.equal(b.stats().liveBuffers, 0);
    assert.equal(b.memory().usedBytes, base);
    // An explicitly freed buffer is unregistered: collecting it later frees nothing twice.
    (() => {
      const x = b.alloc(32);
      b.free(x);
    })();
    await collect(b, () => false, 5);
    assert.equal(b.stats().finalizedBuffers, 100);
    assert.equal(b.memory().usedBytes, base);
  },
});

Deno.test({
  name: "dropped host buffers are released once their bytes are unreachable",
  ignore: typeof (globalThis as { gc?: unknown }).gc !== "function",
  async fn() {
    const b = cpuBackend();
    (() => {
      for (let i = 0; i < 20; i++) b.allocHost(4096);
    })();
    assert.equal(b.stats().hostBytes, 20 * 4096);
    await collect(b, () => b.stats().hostBytes === 0);
    assert.equal(b.stats().hostBytes, 0);
  },
});

Deno.test("freeHost detaches the host view so freed memory cannot be touched", () => {
  const b = cpuBackend();
  const h = b.allocHost(16);
  const view = h.data;
  view[0] = 1;
  b.freeHost(h);
  assert.equal(view.byteLength, 0, "old view detached");
  assert.equal(h.data.byteLength, 0);
  assert.throws(() => b.freeHost(h), /already freed/);
  using d = b.alloc(16);
  assert.throws(() => b.copy(d, h), /freed/);
});

Deno.test("copyAsync on cpu completes before returning; write/read with offsets", () => {
  const b = cpuBackend();
  using d = b.alloc(16);
  b.write(d, new Float32Array([1, 2, 3, 4]));
  b.write(d, new Int32Array([-5]), 8);
  const h = b.allocHost(16);
  const t = b.copyAsync(d, h);
  assert.equal(t.done, true);
  const f = new Float32Array(h.data.buffer, h.data.byteOffset, 4);
  assert.deepEqual([f[0], f[1], f[3]], [1, 2, 4]);
  assert.equal(new Int32Array(h.data.buffer, h.data.byteOffset, 4)[2], -5);
  b.freeHost(h);
  assert.throws(() => b.read(d, 17), /cannot read 17 bytes/);
});

Deno.test("the loader names `deno task build:native` when the library is missing", () => {
  const dir = Deno.makeTempDirSync({ prefix: "libra_empty_" });
  const old = Deno.env.get("LIBRA_NATIVE_DIR");
  Deno.env.set("LIBRA_NATIVE_DIR", dir);
  try {
    assert.throws(() => openLibrary("cpu"), (e: unknown) => {
      assert.ok(e instanceof LibraryLoadError, String(e));
      assert.match(e.message, /deno task build:native/);
      assert.match(e.message, new RegExp(`LIBRA_NATIVE_DIR=${dir}`));
      assert.ok(e.cause instanceof Error, "cause attached");
      assert.deepEqual(e.tried, [`${dir}/libra_cpu.so`]);
      return true;
    });
  } finally {
    if (old === undefined) Deno.env.delete("LIBRA_NATIVE_DIR");
    else Deno.env.set("LIBRA_NATIVE_DIR", old);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("opening the cpu library leaves OMP_WAIT_POLICY as it was", () => {
  const before = Deno.env.get("OMP_WAIT_POLICY");
  openLibrary("cpu");
  assert.equal(Deno.env.get("OMP_WAIT_POLICY"), before);
});

Deno.test("OpenBLAS and portable sgemm agree within f32 tolerance", () => {
  const blas = cpuBackend();
  const portable = cpuBackend({ variant: "portable" });
  if (!blas.buildInfo.includes("openblas")) {
    console.warn(`skipped: libra_cpu.so was built without OpenBLAS (${blas.buildInfo})`);
    return;
  }
  const seedRand = (() => {
    let s = 12345;
    return () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
  })();
  const shapes: [number, number, number, number, number][] = [
    [1, 1, 1, 0, 0],
    [67, 45, 129, 0, 0],
    [128, 256, 300, 1, 0],
    [200, 77, 513, 0, 1],
    [33, 600, 70, 1, 1],
  ];
  for (const [m, n, k, ta, tb] of shapes) {
    const a = Float32Array.from({ length: m * k }, seedRand);
    const bm = Float32Array.from({ length: k * n }, seedRand);
    const results = [blas, portable].map((be) => {
      using A = be.alloc(a.byteLength), B = be.alloc(bm.byteLength), C = be.alloc(m * n * 4);
      be.write(A, a);
      be.write(B, bm);
      be.run("matmul", [A, B], [C], [1, m, n, k, ta, tb, 0, 0]);
      return new Float32Array(be.read(C).buffer);
    });
    let worst = 0;
    for (let i = 0; i < m * n; i++) {
      worst = Math.max(worst, Math.abs(results[0]![i]! - results[1]![i]!));
    }
    // |entries| <= 1, so each dot product is bounded by k; f32 rounding ~ k * 2^-24 * sqrt(k)
    assert.ok(worst <= 1e-5 * Math.sqrt(k) * 4, `${m}x${n}x${k} t${ta}${tb}: max diff ${worst}`);
  }
});

Deno.test("startProfile/stopProfile time each kernel, alloc and free by name", () => {
  const b = cpuBackend();
  const x = b.alloc(4096), y = b.alloc(4096);
  b.run("relu", [x], [y], [1024]); // not profiled
  b.startProfile();
  for (let i = 0; i < 3; i++) b.run("relu", [x], [y], [1024]);
  b.run("neg", [x], [y], [1024]);
  const z = b.alloc(64);
  b.free(z);
  const prof = b.stopProfile();
  const by = new Map(prof.map((e) => [e.name, e]));
  assert.equal(by.get("relu")?.calls, 3);
  assert.equal(by.get("neg")?.calls, 1);
  assert.equal(by.get("(alloc)")?.calls, 1);
  assert.equal(by.get("(free)")?.calls, 1);
  assert.equal(prof.length, 4);
  for (const e of prof) assert.ok(e.ms >= 0 && Number.isFinite(e.ms), `${e.name}: ${e.ms} ms`);
  for (let i = 1; i < prof.length; i++) assert.ok(prof[i - 1]!.ms >= prof[i]!.ms, "largest first");
  b.run("relu", [x], [y], [1024]);
  assert.deepEqual(b.stopProfile(), [], "profiling stopped");
  b.free(x);
  b.free(y);
});

Deno.test("the cpu library reuses a freed block for the next allocation of its size", () => {
  const { lib } = loadLibrary("cpu");
  const s = lib.symbols;
  const out = new BigUint64Array(1);
  const alloc = (bytes: number) => {
    assert.equal(s.libra_alloc(BigInt(bytes), out), 0);
    return out[0]!;
  };
  const p = alloc(1 << 20);
  assert.equal(p % 256n, 0n, "256-byte aligned");
  assert.equal(s.libra_free(Deno.UnsafePointer.create(p)), 0);
  const q = alloc(1 << 20);
  assert.equal(q, p, "same block back");
  const r = alloc(1 << 20);
  assert.notEqual(r, q, "a live block is never handed out twice");
  const t = alloc(1000);
  assert.equal(t % 256n, 0n);
  for (const v of [q, r, t]) assert.equal(s.libra_free(Deno.UnsafePointer.create(v)), 0);
});

Deno.test("runValidated launches what run does, checks buffers, and takes run's checks for mutating kernels", () => {
  const b = cpuBackend({ threads: 1 });
  const f32 = (buf: NativeBuffer) => Array.from(new Float32Array(b.read(buf).slice().buffer));
  const n = 64;
  const x = b.alloc(4 * n), w = b.alloc(4 * n * n), y1 = b.alloc(4 * n), y2 = b.alloc(4 * n);
  b.write(x, new Float32Array(n).map((_, i) => Math.sin(i) * 3));
  b.write(w, new Float32Array(n * n).map((_, i) => Math.cos(i)));
  // relu and a matmul (1 x n by n x n), each by run and by runValidated: bit for bit equal.
  b.run("relu", [x], [y1], [n]);
  b.runValidated("relu", [x], [y2], [n]);
  assert.deepEqual(f32(y2 as NativeBuffer), f32(y1 as NativeBuffer));
  assert.ok(f32(y1 as NativeBuffer).some((v) => v > 0) && f32(y1 as NativeBuffer).includes(0));
  const mm = [1, 1, n, n, 0, 0, 0, 0]; // batch, m, n, k, no transposes, no batch strides
  b.run("matmul", [x, w], [y1], mm);
  b.runValidated("matmul", [x, w], [y2], mm);
  assert.deepEqual(f32(y2 as NativeBuffer), f32(y1 as NativeBuffer));
  // Buffers are still checked: another backend's, or a freed one, never reach the library.
  const other = cpuBackend({ threads: 1 }).alloc(4 * n);
  assert.throws(() => b.runValidated("relu", [other], [y1], [n]), /not allocated by this/);
  const gone = b.alloc(4 * n);
  b.free(gone);
  assert.throws(() => b.runValidated("relu", [x], [gone], [n]), /already freed/);
  // A kernel that mutates its inputs is validated as by run: a wrong size is refused.
  const g = b.alloc(4 * n), m = b.alloc(4 * n);
  assert.throws(
    () => b.runValidated("sgd_update", [x, g, m], [], [2 * n, 0.1, 0.9, 0, 0, 0, 0]),
    KernelError,
  );
  // So is one whose in-place inputs follow its params: a parameter given twice is named.
  const multi = [2, 0.1, 0.9, 0, 0, 0, 0, n, n];
  assert.throws(
    () => b.runValidated("sgd_update_multi", [x, g, m, w, y1, x], [], multi),
    /sgd_update_multi: mutated input 0 \(buffer \d+\) is also input 5/,
  );
  assert.throws(
    () => b.runValidated("sgd_update_multi", [x, g, m, x, y1, y2], [], multi),
    /mutated input 0 \(buffer \d+\) is also input 3/,
  );
  for (const buf of [x, w, y1, y2, g, m]) b.free(buf);
});
