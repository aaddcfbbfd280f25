/**
 * The matmul kernels of the kernel table (the TypeScript side of `native/cpu/matmul.c`).
 *
 * @module
 */

import { expectCounts, expectParams, F, fail, type KernelSpec, simple } from "./_spec.ts";

/** Name of a matmul kernel. */
export type MatmulKernelName = "matmul" | "linear";

/** The matmul kernels, by name. */
export const MATMUL_KERNELS: Readonly<Record<MatmulKernelName, KernelSpec>> = {
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
  // -- a linear layer's forward
  linear: simple(
    ["x", "w", "b"],
    ["y"],
    ["m", "n", "k"],
    "y [m, n] = x [m, k] w^T + b, w [n, k], b [n] added to every row: the product as matmul computes it (transB = 1), then the sum as add computes it (bitwise the two calls), with no buffer for the product alone. k = 0 gives b on every row.",
    ([m, n, k]) => ({ inputs: [m! * k!, n! * k!, n!], outputs: [m! * n!] }),
    (p) => (2 * p[2]! + 1) * p[0]! * p[1]!,
    {},
    ["m", "n", "k"],
  ),
};
