/**
 * Optimizers with PyTorch semantics (`torch.optim.SGD`, `torch.optim.AdamW`),
 * each step one fused in-place kernel call for all parameters
 * (`sgd_update_multi`, `adamw_update_multi`; with `foreach: false` one
 * `sgd_update` or `adamw_update` a parameter, with bitwise the same results). State buffers are
 * allocated on the first step, on the parameter's backend, and kept out of
 * `tidy` scopes.
 *
 * @module
 */

import {
  adamwUpdate,
  type AdamWUpdateItem,
  adamwUpdateMulti,
  keep,
  sgdUpdate,
  type SGDUpdateItem,
  sgdUpdateMulti,
  type Tensor,
  zerosLike,
} from "@libra/tensor";

/** What `train` and schedules need from an optimizer. */
export interface Optimizer {
  /** The parameters updated, in order. */
  readonly params: readonly Tensor[];
  /** Current learning rate (schedules set it before each step). */
  lr: number;
  /** Steps taken so far. */
  readonly stepCount: number;
  /** Updates every parameter that has a gradient. */
  step(): void;
  /** Frees every parameter's gradient (PyTorch `set_to_none=True`). */
  zeroGrad(): void;
  /** Frees the optimizer state. */
  dispose(): void;
}

/** Options of {@link SGD}. */
export interface SGDOptions {
  /** Learning rate. */
  lr: number;
  /** Momentum factor (default 0). */
  momentum?: number;
  /** Dampening of the momentum (default 0). */
  dampening?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Nesterov momentum (default false). */
  nesterov?: boolean;
  /**
   * Update all parameters in one kernel call (default true), as PyTorch's
   * `foreach`; false makes one call a parameter. The results are the same.
   */
  foreach?: boolean;
}

function checkLr(name: string, lr: number): void {
  if (!(lr >= 0) || !Number.isFinite(lr)) {
    throw new RangeError(`${name}: lr must be a finite number >= 0, got ${lr}`);
  }
}

function zeroGradOf(params: readonly Tensor[]): void {
  for (const p of params) {
    p.grad?.dispose();
    p.grad = null;
  }
}

/**
 * Stochastic gradient descent with momentum and weight decay.
 *
 * @example
 * ```ts
 * import { setDefaultBackend, tensor } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * import { SGD } from "@libra/nn/optim";
 * setDefaultBackend(new ReferenceBackend());
 * const w = tensor([1, 2], [2], { requiresGrad: true });
 * w.mul(w).sum().backward(); // grad = 2w
 * const opt = new SGD([w], { lr: 0.25 });
 * opt.step();
 * if (w.toArray().join() !== "0.5,1") throw new Error("sgd");
 * ```
 */
export class SGD implements Optimizer {
  readonly params: readonly Tensor[];
  lr: number;
  /** Momentum factor. */
  readonly momentum: number;
  /** Dampening of the momentum. */
  readonly dampening: number;
  /** L2 penalty added to the gradient. */
  readonly weightDecay: number;
  /** Whether the momentum is Nesterov's. */
  readonly nesterov: boolean;
  /** Whether a step is one kernel call for all parameters. */
  readonly foreach: boolean;
  #buffers = new Map<Tensor, Tensor>();
  #steps = 0;
  /** SGD over `params`. */
  constructor(params: Iterable<Tensor>, o: SGDOptions) {
    this.params = [...params];
    checkLr("SGD", o.lr);
    this.lr = o.lr;
    this.momentum = o.momentum ?? 0;
    this.dampening = o.dampening ?? 0;
    this.weightDecay = o.weightDecay ?? 0;
    this.nesterov = o.nesterov ?? false;
    this.foreach = o.foreach ?? true;
    if (this.nesterov && (this.momentum <= 0 || this.dampening !== 0)) {
      throw new RangeError("SGD: nesterov needs momentum > 0 and dampening 0");
    }
  }
  get stepCount(): number {
    return this.#steps;
  }
  step(): void {
    this.#steps++;
    // Parameters updated for the first time set their momentum buffer to the gradient: a
    // call of their own (a parameter that had no gradient before may join a later step).
    const first: SGDUpdateItem[] = [], later: SGDUpdateItem[] = [];
    for (const p of this.params) {
      const g = p.grad;
      if (g === null) continue;
      let buf = this.#buffers.get(p);
      const isFirst = buf === undefined;
      if (this.momentum !== 0 && buf === undefined) {
        buf = keep(zerosLike(p));
        this.#buffers.set(p, buf);
      }
      const item = { param: p, grad: g, momentumBuf: buf ?? null };
      if (this.foreach) (isFirst ? first : later).push(item);
      else this.#update([item], isFirst);
    }
    if (first.length > 0) this.#update(first, true);
    if (later.length > 0) this.#update(later, false);
  }
  #update(items: SGDUpdateItem[], firstStep: boolean): void {
    const o = {
      lr: this.lr,
      momentum: this.momentum,
      dampening: this.dampening,
      weightDecay: this.weightDecay,
      nesterov: this.nesterov,
      firstStep,
    };
    if (this.foreach) sgdUpdateMulti(items, o);
    else sgdUpdate(items[0]!.param, items[0]!.grad, items[0]!.momentumBuf, o);
  }
  zeroGrad(): void {
    zeroGradOf(this.params);
  }
  dispose(): void {
    for (const b of this.#buffers.values()) b.dispose();
    this.#buffers.clear();
  }
}

