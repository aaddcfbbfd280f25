/**
 * Checks of the CUDA build (native/build/libra_cuda.so) beyond the shared kernel
 * cases of packages/native/kernels_test.ts, which hold every kernel of the
 * table to the TypeScript reference on cpu and cuda alike.
 *
 * Without a GPU: the library still loads, its device-free functions answer
 * (ABI version, kernel table, Philox, clock) and every device call reports "no
 * CUDA device" as a typed error. With a GPU: bitwise determinism of the
 * reductions, GEMMs and scatter-adds, out-of-range indices found by device code
 * and named in the error, asynchronous copies through pinned memory, and
 * element counts above 2^31 (64-bit indexing), device memory freed without a
 * wait yet reused only after the work that reads it. Tests that need what is absent
 * are skipped with the reason.
 */

import assert from "node:assert/strict";
import { mulberry32 } from "@libra/util/rng";
import { KernelError } from "@libra/tensor/backend";
import { KERNEL_NAMES, type KernelName, kernelSizes, philox4x32 } from "@libra/tensor/kernels";
import { cudaBackend, LibraryLoadError, type NativeBackend, NoDeviceError } from "@libra/native";
import { ABI_VERSION, Status, SYMBOLS } from "@libra/native/symbols";

/** The library the cuda backend loads: `$LIBRA_NATIVE_DIR` or native/build. */
function libraryPath(): string {
  const dir = Deno.env.get("LIBRA_NATIVE_DIR");
  if (dir) return `${dir.replace(/\/$/, "")}/libra_cuda.so`;
  return decodeURIComponent(new URL("../build/libra_cuda.so", import.meta.url).pathname);
}

function tryOpen(): { lib: Deno.DynamicLibrary<typeof SYMBOLS> | null; why: string } {
  const path = libraryPath();
  try {
    return { lib: Deno.dlopen(path, SYMBOLS), why: "" };
  } catch (e) {
    return {
      lib: null,
      why: `${path} did not open (${(e as Error).message}); build it with deno task build:native`,
    };
  }
}

function cString(p: Deno.PointerValue): string {
  return p === null ? "" : Deno.UnsafePointerView.getCString(p);
}

function tryBackend(): { gpu: NativeBackend | null; why: string } {
  try {
    return { gpu: cudaBackend(), why: "" };
  } catch (e) {
    if (e instanceof NoDeviceError || e instanceof LibraryLoadError) {
      return { gpu: null, why: e.message };
    }
    throw e;
  }
}

const { lib, why: libWhy } = tryOpen();
const { gpu, why: gpuWhy } = lib ? tryBackend() : { gpu: null, why: libWhy };
if (!lib) console.warn(`cuda_test: libra_cuda.so not available (${libWhy})`);
if (lib && !gpu) console.warn(`cuda_test: no GPU, device checks skipped (${gpuWhy})`);

/** mulberry32: a small seeded PRNG, independent of the Philox under test. */
const rng = mulberry32;

Deno.test({
  name: "libra_cuda.so answers its device-free functions and lists the kernel table in order",
  ignore: !lib,
  fn() {
    const s = lib!.symbols;
    assert.equal(s.libra_abi_version(), ABI_VERSION);
    assert.equal(s.libra_kernel_count(), KERNEL_NAMES.length);
    const names = KERNEL_NAMES.map((_, i) => cString(s.libra_kernel_name(i)));
    assert.deepEqual(names, KERNEL_NAMES);
    assert.equal(s.libra_kernel_name(KERNEL_NAMES.length), null);
    const id = new Int32Array(1);
    assert.equal(s.libra_kernel_id(new TextEncoder().encode("nope\0"), id), Status.UNKNOWN_KERNEL);
    assert.match(cString(s.libra_last_error()), /unknown kernel "nope"/);
    const r = rng(7);
    const word = () => Math.floor(r() * 2 ** 32);
    const out = new Uint32Array(4);
    const cases: [number[], number[]][] = [[[0, 0, 0, 0], [0, 0]]];
    for (let i = 0; i < 20; i++) cases.push([[word(), word(), word(), word()], [word(), word()]]);
    for (const [ctr, key] of cases) {
      assert.equal(
        s.libra_philox4x32(Uint32Array.from(ctr), Uint32Array.from(key), out),
        Status.OK,
      );
      assert.deepEqual(
        [...out],
        philox4x32(ctr as [number, number, number, number], key as [number, number]),
      );
    }
    const t0 = new BigUint64Array(1), t1 = new BigUint64Array(1);
    s.libra_now_ns(t0);
    s.libra_now_ns(t1);
    assert.ok(t1[0]! >= t0[0]! && t0[0]! > 0n);
  },
});

