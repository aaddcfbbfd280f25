/**
 * `ReferenceBackend`: every kernel of the kernel table in plain TypeScript.
 *
 * This is the independent oracle the native (C, CUDA) kernels are tested
 * against, so the code favours obviously-correct loops over speed: every kernel
 * reads its inputs element by element, computes in double precision and stores
 * the result. Every call is validated with {@link checkKernelCall} first.
 *
 * Two precisions:
 * - `"f32"` (default): buffers are plain bytes; f32 elements are read and
 *   written through `Float32Array` views, so each kernel output is the double
 *   result rounded once to f32 (reductions accumulate in double).
 * - `"f64"`: every 4-byte element slot holds a double instead. Nothing is
 *   rounded, so finite differences of whole computations are accurate to about
 *   1e-10; the gradient tests of `@libra/tensor` use this mode. Writing a
 *   `Float64Array` stores its values exactly; {@link ReferenceBackend.readF64}
 *   reads them back. `read` still returns f32 (or i32) bytes.
 *
 * @module
 */

import {
  type Backend,
  type DeviceBuffer,
  type HostBuffer,
  KernelError,
  type MemoryInfo,
  OutOfMemoryError,
  type Transfer,
} from "../backend.ts";
import { checkKernelCall, type KernelName } from "../kernels.ts";
import { RefBuffer, type RefKernel } from "./reference/_common.ts";
import { erf, REF_ELEMENTWISE } from "./reference/elementwise.ts";
import { REF_REDUCE } from "./reference/reduce.ts";
import { REF_MATMUL } from "./reference/matmul.ts";
import { REF_LAYOUT } from "./reference/layout.ts";
import { REF_CONV } from "./reference/conv.ts";
import { REF_NORM } from "./reference/norm.ts";
import { REF_RANDOM } from "./reference/random.ts";
import { REF_LOSS_OPTIM } from "./reference/loss_optim.ts";

/** Options of {@link ReferenceBackend}. */
export interface ReferenceBackendOptions {
  /** `"f32"` (default) stores f32 like every real backend; `"f64"` keeps doubles (see module doc). */
  precision?: "f32" | "f64";
  /** Capacity in bytes; `alloc` beyond it throws {@link OutOfMemoryError}. Default: unlimited. */
  capacityBytes?: number;
}

const DONE: Transfer = { done: true, wait() {} };

/** Kernels whose output holds i32 values (tracked in f64 mode so `read` can encode them). */
const INT_OUTPUT = new Set<string>(["cast_f32_i32", "argmax_axis", "fill_i32"]);
/** Kernels that copy 4-byte elements of any dtype: output dtype follows input 0. */
const ANY_DTYPE = new Set<string>([
  "copy",
  "expand",
  "permute",
  "slice",
  "slice_backward",
  "concat",
]);

/** `erf` as used by the reference `gelu_erf` kernel (exported for tests). */
export { erf as referenceErf };

/**
 * The plain-TypeScript reference implementation of every kernel.
 *
 * @example
 * ```ts
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const be = new ReferenceBackend();
 * const x = be.alloc(8), y = be.alloc(8);
 * be.write(x, new Float32Array([-1, 2]));
 * be.run("relu", [x], [y], [2]);
 * const out = new Float32Array(be.read(y).buffer);
 * if (out[0] !== 0 || out[1] !== 2) throw new Error("relu");
 * ```
 */
export class ReferenceBackend implements Backend {
  readonly name: string;
  readonly device = "cpu" as const;
  readonly hasData = true;
  /** `"f32"` or `"f64"` (see the module doc). */
  readonly precision: "f32" | "f64";
  /** Kernel calls run so far. */
  calls = 0;
  #nextId = 1;
  #used = 0;
  #peak = 0;
  readonly #capacity: number;
  readonly #hostF64 = new WeakMap<HostBuffer, Float64Array>();
  readonly #hostInt = new WeakMap<HostBuffer, boolean>();

