/**
 * Low-level optimizer updates: the fused `sgd_update` and `adamw_update`
 * kernels, applied in place to a parameter and its state buffers, and their
 * `*_multi` forms, which update many parameters in one kernel call (an
 * optimizer step costs one call where it cost one a parameter). They run
 * outside autograd. `@libra/nn` builds its optimizers on them; the runtime
 * keeps the mutated storages pinned (ARCHITECTURE.md: in-place updates only on
 * pinned storages).
 *
 * @module
 */

import type { Backend, DeviceBuffer } from "./backend.ts";
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
      ...sgdParams(o),
    ]);
  } finally {
    if (momentumBuf === null) backend.free(buf);
  }
}

/** The six params the SGD kernels share after the first (n, or count). */
function sgdParams(o: SGDUpdateOptions): number[] {
  return [
    o.lr,
    o.momentum ?? 0,
    o.dampening ?? 0,
    o.weightDecay ?? 0,
    o.nesterov ? 1 : 0,
    o.firstStep ? 1 : 0,
  ];
}

/** One parameter of {@link sgdUpdateMulti}: the tensors {@link sgdUpdate} takes. */
export interface SGDUpdateItem {
  /** Updated in place. */
  param: Tensor;
  /** Its gradient. */
  grad: Tensor;
  /** Its momentum buffer (updated in place), or `null` without momentum. */
  momentumBuf: Tensor | null;
}

/**
 * {@link sgdUpdate} on every item in one `sgd_update_multi` call, with the
 * same arithmetic (bitwise the same results). The items share the options,
 * `firstStep` included; they must not share storages.
 *
 * @example
 * ```ts
 * import { sgdUpdateMulti, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const a = tensor([1, 2]), b = tensor([3]);
 * sgdUpdateMulti([
 *   { param: a, grad: tensor([1, 1]), momentumBuf: null },
 *   { param: b, grad: tensor([2]), momentumBuf: null },
 * ], { lr: 0.5, firstStep: true });
 * if (a.toArray().join() !== "0.5,1.5" || b.item() !== 2) throw new Error("example: unexpected result");
 * ```
 */
export function sgdUpdateMulti(items: readonly SGDUpdateItem[], o: SGDUpdateOptions): void {
  const momentum = o.momentum ?? 0;
  const bufs: DeviceBuffer[] = [], sizes: number[] = [];
  const backend = checkItems("sgdUpdateMulti", items, (it, i) => {
    if ((it.momentumBuf === null) !== (momentum === 0)) {
      throw new Error(
        `sgdUpdateMulti: item ${i}: momentum ${momentum} ${
          momentum === 0 ? "takes no momentum buffer (pass null)" : "needs a momentum buffer"
        }`,
      );
    }
    checkState(`sgdUpdateMulti: item ${i}`, it.param, [
      ["grad", it.grad],
      ...(it.momentumBuf ? [["momentumBuf", it.momentumBuf] as [string, Tensor]] : []),
    ]);
    bufs.push(it.param.storage.buffer, it.grad.storage.buffer);
    if (it.momentumBuf !== null) bufs.push(it.momentumBuf.storage.buffer);
    sizes.push(it.param.size);
    return it.momentumBuf === null ? [it.param] : [it.param, it.momentumBuf];
  });
  if (backend === null) return;
  backend.run("sgd_update_multi", bufs, [], [items.length, ...sgdParams(o), ...sizes]);
}

/**
 * Checks the items of a `*_multi` update with `each` (which returns the tensors
 * the item writes): one backend for all, no storage written twice or written
 * and read. Returns that backend (`null` for no items).
 */
function checkItems<I extends { param: Tensor; grad: Tensor }>(
  op: string,
  items: readonly I[],
  each: (item: I, i: number) => readonly Tensor[],
): Backend | null {
  const written = new Map<unknown, number>();
  const read: [unknown, number][] = [];
  let backend: Backend | null = null;
  items.forEach((it, i) => {
    for (const t of each(it, i)) {
      const at = written.get(t.storage);
      if (at !== undefined) {
        throw new Error(
          at === i
            ? `${op}: item ${i} writes one storage twice`
            : `${op}: item ${i} writes the storage item ${at} writes`,
        );
      }
      written.set(t.storage, i);
    }
    read.push([it.grad.storage, i]);
    if (backend === null) backend = it.param.backend;
    else if (it.param.backend !== backend) {
      throw new Error(
        `${op}: item ${i} lives on ${it.param.backend.name}, item 0 on ${backend.name}`,
      );
    }
  });
  for (const [s, i] of read) {
    const at = written.get(s);
    if (at !== undefined) throw new Error(`${op}: item ${i}'s grad is a storage item ${at} writes`);
  }
  return backend;
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
    [param.size, ...adamwParams(o)],
  );
}

/** The six params the AdamW kernels share after the first (n, or count). */
function adamwParams(o: AdamWUpdateOptions): number[] {
  return [o.lr, o.beta1 ?? 0.9, o.beta2 ?? 0.999, o.eps ?? 1e-8, o.weightDecay ?? 0.01, o.step];
}

/** One parameter of {@link adamwUpdateMulti}: the tensors {@link adamwUpdate} takes. */
export interface AdamWUpdateItem {
  /** Updated in place. */
  param: Tensor;
  /** Its gradient. */
  grad: Tensor;
  /** First moment (updated in place). */
  m: Tensor;
  /** Second moment (updated in place). */
  v: Tensor;
}

/**
 * {@link adamwUpdate} on every item in one `adamw_update_multi` call, with the
 * same arithmetic (bitwise the same results). The items share the options,
 * `step` included; they must not share storages.
 *
 * @example
 * ```ts
 * import { adamwUpdateMulti, tensor, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const a = tensor([1]), b = tensor([1]);
 * adamwUpdateMulti([
 *   { param: a, grad: tensor([2]), m: zeros([1]), v: zeros([1]) },
 *   { param: b, grad: tensor([-3]), m: zeros([1]), v: zeros([1]) },
 * ], { lr: 0.1, weightDecay: 0, step: 1 });
 * if (!(Math.abs(a.item() - 0.9) < 1e-6 && Math.abs(b.item() - 1.1) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function adamwUpdateMulti(items: readonly AdamWUpdateItem[], o: AdamWUpdateOptions): void {
  if (!Number.isInteger(o.step) || o.step < 1) {
    throw new RangeError(`adamwUpdateMulti: step must be an integer >= 1, got ${o.step}`);
  }
  const bufs: DeviceBuffer[] = [], sizes: number[] = [];
  const backend = checkItems("adamwUpdateMulti", items, (it, i) => {
    checkState(`adamwUpdateMulti: item ${i}`, it.param, [["grad", it.grad], ["m", it.m], [
      "v",
      it.v,
    ]]);
    bufs.push(it.param.storage.buffer, it.grad.storage.buffer, it.m.storage.buffer);
    bufs.push(it.v.storage.buffer);
    sizes.push(it.param.size);
    return [it.param, it.m, it.v];
  });
  if (backend === null) return;
  backend.run("adamw_update_multi", bufs, [], [items.length, ...adamwParams(o), ...sizes]);
}
