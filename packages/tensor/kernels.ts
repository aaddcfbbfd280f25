/**
 * The kernel table: every kernel any backend runs, with its buffers, its
 * parameter layout and the byte sizes it expects.
 *
 * This file is the contract between the TypeScript side and every native
 * implementation (`native/cpu`, `native/cuda`) and the reference/meta backends.
 * Conventions for all kernels:
 * - buffers are contiguous, row-major; `f32` unless a kernel says `i32`;
 * - `params` is a flat list of numbers (passed to C as `double`); integers are
 *   exact; booleans are 0/1; shapes are listed dimension by dimension;
 * - outputs never alias inputs, except the inputs a kernel lists in `mutates`,
 *   which it updates in place;
 * - results must be deterministic: the same inputs and params give bitwise the
 *   same outputs on the same backend and thread count (no atomics in sums);
 * - element counts may be zero (then the kernel does nothing, except reductions
 *   over an empty axis: sum gives 0, mean gives NaN).
 *
 * Random numbers: Philox4x32-10 (Salmon et al., SC'11; Random123). Key
 * `k = (seed mod 2^32, floor(seed / 2^32))`; element `i` of a random kernel uses
 * the counter `c = (lo32(offset + i), hi32(offset + i), 0, 0)` and the output
 * words `w0, w1`. `u(w) = (w >>> 8) * 2^-24` in [0, 1). Uniform:
 * `low + (high - low) * u(w0)`. Normal: `u1 = ((w0 >>> 8) + 1) * 2^-24`,
 * `u2 = u(w1)`, `mean + std * sqrt(-2 ln u1) * cos(2 pi u2)`. Dropout keeps
 * element `i` when `u(w0) >= p` (compared in double precision) and scales kept
 * values by `1 / (1 - p)`. See {@link philox4x32} for the reference and its
 * known-answer vectors.
 *
 * @module
 */

import { KernelError } from "./backend.ts";

/** Byte sizes a kernel call expects for each input and output buffer. */
export interface KernelSizes {
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
}

/** One kernel's contract. */
export interface KernelSpec {
  /** Input buffer names, in order. */
  readonly inputs: readonly string[];
  /** Output buffer names, in order. */
  readonly outputs: readonly string[];
  /** Human-readable parameter layout, e.g. `"n, s"` or `"ndim, outShape[ndim], ..."`. */
  readonly params: string;
  /** Indices of inputs updated in place (only pinned storages may be mutated). */
  readonly mutates?: readonly number[];
  /** True when the kernel draws Philox random numbers from `(seed, offset)` params. */
  readonly random?: boolean;
  /** What the kernel computes. */
  readonly doc: string;
  /**
   * Expected byte size of every input and output for these params. Throws a
   * {@link KernelError} when the params themselves are malformed. Variadic
   * kernels (concat, conv2d bias) return as many entries as the params imply.
   */
  sizes(p: readonly number[]): KernelSizes;
  /** Floating-point operations of one call (for analytic cost models). */
  flops(p: readonly number[]): number;
}

/** Largest tensor rank kernels accept. */
export const MAX_DIMS = 8;

const F = 4; // bytes per f32 / i32 element

/** Product of a list of sizes. */
function prod(xs: readonly number[]): number {
  let r = 1;
  for (const x of xs) r *= x;
  return r;
}

/** Params errors name the kernel when known; `checkKernelCall` fills it in otherwise. */
function fail(kernel: string, msg: string): never {
  throw new KernelError(kernel, msg);
}

/** Validates the parameter count and that every listed parameter is a finite number. */
function expectParams(kernel: string, p: readonly number[], n: number, layout: string): void {
  if (p.length !== n) {
    fail(kernel, `expected ${n} params (${layout}), got ${p.length}`);
  }
  for (let i = 0; i < p.length; i++) {
    if (typeof p[i] !== "number" || Number.isNaN(p[i])) {
      fail(kernel, `param ${i} of (${layout}) is not a number: ${p[i]}`);
    }
  }
}

function expectCounts(kernel: string, p: readonly number[], names: string[], from = 0): void {
  for (let i = 0; i < names.length; i++) {
    const v = p[from + i]!;
    if (!Number.isInteger(v) || v < 0) {
      fail(kernel, `${names[i]} must be a non-negative integer, got ${v}`);
    }
  }
}

function expectPositive(kernel: string, p: readonly number[], names: string[], from = 0): void {
  for (let i = 0; i < names.length; i++) {
    const v = p[from + i]!;
    if (!Number.isInteger(v) || v < 1) {
      fail(kernel, `${names[i]} must be an integer >= 1, got ${v}`);
    }
  }
}

function readNdim(kernel: string, p: readonly number[]): number {
  const ndim = p[0];
  if (ndim === undefined || !Number.isInteger(ndim) || ndim < 0 || ndim > MAX_DIMS) {
    fail(kernel, `ndim must be an integer in [0, ${MAX_DIMS}], got ${ndim}`);
  }
  return ndim;
}

/** Number of elements addressed by `shape` with `strides` (0-strides broadcast). */
function spanOf(shape: readonly number[], strides: readonly number[]): number {
  if (prod(shape) === 0) return 0;
  let span = 1;
  for (let i = 0; i < shape.length; i++) span += (shape[i]! - 1) * strides[i]!;
  return span;
}

// ---------------------------------------------------------------- builders

function unary(doc: string, flopsPerElement = 1): KernelSpec {
  return {
    inputs: ["x"],
    outputs: ["y"],
    params: "n",
    doc,
    sizes(p) {
      expectParams("", p, 1, "n");
      expectCounts("", p, ["n"]);
      return { inputs: [p[0]! * F], outputs: [p[0]! * F] };
    },
    flops: (p) => p[0]! * flopsPerElement,
  };
}

