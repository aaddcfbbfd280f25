/**
 * Creating tensors: from nested arrays or typed arrays, filled, ranges.
 * Re-exported by `tensor.ts` (and `mod.ts`).
 *
 * @module
 */

import type { DType } from "./backend.ts";
import { empty, getDefaultBackend, type Tensor, type TensorOptions } from "./tensor.ts";
import { checkShape, fmt, numel } from "./_shape.ts";

/** Numbers nested in arrays, as accepted by {@link tensor}. */
export type NestedArray = number | readonly NestedArray[];

function inferShape(data: NestedArray): number[] {
  const shape: number[] = [];
  let d: NestedArray = data;
  while (Array.isArray(d)) {
    shape.push(d.length);
    d = (d as readonly NestedArray[])[0] ?? 0;
    if (d === undefined) break;
  }
  return shape;
}

function flattenInto(
  data: NestedArray,
  shape: readonly number[],
  depth: number,
  out: number[],
): void {
  if (depth === shape.length) {
    if (typeof data !== "number") {
      throw new TypeError(`tensor: ragged nested array (expected a number at depth ${depth})`);
    }
    out.push(data);
    return;
  }
  if (!Array.isArray(data) || data.length !== shape[depth]) {
    throw new TypeError(
      `tensor: ragged nested array: expected ${shape[depth]} entries at depth ${depth} (shape ${
        fmt(shape)
      })`,
    );
  }
  for (const x of data) flattenInto(x, shape, depth + 1, out);
}

function finish(t: Tensor, options: TensorOptions): Tensor {
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

/**
 * Creates a tensor from (nested) numbers or a typed array. The shape defaults
 * to the nesting (or `[length]` for flat data); dtype defaults to `f32`
 * (`i32` for an `Int32Array`).
 *
 * @example
 * ```ts
 * import { tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const t = tensor([[1, 2, 3], [4, 5, 6]]);
 * if (!(t.shape.join() === "2,3")) throw new Error("example: unexpected result");
 * const ids = tensor([0, 2], [2], { dtype: "i32" });
 * if (!(ids.dtype === "i32")) throw new Error("example: unexpected result");
 * ```
 */
export function tensor(
  data: NestedArray | Float32Array | Int32Array,
  shape?: readonly number[],
  options: TensorOptions = {},
): Tensor {
  let flat: ArrayLike<number>;
  let inferred: number[];
  if (data instanceof Float32Array || data instanceof Int32Array) {
    flat = data;
    inferred = [data.length];
  } else if (typeof data === "number") {
    flat = [data];
    inferred = [];
  } else {
    inferred = inferShape(data);
    const out: number[] = [];
    flattenInto(data, inferred, 0, out);
    flat = out;
  }
  const s = shape ?? inferred;
  checkShape("tensor", s);
  if (numel(s) !== flat.length) {
    throw new RangeError(`tensor: ${flat.length} values do not fill shape ${fmt(s)}`);
  }
  const dtype = options.dtype ?? (data instanceof Int32Array ? "i32" : "f32");
  const typed = dtype === "i32" ? Int32Array.from(flat) : Float32Array.from(flat);
  if (dtype === "i32") {
    for (let i = 0; i < flat.length; i++) {
      if (typed[i] !== flat[i]) {
        throw new RangeError(`tensor: value ${flat[i]} at ${i} is not an i32 integer`);
      }
    }
  }
  return fromTypedArray(typed, s, options);
}

/**
 * Creates a tensor holding a copy of `data` (dtype from the array type).
 *
 * @example
 * ```ts
 * import { fromTypedArray, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const t = fromTypedArray(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * if (!(t.item === t.item && t.size === 4)) throw new Error("example: unexpected result");
 * ```
 */
export function fromTypedArray(
  data: Float32Array | Int32Array,
  shape: readonly number[] = [data.length],
  options: TensorOptions = {},
): Tensor {
  checkShape("fromTypedArray", shape);
  if (numel(shape) !== data.length) {
    throw new RangeError(`fromTypedArray: ${data.length} values do not fill shape ${fmt(shape)}`);
  }
  const dtype: DType = data instanceof Int32Array ? "i32" : "f32";
  if (options.dtype !== undefined && options.dtype !== dtype) {
    throw new TypeError(
      `fromTypedArray: a ${data.constructor.name} holds ${dtype}, not ${options.dtype}`,
    );
  }
  const backend = options.backend ?? getDefaultBackend();
  const t = empty(backend, [...shape], dtype);
  if (data.length > 0) backend.write(t.storage.buffer, data);
  return finish(t, options);
}

/**
 * A tensor filled with `value`.
 *
 * @example
 * ```ts
 * import { full, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(full([2], 7).toArray().join() === "7,7")) throw new Error("example: unexpected result");
 * ```
 */
export function full(shape: readonly number[], value: number, options: TensorOptions = {}): Tensor {
  checkShape("full", shape);
  const backend = options.backend ?? getDefaultBackend();
  const dtype = options.dtype ?? "f32";
  if (dtype === "i32" && !Number.isInteger(value)) {
    throw new RangeError(`full: value ${value} is not an integer for an i32 tensor`);
  }
  const t = empty(backend, [...shape], dtype);
  backend.run(dtype === "i32" ? "fill_i32" : "fill", [], [t.storage.buffer], [t.size, value]);
  return finish(t, options);
}

/**
 * A tensor of zeros.
 *
 * @example
 * ```ts
 * import { zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(zeros([2, 3]).sum().item() === 0)) throw new Error("example: unexpected result");
 * ```
 */
export function zeros(shape: readonly number[], options: TensorOptions = {}): Tensor {
  return full(shape, 0, options);
}

/**
 * A tensor of ones.
 *
 * @example
 * ```ts
 * import { ones, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(ones([2, 3]).sum().item() === 6)) throw new Error("example: unexpected result");
 * ```
 */
export function ones(shape: readonly number[], options: TensorOptions = {}): Tensor {
  return full(shape, 1, options);
}

/**
 * Zeros with the shape, dtype and backend of `t`.
 *
 * @example
 * ```ts
 * import { zerosLike, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(zerosLike(tensor([1, 2])).toArray().join() === "0,0")) throw new Error("example: unexpected result");
 * ```
 */
export function zerosLike(t: Tensor): Tensor {
  return full(t.shape, 0, { backend: t.backend, dtype: t.dtype });
}

/**
 * Ones with the shape, dtype and backend of `t`.
 *
 * @example
 * ```ts
 * import { onesLike, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(onesLike(tensor([5])).item() === 1)) throw new Error("example: unexpected result");
 * ```
 */
export function onesLike(t: Tensor): Tensor {
  return full(t.shape, 1, { backend: t.backend, dtype: t.dtype });
}

/**
 * `[start, start + step, ...)` below `stop` (numpy `arange`); with one
 * argument, `[0, stop)`.
 *
 * @example
 * ```ts
 * import { arange, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(arange(1, 7, 2).toArray().join() === "1,3,5")) throw new Error("example: unexpected result");
 * ```
 */
export function arange(
  start: number,
  stop?: number,
  step = 1,
  options: TensorOptions = {},
): Tensor {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0 || !Number.isFinite(step)) {
    throw new RangeError(`arange: step must be a non-zero finite number, got ${step}`);
  }
  const n = Math.max(0, Math.ceil((stop - start) / step));
  const dtype = options.dtype ?? "f32";
  const data = dtype === "i32" ? new Int32Array(n) : new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = start + i * step;
  return fromTypedArray(data, [n], options);
}
