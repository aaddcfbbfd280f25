/**
 * The layout kernels of the kernel table (the TypeScript side of `native/cpu/layout.c`).
 *
 * @module
 */

import {
  expectCounts,
  expectParams,
  F,
  fail,
  type KernelSizes,
  type KernelSpec,
  prod,
  readNdim,
  simple,
} from "./_spec.ts";

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

/** Name of a layout kernel. */
export type LayoutKernelName =
  | "permute"
  | "slice"
  | "slice_backward"
  | "concat"
  | "index_select"
  | "index_select_backward"
  | "embedding"
  | "embedding_backward";

/** The layout kernels, by name. */
export const LAYOUT_KERNELS: Readonly<Record<LayoutKernelName, KernelSpec>> = {
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
};
