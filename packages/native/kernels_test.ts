/**
 * Every kernel of the table on the native backends against the plain-TypeScript
 * ReferenceBackend (the oracle), on seeded random inputs, with the tolerances
 * stated in `_kernel_cases.ts`: broadcasting, size-1, empty and large shapes.
 * Then malformed calls, the native registry's own validation, Philox
 * known-answer vectors and bitwise determinism.
 *
 * The cuda backend runs the same cases when a GPU is present and is skipped,
 * with the reason, otherwise.
 */

import assert from "node:assert/strict";
import { mulberry32 } from "@libra/util/rng";
import { type Backend, type DeviceBuffer, KernelError } from "@libra/tensor/backend";
import {
  KERNEL_NAMES,
  kernelMutates,
  type KernelName,
  kernelSizes,
  kernelSpec,
  philox4x32,
} from "@libra/tensor/kernels";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { EXACT, type Gen, type KernelCase, kernelCases, type Tol } from "./_kernel_cases.ts";
import {
  cpuBackend,
  cudaBackend,
  InvalidArgumentError,
  LibraryLoadError,
  type NativeBackend,
  NoDeviceError,
} from "./mod.ts";
import { loadLibrary } from "./_loader.ts";
import { Status } from "./symbols.ts";

// ---------------------------------------------------------------- inputs

/** mulberry32: a small seeded PRNG, independent of the Philox under test. */
const rng = mulberry32;

function fill(gen: Gen, n: number, r: () => number): Uint8Array {
  if (typeof gen === "object") {
    const [lo, hi] = "i32" in gen ? [0, gen.i32] : gen.i32Range;
    const a = new Int32Array(n);
    for (let i = 0; i < n; i++) a[i] = lo + Math.floor(r() * (hi - lo));
    return new Uint8Array(a.buffer);
  }
  const a = new Float32Array(n);
  const normal = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  for (let i = 0; i < n; i++) {
    a[i] = gen === "normal"
      ? normal()
      : gen === "big"
      ? 100 * normal()
      : gen === "pos"
      ? 0.2 + 2.8 * r()
      : gen === "unit"
      ? 0.001 + 0.998 * r()
      : gen === "ints"
      ? Math.floor(r() * 5) - 2
      : r() < 0.5
      ? 0
      : 1;
  }
  return new Uint8Array(a.buffer);
}

const INT_OUTPUT = new Set<string>(["cast_f32_i32", "argmax_axis", "fill_i32"]);

function compare(
  what: string,
  got: Uint8Array,
  want: Uint8Array,
  isInt: boolean,
  tol: Tol,
): void {
  assert.equal(got.byteLength, want.byteLength, `${what}: byte length`);
  const n = Math.floor(got.byteLength / 4);
  const g = isInt ? new Int32Array(got.slice().buffer) : new Float32Array(got.slice().buffer);
  const w = isInt ? new Int32Array(want.slice().buffer) : new Float32Array(want.slice().buffer);
  let bad = 0, first = -1, worst = 0;
  for (let i = 0; i < n; i++) {
    const a = g[i]!, b = w[i]!;
    if (a === b || (Number.isNaN(a) && Number.isNaN(b))) continue;
    const err = Math.abs(a - b);
    if (err <= tol.atol + tol.rtol * Math.abs(b)) continue;
    if (first < 0) first = i;
    worst = Math.max(worst, err);
    bad++;
  }
  if (bad > 0) {
    assert.fail(
      `${what}: ${bad} of ${n} elements differ beyond rtol ${tol.rtol}, atol ${tol.atol}; ` +
        `first at ${first}: got ${g[first]}, want ${w[first]}; worst |diff| ${worst}`,
    );
  }
}

