/**
 * Test cases for every kernel of the table: params plus how to draw each input,
 * and the tolerance against the reference backend. Shared by the kernel tests
 * (cpu, cuda) so every backend is held to the same cases.
 *
 * @module
 */

import { KERNEL_NAMES, type KernelName } from "@libra/tensor/kernels";

/** How to fill one input buffer. */
export type Gen =
  | "normal" // N(0, 1)
  | "pos" // uniform [0.2, 3)
  | "unit" // uniform (0, 1)
  | "ints" // small integers -2..2 as f32 (comparisons see ties)
  | "mask" // 0 or 1 as f32
  | "big" // N(0, 100) (casts)
  | { i32: number } // i32 uniform in [0, n)
  | { i32Range: [number, number] }; // i32 uniform in [lo, hi)

/** Allowed difference: |got - want| <= atol + rtol * |want| (0 and 0 = bitwise). */
export interface Tol {
  rtol: number;
  atol: number;
}

/** One kernel call to compare. */
export interface KernelCase {
  kernel: KernelName;
  label: string;
  params: number[];
  gens?: Gen[];
  tol?: Tol;
}

/** Exact: data movement, integer outputs, Philox decisions. */
export const EXACT: Tol = { rtol: 0, atol: 0 };
/** One or two f32 roundings apart (single arithmetic ops, double accumulations). */
export const TIGHT: Tol = { rtol: 2e-6, atol: 1e-7 };
/** f32 transcendental functions and short f32 formulas. */
export const LOOSE: Tol = { rtol: 2e-5, atol: 2e-6 };
/** f32 dot products (sgemm, conv2d): rounding grows with the reduction length. */
export const GEMM: Tol = { rtol: 1e-4, atol: 1e-4 };

/** numpy broadcasting: params `ndim, outShape, strides...` for right-aligned input shapes. */
export function bcast(...shapes: number[][]): number[] {
  const ndim = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let d = 0; d < ndim; d++) {
    let size = 1;
    for (const s of shapes) {
      const v = s[s.length - ndim + d] ?? 1;
      if (v !== 1) size = v;
    }
    out.push(size);
  }
  const strides = shapes.map((s) => {
    const st: number[] = new Array(ndim).fill(0);
    let acc = 1;
    for (let d = ndim - 1; d >= 0; d--) {
      const v = s[s.length - ndim + d] ?? 1;
      st[d] = v === 1 ? 0 : acc;
      acc *= v;
    }
    return st;
  });
  return [ndim, ...out, ...strides.flat()];
}

const BINARY: KernelName[] = ["add", "sub", "mul", "div"];
const COMPARE: KernelName[] = ["eq", "ne", "lt", "le", "gt", "ge"];
const BCAST_SHAPES: [string, number[], number[]][] = [
  ["same shape", [3, 4], [3, 4]],
  ["row broadcast", [2, 3, 4], [4]],
  ["both broadcast", [2, 1, 4], [3, 1]],
  ["scalar operand", [5, 2], []],
  ["size 1", [1], [1]],
  ["rank 0", [], []],
  ["empty", [0, 3], [3]],
  ["large, column broadcast", [301, 257], [301, 1]],
];

function binaryCases(): KernelCase[] {
  const out: KernelCase[] = [];
  for (const k of BINARY) {
    for (const [label, a, b] of BCAST_SHAPES) {
      out.push({
        kernel: k,
        label,
        params: bcast(a, b),
        gens: k === "div" ? ["normal", "pos"] : ["normal", "normal"],
        tol: TIGHT,
      });
    }
  }
  for (const k of COMPARE) {
    for (const [label, a, b] of BCAST_SHAPES) {
      out.push({ kernel: k, label, params: bcast(a, b), gens: ["ints", "ints"], tol: EXACT });
    }
  }
  return out;
}