function unaryBackward(savedName: string, doc: string, flopsPerElement = 2): KernelSpec {
  return {
    inputs: [savedName, "gy"],
    outputs: ["gx"],
    params: "n",
    doc,
    sizes(p) {
      expectParams("", p, 1, "n");
      expectCounts("", p, ["n"]);
      const b = p[0]! * F;
      return { inputs: [b, b], outputs: [b] };
    },
    flops: (p) => p[0]! * flopsPerElement,
  };
}

function scalarOp(doc: string): KernelSpec {
  return {
    inputs: ["x"],
    outputs: ["y"],
    params: "n, s",
    doc,
    sizes(p) {
      expectParams("", p, 2, "n, s");
      expectCounts("", p, ["n"]);
      return { inputs: [p[0]! * F], outputs: [p[0]! * F] };
    },
    flops: (p) => p[0]!,
  };
}

/** Broadcast layout: ndim, outShape[ndim], then `k` stride lists of ndim each. */
function broadcastSizes(kernel: string, p: readonly number[], k: number): KernelSizes {
  const ndim = readNdim(kernel, p);
  const layout = `ndim, outShape[ndim]${", strides[ndim]".repeat(k)}`;
  expectParams(kernel, p, 1 + ndim * (k + 1), layout);
  expectCounts(
    kernel,
    p.slice(1),
    Array.from({ length: ndim * (k + 1) }, (_, i) => `param ${i + 1}`),
  );
  const shape = p.slice(1, 1 + ndim);
  const inputs: number[] = [];
  for (let j = 0; j < k; j++) {
    const strides = p.slice(1 + ndim * (j + 1), 1 + ndim * (j + 2));
    inputs.push(spanOf(shape, strides) * F);
  }
  return { inputs, outputs: [prod(shape) * F] };
}

function binary(doc: string): KernelSpec {
  return {
    inputs: ["a", "b"],
    outputs: ["y"],
    params: "ndim, outShape[ndim], aStrides[ndim], bStrides[ndim]",
    doc:
      `${doc} With numpy broadcasting: y[idx] = f(a[sum idx*aStrides], b[sum idx*bStrides]); a stride of 0 broadcasts that dimension.`,
    sizes(p) {
      return broadcastSizes("", p, 2);
    },
    flops: (p) => prod(p.slice(1, 1 + p[0]!)),
  };
}

function rowsCols(
  inputs: string[],
  outputs: string[],
  doc: string,
  extra: string[],
  shapeOf: (name: string, rows: number, cols: number) => number,
  flopsPerElement: number,
): KernelSpec {
  const layout = ["rows", "cols", ...extra].join(", ");
  return {
    inputs,
    outputs,
    params: layout,
    doc,
    sizes(p) {
      expectParams("", p, 2 + extra.length, layout);
      expectCounts("", p, ["rows", "cols"]);
      const [rows, cols] = [p[0]!, p[1]!];
      return {
        inputs: inputs.map((n) => shapeOf(n, rows, cols) * F),
        outputs: outputs.map((n) => shapeOf(n, rows, cols) * F),
      };
    },
    flops: (p) => p[0]! * p[1]! * flopsPerElement,
  };
}

function axisReduce(doc: string, outputName = "y"): KernelSpec {
  return {
    inputs: ["x"],
    outputs: [outputName],
    params: "outer, dim, inner",
    doc:
      `${doc} x is viewed as [outer, dim, inner] and reduced over the middle axis; y is [outer, inner]. Reducing everything: outer = inner = 1, dim = n.`,
    sizes(p) {
      expectParams("", p, 3, "outer, dim, inner");
      expectCounts("", p, ["outer", "dim", "inner"]);
      return { inputs: [p[0]! * p[1]! * p[2]! * F], outputs: [p[0]! * p[2]! * F] };
    },
    flops: (p) => p[0]! * p[1]! * p[2]!,
  };
}

const CONV_LAYOUT = "N, C, H, W, K, R, S, strideH, strideW, padH, padW, dilH, dilW, hasBias";

/** Output size of a convolution or pooling window along one axis. */
export function convOutSize(
  size: number,
  kernel: number,
  stride: number,
  pad: number,
  dil = 1,
): number {
  return Math.floor((size + 2 * pad - dil * (kernel - 1) - 1) / stride) + 1;
}

interface ConvDims {
  N: number;
  C: number;
  H: number;
  W: number;
  K: number;
  R: number;
  S: number;
  OH: number;
  OW: number;
  hasBias: boolean;
}

/** Parses and validates conv2d params; exported for backends. */
export function convDims(kernel: string, p: readonly number[]): ConvDims {
  expectParams(kernel, p, 14, CONV_LAYOUT);
  expectCounts(kernel, p, ["N", "C", "H", "W", "K", "R", "S"]);
  expectPositive(kernel, p, ["strideH", "strideW"], 7);
  expectCounts(kernel, p, ["padH", "padW"], 9);
  expectPositive(kernel, p, ["dilH", "dilW"], 11);
  const [N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, hb] = p as unknown as number[] & {
    length: 14;
  };
  if (hb !== 0 && hb !== 1) fail(kernel, `hasBias must be 0 or 1, got ${hb}`);
  const OH = convOutSize(H!, R!, sh!, ph!, dh!);
  const OW = convOutSize(W!, S!, sw!, pw!, dw!);
  if (OH < 1 || OW < 1) {
    fail(
      kernel,
      `input ${H}x${W} with padding ${ph}x${pw} is smaller than the dilated window ${R}x${S} (dilation ${dh}x${dw})`,
    );
  }
  return { N: N!, C: C!, H: H!, W: W!, K: K!, R: R!, S: S!, OH, OW, hasBias: hb === 1 };
}

const POOL_LAYOUT = "N, C, H, W, kH, kW, strideH, strideW, padH, padW";

