/**
 * The `meta` backend: buffers have sizes but no data. It validates every kernel
 * call exactly like a real backend and counts memory and FLOPs, so a step can be
 * replayed for its memory behaviour alone (the simulator runs on it).
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
} from "./backend.ts";
import { checkKernelCall, type KernelName, kernelSpec } from "./kernels.ts";

class MetaBuffer implements DeviceBuffer {
  freed = false;
  constructor(readonly id: number, readonly bytes: number) {}
}

/** Options of {@link MetaBackend}. */
export interface MetaBackendOptions {
  /** Capacity in bytes; `alloc` beyond it throws {@link OutOfMemoryError}. Default: unlimited. */
  capacityBytes?: number;
}

const DONE: Transfer = { done: true, wait() {} };

/**
 * A backend that tracks sizes and FLOPs only.
 *
 * @example
 * ```ts
 * import { MetaBackend } from "@libra/tensor/meta-backend";
 * const meta = new MetaBackend();
 * const x = meta.alloc(16), y = meta.alloc(16);
 * meta.run("relu", [x], [y], [4]);
 * if (meta.memory().usedBytes !== 32) throw new Error("meta counts bytes");
 * ```
 */
export class MetaBackend implements Backend {
  readonly name: string = "meta";
  readonly device = "meta" as const;
  readonly hasData = false;
  /** Kernel calls run so far. */
  calls = 0;
  /** FLOPs of all kernel calls so far (from the kernel table). */
  flops = 0;
  #nextId = 1;
  #used = 0;
  #peak = 0;
  readonly #capacity: number;

  /** A meta backend, with an allocation capacity when `options.capacityBytes` is set. */
  constructor(options: MetaBackendOptions = {}) {
    this.#capacity = options.capacityBytes ?? Infinity;
  }

  alloc(bytes: number): DeviceBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(`meta.alloc: bytes must be a non-negative integer, got ${bytes}`);
    }
    if (this.#used + bytes > this.#capacity) {
      throw new OutOfMemoryError(
        `meta.alloc: ${bytes} bytes requested, ${this.#used} of ${this.#capacity} in use`,
        bytes,
      );
    }
    this.#used += bytes;
    if (this.#used > this.#peak) this.#peak = this.#used;
    return new MetaBuffer(this.#nextId++, bytes);
  }

  free(buf: DeviceBuffer): void {
    const b = this.#own(buf, "free");
    b.freed = true;
    this.#used -= b.bytes;
  }

  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes = 0): void {
    const b = this.#own(buf, "write");
    if (offsetBytes < 0 || offsetBytes + data.byteLength > b.bytes) {
      throw new RangeError(
        `meta.write: ${data.byteLength} bytes at offset ${offsetBytes} do not fit a buffer of ${b.bytes}`,
      );
    }
  }

  read(_buf: DeviceBuffer, _bytes?: number): Uint8Array {
    throw new Error(
      "meta.read: the meta backend keeps no data (use a cpu or cuda backend to read values)",
    );
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
    this.flops += kernelSpec(kernel).flops(params);
  }

  memory(): MemoryInfo {
    return { usedBytes: this.#used, peakBytes: this.#peak, totalBytes: this.#capacity };
  }

  resetPeak(): void {
    this.#peak = this.#used;
  }

  sync(): void {}

  allocHost(bytes: number): HostBuffer {
    return { bytes, data: new Uint8Array(0) };
  }

  freeHost(_buf: HostBuffer): void {}

  copy(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): void {
    const dev = src instanceof MetaBuffer ? src : dst;
    this.#own(dev as DeviceBuffer, "copy");
    if (src.bytes > dst.bytes) {
      throw new RangeError(`meta.copy: source has ${src.bytes} bytes, destination ${dst.bytes}`);
    }
  }

  copyAsync(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): Transfer {
    this.copy(src as DeviceBuffer, dst as HostBuffer);
    return DONE;
  }

  #own(buf: DeviceBuffer, what: string): MetaBuffer {
    if (!(buf instanceof MetaBuffer)) {
      throw new TypeError(`meta.${what}: buffer ${buf.id} was not allocated by a meta backend`);
    }
    if (buf.freed) throw new Error(`meta.${what}: buffer ${buf.id} was already freed`);
    return buf;
  }
}
