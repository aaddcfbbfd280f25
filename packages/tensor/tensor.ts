/**
 * `Tensor`: a thin handle over a refcounted {@link Storage} plus a shape and a
 * dtype. All tensors are contiguous and row-major; views that need no copy
 * (reshape, flatten, squeeze, unsqueeze, detach) share their storage.
 *
 * Lifetimes are deterministic: `dispose()`, `using`, and {@link tidy} scopes
 * free device memory as soon as a tensor is no longer needed; a
 * `FinalizationRegistry` frees storages whose handles were dropped without
 * being disposed, only as a safety net.
 *
 * @module
 */

import type { Backend, DeviceBuffer, DeviceKind, DType } from "./backend.ts";
import {
  backward as runBackward,
  type GradNode,
  installEngineHooks,
  releaseNode,
} from "./autograd.ts";
import { fmt, numel } from "./_shape.ts";
import * as ops from "./ops.ts";
import { full } from "./creation.ts";

export {
  arange,
  fromTypedArray,
  full,
  type NestedArray,
  ones,
  onesLike,
  tensor,
  zeros,
  zerosLike,
} from "./creation.ts";

// ------------------------------------------------------------------ storage

interface StorageCell {
  backend: Backend;
  buffer: DeviceBuffer;
  live: boolean;
}

const finalizer = new FinalizationRegistry<StorageCell>((cell) => {
  if (!cell.live) return;
  cell.live = false;
  try {
    cell.backend.free(cell.buffer);
  } catch {
    // The backend may already be closed; nothing else to release.
  }
});

/**
 * A refcounted owner of one device buffer. Tensors (and views) hold references;
 * the buffer is freed when the last one is released.
 */
export class Storage {
  /** The backend that allocated the buffer. */
  readonly backend: Backend;
  /** The device buffer (valid while `refs > 0`). */
  readonly buffer: DeviceBuffer;
  /** Number of tensor handles referencing this storage. */
  refs = 0;
  readonly #cell: StorageCell;