/** Runs one case on `native` and the reference and compares outputs and mutated inputs. */
function checkCase(native: Backend, ref: Backend, c: KernelCase, seed: number): void {
  const sizes = kernelSizes(c.kernel, c.params);
  const spec = kernelSpec(c.kernel);
  const r = rng(seed);
  const what = `${native.name} ${c.kernel} (${c.label}; params ${c.params.join(", ")})`;
  const data = sizes.inputs.map((bytes, i) => fill(c.gens?.[i] ?? "normal", bytes / 4, r));
  const owned: [Backend, DeviceBuffer][] = [];
  const alloc = (b: Backend, bytes: number) => {
    const buf = b.alloc(bytes);
    owned.push([b, buf]);
    return buf;
  };
  try {
    const nIn = data.map((d) => alloc(native, d.byteLength));
    const rIn = data.map((d) => alloc(ref, d.byteLength));
    data.forEach((d, i) => {
      native.write(nIn[i]!, d);
      ref.write(rIn[i]!, d);
    });
    const nOut = sizes.outputs.map((b) => alloc(native, b));
    const rOut = sizes.outputs.map((b) => alloc(ref, b));
    // NaN bytes in native outputs: an element the kernel forgets to write cannot match.
    nOut.forEach((b) => native.write(b, new Uint8Array(b.bytes).fill(0xff)));
    native.run(c.kernel, nIn, nOut, c.params);
    ref.run(c.kernel, rIn, rOut, c.params);
    const tol = c.tol ?? EXACT;
    nOut.forEach((b, i) => {
      compare(
        `${what} output ${spec.outputs[i]}`,
        native.read(b),
        ref.read(rOut[i]!),
        INT_OUTPUT.has(c.kernel),
        tol,
      );
    });
    for (const m of kernelMutates(c.kernel, c.params)) {
      compare(
        `${what} mutated input ${m} (${spec.inputs[m] ?? spec.inputs[0]})`,
        native.read(nIn[m]!),
        ref.read(rIn[m]!),
        false,
        tol,
      );
    }
  } finally {
    for (const [b, buf] of owned) b.free(buf);
  }
}

// ---------------------------------------------------------------- backends

interface Candidate {
  name: string;
  make: () => NativeBackend;
  /** Kernels to check (default: all). */
  only?: readonly KernelName[];
}

function available(make: () => NativeBackend): { backend: NativeBackend | null; why: string } {
  try {
    return { backend: make(), why: "" };
  } catch (e) {
    if (e instanceof NoDeviceError || e instanceof LibraryLoadError) {
      return { backend: null, why: e.message };
    }
    throw e;
  }
}

const CANDIDATES: Candidate[] = [
  { name: "cpu", make: () => cpuBackend() },
  { name: "cuda", make: () => cudaBackend() },
  // The portable build differs from the default one only in its sgemm.
  {
    name: "cpu(portable)",
    make: () => cpuBackend({ variant: "portable" }),
    only: ["matmul", "conv2d", "conv2d_backward_input", "conv2d_backward_weight"],
  },
];

const CASES = kernelCases();

Deno.test("kernel cases cover every kernel of the table", () => {
  const missing = KERNEL_NAMES.filter((k) => CASES.get(k)!.length === 0);
  assert.deepEqual(missing, [], `kernels without a test case: ${missing.join(", ")}`);
});

for (const cand of CANDIDATES) {
  const { backend, why } = available(cand.make);
  if (!backend) {
    const reason = `${cand.name} backend unavailable: ${why}`;
    console.warn(`kernels_test: skipping the ${cand.name} kernel checks (${reason})`);
    Deno.test({
      name: `${cand.name}: every kernel matches the reference (skipped: ${reason})`,
      ignore: true,
      fn() {},
    });
    continue;
  }
  const ref = new ReferenceBackend();
  let seed = 1;
  for (const [kernel, cases] of CASES) {
    if (cand.only && !cand.only.includes(kernel)) continue;
    const caseSeeds = cases.map(() => seed++);
    Deno.test(`${cand.name}: ${kernel} matches the reference backend`, () => {
      if (backend.missingKernels().includes(kernel)) {
        assert.fail(`${backend.libraryPath} does not implement ${kernel}`);
      }
      cases.forEach((c, i) => checkCase(backend, ref, c, caseSeeds[i]!));
    });
  }
}

