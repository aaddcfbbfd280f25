/**
 * Static analysis of a trace shared by the planners: the model calls in
 * order, the storages they produce and read, and an estimate of the memory in
 * use at each call when nothing is evicted beyond unreferenced storages
 * (DTR's eager eviction).
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";

/** One model call (CALL or MUTATE), by 0-based call index. */
export interface CallInfo {
  readonly op: string;
  readonly timeNs: number;
  readonly backward: boolean;
  /** Values read (distinct, by value id). */
  readonly reads: number[];
  /** Values whose fresh storage this call produces. */
  readonly produces: number[];
}

/** One storage-owning value. */
export interface ValueInfo {
  readonly id: number;
  /** Name of the handle that produced it (a plan names it by this). */
  readonly name: string;
  readonly bytes: number;
  /** Producing call index; -1 for constants. */
  readonly producer: number;
  /**
   * True when produced in the backward pass: at or after the first call
   * flagged backward (traces recorded live flag only `*_backward` kernels, so
   * the flag of a single call does not tell a gradient matmul from a forward one).
   */
  backward: boolean;
  /** Call indices reading the storage (through any handle or view), ascending, distinct. */
  readonly uses: number[];
  /** First call index at which the storage is no longer referenced (no handle left). */
  freeAt: number;
  /** Call index at which it takes memory (its producer, or the next call for constants). */
  readonly allocAt: number;
  /**
   * False when the producing name is rebound later (a later MUTATE of it,
   * COPY_FROM onto it, a new result of the same name): a plan names a value by
   * the name it was produced under, and that name must still mean it. Values
   * a MUTATE touched (old and new versions) are not addressable either, nor
   * values the program reads on the host (READ): a read comes between calls,
   * where no plan step runs, so a plan leaves them on the device.
   */
  addressable: boolean;
}

/** The analysis. */
export interface TraceAnalysis {
  readonly calls: CallInfo[];
  readonly values: ValueInfo[];
  /**
   * Index of the first backward call: the first call after a BACKWARD
   * annotation, else the first call flagged backward (`calls.length` when none).
   */
  readonly firstBackward: number;
  /** Total compute of the step (sum of call times), ns. */
  readonly computeNs: number;
}