  /** Wraps an allocated buffer; the storage frees it when its last reference goes. */
  constructor(backend: Backend, buffer: DeviceBuffer) {
    this.backend = backend;
    this.buffer = buffer;
    this.#cell = { backend, buffer, live: true };
    finalizer.register(this, this.#cell, this);
  }

  /** Size of the buffer in bytes. */
  get bytes(): number {
    return this.buffer.bytes;
  }

  /** True until the buffer has been freed. */
  get live(): boolean {
    return this.#cell.live;
  }

  /** Adds a reference. */
  retain(): void {
    this.refs++;
  }

  /** Drops a reference; frees the buffer when none are left. */
  release(): void {
    if (--this.refs > 0 || !this.#cell.live) return;
    this.#cell.live = false;
    finalizer.unregister(this);
    this.backend.free(this.buffer);
  }
}

// ------------------------------------------------------------------ scopes

const scopes: Tensor[][] = [];
let untrackedDepth = 0;

/** Runs `fn` with new tensors not registered in any scope (engine-owned tensors). */
function untracked<T>(fn: () => T): T {
  untrackedDepth++;
  try {
    return fn();
  } finally {
    untrackedDepth--;
  }
}

function collectTensors(v: unknown, out: Set<Tensor>, depth: number): void {
  if (depth > 8 || v === null || typeof v !== "object") return;
  if (v instanceof Tensor) {
    out.add(v);
    return;
  }
  if (Array.isArray(v)) {
    for (const x of v) collectTensors(x, out, depth + 1);
    return;
  }
  if (Object.getPrototypeOf(v) === Object.prototype) {
    for (const x of Object.values(v)) collectTensors(x, out, depth + 1);
  }
}

/**
 * Runs `fn` in a scope and disposes every tensor created inside it, except the
 * tensors it returns (found in arrays and plain objects too) and those passed
 * to {@link keep}. Returned tensors move to the enclosing scope. Scopes nest.
 * `fn` must be synchronous.
 *
 * @example
 * ```ts
 * import { tidy, tensor, setDefaultBackend, getDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const before = getDefaultBackend().memory().usedBytes;
 * const y = tidy(() => tensor([1, 2, 3]).mul(2).add(1));
 * // only y's 12 bytes remain
 * if (getDefaultBackend().memory().usedBytes !== before + 12) throw new Error("leak");
 * y.dispose();
 * ```
 */
export function tidy<T>(fn: () => T): T {
  const scope: Tensor[] = [];
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    scopes.pop();
    for (const t of scope) if (!t.kept) t.dispose();
    throw e;
  }
  scopes.pop();
  if (result instanceof Promise) {
    throw new TypeError("tidy: fn returned a Promise; tidy scopes must be synchronous");
  }
  const keepSet = new Set<Tensor>();
  collectTensors(result, keepSet, 0);
  const parent = scopes[scopes.length - 1];
  for (const t of scope) {
    if (keepSet.has(t)) parent?.push(t);
    else if (!t.kept) t.dispose();
  }
  return result;
}

/**
 * Exempts a tensor from every enclosing and future {@link tidy} scope (it must
 * then be disposed explicitly). Returns the tensor.
 *
 * @example
 * ```ts
 * import { keep, tidy, zeros, setDefaultBackend, type Tensor } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const saved: Tensor[] = [];
 * tidy(() => {
 *   saved.push(keep(zeros([2])));
 * });
 * if (saved[0]!.disposed) throw new Error("kept tensors survive tidy");
 * saved[0]!.dispose();
 * ```
 */
export function keep<T extends Tensor>(t: T): T {
  t.kept = true;
  return t;
}

// ------------------------------------------------------------------ default backend

let defaultBackend: Backend | null = null;

/** Sets (or with null, clears) the backend that creation functions use when no `backend` option is given. */
export function setDefaultBackend(backend: Backend | null): void {
  defaultBackend = backend;
}

/**
 * The default backend; throws when none was set.
 *
 * @example
 * ```ts
 * import { getDefaultBackend, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const be = new ReferenceBackend();
 * setDefaultBackend(be);
 * if (getDefaultBackend() !== be) throw new Error("default backend");
 * ```
 */
export function getDefaultBackend(): Backend {
  if (defaultBackend === null) {
    throw new Error(
      "no default backend: call setDefaultBackend(backend) first (e.g. cpuBackend() from @libra/native), or pass { backend } to the creation function",
    );
  }
  return defaultBackend;
}

/**
 * Runs `fn` with `backend` as the default backend, restoring the previous one after.
 *
 * @example
 * ```ts
 * import { withBackend, zeros } from "@libra/tensor";
 * import { MetaBackend } from "@libra/tensor/meta-backend";
 * const meta = new MetaBackend();
 * const t = withBackend(meta, () => zeros([1024]));
 * if (meta.memory().usedBytes !== 4096) throw new Error("allocated on meta");
 * t.dispose();
 * ```
 */
export function withBackend<T>(backend: Backend, fn: () => T): T {
  const prev = defaultBackend;
  defaultBackend = backend;
  try {
    return fn();
  } finally {
    defaultBackend = prev;
  }
}

// ------------------------------------------------------------------ tensor

/** Options of the creation functions. */
export interface TensorOptions {
  /** Element type (default `"f32"`). */
  dtype?: DType;
  /** Backend (default: {@link getDefaultBackend}). */
  backend?: Backend;
  /** Makes the new tensor a leaf that accumulates `.grad`. */
  requiresGrad?: boolean;
}

/** A number or a tensor: binary ops accept either on either side. */
export type TensorLike = Tensor | number;

/**
 * An n-dimensional array on a backend. Create tensors with {@link tensor},
 * {@link zeros} and friends; ops are available both as functions
 * (`add(a, b)`) and as methods (`a.add(b)`), with numpy broadcasting.
 *
 * @example
 * ```ts
 * import { tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1, 2], [3, 4]], undefined, { requiresGrad: true });
 * const loss = x.mul(x).sum();
 * loss.backward();
 * if (!(x.grad!.toArray().join() === "2,4,6,8")) throw new Error("example: unexpected result");
 * ```
 */
export class Tensor {
  /** Dimensions, outermost first. */
  readonly shape: readonly number[];
  /** Element type. */
  readonly dtype: DType;
  /** The storage this tensor reads (shared with its views). */
  readonly storage: Storage;
  /** Number of elements. */
  readonly size: number;
  /** Gradient accumulated by `backward()` (leaves that require grad), owned by this tensor. */
  grad: Tensor | null = null;
  /** The recorded op that produced this tensor, when it requires grad and is not a leaf. */
  node: GradNode | null = null;
  /** Set by {@link keep}: scopes do not dispose this tensor. */
  kept = false;
  #leafRequiresGrad = false;
  #disposed = false;

