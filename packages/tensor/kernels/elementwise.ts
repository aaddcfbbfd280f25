/**
 * The elementwise kernels of the kernel table (the TypeScript side of `native/cpu/elementwise.c`).
 *
 * @module
 */

import {
  binary,
  broadcastSizes,
  expectCounts,
  expectParams,
  F,
  fail,
  type KernelSpec,
  prod,
  readNdim,
  scalarOp,
  simple,
  unary,
  unaryBackward,
} from "./_spec.ts";

/** Name of a elementwise kernel. */
export type ElementwiseKernelName =
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
  | "lstm_cell"
  | "lstm_cell_backward"
  | "lstm_step"
  | "lstm_step_backward";

/** `batch, steps, hidden, t` (then more) of the LSTM step kernels, checked: t below steps. */
function lstmStepParams(
  kernel: string,
  p: readonly number[],
  n: number,
  layout: string,
): [number, number, number, number, number] {
  expectParams(kernel, p, n, layout);
  expectCounts(kernel, p, ["batch", "steps", "hidden", "t", "recurrent"].slice(0, n));
  if (p[3]! >= p[1]!) fail(kernel, `t = ${p[3]} must be below steps = ${p[1]}`);
  return [p[0]!, p[1]!, p[2]!, p[3]!, p[4] ?? 0];
}

/** The elementwise kernels, by name. */
export const ELEMENTWISE_KERNELS: Readonly<Record<ElementwiseKernelName, KernelSpec>> = {
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

  // -- fused LSTM cell (f32): one kernel for a time step's gate activations and state update
  lstm_cell: simple(
    ["gates", "state"],
    ["next"],
    ["batch", "hidden"],
    "LSTM cell, gates in PyTorch's order i, f, g, o: gates [batch, 4 hidden] (pre-activations), state and next [batch, 2 hidden], each row h then c. c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c').",
    (p) => ({ inputs: [4 * p[0]! * p[1]!, 2 * p[0]! * p[1]!], outputs: [2 * p[0]! * p[1]!] }),
    (p) => 24 * p[0]! * p[1]!,
    {},
    ["batch", "hidden"],
  ),
  lstm_cell_backward: {
    inputs: ["gates", "state", "next", "gnext", "...gh"],
    outputs: ["ggates", "gstate"],
    params: "batch, hidden, extra",
    doc:
      "Gradient of lstm_cell: from gnext (the next state's gradient, rows as next's) plus `extra` (0-2) more gradients of h' [batch, hidden] (the inputs after gnext, added to gnext's h half) gives ggates and gstate (its h half is 0: the cell reads only c). With dh that sum and dc gnext's c half: dc' = dc + dh sigmoid(o) (1 - tanh(c')^2); gi = dc' tanh(g) i (1 - i), gf = dc' c f (1 - f), gg = dc' i (1 - tanh(g)^2), go = dh tanh(c') o (1 - o) with i, f, o the sigmoids; gc = dc' f.",
    sizes(p) {
      expectParams("lstm_cell_backward", p, 3, this.params);
      expectCounts("lstm_cell_backward", p, ["batch", "hidden", "extra"]);
      if (p[2]! > 2) fail("lstm_cell_backward", `extra must be 0, 1 or 2, got ${p[2]}`);
      const n = p[0]! * p[1]!;
      const extra = new Array<number>(p[2]!).fill(n * F);
      return {
        inputs: [4 * n * F, 2 * n * F, 2 * n * F, 2 * n * F, ...extra],
        outputs: [4 * n * F, 2 * n * F],
      };
    },
    flops: (p) => (40 + p[2]!) * p[0]! * p[1]!,
  },
  lstm_step: {
    inputs: ["xw", "state", "...(h, whh)"],
    outputs: ["next", "h", "gates"],
    params: "batch, steps, hidden, t, recurrent",
    doc:
      "One step of an LSTM layer: gates = xw[:, t, :] (xw [batch, steps, 4 hidden], the input projections) plus, when recurrent is 1, h whh^T from the two inputs after state, h [batch, hidden] (the step before's) and whh [4 hidden, hidden] (the product as matmul computes it); then lstm_cell of gates and state. Writes next [batch, 2 hidden] (rows h then c), h [batch, hidden] (next's h half) and gates [batch, 4 hidden] (the pre-activations, for the backward).",
    sizes(p) {
      const [B, T, H, , rec] = lstmStepParams("lstm_step", p, 5, this.params);
      if (rec > 1) fail("lstm_step", `recurrent must be 0 or 1, got ${rec}`);
      const n = B * H * F;
      return {
        inputs: rec ? [4 * T * n, 2 * n, n, 4 * H * H * F] : [4 * T * n, 2 * n],
        outputs: [2 * n, n, 4 * n],
      };
    },
    flops: (p) => (24 + 8 * p[4]! * p[2]!) * p[0]! * p[2]!,
  },
  lstm_step_backward: {
    inputs: ["gates", "state", "next", "gnext", "gy", "whh", "...dhnext"],
    outputs: ["ggates", "gstate", "...dhprev"],
    params: "batch, steps, hidden, t",
    doc:
      "Gradient of lstm_step at step t: lstm_cell_backward of gates, state and next (step t's) with gnext (the next state's gradient) and dh = gnext's h half + gy[:, t, :] (gy [batch, steps, hidden], the layer output's gradient) + dhnext [batch, hidden] (h's gradient through step t + 1, an input when t < steps - 1). Writes ggates, gstate and, when t > 0, dhprev = ggates whh [batch, hidden] (the step before's h gradient through this step, as matmul computes it).",
    sizes(p) {
      const [B, T, H, t] = lstmStepParams("lstm_step_backward", p, 4, this.params);
      const n = B * H * F;
      return {
        inputs: [4 * n, 2 * n, 2 * n, 2 * n, T * n, 4 * H * H * F, ...(t < T - 1 ? [n] : [])],
        outputs: [4 * n, 2 * n, ...(t > 0 ? [n] : [])],
      };
    },
    flops: (p) => (41 + (p[3]! > 0 ? 8 * p[2]! : 0)) * p[0]! * p[2]!,
  },
};
