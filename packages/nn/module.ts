/**
 * The `Module` base class: a tree of named parameters, buffers and children
 * with PyTorch's dotted state-dict names, train/eval mode, and strict state-dict
 * loading from safetensors.
 *
 * @module
 */

import { assignHost, type Tensor, toHost } from "./_ops.ts";
import {
  type HostTensor,
  readSafetensors,
  SafetensorsError,
  writeSafetensors,
} from "./safetensors.ts";

/** Thrown by {@link Module.loadStateDict} when keys or shapes do not match. */
export class StateDictError extends Error {
  /** Keys the module has but the state dict lacks. */
  readonly missing: readonly string[];
  /** Keys the state dict has but the module lacks. */
  readonly unexpected: readonly string[];
  /** Keys whose shape (or dtype) differs, with both shapes. */
  readonly mismatched: readonly string[];
  /** An error listing the missing, unexpected and mismatched parameter names. */
  constructor(missing: string[], unexpected: string[], mismatched: string[]) {
    const parts: string[] = [];
    if (missing.length) parts.push(`missing keys: ${missing.join(", ")}`);
    if (unexpected.length) parts.push(`unexpected keys: ${unexpected.join(", ")}`);
    if (mismatched.length) parts.push(`mis-shaped keys: ${mismatched.join("; ")}`);
    super(
      `loadStateDict: ${
        parts.join(". ")
      }. Check that the weights come from the same architecture and configuration, or pass { strict: false } to load the matching keys only.`,
    );
    this.name = "StateDictError";
    this.missing = missing;
    this.unexpected = unexpected;
    this.mismatched = mismatched;
  }
}

/** Options of {@link Module.loadStateDict}. */
export interface LoadStateDictOptions {
  /** When true (default), any missing, unexpected or mis-shaped key throws {@link StateDictError}. */
  strict?: boolean;
}

/** Result of a non-strict load: what was skipped. */
export interface LoadStateDictResult {
  /** Names the model has and the state lacks. */
  readonly missing: readonly string[];
  /** Names the state has and the model lacks. */
  readonly unexpected: readonly string[];
  /** Names present in both whose shapes or dtypes differ. */
  readonly mismatched: readonly string[];
}

/**
 * Base class of every layer and model. Subclasses register parameters, buffers
 * and children with {@link Module.param}, {@link Module.buffer} and
 * {@link Module.child} in the order PyTorch would, so that
 * {@link Module.namedParameters} yields the same dotted names (and order) as
 * `torch.nn.Module.named_parameters()`.
 */
export class Module {
  #training = true;
  readonly #params = new Map<string, Tensor>();
  readonly #buffers = new Map<string, Tensor>();
  readonly #children = new Map<string, Module>();

  /** Registers a trainable parameter under `name` and returns it. */
  protected param(name: string, t: Tensor): Tensor {
    this.#checkName(name);
    t.requiresGrad = true;
    this.#params.set(name, t);
    return t;
  }

  /** Registers a non-trainable state tensor (e.g. BatchNorm running statistics). */
  protected buffer(name: string, t: Tensor): Tensor {
    this.#checkName(name);
    this.#buffers.set(name, t);
    return t;
  }

  /** Registers a child module under `name` and returns it. */
  protected child<M extends Module>(name: string, m: M): M {
    this.#checkName(name);
    this.#children.set(name, m);
    m.#training = this.#training;
    return m;
  }