/** Options of {@link AdamW}. */
export interface AdamWOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Decay of the first moment (default 0.9). */
  beta1?: number;
  /** Decay of the second moment (default 0.999). */
  beta2?: number;
  /** Added to the denominator (default 1e-8). */
  eps?: number;
  /** Decoupled weight decay (default 0.01). */
  weightDecay?: number;
  /** As {@link SGDOptions.foreach}: one kernel call a step (default true). */
  foreach?: boolean;
}

/** Adam with decoupled weight decay (Loshchilov and Hutter 2019), PyTorch defaults. */
export class AdamW implements Optimizer {
  readonly params: readonly Tensor[];
  lr: number;
  /** Decay of the first moment. */
  readonly beta1: number;
  /** Decay of the second moment. */
  readonly beta2: number;
  /** Added to the denominator. */
  readonly eps: number;
  /** Decoupled weight decay. */
  readonly weightDecay: number;
  /** Whether a step is one kernel call per step count. */
  readonly foreach: boolean;
  #state = new Map<Tensor, { m: Tensor; v: Tensor; step: number }>();
  #steps = 0;
  /** AdamW over `params`. */
  constructor(params: Iterable<Tensor>, o: AdamWOptions = {}) {
    this.params = [...params];
    this.lr = o.lr ?? 1e-3;
    checkLr("AdamW", this.lr);
    this.beta1 = o.beta1 ?? 0.9;
    this.beta2 = o.beta2 ?? 0.999;
    this.eps = o.eps ?? 1e-8;
    this.weightDecay = o.weightDecay ?? 0.01;
    this.foreach = o.foreach ?? true;
    for (const [k, b] of [["beta1", this.beta1], ["beta2", this.beta2]] as const) {
      if (!(b >= 0 && b < 1)) throw new RangeError(`AdamW: ${k} must be in [0, 1), got ${b}`);
    }
  }
  get stepCount(): number {
    return this.#steps;
  }
  step(): void {
    this.#steps++;
    // One call per step count (a parameter that had no gradient before is behind).
    const byStep = new Map<number, AdamWUpdateItem[]>();
    for (const p of this.params) {
      const g = p.grad;
      if (g === null) continue;
      let s = this.#state.get(p);
      if (s === undefined) {
        s = { m: keep(zerosLike(p)), v: keep(zerosLike(p)), step: 0 };
        this.#state.set(p, s);
      }
      s.step++;
      const item = { param: p, grad: g, m: s.m, v: s.v };
      if (!this.foreach) this.#update([item], s.step);
      else {
        const list = byStep.get(s.step);
        if (list === undefined) byStep.set(s.step, [item]);
        else list.push(item);
      }
    }
    for (const [step, items] of byStep) this.#update(items, step);
  }
  #update(items: AdamWUpdateItem[], step: number): void {
    const o = {
      lr: this.lr,
      beta1: this.beta1,
      beta2: this.beta2,
      eps: this.eps,
      weightDecay: this.weightDecay,
      step,
    };
    if (this.foreach) adamwUpdateMulti(items, o);
    else adamwUpdate(items[0]!.param, items[0]!.grad, items[0]!.m, items[0]!.v, o);
  }
  zeroGrad(): void {
    zeroGradOf(this.params);
  }
  dispose(): void {
    for (const s of this.#state.values()) {
      s.m.dispose();
      s.v.dispose();
    }
    this.#state.clear();
  }
}