// ---------------------------------------------------------------- bad inputs

function expectKernelError(fn: () => void, kernel: string, re: RegExp, native = false): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof KernelError, `expected a KernelError, got ${e}`);
    assert.equal(e.kernel, kernel);
    assert.match(e.message, re);
    if (native) {
      assert.ok(e.cause instanceof InvalidArgumentError, `cause: ${e.cause}`);
      assert.equal(e.cause.status, Status.INVALID_ARGUMENT);
    }
    return true;
  });
}

Deno.test("cpu run() rejects wrong sizes and params before calling native code", () => {
  const b = cpuBackend();
  using x = b.alloc(16), y = b.alloc(16), small = b.alloc(8);
  expectKernelError(() => b.run("exp", [small], [y], [4]), "exp", /input 0 has 8 bytes, needs 16/);
  expectKernelError(() => b.run("exp", [x], [small], [4]), "exp", /output 0 has 8 bytes/);
  expectKernelError(() => b.run("exp", [x], [y], [4, 2]), "exp", /expected 1 params/);
  expectKernelError(() => b.run("exp", [x], [y], [-1]), "exp", /non-negative integer/);
  expectKernelError(() => b.run("add", [x, x], [y], [9]), "add", /ndim/);
  expectKernelError(
    () => b.run("permute", [x], [y], [2, 2, 2, 0, 0]),
    "permute",
    /not a permutation/,
  );
  expectKernelError(() => b.run("exp", [x], [x], [4]), "exp", /also an input/);
  expectKernelError(
    () => b.run("concat", [x], [y], [2, 1, 1, 2, 2]),
    "concat",
    /expected 2 input buffers/,
  );
  expectKernelError(
    () => b.run("conv2d", [x, x], [y], [1, 1, 2, 2, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0]),
    "conv2d",
    /smaller than the dilated window/,
  );
  assert.equal(b.stats().kernelCalls, 0, "no call reached the library");
});

Deno.test("cpu run() reports out-of-range indices from native code, naming the index", () => {
  const b = cpuBackend();
  using w = b.alloc(4 * 4 * 2), ids = b.alloc(3 * 4), y = b.alloc(3 * 2 * 4);
  using gy = b.alloc(3 * 2 * 4), gw = b.alloc(4 * 2 * 4);
  b.write(ids, new Int32Array([0, 3, 7]));
  const before = new Float32Array([1, 2, 3, 4, 5, 6]);
  b.write(y, before);
  expectKernelError(
    () => b.run("embedding", [w, ids], [y], [3, 4, 2]),
    "embedding",
    /ids\[2\] = 7/,
    true,
  );
  assert.deepEqual(new Float32Array(b.read(y).buffer), before, "output untouched on failure");
  expectKernelError(
    () => b.run("embedding_backward", [gy, ids], [gw], [3, 4, 2]),
    "embedding_backward",
    /ids\[2\] = 7 is out of range \[0, vocab = 4\)/,
    true,
  );
  b.write(ids, new Int32Array([1, -1, 0]));
  using x = b.alloc(2 * 4 * 4), sel = b.alloc(2 * 3 * 4);
  expectKernelError(
    () => b.run("index_select", [x, ids], [sel], [2, 4, 1, 3]),
    "index_select",
    /idx\[1\] = -1/,
    true,
  );
  expectKernelError(
    () => b.run("index_select_backward", [sel, ids], [x], [2, 4, 1, 3]),
    "index_select_backward",
    /idx\[1\] = -1/,
    true,
  );
  using logits = b.alloc(3 * 5 * 4), loss = b.alloc(4), g = b.alloc(4), gl = b.alloc(3 * 5 * 4);
  b.write(ids, new Int32Array([4, 0, 5]));
  expectKernelError(
    () => b.run("cross_entropy", [logits, ids], [loss], [3, 5]),
    "cross_entropy",
    /targets\[2\] = 5 is out of range \[0, classes = 5\)/,
    true,
  );
  expectKernelError(
    () => b.run("cross_entropy_backward", [logits, ids, g], [gl], [3, 5]),
    "cross_entropy_backward",
    /targets\[2\] = 5/,
    true,
  );
  using d = b.alloc(16), dy = b.alloc(16);
  expectKernelError(
    () => b.run("dropout", [d], [dy], [4, 1.5, 0, 0]),
    "dropout",
    /p .* must be in \[0, 1\], got 1.5/,
  );
  expectKernelError(
    () => b.run("max_axis", [d], [dy], [2, 0, 2]),
    "max_axis",
    /dim/,
  );
});

