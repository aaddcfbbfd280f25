/**
 * The re-materialization core shared by live runs and simulations.
 *
 * The engine sees a flat stream of calls `{ op, params, inputs, outputs, cost }`
 * on tensors living in storages. It keeps memory in use under the budget:
 * before a call it pins its inputs and re-materializes evicted ones (recompute
 * with an explicit stack, or swap in), reserves the outputs, evicting victims
 * chosen by the policy until they fit, runs the call through an
 * {@link Executor}, and records lineage and cost. The executor is the only part
 * that differs between a live run (a real backend) and a simulation (the meta
 * backend for accounting), so both make the same decisions given the same costs.
 *
 * The semantics follow DTR's simulator (uwsampl/dtr-prototype, simrd runtime
 * V2): storages are evictable when resident, unlocked and unpinned; recomputing
 * a call recomputes all its outputs and discards duplicates; staleness runs on
 * a clock advanced by call costs; dtr-eq classes merge on evict and subtract on
 * re-materialization.
 *
 * The engine is split by concern: memory accounting and eviction
 * (`_eviction.ts`, with the pool in `_pool.ts`), re-materialization and
 * execution (`_remat.ts`) and lineage upkeep on release, overwrite and
 * collection (`_upkeep.ts`); they share the engine's internal state
 * (`_engine_state.ts`). This file holds the public surface and the call path.
 *
 * @module
 */

import type { CostModel } from "@libra/cost";
import type { EvictAction, EvictionPolicy, SampleBounds } from "@libra/evict";
import {
  type CallNode,
  Lineage,
  type OutputSpec,
  type StorageNode,
  type TensorNode,
} from "@libra/lineage";
import { CopyEngine, type Link } from "./copy_engine.ts";
import { newStats, type RuntimeEvent, type RuntimeStats, Timeline } from "./stats.ts";
import { checkLimit, EngineState } from "./_engine_state.ts";
import {
  addUsed,
  clockCost,
  evict,
  evictable,
  evictableBytes,
  keepClassesIfNeeded,
  keepPoolIfNeeded,
  lock,
  now,
  refreshPool,
  reserve,
  unlock,
} from "./_eviction.ts";
import { materialize } from "./_remat.ts";
import { removeLast } from "@libra/util/list";
import {
  adoptLeaf,
  collect,
  freeStorage,
  invalidate,
  isNeeded,
  mustPreserve,
  overwrite,
  preserve,
  release,
  retire,
} from "./_upkeep.ts";

/** What actually moves bytes and runs kernels (live) or only accounts for them (simulation). */
export interface Executor {
  /** Gives `s` device memory (a leaf being written, or an output). */
  allocate(s: StorageNode): void;
  /** Releases `s`'s device memory (dropped or freed). */
  release(s: StorageNode): void;
  /**
   * Runs `call`. Outputs whose storage is not resident get device memory via
   * the executor; resident ones (recomputed duplicates) get temporary buffers
   * that are released afterwards. Returns the measured time in ns, if any.
   */
  execute(call: CallNode, remat: boolean): number | undefined;
  /** Copies `s` to host and releases its device memory; returns the stall in ns, if measured. */
  swapOut(s: StorageNode): number | undefined;
  /** Brings `s` back from host into new device memory; returns the stall in ns, if measured. */
  swapIn(s: StorageNode): number | undefined;
  /** Copies the bytes of resident `src` into resident `dst` (copy-on-write); returns ns, if measured. */
  copy(src: StorageNode, dst: StorageNode): number | undefined;
  /**
   * True while the caller times the call under way (a live runtime's dispatch
   * sample): the engine then times all of its bookkeeping in it, rather than
   * a sample, since the caller takes out what was counted.
   */
  readonly sampling?: boolean;
}

