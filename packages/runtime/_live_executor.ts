/**
 * The live runtime's executor: device buffers of the wrapped backend for the
 * engine's storages, kernel launches (with spare buffers reused at an
 * unlimited budget), swaps through host buffers, and waits on asynchronous
 * copies. Internal to `Runtime`.
 *
 * @module
 */

import type { CallNode, StorageNode } from "@libra/lineage";
import type { Backend, DeviceBuffer, HostBuffer, Transfer } from "@libra/tensor/backend";
import type { KernelName } from "@libra/tensor/kernels";
import type { Executor } from "./engine.ts";
import { clearList } from "@libra/util/list";

/** The executor of a live `Runtime`: runs calls on the wrapped backend and moves bytes for swaps. */
export class LiveExecutor implements Executor {
  /** Storages with a copy in flight (each holds it in `StorageNode.transfer`). */
  pending = 0;
  asyncStallNs = 0;
  /**
   * Time every kernel (else only recomputations): the cost model prices calls
   * by their measured time, or the caller wants `kernelNs` for every call.
   * Two clock reads cost more than the rest of a small call's dispatch.
   */
  timeAll: () => boolean = () => true;
  /** Device buffers kept across `retire` for the storage that is produced into again. */
  readonly #spareFor: StorageNode[] = [];
  readonly #spareBuf: DeviceBuffer[] = [];
  /** Argument arrays reused by `execute` (backends read them during the call only), by length. */
  readonly #insBy: DeviceBuffer[][] = [];
  readonly #outsBy: DeviceBuffer[][] = [];
  /** The backend runs validated calls without checking them again. */
  readonly #validated: boolean;
  constructor(readonly backend: Backend) {
    this.#validated = typeof backend.runValidated === "function";
  }
  /**
   * Takes `s`'s device buffer aside so that releasing `s` keeps it, for `s`'s
   * next value to reuse (one free and alloc fewer per call). Only the runtime
   * calls this, at an unlimited budget, right before `s` is retired and
   * produced into again; {@link dropSpares} frees what was not reused.
   */
  keepSpare(s: StorageNode): void {
    if (this.pending > 0) this.wait(s);
    if (s.data === undefined) return;
    this.#spareFor.push(s);
    this.#spareBuf.push(s.data as DeviceBuffer);
    s.data = undefined;
  }
  #takeSpare(s: StorageNode): DeviceBuffer | undefined {
    const n = this.#spareFor.length;
    if (n === 0) return undefined;
    if (n === 1) {
      if (this.#spareFor[0] !== s) return undefined;
      clearList(this.#spareFor);
      return this.#spareBuf.pop();
    }
    const i = this.#spareFor.indexOf(s);
    if (i < 0) return undefined;
    const b = this.#spareBuf[i]!;
    this.#spareFor.splice(i, 1);
    this.#spareBuf.splice(i, 1);
    return b;
  }
  /** Frees the spare buffers no output reused. */
  dropSpares(): void {
    if (this.#spareBuf.length === 0) return;
    while (this.#spareBuf.length > 0) this.backend.free(this.#spareBuf.pop()!);
    clearList(this.#spareFor);
  }
  allocate(s: StorageNode): void {
    s.data = this.backend.alloc(s.bytes);
  }
  release(s: StorageNode): void {
    if (this.pending > 0) this.wait(s);
    if (s.data !== undefined) {
      this.backend.free(s.data as DeviceBuffer);
      s.data = undefined;
    }
    if (s.host !== undefined) {
      this.backend.freeHost(s.host as HostBuffer);
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
      this.asyncStallNs += (performance.now() - t0) * 1e6;
    }
    if (s.host !== undefined) {
      this.backend.freeHost(s.host as HostBuffer);
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
        const tmp = this.backend.alloc(s.bytes);
        (temps ??= []).push(tmp);
        outs[i] = tmp;
      } else {
        if (s.data === undefined) s.data = this.#takeSpare(s) ?? this.backend.alloc(s.bytes);
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
    const t0 = timed ? performance.now() : 0;
    try {
      // A recorded call passed the runtime's validation when it was made (its sizes and
      // params never change), so the backend need not validate it again.
      if (this.#validated) {
        this.backend.runValidated!(call.op as KernelName, ins, outs, call.params);
      } else this.backend.run(call.op as KernelName, ins, outs, call.params);
    } finally {
      if (temps !== null) { for (const b of temps) this.backend.free(b); }
      // Drop the references so reused arrays do not keep buffers alive (a loop: `fill`
      // is a call into the runtime that cost more than the stores on a small call).
      for (let i = 0; i < no; i++) outs[i] = undefined as unknown as DeviceBuffer;
      for (let i = 0; i < ni; i++) ins[i] = undefined as unknown as DeviceBuffer;
    }
    return timed ? (performance.now() - t0) * 1e6 : undefined;
  }
  swapOut(s: StorageNode): number {
    this.wait(s);
    const host = this.backend.allocHost(s.bytes);
    const t0 = performance.now();
    this.backend.copy(s.data as DeviceBuffer, host);
    const dt = (performance.now() - t0) * 1e6;
    this.backend.free(s.data as DeviceBuffer);
    s.data = undefined;
    s.host = host;
    return dt;
  }
  copy(src: StorageNode, dst: StorageNode): number {
    const t0 = performance.now();
    this.backend.run("copy", [src.data as DeviceBuffer], [dst.data as DeviceBuffer], [
      src.bytes / 4,
    ]);
    return (performance.now() - t0) * 1e6;
  }
  swapIn(s: StorageNode): number {
    const dev = this.backend.alloc(s.bytes);
    const t0 = performance.now();
    const tr = this.backend.copyAsync(s.host as HostBuffer, dev);
    s.data = dev;
    if (tr.done) {
      this.backend.freeHost(s.host as HostBuffer);
      s.host = undefined;
    } else {
      if (s.transfer === undefined) this.pending++;
      s.transfer = tr;
    }
    return (performance.now() - t0) * 1e6;
  }
}
