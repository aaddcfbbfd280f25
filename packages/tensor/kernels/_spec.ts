/**
 * The shapes every kernel-table entry is built from: the {@link KernelSpec}
 * contract, parameter validation and the builders the family tables share.
 *
 * @module
 */

import { KernelError } from "../backend.ts";

/** Byte sizes a kernel call expects for each input and output buffer. */
export interface KernelSizes {
  /** Expected byte size of each input buffer, in order. */
  readonly inputs: readonly number[];
  /** Expected byte size of each output buffer, in order. */
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
  /**
   * Indices of inputs updated in place (only pinned storages may be mutated).
   * A kernel whose in-place inputs follow its params gives {@link mutatesOf}
   * instead; read either through `kernelMutates`.
   */
  readonly mutates?: readonly number[];
  /** The inputs a call with params `p` updates in place, for kernels where that varies. */
  mutatesOf?(p: readonly number[]): readonly number[];
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

/** Bytes per f32 / i32 element. */
export const F = 4;

/** Product of a list of sizes. */
export function prod(xs: readonly number[]): number {
  let r = 1;
  for (const x of xs) r *= x;
  return r;
}

/** Params errors name the kernel when known; `checkKernelCall` fills it in otherwise. */
export function fail(kernel: string, msg: string): never {
  throw new KernelError(kernel, msg);
}

/** Validates the parameter count and that every listed parameter is a finite number. */
export function expectParams(
  kernel: string,
  p: readonly number[],
  n: number,
  layout: string,
): void {
  if (p.length !== n) {
    fail(kernel, `expected ${n} params (${layout}), got ${p.length}`);
  }
  for (let i = 0; i < p.length; i++) {
    if (typeof p[i] !== "number" || Number.isNaN(p[i])) {
      fail(kernel, `param ${i} of (${layout}) is not a number: ${p[i]}`);
    }
  }
}

export function expectCounts(
  kernel: string,
  p: readonly number[],
  names: string[],
  from = 0,
): void {
  for (let i = 0; i < names.length; i++) {
    const v = p[from + i]!;
    if (!Number.isInteger(v) || v < 0) {
      fail(kernel, `${names[i]} must be a non-negative integer, got ${v}`);
    }
  }
}

export function expectPositive(
  kernel: string,
  p: readonly number[],
  names: string[],
  from = 0,
): void {
  for (let i = 0; i < names.length; i++) {
    const v = p[from + i]!;
    if (!Number.isInteger(v) || v < 1) {
      fail(kernel, `${names[i]} must be an integer >= 1, got ${v}`);
    }
  }
}

export function readNdim(kernel: string, p: readonly number[]): number {
  const ndim = p[0];
  if (ndim === undefined || !Number.isInteger(ndim) || ndim < 0 || ndim > MAX_DIMS) {
    fail(kernel, `ndim must be an integer in [0, ${MAX_DIMS}], got ${ndim}`);
  }
  return ndim;
}

/** Number of elements addressed by `shape` with `strides` (0-strides broadcast). */
export function spanOf(shape: readonly number[], strides: readonly number[]): number {
  if (prod(shape) === 0) return 0;
  let span = 1;
  for (let i = 0; i < shape.length; i++) span += (shape[i]! - 1) * strides[i]!;
  return span;
}

// ---------------------------------------------------------------- builders

export function unary(doc: string, flopsPerElement = 1): KernelSpec {
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

export function unaryBackward(savedName: string, doc: string, flopsPerElement = 2): KernelSpec {
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

export function scalarOp(doc: string): KernelSpec {
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
export function broadcastSizes(kernel: string, p: readonly number[], k: number): KernelSizes {
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

export function binary(doc: string): KernelSpec {
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

export function rowsCols(
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

export function axisReduce(doc: string, outputName = "y"): KernelSpec {
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

export function simple(
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

/**
 * The params of a `*_multi` optimizer update, `count, <six update params>,
 * n[count]` (`layout`), checked: returns the element count of each tensor.
 */
export function multiCounts(kernel: string, p: readonly number[], layout: string): number[] {
  if (p.length < 7) fail(kernel, `expected at least 7 params (${layout}), got ${p.length}`);
  expectCounts(kernel, p, ["count"]);
  const count = p[0]!;
  expectParams(kernel, p, 7 + count, `${layout} with count ${count}`);
  const ns: number[] = new Array(count);
  for (let t = 0; t < count; t++) {
    const n = p[7 + t]!;
    if (!Number.isInteger(n) || n < 0) {
      fail(kernel, `n[${t}] (param ${7 + t}) must be a non-negative integer, got ${n}`);
    }
    ns[t] = n;
  }
  return ns;
}
