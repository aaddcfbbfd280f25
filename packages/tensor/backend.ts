/**
 * The `Backend` contract: the only way tensor code touches memory and kernels.
 *
 * A backend owns device buffers and runs kernels from the op table in
 * {@link ./kernels.ts} on them. Every kernel takes contiguous buffers and a flat
 * list of numeric parameters whose layout the op table documents. The
 * re-materialization runtime is itself a backend that wraps a real one, so
 * everything above this interface (tensors, autograd, models) runs unchanged
 * under a memory budget.
 *
 * @module
 */

import type { KernelName } from "./kernels.ts";
import type { SampleBounds } from "@libra/util/sample-bounds";

/** Element types. Buffers themselves are untyped bytes; kernels know the types they read. */
export type DType = "f32" | "i32";

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = { f32: 4, i32: 4 };

/** Where a backend keeps its buffers. */
export type DeviceKind = "cpu" | "cuda" | "meta";

/**
 * A device buffer owned by one backend. Opaque: only the backend that allocated
 * it may interpret it. `bytes` is the size requested at allocation.
 */
export interface DeviceBuffer {
  /** Size in bytes, as requested from {@link Backend.alloc}. */
  readonly bytes: number;
  /** Unique per backend instance, stable for the buffer's life (useful as a map key). */
  readonly id: number;
}

/**
 * Host memory a backend can copy device buffers into and out of (for swapping).
 * On CUDA it is page-locked so copies can be asynchronous.
 */
export interface HostBuffer {
  /** Size in bytes. */
  readonly bytes: number;
  /** The host bytes; valid until the buffer is freed with {@link Backend.freeHost}. */
  readonly data: Uint8Array;
}

/** An asynchronous copy in flight. */
export interface Transfer {
  /** True once the copy has completed (never blocks). */
  readonly done: boolean;
  /** Blocks until the copy has completed. */
  wait(): void;
}

/** Memory statistics of a backend, in bytes. */
export interface MemoryInfo {
  /** Bytes currently allocated through this backend. */
  readonly usedBytes: number;
  /** Highest `usedBytes` seen since creation or the last {@link Backend.resetPeak}. */
  readonly peakBytes: number;
  /** Device capacity (for cpu/meta: `Infinity` unless a limit was configured). */
  readonly totalBytes: number;
}

/**
 * The backend contract (ARCHITECTURE.md, "Contracts").
 *
 * Rules every implementation keeps (checked by `_conformance.ts`):
 * - `alloc(0)` is valid and returns a distinct buffer of zero bytes;
 * - `run` validates the kernel name, the number of inputs/outputs and the byte
 *   size of every buffer against the op table's `sizes(params)` before touching
 *   memory, and throws a {@link KernelError} naming the kernel and the mismatch;
 * - using a freed buffer throws; freeing twice throws;
 * - `read` after `run` returns the kernel's results (`sync` is implied).
 */
export interface Backend {
  /** Short name, e.g. `"cpu"`, `"cuda"`, `"meta"`, `"runtime(cpu)"`. */
  readonly name: string;
  /** Kind of memory the buffers live in. */
  readonly device: DeviceKind;
  /** False for backends that track sizes only (meta): `read` then throws. */
  readonly hasData: boolean;

  /** Allocates `bytes` of device memory (contents unspecified). */
  alloc(bytes: number): DeviceBuffer;
  /** Releases a buffer. */
  free(buf: DeviceBuffer): void;
  /** Copies host bytes into `buf` starting at `offsetBytes` (default 0). */
  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes?: number): void;
  /** Copies the whole buffer (or its first `bytes`) to a new host array. */
  read(buf: DeviceBuffer, bytes?: number): Uint8Array;
  /** Runs one kernel of the op table. Outputs must be distinct from inputs unless the kernel mutates. */
  run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void;
  /**
   * Optional: {@link run} for a call its caller has validated (`checkKernelCall`
   * passed for these buffers' sizes and these params; the outputs are
   * distinct from each other and from the inputs; the kernel mutates nothing).
   * A backend may skip its own checks of those; a runtime that validates each
   * distinct call once calls this instead of `run`.
   */
  runValidated?(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void;
  /**
   * Optional host helper from the backend's native library: the sampled
   * eviction search's draws and bounds, bitwise `sampleBounds` of
   * `@libra/evict` (see there for the arguments), which a runtime over this
   * backend hands its policy. Nothing in it touches device memory.
   */
  readonly sampleBounds?: SampleBounds;
  /** Current memory statistics. */
  memory(): MemoryInfo;
  /** Resets `peakBytes` to the current `usedBytes`. */
  resetPeak(): void;
  /** Waits for all queued work. */
  sync(): void;

  /** Allocates host memory for swapping (pinned on CUDA). */
  allocHost(bytes: number): HostBuffer;
  /** Frees host memory from {@link Backend.allocHost}. */
  freeHost(buf: HostBuffer): void;
  /** Copies device -> host (swap out) or host -> device (swap in); synchronous. */
  copy(src: DeviceBuffer, dst: HostBuffer): void;
  /** Copies host memory to device memory (swap-in), synchronously. */
  copy(src: HostBuffer, dst: DeviceBuffer): void;
  /**
   * Asynchronous copy where the backend supports it (CUDA streams); backends
   * without it complete the copy before returning a finished `Transfer`.
   */
  copyAsync(src: DeviceBuffer, dst: HostBuffer): Transfer;
  /** Starts a host-to-device copy (swap-in) that completes in the background. */
  copyAsync(src: HostBuffer, dst: DeviceBuffer): Transfer;
}

/** Thrown when a kernel call is malformed (unknown kernel, wrong arity, wrong sizes, bad params). */
export class KernelError extends Error {
  /** The kernel that was called. */
  readonly kernel: string;
  /** A kernel error naming `kernel`; the message reads `<kernel>: <message>`. */
  constructor(kernel: string, message: string, options?: ErrorOptions) {
    super(`${kernel}: ${message}`, options);
    this.name = "KernelError";
    this.kernel = kernel;
  }
}

/** Thrown when a backend cannot provide the memory asked for. */
export class OutOfMemoryError extends Error {
  /** Bytes the failed allocation asked for. */
  readonly requestedBytes: number;
  /** An out-of-memory error for an allocation of `requestedBytes`. */
  constructor(message: string, requestedBytes: number, options?: ErrorOptions) {
    super(message, options);
    this.name = "OutOfMemoryError";
    this.requestedBytes = requestedBytes;
  }
}