Deno.test("libra_run validates counts, ids and params itself (direct FFI calls)", () => {
  const { lib } = loadLibrary("cpu");
  const s = lib.symbols;
  const err = () => Deno.UnsafePointerView.getCString(s.libra_last_error()!);
  assert.equal(s.libra_kernel_count(), KERNEL_NAMES.length);
  const names = KERNEL_NAMES.map((_, i) =>
    Deno.UnsafePointerView.getCString(s.libra_kernel_name(i)!)
  );
  assert.deepEqual(names, KERNEL_NAMES, "native registry lists the table in order");
  assert.equal(s.libra_kernel_name(KERNEL_NAMES.length), null);
  const id = new Int32Array(1);
  assert.equal(s.libra_kernel_id(new TextEncoder().encode("nope\0"), id), Status.UNKNOWN_KERNEL);
  assert.match(err(), /unknown kernel "nope"/);
  assert.equal(s.libra_kernel_id(new TextEncoder().encode("relu\0"), id), Status.OK);
  const relu = id[0]!;
  const buf = new Float32Array(4);
  const ptrs = new BigUint64Array([
    BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)!)),
  ]);
  const outBuf = new Float32Array(4);
  const outs = new BigUint64Array([
    BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(outBuf)!)),
  ]);
  const run = (k: number, nIn: number, nOut: number, params: number[]) =>
    s.libra_run(
      k,
      ptrs,
      nIn,
      outs,
      nOut,
      new Float64Array(params.length ? params : [0]),
      params.length,
    );
  assert.equal(run(9999, 1, 1, [4]), Status.UNKNOWN_KERNEL);
  assert.match(err(), /kernel id 9999 out of range \[0, \d+\)/);
  assert.equal(run(relu, 1, 1, []), Status.INVALID_ARGUMENT);
  assert.match(err(), /libra_run\(relu\): expected 1 params, got 0/);
  assert.equal(run(relu, 2, 1, [4]), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 1 input buffers, got 2/);
  assert.equal(run(relu, 1, 1, [2.5]), Status.INVALID_ARGUMENT);
  assert.match(err(), /n \(param 0\) must be an integer >= 0, got 2.5/);
  assert.equal(run(relu, 1, 1, [NaN]), Status.INVALID_ARGUMENT);
  assert.match(err(), /param 0 is NaN/);
  buf.set([-1, 2, -3, 4]);
  assert.equal(run(relu, 1, 1, [4]), Status.OK);
  assert.deepEqual([...outBuf], [0, 2, 0, 4]);
  assert.equal(s.libra_kernel_id(new TextEncoder().encode("conv2d\0"), id), Status.OK);
  assert.equal(
    run(id[0]!, 1, 1, [1, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1]),
    Status.INVALID_ARGUMENT,
  );
  assert.match(err(), /expected 3 input buffers \(x, w, b\) for hasBias = 1, got 1/);
});

