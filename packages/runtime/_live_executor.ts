/**
 * The live runtime's executor: device buffers of the wrapped backend for the
 * engine's storages (freed ones cached for reuse), kernel launches, swaps through host buffers, and waits on asynchronous
 * copies. Internal to `Runtime`.
 *
 * @module
 */

import type { CallNode, StorageNode } from "@libra/lineage";
import {
  type Backend,
  type DeviceBuffer,
  type HostBuffer,
  OutOfMemoryError,
  type Transfer,
} from "@libra/tensor/backend";
import type { KernelName } from "@libra/tensor/kernels";
import type { Executor } from "./engine.ts";

/** The most distinct sizes the buffer cache keeps lists for; past it, it starts again empty. */
export const MAX_CACHED_SIZES = 4096;

/** A kernel launch waiting in the executor's queue. */
interface Launch {
  op: KernelName;
  ins: DeviceBuffer[];
  outs: DeviceBuffer[];
  params: readonly number[];
  /** The slot's argument lists by length (setting a list's length is a call into the engine). */
  readonly insBy: DeviceBuffer[][];
  readonly outsBy: DeviceBuffer[][];
}

const NO_BUFFERS: readonly DeviceBuffer[] = [];
// A new slot's lists until its first launch (never written: a launch takes lists of its lengths).
const EMPTY_SLOT = NO_BUFFERS as DeviceBuffer[];

/** Launches the executor's queue holds at most (see {@link LiveExecutor}): the next one runs them first. */
export const LAUNCH_QUEUE = 32;

/**
 * The executor of a live `Runtime`: runs calls on the wrapped backend and
 * moves bytes for swaps.
 *
 * Made with `defer`, it launches as a GPU stream does: a kernel it need not
 * time waits in a queue (up to {@link LAUNCH_QUEUE}) and the queue runs, in
 * order, before anything else reads or changes device bytes: a timed kernel,
 * a copy or swap, a backend free of a buffer a queued launch names, the
 * runtime's reads, writes, `sync` and end of step. Results are the same
 * (the same kernels on the same buffers in the same order); what changes is
 * that the runtime's bookkeeping for a run of calls, and the tensor layer's
 * code around it, run back to back with their code in the caches, rather
 * than each call after a kernel that pushed it out, and the kernels run back
 * to back too (gpt small at ratio 1.0, in one process beside a copy that
 * launches at once: steps 0.2-1.6% shorter in 12 of 14 comparisons). For
 * synchronous backends: a CUDA stream queues launches already.
 */
export class LiveExecutor implements Executor {
  /** Storages with a copy in flight (each holds it in `StorageNode.transfer`). */
  pending = 0;
  asyncStallNs = 0;
  /**
   * Backend time this executor has measured: every kernel it timed (model
   * calls, recomputations, copies), swap copies, waits on transfers, and in
   * a dispatch sample the backend's allocations and frees. A dispatch sample
   * (see `Runtime.run`) takes it out of the call's time.
   */
  deviceNs = 0;
  /** Time every kernel, allocation and free while set (a dispatch sample is under way). */
  sampling = false;
  /** Backend time since `t0` (a `performance.now()` reading), ns, counted in {@link deviceNs}. */
  deviceSince(t0: number): number {
    const dt = (performance.now() - t0) * 1e6;
    this.deviceNs += dt;
    return dt;
  }
  /**
   * Time every kernel (else only recomputations): the cost model prices calls
   * by their measured time, or the caller wants `kernelNs` for every call.
   * Two clock reads cost more than the rest of a small call's dispatch.
   */
  timeAll: () => boolean = () => true;
  /** Argument arrays reused by `execute` (backends read them during the call only), by length. */
  readonly #insBy: DeviceBuffer[][] = [];
  readonly #outsBy: DeviceBuffer[][] = [];
  /** The backend runs validated calls without checking them again. */
  readonly #validated: boolean;
  /** An executor over `backend`; `defer` queues untimed launches (see the class note). */
  constructor(readonly backend: Backend, defer = false) {
    this.#validated = typeof backend.runValidated === "function";
    this.#defer = defer;
  }
  /** Untimed launches wait in {@link #queue} for the next {@link flush} (see the class note). */
  readonly #defer: boolean;
  readonly #queue: Launch[] = [];
  #queued = 0;
  /** Set when a queued launch failed: the runtime's values are not what it believes. */
  #failed: Error | undefined;

