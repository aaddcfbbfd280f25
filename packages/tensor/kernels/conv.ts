/**
 * The conv kernels of the kernel table (the TypeScript side of `native/cpu/conv.c`).
 *
 * @module
 */

import {
  expectCounts,
  expectParams,
  expectPositive,
  F,
  fail,
  type KernelSpec,
  simple,
} from "./_spec.ts";

const CONV_LAYOUT = "N, C, H, W, K, R, S, strideH, strideW, padH, padW, dilH, dilW, hasBias";

/** Output size of a convolution or pooling window along one axis. */
export function convOutSize(
  size: number,
  kernel: number,
  stride: number,
  pad: number,
  dil = 1,
): number {
  return Math.floor((size + 2 * pad - dil * (kernel - 1) - 1) / stride) + 1;
}

/** Validated conv2d dimensions: input `N, C, H, W`, weight `K, C, R, S`, output `OH, OW`. */
export interface ConvDims {
  /** Batch size. */
  N: number;
  /** Input channels. */
  C: number;
  /** Input height. */
  H: number;
  /** Input width. */
  W: number;
  /** Output channels (filters). */
  K: number;
  /** Filter height. */
  R: number;
  /** Filter width. */
  S: number;
  /** Output height. */
  OH: number;
  /** Output width. */
  OW: number;
  /** True when a bias buffer follows the weights. */
  hasBias: boolean;
}

/** Parses and validates conv2d params; exported for backends. */
export function convDims(kernel: string, p: readonly number[]): ConvDims {
  expectParams(kernel, p, 14, CONV_LAYOUT);
  expectCounts(kernel, p, ["N", "C", "H", "W", "K", "R", "S"]);
  expectPositive(kernel, p, ["strideH", "strideW"], 7);
  expectCounts(kernel, p, ["padH", "padW"], 9);
  expectPositive(kernel, p, ["dilH", "dilW"], 11);
  const [N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, hb] = p as unknown as number[] & {
    length: 14;
  };
  if (hb !== 0 && hb !== 1) fail(kernel, `hasBias must be 0 or 1, got ${hb}`);
  const OH = convOutSize(H!, R!, sh!, ph!, dh!);
  const OW = convOutSize(W!, S!, sw!, pw!, dw!);
  if (OH < 1 || OW < 1) {
    fail(
      kernel,
      `input ${H}x${W} with padding ${ph}x${pw} is smaller than the dilated window ${R}x${S} (dilation ${dh}x${dw})`,
    );
  }
  return { N: N!, C: C!, H: H!, W: W!, K: K!, R: R!, S: S!, OH, OW, hasBias: hb === 1 };
}

const POOL_LAYOUT = "N, C, H, W, kH, kW, strideH, strideW, padH, padW";

/** Parses and validates pooling params; exported for backends. */
export function poolDims(
  kernel: string,
  p: readonly number[],
): { N: number; C: number; H: number; W: number; OH: number; OW: number } {
  expectParams(kernel, p, 10, POOL_LAYOUT);
  expectCounts(kernel, p, ["N", "C", "H", "W"]);
  expectPositive(kernel, p, ["kH", "kW", "strideH", "strideW"], 4);
  expectCounts(kernel, p, ["padH", "padW"], 8);
  const [N, C, H, W, kh, kw, sh, sw, ph, pw] = p as unknown as number[];
  if (2 * ph! > kh! || 2 * pw! > kw!) fail(kernel, `padding must be at most half the window`);
  const OH = convOutSize(H!, kh!, sh!, ph!);
  const OW = convOutSize(W!, kw!, sw!, pw!);
  if (OH < 1 || OW < 1) fail(kernel, `input ${H}x${W} is smaller than the window ${kh}x${kw}`);
  return { N: N!, C: C!, H: H!, W: W!, OH, OW };
}

function conv(
  inputs: string[],
  outputs: string[],
  doc: string,
): KernelSpec {
  return {
    inputs,
    outputs,
    params: CONV_LAYOUT,
    doc,
    sizes(p) {
      const d = convDims("", p);
      const bytes: Record<string, number> = {
        x: d.N * d.C * d.H * d.W * F,
        gx: d.N * d.C * d.H * d.W * F,
        w: d.K * d.C * d.R * d.S * F,
        gw: d.K * d.C * d.R * d.S * F,
        b: d.K * F,
        y: d.N * d.K * d.OH * d.OW * F,
        gy: d.N * d.K * d.OH * d.OW * F,
      };
      const ins = inputs.filter((n) => n !== "b?").map((n) => bytes[n]!);
      if (inputs.includes("b?") && d.hasBias) ins.push(bytes.b!);
      return { inputs: ins, outputs: outputs.map((n) => bytes[n]!) };
    },
    flops(p) {
      const d = convDims("conv2d", p);
      return 2 * d.N * d.K * d.OH * d.OW * d.C * d.R * d.S;
    },
  };
}