/** Options of {@link Engine}. */
export interface EngineOptions {
  /** Budget in bytes (default: unlimited). */
  budgetBytes?: number;
  /** Eviction policy. */
  policy: EvictionPolicy;
  /** Cost model (call costs when not given explicitly; swap costs). */
  costModel: CostModel;
  /** The executor. */
  executor: Executor;
  /** Evict storages as soon as no handle references them (DTR's eager eviction). Default true. */
  eagerEviction?: boolean;
  /** Host memory for swapping, in bytes. Default 0 (swapping off). */
  hostLimitBytes?: number;
  /**
   * A native `sampleBounds` for the sampled search (bitwise the same as
   * `@libra/evict`'s): handed to the policy in its context. The runtime passes
   * its backend's.
   */
  sampleBounds?: SampleBounds;
  /** Record a memory timeline. Default true. */
  timeline?: boolean;
  /** Event listener (progress displays). */
  onEvent?: (e: RuntimeEvent) => void;
  /** A budget known to work (reported by {@link OutOfBudgetError}). */
  knownFeasibleBytes?: number;
  /** Garbage-collect dead lineage automatically. Default true. */
  gc?: boolean;
  /**
   * What happens to a leaf (constant, host-written value) when its last handle
   * is released while values computed from it may need it for recomputation:
   * `"keep-if-needed"` (default) keeps it; `"free-unless-evicted"` frees it
   * unless an evicted value needs it, and its resident dependents become leaves
   * (swap-only); `"free"` always frees it (DTR's budget-free baseline, which
   * banishes every storage no handle refers to); `"keep-pinned"` keeps a pinned
   * leaf resident for good (DTR's budgeted runtime: constants are pinned and a
   * release never frees them). Otherwise leaves nothing needs are freed.
   */
  leafRelease?: LeafRelease;
  /**
   * Thrash limit X: once recomputation plus stalls pass `(X - 1)` times the
   * budget-free compute, the call in progress throws {@link ThrashingError}
   * (reason `"thrashing"`). All three as the cost model prices them (a swap's
   * measured time counts only where the model measures), so that whether a
   * run stops does not depend on how long its copies took. Default `Infinity`
   * (no limit); drivers pass 2.0, as the published DTR evaluation did.
   */
  overheadLimit?: number;
  /**
   * The budget-free compute the limit is relative to, ns (a simulation knows
   * it from the trace). Default: the cost of the model calls run so far.
   */
  baselineComputeNs?: number;
  /**
   * Swaps on their own copy stream at this link's bandwidth (see
   * {@link CopyEngine}), overlapping compute: a call waits only for a copy it
   * needs. Default: none, a swap stalls for the cost model's swap cost. A
   * measured swap time (live executors) always wins.
   */
  link?: Link;
}

/** See {@link EngineOptions.leafRelease}. */
export type LeafRelease = "keep-if-needed" | "free-unless-evicted" | "keep-pinned" | "free";
/** {@link Engine.lastOutputs} after an in-place call (shared: never written). */
const NO_OUTPUTS: readonly TensorNode[] = Object.freeze([]);

/**
 * One release in this many is timed into the bookkeeping (see {@link Engine.release}):
 * a clock read after the kernels pushed its path out of the caches cost ~2.5 us (gpt
 * small), one in eight ~0.1 ms of a 120 ms step.
 */
export const RELEASE_SAMPLE = 32;

/** The shared core. See the module doc. */
export class Engine {
  /** The lineage graph. */
  readonly lineage: Lineage = new Lineage();
  /** Statistics. */
  readonly stats: RuntimeStats = newStats();
  /** Memory timeline (bytes after each call, with event markers). */
  readonly timeline: Timeline;
  /** Staleness clock. */
  clock = 1;
  /** Bytes in use on the device (resident storages plus transient duplicates). */
  used = 0;
  /** Host bytes in use by swapped storages. */
  hostUsed = 0;
  /** Model calls run so far (the index plan hooks see). */
  callIndex = 0;
  /** `callIndex` at the start of the current step: plan hooks and profiled costs see step-relative indices. */
  stepBase = 0;
  /**
   * Output tensors of the latest model call (empty after an in-place call):
   * lets a plan's `afterCall` hook learn the live tensors of a planned call.
   */
  lastOutputs: readonly TensorNode[] = [];
  /** Eviction decisions in order (`drop:name`, `swap:name`), for comparing runs. */
  readonly decisions: string[] = [];
  /** Record {@link decisions}. Default false. */
  recordDecisions = false;
  /** The copy stream (with a link), and when each swapped-in storage is back. */
  readonly copyEngine: CopyEngine | null;
  /** Names to storages for plan hooks (set by the driver: trace replay or live runtime). */
  resolveName: (name: string) => StorageNode | undefined = () => undefined;