/** Parses and validates pooling params; exported for backends. */
export function poolDims(
  kernel: string,
  p: readonly number[],
): { N: number; C: number; H: number; W: number; OH: number; OW: number } {
  expectParams(kernel, p, 10, POOL_LAYOUT);
  expectCounts(kernel, p, ["N", "C", "H", "W"]);
  expectPositive(kernel, p, ["kH", "kW", "strideH", "strideW"], 4);
  expectCounts(kernel, p, ["padH", "padW"], 8);
  const [N, C, H, W, kh, kw, sh, sw, ph, pw] = p as unknown as number[];
  if (2 * ph! > kh! || 2 * pw! > kw!) fail(kernel, `padding must be at most half the window`);
  const OH = convOutSize(H!, kh!, sh!, ph!);
  const OW = convOutSize(W!, kw!, sw!, pw!);
  if (OH < 1 || OW < 1) fail(kernel, `input ${H}x${W} is smaller than the window ${kh}x${kw}`);
  return { N: N!, C: C!, H: H!, W: W!, OH, OW };
}

function conv(
  inputs: string[],
  outputs: string[],
  doc: string,
): KernelSpec {
  return {
    inputs,
    outputs,
    params: CONV_LAYOUT,
    doc,
    sizes(p) {
      const d = convDims("", p);
      const bytes: Record<string, number> = {
        x: d.N * d.C * d.H * d.W * F,
        gx: d.N * d.C * d.H * d.W * F,
        w: d.K * d.C * d.R * d.S * F,
        gw: d.K * d.C * d.R * d.S * F,
        b: d.K * F,
        y: d.N * d.K * d.OH * d.OW * F,
        gy: d.N * d.K * d.OH * d.OW * F,
      };
      const ins = inputs.filter((n) => n !== "b?").map((n) => bytes[n]!);
      if (inputs.includes("b?") && d.hasBias) ins.push(bytes.b!);
      return { inputs: ins, outputs: outputs.map((n) => bytes[n]!) };
    },
    flops(p) {
      const d = convDims("conv2d", p);
      return 2 * d.N * d.K * d.OH * d.OW * d.C * d.R * d.S;
    },
  };
}

function pool(inputs: string[], outputs: string[], doc: string): KernelSpec {
  return {
    inputs,
    outputs,
    params: POOL_LAYOUT,
    doc,
    sizes(p) {
      const d = poolDims("", p);
      const big = d.N * d.C * d.H * d.W * F;
      const small = d.N * d.C * d.OH * d.OW * F;
      const bytes = (n: string) => (n === "x" || n === "gx" ? big : small);
      return { inputs: inputs.map(bytes), outputs: outputs.map(bytes) };
    },
    flops(p) {
      const d = poolDims("pool", p);
      return d.N * d.C * d.OH * d.OW * p[4]! * p[5]!;
    },
  };
}

function simple(
  inputs: string[],
  outputs: string[],
  params: string[],
  doc: string,
  elems: (p: readonly number[]) => { inputs: number[]; outputs: number[] },
  flops: (p: readonly number[]) => number,
  extra: Partial<Pick<KernelSpec, "mutates" | "random">> = {},
  counts: string[] = [],
): KernelSpec {
  const layout = params.join(", ");
  return {
    inputs,
    outputs,
    params: layout,
    doc,
    ...extra,
    sizes(p) {
      expectParams("", p, params.length, layout);
      expectCounts("", p, counts.length ? counts : params.slice(0, 1));
      const e = elems(p);
      return { inputs: e.inputs.map((x) => x * F), outputs: e.outputs.map((x) => x * F) };
    },
    flops,
  };
}

// ---------------------------------------------------------------- the table

