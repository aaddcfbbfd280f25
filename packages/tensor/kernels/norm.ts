/**
 * The norm kernels of the kernel table (the TypeScript side of `native/cpu/norm.c`).
 *
 * @module
 */

import { type KernelSpec, rowsCols, simple } from "./_spec.ts";

/** Name of a norm kernel. */
export type NormKernelName =
  | "batch_norm_stats"
  | "batch_norm_apply"
  | "batch_norm_update_running"
  | "batch_norm_backward"
  | "layer_norm"
  | "layer_norm_backward"
  | "rms_norm"
  | "rms_norm_backward";

/** The norm kernels, by name. */
export const NORM_KERNELS: Readonly<Record<NormKernelName, KernelSpec>> = {
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
};