  #checkName(name: string): void {
    if (name === "" || name.includes(".")) {
      throw new Error(`Module: name "${name}" must be non-empty and contain no "."`);
    }
    if (this.#params.has(name) || this.#buffers.has(name) || this.#children.has(name)) {
      throw new Error(`Module: "${name}" is already registered in ${this.constructor.name}`);
    }
  }

  /**
   * State-dict keys (local names) this module accepts and ignores on load, for
   * PyTorch entries it does not keep (BatchNorm's `num_batches_tracked`).
   */
  protected ignoredStateKeys(): readonly string[] {
    return [];
  }

  /** True in training mode (dropout active, BatchNorm uses batch statistics). */
  get training(): boolean {
    return this.#training;
  }

  /** Sets training mode on this module and every descendant. */
  train(mode = true): this {
    this.#training = mode;
    for (const c of this.#children.values()) c.train(mode);
    return this;
  }

  /** Same as `train(false)`. */
  eval(): this {
    return this.train(false);
  }

  /** Direct children with their names. */
  namedChildren(): [string, Module][] {
    return [...this.#children];
  }

  /** Every module in the tree (this one first, name `""`), depth-first in registration order. */
  namedModules(prefix = ""): [string, Module][] {
    const out: [string, Module][] = [[prefix, this]];
    for (const [n, c] of this.#children) out.push(...c.namedModules(prefix ? `${prefix}.${n}` : n));
    return out;
  }

  /** Parameters with dotted names, as PyTorch's `named_parameters()`. */
  namedParameters(): [string, Tensor][] {
    return this.#collect((m) => m.#params);
  }

  /** All parameters, in {@link Module.namedParameters} order. */
  parameters(): Tensor[] {
    return this.namedParameters().map(([, t]) => t);
  }

  /** Buffers with dotted names. */
  namedBuffers(): [string, Tensor][] {
    return this.#collect((m) => m.#buffers);
  }

  #collect(pick: (m: Module) => Map<string, Tensor>): [string, Tensor][] {
    const out: [string, Tensor][] = [];
    const seen = new Set<Tensor>();
    for (const [prefix, m] of this.namedModules()) {
      for (const [n, t] of pick(m)) {
        if (seen.has(t)) continue; // shared (tied) tensors are listed once, like PyTorch
        seen.add(t);
        out.push([prefix ? `${prefix}.${n}` : n, t]);
      }
    }
    return out;
  }

  /** Number of parameter elements. */
  numParameters(): number {
    return this.parameters().reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
  }

  /** Parameters and buffers by dotted name (the tensors themselves, not copies). */
  stateDict(): Map<string, Tensor> {
    const out = new Map<string, Tensor>();
    const pairs: [string, Tensor][] = [];
    for (const [prefix, m] of this.namedModules()) {
      for (const [n, t] of m.#params) pairs.push([prefix ? `${prefix}.${n}` : n, t]);
      for (const [n, t] of m.#buffers) pairs.push([prefix ? `${prefix}.${n}` : n, t]);
    }
    const seen = new Set<Tensor>();
    for (const [n, t] of pairs) {
      if (seen.has(t)) continue;
      seen.add(t);
      out.set(n, t);
    }
    return out;
  }

  /**
   * Copies host tensors into this module's parameters and buffers, in place (so
   * optimizers holding them keep working). Strict by default: every key must
   * match by name, shape and dtype, or a {@link StateDictError} lists all
   * missing, unexpected and mis-shaped keys and nothing is written. Entries a
   * module declares as ignored (BatchNorm's `num_batches_tracked`) are skipped.
   */
  loadStateDict(
    entries: ReadonlyMap<string, HostTensor> | Readonly<Record<string, HostTensor>>,
    options: LoadStateDictOptions = {},
  ): LoadStateDictResult {
    const src = entries instanceof Map
      ? entries as ReadonlyMap<string, HostTensor>
      : new Map(Object.entries(entries as Record<string, HostTensor>));
    const own = this.stateDict();
    const ignored = new Set<string>();
    for (const [prefix, m] of this.namedModules()) {
      for (const k of m.ignoredStateKeys()) ignored.add(prefix ? `${prefix}.${k}` : k);
    }
    const missing = [...own.keys()].filter((k) => !src.has(k));
    const unexpected = [...src.keys()].filter((k) => !own.has(k) && !ignored.has(k));
    const mismatched: string[] = [];
    for (const [k, t] of own) {
      const h = src.get(k);
      if (!h) continue;
      if (h.shape.join() !== t.shape.join() || h.dtype !== t.dtype) {
        mismatched.push(
          `${k}: expected ${t.dtype}[${t.shape.join(", ")}], got ${h.dtype}[${h.shape.join(", ")}]`,
        );
      }
    }
    if ((options.strict ?? true) && (missing.length || unexpected.length || mismatched.length)) {
      throw new StateDictError(missing, unexpected, mismatched);
    }
    const bad = new Set(mismatched.map((m) => m.slice(0, m.indexOf(":"))));
    for (const [k, t] of own) {
      const h = src.get(k);
      if (h && !bad.has(k)) assignHost(t, h);
    }
    return { missing, unexpected, mismatched };
  }

  /** Reads parameters and buffers as host tensors (one device read per tensor). */
  stateDictToHost(): Map<string, HostTensor> {
    const out = new Map<string, HostTensor>();
    for (const [k, t] of this.stateDict()) out.set(k, toHost(t));
    return out;
  }

  /** Loads a safetensors file with {@link Module.loadStateDict} (strict unless told otherwise). */
  async loadSafetensors(
    path: string | URL,
    options: LoadStateDictOptions = {},
  ): Promise<LoadStateDictResult> {
    const file = await readSafetensors(path);
    try {
      return this.loadStateDict(file.tensors, options);
    } catch (e) {
      if (e instanceof StateDictError || e instanceof SafetensorsError) {
        e.message += ` (file ${String(path)})`;
      }
      throw e;
    }
  }

  /** Writes parameters and buffers to a safetensors file. */
  async saveSafetensors(path: string | URL, metadata?: Record<string, string>): Promise<void> {
    await writeSafetensors(path, this.stateDictToHost(), metadata);
  }

  /** Clears the gradient of every parameter (frees it). */
  zeroGrad(): void {
    for (const p of this.parameters()) {
      p.grad?.dispose();
      p.grad = null;
    }
  }

  /** Frees every parameter, buffer and gradient of the tree. */
  dispose(): void {
    this.zeroGrad();
    for (const t of this.stateDict().values()) t.dispose();
  }
}
