/**
 * The engine's internal state (configuration, the evictable pool, scratch of
 * the call in progress), shared by the modules that implement its concerns:
 * eviction and memory accounting (`_eviction.ts`), re-materialization
 * (`_remat.ts`) and lineage upkeep (`_upkeep.ts`). Not part of the public API:
 * {@link Engine} keeps one privately and passes it to those modules.
 *
 * @module
 */

import type { CostModel } from "@libra/cost";
import type { EvictionContext, EvictionPolicy, PlanControl } from "@libra/evict";
import type { CallNode, StorageNode, TensorNode } from "@libra/lineage";
import type { Engine, EngineOptions, Executor, LeafRelease } from "./engine.ts";
import type { RuntimeEvent } from "./stats.ts";
import { Pool } from "./_pool.ts";
import { Stack } from "@libra/util/list";

/** See the module doc. Fields mirror {@link EngineOptions} where they share a name. */
export class EngineState {
  /** Budget in bytes. */
  budget: number;
  /** The policy choosing victims. */
  policy: EvictionPolicy;
  /** Call and swap costs. */
  readonly cost: CostModel;
  /** Moves bytes and runs kernels (or only accounts for them). */
  readonly exec: Executor;
  /** Eager eviction of unreferenced storages. */
  readonly eager: boolean;
  /** Host memory for swapping, bytes. */
  readonly hostLimit: number;
  /** The evictable pool (deferred: laid out at the first search, see `reserve`). */
  readonly pool: Pool = new Pool(true);
  /**
   * The pool is kept: from the first finite budget on, for good (without one no
   * policy chooses, and keeping it cost a removal and an insertion per call's
   * input; `keepPoolIfNeeded` fills it from the storages of the moment).
   */
  pooled = false;
  /** Event listener. */
  onEvent: ((e: RuntimeEvent) => void) | undefined;
  /** A budget known to work. */
  knownFeasible: number | undefined;
  /** Peak of the steps run while the budget was unlimited (set when a budget is set). */
  freePeak: number | undefined = undefined;
  /** Automatic garbage collection of dead lineage. */
  readonly gc: boolean;
  /** What a release does to leaves. */
  readonly leafRelease: LeafRelease;
  /** Releases since the last collection (a collection runs when they pile up). */
  deadCandidates = 0;
  /**
   * Releases a collection triggered by releases waits for beyond its usual
   * count, after such collections freed little (see `release` in `_upkeep.ts`).
   */
  collectHold = 0;
  /** Thrash limit X. */
  overheadLimit: number;
  /** The budget-free compute the limit is relative to, ns. */
  baselineComputeNs: number | undefined;
  /**
   * The swaps' stalls as the thrash limit counts them, ns: the cost model's
   * price of each synchronous copy (what the clock moves by, see `chargeSyncSwap`),
   * the copy stream's waits, and measured times only where the cost model
   * measures (`stats.swapStallNs` holds the measured ones). So whether a run
   * passes the limit is decided as its evictions are, not by how long a copy
   * took this time (a collection inside one took 4.8 ms and stopped a test's
   * gpt tiny run whose step computes 3.8).
   */
  thrashStallNs = 0;
  /**
   * Storages swapped in on the copy stream whose completion a call has not
   * waited for yet (each keeps the time in `StorageNode.readyAt`).
   */
  readyCount = 0;
  /** What the policy sees. */
  readonly ctx: EvictionContext;
  /** Bytes the current `reserve` must free (read through `ctx.bytesNeeded`). */
  bytesNeeded = 0;
  /** Releases so far (see `_upkeep.ts`, `reapAncestors`). */
  releases = 0;
  /** Releases since the last one timed (see `Engine.release`). */
  releaseTick = 0;
  /** Searches until the next timed one, outside dispatch samples (see `reserve`). */
  searchGap = 1;
  /** The length of the gap {@link searchGap} counts down. */
  searchGapLength = 1;
  /** The weight of the search being timed (the searches it stands for). */
  searchWeight = 1;
  /** State of the generator of the gaps (statistics only). */
  searchRng = 0x9e3779b9 | 0;
  /** Outputs of the call whose `afterCall` hook runs (plan names resolve to them first). */
  hookOutputs: readonly TensorNode[] = [];
  /** The model call whose cost the cost model sets after its first execution. */
  pricing: CallNode | null = null;
  /**
   * Keep `dtr-eq`'s evicted equivalence classes (`StorageNode.eq`, through
   * the lineage's `joinEvictedClass`, `leaveClass`, `forgetClass`): on when
   * a policy that needs them (see `PolicyNeeds`) first chooses, for good.
   */
  eqClasses = false;
  /**
   * Every storage that may be unreferenced, unpinned and not droppable (a leaf
   * kept because something computed from it may need it): a superset,
   * registered where a storage can enter that state and forgotten when it is
   * freed. When it is empty, the walk after a release has nothing to find.
   */
  readonly orphans: OrphanSet = new OrphanSet();
  /** Scratch: the storages a running call makes resident (see `_remat.ts`). */
  readonly fresh: StorageNode[] = [];
  /** Scratch: the walk of `reapAncestors` (see `_upkeep.ts`). */
  readonly reapStack: StorageNode[] = [];
  /** Scratch: the unheld values an invalidation's walk finds (see `invalidate` in `_upkeep.ts`). */
  readonly walkBetween: StorageNode[] = [];
  /** Scratch: the held values an invalidation's walk finds. */
  readonly walkReferenced: StorageNode[] = [];
  /** Whether an invalidation uses {@link walkBetween} and {@link walkReferenced} now. */
  walkListsBusy = false;
  /** The inputs `Engine.withInputs` calls locked, innermost last (each takes its own off). */
  readonly lockedInputs: StorageNode[] = [];
  /** Scratch: the queue of `neededAmong` (see `_upkeep.ts`). */
  readonly neededQueue: Stack<StorageNode> = new Stack();
  /**
   * Scratch: the answers of `neededAmong`, 1 (needed) or 0, one per storage it
   * was given, at the front (grown, never shrunk: a list popped empty gives
   * back most of its room, and regrew every step).
   */
  neededOut: Uint8Array = new Uint8Array(64);
  /** Scratch: the storages `collect` looks at (see `_upkeep.ts`). */
  readonly collectScratch: StorageNode[] = [];
  /**
   * Storages freed since the last collection, whose neighbours it prunes
   * (see `collect` in `_upkeep.ts`); emptied, and {@link pruneAll} set, when it
   * outgrows the table.
   */
  readonly freedSince: StorageNode[] = [];
  /** The next collection prunes around every storage (see {@link freedSince}). */
  pruneAll = false;
  /** The lineage's neighbour-list epoch at the last collection (see `collect`). */
  pruneEpoch = -1;
  /** The control surface plan hooks get (set by the engine). */
  control!: PlanControl;