  /**
   * Wraps a storage (taking one reference). Prefer the creation functions;
   * this constructor is for backends and internal views.
   */
  constructor(storage: Storage, shape: readonly number[], dtype: DType) {
    this.storage = storage;
    this.shape = shape;
    this.dtype = dtype;
    this.size = numel(shape);
    storage.retain();
    if (untrackedDepth === 0 && scopes.length > 0) scopes[scopes.length - 1]!.push(this);
  }

  /** The backend holding the data. */
  get backend(): Backend {
    return this.storage.backend;
  }

  /** Kind of memory the data lives in (`"cpu"`, `"cuda"`, `"meta"`), from the backend. */
  get device(): DeviceKind {
    return this.storage.backend.device;
  }

  /** Rank (number of dimensions). */
  get ndim(): number {
    return this.shape.length;
  }

  /** True after {@link Tensor.dispose}. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** True when gradients flow to or through this tensor. */
  get requiresGrad(): boolean {
    return this.#leafRequiresGrad || this.node !== null;
  }

  /** Marks a leaf as requiring grad (non-leaves get it from their inputs). */
  set requiresGrad(v: boolean) {
    if (this.node !== null) {
      throw new Error(
        `requiresGrad: only leaf tensors can be changed (this one was computed by ${this.node.op.name}); use detach()`,
      );
    }
    if (v && this.dtype !== "f32") {
      throw new TypeError(`requiresGrad: only f32 tensors can require grad, got ${this.dtype}`);
    }
    this.#leafRequiresGrad = v;
  }

  /** True when this tensor was not produced by a recorded op. */
  get isLeaf(): boolean {
    return this.node === null;
  }

  /** Releases this handle (and its gradient and graph node). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.storage.release();
    if (this.node !== null) {
      releaseNode(this.node);
      this.node = null;
    }
    if (this.grad !== null) {
      this.grad.dispose();
      this.grad = null;
    }
  }

  /** `using t = ...` disposes at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Throws when this tensor was disposed (ops call it on their inputs). */
  assertLive(op: string): void {
    if (this.#disposed) {
      throw new Error(`${op}: tensor ${fmt(this.shape)} ${this.dtype} was already disposed`);
    }
  }

  /** Copies the data to a new host typed array. */
  toTypedArray(): Float32Array | Int32Array {
    this.assertLive("toTypedArray");
    const bytes = this.backend.read(this.storage.buffer, this.size * 4);
    const copy = new Uint8Array(bytes.byteLength);
    copy.set(bytes);
    return this.dtype === "i32"
      ? new Int32Array(copy.buffer, 0, this.size)
      : new Float32Array(copy.buffer, 0, this.size);
  }

  /** The elements as a flat array of numbers (row-major). */
  toArray(): number[] {
    return Array.from(this.toTypedArray());
  }

  /** The single element of a one-element tensor. */
  item(): number {
    if (this.size !== 1) {
      throw new RangeError(`item: tensor ${fmt(this.shape)} has ${this.size} elements, not 1`);
    }
    return this.toTypedArray()[0]!;
  }

  /** Back-propagates from this tensor (see {@link ./autograd.ts}). */
  backward(grad?: Tensor): void {
    runBackward(this, grad);
  }

