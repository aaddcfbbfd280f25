/**
 * Reference implementations of the reduce kernels (the plain-TypeScript twin of `native/cpu/reduce.c`).
 *
 * @module
 */

import { KernelError } from "../../backend.ts";
import type { ReduceKernelName } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

const refAxisReduce: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [outer, dim, inner] = p as [number, number, number];
  if ((k === "max_axis" || k === "argmax_axis") && dim === 0 && outer * inner > 0) {
    throw new KernelError(k, `cannot take the maximum over an empty axis (dim = 0)`);
  }
  const yi = outs[0]!.i;
  for (let o = 0; o < outer; o++) {
    for (let j = 0; j < inner; j++) {
      const base = o * dim * inner + j;
      if (k === "sum_axis" || k === "mean_axis") {
        let s = 0;
        for (let d = 0; d < dim; d++) s += x[base + d * inner]!;
        y[o * inner + j] = k === "sum_axis" ? s : s / dim;
      } else {
        let best = x[base]!, arg = 0;
        for (let d = 1; d < dim; d++) {
          const v = x[base + d * inner]!;
          if (!Number.isNaN(best) && (v > best || Number.isNaN(v))) {
            best = v;
            arg = d;
          }
        }
        if (k === "max_axis") y[o * inner + j] = best;
        else yi[o * inner + j] = arg;
      }
    }
  }
};

const refMaxAxisBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [outer, dim, inner] = p as [number, number, number];
  const gy = ins[1]!.f;
  y.fill(0, 0, outer * dim * inner);
  for (let o = 0; o < outer; o++) {
    for (let j = 0; j < inner; j++) {
      const base = o * dim * inner + j;
      let best = x[base]!, arg = 0;
      for (let d = 1; d < dim; d++) {
        const v = x[base + d * inner]!;
        if (!Number.isNaN(best) && (v > best || Number.isNaN(v))) {
          best = v;
          arg = d;
        }
      }
      if (dim > 0) y[base + arg * inner] = gy[o * inner + j]!;
    }
  }
};

const refSoftmax: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols] = p as [number, number];
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, x[r * cols + c]!);
    let s = 0;
    for (let c = 0; c < cols; c++) s += Math.exp(x[r * cols + c]! - m);
    const ls = Math.log(s);
    for (let c = 0; c < cols; c++) {
      const v = x[r * cols + c]! - m;
      y[r * cols + c] = k === "softmax" ? Math.exp(v) / s : v - ls;
    }
  }
};

const refSoftmaxBackward: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols] = p as [number, number];
  const gy = ins[1]!.f;
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) {
      s += k === "softmax_backward" ? gy[r * cols + c]! * x[r * cols + c]! : gy[r * cols + c]!;
    }
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      y[i] = k === "softmax_backward" ? x[i]! * (gy[i]! - s) : gy[i]! - Math.exp(x[i]!) * s;
    }
  }
};

/** The reference reduce kernels, by name. */
export const REF_REDUCE: Readonly<Record<ReduceKernelName, RefKernel>> = {
  sum_axis: refAxisReduce,
  mean_axis: refAxisReduce,
  max_axis: refAxisReduce,
  argmax_axis: refAxisReduce,
  max_axis_backward: refMaxAxisBackward,
  softmax: refSoftmax,
  log_softmax: refSoftmax,
  softmax_backward: refSoftmaxBackward,
  log_softmax_backward: refSoftmaxBackward,
};
