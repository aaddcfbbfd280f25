/**
 * The `cpu` and `cuda` backends: the {@link Backend} contract of
 * `@libra/tensor` implemented over the native kernel library through FFI.
 *
 * Every kernel call is validated with `checkKernelCall` (names, arity, byte
 * sizes, params) before it crosses into C, so a malformed call is a
 * `KernelError`, never memory corruption. Device buffers are
 * {@link NativeBuffer} handles with `[Symbol.dispose]`; a `FinalizationRegistry`
 * frees the memory of handles that are dropped without being freed, as a safety
 * net only. Raw pointers never leave this module.
 *
 * @module
 */

import {
  type Backend,
  type DeviceBuffer,
  type DeviceKind,
  type HostBuffer,
  KernelError,
  type MemoryInfo,
  OutOfMemoryError,
  type Transfer,
} from "@libra/tensor/backend";
import {
  checkKernelCall,
  KERNEL_NAMES,
  kernelMayMutate,
  kernelMutates,
  type KernelName,
} from "@libra/tensor/kernels";
import { cString, type LibraryKind, type LoadedLibrary, loadLibrary } from "./_loader.ts";
import { errorForStatus, NativeOutOfMemoryError, UnknownKernelError } from "./errors.ts";
import { type LibraSymbols, Status } from "./symbols.ts";

/** Options shared by {@link cpuBackend} and {@link cudaBackend}. */
export interface NativeBackendOptions {
  /**
   * Largest `usedBytes` this backend allows; `alloc` beyond it throws an
   * `OutOfMemoryError`. Default: unlimited on cpu, the device memory on cuda.
   */
  capacityBytes?: number;
}

/** Options of {@link cpuBackend}. */
export interface CpuBackendOptions extends NativeBackendOptions {
  /**
   * Worker threads for CPU kernels (OpenMP and OpenBLAS). This is a setting of
   * the loaded library, so it applies to every cpu backend of the process.
   */
  threads?: number;
  /**
   * `"default"`: `libra_cpu.so` (OpenBLAS sgemm when it was built with it);
   * `"portable"`: `libra_cpu_portable.so` (always the portable blocked sgemm).
   */
  variant?: "default" | "portable";
}

/** Options of {@link cudaBackend}. */
export type CudaBackendOptions = NativeBackendOptions;

const CREATE = Symbol("NativeBuffer.create");

/**
 * The address of `a`'s elements, for a `"pointer"` parameter (one costs Deno's
 * FFI next to nothing a call, a `"buffer"` ~10 ns warm): valid while `a` lives and its
 * buffer is neither detached nor resized. Reading `buffer` first moves a small
 * typed array's elements off the JavaScript heap, where a collection could move
 * them; an array's backing store never moves. `null` for an empty array.
 */
export function addressOf(a: ArrayBufferView): Deno.PointerValue {
  void a.buffer;
  return Deno.UnsafePointer.of(a as unknown as BufferSource);
}

/**
 * The address of the array it was last asked for (see {@link addressOf}),
 * made again only when the array is another: a caller that passes the same
 * arrays call after call pays an identity check.
 */
class LastAddress {
  #array: ArrayBufferView | null = null;
  #at: Deno.PointerValue = null;
  /** `a`'s address. */
  of(a: ArrayBufferView): Deno.PointerValue {
    if (a !== this.#array) {
      this.#at = addressOf(a);
      this.#array = a;
    }
    return this.#at;
  }
}

let bufferAddr: (b: NativeBuffer) => bigint;
let bufferPtr: (b: NativeBuffer) => Deno.PointerObject;
let bufferOwner: (b: NativeBuffer) => NativeBackend;
let markFreed: (b: NativeBuffer) => boolean;

/**
 * A device buffer of a {@link NativeBackend}. Free it with `backend.free(buf)`,
 * `buf[Symbol.dispose]()` or a `using` declaration; using it afterwards throws.
 */
export class NativeBuffer implements DeviceBuffer, Disposable {
  /** Size in bytes, as requested. */
  readonly bytes: number;
  /** Unique per backend. */
  readonly id: number;
  /** Transfer in flight that reads or writes this buffer (waited for before any other use). */
  pending: Transfer | null = null;
  #addr: bigint;
  #ptr: Deno.PointerObject;
  #owner: NativeBackend;
  #freed = false;