  /** The state of `engine`, configured by `options`. */
  constructor(engine: Engine, options: EngineOptions) {
    this.budget = options.budgetBytes ?? Infinity;
    this.policy = options.policy;
    this.cost = options.costModel;
    this.exec = options.executor;
    this.eager = options.eagerEviction ?? true;
    this.hostLimit = options.hostLimitBytes ?? 0;
    this.onEvent = options.onEvent;
    this.knownFeasible = options.knownFeasibleBytes;
    this.gc = options.gc ?? true;
    this.leafRelease = options.leafRelease ?? "keep-if-needed";
    this.overheadLimit = checkLimit(options.overheadLimit ?? Infinity);
    this.baselineComputeNs = options.baselineComputeNs;
    const needed = (): number => this.bytesNeeded;
    this.ctx = {
      get clock() {
        return engine.clock;
      },
      pool: this.pool,
      lineage: engine.lineage,
      costModel: this.cost,
      get bytesNeeded() {
        return needed();
      },
      canDrop: (s) => s.droppable,
      canSwap: (s) => engine.hostUsed + s.bytes <= this.hostLimit,
      // Without host memory only droppable storages enter the pool (`evictable`).
      onlyDroppable: this.hostLimit === 0,
      ...(options.sampleBounds === undefined ? {} : { sampleBounds: options.sampleBounds }),
    };
  }
}

/** `limit` when it is a valid thrash limit (a number >= 1, or Infinity). */
export function checkLimit(limit: number): number {
  if (!(limit >= 1)) {
    throw new RangeError(`overhead limit must be a number >= 1 (or Infinity), got ${limit}`);
  }
  return limit;
}

/**
 * The storages marked {@link StorageNode.orphanAt}: a list, each member's
 * position on the node (removed by moving the last member into its place).
 * Not a `Set`: one churned on every release kept garbage alive through minor
 * collections (see the note on `StorageNode`'s owners).
 */
export class OrphanSet {
  /** The members, in no particular order. */
  readonly list: StorageNode[] = [];
  /** Number of members. */
  get size(): number {
    return this.list.length;
  }
  /** Adds `s` (no-op when a member). */
  add(s: StorageNode): void {
    if (s.orphanAt >= 0) return;
    s.orphanAt = this.list.length;
    this.list.push(s);
  }
  /** Removes `s` (no-op when not a member). */
  delete(s: StorageNode): void {
    const i = s.orphanAt;
    if (i < 0) return;
    s.orphanAt = -1;
    const list = this.list;
    const last = list.pop()!;
    if (last !== s) {
      list[i] = last;
      last.orphanAt = i;
    }
  }
}
