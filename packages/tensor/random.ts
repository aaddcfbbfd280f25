/**
 * Seeded random numbers and parameter initializers.
 *
 * One global generator holds `(seed, offset)`. Every random op (dropout,
 * {@link uniform}, {@link normal}, the initializers) takes the current pair and
 * advances `offset` by its element count, so each call draws fresh numbers and
 * a recomputation of the same kernel call (same params) draws exactly the same
 * ones. Numbers come from Philox4x32-10 as the kernel table specifies, hence
 * are identical on every backend.
 *
 * @module
 */

import type { Tensor, TensorOptions } from "./tensor.ts";
import { empty, getDefaultBackend } from "./tensor.ts";
import { checkShape, fmt } from "./_shape.ts";

let seed = 0;
let offset = 0;

/**
 * Resets the global generator to `seed` (offset 0). The default seed is 0.
 *
 * @example
 * ```ts
 * import { manualSeed, normal, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * manualSeed(42);
 * const a = normal([4]).toArray();
 * manualSeed(42);
 * const b = normal([4]).toArray();
 * if (!(a.join() === b.join())) throw new Error("example: unexpected result");
 * ```
 */
export function manualSeed(s: number): void {
  if (!Number.isInteger(s) || s < 0 || s >= 2 ** 53) {
    throw new RangeError(`manualSeed: seed must be an integer in [0, 2^53), got ${s}`);
  }
  seed = s;
  offset = 0;
}

/**
 * The generator state `{ seed, offset }` (for checkpoints and tests).
 *
 * @example
 * ```ts
 * import { randomState, manualSeed, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * manualSeed(1);
 * if (!(randomState().offset === 0)) throw new Error("example: unexpected result");
 * ```
 */
export function randomState(): { seed: number; offset: number } {
  return { seed, offset };
}

/**
 * Restores a state from {@link randomState}.
 *
 * @example
 * ```ts
 * import { setRandomState, randomState, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const s = randomState();
 * setRandomState(s);
 * ```
 */
export function setRandomState(state: { seed: number; offset: number }): void {
  manualSeed(state.seed);
  if (!Number.isInteger(state.offset) || state.offset < 0) {
    throw new RangeError(
      `setRandomState: offset must be a non-negative integer, got ${state.offset}`,
    );
  }
  offset = state.offset;
}

/**
 * Takes `[seed, offset]` for a random kernel drawing `count` elements, advancing the offset.
 *
 * @example
 * ```ts
 * import { nextRandom, manualSeed, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * manualSeed(9);
 * const [seed, offset] = nextRandom(16);
 * if (!(seed === 9 && offset === 0 && nextRandom(1)[1] === 16)) throw new Error("example: unexpected result");
 * ```
 */
export function nextRandom(count: number): [number, number] {
  const r: [number, number] = [seed, offset];
  offset += count;
  return r;
}

/** Options of the random creation functions. */
export interface RandomOptions extends TensorOptions {
  /** Explicit seed: uses `(seed, 0)` and leaves the global generator alone. */
  seed?: number;
}

function randomTensor(
  op: string,
  kernel: "rand_uniform" | "rand_normal",
  shape: readonly number[],
  a: number,
  b: number,
  options: RandomOptions,
): Tensor {
  checkShape(op, shape);
  if (options.dtype !== undefined && options.dtype !== "f32") {
    throw new TypeError(`${op}: random tensors are f32, got dtype ${options.dtype}`);
  }
  const backend = options.backend ?? getDefaultBackend();
  const t = empty(backend, [...shape], "f32");
  const [s, o] = options.seed !== undefined ? [options.seed, 0] : nextRandom(t.size);
  backend.run(kernel, [], [t.storage.buffer], [t.size, s, o, a, b]);
  if (options.requiresGrad) t.requiresGrad = true;
  return t;
}

/**
 * Uniform numbers in `[low, high)` (default `[0, 1)`).
 *
 * @example
 * ```ts
 * import { uniform, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const u = uniform([100], { low: -1, high: 1 }).toArray();
 * if (!(u.every((v) => v >= -1 && v < 1))) throw new Error("example: unexpected result");
 * ```
 */
export function uniform(
  shape: readonly number[],
  options: RandomOptions & { low?: number; high?: number } = {},
): Tensor {
  return randomTensor(
    "uniform",
    "rand_uniform",
    shape,
    options.low ?? 0,
    options.high ?? 1,
    options,
  );
}

/**
 * Normal numbers with `mean` (default 0) and `std` (default 1).
 *
 * @example
 * ```ts
 * import { normal, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const n = normal([2, 3], { std: 0.02 });
 * if (!(n.shape.join() === "2,3")) throw new Error("example: unexpected result");
 * ```
 */
export function normal(
  shape: readonly number[],
  options: RandomOptions & { mean?: number; std?: number } = {},
): Tensor {
  return randomTensor("normal", "rand_normal", shape, options.mean ?? 0, options.std ?? 1, options);
}