  static {
    bufferAddr = (b) => b.#addr;
    bufferPtr = (b) => b.#ptr;
    bufferOwner = (b) => b.#owner;
    markFreed = (b) => {
      const was = b.#freed;
      b.#freed = true;
      return was;
    };
  }

  /** Internal: buffers come from {@link NativeBackend.alloc}. */
  constructor(
    token: symbol,
    owner: NativeBackend,
    id: number,
    bytes: number,
    addr: bigint,
    ptr: Deno.PointerObject,
  ) {
    if (token !== CREATE) {
      throw new TypeError("NativeBuffer: use backend.alloc(bytes) to create device buffers");
    }
    this.#owner = owner;
    this.id = id;
    this.bytes = bytes;
    this.#addr = addr;
    this.#ptr = ptr;
  }

  /** True once the buffer was freed. */
  get freed(): boolean {
    return this.#freed;
  }

  /** Frees the buffer if it is still allocated (idempotent, unlike `backend.free`). */
  [Symbol.dispose](): void {
    if (!this.#freed) this.#owner.free(this);
  }
}

/** Host memory from {@link NativeBackend.allocHost} (page-locked on cuda). */
class NativeHostBuffer implements HostBuffer {
  readonly bytes: number;
  data: Uint8Array;
  readonly ptr: Deno.PointerObject;
  freed = false;
  constructor(bytes: number, data: Uint8Array, ptr: Deno.PointerObject) {
    this.bytes = bytes;
    this.data = data;
    this.ptr = ptr;
  }
}

const DONE: Transfer = { done: true, wait() {} };

/** Memory counters of one backend, shared with the finalizers (which must not hold the backend). */
class Accounting {
  used = 0;
  peak = 0;
  live = 0;
  finalized = 0;
  hostBytes = 0;
}

interface Held {
  ptr: Deno.PointerObject;
  bytes: number;
  acct: Accounting;
  s: LibraSymbols;
}

/*
 * Module-level registries: they live as long as the process, so a backend that
 * is dropped together with its unfreed buffers still releases their memory (a
 * registry owned by the backend would be collected with it, callbacks unrun).
 */
const deviceRegistry = new FinalizationRegistry<Held>((h) => {
  h.s.libra_free(h.ptr);
  h.acct.used -= h.bytes;
  h.acct.live--;
  h.acct.finalized++;
});
const hostRegistry = new FinalizationRegistry<Held>((h) => {
  h.s.libra_host_free(h.ptr);
  h.acct.hostBytes -= h.bytes;
});

/** Counters of a native backend beyond {@link MemoryInfo}. */
export interface NativeBackendStats {
  /** Device buffers allocated and not yet freed. */
  readonly liveBuffers: number;
  /** Buffers whose memory the FinalizationRegistry released (they were dropped unfreed). */
  readonly finalizedBuffers: number;
  /** Host bytes currently held through {@link NativeBackend.allocHost}. */
  readonly hostBytes: number;
  /** Kernel calls run. */
  readonly kernelCalls: number;
}

/** Time spent in one kernel (or in `alloc`/`free`) while profiling was on. */
export interface KernelProfileEntry {
  /** Kernel name, or `"(alloc)"` / `"(free)"` for device allocations. */
  readonly name: string;
  /** Calls made. */
  readonly calls: number;
  /** Wall-clock milliseconds inside the native call (FFI included, validation excluded). */
  readonly ms: number;
}

/**
 * A backend over `libra_cpu.so` or `libra_cuda.so`. Create it with
 * {@link cpuBackend} or {@link cudaBackend}.
 */
export class NativeBackend implements Backend {
  /** `"cpu"` or `"cuda"` (or `"cpu(portable)"` for the portable cpu variant). */
  readonly name: string;
  readonly device: DeviceKind;
  readonly hasData = true;
  /** What the library says it is, e.g. `"cpu (openblas, openmp)"`. */
  readonly buildInfo: string;
  /** The device name the library reports. */
  readonly deviceName: string;
  /** Path of the loaded shared library. */
  readonly libraryPath: string;
  /**
   * The sampled eviction search's draws and bounds, natively
   * (`libra_sample_bounds`: bitwise `sampleBounds` of `@libra/evict`, ~4x as
   * fast: ~0.28 against ~1.2 us a search of 100 draws over a 10k-member pool);
   * see {@link Backend.sampleBounds}. It keeps the addresses of the arrays it
   * was last given (a policy passes the same ones search after search): they
   * must not be detached or resized while the backend may see them again.
   */
  readonly sampleBounds: NonNullable<Backend["sampleBounds"]>;

