/**
 * The loss_optim kernels of the kernel table (the TypeScript side of `native/cpu/loss_optim.c`).
 *
 * @module
 */

import { type KernelSpec, simple } from "./_spec.ts";

/** Name of a loss_optim kernel. */
export type LossOptimKernelName =
  | "cross_entropy"
  | "cross_entropy_backward"
  | "mse"
  | "mse_backward"
  | "sgd_update"
  | "adamw_update";

/** The loss_optim kernels, by name. */
export const LOSS_OPTIM_KERNELS: Readonly<Record<LossOptimKernelName, KernelSpec>> = {
  // -- losses (mean reduction; loss is one f32)
  cross_entropy: simple(
    ["logits", "targets"],
    ["loss"],
    ["rows", "classes"],
    "loss = mean over rows of (logsumexp(logits[r]) - logits[r, targets[r]]); targets i32 in [0, classes) or the kernel fails naming the row.",
    (p) => ({ inputs: [p[0]! * p[1]!, p[0]!], outputs: [1] }),
    (p) => 5 * p[0]! * p[1]!,
    {},
    ["rows", "classes"],
  ),
  cross_entropy_backward: simple(
    ["logits", "targets", "gloss"],
    ["glogits"],
    ["rows", "classes"],
    "glogits = (softmax(logits) - onehot(targets)) * gloss / rows.",
    (p) => ({ inputs: [p[0]! * p[1]!, p[0]!, 1], outputs: [p[0]! * p[1]!] }),
    (p) => 6 * p[0]! * p[1]!,
    {},
    ["rows", "classes"],
  ),
  mse: simple(
    ["a", "b"],
    ["loss"],
    ["n"],
    "loss = mean((a - b)^2).",
    (p) => ({ inputs: [p[0]!, p[0]!], outputs: [1] }),
    (p) => 3 * p[0]!,
  ),
  mse_backward: simple(
    ["a", "b", "gloss"],
    ["ga"],
    ["n"],
    "ga = 2 (a - b) gloss / n (the gradient for b is -ga).",
    (p) => ({ inputs: [p[0]!, p[0]!, 1], outputs: [p[0]!] }),
    (p) => 3 * p[0]!,
  ),

  // -- optimizer updates (in place on pinned storages)
  sgd_update: simple(
    ["param", "grad", "momentumBuf"],
    [],
    ["n", "lr", "momentum", "dampening", "weightDecay", "nesterov", "firstStep"],
    "PyTorch SGD: g = grad + weightDecay param; if momentum != 0 { buf = firstStep ? g : momentum buf + (1 - dampening) g; g = nesterov ? g + momentum buf : buf }; param -= lr g. With momentum 0 the buffer is never touched and may be empty.",
    (p) => ({ inputs: [p[0]!, p[0]!, p[2] === 0 ? 0 : p[0]!], outputs: [] }),
    (p) => 6 * p[0]!,
    { mutates: [0, 2] },
  ),
  adamw_update: simple(
    ["param", "grad", "m", "v"],
    [],
    ["n", "lr", "beta1", "beta2", "eps", "weightDecay", "step"],
    "PyTorch AdamW: param *= 1 - lr weightDecay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; param -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps). step >= 1.",
    (p) => ({ inputs: [p[0]!, p[0]!, p[0]!, p[0]!], outputs: [] }),
    (p) => 12 * p[0]!,
    { mutates: [0, 2, 3] },
  ),
};