/** Analyses `trace` (see the module doc). */
export function analyzeTrace(trace: Trace): TraceAnalysis {
  const calls: CallInfo[] = [];
  const values: ValueInfo[] = [];
  const handle = new Map<string, number>();
  const refs: number[] = [];
  const rootName = new Map<string, number>();
  const useSet: Set<number>[] = [];
  const addValue = (
    name: string,
    bytes: number,
    producer: number,
    backward: boolean,
    allocAt = producer >= 0 ? producer : calls.length,
  ) => {
    const id = values.length;
    values.push({
      id,
      name,
      bytes,
      producer,
      backward,
      uses: [],
      freeAt: Infinity,
      allocAt,
      addressable: producer >= 0,
    });
    refs.push(0);
    useSet.push(new Set());
    rootName.set(name, id);
    return id;
  };
  const rebind = (name: string) => {
    const v = rootName.get(name);
    if (v !== undefined) values[v]!.addressable = false;
  };
  const ref = (name: string, v: number) => {
    handle.set(name, v);
    refs[v]!++;
  };
  const unref = (v: number) => {
    if (--refs[v]! === 0) values[v]!.freeAt = calls.length;
  };
  let firstBackward = -1;
  let annotatedBackward = -1;
  let computeNs = 0;
  for (const e of trace.events) {
    switch (e.kind) {
      case "constant":
        rebind(e.name);
        ref(e.name, addValue(e.name, e.bytes, -1, false));
        break;
      case "call":
      case "mutate": {
        const k = calls.length;
        const reads: number[] = [];
        for (const a of e.args) {
          const v = handle.get(a);
          if (v !== undefined && !reads.includes(v)) reads.push(v);
        }
        for (const v of reads) useSet[v]!.add(k);
        const produces: number[] = [];
        calls.push({ op: e.op, timeNs: e.timeNs, backward: e.backward, reads, produces });
        computeNs += e.timeNs;
        if (e.backward && firstBackward < 0) firstBackward = k;
        if (e.kind === "call") {
          for (const r of e.results) {
            rebind(r.name);
            if (r.alias >= 0) {
              const base = handle.get(e.args[r.alias] ?? "");
              if (base !== undefined) ref(r.name, base);
            } else {
              const v = addValue(r.name, r.bytes, k, e.backward);
              produces.push(v);
              ref(r.name, v);
            }
          }
        } else {
          for (const m of e.mutate) {
            const name = e.args[m];
            if (name === undefined) continue;
            const old = handle.get(name);
            rebind(name);
            if (old === undefined) continue;
            values[old]!.addressable = false;
            // In place: the new version reuses the old one's memory (from the next call on).
            const v = addValue(name, values[old]!.bytes, k, e.backward, k + 1);
            // Not a candidate: recomputing an in-place version replays the
            // whole chain of versions before it (measured on DTR's U-Net trace,
            // planning them made libra and chen-sqrt slower), and live it is a
            // leaf that can only be swapped.
            values[v]!.addressable = false;
            produces.push(v);
            ref(name, v);
            unref(old);
          }
        }
        break;
      }
      case "copy": {
        const v = handle.get(e.src);
        if (v !== undefined) ref(e.dst, v);
        break;
      }
      case "copyFrom": {
        const old = handle.get(e.dst);
        const v = handle.get(e.src);
        rebind(e.dst);
        if (v !== undefined) ref(e.dst, v);
        if (old !== undefined) unref(old);
        break;
      }
      case "release": {
        const v = handle.get(e.name);
        if (v === undefined) break;
        handle.delete(e.name);
        unref(v);
        break;
      }
      case "read": {
        const v = handle.get(e.name);
        if (v !== undefined) values[v]!.addressable = false;
        break;
      }
      case "annotate":
        // The BACKWARD annotation, where a trace has one, is the authority on
        // where the backward pass starts (op names can mislead: DTR's U-Net
        // trace calls a forward pooling op `max_pool2d_backward`).
        if (e.annotation === "BACKWARD" && annotatedBackward < 0) {
          annotatedBackward = calls.length;
        }
        break;
    }
  }
  const fb = annotatedBackward >= 0
    ? annotatedBackward
    : firstBackward < 0
    ? calls.length
    : firstBackward;
  for (const v of values) {
    const u = [...useSet[v.id]!].sort((a, b) => a - b);
    v.uses.push(...u);
    v.backward = v.producer >= fb;
  }
  return { calls, values, firstBackward: fb, computeNs };
}

/**
 * Estimated bytes in use at each call (after its outputs are allocated):
 * every value counts from `allocAt` up to `freeAt - 1`, except where `out`
 * says it is evicted (`out(valueId, call)` true).
 */
export function memoryProfile(
  a: TraceAnalysis,
  out?: (v: ValueInfo) => readonly [number, number][] | undefined,
): number[] {
  const n = a.calls.length;
  const diff = new Float64Array(n + 1);
  const add = (from: number, to: number, b: number) => {
    const f = Math.max(0, from), t = Math.min(n, to);
    if (f >= t) return;
    diff[f]! += b;
    diff[t]! -= b;
  };
  for (const v of a.values) {
    const end = Number.isFinite(v.freeAt) ? v.freeAt : n;
    add(v.allocAt, end, v.bytes);
    for (const [f, t] of out?.(v) ?? []) add(f, Math.min(t, end), -v.bytes);
  }
  const mem: number[] = new Array(n);
  let cur = 0;
  for (let k = 0; k < n; k++) {
    cur += diff[k]!;
    mem[k] = cur;
  }
  return mem;
}

/** Last use of `v` strictly before call `k` (or its producer), and first use after `k`. */
export function gapAround(v: ValueInfo, k: number): { prev: number; next: number } {
  let prev = v.producer;
  let next = Infinity;
  for (const u of v.uses) {
    if (u < k) prev = Math.max(prev, u);
    else if (u > k) {
      next = u;
      break;
    } else return { prev: k, next: k };
  }
  return { prev, next };
}
