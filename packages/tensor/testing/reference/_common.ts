/**
 * What every reference kernel shares: the buffer class, the kernel signature
 * and index helpers.
 *
 * @module
 */

import type { DeviceBuffer } from "../../backend.ts";
import type { KernelName } from "../../kernels.ts";
export type FArr = Float32Array | Float64Array;
export type IArr = Int32Array | Float64Array;

export class RefBuffer implements DeviceBuffer {
  freed = false;
  /** f64 mode only: the slot holds i32 values (so `read` returns i32 bytes). */
  isInt = false;
  constructor(
    readonly id: number,
    readonly bytes: number,
    readonly raw: Uint8Array,
    readonly f: FArr,
    readonly i: IArr,
  ) {}
}

/** One reference kernel: reads `ins`, writes `outs` (or mutates listed inputs). */
export type RefKernel = (
  k: KernelName,
  ins: RefBuffer[],
  outs: RefBuffer[],
  p: readonly number[],
) => void;

/** Offset of flat output index `i` into an input with `strides` over `shape`. */
export function stridedOffset(
  i: number,
  shape: readonly number[],
  strides: readonly number[],
): number {
  let off = 0;
  for (let d = shape.length - 1; d >= 0; d--) {
    const s = shape[d]!;
    off += (i % s) * strides[d]!;
    i = Math.floor(i / s);
  }
  return off;
}

/** Product of a list of sizes. */
export function prod(xs: readonly number[]): number {
  let r = 1;
  for (const x of xs) r *= x;
  return r;
}