  /** A new handle on the same storage, cut from the graph (never requires grad). */
  detach(): Tensor {
    this.assertLive("detach");
    return new Tensor(this.storage, this.shape, this.dtype);
  }

  /** Debug string: shape, dtype and backend. */
  toString(): string {
    return `Tensor(${fmt(this.shape)}, ${this.dtype}, ${this.backend.name})`;
  }

  // -------------------------------------------------------------- methods

  /** {@link ops.add} */
  add(b: TensorLike): Tensor {
    return ops.add(this, b);
  }
  /** {@link ops.sub} */
  sub(b: TensorLike): Tensor {
    return ops.sub(this, b);
  }
  /** {@link ops.mul} */
  mul(b: TensorLike): Tensor {
    return ops.mul(this, b);
  }
  /** {@link ops.div} */
  div(b: TensorLike): Tensor {
    return ops.div(this, b);
  }
  /** {@link ops.neg} */
  neg(): Tensor {
    return ops.neg(this);
  }
  /** {@link ops.exp} */
  exp(): Tensor {
    return ops.exp(this);
  }
  /** {@link ops.log} */
  log(): Tensor {
    return ops.log(this);
  }
  /** {@link ops.sqrt} */
  sqrt(): Tensor {
    return ops.sqrt(this);
  }
  /** {@link ops.rsqrt} */
  rsqrt(): Tensor {
    return ops.rsqrt(this);
  }
  /** {@link ops.pow} */
  pow(exponent: number): Tensor {
    return ops.pow(this, exponent);
  }
  /** {@link ops.relu} */
  relu(): Tensor {
    return ops.relu(this);
  }
  /** {@link ops.gelu} */
  gelu(approximate: "tanh" | "none" = "none"): Tensor {
    return ops.gelu(this, approximate);
  }
  /** {@link ops.silu} */
  silu(): Tensor {
    return ops.silu(this);
  }
  /** {@link ops.sigmoid} */
  sigmoid(): Tensor {
    return ops.sigmoid(this);
  }
  /** {@link ops.tanh} */
  tanh(): Tensor {
    return ops.tanh(this);
  }
  /** {@link ops.eq} */
  eq(b: TensorLike): Tensor {
    return ops.eq(this, b);
  }
  /** {@link ops.ne} */
  ne(b: TensorLike): Tensor {
    return ops.ne(this, b);
  }
  /** {@link ops.lt} */
  lt(b: TensorLike): Tensor {
    return ops.lt(this, b);
  }
  /** {@link ops.le} */
  le(b: TensorLike): Tensor {
    return ops.le(this, b);
  }
  /** {@link ops.gt} */
  gt(b: TensorLike): Tensor {
    return ops.gt(this, b);
  }
  /** {@link ops.ge} */
  ge(b: TensorLike): Tensor {
    return ops.ge(this, b);
  }
  /** {@link ops.sum} */
  sum(axis?: number, keepdim = false): Tensor {
    return ops.sum(this, axis, keepdim);
  }
  /** {@link ops.mean} */
  mean(axis?: number, keepdim = false): Tensor {
    return ops.mean(this, axis, keepdim);
  }
  /** {@link ops.max} */
  max(axis?: number, keepdim = false): Tensor {
    return ops.max(this, axis, keepdim);
  }
  /** {@link ops.argmax} */
  argmax(axis?: number, keepdim = false): Tensor {
    return ops.argmax(this, axis, keepdim);
  }
  /** {@link ops.softmax} */
  softmax(): Tensor {
    return ops.softmax(this);
  }
  /** {@link ops.logSoftmax} */
  logSoftmax(): Tensor {
    return ops.logSoftmax(this);
  }
  /** {@link ops.matmul} */
  matmul(b: Tensor, options?: ops.MatmulOptions): Tensor {
    return ops.matmul(this, b, options);
  }
  /** {@link ops.transpose} */
  transpose(dim0 = -2, dim1 = -1): Tensor {
    return ops.transpose(this, dim0, dim1);
  }
  /** {@link ops.permute} */
  permute(perm: readonly number[]): Tensor {
    return ops.permute(this, perm);
  }
  /** {@link ops.reshape} */
  reshape(shape: readonly number[]): Tensor {
    return ops.reshape(this, shape);
  }
  /** {@link ops.flatten} */
  flatten(startDim = 0, endDim = -1): Tensor {
    return ops.flatten(this, startDim, endDim);
  }
  /** {@link ops.squeeze} */
  squeeze(axis?: number): Tensor {
    return ops.squeeze(this, axis);
  }
  /** {@link ops.unsqueeze} */
  unsqueeze(axis: number): Tensor {
    return ops.unsqueeze(this, axis);
  }
  /** {@link ops.broadcastTo} */
  broadcastTo(shape: readonly number[]): Tensor {
    return ops.broadcastTo(this, shape);
  }
  /** {@link ops.slice} */
  slice(starts: readonly number[], sizes?: readonly number[]): Tensor {
    return ops.slice(this, starts, sizes);
  }
  /** {@link ops.narrow} */
  narrow(dim: number, start: number, length: number): Tensor {
    return ops.narrow(this, dim, start, length);
  }
  /** {@link ops.indexSelect} */
  indexSelect(axis: number, index: Tensor): Tensor {
    return ops.indexSelect(this, axis, index);
  }
  /** {@link ops.clone} */
  clone(): Tensor {
    return ops.clone(this);
  }
  /** {@link ops.cast} */
  cast(dtype: DType): Tensor {
    return ops.cast(this, dtype);
  }
}

// ------------------------------------------------------------------ internals for ops

/**
 * Allocates an uninitialized tensor (internal; contents unspecified).
 *
 * @example
 * ```ts
 * import { empty, getDefaultBackend, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const t = empty(getDefaultBackend(), [2, 2], "f32");
 * if (!(t.size === 4)) throw new Error("example: unexpected result");
 * ```
 */
export function empty(backend: Backend, shape: readonly number[], dtype: DType): Tensor {
  const buffer = backend.alloc(numel(shape) * 4);
  return new Tensor(new Storage(backend, buffer), shape, dtype);
}

/**
 * A new handle (view) on `t`'s storage with another shape of the same size.
 *
 * @example
 * ```ts
 * import { view, arange, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = arange(4);
 * if (!(view(x, [2, 2]).storage === x.storage)) throw new Error("example: unexpected result");
 * ```
 */
export function view(t: Tensor, shape: readonly number[]): Tensor {
  return new Tensor(t.storage, shape, t.dtype);
}

/** Marks `t` as a leaf that requires grad (internal; skips the dtype check for f32). */
function setGrad(leaf: Tensor, g: Tensor | null): void {
  if (leaf.grad !== null && leaf.grad !== g) leaf.grad.dispose();
  leaf.grad = g;
}

installEngineHooks({
  add: (a, b) => ops.add(a, b),
  onesLike: (t) => full(t.shape, 1, { backend: t.backend }),
  alias: (t) => view(t, t.shape),
  setGrad,
  untracked,
  owned,
});

/** A new handle on `t`'s storage that no scope tracks (saved tensors of graph nodes). */
export function savedView(t: Tensor): Tensor {
  untrackedDepth++;
  try {
    return new Tensor(t.storage, t.shape, t.dtype);
  } finally {
    untrackedDepth--;
  }
}

/**
 * Runs `fn` in a private scope: tensors created inside and not returned are
 * disposed; returned tensors are left untracked (the caller owns them). The
 * autograd engine runs every gradient rule this way.
 */
function owned<T>(fn: () => T): T {
  const scope: Tensor[] = [];
  const depth = untrackedDepth;
  untrackedDepth = 0;
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    for (const t of scope) if (!t.kept) t.dispose();
    throw e;
  } finally {
    scopes.pop();
    untrackedDepth = depth;
  }
  const keepSet = new Set<Tensor>();
  collectTensors(result, keepSet, 0);
  for (const t of scope) if (!keepSet.has(t) && !t.kept) t.dispose();
  return result;
}
