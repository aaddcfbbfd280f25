/**
 * Learning-rate schedules.
 *
 * @module
 */

/** Options of {@link cosineWithWarmup}. */
export interface CosineScheduleOptions {
  /** Peak learning rate, reached at the end of warm-up. */
  baseLr: number;
  /** Steps of linear warm-up (0 = none). */
  warmupSteps: number;
  /** Total steps; after it the rate stays at `minLr`. */
  totalSteps: number;
  /** Final learning rate (default 0). */
  minLr?: number;
}

/** A schedule maps a 0-based step index to the learning rate of that step. */
export type LrSchedule = (step: number) => number;

/**
 * Linear warm-up to `baseLr` over `warmupSteps` (step `s` < warm-up gets
 * `baseLr * (s + 1) / warmupSteps`), then half a cosine from `baseLr` down to
 * `minLr` at `totalSteps`.
 *
 * @example
 * ```ts
 * import { cosineWithWarmup } from "@libra/nn/schedule";
 * const lr = cosineWithWarmup({ baseLr: 1, warmupSteps: 2, totalSteps: 6 });
 * if (lr(0) !== 0.5 || lr(2) !== 1 || lr(4) !== 0.5) throw new Error("schedule");
 * ```
 */
export function cosineWithWarmup(options: CosineScheduleOptions): LrSchedule {
  const { baseLr, warmupSteps, totalSteps } = options;
  const minLr = options.minLr ?? 0;
  if (!(warmupSteps >= 0 && totalSteps > warmupSteps && Number.isInteger(warmupSteps))) {
    throw new RangeError(
      `cosineWithWarmup: need integer 0 <= warmupSteps < totalSteps, got warmupSteps=${warmupSteps}, totalSteps=${totalSteps}`,
    );
  }
  return (step) => {
    if (step < warmupSteps) return (baseLr * (step + 1)) / warmupSteps;
    if (step >= totalSteps) return minLr;
    const progress = (step - warmupSteps) / (totalSteps - warmupSteps);
    return minLr + 0.5 * (baseLr - minLr) * (1 + Math.cos(Math.PI * progress));
  };
}
