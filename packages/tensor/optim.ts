/**
 * Low-level optimizer updates: the fused `sgd_update` and `adamw_update`
 * kernels, applied in place to a parameter and its state buffers. They run
 * outside autograd. `@libra/nn` builds its optimizers on them; the runtime
 * keeps the mutated storages pinned (ARCHITECTURE.md: in-place updates only on
 * pinned storages).
 *
 * @module
 */

import type { Tensor } from "./tensor.ts";
import { fmt } from "./_shape.ts";

function checkState(op: string, param: Tensor, others: readonly [string, Tensor][]): void {
  param.assertLive(op);
  if (param.dtype !== "f32") throw new TypeError(`${op}: param must be f32, got ${param.dtype}`);
  for (const [name, t] of others) {
    t.assertLive(op);
    if (t.dtype !== "f32" || t.size !== param.size) {
      throw new RangeError(
        `${op}: ${name} ${
          fmt(t.shape)
        } ${t.dtype} must be f32 with the ${param.size} elements of param ${fmt(param.shape)}`,
      );
    }
    if (t.backend !== param.backend) {
      throw new Error(`${op}: ${name} lives on ${t.backend.name}, param on ${param.backend.name}`);
    }
    if (t.storage === param.storage) {
      throw new Error(`${op}: ${name} shares its storage with param`);
    }
  }
}

/** Options of {@link sgdUpdate} (PyTorch `torch.optim.SGD` semantics). */
export interface SGDUpdateOptions {
  /** Learning rate. */
  lr: number;
  /** Default 0. */
  momentum?: number;
  /** Default 0. */
  dampening?: number;
  /** L2 penalty added to the gradient, default 0. */
  weightDecay?: number;
  /** Default false. */
  nesterov?: boolean;
  /** True on the first step for this parameter: the momentum buffer is set to the gradient. */
  firstStep: boolean;
}

/**
 * One SGD step in place: updates `param` and `momentumBuf` (same size as
 * `param`). Without momentum there is no buffer: pass `null`.
 *
 * @example
 * ```ts
 * import { sgdUpdate, tensor, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const p = tensor([1, 2]), g = tensor([0.5, -1]), buf = zeros([2]);
 * sgdUpdate(p, g, buf, { lr: 0.1, firstStep: true });
 * if (!(p.toArray().map((v) => v.toFixed(2)).join() === "0.95,2.10")) throw new Error("example: unexpected result");
 * ```
 */
export function sgdUpdate(
  param: Tensor,
  grad: Tensor,
  momentumBuf: Tensor | null,
  o: SGDUpdateOptions,
): void {
  const momentum = o.momentum ?? 0;
  if (momentumBuf === null && momentum !== 0) {
    throw new Error(`sgdUpdate: momentum ${momentum} needs a momentum buffer (got null)`);
  }
  checkState("sgdUpdate", param, [
    ["grad", grad],
    ...(momentumBuf ? [["momentumBuf", momentumBuf] as [string, Tensor]] : []),
  ]);
  const backend = param.backend;
  // the kernel never touches the buffer without momentum; an empty one stands in for it
  const buf = momentumBuf?.storage.buffer ?? backend.alloc(0);
  try {
    backend.run("sgd_update", [param.storage.buffer, grad.storage.buffer, buf], [], [
      param.size,
      o.lr,
      momentum,
      o.dampening ?? 0,
      o.weightDecay ?? 0,
      o.nesterov ? 1 : 0,
      o.firstStep ? 1 : 0,
    ]);
  } finally {
    if (momentumBuf === null) backend.free(buf);
  }
}

/** Options of {@link adamwUpdate} (PyTorch `torch.optim.AdamW` semantics). */
export interface AdamWUpdateOptions {
  /** Learning rate. */
  lr: number;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  eps?: number;
  /** Decoupled weight decay, default 0.01. */
  weightDecay?: number;
  /** 1 on the first update (bias correction). */
  step: number;
}

/**
 * One AdamW step in place on `param` and its moments `m`, `v`.
 *
 * @example
 * ```ts
 * import { adamwUpdate, tensor, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const p = tensor([1]), g = tensor([2]), m = zeros([1]), v = zeros([1]);
 * adamwUpdate(p, g, m, v, { lr: 0.1, weightDecay: 0, step: 1 });
 * if (!(Math.abs(p.item() - 0.9) < 1e-6)) throw new Error("example: unexpected result"); // first step moves by lr * sign(g)
 * ```
 */
export function adamwUpdate(
  param: Tensor,
  grad: Tensor,
  m: Tensor,
  v: Tensor,
  o: AdamWUpdateOptions,
): void {
  checkState("adamwUpdate", param, [["grad", grad], ["m", m], ["v", v]]);
  if (!Number.isInteger(o.step) || o.step < 1) {
    throw new RangeError(`adamwUpdate: step must be an integer >= 1, got ${o.step}`);
  }
  param.backend.run(
    "adamw_update",
    [
      param.storage.buffer,
      grad.storage.buffer,
      m.storage.buffer,
      v.storage.buffer,
    ],
    [],
    [
      param.size,
      o.lr,
      o.beta1 ?? 0.9,
      o.beta2 ?? 0.999,
      o.eps ?? 1e-8,
      o.weightDecay ?? 0.01,
      o.step,
    ],
  );
}
