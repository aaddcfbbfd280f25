/**
 * Compiles a trace for the fast replayer ({@link fastReplay} in `_sim_core.ts`)
 * as the published DTR simulator's parser builds its graph: ops with costs,
 * output sizes and views, and a schedule of computes, references, releases
 * and pins over tensor ids.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";

/** Schedule entry kinds. */
export const COMPUTE = 0, GET = 1, RELEASE = 2, PIN = 3, READ = 4;

/** A trace compiled for replays: ops and a schedule over tensor ids. */
export interface CompiledTrace {
  /** Per op: cost (ns), output sizes (0 for views), alias indices, argument tensor ids, first output id. */
  readonly ops: {
    cost: number;
    sizes: number[];
    aliases: number[];
    args: number[];
    out0: number;
    model: boolean;
  }[];
  /** Schedule: pairs (kind, operand). */
  readonly schedule: Int32Array;
  /** Number of tensors. */
  readonly tensors: number;
  /** Sum of the model calls' costs (the budget-free compute). */
  readonly computeNs: number;
}

/**
 * Compiles `trace` (as the published simulator's parser builds its graph).
 * `costs` gives each CALL/MUTATE's cost in order (default: its TIME).
 */
export function compileTrace(trace: Trace, costs?: ArrayLike<number>): CompiledTrace {
  const ops: CompiledTrace["ops"] = [];
  const sched: number[] = [];
  const names = new Map<string, number>();
  const refs: number[] = [];
  const storageSize: number[] = [];
  let tensors = 0, k = 0, computeNs = 0;
  const newOp = (
    cost: number,
    sizes: number[],
    aliases: number[],
    args: number[],
    model: boolean,
  ): number => {
    const out0 = tensors;
    for (let i = 0; i < sizes.length; i++) {
      const a = aliases[i]!;
      storageSize.push(a >= 0 ? storageSize[args[a]!]! : sizes[i]!);
      refs.push(1);
    }
    tensors += sizes.length;
    ops.push({ cost, sizes, aliases, args, out0, model });
    if (model) computeNs += cost;
    sched.push(COMPUTE, ops.length - 1);
    return out0;
  };
  for (const e of trace.events) {
    switch (e.kind) {
      case "constant": {
        const t = newOp(0, [e.bytes], [-1], [], false);
        sched.push(PIN, t);
        names.set(e.name, t);
        break;
      }
      case "call": {
        const args = e.args.map((a) => names.get(a)!);
        const cost = costs ? costs[k]! : e.timeNs;
        k++;
        const t = newOp(
          cost,
          e.results.map((r) => (r.alias >= 0 ? 0 : r.bytes)),
          e.results.map((r) => r.alias),
          args,
          true,
        );
        e.results.forEach((r, i) => names.set(r.name, t + i));
        break;
      }
      case "mutate": {
        const args = e.args.map((a) => names.get(a)!);
        const cost = costs ? costs[k]! : e.timeNs;
        k++;
        const t = newOp(
          cost,
          e.mutate.map((m) => storageSize[args[m]!]!),
          e.mutate.map(() => -1),
          args,
          true,
        );
        e.mutate.forEach((m, i) => {
          const old = names.get(e.args[m]!)!;
          names.set(e.args[m]!, t + i);
          refs[old]!--;
          sched.push(RELEASE, old);
        });
        break;
      }
      case "copy": {
        const t = names.get(e.src)!;
        names.set(e.dst, t);
        refs[t]!++;
        sched.push(GET, t);
        break;
      }
      case "copyFrom": {
        const old = names.get(e.dst)!;
        const t = names.get(e.src)!;
        names.set(e.dst, t);
        refs[old]!--;
        refs[t]!++;
        sched.push(RELEASE, old, GET, t);
        break;
      }
      case "release": {
        const t = names.get(e.name);
        if (t !== undefined) {
          refs[t]!--;
          sched.push(RELEASE, t);
        }
        break;
      }
      case "read": {
        const t = names.get(e.name);
        if (t !== undefined) sched.push(READ, t);
        break;
      }
      case "annotate":
        break;
    }
  }
  for (const t of names.values()) if (refs[t]! > 0) sched.push(PIN, t);
  return { ops, schedule: Int32Array.from(sched), tensors, computeNs };
}
