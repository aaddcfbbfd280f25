/**
 * Losses: cross-entropy from logits with class indices, and mean squared error.
 *
 * @module
 */

import { crossEntropy, mse, type Tensor } from "./_ops.ts";

/**
 * Mean cross-entropy of logits against i32 class indices. The class axis is
 * the last one when `logits.shape` is `[...targets.shape, classes]` (MLP,
 * GPT, LSTM outputs), or axis 1 when it is `[N, classes, ...]` with targets
 * `[N, ...]` (PyTorch's convention for images, e.g. U-Net `[N, K, H, W]`);
 * the latter costs one permute.
 *
 * @example
 * ```ts
 * import { setDefaultBackend, tensor } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * import { crossEntropyLoss } from "@libra/nn/loss";
 * setDefaultBackend(new ReferenceBackend());
 * const loss = crossEntropyLoss(tensor([[0, 0]]), tensor([1], [1], { dtype: "i32" }));
 * if (Math.abs(loss.item() - Math.LN2) > 1e-6) throw new Error("ln 2");
 * ```
 */
export function crossEntropyLoss(logits: Tensor, targets: Tensor): Tensor {
  const ls = logits.shape, ts = targets.shape;
  if (targets.dtype !== "i32") {
    throw new TypeError(
      `crossEntropyLoss: targets must be i32 class indices, got ${targets.dtype}`,
    );
  }
  if (ls.length === ts.length + 1 && ls.slice(0, -1).join() === ts.join()) {
    return crossEntropy(logits, targets);
  }
  if (
    ls.length === ts.length + 1 && ls.length >= 3 && ls[0] === ts[0] &&
    ls.slice(2).join() === ts.slice(1).join()
  ) {
    const perm = [0, ...ls.slice(2).map((_, i) => i + 2), 1];
    return crossEntropy(logits.permute(perm), targets);
  }
  throw new RangeError(
    `crossEntropyLoss: logits [${ls}] do not match targets [${ts}]: expected [...targets, classes] or [N, classes, ...targets[1:]]`,
  );
}

/** Mean squared error of two tensors of the same shape. */
export function mseLoss(a: Tensor, b: Tensor): Tensor {
  if (a.shape.join() !== b.shape.join()) {
    throw new RangeError(`mseLoss: shapes [${a.shape}] and [${b.shape}] differ`);
  }
  return mse(a, b);
}