function pool(inputs: string[], outputs: string[], doc: string): KernelSpec {
  return {
    inputs,
    outputs,
    params: POOL_LAYOUT,
    doc,
    sizes(p) {
      const d = poolDims("", p);
      const big = d.N * d.C * d.H * d.W * F;
      const small = d.N * d.C * d.OH * d.OW * F;
      const bytes = (n: string) => (n === "x" || n === "gx" ? big : small);
      return { inputs: inputs.map(bytes), outputs: outputs.map(bytes) };
    },
    flops(p) {
      const d = poolDims("pool", p);
      return d.N * d.C * d.OH * d.OW * p[4]! * p[5]!;
    },
  };
}

/** Name of a conv kernel. */
export type ConvKernelName =
  | "conv2d"
  | "conv2d_backward_input"
  | "conv2d_backward_weight"
  | "conv2d_backward_bias"
  | "max_pool2d"
  | "max_pool2d_backward"
  | "avg_pool2d"
  | "avg_pool2d_backward"
  | "global_avg_pool"
  | "global_avg_pool_backward"
  | "upsample_nearest2x"
  | "upsample_nearest2x_backward";

/** The conv kernels, by name. */
export const CONV_KERNELS: Readonly<Record<ConvKernelName, KernelSpec>> = {
  // -- convolution and pooling (NCHW)
  conv2d: conv(
    ["x", "w", "b?"],
    ["y"],
    "y = conv2d(x [N,C,H,W], w [K,C,R,S]) + b [K] (bias input present iff hasBias = 1). OH = floor((H + 2 padH - dilH (R-1) - 1) / strideH) + 1, likewise OW; zero padding; cross-correlation as in PyTorch.",
  ),
  conv2d_backward_input: conv(
    ["gy", "w"],
    ["gx"],
    "gx = gradient of conv2d w.r.t. x (same params as conv2d).",
  ),
  conv2d_backward_weight: conv(
    ["x", "gy"],
    ["gw"],
    "gw = gradient of conv2d w.r.t. w (same params as conv2d).",
  ),
  conv2d_backward_bias: simple(
    ["gy"],
    ["gb"],
    ["N", "K", "L"],
    "gb[k] = sum over n, l of gy[n, k, l] (L = OH * OW).",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!], outputs: [p[1]!] }),
    (p) => p[0]! * p[1]! * p[2]!,
    {},
    ["N", "K", "L"],
  ),
  max_pool2d: pool(
    ["x"],
    ["y"],
    "Max pooling; padding counts as -inf; OH = floor((H + 2 padH - kH) / strideH) + 1.",
  ),
  max_pool2d_backward: pool(
    ["x", "gy"],
    ["gx"],
    "Routes each gy to the first maximum (row-major within the window) of its window, accumulating where windows overlap.",
  ),
  avg_pool2d: pool(
    ["x"],
    ["y"],
    "Average pooling, zero padding counted (count_include_pad = true).",
  ),
  avg_pool2d_backward: pool(["gy"], ["gx"], "Gradient of avg_pool2d (same params)."),
  global_avg_pool: simple(
    ["x"],
    ["y"],
    ["rows", "hw"],
    "y[r] = mean of x[r, 0..hw) (rows = N*C).",
    (p) => ({ inputs: [p[0]! * p[1]!], outputs: [p[0]!] }),
    (p) => p[0]! * p[1]!,
    {},
    ["rows", "hw"],
  ),
  global_avg_pool_backward: simple(
    ["gy"],
    ["gx"],
    ["rows", "hw"],
    "gx[r, j] = gy[r] / hw.",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]! * p[1]!] }),
    (p) => p[0]! * p[1]!,
    {},
    ["rows", "hw"],
  ),
  upsample_nearest2x: simple(
    ["x"],
    ["y"],
    ["planes", "H", "W"],
    "y[p, i, j] = x[p, floor(i/2), floor(j/2)]; y is [planes, 2H, 2W].",
    (p) => ({ inputs: [p[0]! * p[1]! * p[2]!], outputs: [4 * p[0]! * p[1]! * p[2]!] }),
    () => 0,
    {},
    ["planes", "H", "W"],
  ),
  upsample_nearest2x_backward: simple(
    ["gy"],
    ["gx"],
    ["planes", "H", "W"],
    "gx[p, i, j] = sum of the 2x2 block of gy it was copied to.",
    (p) => ({ inputs: [4 * p[0]! * p[1]! * p[2]!], outputs: [p[0]! * p[1]! * p[2]!] }),
    (p) => 4 * p[0]! * p[1]! * p[2]!,
    {},
    ["planes", "H", "W"],
  ),
};