  readonly #k: EngineState;

  /** An engine over `options.executor`, with `options.policy` choosing victims. */
  constructor(options: EngineOptions) {
    this.copyEngine = options.link !== undefined ? new CopyEngine(options.link) : null;
    this.timeline = new Timeline(options.timeline ?? true);
    const k = this.#k = new EngineState(this, options);
    this.stats.budgetBytes = k.budget;
    keepPoolIfNeeded(this, k);
    k.control = {
      evict: (name, action) => {
        const s = this.#findByName(name);
        if (!s || !evictable(k, s)) return false;
        if (action === "drop" && !s.droppable) return false;
        if (action === "swap" && !k.ctx.canSwap(s)) return false;
        evict(this, k, s, action, "plan");
        return true;
      },
      restore: (name) => {
        const s = this.#findByName(name);
        if (!s || s.residency === "resident") return false;
        const t = s.tensors[0];
        if (!t || (s.residency !== "evicted" && s.residency !== "swapped")) return false;
        materialize(this, k, t, true);
        return true;
      },
    };
  }

  /** Current budget in bytes. */
  get budgetBytes(): number {
    return this.#k.budget;
  }

  /** Changes the budget (it may be below current use: later calls evict to fit). */
  setBudget(bytes: number): void {
    if (!(bytes > 0)) throw new RangeError(`budget must be > 0 bytes, got ${bytes}`);
    const k = this.#k;
    // the peak of the steps run without a budget (see `mustPreserve`)
    if (k.budget === Infinity) k.freePeak = Math.max(k.freePeak ?? 0, this.stats.peakBytes);
    k.budget = bytes;
    this.stats.budgetBytes = bytes;
    keepPoolIfNeeded(this, k);
  }

  /**
   * Records that a step completed under `bytes` of budget (or peaked at `bytes`
   * without one). Errors report the largest such budget, one every step so far
   * fits, and only when it is above the budget that failed.
   */
  noteFeasible(bytes: number): void {
    const k = this.#k;
    if (k.knownFeasible === undefined || bytes > k.knownFeasible) k.knownFeasible = bytes;
  }

  /** The thrash limit X (see {@link EngineOptions.overheadLimit}). */
  get overheadLimit(): number {
    return this.#k.overheadLimit;
  }

  /** Sets the thrash limit and, optionally, the budget-free compute it is relative to. */
  setOverheadLimit(limit: number, baselineComputeNs?: number): void {
    this.#k.overheadLimit = checkLimit(limit);
    if (baselineComputeNs !== undefined) this.#k.baselineComputeNs = baselineComputeNs;
  }

  /** The policy in use. */
  get policy(): EvictionPolicy {
    return this.#k.policy;
  }

  /**
   * Replaces the policy (e.g. with a plan's policy from `planPolicy`). What it
   * needs (`EvictionPolicy.needs`) is maintained from its first search on:
   * equivalence classes (`keepClassesIfNeeded` in `_eviction.ts`); evicted
   * regions need nothing, the lineage keeps their cache from the first
   * question on.
   */
  setPolicy(policy: EvictionPolicy): void {
    this.#k.policy = policy;
  }

