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
