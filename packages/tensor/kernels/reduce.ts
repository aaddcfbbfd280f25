/**
 * The reduce kernels of the kernel table (the TypeScript side of `native/cpu/reduce.c`).
 *
 * @module
 */

import { axisReduce, expectCounts, expectParams, F, type KernelSpec, rowsCols } from "./_spec.ts";

/** Name of a reduce kernel. */
export type ReduceKernelName =
  | "sum_axis"
  | "mean_axis"
  | "max_axis"
  | "argmax_axis"
  | "max_axis_backward"
  | "softmax"
  | "log_softmax"
  | "softmax_backward"
  | "log_softmax_backward";

/** The reduce kernels, by name. */
export const REDUCE_KERNELS: Readonly<Record<ReduceKernelName, KernelSpec>> = {
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
};
