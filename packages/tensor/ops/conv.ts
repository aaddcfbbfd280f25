/**
 * The conv ops (kernels of `native/cpu/conv.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import { convOutSize, type KernelName, poolDims } from "../kernels.ts";
import type { GradNode } from "../autograd.ts";
import { empty, type Tensor } from "../tensor.ts";
import { fmt } from "../_shape.ts";
import { attrsOf, check, record, run } from "./_core.ts";

export function pair(
  op: string,
  name: string,
  v: number | readonly number[] | undefined,
  dflt: number,
) {
  const p = v === undefined ? [dflt, dflt] : typeof v === "number" ? [v, v] : v;
  if (p.length !== 2 || !p.every((x) => Number.isInteger(x) && x >= 0)) {
    throw new RangeError(`${op}: ${name} must be a non-negative integer or a pair, got ${v}`);
  }
  return p as [number, number];
}

export function need4d(op: string, x: Tensor): [number, number, number, number] {
  if (x.ndim !== 4) throw new RangeError(`${op}: expected an [N,C,H,W] input, got ${fmt(x.shape)}`);
  return x.shape as unknown as [number, number, number, number];
}

export interface ConvAttrs {
  params: number[];
  hasBias: boolean;
}
export interface PoolAttrs {
  params: number[];
  xShape: readonly number[];
}

/** The conv ops: forward and gradient rule of each, by name. */
export const CONV_OPS = {
  conv2d: {
    name: "conv2d",
    forward(x: Tensor, w: Tensor, bias: Tensor | null, opts: Conv2dOptions): Tensor {
      const be = check("conv2d", bias ? [x, w, bias] : [x, w]);
      const [N, C, H, W] = need4d("conv2d", x);
      if (w.ndim !== 4) {
        throw new RangeError(`conv2d: weight must be [K,C,R,S], got ${fmt(w.shape)}`);
      }
      const [K, Cw, R, S] = w.shape as [number, number, number, number];
      if (Cw !== C) {
        throw new RangeError(
          `conv2d: input channels differ: x ${fmt(x.shape)} has ${C}, weight ${
            fmt(w.shape)
          } expects ${Cw}`,
        );
      }
      if (bias && (bias.ndim !== 1 || bias.shape[0] !== K)) {
        throw new RangeError(`conv2d: bias must be [${K}], got ${fmt(bias.shape)}`);
      }
      const [sh, sw] = pair("conv2d", "stride", opts.stride, 1);
      const [ph, pw] = pair("conv2d", "padding", opts.padding, 0);
      const [dh, dw] = pair("conv2d", "dilation", opts.dilation, 1);
      if (sh < 1 || sw < 1 || dh < 1 || dw < 1) {
        throw new RangeError(`conv2d: stride and dilation must be >= 1`);
      }
      const OH = convOutSize(H, R, sh, ph, dh), OW = convOutSize(W, S, sw, pw, dw);
      if (OH < 1 || OW < 1) {
        throw new RangeError(
          `conv2d: input ${fmt(x.shape)} (padding ${ph}x${pw}) is smaller than the dilated kernel ${
            fmt(w.shape)
          }`,
        );
      }
      const params = [N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, bias ? 1 : 0];
      const y = empty(be, [N, K, OH, OW], "f32");
      run("conv2d", bias ? [x, w, bias] : [x, w], [y], params);
      const ins = bias ? [x, w, bias] : [x, w];
      return record(this, y, ins, [x, w], { params, hasBias: bias !== null } satisfies ConvAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<ConvAttrs>(node);
      const p = params.slice(0, 13).concat(0);
      const [x, w] = node.saved as [Tensor, Tensor];
      let gx: Tensor | null = null, gw: Tensor | null = null, gb: Tensor | null = null;
      if (node.inputs[0]) {
        gx = empty(gy.backend, x.shape, "f32");
        run("conv2d_backward_input", [gy, w], [gx], p);
      }
      if (node.inputs[1]) {
        gw = empty(gy.backend, w.shape, "f32");
        run("conv2d_backward_weight", [x, gy], [gw], p);
      }
      if (node.inputs.length > 2 && node.inputs[2]) {
        const [N, K, OH, OW] = gy.shape as [number, number, number, number];
        gb = empty(gy.backend, [K], "f32");
        run("conv2d_backward_bias", [gy], [gb], [N, K, OH * OW]);
      }
      return [gx, gw, gb];
    },
  },

  max_pool2d: {
    name: "max_pool2d",
    forward(x: Tensor, opts: Pool2dOptions): Tensor {
      const { y, params } = poolForward("maxPool2d", "max_pool2d", x, opts);
      return record(this, y, [x], [x], { params, xShape: x.shape } satisfies PoolAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params, xShape } = attrsOf<PoolAttrs>(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("max_pool2d_backward", [node.saved[0]!, gy], [gx], params);
      return [gx];
    },
  },
  avg_pool2d: {
    name: "avg_pool2d",
    forward(x: Tensor, opts: Pool2dOptions): Tensor {
      const { y, params } = poolForward("avgPool2d", "avg_pool2d", x, opts);
      return record(this, y, [x], [], { params, xShape: x.shape } satisfies PoolAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params, xShape } = attrsOf<PoolAttrs>(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("avg_pool2d_backward", [gy], [gx], params);
      return [gx];
    },
  },
  global_avg_pool: {
    name: "global_avg_pool",
    forward(x: Tensor): Tensor {
      const be = check("globalAvgPool", [x]);
      const [N, C, H, W] = need4d("globalAvgPool", x);
      const y = empty(be, [N, C], "f32");
      run("global_avg_pool", [x], [y], [N * C, H * W]);
      return record(this, y, [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const xs = node.attrs as [number, number, number, number];
      const gx = empty(gy.backend, xs, "f32");
      run("global_avg_pool_backward", [gy], [gx], [xs[0] * xs[1], xs[2] * xs[3]]);
      return [gx];
    },
  },
  upsample_nearest2x: {
    name: "upsample_nearest2x",
    forward(x: Tensor): Tensor {
      const be = check("upsampleNearest2x", [x]);
      const [N, C, H, W] = need4d("upsampleNearest2x", x);
      const y = empty(be, [N, C, 2 * H, 2 * W], "f32");
      run("upsample_nearest2x", [x], [y], [N * C, H, W]);
      return record(this, y, [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const xs = node.attrs as [number, number, number, number];
      const gx = empty(gy.backend, xs, "f32");
      run("upsample_nearest2x_backward", [gy], [gx], [xs[0] * xs[1], xs[2], xs[3]]);
      return [gx];
    },
  },
} as const;

export function pool2dParams(op: string, x: Tensor, opts: Pool2dOptions): number[] {
  const [N, C, H, W] = need4d(op, x);
  const [kh, kw] = pair(op, "kernelSize", opts.kernelSize, 1);
  const [sh, sw] = pair(op, "stride", opts.stride ?? opts.kernelSize, 1);
  const [ph, pw] = pair(op, "padding", opts.padding, 0);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1) {
    throw new RangeError(`${op}: kernelSize and stride must be >= 1`);
  }
  if (2 * ph > kh || 2 * pw > kw) {
    throw new RangeError(`${op}: padding ${ph}x${pw} must be at most half the window ${kh}x${kw}`);
  }
  if (convOutSize(H, kh, sh, ph) < 1 || convOutSize(W, kw, sw, pw) < 1) {
    throw new RangeError(`${op}: input ${fmt(x.shape)} is smaller than the window ${kh}x${kw}`);
  }
  return [N, C, H, W, kh, kw, sh, sw, ph, pw];
}

export function poolForward(op: string, kernel: KernelName, x: Tensor, opts: Pool2dOptions) {
  const be = check(op, [x]);
  const params = pool2dParams(op, x, opts);
  const { N, C, OH, OW } = poolDims(op, params);
  const y = empty(be, [N, C, OH, OW], "f32");
  run(kernel, [x], [y], params);
  return { y, params };
}

/** Options of {@link conv2d}: each a number or an `[h, w]` pair. */
export interface Conv2dOptions {
  /** Default 1. */
  stride?: number | readonly [number, number];
  /** Zero padding, default 0. */
  padding?: number | readonly [number, number];
  /** Default 1. */
  dilation?: number | readonly [number, number];
}

/**
 * 2-D convolution (cross-correlation, NCHW) of `x [N,C,H,W]` with `w [K,C,R,S]`
 * plus an optional `bias [K]`.
 *
 * @example
 * ```ts
 * import { conv2d, ones, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = conv2d(ones([1, 1, 4, 4]), ones([2, 1, 3, 3]), null, { padding: 1 });
 * if (!(y.shape.join() === "1,2,4,4" && y.toArray()[5] === 9)) throw new Error("example: unexpected result");
 * ```
 */
export function conv2d(
  x: Tensor,
  w: Tensor,
  bias: Tensor | null = null,
  options: Conv2dOptions = {},
): Tensor {
  return CONV_OPS.conv2d.forward(x, w, bias, options);
}

/** Options of the 2-D pooling ops; each a number or an `[h, w]` pair. */
export interface Pool2dOptions {
  /** Window size. */
  kernelSize: number | readonly [number, number];
  /** Default: the window size. */
  stride?: number | readonly [number, number];
  /** Default 0 (at most half the window). */
  padding?: number | readonly [number, number];
}

/**
 * Max pooling over `[N,C,H,W]` (padding counts as -inf).
 *
 * @example
 * ```ts
 * import { maxPool2d, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(maxPool2d(x, { kernelSize: 2 }).item() === 4)) throw new Error("example: unexpected result");
 * ```
 */
export function maxPool2d(x: Tensor, options: Pool2dOptions): Tensor {
  return CONV_OPS.max_pool2d.forward(x, options);
}
/**
 * Average pooling over `[N,C,H,W]` (zero padding counted).
 *
 * @example
 * ```ts
 * import { avgPool2d, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(avgPool2d(x, { kernelSize: 2 }).item() === 2.5)) throw new Error("example: unexpected result");
 * ```
 */
export function avgPool2d(x: Tensor, options: Pool2dOptions): Tensor {
  return CONV_OPS.avg_pool2d.forward(x, options);
}
/**
 * Mean over H and W: `[N,C,H,W]` to `[N,C]`.
 *
 * @example
 * ```ts
 * import { globalAvgPool, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(globalAvgPool(x).shape.join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function globalAvgPool(x: Tensor): Tensor {
  return CONV_OPS.global_avg_pool.forward(x);
}
/**
 * Nearest-neighbour upsampling by 2: `[N,C,H,W]` to `[N,C,2H,2W]`.
 *
 * @example
 * ```ts
 * import { upsampleNearest2x, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = upsampleNearest2x(tensor([1, 2], [1, 1, 1, 2]));
 * if (!(y.toArray().join() === "1,1,2,2,1,1,2,2")) throw new Error("example: unexpected result");
 * ```
 */
export function upsampleNearest2x(x: Tensor): Tensor {
  return CONV_OPS.upsample_nearest2x.forward(x);
}
