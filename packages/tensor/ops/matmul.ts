/**
 * The matmul ops (kernels of `native/cpu/matmul.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, type Tensor, view } from "../tensor.ts";
import { broadcastShapes, fmt, numel, sameShape } from "../_shape.ts";
import { attrsOf, check, checkRank, expandRaw, record, run, sumTo } from "./_core.ts";
import { reshape } from "./layout.ts";

// ------------------------------------------------------------------ matmul core

/** Batched matmul with broadcast batch dims, no recording. */
export function mm(op: string, a: Tensor, b: Tensor, ta: boolean, tb: boolean): Tensor {
  const be = check(op, [a, b]);
  if (a.ndim < 2 || b.ndim < 2) {
    throw new RangeError(
      `${op}: operands need at least 2 dimensions, got ${fmt(a.shape)} and ${fmt(b.shape)}`,
    );
  }
  const ra = a.shape[a.ndim - 2]!, ca = a.shape[a.ndim - 1]!;
  const rb = b.shape[b.ndim - 2]!, cb = b.shape[b.ndim - 1]!;
  const m = ta ? ca : ra, k = ta ? ra : ca;
  const kb = tb ? cb : rb, n = tb ? rb : cb;
  if (k !== kb) {
    const sa = ta ? `${fmt(a.shape)}^T` : fmt(a.shape);
    const sb = tb ? `${fmt(b.shape)}^T` : fmt(b.shape);
    throw new RangeError(`${op}: inner dimensions differ: ${sa} @ ${sb} (${k} vs ${kb})`);
  }
  const ba = a.shape.slice(0, -2), bb = b.shape.slice(0, -2);
  const batchShape = sameShape(ba, bb) ? ba : broadcastShapes(op, ba, bb);
  const outShape = [...batchShape, m, n];
  checkRank(op, outShape);
  const batch = numel(batchShape);
  let A = a, B = b;
  let sa = m * k, sb = k * n;
  if (numel(ba) === 1) sa = 0;
  else if (!sameShape(ba, batchShape)) {
    A = expandRaw(a, [...batchShape, ra, ca]);
  }
  if (numel(bb) === 1) sb = 0;
  else if (!sameShape(bb, batchShape)) {
    B = expandRaw(b, [...batchShape, rb, cb]);
  }
  const y = empty(be, outShape, "f32");
  try {
    run("matmul", [A, B], [y], [batch, m, n, k, ta ? 1 : 0, tb ? 1 : 0, sa, sb]);
  } finally {
    if (A !== a) A.dispose();
    if (B !== b) B.dispose();
  }
  return y;
}

/** The matmul ops: forward and gradient rule of each, by name. */
export const MATMUL_OPS = {
  matmul: {
    name: "matmul",
    forward(a: Tensor, b: Tensor, ta: boolean, tb: boolean): Tensor {
      const y = mm("matmul", a, b, ta, tb);
      return record(this, y, [a, b], [a, b], { ta, tb });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { ta, tb } = attrsOf<{ ta: boolean; tb: boolean }>(node);
      const [a, b] = node.saved as [Tensor, Tensor];
      let ga: Tensor | null = null, gb: Tensor | null = null;
      if (node.inputs[0]) {
        ga = ta ? mm("matmul", b, gy, tb, true) : mm("matmul", gy, b, false, !tb);
        ga = sumTo(ga, a.shape);
      }
      if (node.inputs[1]) {
        gb = tb ? mm("matmul", gy, a, true, ta) : mm("matmul", a, gy, !ta, false);
        gb = sumTo(gb, b.shape);
      }
      return [ga, gb];
    },
  },
  linear: {
    name: "linear",
    forward(x: Tensor, w: Tensor, b: Tensor): Tensor {
      const be = check("linear", [x, w, b]);
      const k = w.shape[1]!, n = w.shape[0]!;
      if (w.ndim !== 2 || x.ndim < 1 || x.shape[x.ndim - 1] !== k || b.ndim !== 1 || b.size !== n) {
        throw new RangeError(
          `linear: x ${fmt(x.shape)}, w ${fmt(w.shape)} and b ${
            fmt(b.shape)
          } must be [..., k], [n, k] and [n]`,
        );
      }
      const lead = x.shape.slice(0, -1);
      const y = empty(be, [...lead, n], "f32");
      run("linear", [x, w, b], [y], [numel(lead), n, k]);
      return record(this, y, [x, w, b], [x, w], {});
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [x, w] = node.saved as [Tensor, Tensor];
      const n = w.shape[0]!, k = w.shape[1]!, m = numel(x.shape.slice(0, -1));
      // As matmul's and add's rules on the [m, k] product give them (the same kernel calls).
      const x2 = x.ndim === 2 ? x : view(x, [m, k]), gy2 = gy.ndim === 2 ? gy : view(gy, [m, n]);
      try {
        let gx: Tensor | null = null;
        if (node.inputs[0]) {
          const g = mm("linear", gy2, w, false, false);
          gx = x.ndim === 2 ? g : view(g, x.shape);
          if (gx !== g) g.dispose();
        }
        const gw = node.inputs[1] ? mm("linear", gy2, x2, true, false) : null;
        const gb = node.inputs[2] ? sumTo(gy2, [n]) : null;
        return [gx, gw, gb];
      } finally {
        if (x2 !== x) x2.dispose();
        if (gy2 !== gy) gy2.dispose();
      }
    },
  },
} as const;