/** Every kernel, by name. Backends must implement all of them. */
export const KERNELS: Readonly<Record<KernelName, KernelSpec>> = {
  // -- elementwise, broadcasting (f32 in, f32 out)
  add: binary("y = a + b."),
  sub: binary("y = a - b."),
  mul: binary("y = a * b."),
  div: binary("y = a / b."),
  // comparisons: f32 masks of 1.0 / 0.0
  eq: binary("y = (a == b) ? 1 : 0."),
  ne: binary("y = (a != b) ? 1 : 0."),
  lt: binary("y = (a < b) ? 1 : 0."),
  le: binary("y = (a <= b) ? 1 : 0."),
  gt: binary("y = (a > b) ? 1 : 0."),
  ge: binary("y = (a >= b) ? 1 : 0."),
  where: {
    inputs: ["cond", "a", "b"],
    outputs: ["y"],
    params: "ndim, outShape[ndim], condStrides[ndim], aStrides[ndim], bStrides[ndim]",
    doc: "y = cond != 0 ? a : b, broadcasting all three (cond is an f32 mask).",
    sizes(p) {
      return broadcastSizes("where", p, 3);
    },
    flops: (p) => prod(p.slice(1, 1 + p[0]!)),
  },
  expand: {
    inputs: ["x"],
    outputs: ["y"],
    params: "ndim, outShape[ndim], xStrides[ndim]",
    doc: "Broadcast copy: y[idx] = x[sum idx * xStrides] (4-byte elements, any dtype).",
    sizes(p) {
      return broadcastSizes("expand", p, 1);
    },
    flops: () => 0,
  },
  sum_to: {
    inputs: ["x"],
    outputs: ["y"],
    params: "ndim, xShape[ndim], yShape[ndim]",
    doc:
      "Reduces x to y's shape by summing over every dimension where yShape[i] == 1 and xShape[i] > 1 (the gradient of broadcasting). yShape[i] must be 1 or xShape[i].",
    sizes(p) {
      const ndim = readNdim("sum_to", p);
      expectParams("sum_to", p, 1 + 2 * ndim, "ndim, xShape[ndim], yShape[ndim]");
      const xs = p.slice(1, 1 + ndim);
      const ys = p.slice(1 + ndim);
      expectCounts("sum_to", p.slice(1), Array.from({ length: 2 * ndim }, (_, i) => `shape ${i}`));
      for (let i = 0; i < ndim; i++) {
        if (ys[i] !== 1 && ys[i] !== xs[i]) {
          fail("sum_to", `yShape[${i}] = ${ys[i]} must be 1 or xShape[${i}] = ${xs[i]}`);
        }
      }
      return { inputs: [prod(xs) * F], outputs: [prod(ys) * F] };
    },
    flops: (p) => prod(p.slice(1, 1 + p[0]!)),
  },

  // -- unary (f32)
  neg: unary("y = -x."),
  exp: unary("y = exp(x).", 4),
  log: unary("y = ln(x).", 4),
  sqrt: unary("y = sqrt(x).", 2),
  rsqrt: unary("y = 1 / sqrt(x).", 2),
  relu: unary("y = max(x, 0)."),
  gelu_tanh: unary("y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).", 10),
  gelu_erf: unary("y = 0.5 x (1 + erf(x / sqrt(2))).", 10),
  silu: unary("y = x * sigmoid(x).", 5),
  sigmoid: unary("y = 1 / (1 + exp(-x)).", 4),
  tanh: unary("y = tanh(x).", 4),
  copy: unary("y = x (4-byte elements, any dtype).", 0),
  cast_f32_i32: unary("y (i32) = trunc(x) (toward zero).", 1),
  cast_i32_f32: unary("y (f32) = x (i32).", 1),

  relu_backward: unaryBackward("x", "gx = x > 0 ? gy : 0."),
  gelu_tanh_backward: unaryBackward("x", "gx = gy * d/dx gelu_tanh(x).", 14),
  gelu_erf_backward: unaryBackward("x", "gx = gy * (Phi(x) + x phi(x)).", 14),
  silu_backward: unaryBackward("x", "gx = gy * s (1 + x (1 - s)), s = sigmoid(x).", 8),
  sigmoid_backward: unaryBackward("y", "gx = gy * y (1 - y), y = sigmoid output."),
  tanh_backward: unaryBackward("y", "gx = gy * (1 - y^2), y = tanh output."),

  // -- scalar variants (f32)
  add_scalar: scalarOp("y = x + s."),
  mul_scalar: scalarOp("y = x * s."),
  rsub_scalar: scalarOp("y = s - x."),
  rdiv_scalar: scalarOp("y = s / x."),
  pow_scalar: scalarOp("y = x ^ s (C powf semantics)."),
  eq_scalar: scalarOp("y = (x == s) ? 1 : 0."),
  ne_scalar: scalarOp("y = (x != s) ? 1 : 0."),
  lt_scalar: scalarOp("y = (x < s) ? 1 : 0."),
  le_scalar: scalarOp("y = (x <= s) ? 1 : 0."),
  gt_scalar: scalarOp("y = (x > s) ? 1 : 0."),
  ge_scalar: scalarOp("y = (x >= s) ? 1 : 0."),
  fill: simple(
    [],
    ["y"],
    ["n", "value"],
    "y = value everywhere (f32).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    () => 0,
  ),
  fill_i32: simple(
    [],
    ["y"],
    ["n", "value"],
    "y = value everywhere (i32; value must be an integer).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    () => 0,
  ),
  add_inplace: simple(
    ["acc", "x"],
    [],
    ["n"],
    "acc += x, in place (gradient accumulation on pinned storages).",
    (p) => ({ inputs: [p[0]!, p[0]!], outputs: [] }),
    (p) => p[0]!,
    { mutates: [0] },
  ),

  // -- reductions
  sum_axis: axisReduce("y = sum over the axis."),
  mean_axis: axisReduce("y = mean over the axis (NaN when dim = 0)."),
  max_axis: axisReduce("y = max over the axis (dim >= 1; NaN propagates)."),
  argmax_axis: axisReduce("y (i32) = index of the first maximum over the axis (dim >= 1)."),
  max_axis_backward: {
    inputs: ["x", "gy"],
    outputs: ["gx"],
    params: "outer, dim, inner",
    doc: "gx[o, j, i] = gy[o, i] where j is the first index of the maximum of x[o, :, i], else 0.",
    sizes(p) {
      expectParams("max_axis_backward", p, 3, "outer, dim, inner");
      expectCounts("max_axis_backward", p, ["outer", "dim", "inner"]);
      const big = p[0]! * p[1]! * p[2]! * F;
      return { inputs: [big, p[0]! * p[2]! * F], outputs: [big] };
    },
    flops: (p) => p[0]! * p[1]! * p[2]!,
  },
  softmax: rowsCols(["x"], ["y"], "Row-wise softmax (max-subtracted).", [], (_n, r, c) => r * c, 5),
  log_softmax: rowsCols(
    ["x"],
    ["y"],
    "Row-wise log-softmax: x - max - ln(sum exp(x - max)).",
    [],
    (_n, r, c) => r * c,
    5,
  ),
  softmax_backward: rowsCols(
    ["y", "gy"],
    ["gx"],
    "gx = y * (gy - sum(gy * y)) row-wise, y = softmax output.",
    [],
    (_n, r, c) => r * c,
    4,
  ),
  log_softmax_backward: rowsCols(
    ["y", "gy"],
    ["gx"],
    "gx = gy - exp(y) * sum(gy) row-wise, y = log_softmax output.",
    [],
    (_n, r, c) => r * c,
    4,
  ),

  // -- matmul
  matmul: {
    inputs: ["a", "b"],
    outputs: ["c"],
    params: "batch, m, n, k, transA, transB, strideA, strideB",
    doc:
      "c[i] = op(A_i) @ op(B_i) for i < batch; A_i starts at element i*strideA of a and is [m,k] (transA=0) or stored [k,m] (transA=1); B_i starts at i*strideB and is [k,n] or stored [n,k]. strideA/strideB = 0 shares one matrix across the batch. c is [batch, m, n], contiguous. k = 0 gives zeros.",
    sizes(p) {
      expectParams("matmul", p, 8, this.params);
      expectCounts("matmul", p, ["batch", "m", "n", "k", "transA", "transB", "strideA", "strideB"]);
      const [batch, m, n, k, ta, tb, sa, sb] = p as unknown as number[];
      if (ta! > 1 || tb! > 1) fail("matmul", `transA/transB must be 0 or 1, got ${ta}/${tb}`);
      const aBytes = batch! === 0 ? 0 : ((batch! - 1) * sa! + m! * k!) * F;
      const bBytes = batch! === 0 ? 0 : ((batch! - 1) * sb! + k! * n!) * F;
      return { inputs: [aBytes, bBytes], outputs: [batch! * m! * n! * F] };
    },
    flops: (p) => 2 * p[0]! * p[1]! * p[2]! * p[3]!,
  },

  // -- layout
  permute: {
    inputs: ["x"],
    outputs: ["y"],
    params: "ndim, xShape[ndim], perm[ndim]",
    doc: "y = x transposed: y.shape[i] = xShape[perm[i]] (4-byte elements, any dtype).",
    sizes(p) {
      const ndim = readNdim("permute", p);
      expectParams("permute", p, 1 + 2 * ndim, this.params);
      expectCounts(
        "permute",
        p.slice(1),
        Array.from({ length: 2 * ndim }, (_, i) => `param ${i + 1}`),
      );
      const perm = p.slice(1 + ndim);
      if ([...perm].sort((a, b) => a - b).some((v, i) => v !== i)) {
        fail("permute", `perm [${perm.join(", ")}] is not a permutation of 0..${ndim - 1}`);
      }
      const n = prod(p.slice(1, 1 + ndim)) * F;
      return { inputs: [n], outputs: [n] };
    },
    flops: () => 0,
  },
  slice: {
    inputs: ["x"],
    outputs: ["y"],
    params: "ndim, xShape[ndim], starts[ndim], yShape[ndim]",
    doc: "y[idx] = x[idx + starts] (step 1; 4-byte elements, any dtype).",
    sizes(p) {
      return sliceSizes("slice", p, false);
    },
    flops: () => 0,
  },
  slice_backward: {
    inputs: ["gy"],
    outputs: ["gx"],
    params: "ndim, xShape[ndim], starts[ndim], yShape[ndim]",
    doc: "gx = zeros(xShape); gx[idx + starts] = gy[idx]. Same params as slice.",
    sizes(p) {
      return sliceSizes("slice_backward", p, true);
    },
    flops: () => 0,
  },
  concat: {
    inputs: ["x0", "...xs"],
    outputs: ["y"],
    params: "nInputs, outer, inner, d[nInputs]",
    doc:
      "Concatenation along a middle axis: input j is [outer, d[j], inner]; y is [outer, sum d, inner] (4-byte elements, any dtype).",
    sizes(p) {
      const n = p[0]!;
      if (!Number.isInteger(n) || n < 1) fail("concat", `nInputs must be >= 1, got ${n}`);
      expectParams("concat", p, 3 + n, this.params);
      expectCounts("concat", p, Array.from({ length: 3 + n }, (_, i) => `param ${i}`));
      const [outer, inner] = [p[1]!, p[2]!];
      const ds = p.slice(3);
      return {
        inputs: ds.map((d) => outer * d * inner * F),
        outputs: [outer * prod([ds.reduce((a, b) => a + b, 0)]) * inner * F],
      };
    },
    flops: () => 0,
  },
  index_select: simple(
    ["x", "idx"],
    ["y"],
    ["outer", "dim", "inner", "nIdx"],
    "y[o, j, i] = x[o, idx[j], i]; idx is i32, every entry in [0, dim) or the kernel fails naming the bad index.",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!, p[3]!], outputs: [p[0]! * p[3]! * p[2]!] }),
    () => 0,
    {},
    ["outer", "dim", "inner", "nIdx"],
  ),
  index_select_backward: simple(
    ["gy", "idx"],
    ["gx"],
    ["outer", "dim", "inner", "nIdx"],
    "gx = zeros([outer, dim, inner]); gx[o, idx[j], i] += gy[o, j, i], accumulating in increasing j.",
    (p) => ({ inputs: [p[0]! * p[3]! * p[2]!, p[3]!], outputs: [p[0]! * p[1]! * p[2]!] }),
    (p) => p[0]! * p[3]! * p[2]!,
    {},
    ["outer", "dim", "inner", "nIdx"],
  ),
  embedding: simple(
    ["weight", "ids"],
    ["y"],
    ["nIds", "vocab", "dim"],
    "y[j, :] = weight[ids[j], :]; ids i32 in [0, vocab).",
    (p) => ({ inputs: [p[1]! * p[2]!, p[0]!], outputs: [p[0]! * p[2]!] }),
    () => 0,
    {},
    ["nIds", "vocab", "dim"],
  ),
  embedding_backward: simple(
    ["gy", "ids"],
    ["gw"],
    ["nIds", "vocab", "dim"],
    "gw = zeros([vocab, dim]); gw[ids[j], :] += gy[j, :], accumulating in increasing j (scatter-add).",
    (p) => ({ inputs: [p[0]! * p[2]!, p[0]!], outputs: [p[1]! * p[2]!] }),
    (p) => p[0]! * p[2]!,
    {},
    ["nIds", "vocab", "dim"],
  ),

  // -- convolution and pooling (NCHW)
  conv2d: conv(
    ["x", "w", "b?"],
    ["y"],
    "y = conv2d(x [N,C,H,W], w [K,C,R,S]) + b [K] (bias input present iff hasBias = 1). OH = floor((H + 2 padH - dilH (R-1) - 1) / strideH) + 1, likewise OW; zero padding; cross-correlation as in PyTorch.",
  ),
  conv2d_backward_input: conv(
    ["gy", "w"],
    ["gx"],
    "gx = gradient of conv2d w.r.t. x (same params as conv2d).",
  ),
  conv2d_backward_weight: conv(
    ["x", "gy"],
    ["gw"],
    "gw = gradient of conv2d w.r.t. w (same params as conv2d).",
  ),
  conv2d_backward_bias: simple(
    ["gy"],
    ["gb"],
    ["N", "K", "L"],
    "gb[k] = sum over n, l of gy[n, k, l] (L = OH * OW).",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!], outputs: [p[1]!] }),
    (p) => p[0]! * p[1]! * p[2]!,
    {},
    ["N", "K", "L"],
  ),
  max_pool2d: pool(
    ["x"],
    ["y"],
    "Max pooling; padding counts as -inf; OH = floor((H + 2 padH - kH) / strideH) + 1.",
  ),
  max_pool2d_backward: pool(
    ["x", "gy"],
    ["gx"],
    "Routes each gy to the first maximum (row-major within the window) of its window, accumulating where windows overlap.",
  ),
  avg_pool2d: pool(
    ["x"],
    ["y"],
    "Average pooling, zero padding counted (count_include_pad = true).",
  ),
  avg_pool2d_backward: pool(["gy"], ["gx"], "Gradient of avg_pool2d (same params)."),
  global_avg_pool: simple(
    ["x"],
    ["y"],
    ["rows", "hw"],
    "y[r] = mean of x[r, 0..hw) (rows = N*C).",
    (p) => ({ inputs: [p[0]! * p[1]!], outputs: [p[0]!] }),
    (p) => p[0]! * p[1]!,
    {},
    ["rows", "hw"],
  ),
  global_avg_pool_backward: simple(
    ["gy"],
    ["gx"],
    ["rows", "hw"],
    "gx[r, j] = gy[r] / hw.",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]! * p[1]!] }),
    (p) => p[0]! * p[1]!,
    {},
    ["rows", "hw"],
  ),
  upsample_nearest2x: simple(
    ["x"],
    ["y"],
    ["planes", "H", "W"],
    "y[p, i, j] = x[p, floor(i/2), floor(j/2)]; y is [planes, 2H, 2W].",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!], outputs: [4 * p[0]! * p[1]! * p[2]!] }),
    () => 0,
    {},
    ["planes", "H", "W"],
  ),
  upsample_nearest2x_backward: simple(
    ["gy"],
    ["gx"],
    ["planes", "H", "W"],
    "gx[p, i, j] = sum of the 2x2 block of gy it was copied to.",
    (p) => ({ inputs: [4 * p[0]! * p[1]! * p[2]!], outputs: [p[0]! * p[1]! * p[2]!] }),
    (p) => 4 * p[0]! * p[1]! * p[2]!,
    {},
    ["planes", "H", "W"],
  ),

  // -- normalization
  batch_norm_stats: simple(
    ["x"],
    ["mean", "var"],
    ["N", "C", "HW"],
    "Per-channel batch statistics of x [N, C, HW]: mean and biased variance.",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!], outputs: [p[1]!, p[1]!] }),
    (p) => 3 * p[0]! * p[1]! * p[2]!,
    {},
    ["N", "C", "HW"],
  ),
  batch_norm_apply: simple(
    ["x", "mean", "var", "gamma", "beta"],
    ["y"],
    ["N", "C", "HW", "eps"],
    "y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]. Training passes batch statistics, eval mode passes the running statistics.",
    (p) => ({
      inputs: [p[0]! * p[1]! * p[2]!, p[1]!, p[1]!, p[1]!, p[1]!],
      outputs: [p[0]! * p[1]! * p[2]!],
    }),
    (p) => 4 * p[0]! * p[1]! * p[2]!,
    {},
    ["N", "C", "HW"],
  ),
  batch_norm_update_running: simple(
    ["mean", "var", "runningMean", "runningVar"],
    [],
    ["C", "momentum", "count"],
    "In place: runningMean = (1 - momentum) runningMean + momentum mean; runningVar = (1 - momentum) runningVar + momentum var * count / (count - 1) (unbiased; count = N*HW, count = 1 uses var).",
    (p) => ({ inputs: [p[0]!, p[0]!, p[0]!, p[0]!], outputs: [] }),
    (p) => 6 * p[0]!,
    { mutates: [2, 3] },
  ),
  batch_norm_backward: simple(
    ["x", "gy", "mean", "var", "gamma"],
    ["gx", "ggamma", "gbeta"],
    ["N", "C", "HW", "eps"],
    "Gradients of batch_norm_apply with batch statistics (which depend on x) for x, gamma and beta.",
    (p) => ({
      inputs: [p[0]! * p[1]! * p[2]!, p[0]! * p[1]! * p[2]!, p[1]!, p[1]!, p[1]!],
      outputs: [p[0]! * p[1]! * p[2]!, p[1]!, p[1]!],
    }),
    (p) => 8 * p[0]! * p[1]! * p[2]!,
    {},
    ["N", "C", "HW"],
  ),
  layer_norm: rowsCols(
    ["x", "gamma", "beta"],
    ["y", "mean", "rstd"],
    "Per row: mean, rstd = 1/sqrt(biased var + eps); y = (x - mean) rstd gamma + beta (gamma, beta: [cols]).",
    ["eps"],
    (n, r, c) => (n === "gamma" || n === "beta" ? c : n === "mean" || n === "rstd" ? r : r * c),
    6,
  ),
  layer_norm_backward: rowsCols(
    ["x", "gy", "mean", "rstd", "gamma"],
    ["gx", "ggamma", "gbeta"],
    "Gradients of layer_norm for x, gamma and beta.",
    [],
    (n, r, c) =>
      n === "gamma" || n === "ggamma" || n === "gbeta"
        ? c
        : n === "mean" || n === "rstd"
        ? r
        : r * c,
    10,
  ),
  rms_norm: rowsCols(
    ["x", "gamma"],
    ["y", "rstd"],
    "Per row: rstd = 1/sqrt(mean(x^2) + eps); y = x rstd gamma.",
    ["eps"],
    (n, r, c) => (n === "gamma" ? c : n === "rstd" ? r : r * c),
    4,
  ),
  rms_norm_backward: rowsCols(
    ["x", "gy", "rstd", "gamma"],
    ["gx", "ggamma"],
    "Gradients of rms_norm for x and gamma.",
    [],
    (n, r, c) => (n === "gamma" || n === "ggamma" ? c : n === "rstd" ? r : r * c),
    8,
  ),

  // -- random
  dropout: simple(
    ["x"],
    ["y"],
    ["n", "p", "seed", "offset"],
    "y = keep ? x / (1 - p) : 0 with keep from Philox (see module doc); p in [0, 1]; p = 1 gives zeros.",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]!] }),
    (p) => 2 * p[0]!,
    { random: true },
    ["n"],
  ),
  dropout_backward: simple(
    ["gy"],
    ["gx"],
    ["n", "p", "seed", "offset"],
    "gx = keep ? gy / (1 - p) : 0, regenerating the same mask from (seed, offset).",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]!] }),
    (p) => 2 * p[0]!,
    { random: true },
    ["n"],
  ),
  rand_uniform: simple(
    [],
    ["y"],
    ["n", "seed", "offset", "low", "high"],
    "y = uniform in [low, high) from Philox (see module doc).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    (p) => 4 * p[0]!,
    { random: true },
    ["n", "seed", "offset"],
  ),
  rand_normal: simple(
    [],
    ["y"],
    ["n", "seed", "offset", "mean", "std"],
    "y = normal(mean, std) by Box-Muller from Philox (see module doc).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    (p) => 20 * p[0]!,
    { random: true },
    ["n", "seed", "offset"],
  ),

  // -- losses (mean reduction; loss is one f32)
  cross_entropy: simple(
    ["logits", "targets"],
    ["loss"],
    ["rows", "classes"],
    "loss = mean over rows of (logsumexp(logits[r]) - logits[r, targets[r]]); targets i32 in [0, classes) or the kernel fails naming the row.",
    (p) => ({ inputs: [p[0]! * p[1]!, p[0]!], outputs: [1] }),
    (p) => 5 * p[0]! * p[1]!,
    {},
    ["rows", "classes"],
  ),
  cross_entropy_backward: simple(
    ["logits", "targets", "gloss"],
    ["glogits"],
    ["rows", "classes"],
    "glogits = (softmax(logits) - onehot(targets)) * gloss / rows.",
    (p) => ({ inputs: [p[0]! * p[1]!, p[0]!, 1], outputs: [p[0]! * p[1]!] }),
    (p) => 6 * p[0]! * p[1]!,
    {},
    ["rows", "classes"],
  ),
  mse: simple(
    ["a", "b"],
    ["loss"],
    ["n"],
    "loss = mean((a - b)^2).",
    (p) => ({ inputs: [p[0]!, p[0]!], outputs: [1] }),
    (p) => 3 * p[0]!,
  ),
  mse_backward: simple(
    ["a", "b", "gloss"],
    ["ga"],
    ["n"],
    "ga = 2 (a - b) gloss / n (the gradient for b is -ga).",
    (p) => ({ inputs: [p[0]!, p[0]!, 1], outputs: [p[0]!] }),
    (p) => 3 * p[0]!,
  ),

  // -- optimizer updates (in place on pinned storages)
  sgd_update: simple(
    ["param", "grad", "momentumBuf"],
    [],
    ["n", "lr", "momentum", "dampening", "weightDecay", "nesterov", "firstStep"],
    "PyTorch SGD: g = grad + weightDecay param; if momentum != 0 { buf = firstStep ? g : momentum buf + (1 - dampening) g; g = nesterov ? g + momentum buf : buf }; param -= lr g. With momentum 0 the buffer is never touched and may be empty.",
    (p) => ({ inputs: [p[0]!, p[0]!, p[2] === 0 ? 0 : p[0]!], outputs: [] }),
    (p) => 6 * p[0]!,
    { mutates: [0, 2] },
  ),
  adamw_update: simple(
    ["param", "grad", "m", "v"],
    [],
    ["n", "lr", "beta1", "beta2", "eps", "weightDecay", "step"],
    "PyTorch AdamW: param *= 1 - lr weightDecay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; param -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps). step >= 1.",
    (p) => ({ inputs: [p[0]!, p[0]!, p[0]!, p[0]!], outputs: [] }),
    (p) => 12 * p[0]!,
    { mutates: [0, 2, 3] },
  ),
};

