/**
 * Reference implementations of the elementwise kernels (the plain-TypeScript twin of `native/cpu/elementwise.c`).
 *
 * @module
 */

import { KernelError } from "../../backend.ts";
import type { ElementwiseKernelName } from "../../kernels.ts";
import { type FArr, prod, type RefKernel, stridedOffset } from "./_common.ts";
import { matmulF32 } from "./matmul.ts";

/** The error function, to about 1e-12 relative error (used by the reference `gelu_erf` kernel). */
export function erf(x: number): number {
  const ax = Math.abs(x);
  let r: number;
  if (ax < 3) {
    // Maclaurin series; terms peak near 3^(2n+1)/n! ~ 1e4, so ~1e-12 relative error.
    let term = ax, sum = ax;
    const x2 = ax * ax;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    // erfc continued fraction (Lentz-free backward evaluation), accurate for x >= 3.
    let f = 0;
    for (let k = 80; k >= 1; k--) f = (k / 2) / (ax + f);
    r = 1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + f);
  }
  return x < 0 ? -r : r;
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

function geluTanhGrad(x: number): number {
  const u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
  const t = Math.tanh(u);
  const du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

const refBinary: RefKernel = (k, ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  const f = BINARY[k]!;
  const nd = p[0]!;
  const shape = p.slice(1, 1 + nd);
  const sa = p.slice(1 + nd, 1 + 2 * nd);
  const sb = p.slice(1 + 2 * nd, 1 + 3 * nd);
  const a = ins[0]!.f, b = ins[1]!.f;
  const n = prod(shape);
  for (let i = 0; i < n; i++) {
    y[i] = f(a[stridedOffset(i, shape, sa)]!, b[stridedOffset(i, shape, sb)]!);
  }
};

const refWhere: RefKernel = (_k, ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  const nd = p[0]!;
  const shape = p.slice(1, 1 + nd);
  const sc = p.slice(1 + nd, 1 + 2 * nd);
  const sa = p.slice(1 + 2 * nd, 1 + 3 * nd);
  const sb = p.slice(1 + 3 * nd, 1 + 4 * nd);
  const c = ins[0]!.f, a = ins[1]!.f, b = ins[2]!.f;
  const n = prod(shape);
  for (let i = 0; i < n; i++) {
    y[i] = c[stridedOffset(i, shape, sc)] !== 0
      ? a[stridedOffset(i, shape, sa)]!
      : b[stridedOffset(i, shape, sb)]!;
  }
};

const refExpand: RefKernel = (_k, ins, outs, p) => {
  const nd = p[0]!;
  const shape = p.slice(1, 1 + nd);
  const sx = p.slice(1 + nd);
  const xi = ins[0]!.i, yi = outs[0]!.i;
  const n = prod(shape);
  for (let i = 0; i < n; i++) yi[i] = xi[stridedOffset(i, shape, sx)]!;
  return;
};

const refSumTo: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const nd = p[0]!;
  const xs = p.slice(1, 1 + nd);
  const ys = p.slice(1 + nd);
  const ystr = new Array<number>(nd);
  let s = 1;
  for (let d = nd - 1; d >= 0; d--) {
    ystr[d] = ys[d] === 1 ? 0 : s;
    s *= ys[d]!;
  }
  const acc = new Float64Array(prod(ys));
  const n = prod(xs);
  for (let i = 0; i < n; i++) acc[stridedOffset(i, xs, ystr)]! += x[i]!;
  y.set(acc);
};

const refUnary: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const f = UNARY[k]!;
  for (let i = 0; i < p[0]!; i++) y[i] = f(x[i]!);
};

const refCopy: RefKernel = (_k, ins, outs, p) => {
  const xi = ins[0]!.i, yi = outs[0]!.i;
  for (let i = 0; i < p[0]!; i++) yi[i] = xi[i]!;
  return;
};

const refCastF32I32: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const yi = outs[0]!.i;
  for (let i = 0; i < p[0]!; i++) yi[i] = Math.trunc(x[i]!);
};

const refCastI32F32: RefKernel = (_k, ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  const xi = ins[0]!.i;
  for (let i = 0; i < p[0]!; i++) y[i] = xi[i]!;
};

const refUnaryBackward: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const f = UNARY_GRAD[k]!;
  const gy = ins[1]!.f;
  for (let i = 0; i < p[0]!; i++) y[i] = gy[i]! * f(x[i]!);
};

const refScalar: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const f = SCALAR[k]!;
  const s = p[1]!;
  for (let i = 0; i < p[0]!; i++) y[i] = f(x[i]!, s);
};

const refFill: RefKernel = (_k, _ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  y.fill(p[1]!, 0, p[0]!);
};