Deno.test({
  name: "libra_cuda.so without a GPU: libra_init and every device call report no CUDA device",
  ignore: !lib || gpu !== null,
  fn() {
    const s = lib!.symbols;
    assert.equal(s.libra_init(), Status.NO_DEVICE);
    assert.match(cString(s.libra_last_error()), /^no CUDA device: \S/);
    assert.equal(s.libra_init(), Status.NO_DEVICE, "libra_init is idempotent");
    assert.equal(cString(s.libra_build_info()), "cuda (no device)");
    const p = new BigUint64Array(1);
    assert.equal(s.libra_alloc(16n, p), Status.NO_DEVICE);
    assert.match(cString(s.libra_last_error()), /^libra_alloc: no CUDA device: /);
    assert.equal(s.libra_host_alloc(16n, p), Status.NO_DEVICE);
    assert.equal(s.libra_sync(), Status.NO_DEVICE);
    assert.equal(s.libra_mem_info(p, new BigUint64Array(1)), Status.NO_DEVICE);
    assert.throws(() => cudaBackend(), NoDeviceError);
  },
});

Deno.test({
  name: "cuda build reports which GEMM it uses after libra_init",
  ignore: gpu === null,
  fn() {
    assert.match(gpu!.buildInfo, /^cuda \((cublas|tiled sgemm)\)$/);
    if (Deno.env.get("LIBRA_NO_CUBLAS") === "1") assert.equal(gpu!.buildInfo, "cuda (tiled sgemm)");
  },
});

function fillRandom(b: NativeBackend, bytes: number, r: () => number, ints = 0) {
  const buf = b.alloc(bytes);
  const n = bytes / 4;
  if (ints > 0) {
    const a = new Int32Array(n);
    for (let i = 0; i < n; i++) a[i] = Math.floor(r() * ints);
    b.write(buf, a);
  } else {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = 2 * r() - 1;
    b.write(buf, a);
  }
  return buf;
}

Deno.test({
  name: "cuda kernels are bitwise deterministic across repeated calls",
  ignore: gpu === null,
  fn() {
    const b = gpu!;
    const r = rng(5);
    const runTwice = (kernel: KernelName, params: number[], ints: number[] = []) => {
      const sizes = kernelSizes(kernel, params);
      const ins = sizes.inputs.map((bytes, i) => fillRandom(b, bytes, r, ints[i] ?? 0));
      const results = [0, 1].map(() => {
        const outs = sizes.outputs.map((bytes) => b.alloc(bytes));
        b.run(kernel, ins, outs, params);
        const bytes = outs.map((o) => b.read(o));
        outs.forEach((o) => b.free(o));
        return bytes;
      });
      ins.forEach((i) => b.free(i));
      results[0]!.forEach((bytes, i) => {
        assert.deepEqual(bytes, results[1]![i], `${kernel} output ${i} differs between two runs`);
      });
    };
    runTwice("matmul", [2, 200, 190, 300, 0, 1, 200 * 300, 190 * 300]);
    runTwice("matmul", [3, 65, 70, 1000, 1, 0, 0, 1000 * 70]);
    runTwice("conv2d", [4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1]);
    runTwice("conv2d_backward_input", [4, 16, 20, 20, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0]);
    runTwice("conv2d_backward_weight", [4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 0]);
    runTwice("conv2d_backward_bias", [8, 32, 400]);
    runTwice("sum_axis", [1, 3_000_000, 1]);
    runTwice("sum_axis", [7, 100_000, 3]);
    runTwice("sum_to", [3, 64, 300, 50, 1, 300, 1]);
    runTwice("mse", [3_000_000]);
    runTwice("cross_entropy", [4096, 1000], [0, 1000]);
    runTwice("softmax", [1000, 5000]);
    runTwice("embedding_backward", [50_000, 100, 16], [0, 100]);
    runTwice("index_select_backward", [2, 50, 300, 4000], [0, 50]);
    runTwice("max_pool2d_backward", [4, 8, 33, 33, 3, 3, 2, 2, 1, 1]);
    runTwice("avg_pool2d_backward", [4, 8, 33, 33, 3, 3, 2, 2, 1, 1]);
    runTwice("batch_norm_stats", [32, 16, 1000]);
    runTwice("batch_norm_backward", [32, 16, 1000, 1e-5]);
    runTwice("layer_norm_backward", [512, 256]);
    runTwice("rms_norm_backward", [512, 256]);
    runTwice("dropout", [3_000_000, 0.25, 11, 1234]);
  },
});

