/**
 * The rematerialization problem of Checkmate (Jain et al., MLSys 2020) on the
 * fixed schedule of a recorded step, in the form this runtime's plans run.
 *
 * Stage `t` (one per model call, plus stage `n` for the end of the step)
 * first recomputes some earlier calls (`R[t][i]`, in call order, each with
 * its inputs on the device) and then runs call `t`. `S[t][v]` says whether
 * the value `v` is on the device when stage `t` starts (retained, the
 * checkpoint). In the stage form a plan restores before call `t` and evicts
 * after it, so what a stage recomputes stays until its call has run:
 * Checkmate's FREE decisions are fixed at the end of the stage, and the
 * memory of stage `t` is
 *
 *     base[t] - sum(bytes of managed values held at t) + sum(S[t][v] * bytes(v))
 *             + sum(R[t][i] * outBytes(i))
 *
 * where `base[t]` is the memory after call `t` in a budget-free replay (the
 * runtime's accounting: constants, values no plan may touch, call `t`'s
 * outputs). Nothing is freed inside a stage, so the running sum (Checkmate's
 * `U`) is largest at the stage's call and one row per stage bounds it; a
 * recomputed call counts all its outputs (the runtime reserves them all).
 * With in-stage frees (Checkmate's own form), a plan also evicts before call
 * `t`, between its restores: a value goes right after its last use among the
 * stage's recomputations when call `t` does not read it and it is not
 * retained into `t + 1`, and the memory of a stage is the largest running
 * sum over its positions ({@link evaluate} with `frees`; the MILP in
 * `_checkmate_milp.ts`).
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
  /**
   * With in-stage frees: `frees[t][0]` are the values dropped when stage `t`
   * starts (on the device, unused in the stage, not retained into `t + 1`),
   * `frees[t][k + 1]` those dropped right after the `k`-th recomputation of
   * the stage (its last use there). Empty lists without in-stage frees.
   */
  readonly frees: readonly (readonly (readonly number[])[])[];
  /** Recomputation, ns (Infinity when some value cannot be brought back). */
  readonly recomputeNs: number;
  /** Memory of each stage (its largest point). */
  readonly memory: readonly number[];
  /** Largest memory over the stages. */
  readonly peak: number;
}

/**
 * The least recomputation a retention choice needs (Checkmate's second phase:
 * `R` from `S` by the dependency closure) and the memory of each stage.
 * `keep[t]` lists the values retained into stage `t` (only decisions count;
 * others are ignored). With `frees`, a value on the device in a stage that
 * the stage's call does not read and that is not retained into the next
 * stage (nor an output, at the end) is dropped right after its last use
 * among the stage's recomputations (when the stage starts if none reads it,
 * right after its own recomputation if only that), and the memory of the
 * stage is its largest point: after each recomputation (before the call
 * reserves its outputs; a recomputed duplicate of a value on the device
 * counts until the recomputation ends) and at the call. Without, nothing is
 * freed inside a stage.
 */
export function evaluate(p: CheckmateProblem, keep: Retention, frees = false): Evaluation {
  const { n, calls, values } = p;
  const recompute: number[][] = [];
  const freeLists: number[][][] = [];
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
    for (const i of list) recomputeNs += calls[i]!.costNs;
    if (!frees) {
      for (const i of list) mem += calls[i]!.outBytes;
      memory.push(mem);
      freeLists.push([]);
      peak = Math.max(peak, mem);
      continue;
    }
    const stage = stageFrees(p, t, list, held);
    freeLists.push(stage);
    // memory before call t reserves its outputs, then along the positions
    let cur = mem - (t < n ? calls[t]!.outBytes : 0), top = -Infinity;
    for (const v of stage[0]!) cur -= values[v]!.bytes;
    list.forEach((i, k) => {
      cur += calls[i]!.outBytes;
      top = Math.max(top, cur);
      for (const v of calls[i]!.outputs) if (held(t, v)) cur -= values[v]!.bytes; // duplicate
      for (const v of stage[k + 1]!) cur -= values[v]!.bytes;
    });
    cur += t < n ? calls[t]!.outBytes : 0;
    top = Math.max(top, cur);
    memory.push(top);
    peak = Math.max(peak, top);
  }
  return { recompute, frees: freeLists, recomputeNs, memory, peak };
}

/** The in-stage frees of stage `t` recomputing `list` (see {@link Evaluation.frees}). */
function stageFrees(
  p: CheckmateProblem,
  t: number,
  list: readonly number[],
  held: (t: number, v: number) => boolean,
): number[][] {
  const out: number[][] = [[], ...list.map(() => [])];
  const reads = new Set(t < p.n ? p.calls[t]!.inputs : []);
  const last = new Map<number, number>(); // value -> position after which it goes (0: at the start)
  for (const v of p.values) if (held(t, v.k)) last.set(v.k, 0);
  list.forEach((i, k) => {
    for (const v of p.calls[i]!.inputs) last.set(v, k + 1);
    for (const v of p.calls[i]!.outputs) if (!held(t, v)) last.set(v, k + 1);
  });
  for (const [v, k] of last) {
    const x = p.values[v]!;
    // (a value the runtime may not drop stays)
    if (reads.has(v) || held(t + 1, v) || (t === p.n && x.output) || p.forced(t, v)) continue;
    out[k]!.push(v);
  }
  return out;
}
