/**
 * The random ops (kernels of `native/cpu/random.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, type Tensor } from "../tensor.ts";
import { nextRandom } from "../random.ts";
import { check, record, run } from "./_core.ts";
import { reshape } from "./layout.ts";

/** The random ops: forward and gradient rule of each, by name. */
export const RANDOM_OPS = {
  dropout: {
    name: "dropout",
    forward(x: Tensor, p: number): Tensor {
      const be = check("dropout", [x]);
      const [seed, offset] = nextRandom(x.size);
      const params = [x.size, p, seed, offset];
      const y = empty(be, x.shape, "f32");
      run("dropout", [x], [y], params);
      return record(this, y, [x], [], params);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const gx = empty(gy.backend, gy.shape, "f32");
      run("dropout_backward", [gy], [gx], node.attrs as number[]);
      return [gx];
    },
  },
} as const;

/**
 * Inverted dropout with probability `p`, drawing `(seed, offset)` from the
 * global generator (see {@link ./random.ts}); identity when `training` is false
 * or `p` is 0.
 *
 * @example
 * ```ts
 * import { dropout, ones, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = dropout(ones([1000]), 0.5);
 * if (!(y.toArray().every((v) => v === 0 || v === 2))) throw new Error("example: unexpected result");
 * if (!(dropout(ones([2]), 0.5, false).toArray().join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function dropout(x: Tensor, p: number, training = true): Tensor {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`dropout: p must be in [0, 1], got ${p}`);
  if (!training || p === 0) return reshape(x, x.shape);
  return RANDOM_OPS.dropout.forward(x, p);
}