function sliceSizes(kernel: string, p: readonly number[], backward: boolean): KernelSizes {
  const ndim = readNdim(kernel, p);
  expectParams(kernel, p, 1 + 3 * ndim, "ndim, xShape[ndim], starts[ndim], yShape[ndim]");
  expectCounts(kernel, p.slice(1), Array.from({ length: 3 * ndim }, (_, i) => `param ${i + 1}`));
  const xs = p.slice(1, 1 + ndim);
  const st = p.slice(1 + ndim, 1 + 2 * ndim);
  const ys = p.slice(1 + 2 * ndim);
  for (let i = 0; i < ndim; i++) {
    if (st[i]! + ys[i]! > xs[i]!) {
      fail(kernel, `dimension ${i}: start ${st[i]} + size ${ys[i]} exceeds ${xs[i]}`);
    }
  }
  const big = prod(xs) * F;
  const small = prod(ys) * F;
  return backward ? { inputs: [small], outputs: [big] } : { inputs: [big], outputs: [small] };
}

/** Name of a kernel in {@link KERNELS}. */
export type KernelName =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge"
  | "where"
  | "expand"
  | "sum_to"
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "relu"
  | "gelu_tanh"
  | "gelu_erf"
  | "silu"
  | "sigmoid"
  | "tanh"
  | "copy"
  | "cast_f32_i32"
  | "cast_i32_f32"
  | "relu_backward"
  | "gelu_tanh_backward"
  | "gelu_erf_backward"
  | "silu_backward"
  | "sigmoid_backward"
  | "tanh_backward"
  | "add_scalar"
  | "mul_scalar"
  | "rsub_scalar"
  | "rdiv_scalar"
  | "pow_scalar"
  | "eq_scalar"
  | "ne_scalar"
  | "lt_scalar"
  | "le_scalar"
  | "gt_scalar"
  | "ge_scalar"
  | "fill"
  | "fill_i32"
  | "add_inplace"
  | "sum_axis"
  | "mean_axis"
  | "max_axis"
  | "argmax_axis"
  | "max_axis_backward"
  | "softmax"
  | "log_softmax"
  | "softmax_backward"
  | "log_softmax_backward"
  | "matmul"
  | "permute"
  | "slice"
  | "slice_backward"
  | "concat"
  | "index_select"
  | "index_select_backward"
  | "embedding"
  | "embedding_backward"
  | "conv2d"
  | "conv2d_backward_input"
  | "conv2d_backward_weight"
  | "conv2d_backward_bias"
  | "max_pool2d"
  | "max_pool2d_backward"
  | "avg_pool2d"
  | "avg_pool2d_backward"
  | "global_avg_pool"
  | "global_avg_pool_backward"
  | "upsample_nearest2x"
  | "upsample_nearest2x_backward"
  | "batch_norm_stats"
  | "batch_norm_apply"
  | "batch_norm_update_running"
  | "batch_norm_backward"
  | "layer_norm"
  | "layer_norm_backward"
  | "rms_norm"
  | "rms_norm_backward"
  | "dropout"
  | "dropout_backward"
  | "rand_uniform"
  | "rand_normal"
  | "cross_entropy"
  | "cross_entropy_backward"
  | "mse"
  | "mse_backward"
  | "sgd_update"
  | "adamw_update";

