/**
 * The rematerialization problem of Checkmate (Jain et al., MLSys 2020) on the
 * fixed schedule of a recorded step, in the form this runtime's plans run.
 *
 * Stage `t` (one per model call, plus stage `n` for the end of the step)
 * first recomputes some earlier calls (`R[t][i]`, in call order, each with
 * its inputs on the device) and then runs call `t`. `S[t][v]` says whether
 * the value `v` is on the device when stage `t` starts (retained, the
 * checkpoint). A plan restores before call `t` and evicts after it, so what a
 * stage recomputes stays until its call has run: Checkmate's FREE decisions
 * are fixed at the end of the stage, and the memory of stage `t` is
 *
 *     base[t] - sum(bytes of managed values held at t) + sum(S[t][v] * bytes(v))
 *             + sum(R[t][i] * outBytes(i))
 *
 * where `base[t]` is the memory after call `t` in a budget-free replay (the
 * runtime's accounting: constants, values no plan may touch, call `t`'s
 * outputs). Nothing is freed inside a stage, so the running sum (Checkmate's
 * `U`) is largest at the stage's call and one row per stage bounds it; a
 * recomputed call counts all its outputs (the runtime reserves them all).
 *
 * Managed values are the ones a plan may drop and the runtime can recompute:
 * produced by a call whose every output is addressable by name, which is not
 * in place, and which does not read a constant the step frees (the runtime
 * freezes the outputs of such a call when the constant goes, and through
 * values no handle holds, the calls computed from them: those are frozen too).
 * A call is recomputed at stage `t` only where its unmanaged inputs are still
 * held then.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import { analyzeTrace, type TraceAnalysis } from "./_trace_analysis.ts";

/** One managed value. */
export interface CkValue {
  /** Index in {@link CheckmateProblem.values}. */
  readonly k: number;
  readonly name: string;
  readonly bytes: number;
  /** Producing call. */
  readonly producer: number;
  /** Stages at which the program holds it: `producer < t < end` (`end` = its release, or `n + 1`). */
  readonly end: number;
  /** True when held at the end of the step (an output: on the device at stage `n`). */
  readonly output: boolean;
  /** Calls reading it, ascending. */
  readonly uses: readonly number[];
  /**
   * First stage at which the runtime no longer lets it be dropped (a constant
   * its producer read was freed): held from then on while the program holds it.
   */
  readonly frozenFrom: number;
  /** Last stage at which retaining it can matter (`-1`: never). */
  lastUseful: number;
}

/** One call of the step. */
export interface CkCall {
  readonly costNs: number;
  /** Bytes a recomputation reserves (all its outputs). */
  readonly outBytes: number;
  /** May be recomputed (its outputs are all managed). */
  readonly plannable: boolean;
  /** Managed values it reads. */
  readonly inputs: readonly number[];
  /** Managed values it produces. */
  readonly outputs: readonly number[];
  /** Stages `[from, to)` at which its unmanaged inputs are all held (recomputation possible). */
  readonly window: readonly [number, number];
}

/** The problem at one budget. */
export interface CheckmateProblem {
  /** Model calls (stages `0..n-1`; stage `n` is the end of the step). */
  readonly n: number;
  readonly calls: readonly CkCall[];
  readonly values: readonly CkValue[];
  /** Budget-free memory of each stage (`n + 1` entries). */
  readonly base: readonly number[];
  /** Compute of the step, ns. */
  readonly computeNs: number;
  /** `rCand[t]`: calls that may be recomputed at stage `t`, ascending. */
  readonly rCand: readonly (readonly number[])[];
  /**
   * Whether `S[t][v]` is a decision. Where it is not, a value the program
   * holds at `t` is dropped unless {@link forced}.
   */
  sVar(t: number, v: number): boolean;
  /** Whether `v` must be on the device at the start of stage `t` (frozen and held). */
  forced(t: number, v: number): boolean;
  /** Whether `v` is on the device at the start of stage `t` under `keep`. */
  held(keep: Retention, t: number, v: number): boolean;
}

/** Retained values per stage: `S[t]` as sets of value indices. */
export type Retention = readonly ReadonlySet<number>[];

/**
 * Builds the problem for `trace`; `base` is the budget-free memory after each
 * call and at the end (`calls + 1` entries).
 */
export function buildProblem(trace: Trace, base: readonly number[]): CheckmateProblem {
  const a = analyzeTrace(trace);
  return problemOf(a, base);
}

