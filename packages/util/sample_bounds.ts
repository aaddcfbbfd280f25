/**
 * The signature of the sampled eviction search's draws and bounds, shared by
 * the packages that implement it (`sampleBounds` of `@libra/evict`, the
 * reference) and those that carry a native one (`Backend.sampleBounds` of
 * `@libra/tensor`).
 *
 * @module
 */

/**
 * Draws `k` positions of a pool of `n` members from `rng[0]` (advanced in
 * place), keeps those of at least `minBytes` bytes in `sampled`, their local
 * bounds from `slots` in `bounds`, and writes the index of the first least
 * bound to `out[0]` and the least bound of the others to `out[1]`; returns how
 * many were kept. See `sampleBounds` of `@libra/evict` for the exact
 * arithmetic every implementation must give bit for bit.
 */
export type SampleBounds = (
  slots: Float64Array,
  n: number,
  k: number,
  rng: Int32Array,
  sampled: Int32Array,
  bounds: Float64Array,
  minBytes: number,
  slack: number,
  floors: number,
  clock: number,
  out: Float64Array,
) => number;