/** All kernel names, in table order. */
export const KERNEL_NAMES: readonly KernelName[] = Object.keys(KERNELS) as KernelName[];

/** Looks a kernel up, throwing a {@link KernelError} for unknown names. */
export function kernelSpec(name: string): KernelSpec {
  const spec = (KERNELS as Record<string, KernelSpec>)[name];
  if (!spec) throw new KernelError(name, `unknown kernel (not in the kernel table)`);
  return spec;
}

/** Expected buffer sizes of a call, with malformed params reported as a {@link KernelError} naming the kernel. */
export function kernelSizes(name: string, params: readonly number[]): KernelSizes {
  const spec = kernelSpec(name);
  try {
    return spec.sizes(params);
  } catch (e) {
    if (e instanceof KernelError && e.kernel !== name) {
      throw new KernelError(name, e.message.replace(/^[^:]*: /, ""), { cause: e });
    }
    throw e;
  }
}

/**
 * Validates a kernel call's buffer sizes against the table; every backend calls
 * this before touching memory. Buffers may be larger than required, never smaller.
 */
export function checkKernelCall(
  name: string,
  inputBytes: readonly number[],
  outputBytes: readonly number[],
  params: readonly number[],
): KernelSizes {
  const sizes = kernelSizes(name, params);
  const spec = kernelSpec(name);
  if (inputBytes.length !== sizes.inputs.length) {
    throw new KernelError(
      name,
      `expected ${sizes.inputs.length} input buffers (${
        spec.inputs.join(", ")
      }), got ${inputBytes.length}`,
    );
  }
  if (outputBytes.length !== sizes.outputs.length) {
    throw new KernelError(
      name,
      `expected ${sizes.outputs.length} output buffers (${
        spec.outputs.join(", ")
      }), got ${outputBytes.length}`,
    );
  }
  sizes.inputs.forEach((need, i) => {
    if (inputBytes[i]! < need) {
      throw new KernelError(
        name,
        `input ${i} has ${inputBytes[i]} bytes, needs ${need} (params ${params.join(", ")})`,
      );
    }
  });
  sizes.outputs.forEach((need, i) => {
    if (outputBytes[i]! < need) {
      throw new KernelError(
        name,
        `output ${i} has ${outputBytes[i]} bytes, needs ${need} (params ${params.join(", ")})`,
      );
    }
  });
  return sizes;
}

