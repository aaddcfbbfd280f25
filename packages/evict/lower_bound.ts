/**
 * A lower bound on the recomputation any rematerialization schedule of a
 * recorded step needs under a budget (device memory only, calls in the
 * recorded order).
 *
 * At every call `k`, the memory in use without a budget (`memAt[k]`) minus the
 * budget must be out of the device. Only values produced by calls, held at
 * `k` and neither read nor written by call `k` can be out; each one that is
 * needed again (read later, or still held at the end of the step) must be
 * recomputed at least once after `k`, which costs at least its producer once
 * (one recomputation of a call restores all its outputs). The cheapest cover
 * of the excess, with fractions of a call allowed (a fractional knapsack), is
 * a lower bound at `k`; the bound is the largest over all calls.
 *
 * The bound is weak (it sees one call at a time and no chains) but valid:
 * no schedule does better. It says nothing where host memory is available.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import { analyzeTrace } from "./_trace_analysis.ts";

/** What {@link recomputeLowerBound} finds. */
export interface RecomputeBound {
  /** Lower bound of the overhead (compute + recomputation) / compute. */
  readonly overhead: number;
  /** Lower bound of the recomputation, ns. */
  readonly recomputeNs: number;
  /** The call where the bound is reached (-1 when nothing must go). */
  readonly call: number;
}

/**
 * The bound (see the module doc). `memAt[k]` is the memory in use at call `k`
 * in a budget-free replay of `trace` (the runtime's timeline).
 */
export function recomputeLowerBound(
  trace: Trace,
  budgetBytes: number,
  memAt: readonly number[],
): RecomputeBound {
  const a = analyzeTrace(trace);
  const n = a.calls.length;
  if (memAt.length !== n) {
    throw new RangeError(`recomputeLowerBound: ${memAt.length} memory points for ${n} calls`);
  }
  let best = 0, at = -1;
  for (let k = 0; k < n; k++) {
    const need = memAt[k]! - budgetBytes;
    if (need <= 0) continue;
    const call = a.calls[k]!;
    // per producing call: bytes that may go at k, and whether any is needed again
    const free = new Map<number, { bytes: number; cost: number }>();
    let zero = 0;
    for (const v of a.values) {
      if (v.producer < 0 || v.allocAt > k || v.freeAt <= k || v.producer === k) continue;
      if (call.reads.includes(v.id) || call.produces.includes(v.id)) continue;
      const neededAgain = !Number.isFinite(v.freeAt) || v.uses.some((u) => u > k);
      if (!neededAgain) {
        zero += v.bytes;
        continue;
      }
      const e = free.get(v.producer) ?? { bytes: 0, cost: a.calls[v.producer]!.timeNs };
      e.bytes += v.bytes;
      free.set(v.producer, e);
    }
    let rem = need - zero, cost = 0;
    if (rem > 0) {
      const items = [...free.values()].sort((x, y) => x.cost / x.bytes - y.cost / y.bytes);
      for (const it of items) {
        const take = Math.min(rem, it.bytes);
        cost += (it.cost * take) / it.bytes;
        rem -= take;
        if (rem <= 0) break;
      }
      // What the candidates cannot cover is left out (it would only add cost).
    }
    if (cost > best) {
      best = cost;
      at = k;
    }
  }
  return {
    overhead: a.computeNs > 0 ? (a.computeNs + best) / a.computeNs : 1,
    recomputeNs: best,
    call: at,
  };
}
