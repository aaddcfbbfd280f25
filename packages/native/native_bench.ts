/**
 * Benchmarks of the cpu binding (`deno bench -A packages/native/`):
 *
 * - sgemm through `backend.run("matmul")` against a direct `cblas_sgemm` call
 *   through a minimal `Deno.dlopen` of libopenblas (same OpenBLAS, same
 *   threads), at 256..1024; the binding's overhead is printed as a ratio;
 * - the per-call overhead of a tiny kernel (relu on 1 element) through the
 *   binding and through a raw `libra_run` FFI call (its lists by address, as
 *   the binding passes them: see `libra_run_ptr`);
 * - conv2d forward images/s on a ResNet-ish 3x3 layer (64 -> 64 channels, 56x56).
 *
 * @module
 */

import { loadLibrary } from "./_loader.ts";
import { cpuBackend } from "./mod.ts";
import { addressOf } from "./native_backend.ts";

const cpu = cpuBackend();

const CBLAS = {
  cblas_sgemm: {
    parameters: [
      "i32", // order
      "i32", // transA
      "i32", // transB
      "i32", // M
      "i32", // N
      "i32", // K
      "f32", // alpha
      "buffer", // A
      "i32", // lda
      "buffer", // B
      "i32", // ldb
      "f32", // beta
      "buffer", // C
      "i32", // ldc
    ],
    result: "void",
  },
} as const satisfies Deno.ForeignLibraryInterface;

function openBlas(): Deno.DynamicLibrary<typeof CBLAS> | null {
  for (const p of ["libopenblas.so.0", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"]) {
    try {
      return Deno.dlopen(p, CBLAS);
    } catch {
      // try the next name
    }
  }
  return null;
}

const blas = openBlas();
const ROW_MAJOR = 101, NO_TRANS = 111;

function random(n: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

interface Gemm {
  size: number;
  binding(): void;
  direct(): void;
}

function gemm(size: number): Gemm {
  const n = size;
  const a = random(n * n), b = random(n * n), c = new Float32Array(n * n);
  const A = cpu.alloc(a.byteLength), B = cpu.alloc(b.byteLength), C = cpu.alloc(c.byteLength);
  cpu.write(A, a);
  cpu.write(B, b);
  const params = [1, n, n, n, 0, 0, 0, 0];
  return {
    size,
    binding: () => cpu.run("matmul", [A, B], [C], params),
    direct: () =>
      blas!.symbols.cblas_sgemm(
        ROW_MAJOR,
        NO_TRANS,
        NO_TRANS,
        n,
        n,
        n,
        1,
        a,
        n,
        b,
        n,
        0,
        c,
        n,
      ),
  };
}

/**
 * Best-of-rounds seconds per call of two functions, measured in alternating
 * order (f first on even rounds, g first on odd ones) so that load from other
 * processes and cache warmth affect both alike.
 */
function timePair(f: () => void, g: () => void, reps: number, rounds: number): [number, number] {
  let bf = Infinity, bg = Infinity;
  const once = (fn: () => void) => {
    const t = performance.now();
    for (let i = 0; i < reps; i++) fn();
    return (performance.now() - t) / reps;
  };
  f();
  g();
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      bf = Math.min(bf, once(f));
      bg = Math.min(bg, once(g));
    } else {
      bg = Math.min(bg, once(g));
      bf = Math.min(bf, once(f));
    }
  }
  return [bf / 1000, bg / 1000];
}

const SIZES = [256, 512, 768, 1024];
const gemms = SIZES.map(gemm);