const UNARY: [KernelName, Gen, Tol][] = [
  ["neg", "normal", EXACT],
  ["exp", "normal", LOOSE],
  ["log", "pos", LOOSE],
  ["sqrt", "pos", TIGHT],
  ["rsqrt", "pos", LOOSE],
  ["relu", "normal", EXACT],
  ["gelu_tanh", "normal", LOOSE],
  ["gelu_erf", "normal", LOOSE],
  ["silu", "normal", LOOSE],
  ["sigmoid", "normal", LOOSE],
  ["tanh", "normal", LOOSE],
  ["copy", "normal", EXACT],
  ["cast_f32_i32", "big", EXACT],
  ["cast_i32_f32", { i32Range: [-100000, 100000] }, EXACT],
  ["relu_backward", "normal", EXACT],
  ["gelu_tanh_backward", "normal", LOOSE],
  ["gelu_erf_backward", "normal", LOOSE],
  ["silu_backward", "normal", LOOSE],
  ["sigmoid_backward", "unit", TIGHT],
  ["tanh_backward", "unit", TIGHT],
];

const SIZES: [string, number][] = [["n = 7", 7], ["size 1", 1], ["empty", 0], [
  "large",
  100_003,
]];

function unaryCases(): KernelCase[] {
  const out: KernelCase[] = [];
  for (const [k, g, tol] of UNARY) {
    for (const [label, n] of SIZES) {
      out.push({ kernel: k, label, params: [n], gens: [g, "normal"], tol });
    }
  }
  // saturated tails (|x| up to a few hundred): the exp-based forms must neither overflow nor cancel
  for (
    const k of ["gelu_tanh", "gelu_tanh_backward", "silu", "silu_backward", "sigmoid"] as const
  ) {
    out.push({
      kernel: k,
      label: "wide range",
      params: [4099],
      gens: ["big", "normal"],
      tol: LOOSE,
    });
  }
  const scalar: [KernelName, Gen, number, Tol][] = [
    ["add_scalar", "normal", 1.5, TIGHT],
    ["mul_scalar", "normal", -2.5, TIGHT],
    ["rsub_scalar", "normal", 0.25, TIGHT],
    ["rdiv_scalar", "pos", 3, TIGHT],
    ["pow_scalar", "pos", 2.5, LOOSE],
    ["eq_scalar", "ints", 1, EXACT],
    ["ne_scalar", "ints", 1, EXACT],
    ["lt_scalar", "ints", 0, EXACT],
    ["le_scalar", "ints", 0, EXACT],
    ["gt_scalar", "ints", -1, EXACT],
    ["ge_scalar", "ints", -1, EXACT],
  ];
  for (const [k, g, s, tol] of scalar) {
    for (const [label, n] of SIZES) out.push({ kernel: k, label, params: [n, s], gens: [g], tol });
  }
  for (const [label, n] of SIZES) {
    out.push({ kernel: "fill", label, params: [n, -3.25], tol: EXACT });
    out.push({ kernel: "fill_i32", label, params: [n, -7], tol: EXACT });
    out.push({ kernel: "add_inplace", label, params: [n], tol: TIGHT });
  }
  // batch x hidden: one element, odd sizes, empty either way, past the parallel threshold
  const lstm: [string, number, number][] = [
    ["1x1", 1, 1],
    ["3x5", 3, 5],
    ["empty batch", 0, 4],
    ["empty hidden", 4, 0],
    ["parallel 130x260", 130, 260],
  ];
  for (const [label, b, h] of lstm) {
    out.push({
      kernel: "lstm_cell",
      label,
      params: [b, h],
      gens: ["normal", "normal"],
      tol: LOOSE,
    });
    for (const rec of [0, 1]) {
      out.push({
        kernel: "lstm_step",
        label: `${label}, recurrent ${rec}`,
        params: [b, 3, h, 1, rec],
        // h in (0, 1) as an LSTM's; the product's rounding grows with hidden (a dot product)
        gens: rec ? ["normal", "normal", "unit", "normal"] : ["normal", "normal"],
        tol: rec ? GEMM : LOOSE,
      });
    }
    // first step (h's gradient out, none in), a middle one (both), the last (in only), one
    for (const [t, steps] of [[0, 3], [1, 3], [2, 3], [0, 1]] as [number, number][]) {
      out.push({
        kernel: "lstm_step_backward",
        label: `${label}, step ${t} of ${steps}`,
        params: [b, steps, h, t],
        gens: new Array<Gen>(6 + (t < steps - 1 ? 1 : 0)).fill("normal"),
        tol: GEMM,
      });
    }
    for (const extra of [0, 1, 2]) {
      out.push({
        kernel: "lstm_cell_backward",
        label: `${label}, ${extra} extra`,
        params: [b, h, extra],
        gens: new Array<Gen>(4 + extra).fill("normal"),
        tol: LOOSE,
      });
    }
  }
  return out;
}

