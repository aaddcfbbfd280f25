/**
 * The reduce ops (kernels of `native/cpu/reduce.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { KernelName } from "../kernels.ts";
import type { GradNode } from "../autograd.ts";
import { empty, type Tensor, view } from "../tensor.ts";
import { fmt, normAxis } from "../_shape.ts";
import { attrsOf, check, expandRaw, record, run } from "./_core.ts";
import { binaryRaw, scalarRaw } from "./elementwise.ts";

// ------------------------------------------------------------------ reductions

export interface ReduceAttrs {
  outer: number;
  dim: number;
  inner: number;
  xShape: readonly number[];
  keptShape: readonly number[];
  /** True when every axis was reduced (`max(x)` rather than `max(x, axis)`). */
  full: boolean;
}

export function reduceDims(op: string, x: Tensor, axis: number | undefined, keepdim: boolean) {
  const s = x.shape;
  if (axis === undefined) {
    const keptShape = s.map(() => 1);
    return {
      outer: 1,
      dim: x.size,
      inner: 1,
      outShape: keepdim ? keptShape : [],
      keptShape,
    };
  }
  const a = normAxis(op, axis, s.length, s);
  let outer = 1, inner = 1;
  for (let i = 0; i < a; i++) outer *= s[i]!;
  for (let i = a + 1; i < s.length; i++) inner *= s[i]!;
  const keptShape = s.map((d, i) => (i === a ? 1 : d));
  const outShape = keepdim ? keptShape : s.filter((_, i) => i !== a);
  return { outer, dim: s[a]!, inner, outShape, keptShape };
}