  readonly #s: LibraSymbols;
  /** Per kernel: native id (-1 when the library lacks it) and whether it may mutate inputs. */
  readonly #kernels = new Map<string, { id: number; mutates: boolean }>();
  readonly #capacity: number;
  #nextId = 1;
  readonly #acct = new Accounting();
  #calls = 0;
  // scratch memory reused by every call
  readonly #ptrOut = new BigUint64Array(1);
  readonly #u64a = new BigUint64Array(1);
  readonly #u64b = new BigUint64Array(1);
  readonly #i32 = new Int32Array(1);
  #ins = new BigUint64Array(8);
  #outs = new BigUint64Array(4);
  #params = new Float64Array(64);
  // Their addresses (see `addressOf`), made again when they grow.
  #insAt = addressOf(this.#ins);
  #outsAt = addressOf(this.#outs);
  #paramsAt = addressOf(this.#params);
  // The addresses of the arrays `sampleBounds` was last given: a policy passes the same ones
  // search after search.
  readonly #sbSlots = new LastAddress();
  readonly #sbRng = new LastAddress();
  readonly #sbSampled = new LastAddress();
  readonly #sbBounds = new LastAddress();
  readonly #sbOut = new LastAddress();
  #copyStream: Deno.PointerObject | null = null;
  /** Per-name [calls, ms] while profiling (null when off: the hot path pays one branch). */
  #prof: Map<string, [number, number]> | null = null;
  readonly #transfers = new Set<NativeTransfer>();

  /** Internal: use {@link cpuBackend} or {@link cudaBackend}. */
  constructor(loaded: LoadedLibrary, device: "cpu" | "cuda", options: NativeBackendOptions = {}) {
    this.#s = loaded.lib.symbols;
    this.sampleBounds = (
      slots,
      n,
      k,
      rng,
      sampled,
      bounds,
      minBytes,
      slack,
      floors,
      clock,
      out,
    ) => {
      // What the library reads and writes whatever `n` and `k` (a null address would crash it).
      if (rng.length < 1 || out.length < 2) {
        throw new RangeError(
          `sampleBounds: rng needs 1 element and out 2, got ${rng.length} and ${out.length}`,
        );
      }
      return this.#s.libra_sample_bounds_ptr(
        this.#sbSlots.of(slots),
        n,
        k,
        this.#sbRng.of(rng),
        this.#sbSampled.of(sampled),
        this.#sbBounds.of(bounds),
        minBytes,
        slack,
        floors,
        clock,
        this.#sbOut.of(out),
      );
    };
    this.device = device;
    this.name = loaded.kind === "cpu_portable" ? "cpu(portable)" : device;
    this.libraryPath = loaded.path;
    const st = this.#s.libra_init();
    if (st !== Status.OK) throw this.#error("libra_init", st);
    this.buildInfo = cString(this.#s.libra_build_info());
    const nameBuf = new Uint8Array(256);
    this.#check("libra_device_name", this.#s.libra_device_name(nameBuf, nameBuf.length));
    this.deviceName = new TextDecoder().decode(nameBuf.subarray(0, nameBuf.indexOf(0)));
    let cap = options.capacityBytes ?? Infinity;
    if (device === "cuda" && options.capacityBytes === undefined) {
      this.#check("libra_mem_info", this.#s.libra_mem_info(this.#u64a, this.#u64b));
      cap = Number(this.#u64b[0]!);
    }
    if (!(cap >= 0)) throw new RangeError(`capacityBytes must be >= 0, got ${cap}`);
    this.#capacity = cap;
    const enc = new TextEncoder();
    for (const k of KERNEL_NAMES) {
      const s = this.#s.libra_kernel_id(enc.encode(k + "\0"), this.#i32);
      this.#kernels.set(k, {
        id: s === Status.OK ? this.#i32[0]! : -1,
        mutates: kernelMayMutate(k),
      });
    }
  }