  /** A reference backend in the given precision, optionally with a capacity. */
  constructor(options: ReferenceBackendOptions = {}) {
    this.precision = options.precision ?? "f32";
    this.#capacity = options.capacityBytes ?? Infinity;
    this.name = this.precision === "f64" ? "reference-f64" : "reference";
  }

  alloc(bytes: number): DeviceBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(`reference.alloc: bytes must be a non-negative integer, got ${bytes}`);
    }
    if (this.#used + bytes > this.#capacity) {
      throw new OutOfMemoryError(
        `reference.alloc: ${bytes} bytes requested, ${this.#used} of ${this.#capacity} in use`,
        bytes,
      );
    }
    const n = Math.ceil(bytes / 4);
    let buf: RefBuffer;
    if (this.precision === "f64") {
      const d = new Float64Array(n);
      buf = new RefBuffer(this.#nextId++, bytes, new Uint8Array(0), d, d);
    } else {
      const ab = new ArrayBuffer(n * 4);
      buf = new RefBuffer(
        this.#nextId++,
        bytes,
        new Uint8Array(ab, 0, bytes),
        new Float32Array(ab),
        new Int32Array(ab),
      );
    }
    this.#used += bytes;
    if (this.#used > this.#peak) this.#peak = this.#used;
    return buf;
  }

  free(buf: DeviceBuffer): void {
    const b = this.#own(buf, "free");
    b.freed = true;
    this.#used -= b.bytes;
  }

  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes = 0): void {
    const b = this.#own(buf, "write");
    if (!Number.isInteger(offsetBytes) || offsetBytes < 0) {
      throw new RangeError(
        `reference.write: offset must be a non-negative integer, got ${offsetBytes}`,
      );
    }
    if (this.precision === "f32") {
      if (offsetBytes + data.byteLength > b.bytes) {
        throw new RangeError(
          `reference.write: ${data.byteLength} bytes at offset ${offsetBytes} do not fit a buffer of ${b.bytes}`,
        );
      }
      b.raw.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offsetBytes);
      return;
    }
    // f64 mode: typed arrays are written element by element into 4-byte slots.
    if (offsetBytes % 4 !== 0) {
      throw new RangeError(`reference-f64.write: offset ${offsetBytes} is not a multiple of 4`);
    }
    let values: ArrayLike<number>;
    let isInt = false;
    if (data instanceof Float64Array || data instanceof Float32Array) values = data;
    else if (data instanceof Int32Array) {
      values = data;
      isInt = true;
    } else {
      if (data.byteLength % 4 !== 0) {
        throw new RangeError(
          `reference-f64.write: ${data.byteLength} raw bytes are not whole 4-byte elements`,
        );
      }
      values = new Float32Array(
        data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength),
      );
    }
    const slot = offsetBytes / 4;
    if ((slot + values.length) * 4 > b.bytes) {
      throw new RangeError(
        `reference-f64.write: ${values.length} elements at offset ${offsetBytes} do not fit a buffer of ${b.bytes} bytes`,
      );
    }
    (b.f as Float64Array).set(values, slot);
    b.isInt = isInt;
  }

  read(buf: DeviceBuffer, bytes?: number): Uint8Array {
    const b = this.#own(buf, "read");
    const n = bytes ?? b.bytes;
    if (!Number.isInteger(n) || n < 0 || n > b.bytes) {
      throw new RangeError(`reference.read: cannot read ${n} bytes of a ${b.bytes}-byte buffer`);
    }
    if (this.precision === "f32") return b.raw.slice(0, n);
    const slots = Math.ceil(n / 4);
    const out = b.isInt
      ? new Int32Array(b.f.subarray(0, slots))
      : new Float32Array(b.f.subarray(0, slots));
    return new Uint8Array(out.buffer, 0, n);
  }

  /** The values of a buffer as doubles (exact in f64 mode; widened f32 otherwise). */
  readF64(buf: DeviceBuffer, count?: number): Float64Array {
    const b = this.#own(buf, "readF64");
    const n = count ?? Math.floor(b.bytes / 4);
    return Float64Array.from(b.f.subarray(0, n));
  }

  run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const ins = inputs.map((b) => this.#own(b, kernel));
    const outs = outputs.map((b) => this.#own(b, kernel));
    checkKernelCall(kernel, ins.map((b) => b.bytes), outs.map((b) => b.bytes), params);
    for (const o of outs) {
      if (ins.includes(o)) throw new KernelError(kernel, `output buffer ${o.id} is also an input`);
    }
    this.calls++;
    this.#exec(kernel, ins, outs, params);
    if (this.precision === "f64" && outs.length > 0) {
      const isInt = INT_OUTPUT.has(kernel) || (ANY_DTYPE.has(kernel) && ins[0]!.isInt) ||
        (kernel === "index_select" && ins[0]!.isInt);
      for (const o of outs) o.isInt = isInt;
    }
  }

  memory(): MemoryInfo {
    return { usedBytes: this.#used, peakBytes: this.#peak, totalBytes: this.#capacity };
  }

  resetPeak(): void {
    this.#peak = this.#used;
  }

  sync(): void {}

  allocHost(bytes: number): HostBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(
        `reference.allocHost: bytes must be a non-negative integer, got ${bytes}`,
      );
    }
    return { bytes, data: new Uint8Array(bytes) };
  }

  freeHost(_buf: HostBuffer): void {}

  copy(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): void {
    if (src instanceof RefBuffer) {
      this.#own(src, "copy");
      const host = dst as HostBuffer;
      if (src.bytes > host.bytes) {
        throw new RangeError(
          `reference.copy: source has ${src.bytes} bytes, destination ${host.bytes}`,
        );
      }
      host.data.set(this.read(src));
      if (this.precision === "f64") {
        this.#hostF64.set(host, Float64Array.from(src.f));
        this.#hostInt.set(host, src.isInt);
      }
      return;
    }
    if (!(dst instanceof RefBuffer)) {
      throw new TypeError("reference.copy: one side must be a device buffer of this backend");
    }
    const d = this.#own(dst, "copy");
    const host = src as HostBuffer;
    if (host.bytes > d.bytes) {
      throw new RangeError(
        `reference.copy: source has ${host.bytes} bytes, destination ${d.bytes}`,
      );
    }
    const exact = this.#hostF64.get(host);
    if (this.precision === "f64" && exact) {
      (d.f as Float64Array).set(exact.subarray(0, Math.min(exact.length, d.f.length)));
      d.isInt = this.#hostInt.get(host) ?? false;
    } else this.write(d, host.data.subarray(0, host.bytes));
  }

  copyAsync(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): Transfer {
    this.copy(src as DeviceBuffer, dst as HostBuffer);
    return DONE;
  }

  #own(buf: DeviceBuffer, what: string): RefBuffer {
    if (!(buf instanceof RefBuffer)) {
      throw new TypeError(
        `reference.${what}: buffer ${buf?.id} was not allocated by a reference backend`,
      );
    }
    if (buf.freed) throw new Error(`reference.${what}: buffer ${buf.id} was already freed`);
    return buf;
  }

  // ------------------------------------------------------------------ kernels

  #exec(k: KernelName, ins: RefBuffer[], outs: RefBuffer[], p: readonly number[]): void {
    REF_KERNELS[k](k, ins, outs, p);
  }
}

/** Every reference kernel, family by family (as `native/cpu/*.c`); the type makes the table complete. */
const REF_KERNELS: Readonly<Record<KernelName, RefKernel>> = {
  ...REF_ELEMENTWISE,
  ...REF_REDUCE,
  ...REF_MATMUL,
  ...REF_LAYOUT,
  ...REF_CONV,
  ...REF_NORM,
  ...REF_RANDOM,
  ...REF_LOSS_OPTIM,
};