/** Options of {@link matmul}. */
export interface MatmulOptions {
  /** Use the transpose of `a`'s last two dims. */
  transA?: boolean;
  /** Use the transpose of `b`'s last two dims. */
  transB?: boolean;
}

/**
 * Matrix product with numpy semantics: batched over leading dims (broadcast),
 * 1-D operands promoted and the added dim removed; `transA`/`transB` read an
 * operand transposed without copying it.
 *
 * @example
 * ```ts
 * import { matmul, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const a = tensor([[1, 2], [3, 4]]), b = tensor([[5], [6]]);
 * if (!(matmul(a, b).toArray().join() === "17,39")) throw new Error("example: unexpected result");
 * if (!(matmul(a, a, { transB: true }).toArray().join() === "5,11,11,25")) throw new Error("example: unexpected result");
 * ```
 */
export function matmul(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  const ta = options.transA ?? false, tb = options.transB ?? false;
  check("matmul", [a, b]);
  if (a.ndim === 0 || b.ndim === 0) {
    throw new RangeError(
      `matmul: operands must have at least 1 dimension, got ${fmt(a.shape)} @ ${fmt(b.shape)}`,
    );
  }
  if (a.ndim === 1 || b.ndim === 1) {
    if ((a.ndim === 1 && ta) || (b.ndim === 1 && tb)) {
      throw new RangeError(`matmul: transA/transB apply to operands with at least 2 dimensions`);
    }
    const a2 = a.ndim === 1 ? reshape(a, [1, a.shape[0]!]) : a;
    const b2 = b.ndim === 1 ? reshape(b, [b.shape[0]!, 1]) : b;
    const y = MATMUL_OPS.matmul.forward(a2, b2, ta, tb);
    let shape = y.shape;
    if (a.ndim === 1) shape = [...shape.slice(0, -2), shape[shape.length - 1]!];
    if (b.ndim === 1) shape = shape.slice(0, -1);
    const r = reshape(y, shape);
    if (a2 !== a) a2.dispose();
    if (b2 !== b) b2.dispose();
    y.dispose();
    return r;
  }
  return MATMUL_OPS.matmul.forward(a, b, ta, tb);
}

/**
 * `x @ w^T + b` over `x`'s last dimension (a linear layer's forward) in one
 * kernel call: `x` `[..., k]`, `w` `[n, k]`, `b` `[n]` give `[..., n]`, with
 * bitwise the values and gradients of `matmul(x, w, { transB: true })` plus
 * `b`, and no tensor for the product alone.
 *
 * @example
 * ```ts
 * import { linear, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = linear(tensor([[1, 2]]), tensor([[1, 0], [1, 1]]), tensor([10, 20]));
 * if (y.toArray().join() !== "11,23") throw new Error("example: unexpected result");
 * ```
 */
export function linear(x: Tensor, w: Tensor, b: Tensor): Tensor {
  return MATMUL_OPS.linear.forward(x, w, b);
}