Deno.test({
  name: "cuda reports out-of-range indices found on the device, naming the index",
  ignore: gpu === null,
  fn() {
    const b = gpu!;
    const expect = (fn: () => void, kernel: string, re: RegExp) =>
      assert.throws(fn, (e: unknown) => {
        assert.ok(e instanceof KernelError, `expected a KernelError, got ${e}`);
        assert.equal(e.kernel, kernel);
        assert.match(e.message, re);
        return true;
      });
    using w = b.alloc(4 * 4 * 2), ids = b.alloc(3 * 4), y = b.alloc(3 * 2 * 4);
    using gy = b.alloc(3 * 2 * 4), gw = b.alloc(4 * 2 * 4);
    b.write(ids, new Int32Array([0, 3, 7]));
    const before = new Float32Array([1, 2, 3, 4, 5, 6]);
    b.write(y, before);
    expect(() => b.run("embedding", [w, ids], [y], [3, 4, 2]), "embedding", /ids\[2\] = 7/);
    assert.deepEqual(new Float32Array(b.read(y).buffer), before, "output untouched on failure");
    expect(
      () => b.run("embedding_backward", [gy, ids], [gw], [3, 4, 2]),
      "embedding_backward",
      /ids\[2\] = 7 is out of range \[0, vocab = 4\)/,
    );
    b.write(ids, new Int32Array([1, -1, -5]));
    using x = b.alloc(2 * 4 * 4), sel = b.alloc(2 * 3 * 4);
    expect(
      () => b.run("index_select", [x, ids], [sel], [2, 4, 1, 3]),
      "index_select",
      /idx\[1\] = -1 is out of range/,
    );
    using logits = b.alloc(3 * 5 * 4), loss = b.alloc(4), g = b.alloc(4);
    using gl = b.alloc(3 * 5 * 4);
    b.write(ids, new Int32Array([4, 0, 5]));
    expect(
      () => b.run("cross_entropy", [logits, ids], [loss], [3, 5]),
      "cross_entropy",
      /targets\[2\] = 5 is out of range \[0, classes = 5\)/,
    );
    expect(
      () => b.run("cross_entropy_backward", [logits, ids, g], [gl], [3, 5]),
      "cross_entropy_backward",
      /targets\[2\] = 5/,
    );
    // the failed calls left the device usable
    b.write(ids, new Int32Array([1, 0, 3]));
    b.run("embedding", [w, ids], [y], [3, 4, 2]);
    b.sync();
  },
});