  /** Kernels of the table that the loaded library does not implement (empty for a complete build). */
  missingKernels(): KernelName[] {
    return KERNEL_NAMES.filter((k) => this.#kernels.get(k)!.id < 0);
  }

  alloc(bytes: number): NativeBuffer {
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      throw new RangeError(
        `${this.name}.alloc: bytes must be a non-negative integer, got ${bytes}`,
      );
    }
    if (this.#acct.used + bytes > this.#capacity) {
      throw new OutOfMemoryError(
        `${this.name}.alloc: ${bytes} bytes requested, ${this.#acct.used} of ${this.#capacity} in use ` +
          `(capacityBytes); free buffers or raise the capacity`,
        bytes,
      );
    }
    const t0 = this.#prof ? performance.now() : 0;
    const st = this.#s.libra_alloc(BigInt(bytes), this.#ptrOut);
    if (this.#prof) this.#tally("(alloc)", t0);
    if (st !== Status.OK) throw this.#error("libra_alloc", st, bytes);
    const addr = this.#ptrOut[0]!;
    const ptr = Deno.UnsafePointer.create(addr);
    if (ptr === null) throw this.#error("libra_alloc", Status.INTERNAL, bytes);
    const buf = new NativeBuffer(CREATE, this, this.#nextId++, bytes, addr, ptr);
    deviceRegistry.register(buf, { ptr, bytes, acct: this.#acct, s: this.#s }, buf);
    this.#acct.used += bytes;
    this.#acct.live++;
    if (this.#acct.used > this.#acct.peak) this.#acct.peak = this.#acct.used;
    return buf;
  }

  free(buf: DeviceBuffer): void {
    const b = this.#own(buf, "free");
    this.#settle(b);
    markFreed(b);
    deviceRegistry.unregister(b);
    this.#acct.used -= b.bytes;
    this.#acct.live--;
    const t0 = this.#prof ? performance.now() : 0;
    const st = this.#s.libra_free(bufferPtr(b));
    if (this.#prof) this.#tally("(free)", t0);
    this.#check("libra_free", st);
  }

  /**
   * Starts (or restarts) the per-kernel profile: from now on every `run`,
   * `alloc` and `free` adds its wall time under its kernel name.
   */
  startProfile(): void {
    this.#prof = new Map();
  }

  /** Stops profiling and returns the time per kernel, largest first. */
  stopProfile(): KernelProfileEntry[] {
    const p = this.#prof ?? new Map<string, [number, number]>();
    this.#prof = null;
    return [...p].map(([name, [calls, ms]]) => ({ name, calls, ms })).sort((a, b) => b.ms - a.ms);
  }

  #tally(name: string, t0: number): void {
    const ms = performance.now() - t0;
    const e = this.#prof!.get(name);
    if (e) {
      e[0]++;
      e[1] += ms;
    } else this.#prof!.set(name, [1, ms]);
  }

  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes = 0): void {
    const b = this.#own(buf, "write");
    if (!Number.isSafeInteger(offsetBytes) || offsetBytes < 0) {
      throw new RangeError(`${this.name}.write: offsetBytes must be >= 0, got ${offsetBytes}`);
    }
    if (offsetBytes + data.byteLength > b.bytes) {
      throw new RangeError(
        `${this.name}.write: ${data.byteLength} bytes at offset ${offsetBytes} do not fit buffer ` +
          `${b.id} of ${b.bytes} bytes`,
      );
    }
    if (data.byteLength === 0) return;
    this.#settle(b);
    const src = data instanceof Uint8Array
      ? data
      : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const dst = offsetBytes === 0
      ? bufferPtr(b)
      : Deno.UnsafePointer.offset(bufferPtr(b), offsetBytes) as Deno.PointerObject;
    this.#check("libra_copy_h2d", this.#s.libra_copy_h2d(dst, src, BigInt(data.byteLength)));
  }

  read(buf: DeviceBuffer, bytes?: number): Uint8Array {
    const b = this.#own(buf, "read");
    const n = bytes ?? b.bytes;
    if (!Number.isSafeInteger(n) || n < 0 || n > b.bytes) {
      throw new RangeError(
        `${this.name}.read: cannot read ${n} bytes of buffer ${b.id} (${b.bytes} bytes)`,
      );
    }
    this.#settle(b);
    const out = new Uint8Array(n);
    if (n > 0) this.#check("libra_copy_d2h", this.#s.libra_copy_d2h(out, bufferPtr(b), BigInt(n)));
    return out;
  }

  run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const nIn = inputs.length, nOut = outputs.length;
    const inBytes = new Array<number>(nIn);
    const outBytes = new Array<number>(nOut);
    for (let i = 0; i < nIn; i++) inBytes[i] = this.#own(inputs[i]!, kernel).bytes;
    for (let i = 0; i < nOut; i++) {
      const o = this.#own(outputs[i]!, kernel);
      outBytes[i] = o.bytes;
      for (let j = 0; j < nIn; j++) {
        if (inputs[j] === o) {
          throw new KernelError(
            kernel,
            `output ${i} (buffer ${o.id}) is also an input (input ${j})`,
          );
        }
      }
      for (let j = 0; j < i; j++) {
        if (outputs[j] === o) {
          throw new KernelError(kernel, `output ${i} (buffer ${o.id}) is also output ${j}`);
        }
      }
    }
    checkKernelCall(kernel, inBytes, outBytes, params);
    const info = this.#kernels.get(kernel)!;
    if (info.mutates) checkMutated(kernel, inputs, kernelMutates(kernel, params));
    this.#launch(kernel, info.id, inputs, outputs, params);
  }

  /**
   * {@link run} for a call its caller has validated: `checkKernelCall` passed
   * for these buffers' sizes and these params, the outputs are distinct from
   * each other and from the inputs, and the kernel mutates nothing. Each
   * buffer is still checked to be this backend's and live (what the native
   * library reads and writes); the sizes, params and aliasing are not checked
   * again. A kernel that mutates takes the full {@link run}.
   */
  runValidated(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const info = this.#kernels.get(kernel);
    if (info === undefined || info.mutates) {
      this.run(kernel, inputs, outputs, params);
      return;
    }
    for (let i = 0; i < inputs.length; i++) this.#own(inputs[i]!, kernel);
    for (let i = 0; i < outputs.length; i++) this.#own(outputs[i]!, kernel);
    this.#launch(kernel, info.id, inputs, outputs, params);
  }

  /** Launches kernel `id` (see {@link run}) on checked buffers. */
  #launch(
    kernel: KernelName,
    id: number,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const nIn = inputs.length, nOut = outputs.length, nP = params.length;
    if (id < 0) {
      throw new KernelError(kernel, `not implemented by ${this.libraryPath} (${this.buildInfo})`, {
        cause: new UnknownKernelError("libra_kernel_id", `unknown kernel "${kernel}"`),
      });
    }
    if (nIn > this.#ins.length) this.#insAt = addressOf(this.#ins = new BigUint64Array(nIn * 2));
    if (nOut > this.#outs.length) {
      this.#outsAt = addressOf(this.#outs = new BigUint64Array(nOut * 2));
    }
    if (nP > this.#params.length) {
      this.#paramsAt = addressOf(this.#params = new Float64Array(nP * 2));
    }
    const ins = this.#ins, outs = this.#outs, ps = this.#params;
    for (let i = 0; i < nIn; i++) {
      const b = inputs[i] as NativeBuffer;
      if (b.pending) this.#settle(b);
      ins[i] = bufferAddr(b);
    }
    for (let i = 0; i < nOut; i++) {
      const b = outputs[i] as NativeBuffer;
      if (b.pending) this.#settle(b);
      outs[i] = bufferAddr(b);
    }
    for (let i = 0; i < nP; i++) ps[i] = params[i]!;
    const t0 = this.#prof ? performance.now() : 0;
    const st = this.#s.libra_run_ptr(id, this.#insAt, nIn, this.#outsAt, nOut, this.#paramsAt, nP);
    if (this.#prof) this.#tally(kernel, t0);
    this.#calls++;
    if (st !== Status.OK) {
      const err = this.#error("libra_run", st);
      if (st === Status.INVALID_ARGUMENT || st === Status.UNKNOWN_KERNEL) {
        const msg = (err as { nativeMessage?: string }).nativeMessage || (err as Error).message;
        throw new KernelError(kernel, msg, { cause: err });
      }
      throw err;
    }
  }

  memory(): MemoryInfo {
    return { usedBytes: this.#acct.used, peakBytes: this.#acct.peak, totalBytes: this.#capacity };
  }

  resetPeak(): void {
    this.#acct.peak = this.#acct.used;
  }

  sync(): void {
    this.#check("libra_sync", this.#s.libra_sync());
    for (const t of this.#transfers) t.wait();
  }

  /** Counters for tests and diagnostics. */
  stats(): NativeBackendStats {
    return {
      liveBuffers: this.#acct.live,
      finalizedBuffers: this.#acct.finalized,
      hostBytes: this.#acct.hostBytes,
      kernelCalls: this.#calls,
    };
  }

  /** Philox4x32-10 of the native library (for known-answer tests). */
  philox4x32(
    counter: readonly [number, number, number, number],
    key: readonly [number, number],
  ): [number, number, number, number] {
    const out = new Uint32Array(4);
    this.#check(
      "libra_philox4x32",
      this.#s.libra_philox4x32(Uint32Array.from(counter), Uint32Array.from(key), out),
    );
    return [out[0]!, out[1]!, out[2]!, out[3]!];
  }

  /** Worker threads the library's CPU kernels use. */
  threads(): number {
    this.#check("libra_get_threads", this.#s.libra_get_threads(this.#i32));
    return this.#i32[0]!;
  }

  /** Sets the library's worker threads (process-wide for this library); `n <= 0` restores the default. */
  setThreads(n: number): void {
    this.#check("libra_set_threads", this.#s.libra_set_threads(n));
  }

  allocHost(bytes: number): HostBuffer {
    if (!Number.isSafeInteger(bytes) || bytes < 0) {
      throw new RangeError(
        `${this.name}.allocHost: bytes must be a non-negative integer, got ${bytes}`,
      );
    }
    const st = this.#s.libra_host_alloc(BigInt(bytes), this.#ptrOut);
    if (st !== Status.OK) throw this.#error("libra_host_alloc", st, bytes);
    const ptr = Deno.UnsafePointer.create(this.#ptrOut[0]!)!;
    const data = bytes === 0
      ? new Uint8Array(0)
      : new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(ptr, bytes));
    const h = new NativeHostBuffer(bytes, data, ptr);
    // Registered on the ArrayBuffer: once nothing can reach the bytes, they can be freed.
    hostRegistry.register(data.buffer, { ptr, bytes, acct: this.#acct, s: this.#s }, h);
    this.#acct.hostBytes += bytes;
    return h;
  }

  freeHost(buf: HostBuffer): void {
    if (!(buf instanceof NativeHostBuffer)) {
      throw new TypeError(`${this.name}.freeHost: the buffer was not allocated by allocHost`);
    }
    if (buf.freed) throw new Error(`${this.name}.freeHost: host buffer was already freed`);
    for (const t of this.#transfers) if (t.host === buf) t.wait();
    buf.freed = true;
    hostRegistry.unregister(buf);
    // Detach the view so the freed memory cannot be read or written through it.
    const ab = buf.data.buffer as ArrayBuffer & { transfer?: (n: number) => ArrayBuffer };
    if (buf.bytes > 0 && typeof ab.transfer === "function") ab.transfer(0);
    buf.data = new Uint8Array(0);
    this.#acct.hostBytes -= buf.bytes;
    this.#check("libra_host_free", this.#s.libra_host_free(buf.ptr));
  }

  copy(src: DeviceBuffer, dst: HostBuffer): void;
  copy(src: HostBuffer, dst: DeviceBuffer): void;
  copy(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): void {
    if (src instanceof NativeBuffer) {
      const d = this.#own(src, "copy");
      const h = this.#host(dst as HostBuffer, d, "copy");
      this.#settle(d);
      if (d.bytes > 0) {
        this.#check(
          "libra_copy_d2h",
          this.#s.libra_copy_d2h(h.data, bufferPtr(d), BigInt(d.bytes)),
        );
      }
    } else {
      const d = this.#own(dst as DeviceBuffer, "copy");
      const h = this.#host(src as HostBuffer, d, "copy");
      this.#settle(d);
      if (d.bytes > 0) {
        this.#check(
          "libra_copy_h2d",
          this.#s.libra_copy_h2d(bufferPtr(d), h.data, BigInt(d.bytes)),
        );
      }
    }
  }

  copyAsync(src: DeviceBuffer, dst: HostBuffer): Transfer;
  copyAsync(src: HostBuffer, dst: DeviceBuffer): Transfer;
  copyAsync(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): Transfer {
    const toHost = src instanceof NativeBuffer;
    const dev = this.#own((toHost ? src : dst) as DeviceBuffer, "copyAsync");
    const host = this.#host((toHost ? dst : src) as HostBuffer, dev, "copyAsync");
    if (this.device !== "cuda" || !(host instanceof NativeHostBuffer) || dev.bytes === 0) {
      if (toHost) this.copy(dev, host);
      else this.copy(host, dev);
      return DONE;
    }
    this.#settle(dev);
    const s = this.#s;
    if (this.#copyStream === null) {
      this.#check("libra_stream_create", s.libra_stream_create(this.#ptrOut));
      this.#copyStream = Deno.UnsafePointer.create(this.#ptrOut[0]!);
    }
    const stream = this.#copyStream!;
    if (toHost) {
      // the copy stream cannot wait on the compute stream through this ABI: finish its work first
      this.#check("libra_stream_sync", s.libra_stream_sync(null));
      this.#check(
        "libra_copy_d2h_async",
        s.libra_copy_d2h_async(host.ptr, bufferPtr(dev), BigInt(dev.bytes), stream),
      );
    } else {
      this.#check(
        "libra_copy_h2d_async",
        s.libra_copy_h2d_async(bufferPtr(dev), host.ptr, BigInt(dev.bytes), stream),
      );
    }
    this.#check("libra_event_create", s.libra_event_create(this.#ptrOut));
    const event = Deno.UnsafePointer.create(this.#ptrOut[0]!)!;
    this.#check("libra_event_record", s.libra_event_record(event, stream));
    const t = new NativeTransfer(this, event, stream, dev, host);
    dev.pending = t;
    this.#transfers.add(t);
    return t;
  }

  /**
   * Internal: called by a transfer once it completed.
   *
   * @internal
   */
  _transferDone(t: NativeTransfer, event: Deno.PointerObject): void {
    this.#s.libra_event_destroy(event);
    this.#transfers.delete(t);
    if (t.dev.pending === t) t.dev.pending = null;
  }

  /** Internal: queries an event. */
  _eventDone(event: Deno.PointerObject): boolean {
    this.#check("libra_event_query", this.#s.libra_event_query(event, this.#i32));
    return this.#i32[0] === 1;
  }

  /** Internal: waits for a stream. */
  _streamSync(stream: Deno.PointerObject): void {
    this.#check("libra_stream_sync", this.#s.libra_stream_sync(stream));
  }

  #settle(b: NativeBuffer): void {
    if (b.pending) b.pending.wait();
  }

  #host(h: HostBuffer, dev: NativeBuffer, what: string): HostBuffer {
    if (h instanceof NativeHostBuffer && h.freed) {
      throw new Error(`${this.name}.${what}: host buffer was already freed`);
    }
    if (!(h.data instanceof Uint8Array) || h.data.byteLength < dev.bytes) {
      throw new RangeError(
        `${this.name}.${what}: host buffer of ${h.data?.byteLength} bytes is smaller than device ` +
          `buffer ${dev.id} (${dev.bytes} bytes)`,
      );
    }
    return h;
  }

  #own(buf: DeviceBuffer, what: string): NativeBuffer {
    if (!(buf instanceof NativeBuffer) || bufferOwner(buf) !== this) {
      throw new TypeError(
        `${this.name}.${what}: buffer ${buf?.id} was not allocated by this ${this.name} backend`,
      );
    }
    if (buf.freed) throw new Error(`${this.name}.${what}: buffer ${buf.id} was already freed`);
    return buf;
  }

  #check(fn: string, status: number): void {
    if (status !== Status.OK) throw this.#error(fn, status);
  }

  #error(fn: string, status: number, bytes = 0): Error {
    const msg = cString(this.#s.libra_last_error());
    if (status === Status.OUT_OF_MEMORY) return new NativeOutOfMemoryError(fn, msg, bytes);
    return errorForStatus(fn, status, msg, bytes);
  }
}

class NativeTransfer implements Transfer {
  #done = false;
  constructor(
    readonly backend: NativeBackend,
    readonly event: Deno.PointerObject,
    readonly stream: Deno.PointerObject,
    readonly dev: NativeBuffer,
    readonly host: HostBuffer,
  ) {}