Deno.test("libra_run checks the multi-tensor updates' counts itself (direct FFI calls)", () => {
  const { lib } = loadLibrary("cpu");
  const s = lib.symbols;
  const err = () => Deno.UnsafePointerView.getCString(s.libra_last_error()!);
  const idOf = (k: string) => {
    const id = new Int32Array(1);
    assert.equal(s.libra_kernel_id(new TextEncoder().encode(k + "\0"), id), Status.OK);
    return id[0]!;
  };
  // Two tensors of 3 and 2 elements: param, grad, momentumBuf each.
  const bufs = [0, 1, 2, 3, 4, 5].map((i) => Float32Array.of(i + 1, i + 2, i + 3));
  const ptrs = new BigUint64Array(
    bufs.map((b) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)!))),
  );
  const run = (k: number, nIn: number, params: number[]) =>
    s.libra_run(k, ptrs, nIn, new BigUint64Array(1), 0, new Float64Array(params), params.length);
  const sgd = idOf("sgd_update_multi"), adam = idOf("adamw_update_multi");
  assert.equal(run(sgd, 6, [2, 0.1, 0.9, 0, 0, 0]), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected at least 7 params \(count, lr, momentum, .*n\[count\]\), got 6/);
  assert.equal(run(sgd, 6, [2, 0.1, 0.9, 0, 0, 0, 1, 3]), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 9 params \(count, 6 update params, n\[count = 2\]\), got 8/);
  // Without momentum a tensor has two buffers: six are three tensors' worth.
  assert.equal(run(sgd, 6, [2, 0.1, 0, 0, 0, 0, 1, 3, 2]), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 4 input buffers \(2 tensors of 2\), got 6/);
  assert.equal(run(sgd, 6, [2, 0.1, 0.9, 0, 0, 0, 1, 3, -1]), Status.INVALID_ARGUMENT);
  assert.match(err(), /n\[t\] \(param 8\) must be an integer >= 0, got -1/);
  assert.equal(run(adam, 6, [2, 1e-3, 0.9, 0.999, 1e-8, 0, 1, 3, 2]), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 8 input buffers \(2 tensors of 4\), got 6/);
  assert.equal(run(adam, 4, [1, 1e-3, 0.9, 0.999, 1e-8, 0, 0, 3]), Status.INVALID_ARGUMENT);
  assert.match(err(), /step \(param 6\) must be an integer >= 1, got 0/);
  // A valid call updates both tensors (first step: buf = g, p -= lr g).
  assert.equal(run(sgd, 6, [2, 0.5, 0.9, 0, 0, 0, 1, 3, 2]), Status.OK);
  assert.deepEqual([...bufs[0]!], [1 - 0.5 * 2, 2 - 0.5 * 3, 3 - 0.5 * 4]);
  assert.deepEqual([...bufs[2]!], [2, 3, 4]);
  assert.deepEqual([...bufs[3]!], [4 - 0.5 * 5, 5 - 0.5 * 6, 6], "n[1] = 2 leaves the third");
  assert.deepEqual([...bufs[5]!], [5, 6, 8]);
});

Deno.test("libra_run checks lstm_step_backward's buffer counts against its step itself (direct FFI calls)", () => {
  const { lib } = loadLibrary("cpu");
  const s = lib.symbols;
  const id = new Int32Array(1);
  assert.equal(
    s.libra_kernel_id(new TextEncoder().encode("lstm_step_backward\0"), id),
    Status.OK,
  );
  const buf = new Float32Array(64);
  const p = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)!));
  const run = (nIn: number, nOut: number, t: number) =>
    s.libra_run(
      id[0]!,
      new BigUint64Array(nIn).fill(p),
      nIn,
      new BigUint64Array(nOut).fill(p),
      nOut,
      new Float64Array([1, 3, 1, t]),
      4,
    );
  const err = () => Deno.UnsafePointerView.getCString(s.libra_last_error()!);
  // A middle step takes h's gradient in and gives the step before's out: 7 and 3.
  assert.equal(run(6, 2, 1), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 7 input and 3 output buffers \(t = 1 of 3 steps\), got 6 and 2/);
  assert.equal(run(7, 3, 2), Status.INVALID_ARGUMENT);
  assert.match(err(), /expected 6 input and 3 output buffers \(t = 2 of 3 steps\), got 7 and 3/);
  assert.equal(run(6, 2, 3), Status.INVALID_ARGUMENT);
  assert.match(err(), /t = 3 must be below steps = 3/);
});

// ---------------------------------------------------------------- Philox, determinism

