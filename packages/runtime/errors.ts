/**
 * Errors of the runtime.
 *
 * @module
 */

/** Facts reported by {@link OutOfBudgetError}. */
export interface OutOfBudgetInfo {
  /** Bytes the call needed on top of what is in use. */
  neededBytes: number;
  /** Bytes in use when it failed. */
  usedBytes: number;
  /** Bytes that eviction could still free (nothing evictable was enough). */
  evictableBytes: number;
  /** The budget. */
  budgetBytes: number;
  /**
   * A budget above `budgetBytes` known to work: every step so far completed
   * under it (a budget-free peak, or the largest budget a step completed under).
   */
  knownFeasibleBytes?: number;
}

/**
 * Thrown when no eviction can make room for a call under the budget. The
 * runtime stays usable: the failed call did not happen, nothing stays locked.
 */
export class OutOfBudgetError extends Error {
  /** Bytes needed on top of what is in use. */
  readonly neededBytes: number;
  /** Bytes in use. */
  readonly usedBytes: number;
  /** Bytes still evictable. */
  readonly evictableBytes: number;
  /** The budget. */
  readonly budgetBytes: number;
  /** A larger budget every step so far completed under, when known. */
  readonly knownFeasibleBytes: number | undefined;
  constructor(info: OutOfBudgetInfo) {
    const known = info.knownFeasibleBytes !== undefined
      ? `; a budget of ${info.knownFeasibleBytes} bytes is known to work (every step so far completed under it)`
      : "; no larger budget is known to work yet (run a step without a budget to measure its peak)";
    super(
      `out of budget: ${info.neededBytes} bytes needed with ${info.usedBytes} of ${info.budgetBytes} in use and only ${info.evictableBytes} evictable${known}. Raise the budget or use a policy that can swap.`,
    );
    this.name = "OutOfBudgetError";
    this.neededBytes = info.neededBytes;
    this.usedBytes = info.usedBytes;
    this.evictableBytes = info.evictableBytes;
    this.budgetBytes = info.budgetBytes;
    this.knownFeasibleBytes = info.knownFeasibleBytes;
  }
}