function layoutCases(): KernelCase[] {
  const out: KernelCase[] = [];
  const w: KernelCase[] = [
    { kernel: "where", label: "broadcast", params: bcast([3, 1], [1, 4], [3, 4]), gens: ["mask"] },
    { kernel: "where", label: "same shape", params: bcast([2, 5], [2, 5], [2, 5]), gens: ["mask"] },
    { kernel: "where", label: "empty", params: bcast([0, 2], [2], [0, 2]), gens: ["mask"] },
    { kernel: "where", label: "large", params: bcast([400, 1], [400, 300], [300]), gens: ["mask"] },
    { kernel: "expand", label: "column to matrix", params: [3, 2, 3, 4, 0, 1, 0] },
    { kernel: "expand", label: "scalar", params: [2, 3, 2, 0, 0] },
    { kernel: "expand", label: "empty", params: [2, 0, 4, 0, 1] },
    { kernel: "expand", label: "large", params: [2, 500, 300, 0, 1] },
    { kernel: "permute", label: "3d", params: [3, 2, 3, 4, 2, 0, 1] },
    { kernel: "permute", label: "transpose", params: [2, 1, 5, 1, 0] },
    { kernel: "permute", label: "identity", params: [2, 3, 4, 0, 1] },
    { kernel: "permute", label: "rank 0", params: [0] },
    { kernel: "permute", label: "empty", params: [2, 0, 3, 1, 0] },
    { kernel: "permute", label: "large 4d", params: [4, 8, 16, 20, 33, 0, 2, 3, 1] },
    { kernel: "slice", label: "3d", params: [3, 4, 5, 6, 1, 0, 2, 2, 5, 3] },
    { kernel: "slice", label: "empty result", params: [2, 3, 4, 1, 1, 0, 2] },
    { kernel: "slice", label: "whole", params: [1, 5, 0, 5] },
    { kernel: "slice", label: "large", params: [2, 600, 300, 50, 7, 400, 280] },
    { kernel: "slice_backward", label: "3d", params: [3, 4, 5, 6, 1, 0, 2, 2, 5, 3] },
    { kernel: "slice_backward", label: "empty gy", params: [2, 3, 4, 1, 1, 0, 2] },
    { kernel: "slice_backward", label: "large", params: [2, 600, 300, 50, 7, 400, 280] },
    { kernel: "concat", label: "three inputs", params: [3, 2, 4, 1, 3, 2] },
    { kernel: "concat", label: "one empty input", params: [3, 2, 4, 1, 0, 2] },
    { kernel: "concat", label: "single input", params: [1, 3, 1, 5] },
    { kernel: "concat", label: "outer 0", params: [2, 0, 4, 1, 2] },
    { kernel: "concat", label: "large", params: [2, 64, 100, 7, 9] },
  ];
  for (const c of w) out.push({ ...c, tol: EXACT });
  const sumTo: [string, number[], number[]][] = [
    ["middle", [2, 3, 4], [1, 3, 1]],
    ["none reduced", [5, 1], [5, 1]],
    ["all", [3, 4], [1, 1]],
    ["empty x", [0, 3], [1, 3]],
    ["large rows", [300, 257], [1, 257]],
    ["large cols", [257, 300], [257, 1]],
    ["two leading dims reduced", [4, 5, 600], [1, 1, 600]],
    ["leading reduced, size-1 between", [30, 1, 520], [1, 1, 520]],
  ];
  for (const [label, xs, ys] of sumTo) {
    out.push({ kernel: "sum_to", label, params: [xs.length, ...xs, ...ys], tol: TIGHT });
  }
  const idx: [string, number, number, number, number][] = [
    ["repeated indices", 2, 5, 3, 7],
    ["inner 1", 1, 9, 1, 4],
    ["no indices", 2, 5, 3, 0],
    ["large", 4, 300, 64, 500],
  ];
  for (const [label, o, d, i, n] of idx) {
    out.push({
      kernel: "index_select",
      label,
      params: [o, d, i, n],
      gens: ["normal", { i32: d }],
      tol: EXACT,
    });
    out.push({
      kernel: "index_select_backward",
      label,
      params: [o, d, i, n],
      gens: ["normal", { i32: d }],
      tol: TIGHT,
    });
  }
  const emb: [string, number, number, number][] = [
    ["repeated ids", 9, 4, 5],
    ["no ids", 0, 4, 5],
    ["dim 1", 6, 3, 1],
    ["large", 4096, 1000, 64],
  ];
  for (const [label, n, v, d] of emb) {
    out.push({
      kernel: "embedding",
      label,
      params: [n, v, d],
      gens: ["normal", { i32: v }],
      tol: EXACT,
    });
    out.push({
      kernel: "embedding_backward",
      label,
      params: [n, v, d],
      gens: ["normal", { i32: v }],
      tol: TIGHT,
    });
  }
  return out;
}

