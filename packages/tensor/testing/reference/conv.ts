/**
 * Reference implementations of the conv kernels (the plain-TypeScript twin of `native/cpu/conv.c`).
 *
 * @module
 */

import { convDims, type ConvKernelName, poolDims } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

const refConv: RefKernel = (k, ins, outs, p) => {
  const d = convDims(k, p);
  const [sh, sw, ph, pw, dh, dw] = p.slice(7, 13) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const { N, C, H, W, K, R, S, OH, OW } = d;
  // Each (n, k, oh, ow, c, r, s) term links x[n, c, ih, iw], w[k, c, r, s] and y[n, k, oh, ow].
  const visit = (f: (xi: number, wi: number, yi: number) => void) => {
    for (let n = 0; n < N; n++) {
      for (let kk = 0; kk < K; kk++) {
        for (let oh = 0; oh < OH; oh++) {
          for (let ow = 0; ow < OW; ow++) {
            const yi = ((n * K + kk) * OH + oh) * OW + ow;
            for (let c = 0; c < C; c++) {
              for (let r = 0; r < R; r++) {
                const ih = oh * sh - ph + r * dh;
                if (ih < 0 || ih >= H) continue;
                for (let s = 0; s < S; s++) {
                  const iw = ow * sw - pw + s * dw;
                  if (iw < 0 || iw >= W) continue;
                  f(((n * C + c) * H + ih) * W + iw, ((kk * C + c) * R + r) * S + s, yi);
                }
              }
            }
          }
        }
      }
    }
  };
  if (k === "conv2d") {
    const x = ins[0]!.f, w = ins[1]!.f, y = outs[0]!.f;
    const acc = new Float64Array(N * K * OH * OW);
    if (d.hasBias) {
      const b = ins[2]!.f;
      for (let i = 0; i < acc.length; i++) acc[i] = b[Math.floor(i / (OH * OW)) % K]!;
    }
    visit((xi, wi, yi) => {
      acc[yi]! += x[xi]! * w[wi]!;
    });
    y.set(acc);
  } else if (k === "conv2d_backward_input") {
    const gy = ins[0]!.f, w = ins[1]!.f, gx = outs[0]!.f;
    const acc = new Float64Array(N * C * H * W);
    visit((xi, wi, yi) => {
      acc[xi]! += gy[yi]! * w[wi]!;
    });
    gx.set(acc);
  } else {
    const x = ins[0]!.f, gy = ins[1]!.f, gw = outs[0]!.f;
    const acc = new Float64Array(K * C * R * S);
    visit((xi, wi, yi) => {
      acc[wi]! += x[xi]! * gy[yi]!;
    });
    gw.set(acc);
  }
};

const refPool: RefKernel = (k, ins, outs, p) => {
  const { N, C, H, W, OH, OW } = poolDims(k, p);
  const [kh, kw, sh, sw, ph, pw] = p.slice(4) as [number, number, number, number, number, number];
  const isMax = k === "max_pool2d" || k === "max_pool2d_backward";
  const backward = k.endsWith("_backward");
  const x = ins[0]!.f;
  const gy = backward ? ins[isMax ? 1 : 0]!.f : null;
  const out = outs[0]!.f;
  if (backward) out.fill(0, 0, N * C * H * W);
  for (let q = 0; q < N * C; q++) {
    for (let oh = 0; oh < OH; oh++) {
      for (let ow = 0; ow < OW; ow++) {
        const oi = (q * OH + oh) * OW + ow;
        let best = -Infinity, arg = -1, sum = 0;
        for (let r = 0; r < kh; r++) {
          const ih = oh * sh - ph + r;
          for (let s = 0; s < kw; s++) {
            const iw = ow * sw - pw + s;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const xi = (q * H + ih) * W + iw;
            if (isMax) {
              const v = x[xi]!;
              if (arg < 0 || v > best || (Number.isNaN(v) && !Number.isNaN(best))) {
                best = v;
                arg = xi;
              }
            } else if (backward) {
              out[xi] = out[xi]! + gy![oi]! / (kh * kw);
            } else sum += x[xi]!;
          }
        }
        if (!backward) out[oi] = isMax ? best : sum / (kh * kw);
        else if (isMax && arg >= 0) out[arg] = out[arg]! + gy![oi]!;
      }
    }
  }
};

const refConvFamily: RefKernel = (k, ins, outs, p) => {
  return refConv(k, ins, outs, p);
};

const refConv2dBackwardBias: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [N, K, L] = p as [number, number, number];
  for (let kk = 0; kk < K; kk++) {
    let s = 0;
    for (let n = 0; n < N; n++) for (let l = 0; l < L; l++) s += x[(n * K + kk) * L + l]!;
    y[kk] = s;
  }
};

const refPoolFamily: RefKernel = (k, ins, outs, p) => {
  return refPool(k, ins, outs, p);
};

const refGlobalAvgPool: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, hw] = p as [number, number];
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let j = 0; j < hw; j++) s += x[r * hw + j]!;
    y[r] = s / hw;
  }
};

const refGlobalAvgPoolBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [rows, hw] = p as [number, number];
  for (let r = 0; r < rows; r++) for (let j = 0; j < hw; j++) y[r * hw + j] = x[r]! / hw;
};

const refUpsampleNearest2x: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [planes, H, W] = p as [number, number, number];
  for (let q = 0; q < planes; q++) {
    for (let i = 0; i < 2 * H; i++) {
      for (let j = 0; j < 2 * W; j++) {
        y[(q * 2 * H + i) * 2 * W + j] = x[(q * H + (i >> 1)) * W + (j >> 1)]!;
      }
    }
  }
};

const refUpsampleNearest2xBackward: RefKernel = (_k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [planes, H, W] = p as [number, number, number];
  for (let q = 0; q < planes; q++) {
    for (let i = 0; i < H; i++) {
      for (let j = 0; j < W; j++) {
        let s = 0;
        for (let di = 0; di < 2; di++) {
          for (let dj = 0; dj < 2; dj++) {
            s += x[(q * 2 * H + 2 * i + di) * 2 * W + 2 * j + dj]!;
          }
        }
        y[(q * H + i) * W + j] = s;
      }
    }
  }
};

/** The reference conv kernels, by name. */
export const REF_CONV: Readonly<Record<ConvKernelName, RefKernel>> = {
  conv2d: refConvFamily,
  conv2d_backward_input: refConvFamily,
  conv2d_backward_weight: refConvFamily,
  conv2d_backward_bias: refConv2dBackwardBias,
  max_pool2d: refPoolFamily,
  max_pool2d_backward: refPoolFamily,
  avg_pool2d: refPoolFamily,
  avg_pool2d_backward: refPoolFamily,
  global_avg_pool: refGlobalAvgPool,
  global_avg_pool_backward: refGlobalAvgPoolBackward,
  upsample_nearest2x: refUpsampleNearest2x,
  upsample_nearest2x_backward: refUpsampleNearest2xBackward,
};