Deno.test({
  name:
    "cuda device memory: 256-byte aligned, freed without waiting, and a block freed under an async copy is rewritten only after the copy",
  ignore: gpu === null,
  fn() {
    const s = lib!.symbols;
    const out = new BigUint64Array(1);
    const ok = (st: number, what: string) =>
      assert.equal(st, Status.OK, `${what}: ${cString(s.libra_last_error())}`);
    const ptr = (a: bigint) => Deno.UnsafePointer.create(a);
    const alloc = (bytes: number): bigint => {
      ok(s.libra_alloc(BigInt(bytes), out), `libra_alloc(${bytes})`);
      return out[0]!;
    };
    const seen = new Set<bigint>();
    for (const bytes of [0, 1, 3, 255, 257, 4097, 1_000_003]) {
      const p = alloc(bytes);
      assert.equal(p % 256n, 0n, `libra_alloc(${bytes}) gave ${p.toString(16)}, not 256-aligned`);
      seen.add(p);
    }
    assert.equal(seen.size, 7, "live allocations are distinct, the 0-byte one too");
    for (const p of seen) ok(s.libra_free(ptr(p)), "libra_free");

    // A 256 MiB block holding i at i is copied to pinned memory on a copy stream and freed at
    // once, without waiting. A block of the same size (from the pool, usually the same memory)
    // is then zeroed on a third stream, which orders only after the legacy default stream's
    // work, where the free went. The copy must still deliver the first block's contents.
    const n = 64 << 20, bytes = 4 * n;
    const pattern = new Float32Array(n);
    for (let i = 0; i < n; i++) pattern[i] = i;
    const d = alloc(bytes);
    ok(s.libra_copy_h2d(ptr(d), pattern, BigInt(bytes)), "libra_copy_h2d");
    ok(s.libra_host_alloc(BigInt(bytes), out), "libra_host_alloc");
    const host = out[0]!;
    ok(s.libra_stream_create(out), "libra_stream_create");
    const copyStream = ptr(out[0]!);
    ok(s.libra_stream_create(out), "libra_stream_create");
    const other = ptr(out[0]!);
    try {
      ok(s.libra_copy_d2h_async(ptr(host), ptr(d), BigInt(bytes), copyStream), "copy_d2h_async");
      ok(s.libra_free(ptr(d)), "libra_free under a pending copy");
      const e = alloc(bytes);
      ok(s.libra_set_stream(other), "libra_set_stream");
      ok(s.libra_memset(ptr(e), 0, BigInt(bytes)), "libra_memset");
      ok(s.libra_set_stream(null), "libra_set_stream(null)");
      ok(s.libra_sync(), "libra_sync");
      const got = new Float32Array(Deno.UnsafePointerView.getArrayBuffer(ptr(host)!, bytes));
      let bad = 0, first = -1;
      for (let i = 0; i < n; i++) {
        if (got[i] !== pattern[i]) {
          bad++;
          if (first < 0) first = i;
        }
      }
      assert.equal(bad, 0, `${bad} of ${n} floats of the copy differ (first at ${first})`);
      const back = new Float32Array(1024);
      ok(s.libra_copy_d2h(back, ptr(e), 4096n), "libra_copy_d2h");
      assert.deepEqual(back, new Float32Array(1024), "the new block was zeroed");
      console.log(`the new block ${e === d ? "reused" : "did not reuse"} the freed one`);
      ok(s.libra_free(ptr(e)), "libra_free");
    } finally {
      s.libra_set_stream(null);
      s.libra_stream_destroy(copyStream);
      s.libra_stream_destroy(other);
      s.libra_host_free(ptr(host));
    }
  },
});

Deno.test({
  name: "cuda asynchronous copies round-trip through pinned host memory",
  ignore: gpu === null,
  fn() {
    const b = gpu!;
    const n = 1 << 20;
    const src = new Float32Array(n).map((_, i) => i * 0.5 - 7);
    using d = b.alloc(n * 4), d2 = b.alloc(n * 4);
    b.write(d, src);
    b.run("mul_scalar", [d], [d2], [n, 2]);
    const host = b.allocHost(n * 4);
    try {
      b.copyAsync(d2, host).wait();
      const got = new Float32Array(host.data.buffer, host.data.byteOffset, n);
      assert.deepEqual(got.slice(0, 4), Float32Array.from([-14, -13, -12, -11]));
      assert.equal(got[n - 1], (n - 1) - 14);
      host.data.fill(0);
      b.copyAsync(host, d).wait();
      assert.deepEqual(new Float32Array(b.read(d, 16).buffer), new Float32Array(4));
    } finally {
      b.freeHost(host);
    }
  },
});

Deno.test({
  name: "cuda kernels index more than 2^31 elements (64-bit offsets)",
  ignore: gpu === null || Deno.env.get("LIBRA_SKIP_LARGE") === "1",
  fn() {
    const b = gpu!;
    const n = 2 ** 31 + 5;
    if (b.memory().totalBytes < 3 * 4 * n) return;
    using x = b.alloc(4 * n), y = b.alloc(4 * n), tail = b.alloc(16), s = b.alloc(4);
    b.run("fill", [], [x], [n, 1]);
    b.run("add_scalar", [x], [y], [n, 2]);
    b.run("slice", [y], [tail], [1, n, n - 4, 4]);
    assert.deepEqual(new Float32Array(b.read(tail).buffer), Float32Array.from([3, 3, 3, 3]));
    b.run("sum_axis", [y], [s], [1, n, 1]);
    assert.equal(new Float32Array(b.read(s).buffer)[0], Math.fround(3 * n));
  },
});