const refFillI32: RefKernel = (k, _ins, outs, p) => {
  if (!Number.isInteger(p[1]!)) {
    throw new KernelError(k, `value must be an integer, got ${p[1]}`);
  }
  outs[0]!.i.fill(p[1]!, 0, p[0]!);
  return;
};

const refAddInplace: RefKernel = (_k, ins, _outs, p) => {
  const acc = ins[0]!.f, v = ins[1]!.f;
  for (let i = 0; i < p[0]!; i++) acc[i] = acc[i]! + v[i]!;
  return;
};

/**
 * The LSTM cell on `B` rows (shared by lstm_cell and lstm_step): gates i, f, g, o a row of 4H in
 * `g`; state and next rows h then c (2H) in `s` and `n`.
 */
function lstmCellRows(B: number, H: number, g: FArr, s: FArr, n: FArr): void {
  for (let r = 0; r < B; r++) {
    for (let j = 0; j < H; j++) {
      const gr = r * 4 * H + j, sr = r * 2 * H + j;
      const i = sigmoid(g[gr]!), f = sigmoid(g[gr + H]!);
      const gg = Math.tanh(g[gr + 2 * H]!), o = sigmoid(g[gr + 3 * H]!);
      const c = f * s[sr + H]! + i * gg;
      n[sr + H] = c;
      n[sr] = o * Math.tanh(c);
    }
  }
}

const refLstmCell: RefKernel = (_k, ins, outs, p) => {
  lstmCellRows(p[0]!, p[1]!, ins[0]!.f, ins[1]!.f, outs[0]!.f);
};

/**
 * The chain rule through lstmCellRows, term by term: gates `g`, state `s`, next `n`, the next
 * state's gradient `d`, and more h gradients `extra` (row r of each at `r * H`, of `steps`
 * apart at `(r * steps + at) * H`) into `gg` and `gs`.
 */
function lstmCellBackwardRows(
  B: number,
  H: number,
  [g, s, n, d]: FArr[],
  extra: { f: FArr; steps: number; at: number }[],
  gg: FArr,
  gs: FArr,
): void {
  for (let r = 0; r < B; r++) {
    for (let j = 0; j < H; j++) {
      const gr = r * 4 * H + j, sr = r * 2 * H + j;
      const i = sigmoid(g![gr]!), f = sigmoid(g![gr + H]!);
      const t = Math.tanh(g![gr + 2 * H]!), o = sigmoid(g![gr + 3 * H]!);
      const tc = Math.tanh(n![sr + H]!);
      // summed in f32, as the native kernels do (dh is a float there)
      let dh = d![sr]!;
      for (const e of extra) dh = Math.fround(dh + e.f[(r * e.steps + e.at) * H + j]!);
      // dc through h' = o tanh(c'), plus the c' gradient from later steps
      const dc = d![sr + H]! + dh * o * (1 - tc * tc);
      gg[gr] = dc * t * i * (1 - i);
      gg[gr + H] = dc * s![sr + H]! * f * (1 - f);
      gg[gr + 2 * H] = dc * i * (1 - t * t);
      gg[gr + 3 * H] = dh * tc * o * (1 - o);
      gs[sr] = 0;
      gs[sr + H] = dc * f;
    }
  }
}

/** `lstm_cell_backward`: lstmCellBackwardRows with its extra h gradients. */
const refLstmCellBackward: RefKernel = (_k, ins, outs, p) => {
  const extra = ins.slice(4).map((b) => ({ f: b.f, steps: 1, at: 0 }));
  lstmCellBackwardRows(p[0]!, p[1]!, ins.map((b) => b.f), extra, outs[0]!.f, outs[1]!.f);
};

/** `lstm_step`: gates from xw's step t (+ h whh^T), the cell, and h apart. */
const refLstmStep: RefKernel = (_k, ins, outs, p) => {
  const [B, T, H, t, rec] = p as [number, number, number, number, number];
  const xw = ins[0]!.f;
  const n = outs[0]!.f, ho = outs[1]!.f, g = outs[2]!.f;
  // the product lands in the gates (f32) first, as in the native kernels
  if (rec) matmulF32(g, ins[2]!.f, ins[3]!.f, [1, B, 4 * H, H, 0, 1, 0, 0]);
  for (let r = 0; r < B; r++) {
    for (let k = 0; k < 4 * H; k++) {
      const x = xw[(r * T + t) * 4 * H + k]!;
      g[r * 4 * H + k] = rec ? x + g[r * 4 * H + k]! : x;
    }
  }
  lstmCellRows(B, H, g, ins[1]!.f, n);
  for (let r = 0; r < B; r++) {
    for (let j = 0; j < H; j++) ho[r * H + j] = n[r * 2 * H + j]!;
  }
};

