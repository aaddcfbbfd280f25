/**
 * The loss_optim kernels of the kernel table (the TypeScript side of `native/cpu/loss_optim.c`).
 *
 * @module
 */

import { F, type KernelSpec, multiCounts, simple } from "./_spec.ts";

/** Name of a loss_optim kernel. */
export type LossOptimKernelName =
  | "cross_entropy"
  | "cross_entropy_backward"
  | "mse"
  | "mse_backward"
  | "sgd_update"
  | "adamw_update"
  | "sgd_update_multi"
  | "adamw_update_multi";

const SGD_MULTI = "count, lr, momentum, dampening, weightDecay, nesterov, firstStep, n[count]";
const ADAMW_MULTI = "count, lr, beta1, beta2, eps, weightDecay, step, n[count]";

/** Inputs of tensor t of a `*_multi` update: `stride` buffers from `stride * t`, each of n[t] floats. */
function multiSizes(ns: readonly number[], stride: number): { inputs: number[]; outputs: [] } {
  const inputs: number[] = new Array(ns.length * stride);
  for (let t = 0; t < ns.length; t++) {
    for (let k = 0; k < stride; k++) inputs[t * stride + k] = ns[t]! * F;
  }
  return { inputs, outputs: [] };
}

/** Input indices `stride * t + k` for every tensor t and each k of `at`. */
function multiMutates(count: number, stride: number, at: readonly number[]): number[] {
  const out: number[] = [];
  for (let t = 0; t < count; t++) for (const k of at) out.push(stride * t + k);
  return out;
}

function sum(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

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
  // -- the same updates on many tensors in one call (an optimizer step's parameters)
  sgd_update_multi: {
    inputs: ["...(param, grad, momentumBuf)"],
    outputs: [],
    params: SGD_MULTI,
    doc:
      "sgd_update on count tensors at once (their shared params once, then each one's element count n[t]): tensor t's buffers are inputs 3t, 3t+1, 3t+2 (param, grad, momentumBuf) with momentum != 0, else inputs 2t, 2t+1 (param, grad). The same arithmetic as sgd_update, tensor by tensor.",
    sizes(p) {
      const ns = multiCounts("sgd_update_multi", p, SGD_MULTI);
      return multiSizes(ns, p[2] === 0 ? 2 : 3);
    },
    flops: (p) => 6 * sum(p.slice(7)),
    mutatesOf: (p) => p[2] === 0 ? multiMutates(p[0]!, 2, [0]) : multiMutates(p[0]!, 3, [0, 2]),
  },
  adamw_update_multi: {
    inputs: ["...(param, grad, m, v)"],
    outputs: [],
    params: ADAMW_MULTI,
    doc:
      "adamw_update on count tensors at once (their shared params once, then each one's element count n[t]): tensor t's buffers are inputs 4t..4t+3 (param, grad, m, v). The same arithmetic as adamw_update, tensor by tensor.",
    sizes(p) {
      return multiSizes(multiCounts("adamw_update_multi", p, ADAMW_MULTI), 4);
    },
    flops: (p) => 12 * sum(p.slice(7)),
    mutatesOf: (p) => multiMutates(p[0]!, 4, [0, 2, 3]),
  },
};
