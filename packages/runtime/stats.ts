/**
 * Runtime statistics, the memory timeline and the event stream's event types.
 *
 * @module
 */

/** Counters of a runtime or simulation (times in ns). */
export interface RuntimeStats {
  /** Model calls run. */
  calls: number;
  /** Cost of the model calls (original compute). */
  computeNs: number;
  /** Measured kernel time (live runs), originals and recomputations. */
  kernelNs: number;
  /**
   * Of `kernelNs`, the kernels the runtime added (live runs): recomputations
   * and copy-on-write copies before in-place updates.
   */
  addedKernelNs: number;
  /** Copy-on-write copies made before in-place updates (see `Engine.mustPreserve`). */
  copies: number;
  /** Evictions chosen by the policy or a plan (drops + swap-outs). */
  evictions: number;
  /** Policy/plan drops. */
  drops: number;
  /** Bytes dropped by the policy/plan. */
  dropBytes: number;
  /** Storages dropped because no handle referenced them any more (eager eviction). */
  eagerDrops: number;
  /** Swap-outs. */
  swapOuts: number;
  /** Bytes swapped out. */
  swapOutBytes: number;
  /** Swap-ins. */
  swapIns: number;
  /** Bytes swapped in. */
  swapInBytes: number;
  /** Recomputed calls. */
  remats: number;
  /** Bytes recomputed. */
  rematBytes: number;
  /** Time (cost) of recomputations. */
  recomputeNs: number;
  /** Time stalled on swaps. */
  swapStallNs: number;
  /**
   * Bookkeeping: policy search, equivalence classes, graph upkeep, and the
   * release path (one release in `RELEASE_SAMPLE` timed, counted that many
   * times over). Searches, with the drops they chose, are timed one in
   * `SEARCH_SAMPLE` on average (at random gaps, each counted for its gap)
   * and every one inside a dispatch sample.
   */
  bookkeepingNs: number;
  /** Of which the policy's candidate search (sampled like the searches above). */
  policyNs: number;
  /** Lineage collections run (each walks every storage; see `Engine.collect`). */
  collections: number;
  /**
   * Live runs: the runtime's own time in kernel calls beyond the bookkeeping
   * (argument checks, lineage, pool upkeep, the re-materialization path),
   * less the device work in them: one call in `DISPATCH_SAMPLE` timed,
   * counted that many times over.
   */
  dispatchNs: number;
  /** Highest bytes in use. */
  peakBytes: number;
  /** Budget in force. */
  budgetBytes: number;
  /** Out-of-budget errors thrown. */
  oomErrors: number;
}

/** Fresh zeroed statistics. */
export function newStats(): RuntimeStats {
  return {
    calls: 0,
    computeNs: 0,
    kernelNs: 0,
    addedKernelNs: 0,
    copies: 0,
    evictions: 0,
    drops: 0,
    dropBytes: 0,
    eagerDrops: 0,
    swapOuts: 0,
    swapOutBytes: 0,
    swapIns: 0,
    swapInBytes: 0,
    remats: 0,
    rematBytes: 0,
    recomputeNs: 0,
    swapStallNs: 0,
    bookkeepingNs: 0,
    policyNs: 0,
    collections: 0,
    dispatchNs: 0,
    peakBytes: 0,
    budgetBytes: Infinity,
    oomErrors: 0,
  };
}

/** Events for progress displays. */
export type RuntimeEvent =
  | { type: "call"; index: number; op: string; usedBytes: number }
  | { type: "evict"; action: "drop" | "swap"; name: string; bytes: number; eager: boolean }
  | { type: "remat"; how: "recompute" | "swap"; name: string; bytes: number }
  | { type: "oom"; bytes: number; usedBytes: number; reason?: "out of memory" | "thrashing" };

/** A marker on the memory timeline. */
export interface TimelineMarker {
  /** Call index it happened at. */
  call: number;
  /** Bytes in use right after. */
  bytes: number;
  /** What happened. */
  kind: "drop" | "swap-out" | "swap-in" | "remat" | "oom";
  /** Tensor name. */
  name: string;
}

/** Bytes in use after each model call, plus event markers. Capped to keep memory bounded. */
export class Timeline {
  /** Bytes in use after call `i` (index = call number since the last {@link clear}). */
  readonly bytes: number[] = [];
  /** Call index of each point. */
  readonly calls: number[] = [];
  /** Markers. */
  readonly markers: TimelineMarker[] = [];
  /** Whether recording is on. */
  readonly enabled: boolean;
  /** Maximum points/markers kept. */
  readonly cap: number;
  /** A timeline that records when `enabled`, keeping at most `cap` points and markers. */
  constructor(enabled: boolean, cap = 1_000_000) {
    this.enabled = enabled;
    this.cap = cap;
  }
  /** Adds a point. */
  point(call: number, bytes: number): void {
    if (!this.enabled || this.bytes.length >= this.cap) return;
    this.calls.push(call);
    this.bytes.push(bytes);
  }
  /** Adds a marker. */
  mark(call: number, bytes: number, kind: TimelineMarker["kind"], name: string): void {
    if (!this.enabled || this.markers.length >= this.cap) return;
    this.markers.push({ call, bytes, kind, name });
  }
  /** Forgets everything. */
  clear(): void {
    this.bytes.length = 0;
    this.calls.length = 0;
    this.markers.length = 0;
  }
}
