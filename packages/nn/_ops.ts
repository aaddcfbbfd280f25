/**
 * The slice of `@libra/tensor` that `@libra/nn` uses, plus a few compositions
 * (linear, causal mask, host transfer) shared by layers. Private.
 *
 * @module
 */

import {
  batchNorm,
  fromTypedArray,
  linear as tensorLinear,
  maxPool2d as tensorMaxPool2d,
  type Tensor,
} from "@libra/tensor";
import type { HostTensor } from "./safetensors.ts";

export {
  adamwUpdate,
  concat,
  conv2d,
  crossEntropy,
  dropout,
  embedding,
  fromTypedArray,
  globalAvgPool,
  layerNorm,
  lstmLayer,
  mse,
  noGrad,
  normal,
  ones,
  rmsNorm,
  sgdUpdate,
  type Tensor,
  tidy,
  uniform,
  upsampleNearest2x,
  zeros,
} from "@libra/tensor";

/**
 * `x W^T + b` over the last axis. Leading dims are folded into one matrix so
 * the product is a single (non-batched) matmul.
 */
export function linear(x: Tensor, w: Tensor, b: Tensor | null): Tensor {
  // With a bias, one kernel call (the product and the bias' sum, no tensor for the product).
  if (b) return tensorLinear(x, w, b);
  const inF = x.shape[x.ndim - 1]!;
  const outF = w.shape[0]!;
  const lead = x.shape.slice(0, -1);
  const x2 = x.ndim === 2 ? x : x.reshape([-1, inF]);
  const y = x2.matmul(w, { transB: true });
  return x.ndim === 2 ? y : y.reshape([...lead, outF]);
}

/** `[T, T]` additive causal mask: 0 on and below the diagonal, -inf above (written from the host). */
export function causalMask(T: number, backend: Tensor["backend"]): Tensor {
  return fromTypedArray(causalMaskData(T), [T, T], { backend });
}

/**
 * The values of {@link causalMask}, row-major. A function of its own: with the
 * loop in `causalMask`, V8 compiled that function on stack replacement
 * with the upload after the loop specialized to one backend's class, and a
 * program with two backends (`libra run`'s copies) deoptimized and
 * recompiled it at almost every step (18 times, ~31 ms of compilation, in one
 * gpt small run).
 */
function causalMaskData(T: number): Float32Array {
  const m = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) m[i * T + j] = -Infinity;
  return m;
}

/** i32 positions `[0, T)`. */
export function arangeIds(T: number, backend?: Tensor["backend"]): Tensor {
  return fromTypedArray(
    Int32Array.from({ length: T }, (_, i) => i),
    [T],
    backend ? { backend } : {},
  );
}

/** Max pooling with a square window. */
export function maxPool2d(x: Tensor, kernelSize: number, stride: number, padding: number): Tensor {
  return tensorMaxPool2d(x, { kernelSize, stride, padding });
}

/** BatchNorm over `[N, C, H, W]` with running statistics updated in place in training mode. */
export function batchNorm2d(
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  runningMean: Tensor,
  runningVar: Tensor,
  o: { training: boolean; momentum: number; eps: number },
): Tensor {
  return batchNorm(x, gamma, beta, { runningMean, runningVar, ...o });
}

/** Copies a tensor to the host. */
export function toHost(t: Tensor): HostTensor {
  return { dtype: t.dtype, shape: [...t.shape], data: t.toTypedArray() };
}

/** Overwrites `t`'s data in place with host data of the same size and dtype. */
export function assignHost(t: Tensor, h: HostTensor): void {
  if (h.data.length !== t.size || h.dtype !== t.dtype) {
    throw new RangeError(
      `assignHost: ${h.dtype}[${h.shape}] does not fit tensor ${t.dtype}[${t.shape}]`,
    );
  }
  t.assertLive("assignHost");
  if (t.size > 0) t.backend.write(t.storage.buffer, h.data);
}

/**
 * `steps` applied in order to `x`, each intermediate freed once the next is made (never
 * `x`, nor a step's output that is its input): as PyTorch frees a value between layers once
 * nothing refers to it. What autograd saved of it for the backward pass lives on through the
 * graph's own handles.
 */
export function chain(x: Tensor, steps: Iterable<(h: Tensor) => Tensor>): Tensor {
  let h = x;
  for (const f of steps) {
    const next = f(h);
    if (h !== x && next !== h) h.dispose();
    h = next;
  }
  return h;
}
