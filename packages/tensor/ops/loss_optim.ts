/**
 * The loss_optim ops (kernels of `native/cpu/loss_optim.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, type Tensor, view } from "../tensor.ts";
import { fmt, sameShape } from "../_shape.ts";
import { check, desc, record, run } from "./_core.ts";
import { neg } from "./elementwise.ts";

/** The loss_optim ops: forward and gradient rule of each, by name. */
export const LOSS_OPTIM_OPS = {
  cross_entropy: {
    name: "cross_entropy",
    forward(logits: Tensor, targets: Tensor): Tensor {
      const be = check("crossEntropy", [logits, targets], "any");
      if (logits.dtype !== "f32" || targets.dtype !== "i32") {
        throw new TypeError(
          `crossEntropy: expected f32 logits and i32 class indices, got ${desc(logits)} and ${
            desc(targets)
          }`,
        );
      }
      const lead = logits.shape.slice(0, -1);
      if (logits.ndim < 1 || !sameShape(lead, targets.shape)) {
        throw new RangeError(
          `crossEntropy: logits ${fmt(logits.shape)} need targets of shape ${fmt(lead)}, got ${
            fmt(targets.shape)
          }`,
        );
      }
      const classes = logits.shape[logits.ndim - 1]!;
      const p = [targets.size, classes];
      const y = empty(be, [], "f32");
      run("cross_entropy", [logits, targets], [y], p);
      return record(this, y, [logits, targets], [logits, targets], p);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [logits, targets] = node.saved as [Tensor, Tensor];
      const g = empty(gy.backend, logits.shape, "f32");
      run("cross_entropy_backward", [logits, targets, gy], [g], node.attrs as number[]);
      return [g, null];
    },
  },

  mse: {
    name: "mse",
    forward(a: Tensor, b: Tensor): Tensor {
      const be = check("mse", [a, b]);
      if (!sameShape(a.shape, b.shape)) {
        throw new RangeError(`mse: shapes differ: ${fmt(a.shape)} and ${fmt(b.shape)}`);
      }
      const y = empty(be, [], "f32");
      run("mse", [a, b], [y], [a.size]);
      return record(this, y, [a, b], [a, b], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [a, b] = node.saved as [Tensor, Tensor];
      const ga = empty(gy.backend, a.shape, "f32");
      run("mse_backward", [a, b, gy], [ga], [a.size]);
      return [view(ga, ga.shape), node.inputs[1] ? neg(ga) : null];
    },
  },
} as const;

/**
 * Mean cross-entropy of `logits [..., classes]` against i32 class indices
 * `targets [...]`; a scalar.
 *
 * @example
 * ```ts
 * import { crossEntropy, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const loss = crossEntropy(tensor([[0, 0]]), tensor([1], [1], { dtype: "i32" }));
 * if (!(Math.abs(loss.item() - Math.LN2) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function crossEntropy(logits: Tensor, targets: Tensor): Tensor {
  return LOSS_OPTIM_OPS.cross_entropy.forward(logits, targets);
}

/**
 * Mean squared error of two same-shape tensors; a scalar.
 *
 * @example
 * ```ts
 * import { mse, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(mse(tensor([1, 2]), tensor([1, 4])).item() === 2)) throw new Error("example: unexpected result");
 * ```
 */
export function mse(a: Tensor, b: Tensor): Tensor {
  return LOSS_OPTIM_OPS.mse.forward(a, b);
}
