/**
 * The MILP of the checkmate problem (`_checkmate_model.ts`) at one budget, in
 * two forms:
 *
 * - stage form (`frees: false`): nothing is freed inside a stage, so one
 *   memory row per stage (at its call, where the running sum is largest).
 * - in-stage frees (`frees: true`, Checkmate's `U` and `FREE`, Jain et al.,
 *   MLSys 2020, section 4): a value on the device in stage `t` that call `t`
 *   does not read and that is not retained into `t + 1` (nor an output of the
 *   step, at stage `n`) may be freed right after a position of the stage (the
 *   recomputation of its producer or of a call reading it); a value the
 *   runtime may not drop (frozen) stays. `FREE[t][v][j]` (continuous, in
 *   [0, 1]) says `v` is freed after position `j`: with a later recomputed
 *   reader `j'`, the frees of `v` before `j'` plus `R[t][j']` are at most 1
 *   (Checkmate's `FREE <= 1 - R[t][j']`, aggregated), and over the positions
 *   they are at most `1 - S[t + 1][v]` and at most the presence of `v`
 *   (`S[t][v] + R[t][producer]`). A free after a position whose call does not
 *   run is a later free than needed, still a plan, so Checkmate's
 *   `FREE <= R[t][j]` is not needed either; `FREE` only lowers memory, so
 *   neither is its lower bound (which forces the free): the optimum frees all
 *   it may. `U[t][k]` (continuous) is the memory after position `k` of stage
 *   `t`, before the frees that follow it, less the stage's constant part; a
 *   chain of equalities carries it along the positions, and a memory row
 *   bounds it at each position and at the call. A call with several outputs,
 *   recomputed while one of them is retained, makes a duplicate of that one,
 *   which the runtime discards right after the call (`D[t][v]`, at most
 *   `S[t][v]` and `R[t][producer]`, freed after that position).
 *
 * At recomputation positions the constant part is the stage's memory before
 * call `t` reserves its outputs (budget-free memory after call `t` less all
 * of call `t`'s outputs).
 *
 * @module
 */

import { type Expr, LpModel } from "./_highs.ts";
import type { CheckmateProblem } from "./_checkmate_model.ts";

// variable names (the planner reads `S` back as `s{t}_{v}`)
const rName = (t: number, i: number): string => `r${t}_${i}`;
const sName = (t: number, v: number): string => `s${t}_${v}`;
const fName = (t: number, v: number, j: number) => `f${t}_${v}_${j}`;
const uName = (t: number, k: number) => `u${t}_${k}`;
const dName = (t: number, v: number) => `d${t}_${v}`;

/** Cost unit of the objective, ns (the objective is recomputation / US). */
export const US = 1e3;

/** The MILP of `p` at `budget` (see the module doc); `budget` may be below the true one. */
export function checkmateModel(p: CheckmateProblem, budget: number, frees = false): LpModel {
  const m = new LpModel();
  const MB = Math.max(1, ...p.base) / 1e4;
  const rN = rName, sN = sName;
  const rSet = p.rCand.map((l) => new Set(l));
  for (let t = 0; t <= p.n; t++) {
    for (const i of p.rCand[t]!) {
      m.binary(rN(t, i));
      if (p.calls[i]!.costNs > 0) m.objective.push([p.calls[i]!.costNs / US, rN(t, i)]);
    }
    for (const v of p.values) if (p.sVar(t, v.k)) m.binary(sN(t, v.k));
  }
  // a value read in stage t is retained into it or recomputed (earlier) in it
  // (null: held for sure)
  const have = (t: number, v: number, before: number): Expr | null => {
    if (p.forced(t, v)) return null;
    const e: Expr = [];
    if (p.sVar(t, v)) e.push([1, sN(t, v)]);
    const q = p.values[v]!.producer;
    if (q < before && rSet[t]!.has(q)) e.push([1, rN(t, q)]);
    return e;
  };
  for (let t = 0; t <= p.n; t++) {
    for (const i of p.rCand[t]!) {
      for (const v of p.calls[i]!.inputs) {
        const e = have(t, v, i);
        if (e !== null) m.row([...e, [-1, rN(t, i)]], ">=", 0);
      }
    }
    if (t < p.n) {
      for (const v of p.calls[t]!.inputs) {
        const e = have(t, v, t);
        if (e === null) continue;
        if (e.length === 0) {
          throw new Error(
            `checkmate: internal: call ${t} reads ${p.values[v]!.name}, which no decision brings`,
          );
        }
        m.row(e, ">=", 1);
      }
    }
    // retained into t + 1: held at t, recomputed at t, or produced by call t
    for (const v of p.values) {
      if (v.producer === t) continue;
      const e = have(t, v.k, t);
      if (e === null) continue;
      if (p.sVar(t + 1, v.k)) m.row([[1, sN(t + 1, v.k)], ...neg(e)], "<=", 0);
      else if (p.forced(t + 1, v.k)) m.row(e, ">=", 1);
    }
    // memory of stage t: held values and recomputed calls (less the frees)
    const held: Expr = [];
    let rhs = budget - p.base[t]!;
    for (const v of p.values) {
      if (!(v.producer < t && t < v.end) || p.forced(t, v.k)) continue;
      rhs += v.bytes;
      if (p.sVar(t, v.k) && v.bytes > 0) held.push([v.bytes / MB, sN(t, v.k)]);
    }
    if (frees && p.rCand[t]!.length > 0) {
      freeRows(p, m, t, held, rhs / MB, MB, rSet[t]!);
      continue;
    }
    const e: Expr = [...held];
    for (const i of p.rCand[t]!) {
      if (p.calls[i]!.outBytes > 0) e.push([p.calls[i]!.outBytes / MB, rN(t, i)]);
    }
    if (e.length > 0) m.row(e, "<=", rhs / MB);
    else if (rhs < 0) m.row([[1, "x__infeasible"]], "<=", -1);
  }
  for (const v of p.values) {
    const e = have(p.n, v.k, p.n);
    if (v.output && e !== null) m.row(e, ">=", 1);
  }
  return m;
}