function problemOf(a: TraceAnalysis, base: readonly number[]): CheckmateProblem {
  const n = a.calls.length;
  if (base.length !== n + 1) {
    throw new RangeError(
      `checkmate: ${base.length} budget-free memory points for ${n} calls (need ${n + 1})`,
    );
  }
  // Calls a constant's release freezes, with the stage from which (its release).
  const frozen = new Array<number>(n).fill(Infinity);
  const readers: number[][] = a.values.map(() => []);
  a.calls.forEach((c, i) => {
    for (const r of c.reads) readers[r]!.push(i);
  });
  for (const c of a.values) {
    if (c.producer >= 0 || !Number.isFinite(c.freeAt)) continue;
    const stack = [...readers[c.id]!];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (frozen[i]! <= c.freeAt) continue;
      frozen[i] = Math.min(frozen[i]!, c.freeAt);
      // through outputs no handle holds when the constant goes
      for (const o of a.calls[i]!.produces) {
        if (a.values[o]!.freeAt <= c.freeAt) stack.push(...readers[o]!);
      }
    }
  }
  const plannable = a.calls.map((c) =>
    c.produces.length > 0 && c.produces.every((v) => a.values[v]!.addressable)
  );
  const index = new Map<number, number>();
  const values: CkValue[] = [];
  for (const v of a.values) {
    if (v.producer < 0 || !plannable[v.producer]!) continue;
    index.set(v.id, values.length);
    const output = !Number.isFinite(v.freeAt);
    values.push({
      k: values.length,
      name: v.name,
      bytes: v.bytes,
      producer: v.producer,
      end: output ? n + 1 : v.freeAt,
      output,
      uses: v.uses,
      frozenFrom: frozen[v.producer]!,
      lastUseful: -1,
    });
  }
  const calls: CkCall[] = a.calls.map((c, i) => {
    let from = 0, to = Math.min(n + 1, frozen[i]!);
    const inputs: number[] = [];
    for (const r of c.reads) {
      const k = index.get(r);
      if (k !== undefined) inputs.push(k);
      else {
        const v = a.values[r]!;
        from = Math.max(from, v.allocAt);
        to = Math.min(to, Number.isFinite(v.freeAt) ? v.freeAt : n + 1);
      }
    }
    let outBytes = 0;
    for (const v of c.produces) outBytes += a.values[v]!.bytes;
    return {
      costNs: c.timeNs,
      outBytes,
      plannable: plannable[i]!,
      inputs,
      outputs: c.produces.map((v) => index.get(v)).filter((k) => k !== undefined),
      window: [from, to] as const,
    };
  });
  // Recompute candidates per stage: a call whose outputs are needed at or
  // after the stage, or read by a later candidate of the stage.
  // A value still held when a constant its producer read goes is frozen from
  // then on; dropped before, it would keep that constant on the device (the
  // runtime keeps what an evicted value needs), memory this model does not
  // count. So it stays useful (retained or recomputed) until it freezes.
  const lastUse = values.map((v) => {
    const last = v.output ? n : v.uses.length > 0 ? v.uses.at(-1)! : -1;
    return v.frozenFrom < v.end ? Math.max(last, v.frozenFrom - 1) : last;
  });
  const rCand: number[][] = [];
  const rLast = new Array<number>(n).fill(-1);
  for (let t = 0; t <= n; t++) {
    const wanted = new Uint8Array(values.length);
    const list: number[] = [];
    for (let i = t - 1; i >= 0; i--) {
      const c = calls[i]!;
      if (!c.plannable || t < c.window[0] || t >= c.window[1]) continue;
      if (!c.outputs.some((v) => lastUse[v]! >= t || wanted[v] === 1)) continue;
      list.push(i);
      rLast[i] = t;
      for (const v of c.inputs) wanted[v] = 1;
    }
    rCand.push(list.reverse());
  }
  for (const v of values) {
    let last = lastUse[v.k]!;
    // a call that reads it may be recomputed later than its last use
    for (const u of v.uses) last = Math.max(last, rLast[u]!);
    v.lastUseful = Math.min(last, v.end - 1);
  }
  function sVar(t: number, v: number): boolean {
    const x = values[v]!;
    return x.producer < t && t < x.end && t <= x.lastUseful && t < x.frozenFrom;
  }
  function forced(t: number, v: number): boolean {
    const x = values[v]!;
    return x.producer < t && t < x.end && t >= x.frozenFrom;
  }
  return {
    n,
    calls,
    values,
    base,
    computeNs: a.computeNs,
    rCand,
    sVar,
    forced,
    held: (keep, t, v) => forced(t, v) || (sVar(t, v) && (keep[t]?.has(v) ?? false)),
  };
}

/** What a retention choice costs and needs (see {@link evaluate}). */
export interface Evaluation {
  /** `R[t]`: calls recomputed at each stage, ascending (the least set the retention allows). */
  readonly recompute: readonly (readonly number[])[];
  /** Recomputation, ns (Infinity when some value cannot be brought back). */
  readonly recomputeNs: number;
  /** Memory of each stage. */
  readonly memory: readonly number[];
  /** Largest memory over the stages. */
  readonly peak: number;
}

/**
 * The least recomputation a retention choice needs (Checkmate's second phase:
 * `R` from `S` by the dependency closure) and the memory of each stage.
 * `keep[t]` lists the values retained into stage `t` (only decisions count;
 * others are ignored).
 */
export function evaluate(p: CheckmateProblem, keep: Retention): Evaluation {
  const { n, calls, values } = p;
  const recompute: number[][] = [];
  const memory: number[] = [];
  let recomputeNs = 0, peak = 0;
  const held = (t: number, v: number) => p.held(keep, t, v);
  for (let t = 0; t <= n; t++) {
    const need = new Set<number>();
    if (t < n) { for (const v of calls[t]!.inputs) need.add(v); }
    if (t < n) {
      // retained into t + 1 but not held at t and not produced by call t
      for (const v of values) {
        if (held(t + 1, v.k) && !held(t, v.k) && v.producer !== t) need.add(v.k);
      }
    } else {
      for (const v of values) if (v.output && !held(n, v.k)) need.add(v.k);
    }
    const r = new Set<number>();
    const stack = [...need];
    while (stack.length > 0) {
      const v = stack.pop()!;
      if (held(t, v)) continue;
      const i = values[v]!.producer;
      if (r.has(i)) continue;
      const c = calls[i]!;
      if (!c.plannable || t < c.window[0] || t >= c.window[1]) {
        recomputeNs = Infinity;
        continue;
      }
      r.add(i);
      for (const u of c.inputs) stack.push(u);
    }
    const list = [...r].sort((x, y) => x - y);
    recompute.push(list);
    let mem = p.base[t]!;
    for (const v of values) {
      if (v.producer < t && t < v.end && !held(t, v.k)) mem -= v.bytes;
    }
    for (const i of list) {
      mem += calls[i]!.outBytes;
      recomputeNs += calls[i]!.costNs;
    }
    memory.push(mem);
    peak = Math.max(peak, mem);
  }
  return { recompute, recomputeNs, memory, peak };
}
