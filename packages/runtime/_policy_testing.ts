/**
 * Slow work for the tests of what the runtime times (dispatch samples, sampled
 * searches): a busy wait, and a policy whose search takes a known time.
 *
 * @module
 */

import type { EvictionPolicy } from "@libra/evict";

/**
 * Busy-waits `ms` milliseconds on `clock` (by default `performance.now`,
 * looked up at each read; a test that counts the reads passes a clock saved
 * before it replaced it).
 */
export function spin(ms: number, clock: () => number = () => performance.now()): void {
  const end = clock() + ms;
  while (clock() < end) { /* busy */ }
}

/**
 * A policy that spins `ms` milliseconds on `clock` (see {@link spin}), then
 * drops the oldest evictable storage (the pool iterates oldest first).
 */
export function slowOldest(ms: number, clock?: () => number): EvictionPolicy {
  return {
    name: "slow-oldest",
    needs: {},
    choose(ctx) {
      spin(ms, clock);
      for (const s of ctx.pool) return [{ storage: s, action: "drop" }];
      return [];
    },
  };
}