if (blas && cpu.buildInfo.includes("openblas")) {
  console.log(`sgemm, ${cpu.buildInfo}, ${cpu.threads()} threads (best of 10 alternating rounds):`);
  for (const g of gemms) {
    const reps = g.size >= 768 ? 2 : g.size >= 512 ? 4 : 16;
    const [tb, td] = timePair(g.binding, g.direct, reps, 10);
    const flops = 2 * g.size ** 3;
    console.log(
      `  ${g.size}: binding ${(flops / tb / 1e9).toFixed(1)} GFLOP/s, direct cblas_sgemm ` +
        `${(flops / td / 1e9).toFixed(1)} GFLOP/s, binding/direct time ratio ${
          (tb / td).toFixed(3)
        } (overhead ${((tb / td - 1) * 100).toFixed(1)}%)`,
    );
  }
} else {
  console.log(`sgemm comparison skipped: ${blas ? cpu.buildInfo : "libopenblas.so.0 not found"}`);
}

for (const g of gemms) {
  Deno.bench({
    name: `sgemm ${g.size} via binding`,
    group: `sgemm ${g.size}`,
    fn: g.binding,
  });
  if (blas) {
    Deno.bench({
      name: `sgemm ${g.size} direct cblas_sgemm`,
      group: `sgemm ${g.size}`,
      baseline: true,
      fn: g.direct,
    });
  }
}

// ---- per-call overhead of a tiny kernel
const x1 = cpu.alloc(4), y1 = cpu.alloc(4);
const relu1 = [1];
const { lib } = loadLibrary("cpu");
const id = new Int32Array(1);
lib.symbols.libra_kernel_id(new TextEncoder().encode("relu\0"), id);
const x1raw = new Float32Array(1), y1raw = new Float32Array(1);
const ins = new BigUint64Array([BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(x1raw)))]);
const outs = new BigUint64Array([BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(y1raw)))]);
const p1 = new Float64Array([1]);
const insAt = addressOf(ins), outsAt = addressOf(outs), p1At = addressOf(p1);
{
  const reps = 200_000;
  const [tb, tr] = timePair(
    () => cpu.run("relu", [x1], [y1], relu1),
    () => lib.symbols.libra_run_ptr(id[0]!, insAt, 1, outsAt, 1, p1At, 1),
    reps,
    3,
  );
  console.log(
    `tiny kernel (relu, 1 element): binding ${(tb * 1e9).toFixed(0)} ns/call, raw libra_run ` +
      `${(tr * 1e9).toFixed(0)} ns/call`,
  );
}
Deno.bench({
  name: "relu(1) via binding",
  group: "per-call overhead",
  fn: () => cpu.run("relu", [x1], [y1], relu1),
});
Deno.bench({
  name: "relu(1) raw libra_run FFI",
  group: "per-call overhead",
  baseline: true,
  fn: () => {
    lib.symbols.libra_run_ptr(id[0]!, insAt, 1, outsAt, 1, p1At, 1);
  },
});

// ---- conv2d images/s (ResNet stage-1 3x3 layer)
const N = 4, C = 64, H = 56, W = 56, K = 64;
const convParams = [N, C, H, W, K, 3, 3, 1, 1, 1, 1, 1, 1, 0];
const cx = cpu.alloc(N * C * H * W * 4), cw = cpu.alloc(K * C * 9 * 4);
const cy = cpu.alloc(N * K * H * W * 4);
cpu.write(cx, random(N * C * H * W));
cpu.write(cw, random(K * C * 9));
{
  const conv = () => cpu.run("conv2d", [cx, cw], [cy], convParams);
  const [t] = timePair(conv, () => {}, 2, 3);
  const gflop = (2 * N * K * H * W * C * 9) / 1e9;
  console.log(
    `conv2d ${N}x${C}x${H}x${W} -> ${K} (3x3, pad 1): ${(N / t).toFixed(1)} images/s, ` +
      `${(gflop / t).toFixed(1)} GFLOP/s`,
  );
}
Deno.bench({
  name: `conv2d forward ${N}x${C}x${H}x${W} -> ${K}, 3x3 (divide ${N} by the time for images/s)`,
  group: "conv2d",
  fn: () => cpu.run("conv2d", [cx, cw], [cy], convParams),
});