  /** Launches waiting in the queue. */
  get queued(): number {
    return this.#queued;
  }

  /**
   * Runs the launches waiting in the queue, in order. When one fails, those
   * after it are dropped and this executor refuses every later launch and
   * flush (so every read): the engine counts their outputs as computed, and
   * they are not.
   */
  flush(): void {
    if (this.#failed !== undefined) throw this.#failed;
    const n = this.#queued;
    if (n === 0) return;
    this.#queued = 0;
    const q = this.#queue, b = this.backend;
    const t0 = this.sampling ? performance.now() : 0;
    let i = 0;
    try {
      for (; i < n; i++) {
        const l = q[i]!;
        if (this.#validated) b.runValidated!(l.op, l.ins, l.outs, l.params);
        else b.run(l.op, l.ins, l.outs, l.params);
      }
    } catch (e) {
      this.#failed = new Error(
        `runtime: the deferred launch of ${q[i]!.op} (${i + 1} of ${n} queued) failed, so the ` +
          `values of it and of the ${n - 1 - i} launched after it were never computed; this ` +
          `runtime launches nothing more: ${e instanceof Error ? e.message : String(e)}`,
        { cause: e },
      );
      throw this.#failed;
    } finally {
      // Drop the references so the slots do not keep buffers alive (loops: `fill` is a call
      // into the engine).
      for (let i = 0; i < n; i++) {
        const l = q[i]!, li = l.ins, lo = l.outs;
        for (let j = 0; j < li.length; j++) li[j] = undefined as unknown as DeviceBuffer;
        for (let j = 0; j < lo.length; j++) lo[j] = undefined as unknown as DeviceBuffer;
      }
    }
    if (this.sampling) this.deviceSince(t0);
  }

  /** Runs the queue when a launch in it reads or writes `b` (before `b` is freed or written). */
  flushFor(b: DeviceBuffer): void {
    if (this.#failed !== undefined) throw this.#failed;
    const q = this.#queue, n = this.#queued;
    // Plain loops: `includes` is a call into the engine per list, on every free past the cache.
    for (let i = 0; i < n; i++) {
      const l = q[i]!, li = l.ins, lo = l.outs;
      let named = false;
      for (let j = 0; j < li.length && !named; j++) named = li[j] === b;
      for (let j = 0; j < lo.length && !named; j++) named = lo[j] === b;
      if (named) {
        this.flush();
        return;
      }
    }
  }

  /** Queues a launch (its lists copied), running the queue first when it is full. */
  #enqueue(
    op: KernelName,
    ins: readonly DeviceBuffer[],
    outs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    if (this.#failed !== undefined) throw this.#failed;
    if (this.#queued === LAUNCH_QUEUE) this.flush();
    const q = this.#queue, ni = ins.length, no = outs.length;
    let l = q[this.#queued];
    if (l === undefined) {
      q.push(l = { op, ins: EMPTY_SLOT, outs: EMPTY_SLOT, params, insBy: [], outsBy: [] });
    } else {
      l.op = op;
      l.params = params;
    }
    const li = l.ins = l.insBy[ni] ?? (l.insBy[ni] = new Array(ni));
    const lo = l.outs = l.outsBy[no] ?? (l.outsBy[no] = new Array(no));
    for (let i = 0; i < ni; i++) li[i] = ins[i]!;
    for (let i = 0; i < no; i++) lo[i] = outs[i]!;
    this.#queued++;
  }

  /**
   * Runs an in-place kernel (not a recorded call): queued as calls are, or
   * after the queue, timed when `timed` or in a dispatch sample (device time);
   * returns its time then.
   */
  launch(
    op: KernelName,
    bufs: readonly DeviceBuffer[],
    params: readonly number[],
    timed: boolean,
  ): number | undefined {
    if (!timed && this.#defer) {
      this.#enqueue(op, bufs, NO_BUFFERS, params);
      return undefined;
    }
    this.flush();
    const clocked = timed || this.sampling;
    const t0 = clocked ? performance.now() : 0;
    this.backend.run(op, bufs, NO_BUFFERS, params);
    return clocked ? this.deviceSince(t0) : undefined;
  }
  /**
   * The budget the engine keeps (Infinity without one): with the largest
   * number of bytes buffers held at once, it bounds what the cache may keep.
   */
  budget: () => number = () => Infinity;
  /**
   * Free device buffers kept for reuse, by size (a caching allocator, as
   * PyTorch's): a value released and another of its size made soon after (the
   * next step's activation, the recomputed value of an evicted one) take no
   * backend `alloc` and `free`. The cache never makes the device hold more
   * than the most that values ever held at once, nor more than the budget:
   * `#held + #cachedBytes <= min(budget, #heldPeak)`, kept by {@link #put}
   * (which frees a buffer rather than keep it past that) and {@link #trim}
   * (before an allocation the cache cannot serve). Released whole when no
   * value holds a buffer any more, and by {@link releaseCached}.
   */
  #cache = new Map<number, DeviceBuffer[]>();
  /**
   * The sizes {@link #cache} has lists for, largest first: {@link #trim} frees
   * the largest cached buffers first. (In the order the sizes came, it freed
   * small buffers by the dozen to make room for a large one, and those sizes
   * then missed: gpt small at ratio 1.0 took 87 backend allocations a step,
   * lstm small 633; largest first, 63 and 329.)
   */
  #sizes: number[] = [];
  #cachedBytes = 0;
  /** Bytes of the device buffers that values (or a call's temporaries) hold. */
  #held = 0;
  /** The most {@link #held} has been. */
  #heldPeak = 0;

  /**
   * Free host buffers kept for reuse, by size: a swap-out copies into host memory its
   * buffer has touched before (a fresh allocation's first touch faults in every page: on the
   * cpu backend a 2 MB swap-out took 0.42 ms into a fresh buffer, 0.12 ms into a used one).
   * A freed buffer is kept only while `#hostHeld + #hostCachedBytes <= #hostHeldPeak`
   * (the most swapped values held at once) holds with it, so the cache never holds more than
   * that. Released with the device cache.
   */
  #hostCache = new Map<number, HostBuffer[]>();
  #hostCachedBytes = 0;
  /** Bytes of the host buffers swapped values hold. */
  #hostHeld = 0;
  /** The most {@link #hostHeld} has been. */
  #hostHeldPeak = 0;

  /** Bytes of free device buffers kept for reuse. */
  get cachedBytes(): number {
    return this.#cachedBytes;
  }

  /** A host buffer of `bytes`: a cached one when there is one, else the backend's. */
  #allocHost(bytes: number): HostBuffer {
    const b = this.#hostCache.get(bytes)?.pop();
    this.#hostHeld += bytes;
    if (this.#hostHeld > this.#hostHeldPeak) this.#hostHeldPeak = this.#hostHeld;
    if (b !== undefined) {
      this.#hostCachedBytes -= bytes;
      return b;
    }
    return this.backend.allocHost(bytes);
  }

  /** Frees host buffer `b`, or keeps it for the next swap-out of its size. */
  #freeHost(b: HostBuffer): void {
    const bytes = b.bytes;
    this.#hostHeld -= bytes;
    if (this.#hostHeld + this.#hostCachedBytes + bytes > this.#hostHeldPeak) {
      this.backend.freeHost(b);
      return;
    }
    const list = this.#hostCache.get(bytes);
    if (list !== undefined) list.push(b);
    else this.#hostCache.set(bytes, [b]);
    this.#hostCachedBytes += bytes;
  }

  #releaseHostCached(): void {
    if (this.#hostCachedBytes === 0) return;
    for (const list of this.#hostCache.values()) {
      while (list.length > 0) this.backend.freeHost(list.pop()!);
    }
    this.#hostCache = new Map();
    this.#hostCachedBytes = 0;
  }

  /** Frees every cached device buffer (PyTorch's `empty_cache`), and every cached host buffer. */
  releaseCached(): void {
    this.flush();
    this.#releaseHostCached();
    if (this.#cachedBytes === 0) return;
    for (const list of this.#cache.values()) {
      while (list.length > 0) this.backend.free(list.pop()!);
    }
    // A new map, not `clear()`: a cleared map's old table points at its new one, a chain
    // through which minor collections kept whole steps' storages alive.
    this.#cache = new Map();
    this.#sizes = [];
    this.#cachedBytes = 0;
  }

  /** A device buffer of `bytes`: a cached one when there is one, else the backend's. */
  #alloc(bytes: number): DeviceBuffer {
    const list = this.#cache.get(bytes);
    let b: DeviceBuffer;
    if (list !== undefined && list.length > 0) {
      b = list.pop()!;
      this.#cachedBytes -= bytes;
      this.#held += bytes;
      return b;
    }
    // The backend's allocation (and frees), timed as device work in a dispatch sample: the
    // budget-free copy allocates from its backend too, on every call.
    const t0 = this.sampling ? performance.now() : 0;
    // Room first: the cache gives back what would take the device past its limit.
    if (this.#cachedBytes > 0) this.#trim(bytes);
    try {
      b = this.backend.alloc(bytes);
    } catch (e) {
      if (!(e instanceof OutOfMemoryError) || this.#cachedBytes === 0) throw e;
      // The device is full, some of it with cached buffers: give them back, try again.
      this.releaseCached();
      b = this.backend.alloc(bytes);
    }
    if (this.sampling) this.deviceSince(t0);
    this.#held += bytes;
    if (this.#held > this.#heldPeak) this.#heldPeak = this.#held;
    return b;
  }

  /** Gives back a device buffer a value or temporary held: to the cache where it fits. */
  #put(b: DeviceBuffer): void {
    const bytes = b.bytes;
    this.#held -= bytes;
    if (this.#held === 0) {
      // No value holds device memory: nothing is made soon that a cached buffer would serve.
      this.flush();
      this.backend.free(b);
      this.releaseCached();
      return;
    }
    const limit = Math.min(this.budget(), this.#heldPeak);
    if (this.#held + this.#cachedBytes + bytes > limit) {
      this.flushFor(b);
      const t0 = this.sampling ? performance.now() : 0;
      this.backend.free(b);
      if (this.#cachedBytes > 0) this.#trim(0);
      if (this.sampling) this.deviceSince(t0);
      return;
    }
    const list = this.#cache.get(bytes);
    if (list !== undefined) list.push(b);
    else {
      // A size not seen before: sizes that never come back (shapes that vary from step to
      // step) would otherwise each keep an entry for good.
      if (this.#cache.size >= MAX_CACHED_SIZES) this.releaseCached();
      this.#cache.set(bytes, [b]);
      const sizes = this.#sizes;
      let i = sizes.length;
      sizes.push(bytes);
      while (i > 0 && sizes[i - 1]! < bytes) {
        sizes[i] = sizes[i - 1]!;
        i--;
      }
      sizes[i] = bytes;
    }
    this.#cachedBytes += bytes;
  }

  /**
   * Frees cached buffers until they, the held bytes and `bytes` more to be
   * held fit the limit of {@link #cache}.
   */
  #trim(bytes: number): void {
    const held = this.#held + bytes;
    const limit = Math.min(this.budget(), Math.max(this.#heldPeak, held));
    if (held + this.#cachedBytes <= limit) return;
    const sizes = this.#sizes;
    for (let j = 0; j < sizes.length; j++) {
      const list = this.#cache.get(sizes[j]!)!;
      while (list.length > 0 && held + this.#cachedBytes > limit) {
        const b = list.pop()!;
        this.#cachedBytes -= b.bytes;
        this.flushFor(b);
        this.backend.free(b);
      }
      if (held + this.#cachedBytes <= limit) return;
    }
  }

  allocate(s: StorageNode): void {
    s.data = this.#alloc(s.bytes);
  }
  release(s: StorageNode): void {
    if (this.pending > 0) this.wait(s);
    if (s.data !== undefined) {
      this.#put(s.data as DeviceBuffer);
      s.data = undefined;
    }
    if (s.host !== undefined) {
      this.#freeHost(s.host as HostBuffer);
      s.host = undefined;
    }
  }
  wait(s: StorageNode): void {
    const tr = s.transfer as Transfer | undefined;
    if (tr === undefined) return;
    s.transfer = undefined;
    this.pending--;
    if (!tr.done) {
      const t0 = performance.now();
      tr.wait();
      this.asyncStallNs += this.deviceSince(t0);
    }
    if (s.host !== undefined) {
      this.#freeHost(s.host as HostBuffer);
      s.host = undefined;
    }
  }
  execute(call: CallNode, remat: boolean): number | undefined {
    const co = call.outputs, ci = call.inputs;
    const no = co.length, ni = ci.length;
    const outs = this.#outsBy[no] ?? (this.#outsBy[no] = new Array(no));
    const ins = this.#insBy[ni] ?? (this.#insBy[ni] = new Array(ni));
    let temps: DeviceBuffer[] | null = null;
    for (let i = 0; i < no; i++) {
      const s = co[i]!.storage;
      if (s.residency === "resident" || s.residency === "freed") {
        const tmp = this.#alloc(s.bytes);
        (temps ??= []).push(tmp);
        outs[i] = tmp;
      } else {
        if (s.data === undefined) s.data = this.#alloc(s.bytes);
        outs[i] = s.data as DeviceBuffer;
      }
    }
    const waits = this.pending > 0;
    for (let i = 0; i < ni; i++) {
      const st = ci[i]!.storage;
      if (waits) this.wait(st);
      ins[i] = st.data as DeviceBuffer;
    }
    const timed = remat || this.timeAll();
    const deferred = !timed && this.#defer;
    if (!deferred) this.flush();
    const clocked = !deferred && (timed || this.sampling);
    const t0 = clocked ? performance.now() : 0;
    try {
      if (deferred) this.#enqueue(call.op as KernelName, ins, outs, call.params);
      // A recorded call passed the runtime's validation when it was made (its sizes and
      // params never change), so the backend need not validate it again.
      else if (this.#validated) {
        this.backend.runValidated!(call.op as KernelName, ins, outs, call.params);
      } else this.backend.run(call.op as KernelName, ins, outs, call.params);
    } finally {
      if (temps !== null) { for (const b of temps) this.#put(b); }
      // Drop the references so reused arrays do not keep buffers alive (a loop: `fill`
      // is a call into the runtime that cost more than the stores on a small call).
      for (let i = 0; i < no; i++) outs[i] = undefined as unknown as DeviceBuffer;
      for (let i = 0; i < ni; i++) ins[i] = undefined as unknown as DeviceBuffer;
    }
    if (!clocked) return undefined;
    const dt = this.deviceSince(t0);
    return timed ? dt : undefined;
  }
  swapOut(s: StorageNode): number {
    this.flush();
    this.wait(s);
    const host = this.#allocHost(s.bytes);
    const t0 = performance.now();
    this.backend.copy(s.data as DeviceBuffer, host);
    const dt = this.deviceSince(t0);
    this.#put(s.data as DeviceBuffer);
    s.data = undefined;
    s.host = host;
    return dt;
  }
  copy(src: StorageNode, dst: StorageNode): number {
    this.flush();
    const t0 = performance.now();
    this.backend.run("copy", [src.data as DeviceBuffer], [dst.data as DeviceBuffer], [
      src.bytes / 4,
    ]);
    return this.deviceSince(t0);
  }
  swapIn(s: StorageNode): number {
    this.flush();
    const dev = this.#alloc(s.bytes);
    const t0 = performance.now();
    const tr = this.backend.copyAsync(s.host as HostBuffer, dev);
    s.data = dev;
    if (tr.done) {
      this.#freeHost(s.host as HostBuffer);
      s.host = undefined;
    } else {
      if (s.transfer === undefined) this.pending++;
      s.transfer = tr;
    }
    return this.deviceSince(t0);
  }
}
