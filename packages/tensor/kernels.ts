/**
 * The kernel table: every kernel any backend runs, with its buffers, its
 * parameter layout and the byte sizes it expects.
 *
 * This file is the contract between the TypeScript side and every native
 * implementation (`native/cpu`, `native/cuda`) and the reference/meta backends.
 * Conventions for all kernels:
 * - buffers are contiguous, row-major; `f32` unless a kernel says `i32`;
 * - `params` is a flat list of numbers (passed to C as `double`); integers are
 *   exact; booleans are 0/1; shapes are listed dimension by dimension;
 * - outputs never alias inputs, except the inputs a kernel lists in `mutates`,
 *   which it updates in place;
 * - results must be deterministic: the same inputs and params give bitwise the
 *   same outputs on the same backend and thread count (no atomics in sums);
 * - element counts may be zero (then the kernel does nothing, except reductions
 *   over an empty axis: sum gives 0, mean gives NaN).
 *
 * Random numbers: Philox4x32-10 (Salmon et al., SC'11; Random123). Key
 * `k = (seed mod 2^32, floor(seed / 2^32))`; element `i` of a random kernel uses
 * the counter `c = (lo32(offset + i), hi32(offset + i), 0, 0)` and the output
 * words `w0, w1`. `u(w) = (w >>> 8) * 2^-24` in [0, 1). Uniform:
 * `low + (high - low) * u(w0)`. Normal: `u1 = ((w0 >>> 8) + 1) * 2^-24`,
 * `u2 = u(w1)`, `mean + std * sqrt(-2 ln u1) * cos(2 pi u2)`. Dropout keeps
 * element `i` when `u(w0) >= p` (compared in double precision) and scales kept
 * values by `1 / (1 - p)`. See {@link philox4x32} for the reference and its
 * known-answer vectors.
 *
 * @module
 */

import { KernelError } from "./backend.ts";
import type { KernelSizes, KernelSpec } from "./kernels/_spec.ts";
import { ELEMENTWISE_KERNELS, type ElementwiseKernelName } from "./kernels/elementwise.ts";
import { REDUCE_KERNELS, type ReduceKernelName } from "./kernels/reduce.ts";
import { MATMUL_KERNELS, type MatmulKernelName } from "./kernels/matmul.ts";
import { LAYOUT_KERNELS, type LayoutKernelName } from "./kernels/layout.ts";
import { CONV_KERNELS, type ConvKernelName } from "./kernels/conv.ts";
import { NORM_KERNELS, type NormKernelName } from "./kernels/norm.ts";
import { RANDOM_KERNELS, type RandomKernelName } from "./kernels/random.ts";
import { LOSS_OPTIM_KERNELS, type LossOptimKernelName } from "./kernels/loss_optim.ts";

export { type KernelSizes, type KernelSpec, MAX_DIMS } from "./kernels/_spec.ts";
export { type ConvDims, convDims, convOutSize, poolDims } from "./kernels/conv.ts";
export { philox4x32, philoxElement, philoxUniform } from "./kernels/random.ts";
export type {
  ConvKernelName,
  ElementwiseKernelName,
  LayoutKernelName,
  LossOptimKernelName,
  MatmulKernelName,
  NormKernelName,
  RandomKernelName,
  ReduceKernelName,
};

/** Name of a kernel in {@link KERNELS}. */
export type KernelName =
  | ElementwiseKernelName
  | ReduceKernelName
  | MatmulKernelName
  | LayoutKernelName
  | ConvKernelName
  | NormKernelName
  | RandomKernelName
  | LossOptimKernelName;

/** Every kernel, by name, family by family (the order of `native/cpu/*.c`). Backends must implement all of them. */
export const KERNELS: Readonly<Record<KernelName, KernelSpec>> = {
  ...ELEMENTWISE_KERNELS,
  ...REDUCE_KERNELS,
  ...MATMUL_KERNELS,
  ...LAYOUT_KERNELS,
  ...CONV_KERNELS,
  ...NORM_KERNELS,
  ...RANDOM_KERNELS,
  ...LOSS_OPTIM_KERNELS,
};

