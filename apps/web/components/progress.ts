/**
 * Plain words for a run's progress: what the phase is doing, how far it is, and an
 * estimate of the time left from the pace so far.
 *
 * @module
 */

/** What each phase of a run does, in plain words. */
export const PHASES: Record<string, string> = {
  queued: "Waiting for a worker to pick the run up",
  "warm-up": "Warming up (first allocations and kernel set-up, not measured)",
  baseline: "Measuring the training steps without a budget",
  plan: "Planning which tensors to evict or swap under the budget",
  measure: "Measuring training steps without and under the budget, interleaved",
  budget: "Training under the memory budget",
  train: "Training",
  simulate: "Replaying the trace under each policy and budget ratio",
};

/** The plain description of `phase` (the phase's own name when it is not known). */
export function phaseText(phase: string): string {
  return PHASES[phase] ?? phase;
}

/** A duration in words: `45 s`, `3 min 20 s`, `1 h 5 min`. */
export function formatEta(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min${s % 60 ? ` ${s % 60} s` : ""}`;
  return `${Math.floor(m / 60)} h${m % 60 ? ` ${m % 60} min` : ""}`;
}

/**
 * Time left, assuming the remaining units go at the pace of those done so far;
 * null until one unit is done (no pace to go by).
 */
export function etaMs(elapsedMs: number, done: number, total: number): number | null {
  if (!(done > 0) || !(total > done) || !(elapsedMs > 0)) {
    return total > 0 && done >= total ? 0 : null;
  }
  return (elapsedMs * (total - done)) / done;
}
