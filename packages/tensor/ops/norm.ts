/**
 * The norm ops (kernels of `native/cpu/norm.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, type Tensor, view } from "../tensor.ts";
import { fmt } from "../_shape.ts";
import { attrsOf, check, record, run } from "./_core.ts";
import { add, mul, rsqrt, sub } from "./elementwise.ts";
import { sum } from "./reduce.ts";

export interface NormAttrs {
  params: number[];
}

/** The norm ops: forward and gradient rule of each, by name. */
export const NORM_OPS = {
  batch_norm: {
    name: "batch_norm",
    forward(x: Tensor, gamma: Tensor, beta: Tensor, opts: BatchNormOptions): Tensor {
      const rm = opts.runningMean ?? null, rv = opts.runningVar ?? null;
      const all = [x, gamma, beta];
      if (rm) all.push(rm);
      if (rv) all.push(rv);
      const be = check("batchNorm", all);
      if (x.ndim < 2) {
        throw new RangeError(`batchNorm: expected [N,C,...] input, got ${fmt(x.shape)}`);
      }
      const N = x.shape[0]!, C = x.shape[1]!, HW = x.size / Math.max(1, N * C) || 0;
      for (
        const [nm, t] of [["gamma", gamma], ["beta", beta], ["runningMean", rm], [
          "runningVar",
          rv,
        ]] as const
      ) {
        if (t && (t.ndim !== 1 || t.shape[0] !== C)) {
          throw new RangeError(
            `batchNorm: ${nm} must be [${C}] for input ${fmt(x.shape)}, got ${fmt(t.shape)}`,
          );
        }
      }
      const eps = opts.eps ?? 1e-5;
      const training = opts.training ?? true;
      const p = [N, C, HW, eps];
      const y = empty(be, x.shape, "f32");
      if (!training) {
        if (!rm || !rv) {
          throw new Error(
            "batchNorm: eval mode (training: false) needs runningMean and runningVar",
          );
        }
        run("batch_norm_apply", [x, rm, rv, gamma, beta], [y], p);
        return record(this, y, [x, gamma, beta], [x, rm, rv, gamma], { p, training });
      }
      const mean = empty(be, [C], "f32"), vr = empty(be, [C], "f32");
      try {
        run("batch_norm_stats", [x], [mean, vr], [N, C, HW]);
        run("batch_norm_apply", [x, mean, vr, gamma, beta], [y], p);
        if (rm && rv) {
          run("batch_norm_update_running", [mean, vr, rm, rv], [], [
            C,
            opts.momentum ?? 0.1,
            N * HW,
          ]);
        }
        return record(this, y, [x, gamma, beta], [x, mean, vr, gamma], { p, training });
      } finally {
        mean.dispose();
        vr.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { p, training } = attrsOf<{ p: number[]; training: boolean }>(node);
      const [x, mean, vr, gamma] = node.saved as [Tensor, Tensor, Tensor, Tensor];
      const [N, C, HW, eps] = p as [number, number, number, number];
      if (training) {
        const gx = empty(gy.backend, x.shape, "f32");
        const gg = empty(gy.backend, [C], "f32"), gb = empty(gy.backend, [C], "f32");
        run("batch_norm_backward", [x, gy, mean, vr, gamma], [gx, gg, gb], p);
        return [gx, gg, gb];
      }
      // Eval mode is a per-channel affine map of x: compose the gradient from simple ops.
      const g3 = view(gy, [N, C, HW]);
      const rstd = rsqrt(add(vr, eps));
      const scale = view(mul(gamma, rstd), [1, C, 1]);
      const gx = node.inputs[0] ? view(mul(g3, scale), x.shape) : null;
      let gg: Tensor | null = null;
      if (node.inputs[1]) {
        const xhat = mul(sub(view(x, [N, C, HW]), view(mean, [1, C, 1])), view(rstd, [1, C, 1]));
        gg = sum(sum(mul(g3, xhat), 2), 0);
      }
      const gb = node.inputs[2] ? sum(sum(g3, 2), 0) : null;
      return [gx, gg, gb];
    },
  },

  layer_norm: {
    name: "layer_norm",
    forward(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): Tensor {
      const be = check("layerNorm", [x, gamma, beta]);
      if (x.ndim < 1) throw new RangeError(`layerNorm: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      for (const [nm, t] of [["gamma", gamma], ["beta", beta]] as const) {
        if (t.ndim !== 1 || t.shape[0] !== cols) {
          throw new RangeError(
            `layerNorm: ${nm} must be [${cols}] for input ${fmt(x.shape)}, got ${fmt(t.shape)}`,
          );
        }
      }
      const rows = cols === 0 ? 0 : x.size / cols;
      const y = empty(be, x.shape, "f32");
      const mean = empty(be, [rows], "f32"), rstd = empty(be, [rows], "f32");
      try {
        run("layer_norm", [x, gamma, beta], [y, mean, rstd], [rows, cols, eps]);
        return record(
          this,
          y,
          [x, gamma, beta],
          [x, mean, rstd, gamma],
          {
            params: [rows, cols],
          } satisfies NormAttrs,
        );
      } finally {
        mean.dispose();
        rstd.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<NormAttrs>(node);
      const [x, mean, rstd, gamma] = node.saved as [Tensor, Tensor, Tensor, Tensor];
      const gx = empty(gy.backend, x.shape, "f32");
      const gg = empty(gy.backend, gamma.shape, "f32"), gb = empty(gy.backend, gamma.shape, "f32");
      run("layer_norm_backward", [x, gy, mean, rstd, gamma], [gx, gg, gb], params);
      return [gx, gg, gb];
    },
  },

  rms_norm: {
    name: "rms_norm",
    forward(x: Tensor, gamma: Tensor, eps: number): Tensor {
      const be = check("rmsNorm", [x, gamma]);
      if (x.ndim < 1) throw new RangeError(`rmsNorm: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      if (gamma.ndim !== 1 || gamma.shape[0] !== cols) {
        throw new RangeError(
          `rmsNorm: gamma must be [${cols}] for input ${fmt(x.shape)}, got ${fmt(gamma.shape)}`,
        );
      }
      const rows = cols === 0 ? 0 : x.size / cols;
      const y = empty(be, x.shape, "f32");
      const rstd = empty(be, [rows], "f32");
      try {
        run("rms_norm", [x, gamma], [y, rstd], [rows, cols, eps]);
        return record(
          this,
          y,
          [x, gamma],
          [x, rstd, gamma],
          {
            params: [rows, cols],
          } satisfies NormAttrs,
        );
      } finally {
        rstd.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<NormAttrs>(node);
      const [x, rstd, gamma] = node.saved as [Tensor, Tensor, Tensor];
      const gx = empty(gy.backend, x.shape, "f32");
      const gg = empty(gy.backend, gamma.shape, "f32");
      run("rms_norm_backward", [x, gy, rstd, gamma], [gx, gg], params);
      return [gx, gg];
    },
  },
} as const;

/** Options of {@link batchNorm}. */
export interface BatchNormOptions {
  /** Running mean `[C]`, updated in place in training mode. */
  runningMean?: Tensor | null;
  /** Running (unbiased) variance `[C]`, updated in place in training mode. */
  runningVar?: Tensor | null;
  /** Batch statistics and running-stat update (default true); false uses the running stats. */
  training?: boolean;
  /** Running-stat momentum (default 0.1, PyTorch convention). */
  momentum?: number;
  /** Default 1e-5. */
  eps?: number;
}

/**
 * Batch normalization over `[N, C, ...]` with per-channel `gamma` and `beta`.
 *
 * @example
 * ```ts
 * import { batchNorm, ones, zeros, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1], [3]]); // N=2, C=1
 * const rm = zeros([1]), rv = ones([1]);
 * const y = batchNorm(x, ones([1]), zeros([1]), { runningMean: rm, runningVar: rv, eps: 0 });
 * if (!(y.toArray().join() === "-1,1")) throw new Error("example: unexpected result");
 * if (!(Math.abs(rm.item() - 0.2) < 1e-6)) throw new Error("example: unexpected result"); // 0.9 * 0 + 0.1 * 2
 * ```
 */
export function batchNorm(
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  options: BatchNormOptions = {},
): Tensor {
  return NORM_OPS.batch_norm.forward(x, gamma, beta, options);
}

/**
 * Layer normalization over the last axis with `gamma`, `beta` of that size.
 *
 * @example
 * ```ts
 * import { layerNorm, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = layerNorm(tensor([[1, 3]]), tensor([1, 1]), tensor([0, 0]), 0);
 * if (!(y.toArray().join() === "-1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): Tensor {
  return NORM_OPS.layer_norm.forward(x, gamma, beta, eps);
}

/**
 * RMS normalization over the last axis with `gamma` of that size.
 *
 * @example
 * ```ts
 * import { rmsNorm, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = rmsNorm(tensor([[3, 4]]), tensor([1, 1]), 0);
 * if (!(Math.abs(y.toArray()[1]! - 4 / Math.sqrt(12.5)) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function rmsNorm(x: Tensor, gamma: Tensor, eps = 1e-6): Tensor {
  return NORM_OPS.rms_norm.forward(x, gamma, eps);
}
