/**
 * Reference implementations of the norm kernels (the plain-TypeScript twin of `native/cpu/norm.c`).
 *
 * @module
 */

import type { NormKernelName } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

const refBatchNormStats: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [N, C, HW] = p as [number, number, number];
  const v = outs[1]!.f;
  const cnt = N * HW;
  for (let c = 0; c < C; c++) {
    let s = 0;
    for (let n = 0; n < N; n++) for (let j = 0; j < HW; j++) s += x[(n * C + c) * HW + j]!;
    const mean = s / cnt;
    let q = 0;
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < HW; j++) q += (x[(n * C + c) * HW + j]! - mean) ** 2;
    }
    y[c] = mean;
    v[c] = q / cnt;
  }
};

const refBatchNormApply: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [N, C, HW, eps] = p as [number, number, number, number];
  const [, mean, vr, gamma, beta] = ins.map((b) => b.f) as FArr[];
  for (let n = 0; n < N; n++) {
    for (let c = 0; c < C; c++) {
      const r = 1 / Math.sqrt(vr![c]! + eps);
      for (let j = 0; j < HW; j++) {
        const i = (n * C + c) * HW + j;
        y[i] = (x[i]! - mean![c]!) * r * gamma![c]! + beta![c]!;
      }
    }
  }
};

const refBatchNormUpdateRunning: RefKernel = (_k, ins, _outs, p) => {
  const [C, mom, count] = p as [number, number, number];
  const [mean, vr, rm, rv] = ins.map((b) => b.f) as FArr[];
  for (let c = 0; c < C; c++) {
    const unbiased = count > 1 ? vr![c]! * count / (count - 1) : vr![c]!;
    rm![c] = (1 - mom) * rm![c]! + mom * mean![c]!;
    rv![c] = (1 - mom) * rv![c]! + mom * unbiased;
  }
  return;
};

const refBatchNormBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [N, C, HW, eps] = p as [number, number, number, number];
  const [, gy, mean, vr, gamma] = ins.map((b) => b.f) as FArr[];
  const ggamma = outs[1]!.f, gbeta = outs[2]!.f;
  const M = N * HW;
  for (let c = 0; c < C; c++) {
    const r = 1 / Math.sqrt(vr![c]! + eps);
    let sg = 0, sgx = 0;
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < HW; j++) {
        const i = (n * C + c) * HW + j;
        sg += gy![i]!;
        sgx += gy![i]! * (x[i]! - mean![c]!) * r;
      }
    }
    gbeta[c] = sg;
    ggamma[c] = sgx;
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < HW; j++) {
        const i = (n * C + c) * HW + j;
        const xh = (x[i]! - mean![c]!) * r;
        y[i] = (gamma![c]! * r / M) * (M * gy![i]! - sg - xh * sgx);
      }
    }
  }
};

const refLayerNorm: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols, eps] = p as [number, number, number];
  const [, gamma, beta] = ins.map((b) => b.f) as FArr[];
  const meanO = outs[1]!.f, rstdO = outs[2]!.f;
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += x[r * cols + c]!;
    const mean = s / cols;
    let q = 0;
    for (let c = 0; c < cols; c++) q += (x[r * cols + c]! - mean) ** 2;
    const rstd = 1 / Math.sqrt(q / cols + eps);
    meanO[r] = mean;
    rstdO[r] = rstd;
    for (let c = 0; c < cols; c++) {
      y[r * cols + c] = (x[r * cols + c]! - mean) * rstd * gamma![c]! + beta![c]!;
    }
  }
};

const refLayerNormBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols] = p as [number, number];
  const [, gy, mean, rstd, gamma] = ins.map((b) => b.f) as FArr[];
  const gg = outs[1]!.f, gb = outs[2]!.f;
  const accG = new Float64Array(cols), accB = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const rs = rstd![r]!, mu = mean![r]!;
    let mg = 0, mgx = 0;
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const xh = (x[i]! - mu) * rs;
      const g = gy![i]! * gamma![c]!;
      mg += g;
      mgx += g * xh;
      accG[c]! += gy![i]! * xh;
      accB[c]! += gy![i]!;
    }
    mg /= cols;
    mgx /= cols;
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const xh = (x[i]! - mu) * rs;
      y[i] = rs * (gy![i]! * gamma![c]! - mg - xh * mgx);
    }
  }
  gg.set(accG);
  gb.set(accB);
};

const refRmsNorm: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols, eps] = p as [number, number, number];
  const gamma = ins[1]!.f;
  const rstdO = outs[1]!.f;
  for (let r = 0; r < rows; r++) {
    let q = 0;
    for (let c = 0; c < cols; c++) q += x[r * cols + c]! ** 2;
    const rs = 1 / Math.sqrt(q / cols + eps);
    rstdO[r] = rs;
    for (let c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c]! * rs * gamma[c]!;
  }
};

const refRmsNormBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, cols] = p as [number, number];
  const [, gy, rstd, gamma] = ins.map((b) => b.f) as FArr[];
  const gg = outs[1]!.f;
  const accG = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const rs = rstd![r]!;
    let mgx = 0;
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      mgx += gy![i]! * gamma![c]! * x[i]!;
      accG[c]! += gy![i]! * x[i]! * rs;
    }
    mgx /= cols;
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      y[i] = rs * (gy![i]! * gamma![c]! - x[i]! * rs * rs * mgx);
    }
  }
  gg.set(accG);
};

/** The reference norm kernels, by name. */
export const REF_NORM: Readonly<Record<NormKernelName, RefKernel>> = {
  batch_norm_stats: refBatchNormStats,
  batch_norm_apply: refBatchNormApply,
  batch_norm_update_running: refBatchNormUpdateRunning,
  batch_norm_backward: refBatchNormBackward,
  layer_norm: refLayerNorm,
  layer_norm_backward: refLayerNormBackward,
  rms_norm: refRmsNorm,
  rms_norm_backward: refRmsNormBackward,
};
