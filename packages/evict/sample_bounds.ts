/**
 * The layout of an evictable pool's slots and the sampled search's draws and
 * bounds over them: the loop a `dtr-eq` search spends most of its time in
 * (95 members drawn from a pool of 9000, each bounded from its slot). This is
 * the reference; a backend may offer a native one (`Backend.sampleBounds` of
 * `@libra/tensor`, from `libra_sample_bounds` of the native library), which
 * the runtime hands policies in `EvictionContext.sampleBounds`: its results are
 * bitwise these.
 *
 * @module
 */

import type { SampleBounds } from "@libra/util/sample-bounds";

export type { SampleBounds };

/** Numbers per position in `EvictablePool.slots`. */
export const SLOT_STRIDE = 4;
/** Offset of a member's `lastAccess` in its record of `EvictablePool.slots`. */
export const SLOT_LAST_ACCESS = 0;
/** Offset of a member's `compute` in its record of `EvictablePool.slots`. */
export const SLOT_COMPUTE = 1;
/** Offset of a member's `bytes` in its record of `EvictablePool.slots`. */
export const SLOT_BYTES = 2;
/**
 * Offset of the policy's floor in a member's record of
 * `EvictablePool.slots`: what a {@link ScorePolicy} with a
 * {@link ScorePolicy.floorEpoch} keeps of the part of a member's score that
 * only grows within that epoch (`dtr-eq`: the neighbouring class cost), 0
 * when it knows none. The pool sets it to 0 when a member enters and moves it
 * with the member; only the policy writes it otherwise.
 */
export const SLOT_FLOOR = 3;

/**
 * Draws `k` positions in `[0, n)` with mulberry32 from `rng[0]` (advanced in
 * place: the same numbers, in the same order, as `mulberry32On(rng)` of
 * `@libra/util/rng` would give, each `Math.floor(u * n)`), keeps those of at
 * least `minBytes` bytes in draw order in `sampled[0..m)`, and their local
 * bounds in `bounds[0..m)`: `(compute + floor) / (bytes * (clock -
 * lastAccess))` from each one's record in `slots` (see {@link SLOT_STRIDE}),
 * `Infinity` where that product is not positive, `-Infinity` for NaN (such a
 * candidate is always scored). With `floors` non-zero, the floor is the kept
 * one less `slack`, never below zero: `max(0, kept - slack - (kept + slack) *
 * 2^-50)`, computed without a branch. Sets `out[0]` to the index (in `0..m`)
 * of the first least bound and `out[1]` to the least bound of the others
 * (`Infinity` when none). Returns `m`.
 *
 * @example
 * ```ts
 * import { sampleBounds, SLOT_STRIDE } from "@libra/evict";
 * const slots = new Float64Array(2 * SLOT_STRIDE);
 * slots.set([0, 4, 8, 0, 1, 6, 2, 0]); // last access, compute, bytes, floor
 * const sampled = new Int32Array(4), bounds = new Float64Array(4), out = new Float64Array(2);
 * const m = sampleBounds(slots, 2, 4, new Int32Array([1]), sampled, bounds, 0, 0, 0, 3, out);
 * if (m !== 4 || bounds[out[0]!]! > bounds[0]!) throw new Error("four bounded draws");
 * ```
 */
export const sampleBounds: SampleBounds = (
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
): number => {
  // mulberry32's steps written out (a call a draw cost as much as the rest). Two passes, one
  // drawing and one bounding, where one did both: 1.36 against 1.70 us a search of 100 draws
  // over a 10k-member pool (interleaved runs, the best of five each).
  let st = rng[0]!;
  for (let j = 0; j < k; j++) {
    st = (st + 0x6d2b79f5) | 0;
    let r = Math.imul(st ^ (st >>> 15), st | 1);
    r ^= r + Math.imul(r ^ (r >>> 7), r | 61);
    // Math.floor of a number in [0, n), exactly (`| 0` truncates, the same below 2^31).
    sampled[j] = ((((r ^ (r >>> 14)) >>> 0) / 4294967296) * n) | 0;
  }
  rng[0] = st;
  let m = 0;
  for (let j = 0; j < k; j++) {
    const i = sampled[j]!;
    const o = i * SLOT_STRIDE;
    const bytes = slots[o + SLOT_BYTES]!;
    if (bytes < minBytes) continue;
    sampled[m] = i;
    // The local bound (`localBound` of a score policy), as `localScore` in policies.ts
    // computes it, with the floor read without a branch (`sampledFloor(kept, slack)`).
    let c = slots[o + SLOT_COMPUTE]!;
    if (floors !== 0) {
      const kept = slots[o + SLOT_FLOOR]!;
      const f = kept - slack - (kept + slack) * 2 ** -50;
      c += (f + Math.abs(f)) * 0.5;
    }
    const den = bytes * (clock - slots[o + SLOT_LAST_ACCESS]!);
    let b = den > 0 ? c / den : Infinity;
    if (b !== b) b = -Infinity;
    bounds[m++] = b;
  }
  out[0] = leastBounds(bounds, m, out);
  return m;
};

/**
 * The index of the first least of `bounds[0..m)` (returned; 0 when `m` is 0)
 * and, in `out[1]`, the least of the others (`Infinity` when none).
 */
export function leastBounds(bounds: Float64Array, m: number, out: Float64Array): number {
  let first = 0, firstBound = m > 0 ? bounds[0]! : Infinity, others = Infinity;
  for (let t = 1; t < m; t++) {
    const b = bounds[t]!;
    if (b < firstBound) {
      first = t;
      others = firstBound;
      firstBound = b;
    } else if (b < others) others = b;
  }
  out[1] = others;
  return first;
}