/**
 * The memory rows of stage `t` with in-stage frees: `held` is the retained
 * part (scaled), `rhs` the budget less the constant part at the call (scaled).
 */
function freeRows(
  p: CheckmateProblem,
  m: LpModel,
  t: number,
  held: Expr,
  rhs: number,
  MB: number,
  cand: ReadonlySet<number>,
): void {
  const list = p.rCand[t]!;
  const reads = new Set(t < p.n ? p.calls[t]!.inputs : []);
  // frees after each position (scaled bytes per FREE variable)
  const after: Expr[] = list.map(() => []);
  const pos = new Map(list.map((i, k) => [i, k]));
  for (const v of p.values) {
    // a recomputed duplicate of a retained output of a call with several outputs
    // (the runtime discards it right after the call)
    let dup: string | undefined;
    if (cand.has(v.producer) && p.sVar(t, v.k) && p.calls[v.producer]!.outputs.length > 1) {
      dup = dName(t, v.k);
      m.row([[1, dup], [-1, sName(t, v.k)]], "<=", 0);
      m.row([[1, dup], [-1, rName(t, v.producer)]], "<=", 0);
      if (v.bytes > 0) after[pos.get(v.producer)!]!.push([v.bytes / MB, dup]);
    }
    if (reads.has(v.k) || (t === p.n && v.output) || p.forced(t, v.k)) continue;
    if (t < p.n && p.forced(t + 1, v.k)) continue;
    const at: number[] = []; // positions (calls) after which v may be freed
    if (cand.has(v.producer)) at.push(v.producer);
    for (const j of list) if (j > v.producer && p.calls[j]!.inputs.includes(v.k)) at.push(j);
    if (at.length === 0) continue;
    const present: Expr = [];
    if (p.sVar(t, v.k)) present.push([1, sName(t, v.k)]);
    if (cand.has(v.producer)) present.push([1, rName(t, v.producer)]);
    if (present.length === 0) continue; // never on the device in stage t
    const sum: Expr = dup !== undefined ? [[1, dup]] : [];
    const dups = sum.length;
    for (const j of at) {
      // freed before a recomputed reader: not at all
      if (j !== v.producer && sum.length > dups) {
        m.row([...sum.slice(dups), [1, rName(t, j)]], "<=", 1);
      }
      const f = fName(t, v.k, j);
      sum.push([1, f]);
      if (v.bytes > 0) after[pos.get(j)!]!.push([v.bytes / MB, f]);
    }
    const frees = sum.slice(dups);
    if (p.sVar(t + 1, v.k) && t < p.n) m.row([...frees, [1, sName(t + 1, v.k)]], "<=", 1);
    else m.row(frees, "<=", 1);
    // the duplicate and the value itself: at most what is on the device
    m.row([...sum, ...neg(present)], "<=", 0);
  }
  const outT = t < p.n ? p.calls[t]!.outBytes / MB : 0;
  for (let k = 0; k < list.length; k++) {
    const i = list[k]!, u = uName(t, k);
    const e: Expr = [[1, u]];
    if (k === 0) e.push(...neg(held));
    else e.push([-1, uName(t, k - 1)], ...after[k - 1]!);
    if (p.calls[i]!.outBytes > 0) e.push([-p.calls[i]!.outBytes / MB, rName(t, i)]);
    m.row(e, "=", 0);
    // at position k the call's outputs are not reserved yet
    m.row([[1, u]], "<=", rhs + outT);
  }
  m.row([[1, uName(t, list.length - 1)], ...neg(after[list.length - 1]!)], "<=", rhs);
}

function neg(e: Expr): Expr {
  return e.map(([c, x]) => [-c, x]);
}
