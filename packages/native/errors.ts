/**
 * Typed errors for the native library's status codes. Every error raised at
 * the FFI boundary carries the C function, the status code and the library's
 * own message (`libra_last_error()`), which names the values involved.
 *
 * @module
 */

import { OutOfMemoryError } from "@libra/tensor/backend";
import { Status } from "./symbols.ts";

/** Fields every error from the native library carries. */
export interface NativeErrorInfo {
  /** The C function that failed, e.g. `"libra_run"`. */
  readonly fn: string;
  /** The `libra_status` code it returned. */
  readonly status: number;
  /** The library's message for the failure (may be empty). */
  readonly nativeMessage: string;
}

/** A native call returned a status other than `LIBRA_OK`. */
export class NativeError extends Error implements NativeErrorInfo {
  readonly fn: string;
  readonly status: number;
  readonly nativeMessage: string;
  /** An error for the native call `fn` that returned `status` with the library's message. */
  constructor(fn: string, status: number, nativeMessage: string, options?: ErrorOptions) {
    super(`${fn} failed (status ${status}): ${nativeMessage || "no message"}`, options);
    this.name = "NativeError";
    this.fn = fn;
    this.status = status;
    this.nativeMessage = nativeMessage;
  }
}

/** `LIBRA_ERR_INVALID_ARGUMENT`: bad sizes, params, pointers or out-of-range indices. */
export class InvalidArgumentError extends NativeError {
  /** An invalid-argument error from the native call `fn`, with the library's message. */
  constructor(fn: string, nativeMessage: string, options?: ErrorOptions) {
    super(fn, Status.INVALID_ARGUMENT, nativeMessage, options);
    this.name = "InvalidArgumentError";
  }
}

/** `LIBRA_ERR_OUT_OF_MEMORY`: a native allocation failed. Also an {@link OutOfMemoryError}. */
export class NativeOutOfMemoryError extends OutOfMemoryError implements NativeErrorInfo {
  readonly fn: string;
  readonly status: number = Status.OUT_OF_MEMORY;
  readonly nativeMessage: string;
  /** An out-of-memory error from the native call `fn` for an allocation of `requestedBytes`. */
  constructor(fn: string, nativeMessage: string, requestedBytes: number, options?: ErrorOptions) {
    super(`${fn} failed: out of memory: ${nativeMessage}`, requestedBytes, options);
    this.name = "NativeOutOfMemoryError";
    this.fn = fn;
    this.nativeMessage = nativeMessage;
  }
}

/** `LIBRA_ERR_NO_DEVICE`: the CUDA build found no GPU or driver. */
export class NoDeviceError extends NativeError {
  /** A no-device error from the native call `fn`, with the library's message. */
  constructor(fn: string, nativeMessage: string, options?: ErrorOptions) {
    super(fn, Status.NO_DEVICE, nativeMessage, options);
    this.name = "NoDeviceError";
    const detail = nativeMessage || "no GPU or driver on this machine";
    this.message = `${/^no CUDA device/i.test(detail) ? "" : "no CUDA device: "}${detail} (${fn})`;
  }
}

/** `LIBRA_ERR_UNKNOWN_KERNEL`: the kernel is not implemented by the loaded library. */
export class UnknownKernelError extends NativeError {
  /** An unknown-kernel error from the native call `fn`, with the library's message. */
  constructor(fn: string, nativeMessage: string, options?: ErrorOptions) {
    super(fn, Status.UNKNOWN_KERNEL, nativeMessage, options);
    this.name = "UnknownKernelError";
  }
}

/** `LIBRA_ERR_DEVICE`: a CUDA runtime or launch error. */
export class DeviceError extends NativeError {
  /** A device (CUDA) error from the native call `fn`, with the library's message. */
  constructor(fn: string, nativeMessage: string, options?: ErrorOptions) {
    super(fn, Status.DEVICE, nativeMessage, options);
    this.name = "DeviceError";
  }
}

/** `LIBRA_ERR_UNSUPPORTED`: the operation does not exist in this build. */
export class UnsupportedError extends NativeError {
  /** An unsupported-operation error from the native call `fn`, with the library's message. */
  constructor(fn: string, nativeMessage: string, options?: ErrorOptions) {
    super(fn, Status.UNSUPPORTED, nativeMessage, options);
    this.name = "UnsupportedError";
  }
}

/** `LIBRA_ERR_INTERNAL` or an unknown status code: a bug in the native library. */
export class InternalError extends NativeError {
  /** An internal error from the native call `fn` that returned `status`, with the library's message. */
  constructor(fn: string, status: number, nativeMessage: string, options?: ErrorOptions) {
    super(fn, status, nativeMessage, options);
    this.name = "InternalError";
  }
}

/** The native library could not be found or opened. */
export class LibraryLoadError extends Error {
  /** Paths that were tried, in order. */
  readonly tried: readonly string[];
  /** A load error listing the paths that were `tried`. */
  constructor(message: string, tried: readonly string[], options?: ErrorOptions) {
    super(message, options);
    this.name = "LibraryLoadError";
    this.tried = tried;
  }
}

/**
 * The error for a failed status: the matching subclass of {@link NativeError}
 * (or {@link NativeOutOfMemoryError}, with `requestedBytes`).
 *
 * @example
 * ```ts
 * import { errorForStatus, InvalidArgumentError } from "@libra/native/errors";
 * const e = errorForStatus("libra_run", 1, "libra_run(add): ndim must be in [0, 8], got 9");
 * if (!(e instanceof InvalidArgumentError)) throw new Error("typed error expected");
 * ```
 */
export function errorForStatus(
  fn: string,
  status: number,
  nativeMessage: string,
  requestedBytes = 0,
): Error {
  switch (status) {
    case Status.INVALID_ARGUMENT:
      return new InvalidArgumentError(fn, nativeMessage);
    case Status.OUT_OF_MEMORY:
      return new NativeOutOfMemoryError(fn, nativeMessage, requestedBytes);
    case Status.NO_DEVICE:
      return new NoDeviceError(fn, nativeMessage);
    case Status.UNKNOWN_KERNEL:
      return new UnknownKernelError(fn, nativeMessage);
    case Status.DEVICE:
      return new DeviceError(fn, nativeMessage);
    case Status.UNSUPPORTED:
      return new UnsupportedError(fn, nativeMessage);
    default:
      return new InternalError(fn, status, nativeMessage);
  }
}