function reduceCases(): KernelCase[] {
  const out: KernelCase[] = [];
  const shapes: [string, number[]][] = [
    ["middle axis", [2, 5, 3]],
    ["all", [1, 7, 1]],
    ["dim 1", [4, 1, 6]],
    ["outer 0", [0, 4, 5]],
    ["large inner", [8, 300, 40]],
    ["large all", [1, 100_003, 1]],
  ];
  for (const [label, s] of shapes) {
    out.push({ kernel: "sum_axis", label, params: s, tol: TIGHT });
    out.push({ kernel: "mean_axis", label, params: s, tol: TIGHT });
    out.push({ kernel: "max_axis", label, params: s, tol: EXACT });
    out.push({ kernel: "argmax_axis", label, params: s, tol: EXACT });
    out.push({ kernel: "max_axis_backward", label, params: s, tol: EXACT });
  }
  out.push({ kernel: "sum_axis", label: "empty axis sums to 0", params: [3, 0, 2], tol: EXACT });
  out.push({ kernel: "mean_axis", label: "empty axis is NaN", params: [3, 0, 2], tol: EXACT });
  const rc: [string, number[]][] = [
    ["3x5", [3, 5]],
    ["1x1", [1, 1]],
    ["no rows", [0, 4]],
    ["large", [300, 513]],
  ];
  for (const [label, p] of rc) {
    for (const k of ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]) {
      out.push({ kernel: k as KernelName, label, params: p, tol: LOOSE });
    }
  }
  return out;
}

function matmulCases(): KernelCase[] {
  const out: KernelCase[] = [];
  const mm = (label: string, b: number, m: number, n: number, k: number, ta = 0, tb = 0) => {
    for (const [sa, sb, tag] of [[m * k, k * n, ""], [m * k, 0, ", shared B"]] as const) {
      if (tag && b === 1) continue;
      out.push({
        kernel: "matmul",
        label: `${label}${tag}`,
        params: [b, m, n, k, ta, tb, b > 1 ? sa : 0, b > 1 ? sb : 0],
        tol: GEMM,
      });
    }
  };
  for (const [ta, tb] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
    mm(`3x4x5 transA=${ta} transB=${tb}`, 1, 3, 4, 5, ta, tb);
    mm(`batched transA=${ta} transB=${tb}`, 3, 5, 6, 7, ta, tb);
  }
  mm("k = 0 gives zeros", 2, 3, 4, 0);
  mm("m = 0", 1, 0, 4, 3);
  mm("1x1x1", 1, 1, 1, 1);
  mm("large", 1, 130, 150, 170);
  mm("large transposed", 1, 100, 129, 257, 1, 1);
  const linear: [string, number, number, number][] = [
    ["3x4x5", 3, 4, 5],
    ["k = 0 gives b", 3, 4, 0],
    ["m = 0", 0, 4, 3],
    ["n = 0", 3, 0, 4],
    ["1x1x1", 1, 1, 1],
    ["large (parallel rows)", 300, 150, 170],
  ];
  for (const [label, m, n, k] of linear) {
    out.push({ kernel: "linear", label, params: [m, n, k], tol: GEMM });
  }
  return out;
}