  get done(): boolean {
    if (!this.#done && this.backend._eventDone(this.event)) this.#finish();
    return this.#done;
  }

  wait(): void {
    if (this.#done) return;
    this.backend._streamSync(this.stream);
    this.#finish();
  }

  #finish(): void {
    this.#done = true;
    this.backend._transferDone(this, this.event);
  }
}

function open(kind: LibraryKind): LoadedLibrary {
  return loadLibrary(kind);
}

/**
 * A backend on the CPU kernel library (`native/build/libra_cpu.so`).
 *
 * @example
 * ```ts
 * import { cpuBackend } from "@libra/native";
 * const cpu = cpuBackend();
 * using x = cpu.alloc(12), y = cpu.alloc(12);
 * cpu.write(x, new Float32Array([-1, 0, 2]));
 * cpu.run("relu", [x], [y], [3]);
 * const out = new Float32Array(cpu.read(y).buffer);
 * if (out[2] !== 2 || out[0] !== 0) throw new Error("relu");
 * ```
 */
export function cpuBackend(options: CpuBackendOptions = {}): NativeBackend {
  const lib = open(options.variant === "portable" ? "cpu_portable" : "cpu");
  const b = new NativeBackend(lib, "cpu", options);
  if (options.threads !== undefined) b.setThreads(options.threads);
  return b;
}

/**
 * A backend on the CUDA kernel library (`native/build/libra_cuda.so`). Throws
 * a `NoDeviceError` ("no CUDA device ...") on a machine without a GPU or
 * driver, and a `LibraryLoadError` when the library was not built.
 *
 * @example
 * ```ts
 * import { cudaBackend, LibraryLoadError, NoDeviceError } from "@libra/native";
 * try {
 *   const gpu = cudaBackend();
 *   console.log(gpu.deviceName);
 * } catch (e) {
 *   if (!(e instanceof NoDeviceError || e instanceof LibraryLoadError)) throw e;
 * }
 * ```
 */
export function cudaBackend(options: CudaBackendOptions = {}): NativeBackend {
  return new NativeBackend(open("cuda"), "cuda", options);
}

/** Refuses a call whose mutated input `m` is also another of its inputs. */
function checkMutated(
  kernel: KernelName,
  inputs: readonly DeviceBuffer[],
  mutates: readonly number[],
): void {
  if (mutates.length === 0) return;
  // Counted once each (an update of many tensors mutates a hundred inputs of 150).
  const uses = new Map<DeviceBuffer, number>();
  for (const b of inputs) uses.set(b, (uses.get(b) ?? 0) + 1);
  for (const m of mutates) {
    const b = inputs[m]!;
    if (uses.get(b)! < 2) continue;
    const j = inputs.findIndex((x, k) => k !== m && x === b);
    throw new KernelError(kernel, `mutated input ${m} (buffer ${b.id}) is also input ${j}`);
  }
}