/** `lstm_step_backward`: the cell's gradient with gy's step t (+ dhnext), then ggates whh. */
const refLstmStepBackward: RefKernel = (_k, ins, outs, p) => {
  const [B, T, H, t] = p as [number, number, number, number];
  const extra = [{ f: ins[4]!.f, steps: T, at: t }];
  if (t < T - 1) extra.push({ f: ins[6]!.f, steps: 1, at: 0 });
  lstmCellBackwardRows(B, H, ins.map((b) => b.f), extra, outs[0]!.f, outs[1]!.f);
  if (t > 0) matmulF32(outs[2]!.f, outs[0]!.f, ins[5]!.f, [1, B, H, 4 * H, 0, 0, 0, 0]);
};

const BINARY: Record<string, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  eq: (a, b) => (a === b ? 1 : 0),
  ne: (a, b) => (a !== b ? 1 : 0),
  lt: (a, b) => (a < b ? 1 : 0),
  le: (a, b) => (a <= b ? 1 : 0),
  gt: (a, b) => (a > b ? 1 : 0),
  ge: (a, b) => (a >= b ? 1 : 0),
};

const UNARY: Record<string, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  relu: (x) => (x > 0 ? x : 0),
  gelu_tanh: geluTanh,
  gelu_erf: (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)),
  silu: (x) => x * sigmoid(x),
  sigmoid,
  tanh: Math.tanh,
};

/** d y / d x as a function of the saved tensor (x, or y for sigmoid/tanh). */
const UNARY_GRAD: Record<string, (v: number) => number> = {
  relu_backward: (x) => (x > 0 ? 1 : 0),
  gelu_tanh_backward: geluTanhGrad,
  gelu_erf_backward: (x) =>
    0.5 * (1 + erf(x / Math.SQRT2)) + x * Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI),
  silu_backward: (x) => {
    const s = sigmoid(x);
    return s * (1 + x * (1 - s));
  },
  sigmoid_backward: (y) => y * (1 - y),
  tanh_backward: (y) => 1 - y * y,
};

const SCALAR: Record<string, (x: number, s: number) => number> = {
  add_scalar: (x, s) => x + s,
  mul_scalar: (x, s) => x * s,
  rsub_scalar: (x, s) => s - x,
  rdiv_scalar: (x, s) => s / x,
  pow_scalar: (x, s) => Math.pow(x, s),
  eq_scalar: (x, s) => (x === s ? 1 : 0),
  ne_scalar: (x, s) => (x !== s ? 1 : 0),
  lt_scalar: (x, s) => (x < s ? 1 : 0),
  le_scalar: (x, s) => (x <= s ? 1 : 0),
  gt_scalar: (x, s) => (x > s ? 1 : 0),
  ge_scalar: (x, s) => (x >= s ? 1 : 0),
};

/** The reference elementwise kernels, by name. */
export const REF_ELEMENTWISE: Readonly<Record<ElementwiseKernelName, RefKernel>> = {
  add: refBinary,
  sub: refBinary,
  mul: refBinary,
  div: refBinary,
  eq: refBinary,
  ne: refBinary,
  lt: refBinary,
  le: refBinary,
  gt: refBinary,
  ge: refBinary,
  where: refWhere,
  expand: refExpand,
  sum_to: refSumTo,
  neg: refUnary,
  exp: refUnary,
  log: refUnary,
  sqrt: refUnary,
  rsqrt: refUnary,
  relu: refUnary,
  gelu_tanh: refUnary,
  gelu_erf: refUnary,
  silu: refUnary,
  sigmoid: refUnary,
  tanh: refUnary,
  copy: refCopy,
  cast_f32_i32: refCastF32I32,
  cast_i32_f32: refCastI32F32,
  relu_backward: refUnaryBackward,
  gelu_tanh_backward: refUnaryBackward,
  gelu_erf_backward: refUnaryBackward,
  silu_backward: refUnaryBackward,
  sigmoid_backward: refUnaryBackward,
  tanh_backward: refUnaryBackward,
  add_scalar: refScalar,
  mul_scalar: refScalar,
  rsub_scalar: refScalar,
  rdiv_scalar: refScalar,
  pow_scalar: refScalar,
  eq_scalar: refScalar,
  ne_scalar: refScalar,
  lt_scalar: refScalar,
  le_scalar: refScalar,
  gt_scalar: refScalar,
  ge_scalar: refScalar,
  fill: refFill,
  fill_i32: refFillI32,
  add_inplace: refAddInplace,
  lstm_cell: refLstmCell,
  lstm_cell_backward: refLstmCellBackward,
  lstm_step: refLstmStep,
  lstm_step_backward: refLstmStepBackward,
};