// ---------------------------------------------------------------- Philox

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

function mulhilo(a: number, b: number): [number, number] {
  const p = BigInt(a) * BigInt(b);
  return [Number(p >> 32n) >>> 0, Number(p & 0xffffffffn) >>> 0];
}

/**
 * Philox4x32-10 reference: four 32-bit words from a 4-word counter and a
 * 2-word key. Known-answer vectors (Random123 `kat_vectors`):
 * - ctr 0,0,0,0 key 0,0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
 * - ctr ffffffff x4 key ffffffff x2 -> 408f276d 41c83b0e a20bc7c6 6d5451fd
 * - ctr 243f6a88 85a308d3 13198a2e 03707344 key a4093822 299f31d0
 *   -> d16cfe09 94fdcceb 5001e420 24126ea1
 *
 * @example
 * ```ts
 * import { philox4x32 } from "@libra/tensor/kernels";
 * const words = philox4x32([0, 0, 0, 0], [0, 0]);
 * if (words[0] !== 0x6627e8d5) throw new Error("philox mismatch");
 * ```
 */
export function philox4x32(
  counter: readonly [number, number, number, number],
  key: readonly [number, number],
): [number, number, number, number] {
  let [c0, c1, c2, c3] = counter.map((x) => x >>> 0) as [number, number, number, number];
  let [k0, k1] = key.map((x) => x >>> 0) as [number, number];
  for (let round = 0; round < 10; round++) {
    const [hi0, lo0] = mulhilo(M0, c0);
    const [hi1, lo1] = mulhilo(M1, c2);
    [c0, c1, c2, c3] = [(hi1 ^ c1 ^ k0) >>> 0, lo1, (hi0 ^ c3 ^ k1) >>> 0, lo0];
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  return [c0, c1, c2, c3];
}

/** Philox words `[w0, w1]` for element `i` of a random kernel with `(seed, offset)`. */
export function philoxElement(seed: number, offset: number, i: number): [number, number] {
  const key: [number, number] = [seed % 2 ** 32, Math.floor(seed / 2 ** 32)];
  const c = offset + i;
  const w = philox4x32([c % 2 ** 32, Math.floor(c / 2 ** 32), 0, 0], key);
  return [w[0], w[1]];
}

/** `(w >>> 8) * 2^-24`: the uniform in [0, 1) every backend derives from a Philox word. */
export function philoxUniform(w: number): number {
  return (w >>> 8) * 2 ** -24;
}