  /**
   * Keeps `dtr-eq`'s equivalence classes from now on, where the budget is
   * finite and the policy needs them, rather than from the policy's first
   * search. A live runtime has kept them since its first budgeted step's first
   * search, so a replay of one of its later steps starts with them kept: the
   * evictions before the replay's first search (a plan's drops, eager ones)
   * join classes, and a class keeps what its members freed since had, as in the
   * run (not built late from the evicted storages left, which would miss them).
   */
  keepClasses(): void {
    keepClassesIfNeeded(this, this.#k);
  }

  /** Bytes of the evictable pool (an upper bound on what eviction can free now). */
  get evictableBytes(): number {
    return evictableBytes(this, this.#k);
  }

  /** Replaces the event listener (`undefined`: no events are built at all). */
  setEventListener(fn: ((e: RuntimeEvent) => void) | undefined): void {
    this.#k.onEvent = fn;
  }

  // ------------------------------------------------------------------ memory

  /** Frees memory until `bytes` more fit in the budget, or throws `OutOfBudgetError`. */
  reserve(bytes: number): void {
    reserve(this, this.#k, bytes);
  }

  /** Evicts a resident, unlocked, unpinned storage by dropping or swapping it. */
  evict(s: StorageNode, action: EvictAction, why: "policy" | "eager" | "plan"): void {
    evict(this, this.#k, s, action, why);
  }

  // ------------------------------------------------------------------ calls

  /** Creates a leaf in `storage` (or a new one): reserves, allocates, defines. Pinned leaves never move. */
  leaf(
    bytes: number,
    name?: string,
    options: { pinned?: boolean; storage?: StorageNode } = {},
  ): TensorNode {
    const k = this.#k;
    const s = options.storage ?? this.lineage.addStorage(bytes);
    if (s.residency !== "empty") {
      throw new Error(`leaf ${name}: storage ${s.id} already holds a value`);
    }
    reserve(this, k, s.bytes);
    const t = this.lineage.addLeaf(s.bytes, name, s);
    k.exec.allocate(s);
    s.residency = "resident";
    addUsed(this, s.bytes);
    t.defined = true;
    t.extRefs = 1;
    s.extRefs += 1;
    k.pool.touch(s, this.clock);
    if (options.pinned) s.pinned = true;
    refreshPool(k, s);
    return t;
  }

  /**
   * Runs a model call: records it, materializes its inputs, reserves and
   * produces its outputs. `costNs` fixes the cost (simulations); otherwise the
   * cost model prices the measured execution.
   */
  compute(
    op: string,
    params: readonly number[],
    inputs: readonly TensorNode[],
    outputs: readonly OutputSpec[],
    costNs?: number,
    backward = false,
  ): TensorNode[] {
    const k = this.#k;
    const hooks = k.policy.hooks;
    if (hooks?.beforeCall) hooks.beforeCall(this.callIndex - this.stepBase, k.control);
    const tensors = this.lineage.addCall(op, params, inputs, outputs, costNs ?? 0, backward);
    const call = tensors[0]?.producer;
    if (call === undefined || call === null) {
      throw new Error(
        `${op}: a call needs at least one output (use runInPlace for in-place kernels)`,
      );
    }
    k.pricing = costNs === undefined ? call : null;
    for (const t of tensors) {
      t.extRefs = 1;
      t.storage.extRefs += 1;
      k.pool.sync(t.storage); // a view's or a given storage's compute changed
    }
    try {
      materialize(this, k, tensors[0]!, false);
    } catch (e) {
      k.pricing = null;
      // Undo the record so the engine stays usable: the call never happened.
      for (const inp of inputs) removeLast(inp.consumers, call);
      for (const t of tensors) {
        const s = t.storage;
        s.extRefs -= t.extRefs;
        t.extRefs = 0;
        // A new list: a storage's list is never modified in place (see `StorageNode.tensors`).
        s.tensors = s.tensors.filter((x) => x !== t);
        if (s.tensors.length === 0 && !outputs.some((o) => o.storage === s)) {
          this.lineage.removeStorage(s);
        }
      }
      this.lineage.invalidateNeighborhoods();
      throw e;
    }
    for (const t of tensors) k.pool.touch(t.storage, this.clock);
    this.lastOutputs = tensors;
    this.stats.calls++;
    this.timeline.point(this.callIndex, this.used);
    if (k.onEvent) k.onEvent({ type: "call", index: this.callIndex, op, usedBytes: this.used });
    this.callIndex++;
    if (hooks?.afterCall) {
      k.hookOutputs = tensors;
      try {
        hooks.afterCall(this.callIndex - 1 - this.stepBase, k.control);
      } finally {
        k.hookOutputs = [];
      }
    }
    return tensors;
  }

  /** Runs `fn` with `inputs` materialized and locked (in-place kernels, reads). */
  withInputs<T>(inputs: readonly TensorNode[], fn: () => T): T {
    const mark = this.lockInputs(inputs);
    try {
      return fn();
    } finally {
      this.unlockInputs(mark);
    }
  }

  /**
   * {@link withInputs} without a function to call (none to allocate on a hot
   * path): materializes and locks `inputs`, returning the mark that
   * {@link unlockInputs} takes, in a `finally`. Nests: what each locks goes on
   * one stack, above what an enclosing call locked. When it throws, what it
   * locked is unlocked.
   */
  lockInputs(inputs: readonly TensorNode[]): number {
    const k = this.#k;
    const locked = k.lockedInputs, mark = locked.length;
    try {
      for (const t of inputs) k.pool.touch(t.storage, this.clock);
      for (const t of inputs) {
        if (!t.defined) materialize(this, k, t, true);
        lock(k, t.storage);
        locked.push(t.storage);
      }
    } catch (e) {
      this.unlockInputs(mark);
      throw e;
    }
    return mark;
  }

  /** Unlocks what {@link lockInputs} locked since it returned `mark`, and anything locked later. */
  unlockInputs(mark: number): void {
    const k = this.#k, locked = k.lockedInputs;
    // In the order they were locked (unlocking puts them back in the pool, whose order
    // decides ties).
    for (let i = mark; i < locked.length; i++) unlock(k, locked[i]!);
    while (locked.length > mark) locked.pop();
  }

  /**
   * Before an in-place call (which {@link noteInPlace} then accounts): runs
   * the policy's `beforeCall` hook, as {@link compute} does for other calls,
   * so that a plan's restores before an in-place call run there.
   */
  beforeInPlace(): void {
    const k = this.#k;
    const hooks = k.policy.hooks;
    if (hooks?.beforeCall) hooks.beforeCall(this.callIndex - this.stepBase, k.control);
  }

  /**
   * Accounts for an in-place call that ran outside {@link compute} (it is not
   * replayable, so it is not recorded in lineage): prices it (at `costNs`
   * when given, else by the cost model), advances the
   * clock, counts it as a model call. Returns its cost.
   */
  noteInPlace(
    op: string,
    params: readonly number[],
    measuredNs: number | undefined,
    bytes: number,
    costNs?: number,
  ): number {
    const k = this.#k;
    const hooks = k.policy.hooks;
    const cost = costNs ?? k.cost.callCost(
      { op, params, index: this.callIndex - this.stepBase, totalBytes: bytes },
      measuredNs,
    );
    this.clock += cost;
    this.copyEngine?.compute(cost);
    this.stats.computeNs += cost;
    this.lastOutputs = NO_OUTPUTS;
    if (measuredNs !== undefined) this.stats.kernelNs += measuredNs;
    this.stats.calls++;
    this.timeline.point(this.callIndex, this.used);
    if (k.onEvent) k.onEvent({ type: "call", index: this.callIndex, op, usedBytes: this.used });
    this.callIndex++;
    if (hooks?.afterCall) hooks.afterCall(this.callIndex - 1 - this.stepBase, k.control);
    return cost;
  }

  /** Ensures `t` is on the device (re-materializing it if needed). */
  materialize(t: TensorNode): void {
    if (!t.defined) materialize(this, this.#k, t, true);
  }

  /** A new external reference to `t` (a handle copy). */
  get(t: TensorNode): void {
    t.extRefs++;
    t.storage.extRefs++;
    const orphans = this.#k.orphans;
    if (orphans.size > 0) orphans.delete(t.storage);
  }

  /**
   * Drops an external reference; with eager eviction an unreferenced storage
   * is evicted (lineage kept). Every {@link RELEASE_SAMPLE}th release is
   * timed into the bookkeeping, that many times over: two clock reads on every
   * release would cost about a tenth of what a release does. What it timed
   * itself (a collection) is counted once.
   */
  release(t: TensorNode): void {
    const k = this.#k;
    if (++k.releaseTick < RELEASE_SAMPLE) {
      release(this, k, t);
      return;
    }
    k.releaseTick = 0;
    const st = this.stats, b0 = st.bookkeepingNs, t0 = now();
    release(this, k, t);
    // Less its clock reads: half of each of the two (see `clockCost`).
    const own = (now() - t0) * 1e6 - (st.bookkeepingNs - b0) - clockCost();
    if (own > 0) st.bookkeepingNs += RELEASE_SAMPLE * own;
  }

  /** Pins `t`'s storage for good (re-materializing it first). */
  pin(t: TensorNode): void {
    const k = this.#k;
    if (!t.defined) materialize(this, k, t, true);
    if (t.storage.pinned) return;
    lock(k, t.storage);
    t.storage.pinned = true;
  }

  // ------------------------------------------------------------ lineage upkeep

  /** Releases `s`'s memory and forgets it (no one needs it again). */
  freeStorage(s: StorageNode): void {
    freeStorage(this, this.#k, s);
  }

  /**
   * True when some value that may still be read could need `s` to be
   * recomputed: a descendant (through droppable storages) is referenced.
   */
  isNeeded(s: StorageNode, ignorePin = false): boolean {
    return isNeeded(this, s, ignorePin);
  }

  /**
   * Before the value in `s` is overwritten (in-place kernel, host write, a
   * buffer produced into again) or forgotten: every referenced value computed
   * from it (directly or through unreferenced intermediates) is made
   * independent of it: brought back if evicted, then frozen (its producer
   * becomes non-replayable, so it can be swapped but not dropped). The
   * unreferenced intermediates that nothing needs any more are freed, and the
   * calls that read `s` become non-replayable.
   */
  invalidate(s: StorageNode): void {
    invalidate(this, this.#k, s);
  }

  /** Whether an in-place update of `s` must copy it first rather than invalidate it (see `_upkeep.ts`). */
  mustPreserve(s: StorageNode): boolean {
    return mustPreserve(this, this.#k, s);
  }

  /**
   * Before an in-place update of resident `s`: {@link preserve} when `mayCopy`
   * and {@link mustPreserve} says so, else {@link invalidate} then
   * {@link retire} keeping the memory, with one walk of the values computed
   * from `s` for both. Returns the external references the old tensors held.
   */
  overwrite(s: StorageNode, mayCopy: boolean): number {
    return overwrite(this, this.#k, s, mayCopy);
  }

  /**
   * Copy-on-write before an in-place update of resident `s`: its current
   * tensors move to a new storage holding a copy of the bytes (kept while
   * anything may need them, droppable when they have a producer), so every
   * recorded call stays replayable. `s` is left without tensors (to adopt the
   * new value); returns the external references the old tensors held.
   */
  preserve(s: StorageNode): number {
    return preserve(this, this.#k, s);
  }

  /**
   * Detaches the current tensors of `s` (after {@link invalidate}) so that `s`
   * can take a new value: they move to a freed tombstone storage, and `s`
   * becomes empty (its memory released unless `keepMemory`).
   */
  retire(s: StorageNode, keepMemory: boolean): number {
    return retire(this, this.#k, s, keepMemory);
  }

  /** Makes `s` (resident, retired with `keepMemory`) hold a new leaf tensor. */
  adoptLeaf(s: StorageNode, ext: number, name?: string): TensorNode {
    return adoptLeaf(this, this.#k, s, ext, name);
  }

  /**
   * Frees every storage no one can need again (unreferenced, and no referenced
   * value depends on it through droppable storages) and prunes dead calls from
   * consumer lists, so the graph stays proportional to live data.
   */
  collect(): number {
    return collect(this, this.#k);
  }

  #findByName(name: string): StorageNode | undefined {
    for (const t of this.#k.hookOutputs) if (t.name === name) return t.storage;
    return this.resolveName(name);
  }
}
