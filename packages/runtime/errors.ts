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
  /**
   * Of the bytes in use, those of values locked as the inputs of calls running
   * or being re-materialized (none of them may be evicted until their call runs).
   */
  lockedBytes?: number;
  /**
   * Of the bytes in use and not locked, those of values no policy may evict:
   * pinned ones, and leaves (no producer to recompute them) with no host
   * memory to swap them to.
   */
  keptBytes?: number;
}

/**
 * Why a run or a replay is infeasible: no eviction could make room
 * (`"out of memory"`), or recomputation plus stalls passed the overhead limit
 * (`"thrashing"`, see {@link ThrashingError}).
 */
export type InfeasibleReason = "out of memory" | "thrashing";

/** The end of {@link OutOfBudgetError}'s message. */
const ADVICE = " Raise the budget or use a policy that can swap.";

/**
 * Thrown when no eviction can make room for a call under the budget. The
 * runtime stays usable: the failed call did not happen, nothing stays locked.
 */
export class OutOfBudgetError extends Error {
  /** Why the budget is infeasible (`"thrashing"` for a {@link ThrashingError}). */
  readonly reason: InfeasibleReason = "out of memory";
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
  /** Of the bytes in use, those locked as inputs of calls running or being re-materialized, when known. */
  readonly lockedBytes: number | undefined;
  /** Of the bytes in use and not locked, those no policy may evict (pinned, unswappable leaves), when known. */
  readonly keptBytes: number | undefined;
  /**
   * How many evicted values were being re-materialized, one for the next,
   * when the call failed (0 when it was none of theirs: the program's own call).
   * Each keeps its inputs that are on the device locked until it runs.
   */
  rematDepth = 0;
  /** The message without its closing advice (see {@link rematerializing}). */
  readonly #facts: string;
  /** The error for `info`, with a message naming every figure. */
  constructor(info: OutOfBudgetInfo) {
    const known = info.knownFeasibleBytes !== undefined
      ? `; a budget of ${info.knownFeasibleBytes} bytes is known to work (every step so far completed under it)`
      : "; no larger budget is known to work yet (run a step without a budget to measure its peak)";
    const parts = info.lockedBytes !== undefined && info.keptBytes !== undefined
      ? ` (${info.lockedBytes} locked as inputs of calls running or being re-materialized, ${info.keptBytes} pinned or leaves that cannot be evicted)`
      : "";
    // Nothing more asked for: what is in use already exceeds the budget (a budget set below
    // what the program holds), where "0 bytes needed" read as a puzzle.
    const need = info.neededBytes > 0
      ? `${info.neededBytes} bytes needed with ${info.usedBytes} of ${info.budgetBytes} in use`
      : `${info.usedBytes} bytes in use exceed the budget of ${info.budgetBytes}`;
    // The bytes no policy may evict alone past the budget: no choice of victims can fit it.
    const kept = info.keptBytes !== undefined && info.keptBytes > info.budgetBytes
      ? `; the ${info.keptBytes} bytes that cannot be evicted alone exceed the budget`
      : "";
    const facts =
      `out of budget: ${need}${parts} and only ${info.evictableBytes} evictable${kept}${known}.`;
    super(facts + ADVICE);
    this.#facts = facts;
    this.name = "OutOfBudgetError";
    this.neededBytes = info.neededBytes;
    this.usedBytes = info.usedBytes;
    this.evictableBytes = info.evictableBytes;
    this.budgetBytes = info.budgetBytes;
    this.knownFeasibleBytes = info.knownFeasibleBytes;
    this.lockedBytes = info.lockedBytes;
    this.keptBytes = info.keptBytes;
  }

  /**
   * Records that the failed call was the re-materialization of the last of
   * `depth` evicted values, each needed by the one before (see
   * {@link rematDepth}), and says so in the message. Once: the innermost
   * re-materialization knows the chain.
   */
  rematerializing(depth: number): void {
    if (this.rematDepth > 0 || depth <= 0 || this.reason !== "out of memory") return;
    this.rematDepth = depth;
    const why = depth === 1
      ? " It failed re-materializing an evicted value a call needed."
      : ` It failed re-materializing a chain of ${depth} evicted values, each needed to recompute the one before, whose inputs on the device stay locked until they run: a policy that evicts fewer of a chain's values, or a planner, may fit where this one does not.`;
    this.message = this.#facts + why + ADVICE;
  }
}

/** Facts reported by {@link ThrashingError}. */
export interface ThrashingInfo extends OutOfBudgetInfo {
  /** Recomputation so far, ns. */
  recomputeNs: number;
  /** Compute stalled on copies (swaps) so far, ns. */
  stallNs: number;
  /** The overhead limit X (the run stops once recompute + stall > (X - 1) x baseline). */
  overheadLimit: number;
  /** The budget-free compute the limit is relative to, ns. */
  baselineComputeNs: number;
}

/**
 * Thrown when recomputation plus stalls pass `(overheadLimit - 1)` times the
 * budget-free compute: the budget is infeasible because the run thrashes (the
 * published DTR evaluation stops such replays at an overhead of 2.0 and counts
 * them as out of memory). A kind of {@link OutOfBudgetError} whose
 * {@link OutOfBudgetError.reason} is `"thrashing"`.
 */
export class ThrashingError extends OutOfBudgetError {
  /** Always `"thrashing"`. */
  override readonly reason: InfeasibleReason = "thrashing";
  /** Recomputation so far, ns. */
  readonly recomputeNs: number;
  /** Stalls on copies so far, ns. */
  readonly stallNs: number;
  /** The overhead limit. */
  readonly overheadLimit: number;
  /** The budget-free compute, ns. */
  readonly baselineComputeNs: number;
  /** The error for `info`, with a message naming the limit and the times. */
  constructor(info: ThrashingInfo) {
    super(info);
    this.name = "ThrashingError";
    this.recomputeNs = info.recomputeNs;
    this.stallNs = info.stallNs;
    this.overheadLimit = info.overheadLimit;
    this.baselineComputeNs = info.baselineComputeNs;
    this.message = `thrashing: recomputation ${Math.round(info.recomputeNs)} ns plus stalls ${
      Math.round(info.stallNs)
    } ns passed ${info.overheadLimit - 1} x the budget-free compute of ${
      Math.round(info.baselineComputeNs)
    } ns (overhead limit ${info.overheadLimit}) at a budget of ${info.budgetBytes} bytes${
      info.knownFeasibleBytes !== undefined
        ? `; a budget of ${info.knownFeasibleBytes} bytes is known to work`
        : ""
    }. Raise the budget or the overhead limit.`;
  }
}