/** A kernel family: one `native/cpu/<family>.c` file, one `kernels/<family>.ts` table, one reference module. */
export type KernelFamily =
  | "elementwise"
  | "reduce"
  | "matmul"
  | "layout"
  | "conv"
  | "norm"
  | "random"
  | "loss_optim";

/** The kernels of each family, in table order. */
export const KERNEL_FAMILIES: Readonly<Record<KernelFamily, readonly KernelName[]>> = {
  elementwise: Object.keys(ELEMENTWISE_KERNELS) as KernelName[],
  reduce: Object.keys(REDUCE_KERNELS) as KernelName[],
  matmul: Object.keys(MATMUL_KERNELS) as KernelName[],
  layout: Object.keys(LAYOUT_KERNELS) as KernelName[],
  conv: Object.keys(CONV_KERNELS) as KernelName[],
  norm: Object.keys(NORM_KERNELS) as KernelName[],
  random: Object.keys(RANDOM_KERNELS) as KernelName[],
  loss_optim: Object.keys(LOSS_OPTIM_KERNELS) as KernelName[],
};

/** All kernel names, in table order. */
export const KERNEL_NAMES: readonly KernelName[] = Object.keys(KERNELS) as KernelName[];

/** Looks a kernel up, throwing a {@link KernelError} for unknown names. */
export function kernelSpec(name: string): KernelSpec {
  const spec = (KERNELS as Record<string, KernelSpec>)[name];
  if (!spec) throw new KernelError(name, `unknown kernel (not in the kernel table)`);
  return spec;
}

/**
 * The inputs a call of kernel `name` with params `params` updates in place
 * (its spec's `mutates`, or `mutatesOf(params)`); empty for most kernels.
 * Call it after the params were checked (`checkKernelCall`).
 */
export function kernelMutates(name: string, params: readonly number[]): readonly number[] {
  const spec = kernelSpec(name);
  return spec.mutatesOf?.(params) ?? spec.mutates ?? NONE;
}

/** Whether some call of kernel `name` updates inputs in place. */
export function kernelMayMutate(name: string): boolean {
  const spec = kernelSpec(name);
  return spec.mutatesOf !== undefined || (spec.mutates?.length ?? 0) > 0;
}

const NONE: readonly number[] = Object.freeze([]);

/** Expected buffer sizes of a call, with malformed params reported as a {@link KernelError} naming the kernel. */
export function kernelSizes(name: string, params: readonly number[]): KernelSizes {
  const spec = kernelSpec(name);
  try {
    return spec.sizes(params);
  } catch (e) {
    if (e instanceof KernelError && e.kernel !== name) {
      throw new KernelError(name, e.message.replace(/^[^:]*: /, ""), { cause: e });
    }
    throw e;
  }
}

/**
 * Validates a kernel call's buffer sizes against the table; every backend calls
 * this before touching memory. Buffers may be larger than required, never smaller.
 */
export function checkKernelCall(
  name: string,
  inputBytes: readonly number[],
  outputBytes: readonly number[],
  params: readonly number[],
): KernelSizes {
  const sizes = kernelSizes(name, params);
  const spec = kernelSpec(name);
  if (inputBytes.length !== sizes.inputs.length) {
    throw new KernelError(
      name,
      `expected ${sizes.inputs.length} input buffers (${
        spec.inputs.join(", ")
      }), got ${inputBytes.length}`,
    );
  }
  if (outputBytes.length !== sizes.outputs.length) {
    throw new KernelError(
      name,
      `expected ${sizes.outputs.length} output buffers (${
        spec.outputs.join(", ")
      }), got ${outputBytes.length}`,
    );
  }
  sizes.inputs.forEach((need, i) => {
    if (inputBytes[i]! < need) {
      throw new KernelError(
        name,
        `input ${i} has ${inputBytes[i]} bytes, needs ${need} (params ${params.join(", ")})`,
      );
    }
  });
  sizes.outputs.forEach((need, i) => {
    if (outputBytes[i]! < need) {
      throw new KernelError(
        name,
        `output ${i} has ${outputBytes[i]} bytes, needs ${need} (params ${params.join(", ")})`,
      );
    }
  });
  return sizes;
}
