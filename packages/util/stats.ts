/**
 * Summary statistics over plain arrays of numbers.
 *
 * @module
 */

/**
 * The median: the middle value, or the mean of the two middle values for an
 * even count; NaN for an empty list. The input is not modified.
 *
 * @example
 * ```ts
 * import { median } from "@libra/util/stats";
 * if (median([4, 1, 3, 2]) !== 2.5) throw new Error("example: median");
 * ```
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Thins `[x, y]` samples to at most `max`, in order, keeping the largest `y`
 * of each of `max` equal buckets (a memory curve keeps its peaks).
 *
 * @example
 * ```ts
 * import { thinSamples } from "@libra/util/stats";
 * const t = thinSamples([[0, 1], [1, 5], [2, 2], [3, 1]], 2);
 * if (t.length !== 2 || t[0]![1] !== 5) throw new Error("example: thinSamples");
 * ```
 */
export function thinSamples(samples: [number, number][], max: number): [number, number][] {
  if (samples.length <= max) return samples;
  const step = samples.length / max;
  const out: [number, number][] = [];
  for (let i = 0; i < max; i++) {
    const from = Math.floor(i * step);
    const to = Math.min(samples.length, Math.floor((i + 1) * step));
    let best = samples[from]!;
    for (let j = from + 1; j < to; j++) if (samples[j]![1] > best[1]) best = samples[j]!;
    out.push(best);
  }
  return out;
}