export function reduceEntry(name: "sum" | "mean" | "max", kernel: KernelName) {
  return {
    name,
    forward(x: Tensor, axis?: number, keepdim = false): Tensor {
      const be = check(name, [x]);
      const d = reduceDims(name, x, axis, keepdim);
      if (name === "max" && d.dim === 0) {
        throw new RangeError(`max: cannot reduce an empty axis of shape ${fmt(x.shape)}`);
      }
      const y = empty(be, d.outShape, "f32");
      run(kernel, [x], [y], [d.outer, d.dim, d.inner]);
      const attrs: ReduceAttrs = {
        outer: d.outer,
        dim: d.dim,
        inner: d.inner,
        xShape: x.shape,
        keptShape: d.keptShape,
        full: axis === undefined,
      };
      return record(this, y, [x], name === "max" ? [x] : [], attrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const a = attrsOf<ReduceAttrs>(node);
      if (name === "max") return [maxBackward(gy, node.saved[0]!, a)];
      let g = view(gy, a.keptShape);
      if (name === "mean") g = scalarRaw("mean", "mul_scalar", g, 1 / a.dim);
      return [expandRaw(g, a.xShape)];
    },
  };
}

/**
 * The gradient of `max` as PyTorch defines it: the output gradient is split
 * evenly among the elements equal to the maximum. `max(x)` over everything is
 * PyTorch's `x.max()` (`evenly_distribute_backward`: when the maximum is NaN,
 * the NaN elements share it); `max(x, axis)` returns values only, like
 * `torch.amax(x, axis)` (`scale_grad_by_count` over the mask `x == max`).
 * The temporaries die with the engine's scope around every gradient rule.
 */
export function maxBackward(gy: Tensor, x: Tensor, a: ReduceAttrs): Tensor {
  const p = [a.outer, a.dim, a.inner];
  const ym = empty(x.backend, a.keptShape, "f32");
  run("max_axis", [x], [ym], p);
  let mask = binaryRaw("max", "eq", x, ym);
  if (a.full) {
    const nan = binaryRaw(
      "max",
      "mul",
      binaryRaw("max", "ne", x, x),
      binaryRaw("max", "ne", ym, ym),
    );
    mask = binaryRaw("max", "add", mask, nan);
  }
  const count = empty(x.backend, a.keptShape, "f32");
  run("sum_axis", [mask], [count], p);
  return binaryRaw("max", "mul", mask, binaryRaw("max", "div", view(gy, a.keptShape), count));
}

/** The reduce ops: forward and gradient rule of each, by name. */
export const REDUCE_OPS = {
  sum: reduceEntry("sum", "sum_axis"),
  mean: reduceEntry("mean", "mean_axis"),
  max: reduceEntry("max", "max_axis"),

  softmax: {
    name: "softmax",
    forward(x: Tensor): Tensor {
      const be = check("softmax", [x]);
      if (x.ndim < 1) throw new RangeError(`softmax: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      const y = empty(be, x.shape, "f32");
      run("softmax", [x], [y], [cols === 0 ? 0 : x.size / cols, cols]);
      return record(this, y, [x], [y], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const cols = gy.shape[gy.ndim - 1]!;
      const gx = empty(gy.backend, gy.shape, "f32");
      run("softmax_backward", [node.saved[0]!, gy], [gx], [cols === 0 ? 0 : gy.size / cols, cols]);
      return [gx];
    },
  },
  log_softmax: {
    name: "log_softmax",
    forward(x: Tensor): Tensor {
      const be = check("logSoftmax", [x]);
      if (x.ndim < 1) throw new RangeError(`logSoftmax: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      const y = empty(be, x.shape, "f32");
      run("log_softmax", [x], [y], [cols === 0 ? 0 : x.size / cols, cols]);
      return record(this, y, [x], [y], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const cols = gy.shape[gy.ndim - 1]!;
      const gx = empty(gy.backend, gy.shape, "f32");
      run("log_softmax_backward", [node.saved[0]!, gy], [gx], [
        cols === 0 ? 0 : gy.size / cols,
        cols,
      ]);
      return [gx];
    },
  },
} as const;

/**
 * Sum over `axis` (negative counts from the end), or over everything when
 * `axis` is undefined; `keepdim` keeps the reduced axis with size 1.
 *
 * @example
 * ```ts
 * import { sum, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1, 2, 3], [4, 5, 6]]);
 * if (!(sum(x, 1).toArray().join() === "6,15")) throw new Error("example: unexpected result");
 * if (!(sum(x, 0, true).shape.join() === "1,3")) throw new Error("example: unexpected result");
 * if (!(sum(x).item() === 21)) throw new Error("example: unexpected result");
 * ```
 */
export function sum(x: Tensor, axis?: number, keepdim = false): Tensor {
  return REDUCE_OPS.sum.forward(x, axis, keepdim);
}
/**
 * Mean over `axis` or everything (see {@link sum}).
 *
 * @example
 * ```ts
 * import { mean, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(mean(tensor([[1, 2], [3, 4]]), 0).toArray().join() === "2,3")) throw new Error("example: unexpected result");
 * ```
 */
export function mean(x: Tensor, axis?: number, keepdim = false): Tensor {
  return REDUCE_OPS.mean.forward(x, axis, keepdim);
}
/**
 * Maximum over `axis` or everything (see {@link sum}); the gradient goes to the first maximum.
 *
 * @example
 * ```ts
 * import { max, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(max(tensor([[1, 5], [3, 4]]), 1).toArray().join() === "5,4")) throw new Error("example: unexpected result");
 * ```
 */
export function max(x: Tensor, axis?: number, keepdim = false): Tensor {
  return REDUCE_OPS.max.forward(x, axis, keepdim);
}

/**
 * Index (i32) of the first maximum over `axis`, or of the flattened tensor. Not differentiable.
 *
 * @example
 * ```ts
 * import { argmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const i = argmax(tensor([[1, 5], [3, 4]]), 1);
 * if (!(i.dtype === "i32" && i.toArray().join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function argmax(x: Tensor, axis?: number, keepdim = false): Tensor {
  const be = check("argmax", [x]);
  const d = reduceDims("argmax", x, axis, keepdim);
  if (d.dim === 0) throw new RangeError(`argmax: cannot reduce an empty axis of ${fmt(x.shape)}`);
  const y = empty(be, d.outShape, "i32");
  run("argmax_axis", [x], [y], [d.outer, d.dim, d.inner]);
  return y;
}

/**
 * Softmax over the last axis.
 *
 * @example
 * ```ts
 * import { softmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(softmax(tensor([[0, 0]])).toArray().join() === "0.5,0.5")) throw new Error("example: unexpected result");
 * ```
 */
export function softmax(x: Tensor): Tensor {
  return REDUCE_OPS.softmax.forward(x);
}
/**
 * Log-softmax over the last axis.
 *
 * @example
 * ```ts
 * import { logSoftmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(Math.abs(logSoftmax(tensor([0, 0])).toArray()[0]! + Math.LN2) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function logSoftmax(x: Tensor): Tensor {
  return REDUCE_OPS.log_softmax.forward(x);
}