function convCases(): KernelCase[] {
  const out: KernelCase[] = [];
  const convs: [string, number[]][] = [
    ["3x3 pad 1 bias", [2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["stride 2 no bias", [2, 3, 9, 8, 5, 3, 3, 2, 2, 0, 0, 1, 1, 0]],
    ["dilation 2", [1, 2, 9, 9, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1]],
    ["pointwise", [2, 8, 5, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1]],
    ["asymmetric", [1, 3, 6, 7, 2, 2, 3, 2, 1, 1, 0, 1, 2, 0]],
    ["batch 0", [0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["batch 5 in image groups of 4 and 1", [5, 3, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["pointwise, small images grouped", [6, 8, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 0]],
    ["resnet-ish", [2, 16, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["odd sizes: 8-row and 32-column tails", [3, 5, 7, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["stride 2 pad 1, odd sizes", [2, 4, 11, 13, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1]],
    ["implicit GEMM, dilation 2, 32 columns", [2, 3, 12, 32, 5, 3, 3, 1, 1, 2, 2, 2, 2, 1]],
    ["implicit GEMM, no padding, 48 columns", [2, 3, 6, 50, 9, 3, 3, 1, 1, 0, 0, 1, 1, 0]],
    ["large weights (grouped sgemm path)", [3, 64, 5, 5, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["stride 1, unequal pads, dilations 1x3", [3, 5, 7, 10, 6, 3, 2, 1, 1, 2, 0, 1, 3, 0]],
    ["stride 1, images in chunks of 2 and 1", [3, 4, 32, 32, 5, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["stride 1, gy read in place, chunks", [3, 2, 32, 32, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["stride 2, dilation 2, odd sizes", [2, 3, 13, 11, 5, 3, 3, 2, 2, 1, 1, 2, 2, 0]],
    ["stride 3x2, pads 2x0, dilation 1x2", [2, 3, 14, 11, 5, 3, 3, 3, 2, 2, 0, 1, 2, 1]],
    ["1x1 stride 2 shortcut, odd sizes", [3, 5, 9, 7, 6, 1, 1, 2, 2, 0, 0, 1, 1, 0]],
    ["stride 2, images in chunks of 2 and 1", [3, 2, 70, 70, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0]],
    ["stride 2, gy read in place, chunks", [3, 2, 64, 64, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1]],
    ["8x8 outputs, 40 images in chunks of 32 and 8", [40, 3, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1, 0]],
    ["8x8 outputs, gy read in place, odd channels", [6, 7, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1]],
    ["stride 2 to 8x8 outputs, 35 images", [35, 5, 16, 16, 4, 3, 3, 2, 2, 1, 1, 1, 1, 0]],
    ["column pads wider than the image", [2, 3, 4, 2, 5, 3, 3, 1, 1, 1, 3, 1, 1, 0]],
  ];
  for (const [label, p] of convs) {
    out.push({ kernel: "conv2d", label, params: p, tol: GEMM });
    out.push({ kernel: "conv2d_backward_input", label, params: p, tol: GEMM });
    out.push({ kernel: "conv2d_backward_weight", label, params: p, tol: GEMM });
  }
  for (
    const [label, p] of [["2x4x9", [2, 4, 9]], ["empty", [0, 3, 4]], ["large", [
      8,
      64,
      256,
    ]]] as const
  ) {
    out.push({ kernel: "conv2d_backward_bias", label, params: [...p], tol: TIGHT });
  }
  const pools: [string, number[]][] = [
    ["3x3 s2 p1", [2, 3, 7, 6, 3, 3, 2, 2, 1, 1]],
    ["2x2 s2", [1, 2, 4, 4, 2, 2, 2, 2, 0, 0]],
    ["overlapping", [1, 1, 5, 5, 3, 2, 1, 2, 1, 1]],
    ["empty batch", [0, 3, 4, 4, 2, 2, 2, 2, 0, 0]],
    ["large", [4, 16, 32, 32, 3, 3, 2, 2, 1, 1]],
  ];
  for (const [label, p] of pools) {
    out.push({ kernel: "max_pool2d", label, params: p, tol: EXACT });
    out.push({ kernel: "max_pool2d_backward", label, params: p, tol: TIGHT });
    out.push({ kernel: "avg_pool2d", label, params: p, tol: TIGHT });
    out.push({ kernel: "avg_pool2d_backward", label, params: p, tol: TIGHT });
  }
  for (
    const [label, p] of [["6x49", [6, 49]], ["hw 1", [3, 1]], ["no rows", [0, 5]], [
      "hw 0 is NaN",
      [3, 0],
    ], ["large", [512, 196]]] as const
  ) {
    out.push({ kernel: "global_avg_pool", label, params: [...p], tol: TIGHT });
    out.push({ kernel: "global_avg_pool_backward", label, params: [...p], tol: TIGHT });
  }
  for (
    const [label, p] of [["3x4x5", [3, 4, 5]], ["1x1x1", [1, 1, 1]], ["empty", [0, 4, 5]], [
      "large",
      [64, 32, 32],
    ]] as const
  ) {
    out.push({ kernel: "upsample_nearest2x", label, params: [...p], tol: EXACT });
    out.push({ kernel: "upsample_nearest2x_backward", label, params: [...p], tol: TIGHT });
  }
  return out;
}

function normCases(): KernelCase[] {
  const out: KernelCase[] = [];
  for (
    const [label, p] of [["4x3x10", [4, 3, 10]], ["1x1x1", [1, 1, 1]], ["large", [
      8,
      16,
      1024,
    ]]] as const
  ) {
    out.push({ kernel: "batch_norm_stats", label, params: [...p], tol: TIGHT });
    out.push({
      kernel: "batch_norm_apply",
      label,
      params: [...p, 1e-5],
      gens: ["normal", "normal", "pos", "normal", "normal"],
      tol: LOOSE,
    });
    out.push({
      kernel: "batch_norm_backward",
      label,
      params: [...p, 1e-5],
      gens: ["normal", "normal", "normal", "pos", "normal"],
      tol: { rtol: 1e-4, atol: 1e-4 },
    });
  }
  out.push({
    kernel: "batch_norm_update_running",
    label: "count 40",
    params: [5, 0.1, 40],
    gens: ["normal", "pos", "normal", "pos"],
    tol: TIGHT,
  });
  out.push({
    kernel: "batch_norm_update_running",
    label: "count 1 uses var",
    params: [3, 0.5, 1],
    gens: ["normal", "pos", "normal", "pos"],
    tol: TIGHT,
  });
  out.push({
    kernel: "batch_norm_update_running",
    label: "no channels",
    params: [0, 0.1, 4],
    tol: EXACT,
  });
  for (
    const [label, rows, cols] of [["4x10", 4, 10], ["1x1", 1, 1], ["no rows", 0, 8], [
      "large",
      256,
      768,
    ]] as const
  ) {
    out.push({
      kernel: "layer_norm",
      label,
      params: [rows, cols, 1e-5],
      tol: { rtol: 1e-5, atol: 1e-5 },
    });
    out.push({
      kernel: "layer_norm_backward",
      label,
      params: [rows, cols],
      gens: ["normal", "normal", "normal", "pos", "normal"],
      tol: { rtol: 1e-4, atol: 1e-4 },
    });
    out.push({
      kernel: "rms_norm",
      label,
      params: [rows, cols, 1e-6],
      tol: { rtol: 1e-5, atol: 1e-5 },
    });
    out.push({
      kernel: "rms_norm_backward",
      label,
      params: [rows, cols],
      gens: ["normal", "normal", "pos", "normal"],
      tol: { rtol: 1e-4, atol: 1e-4 },
    });
  }
  return out;
}

function randomCases(): KernelCase[] {
  const out: KernelCase[] = [];
  const drops: [string, number[]][] = [
    ["p 0.3", [1000, 0.3, 42, 0]],
    ["p 0 keeps all", [100, 0, 7, 3]],
    ["p 1 drops all", [100, 1, 7, 3]],
    ["empty", [0, 0.5, 1, 0]],
    ["large, 64-bit seed and offset across 2^32", [100_003, 0.5, 2 ** 33 + 5, 2 ** 32 - 50_000]],
  ];
  for (const [label, p] of drops) {
    out.push({ kernel: "dropout", label, params: p, tol: EXACT });
    out.push({ kernel: "dropout_backward", label, params: p, tol: EXACT });
  }
  const rands: [string, number[]][] = [
    ["small", [1000, 1, 0]],
    ["empty", [0, 1, 0]],
    ["large, 64-bit seed and offset", [100_003, 2 ** 40 + 3, 2 ** 32 - 10]],
  ];
  for (const [label, p] of rands) {
    out.push({ kernel: "rand_uniform", label, params: [...p, -2, 3], tol: TIGHT });
    out.push({ kernel: "rand_normal", label, params: [...p, 1, 0.5], tol: TIGHT });
  }
  return out;
}

function lossCases(): KernelCase[] {
  const out: KernelCase[] = [];
  for (const [label, r, c] of [["5x7", 5, 7], ["1x1", 1, 1], ["large", 512, 1000]] as const) {
    out.push({
      kernel: "cross_entropy",
      label,
      params: [r, c],
      gens: ["normal", { i32: c }],
      tol: LOOSE,
    });
    out.push({
      kernel: "cross_entropy_backward",
      label,
      params: [r, c],
      gens: ["normal", { i32: c }, "normal"],
      tol: LOOSE,
    });
  }
  out.push({
    kernel: "cross_entropy",
    label: "no rows is NaN",
    params: [0, 4],
    gens: ["normal", { i32: 4 }],
    tol: EXACT,
  });
  for (const [label, n] of [["n 100", 100], ["n 1", 1], ["large", 100_003]] as const) {
    out.push({ kernel: "mse", label, params: [n], tol: TIGHT });
    out.push({ kernel: "mse_backward", label, params: [n], tol: TIGHT });
  }
  out.push({ kernel: "mse", label: "n 0 is NaN", params: [0], tol: EXACT });
  const sgd: [string, number[]][] = [
    ["plain", [50, 0.1, 0, 0, 0, 0, 0]],
    ["momentum first step", [50, 0.1, 0.9, 0, 1e-4, 0, 1]],
    ["momentum, dampening", [50, 0.1, 0.9, 0.1, 1e-4, 0, 0]],
    ["nesterov", [50, 0.05, 0.9, 0, 0.01, 1, 0]],
    ["empty", [0, 0.1, 0.9, 0, 0, 0, 0]],
    ["large", [100_003, 0.01, 0.9, 0, 5e-4, 1, 0]],
  ];
  for (const [label, p] of sgd) out.push({ kernel: "sgd_update", label, params: p, tol: TIGHT });
  const adam: [string, number[]][] = [
    ["step 1", [50, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1]],
    ["step 10", [50, 1e-2, 0.8, 0.99, 1e-6, 0, 10]],
    ["empty", [0, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1]],
    ["large", [100_003, 1e-3, 0.9, 0.999, 1e-8, 0.1, 3]],
  ];
  for (const [label, p] of adam) {
    out.push({
      kernel: "adamw_update",
      label,
      params: p,
      gens: ["normal", "normal", "normal", "pos"],
      tol: { rtol: 1e-5, atol: 1e-6 },
    });
  }
  // Many tensors in one call: sizes that differ (one empty, one over the threads' threshold).
  const ns = [50, 0, 3, 100_003, 1];
  const multi = (shared: number[]) => [ns.length, ...shared, ...ns];
  for (const [label, p] of sgd) {
    if (label === "empty" || label === "large") continue;
    out.push({ kernel: "sgd_update_multi", label, params: multi(p.slice(1)), tol: TIGHT });
  }
  out.push({ kernel: "sgd_update_multi", label: "no tensors", params: [0, 0.1, 0.9, 0, 0, 0, 0] });
  for (const [label, p] of adam) {
    if (label === "empty" || label === "large") continue;
    out.push({
      kernel: "adamw_update_multi",
      label,
      params: multi(p.slice(1)),
      gens: ns.flatMap(() => ["normal", "normal", "normal", "pos"] as Gen[]),
      tol: { rtol: 1e-5, atol: 1e-6 },
    });
  }
  return out;
}

/** Every case, grouped by kernel in table order. */
export function kernelCases(): Map<KernelName, KernelCase[]> {
  const all = [
    ...binaryCases(),
    ...unaryCases(),
    ...layoutCases(),
    ...reduceCases(),
    ...matmulCases(),
    ...convCases(),
    ...normCases(),
    ...randomCases(),
    ...lossCases(),
  ];
  const m = new Map<KernelName, KernelCase[]>();
  for (const k of KERNEL_NAMES) m.set(k, []);
  for (const c of all) m.get(c.kernel)!.push(c);
  return m;
}
