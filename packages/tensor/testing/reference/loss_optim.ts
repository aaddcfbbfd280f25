/**
 * Reference implementations of the loss_optim kernels (the plain-TypeScript twin of `native/cpu/loss_optim.c`).
 *
 * @module
 */

import { KernelError } from "../../backend.ts";
import type { LossOptimKernelName } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

const refCrossEntropy: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, classes] = p as [number, number];
  const t = ins[1]!.i;
  for (let r = 0; r < rows; r++) {
    const v = t[r]!;
    if (!Number.isInteger(v) || v < 0 || v >= classes) {
      throw new KernelError(k, `target ${v} of row ${r} is outside [0, ${classes})`);
    }
  }
  const gl = k === "cross_entropy_backward" ? ins[2]!.f[0]! : 0;
  let total = 0;
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let c = 0; c < classes; c++) m = Math.max(m, x[r * classes + c]!);
    let s = 0;
    for (let c = 0; c < classes; c++) s += Math.exp(x[r * classes + c]! - m);
    if (k === "cross_entropy") total += m + Math.log(s) - x[r * classes + t[r]!]!;
    else {
      for (let c = 0; c < classes; c++) {
        const sm = Math.exp(x[r * classes + c]! - m) / s;
        y[r * classes + c] = (sm - (c === t[r] ? 1 : 0)) * gl / rows;
      }
    }
  }
  if (k === "cross_entropy") y[0] = total / rows;
};

const refMse: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const b = ins[1]!.f;
  let s = 0;
  for (let i = 0; i < p[0]!; i++) s += (x[i]! - b[i]!) ** 2;
  y[0] = s / p[0]!;
};

const refMseBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const b = ins[1]!.f, gl = ins[2]!.f[0]!;
  for (let i = 0; i < p[0]!; i++) y[i] = 2 * (x[i]! - b[i]!) * gl / p[0]!;
};

const refSgdUpdate: RefKernel = (_k, ins, _outs, p) => {
  const [n, lr, mom, damp, wd, nesterov, first] = p as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const [param, grad, buf] = ins.map((b) => b.f) as FArr[];
  for (let i = 0; i < n; i++) {
    let g = grad![i]! + wd * param![i]!;
    if (mom !== 0) {
      buf![i] = first ? g : mom * buf![i]! + (1 - damp) * g;
      g = nesterov ? g + mom * buf![i]! : buf![i]!;
    }
    param![i] = param![i]! - lr * g;
  }
  return;
};

const refAdamwUpdate: RefKernel = (k, ins, _outs, p) => {
  const [n, lr, b1, b2, eps, wd, step] = p as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!Number.isInteger(step) || step < 1) {
    throw new KernelError(k, `step must be an integer >= 1, got ${step}`);
  }
  const [param, grad, m, v] = ins.map((b) => b.f) as FArr[];
  const bc1 = 1 - b1 ** step, bc2 = 1 - b2 ** step;
  for (let i = 0; i < n; i++) {
    const g = grad![i]!;
    param![i] = param![i]! * (1 - lr * wd);
    m![i] = b1 * m![i]! + (1 - b1) * g;
    v![i] = b2 * v![i]! + (1 - b2) * g * g;
    param![i] = param![i]! - lr * (m![i]! / bc1) / (Math.sqrt(v![i]! / bc2) + eps);
  }
  return;
};

/**
 * A `*_multi` update: `single` on each tensor's `stride` buffers with params
 * `n[t], <the six shared params>`.
 */
function multi(single: RefKernel, stride: (p: readonly number[]) => number): RefKernel {
  return (k, ins, outs, p) => {
    const count = p[0]!, w = stride(p), shared = p.slice(1, 7);
    for (let t = 0; t < count; t++) {
      single(k, ins.slice(w * t, w * t + w), outs, [p[7 + t]!, ...shared]);
    }
  };
}

/** The reference loss_optim kernels, by name. */
export const REF_LOSS_OPTIM: Readonly<Record<LossOptimKernelName, RefKernel>> = {
  cross_entropy: refCrossEntropy,
  cross_entropy_backward: refCrossEntropy,
  mse: refMse,
  mse_backward: refMseBackward,
  sgd_update: refSgdUpdate,
  adamw_update: refAdamwUpdate,
  sgd_update_multi: multi(refSgdUpdate, (p) => p[2] === 0 ? 2 : 3),
  adamw_update_multi: multi(refAdamwUpdate, () => 4),
};