/**
 * `[fanIn, fanOut]` of a weight shape, as PyTorch computes them
 * (`[out, in, ...kernel]`: fanIn = in * receptive field, fanOut = out * receptive field).
 *
 * @example
 * ```ts
 * import { fans, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(fans([16, 8, 3, 3]).join() === "72,144")) throw new Error("example: unexpected result");
 * ```
 */
export function fans(shape: readonly number[]): [number, number] {
  if (shape.length < 2) {
    throw new RangeError(`fans: need at least 2 dimensions, got shape ${fmt(shape)}`);
  }
  let receptive = 1;
  for (let i = 2; i < shape.length; i++) receptive *= shape[i]!;
  return [shape[1]! * receptive, shape[0]! * receptive];
}

/** Nonlinearities for {@link gain}. */
export type Nonlinearity = "linear" | "sigmoid" | "tanh" | "relu" | "leaky_relu";

/**
 * PyTorch's `calculate_gain`. `param` is the leaky-relu slope (default 0.01).
 *
 * @example
 * ```ts
 * import { gain, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(gain("relu") === Math.SQRT2)) throw new Error("example: unexpected result");
 * ```
 */
export function gain(nonlinearity: Nonlinearity, param?: number): number {
  switch (nonlinearity) {
    case "linear":
    case "sigmoid":
      return 1;
    case "tanh":
      return 5 / 3;
    case "relu":
      return Math.SQRT2;
    case "leaky_relu": {
      const a = param ?? 0.01;
      return Math.sqrt(2 / (1 + a * a));
    }
  }
}

/** Options of the Kaiming initializers (PyTorch defaults: a = 0, fanIn, leaky_relu). */
export interface KaimingOptions extends RandomOptions {
  /** Negative slope of the leaky relu (default 0). */
  a?: number;
  /** Which fan preserves variance (default `"fanIn"`). */
  mode?: "fanIn" | "fanOut";
  /** Default `"leaky_relu"`. */
  nonlinearity?: Nonlinearity;
}

function kaimingStd(shape: readonly number[], o: KaimingOptions): number {
  const [fanIn, fanOut] = fans(shape);
  const fan = (o.mode ?? "fanIn") === "fanIn" ? fanIn : fanOut;
  return gain(o.nonlinearity ?? "leaky_relu", o.a ?? 0) / Math.sqrt(fan);
}

/**
 * He et al. uniform init: bound = gain * sqrt(3 / fan). PyTorch's `nn.Linear`
 * and `nn.Conv2d` use it with `a = sqrt(5)`.
 *
 * @example
 * ```ts
 * import { kaimingUniform, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = kaimingUniform([64, 32], { a: Math.sqrt(5) });
 * const bound = 1 / Math.sqrt(32);
 * if (!(w.toArray().every((v) => Math.abs(v) <= bound))) throw new Error("example: unexpected result");
 * ```
 */
export function kaimingUniform(shape: readonly number[], options: KaimingOptions = {}): Tensor {
  const bound = Math.sqrt(3) * kaimingStd(shape, options);
  return uniform(shape, { ...options, low: -bound, high: bound });
}

/**
 * He et al. normal init: std = gain / sqrt(fan).
 *
 * @example
 * ```ts
 * import { kaimingNormal, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = kaimingNormal([16, 8, 3, 3], { nonlinearity: "relu", mode: "fanOut" });
 * if (!(w.size === 16 * 8 * 9)) throw new Error("example: unexpected result");
 * ```
 */
export function kaimingNormal(shape: readonly number[], options: KaimingOptions = {}): Tensor {
  return normal(shape, { ...options, mean: 0, std: kaimingStd(shape, options) });
}

/**
 * Glorot uniform init: bound = gain * sqrt(6 / (fanIn + fanOut)).
 *
 * @example
 * ```ts
 * import { xavierUniform, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = xavierUniform([4, 6]);
 * if (!(w.toArray().every((v) => Math.abs(v) <= Math.sqrt(6 / 10)))) throw new Error("example: unexpected result");
 * ```
 */
export function xavierUniform(
  shape: readonly number[],
  options: RandomOptions & { gain?: number } = {},
): Tensor {
  const [fanIn, fanOut] = fans(shape);
  const bound = (options.gain ?? 1) * Math.sqrt(6 / (fanIn + fanOut));
  return uniform(shape, { ...options, low: -bound, high: bound });
}

/**
 * Glorot normal init: std = gain * sqrt(2 / (fanIn + fanOut)).
 *
 * @example
 * ```ts
 * import { xavierNormal, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(xavierNormal([4, 6]).shape.join() === "4,6")) throw new Error("example: unexpected result");
 * ```
 */
export function xavierNormal(
  shape: readonly number[],
  options: RandomOptions & { gain?: number } = {},
): Tensor {
  const [fanIn, fanOut] = fans(shape);
  const std = (options.gain ?? 1) * Math.sqrt(2 / (fanIn + fanOut));
  return normal(shape, { ...options, mean: 0, std });
}