Deno.test("cpu libra_philox4x32 reproduces the Random123 known-answer vectors", () => {
  const b = cpuBackend();
  const kat: [[number, number, number, number], [number, number], number[]][] = [
    [[0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]],
    [
      [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff],
      [0xffffffff, 0xffffffff],
      [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
    ],
    [
      [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
      [0xa4093822, 0x299f31d0],
      [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
    ],
  ];
  for (const [ctr, key, want] of kat) assert.deepEqual(b.philox4x32(ctr, key), want);
  const r = rng(99);
  const word = () => Math.floor(r() * 2 ** 32);
  for (let i = 0; i < 50; i++) {
    const ctr: [number, number, number, number] = [word(), word(), word(), word()];
    const key: [number, number] = [word(), word()];
    assert.deepEqual(b.philox4x32(ctr, key), philox4x32(ctr, key));
  }
});

Deno.test("cpu kernels are bitwise deterministic across repeated calls", () => {
  const b = cpuBackend();
  const r = rng(5);
  const runTwice = (kernel: KernelName, params: number[], gens: Gen[] = []) => {
    const sizes = kernelSizes(kernel, params);
    const ins = sizes.inputs.map((bytes, i) => {
      const buf = b.alloc(bytes);
      b.write(buf, fill(gens[i] ?? "normal", bytes / 4, r));
      return buf;
    });
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
  runTwice("conv2d", [4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1]);
  runTwice("conv2d_backward_input", [4, 16, 20, 20, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0]);
  runTwice("conv2d_backward_weight", [4, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 0]);
  runTwice("sum_axis", [1, 300_000, 1]);
  runTwice("mse", [300_000]);
  runTwice("embedding_backward", [50_000, 100, 16], ["normal", { i32: 100 }]);
  runTwice("index_select_backward", [1, 50, 300, 4000], ["normal", { i32: 50 }]);
  runTwice("layer_norm_backward", [512, 256], ["normal", "normal", "normal", "pos", "normal"]);
  runTwice("dropout", [300_000, 0.25, 11, 1234]);
});

Deno.test("cpu kernels give the same bits at 1 and 2 threads", () => {
  const b = cpuBackend();
  const before = b.threads();
  const r = rng(17);
  const cases: [KernelName, number[]][] = [
    ["conv2d", [6, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["conv2d_backward_input", [6, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["conv2d_backward_weight", [6, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["conv2d_backward_weight", [4, 8, 5, 5, 2000, 1, 1, 1, 1, 0, 0, 1, 1, 0]],
    ["conv2d_backward_weight", [3, 8, 32, 32, 8, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["conv2d", [6, 16, 33, 31, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1]],
    ["conv2d_backward_weight", [3, 16, 32, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 0]],
    ["conv2d_backward_weight", [5, 5, 33, 31, 7, 3, 3, 2, 2, 1, 1, 1, 1, 0]],
    ["conv2d_backward_weight", [4, 16, 32, 32, 32, 1, 1, 2, 2, 0, 0, 1, 1, 0]],
    ["conv2d_backward_weight", [40, 9, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["sum_to", [2, 3000, 700, 1, 700]],
    ["gelu_tanh_backward", [300_000]],
  ];
  try {
    for (const [kernel, params] of cases) {
      const sizes = kernelSizes(kernel, params);
      const ins = sizes.inputs.map((bytes) => {
        const buf = b.alloc(bytes);
        b.write(buf, fill("normal", bytes / 4, r));
        return buf;
      });
      const results = [1, 2].map((t) => {
        b.setThreads(t);
        const outs = sizes.outputs.map((bytes) => b.alloc(bytes));
        b.run(kernel, ins, outs, params);
        const bytes = outs.map((o) => b.read(o));
        outs.forEach((o) => b.free(o));
        return bytes;
      });
      ins.forEach((i) => b.free(i));
      results[0]!.forEach((bytes, i) => {
        assert.deepEqual(
          bytes,
          results[1]![i],
          `${kernel} output ${i} differs between 1 and 2 threads`,
        );
      });
    }
  } finally {
    b.setThreads(before);
  }
});
