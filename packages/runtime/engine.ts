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
 * @module
 */

import type { CostModel } from "@libra/cost";
import type {
  EvictablePool,
  EvictAction,
  EvictionContext,
  EvictionPolicy,
  PlanControl,
  Victim,
} from "@libra/evict";
import {
  addToClass,
  type CallNode,
  EqNode,
  Lineage,
  merge,
  type OutputSpec,
  storageCompute,
  type StorageNode,
  type TensorNode,
} from "@libra/lineage";
import { CopyEngine, type Link } from "./copy_engine.ts";
import { OutOfBudgetError, ThrashingError } from "./errors.ts";
import { newStats, type RuntimeEvent, type RuntimeStats, Timeline } from "./stats.ts";

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
   * (reason `"thrashing"`). Default `Infinity` (no limit); drivers pass 2.0,
   * as the published DTR evaluation did.
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

/**
 * The evictable pool: an array for O(1) random access (sampling) and an
 * intrusive doubly linked list through the storages for insertion order (a
 * `Set` reallocates its table when a small pool churns, which cost more than a
 * whole kernel call). Not to be modified while iterated.
 */
class Pool implements EvictablePool {
  readonly items: StorageNode[] = [];
  bytes = 0;
  #head: StorageNode | null = null;
  #tail: StorageNode | null = null;
  get size(): number {
    return this.items.length;
  }
  at(i: number): StorageNode {
    return this.items[i]!;
  }
  [Symbol.iterator](): Iterator<StorageNode> {
    return new PoolIterator(this.#head);
  }
  add(s: StorageNode): void {
    if (s.poolIndex >= 0) return;
    s.poolIndex = this.items.length;
    this.items.push(s);
    const tail = this.#tail;
    s.poolPrev = tail;
    s.poolNext = null;
    if (tail === null) this.#head = s;
    else tail.poolNext = s;
    this.#tail = s;
    this.bytes += s.bytes;
  }
  remove(s: StorageNode): void {
    const i = s.poolIndex;
    if (i < 0) return;
    const last = this.items.pop()!;
    if (last !== s) {
      this.items[i] = last;
      last.poolIndex = i;
    }
    s.poolIndex = -1;
    const prev = s.poolPrev, next = s.poolNext;
    if (prev === null) this.#head = next;
    else prev.poolNext = next;
    if (next === null) this.#tail = prev;
    else next.poolPrev = prev;
    s.poolPrev = null;
    s.poolNext = null;
    this.bytes -= s.bytes;
  }
}

class PoolIterator implements Iterator<StorageNode> {
  #cur: StorageNode | null;
  constructor(head: StorageNode | null) {
    this.#cur = head;
  }
  next(): IteratorResult<StorageNode> {
    const c = this.#cur;
    if (c === null) return { done: true, value: undefined };
    this.#cur = c.poolNext;
    return { done: false, value: c };
  }
}

interface Frame {
  t: TensorNode;
  remat: boolean;
  undef: TensorNode[] | null;
  i: number;
  locked: StorageNode[];
  waiting: TensorNode | null;
}

const now = (): number => performance.now();

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

  #budget: number;
  #policy: EvictionPolicy;
  readonly #cost: CostModel;
  readonly #exec: Executor;
  readonly #eager: boolean;
  readonly #hostLimit: number;
  readonly #pool = new Pool();
  #onEvent: ((e: RuntimeEvent) => void) | undefined;
  #knownFeasible: number | undefined;
  readonly #gc: boolean;
  readonly #leafRelease: LeafRelease;
  #deadCandidates = 0;
  #overheadLimit: number;
  #baselineComputeNs: number | undefined;
  /** The copy stream (with a link), and when each swapped-in storage is back. */
  readonly copyEngine: CopyEngine | null;
  readonly #readyAt = new Map<StorageNode, number>();
  readonly #ctx: EvictionContext;
  #bytesNeeded = 0;

  /** An engine over `options.executor`, with `options.policy` choosing victims. */
  constructor(options: EngineOptions) {
    this.#budget = options.budgetBytes ?? Infinity;
    this.#policy = options.policy;
    this.#cost = options.costModel;
    this.#exec = options.executor;
    this.#eager = options.eagerEviction ?? true;
    this.#hostLimit = options.hostLimitBytes ?? 0;
    this.#onEvent = options.onEvent;
    this.#knownFeasible = options.knownFeasibleBytes;
    this.copyEngine = options.link !== undefined ? new CopyEngine(options.link) : null;
    this.#gc = options.gc ?? true;
    this.#leafRelease = options.leafRelease ?? "keep-if-needed";
    this.timeline = new Timeline(options.timeline ?? true);
    this.stats.budgetBytes = this.#budget;
    this.#overheadLimit = checkLimit(options.overheadLimit ?? Infinity);
    this.#baselineComputeNs = options.baselineComputeNs;
    const clock = (): number => this.clock;
    const needed = (): number => this.#bytesNeeded;
    this.#ctx = {
      get clock() {
        return clock();
      },
      pool: this.#pool,
      lineage: this.lineage,
      costModel: this.#cost,
      get bytesNeeded() {
        return needed();
      },
      canDrop: (s) => s.droppable,
      canSwap: (s) => this.hostUsed + s.bytes <= this.#hostLimit,
    };
  }

  /** Current budget in bytes. */
  get budgetBytes(): number {
    return this.#budget;
  }

  /** Changes the budget (it may be below current use: later calls evict to fit). */
  setBudget(bytes: number): void {
    if (!(bytes > 0)) throw new RangeError(`budget must be > 0 bytes, got ${bytes}`);
    this.#budget = bytes;
    this.stats.budgetBytes = bytes;
  }

  /**
   * Records that a step completed under `bytes` of budget (or peaked at `bytes`
   * without one). Errors report the largest such budget, one every step so far
   * fits, and only when it is above the budget that failed.
   */
  noteFeasible(bytes: number): void {
    if (this.#knownFeasible === undefined || bytes > this.#knownFeasible) {
      this.#knownFeasible = bytes;
    }
  }

  /** The thrash limit X (see {@link EngineOptions.overheadLimit}). */
  get overheadLimit(): number {
    return this.#overheadLimit;
  }

  /** Sets the thrash limit and, optionally, the budget-free compute it is relative to. */
  setOverheadLimit(limit: number, baselineComputeNs?: number): void {
    this.#overheadLimit = checkLimit(limit);
    if (baselineComputeNs !== undefined) this.#baselineComputeNs = baselineComputeNs;
  }

  /**
   * Throws {@link ThrashingError} when recomputation plus stalls passed
   * `(limit - 1)` x the budget-free compute (the check DTR's simulator makes
   * after every materialization).
   */
  #checkThrash(): void {
    const limit = this.#overheadLimit;
    if (limit === Infinity) return;
    const st = this.stats;
    const base = this.#baselineComputeNs ?? st.computeNs;
    const extra = st.recomputeNs + st.swapStallNs;
    if (extra <= (limit - 1) * base) return;
    st.oomErrors++;
    this.timeline.mark(this.callIndex, this.used, "oom", "thrashing");
    this.#emit({ type: "oom", bytes: 0, usedBytes: this.used, reason: "thrashing" });
    throw new ThrashingError({
      neededBytes: 0,
      usedBytes: this.used,
      evictableBytes: this.evictableBytes,
      budgetBytes: this.#budget,
      ...(this.#knownFeasible !== undefined ? { knownFeasibleBytes: this.#knownFeasible } : {}),
      recomputeNs: st.recomputeNs,
      stallNs: st.swapStallNs,
      overheadLimit: limit,
      baselineComputeNs: base,
    });
  }

  /** The policy in use. */
  get policy(): EvictionPolicy {
    return this.#policy;
  }

  /** Replaces the policy (e.g. with a plan's policy from `planPolicy`). */
  setPolicy(policy: EvictionPolicy): void {
    this.#policy = policy;
  }

  /** Bytes of the evictable pool (an upper bound on what eviction can free now). */
  get evictableBytes(): number {
    let b = 0;
    for (const s of this.#pool.items) if (s.droppable || this.#ctx.canSwap(s)) b += s.bytes;
    return b;
  }

  /** Replaces the event listener (`undefined`: no events are built at all). */
  setEventListener(fn: ((e: RuntimeEvent) => void) | undefined): void {
    this.#onEvent = fn;
  }

  // ------------------------------------------------------------------ memory

  #emit(e: RuntimeEvent): void {
    this.#onEvent?.(e);
  }

  #addUsed(bytes: number): void {
    this.used += bytes;
    if (this.used > this.stats.peakBytes) this.stats.peakBytes = this.used;
  }

  #evictable(s: StorageNode): boolean {
    return s.residency === "resident" && s.locks === 0 && !s.pinned &&
      (s.droppable || this.#hostLimit > 0);
  }

  #refreshPool(s: StorageNode): void {
    if (this.#evictable(s)) this.#pool.add(s);
    else this.#pool.remove(s);
  }

  /** Frees memory until `bytes` more fit in the budget, or throws {@link OutOfBudgetError}. */
  reserve(bytes: number): void {
    if (this.used + bytes <= this.#budget) return;
    let collected = false;
    while (this.used + bytes > this.#budget) {
      let victims: Victim[] = [];
      if (this.#pool.size > 0) {
        this.#bytesNeeded = this.used + bytes - this.#budget;
        const t0 = now();
        victims = this.#policy.choose(this.#ctx);
        const dt = (now() - t0) * 1e6;
        this.stats.policyNs += dt;
        this.stats.bookkeepingNs += dt;
      }
      if (victims.length === 0 && this.#gc && !collected) {
        // Unreferenced leaves nothing needs may still hold memory: collect, retry.
        collected = true;
        if (this.collect() > 0) continue;
      }
      if (victims.length === 0) {
        const err = new OutOfBudgetError({
          neededBytes: bytes,
          usedBytes: this.used,
          evictableBytes: this.evictableBytes,
          budgetBytes: this.#budget,
          // A budget at or below this one did not complete this step: not known to work.
          ...(this.#knownFeasible !== undefined && this.#knownFeasible > this.#budget
            ? { knownFeasibleBytes: this.#knownFeasible }
            : {}),
        });
        this.stats.oomErrors++;
        this.timeline.mark(this.callIndex, this.used, "oom", "");
        this.#emit({ type: "oom", bytes, usedBytes: this.used });
        throw err;
      }
      for (const v of victims) this.evict(v.storage, v.action, "policy");
    }
  }

  /** Evicts a resident, unlocked, unpinned storage by dropping or swapping it. */
  evict(s: StorageNode, action: EvictAction, why: "policy" | "eager" | "plan"): void {
    if (s.residency !== "resident" || s.locks > 0 || s.pinned) {
      throw new Error(
        `evict ${s.name}: storage is ${s.residency}${s.locks > 0 ? ", locked" : ""}${
          s.pinned ? ", pinned" : ""
        } (the policy returned a storage outside the evictable pool)`,
      );
    }
    if (action === "drop") {
      if (!s.droppable) {
        throw new Error(`evict ${s.name}: a leaf (no replayable producer) cannot be dropped`);
      }
      this.#exec.release(s);
      s.residency = "evicted";
      for (const t of s.tensors) t.defined = false;
      this.used -= s.bytes;
      this.#pool.remove(s);
      s.evictions++;
      const st = this.stats;
      if (why === "eager") st.eagerDrops++;
      else {
        st.evictions++;
        st.drops++;
        st.dropBytes += s.bytes;
      }
      // Eager drops (a value freed by its last handle) are not timed: two clock
      // reads cost more than the merge they would measure, on every free.
      const eager = why === "eager";
      const t0 = eager ? 0 : now();
      s.eq = new EqNode(s.compute);
      const ns = this.lineage.evictedNeighbors(s);
      for (const n of ns) if (n.eq !== null) merge(n.eq, s.eq);
      if (!eager) st.bookkeepingNs += (now() - t0) * 1e6;
      if (this.recordDecisions && why !== "eager") this.decisions.push(`drop:${s.name}`);
      if (why !== "eager") this.timeline.mark(this.callIndex, this.used, "drop", s.name);
      if (this.#onEvent) {
        this.#emit({
          type: "evict",
          action: "drop",
          name: s.name,
          bytes: s.bytes,
          eager: why === "eager",
        });
      }
    } else {
      if (this.hostUsed + s.bytes > this.#hostLimit) {
        throw new Error(
          `swap ${s.name}: host pool full (${this.hostUsed} + ${s.bytes} > ${this.#hostLimit} bytes); raise hostLimitBytes`,
        );
      }
      const defined = s.tensors.filter((t) => t.defined);
      const measured = this.#exec.swapOut(s);
      let stall: number;
      if (measured === undefined && this.copyEngine !== null) {
        // Asynchronous: the memory stays held until the copy ends (a call that
        // needs it waits in #run); nothing stalls now.
        this.copyEngine.swapOut(s.bytes);
        stall = 0;
      } else stall = measured ?? this.#cost.swapCost(s.bytes);
      s.residency = "swapped";
      s.host = s.host ?? undefined;
      swappedDefined.set(s, defined);
      for (const t of s.tensors) t.defined = false;
      this.used -= s.bytes;
      this.hostUsed += s.bytes;
      this.#pool.remove(s);
      s.evictions++;
      const st = this.stats;
      st.evictions++;
      st.swapOuts++;
      st.swapOutBytes += s.bytes;
      st.swapStallNs += stall;
      this.clock += stall;
      if (this.recordDecisions) this.decisions.push(`swap:${s.name}`);
      this.timeline.mark(this.callIndex, this.used, "swap-out", s.name);
      if (this.#onEvent) {
        this.#emit({ type: "evict", action: "swap", name: s.name, bytes: s.bytes, eager: false });
      }
    }
  }

  #swapIn(s: StorageNode): void {
    this.reserve(s.bytes);
    const measured = this.#exec.swapIn(s);
    let stall: number;
    if (measured === undefined && this.copyEngine !== null) {
      // Asynchronous: the call that reads it waits for the copy in #run.
      this.#readyAt.set(s, this.copyEngine.swapIn(s.bytes).endNs);
      stall = 0;
    } else stall = measured ?? this.#cost.swapCost(s.bytes);
    s.residency = "resident";
    this.hostUsed -= s.bytes;
    this.#addUsed(s.bytes);
    for (const t of swappedDefined.get(s) ?? [s.tensors[0]!]) t.defined = true;
    swappedDefined.delete(s);
    s.remats++;
    const st = this.stats;
    st.swapIns++;
    st.swapInBytes += s.bytes;
    st.swapStallNs += stall;
    this.clock += stall;
    this.#refreshPool(s);
    this.timeline.mark(this.callIndex, this.used, "swap-in", s.name);
    if (this.#onEvent) this.#emit({ type: "remat", how: "swap", name: s.name, bytes: s.bytes });
    this.#checkThrash();
  }

  #lock(s: StorageNode): void {
    if (s.locks === 0) this.#pool.remove(s);
    s.locks++;
  }

  #unlock(s: StorageNode): void {
    s.locks--;
    if (s.locks === 0 && this.#evictable(s)) this.#pool.add(s);
  }

  // ------------------------------------------------------------------ calls

  /** Creates a leaf in `storage` (or a new one): reserves, allocates, defines. Pinned leaves never move. */
  leaf(
    bytes: number,
    name?: string,
    options: { pinned?: boolean; storage?: StorageNode } = {},
  ): TensorNode {
    const s = options.storage ?? this.lineage.addStorage(bytes);
    if (s.residency !== "empty") {
      throw new Error(`leaf ${name}: storage ${s.id} already holds a value`);
    }
    this.reserve(s.bytes);
    const t = this.lineage.addLeaf(s.bytes, name, s);
    this.#exec.allocate(s);
    s.residency = "resident";
    this.#addUsed(s.bytes);
    t.defined = true;
    t.extRefs = 1;
    s.extRefs += 1;
    s.lastAccess = this.clock;
    if (options.pinned) s.pinned = true;
    this.#refreshPool(s);
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
    const hooks = this.#policy.hooks;
    if (hooks?.beforeCall) hooks.beforeCall(this.callIndex - this.stepBase, this.#control);
    const tensors = this.lineage.addCall(op, params, inputs, outputs, costNs ?? 0, backward);
    const call = tensors[0]?.producer;
    if (call === undefined || call === null) {
      throw new Error(
        `${op}: a call needs at least one output (use runInPlace for in-place kernels)`,
      );
    }
    this.#pricing = costNs === undefined ? call : null;
    for (const t of tensors) {
      t.extRefs = 1;
      t.storage.extRefs += 1;
    }
    try {
      this.#materialize(tensors[0]!, false);
    } catch (e) {
      this.#pricing = null;
      // Undo the record so the engine stays usable: the call never happened.
      for (const inp of inputs) {
        const i = inp.consumers.lastIndexOf(call);
        if (i >= 0) inp.consumers.splice(i, 1);
      }
      for (const t of tensors) {
        const s = t.storage;
        s.extRefs -= t.extRefs;
        t.extRefs = 0;
        const k = s.tensors.indexOf(t);
        if (k >= 0) s.tensors.splice(k, 1);
        if (s.tensors.length === 0 && !outputs.some((o) => o.storage === s)) {
          this.lineage.removeStorage(s);
        }
      }
      throw e;
    }
    for (const t of tensors) t.storage.lastAccess = this.clock;
    this.lastOutputs = tensors;
    this.stats.calls++;
    this.timeline.point(this.callIndex, this.used);
    if (this.#onEvent) {
      this.#emit({ type: "call", index: this.callIndex, op, usedBytes: this.used });
    }
    this.callIndex++;
    if (hooks?.afterCall) {
      this.#lastOutputs = tensors;
      try {
        hooks.afterCall(this.callIndex - 1 - this.stepBase, this.#control);
      } finally {
        this.#lastOutputs = [];
      }
    }
    return tensors;
  }

  /**
   * Runs `fn` with `inputs` materialized and locked (in-place kernels, reads).
   * Counts as a model call when `count` is true.
   */
  withInputs<T>(inputs: readonly TensorNode[], fn: () => T): T {
    const locked: StorageNode[] = [];
    try {
      for (const t of inputs) t.storage.lastAccess = this.clock;
      for (const t of inputs) {
        if (!t.defined) this.#materialize(t, true);
        this.#lock(t.storage);
        locked.push(t.storage);
      }
      return fn();
    } finally {
      for (const s of locked) this.#unlock(s);
    }
  }

  /**
   * Accounts for an in-place call that ran outside {@link compute} (it is not
   * replayable, so it is not recorded in lineage): prices it, advances the
   * clock, counts it as a model call. Returns its cost.
   */
  noteInPlace(
    op: string,
    params: readonly number[],
    measuredNs: number | undefined,
    bytes: number,
  ): number {
    const hooks = this.#policy.hooks;
    const cost = this.#cost.callCost(
      { op, params, index: this.callIndex - this.stepBase, totalBytes: bytes },
      measuredNs,
    );
    this.clock += cost;
    this.copyEngine?.compute(cost);
    this.stats.computeNs += cost;
    this.lastOutputs = [];
    if (measuredNs !== undefined) this.stats.kernelNs += measuredNs;
    this.stats.calls++;
    this.timeline.point(this.callIndex, this.used);
    if (this.#onEvent) {
      this.#emit({ type: "call", index: this.callIndex, op, usedBytes: this.used });
    }
    this.callIndex++;
    if (hooks?.afterCall) hooks.afterCall(this.callIndex - 1 - this.stepBase, this.#control);
    return cost;
  }

  /** Ensures `t` is on the device (re-materializing it if needed). */
  materialize(t: TensorNode): void {
    if (!t.defined) this.#materialize(t, true);
  }

  /** A new external reference to `t` (a handle copy). */
  get(t: TensorNode): void {
    t.extRefs++;
    t.storage.extRefs++;
  }

  /** Drops an external reference; with eager eviction an unreferenced storage is evicted (lineage kept). */
  release(t: TensorNode): void {
    if (t.extRefs <= 0) throw new Error(`release ${t.name}: no external reference left`);
    t.extRefs--;
    const s = t.storage;
    s.extRefs--;
    if (s.extRefs > 0 || s.locks > 0) return;
    if (s.residency === "resident") {
      if (s.droppable && !s.pinned) {
        if (this.#eager) this.evict(s, "drop", "eager");
      } else if (this.#leafRelease === "keep-pinned" && s.pinned) {
        return; // DTR's constants: pinned, resident until the end
      } else if (
        this.#leafRelease === "free" || !this.isNeeded(s, true) ||
        (this.#leafRelease === "free-unless-evicted" && !this.#evictedNeeds(s))
      ) {
        // A leaf (or pinned value) no handle refers to: free it for good. Calls
        // that read it can no longer be replayed, so their resident outputs
        // become leaves (swap-only).
        this.invalidate(s);
        this.freeStorage(s);
        return;
      }
    }
    this.#reapAncestors(s);
    if (
      this.#gc && ++this.#deadCandidates > 4096 &&
      this.#deadCandidates > this.lineage.storages.size / 2
    ) {
      this.collect();
    }
  }

  /**
   * After `s` lost its last reference: unreferenced leaves among its nearby
   * ancestors (through evicted, unreferenced storages; at most 16 visited)
   * may have been kept only for `s`'s sake; free those nothing needs now.
   */
  #reapAncestors(s: StorageNode): void {
    const stamp = this.lineage.nextStamp();
    s.stamp = stamp;
    const stack: StorageNode[] = [s];
    let budget = 16;
    while (stack.length > 0 && budget-- > 0) {
      const cur = stack.pop()!;
      for (const t of cur.tensors) {
        const p = t.producer;
        if (p === null) continue;
        for (const inp of p.inputs) {
          const n = inp.storage;
          if (n.stamp === stamp || n.extRefs > 0 || n.pinned || n.locks > 0) continue;
          n.stamp = stamp;
          if (n.residency === "evicted") stack.push(n);
          else if (n.residency === "resident" && !n.droppable && !this.isNeeded(n)) {
            this.freeStorage(n);
          }
        }
      }
    }
  }

  /** Pins `t`'s storage for good (re-materializing it first). */
  pin(t: TensorNode): void {
    if (!t.defined) this.#materialize(t, true);
    if (t.storage.pinned) return;
    this.#lock(t.storage);
    t.storage.pinned = true;
  }

  /** Releases `s`'s memory and forgets it (no one needs it again). */
  freeStorage(s: StorageNode): void {
    if (s.residency === "resident") {
      this.#exec.release(s);
      this.used -= s.bytes;
    } else if (s.residency === "swapped") {
      this.hostUsed -= s.bytes;
      this.#exec.release(s);
    }
    this.#pool.remove(s);
    s.residency = "freed";
    for (const t of s.tensors) t.defined = false;
    this.lineage.removeStorage(s);
  }

  /**
   * True when some value that may still be read could need `s` to be
   * recomputed: a descendant (through droppable storages) is referenced.
   */
  isNeeded(s: StorageNode, ignorePin = false): boolean {
    if (s.extRefs > 0 || (s.pinned && !ignorePin) || s.locks > 0) return true;
    const stamp = this.lineage.nextStamp();
    s.stamp = stamp;
    const stack: StorageNode[] = [s];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      for (const t of cur.tensors) {
        for (const c of t.consumers) {
          if (!c.replayable) continue;
          for (const o of c.outputs) {
            const n = o.storage;
            if (n.stamp === stamp || n.residency === "freed" || n.residency === "empty") continue;
            n.stamp = stamp;
            if (n.extRefs > 0 || n.pinned || n.locks > 0) return true;
            stack.push(n);
          }
        }
      }
    }
    return false;
  }

  /** True when an evicted value that may still be needed is computed directly from `s`. */
  #evictedNeeds(s: StorageNode): boolean {
    for (const t of s.tensors) {
      for (const c of t.consumers) {
        if (!c.replayable) continue;
        for (const o of c.outputs) {
          if (o.storage.residency === "evicted" && this.isNeeded(o.storage)) return true;
        }
      }
    }
    return false;
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
    const stamp = this.lineage.nextStamp();
    s.stamp = stamp;
    const stack: StorageNode[] = [s];
    const between: StorageNode[] = [];
    const referenced: StorageNode[] = [];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      for (const t of cur.tensors) {
        for (const c of t.consumers) {
          if (!c.replayable) continue;
          for (const o of c.outputs) {
            const n = o.storage;
            if (n.stamp === stamp || n.residency === "freed" || n.residency === "empty") continue;
            n.stamp = stamp;
            if (n.extRefs > 0 || n.pinned || n.locks > 0) referenced.push(n);
            else {
              between.push(n);
              stack.push(n);
            }
          }
        }
      }
    }
    const held: StorageNode[] = [];
    try {
      for (const n of referenced) {
        if (n.residency === "evicted") this.#materialize(n.tensors[0]!, true);
        this.#lock(n);
        held.push(n);
      }
      for (const n of referenced) {
        const p = n.tensors[0]!.producer;
        if (p !== null && p.replayable) {
          p.replayable = false;
          for (const o of p.outputs) {
            if (o.storage.residency === "resident") this.#refreshPool(o.storage);
          }
        }
      }
      for (const t of s.tensors) {
        for (const c of t.consumers) c.replayable = false;
        t.consumers = [];
      }
      this.lineage.invalidateNeighborhoods();
      for (const n of between) {
        if (n.residency === "freed") continue;
        if (!this.isNeeded(n)) {
          n.eq = null;
          this.freeStorage(n);
        } else if (n.residency === "resident") this.#refreshPool(n);
      }
    } finally {
      for (const n of held) this.#unlock(n);
    }
  }

  /** True when a replayable call read the current value of `s` and one of its outputs still exists. */
  hasDependents(s: StorageNode): boolean {
    for (const t of s.tensors) {
      for (const c of t.consumers) {
        if (!c.replayable) continue;
        for (const o of c.outputs) {
          const r = o.storage.residency;
          if (r !== "freed" && r !== "empty") return true;
        }
      }
    }
    return false;
  }

  /**
   * Copy-on-write before an in-place update of resident `s`: its current
   * tensors move to a new storage holding a copy of the bytes (kept while
   * anything may need them, droppable when they have a producer), so every
   * recorded call stays replayable. `s` is left without tensors (to adopt the
   * new value); returns the external references the old tensors held.
   */
  preserve(s: StorageNode): number {
    if (s.residency !== "resident") {
      throw new Error(`preserve ${s.name}: storage is ${s.residency}`);
    }
    this.reserve(s.bytes);
    const copy = this.lineage.addStorage(s.bytes);
    this.#exec.allocate(copy);
    const ns = this.#exec.copy(s, copy);
    this.stats.kernelNs += ns ?? 0;
    copy.residency = "resident";
    this.#addUsed(s.bytes);
    let ext = 0;
    for (const t of s.tensors) {
      ext += t.extRefs;
      t.extRefs = 0;
      t.storage = copy;
      copy.tensors.push(t);
    }
    copy.compute = s.compute;
    copy.lastAccess = s.lastAccess;
    s.tensors = [];
    this.lineage.invalidateNeighborhoods();
    s.extRefs -= ext;
    s.compute = 0;
    this.#refreshPool(copy);
    return ext;
  }

  /**
   * Detaches the current tensors of `s` (after {@link invalidate}) so that `s`
   * can take a new value: they move to a freed tombstone storage, and `s`
   * becomes empty (its memory released unless `keepMemory`).
   */
  retire(s: StorageNode, keepMemory: boolean): number {
    let ext = 0;
    if (s.tensors.length > 0) {
      const tomb = this.lineage.tombstone(s.bytes);
      for (const t of s.tensors) {
        ext += t.extRefs;
        t.extRefs = 0;
        t.defined = false;
        t.storage = tomb;
        tomb.tensors.push(t);
      }
      // A producer whose outputs are all gone can never be replayed for anyone:
      // unlink it from its inputs now (as `collect` would), so a buffer produced
      // into over and over does not grow its inputs' consumer lists.
      for (const t of tomb.tensors) {
        const p = t.producer;
        if (p !== null && allFreed(p)) {
          for (const inp of p.inputs) {
            const i = inp.consumers.lastIndexOf(p);
            if (i >= 0) inp.consumers.splice(i, 1);
          }
        }
      }
      this.lineage.invalidateNeighborhoods();
    }
    s.tensors = [];
    s.extRefs -= ext;
    s.eq = null;
    s.compute = 0;
    if (!keepMemory) {
      if (s.residency === "resident") {
        this.#exec.release(s);
        this.used -= s.bytes;
      } else if (s.residency === "swapped") {
        this.#exec.release(s);
        this.hostUsed -= s.bytes;
      }
      s.residency = "empty";
      this.#pool.remove(s);
    }
    return ext;
  }

  /** Makes `s` (resident, retired with `keepMemory`) hold a new leaf tensor. */
  adoptLeaf(s: StorageNode, ext: number, name?: string): TensorNode {
    const t = this.lineage.addLeaf(s.bytes, name, s);
    t.defined = true;
    t.extRefs = ext;
    s.extRefs += ext;
    s.lastAccess = this.clock;
    this.#refreshPool(s);
    return t;
  }

  /**
   * Frees every storage no one can need again (unreferenced, and no referenced
   * value depends on it through droppable storages) and prunes dead calls from
   * consumer lists, so the graph stays proportional to live data.
   */
  collect(): number {
    const t0 = now();
    this.#deadCandidates = 0;
    const needed = this.lineage.nextStamp();
    const stack: StorageNode[] = [];
    for (const s of this.lineage.storages.values()) {
      if (s.extRefs > 0 || s.pinned || s.locks > 0) {
        s.stamp = needed;
        stack.push(s);
      }
    }
    while (stack.length > 0) {
      const cur = stack.pop()!;
      if (!cur.droppable) continue;
      for (const t of cur.tensors) {
        const p = t.producer;
        if (p === null || !p.replayable) continue;
        for (const inp of p.inputs) {
          const n = inp.storage;
          if (n.stamp !== needed && n.residency !== "freed") {
            n.stamp = needed;
            stack.push(n);
          }
        }
      }
    }
    let freed = 0;
    const dead: StorageNode[] = [];
    for (const s of this.lineage.storages.values()) {
      if (s.stamp !== needed && s.residency !== "empty") dead.push(s);
    }
    for (const s of dead) {
      this.freeStorage(s);
      freed++;
    }
    for (const s of this.lineage.storages.values()) {
      for (const t of s.tensors) {
        if (t.consumers.length === 0) continue;
        t.consumers = t.consumers.filter((c) =>
          c.outputs.some((o) => o.storage.residency !== "freed")
        );
      }
    }
    this.stats.bookkeepingNs += (now() - t0) * 1e6;
    return freed;
  }

  readonly #control: PlanControl = {
    evict: (name, action) => {
      const s = this.#findByName(name);
      if (!s || !this.#evictable(s)) return false;
      if (action === "drop" && !s.droppable) return false;
      if (action === "swap" && !this.#ctx.canSwap(s)) return false;
      this.evict(s, action, "plan");
      return true;
    },
    restore: (name) => {
      const s = this.#findByName(name);
      if (!s || s.residency === "resident") return false;
      const t = s.tensors[0];
      if (!t || (s.residency !== "evicted" && s.residency !== "swapped")) return false;
      this.#materialize(t, true);
      return true;
    },
  };

  /** Names to storages for plan hooks (set by the driver: trace replay or live runtime). */
  resolveName: (name: string) => StorageNode | undefined = () => undefined;

  #lastOutputs: readonly TensorNode[] = [];
  /** The model call whose cost the cost model sets after its first execution. */
  #pricing: CallNode | null = null;

  #findByName(name: string): StorageNode | undefined {
    for (const t of this.#lastOutputs) if (t.name === name) return t.storage;
    return this.resolveName(name);
  }

  // ------------------------------------------------------- materialization

  #materialize(target: TensorNode, remat: boolean): void {
    const p0 = target.producer;
    if (
      p0 !== null && p0.replayable && target.storage.residency !== "swapped" &&
      this.used + p0.totalBytes <= this.#budget
    ) {
      // Fast path: every input on the device and the outputs fit.
      const ins = p0.inputs;
      let ready = true;
      for (let i = 0; i < ins.length; i++) {
        if (!ins[i]!.defined) {
          ready = false;
          break;
        }
      }
      if (ready) {
        const c = this.clock;
        for (let i = 0; i < ins.length; i++) {
          const s = ins[i]!.storage;
          s.lastAccess = c;
          this.#lock(s);
        }
        try {
          this.#run(p0, remat);
        } finally {
          for (let i = 0; i < ins.length; i++) this.#unlock(ins[i]!.storage);
        }
        return;
      }
    }
    const stack: Frame[] = [{ t: target, remat, undef: null, i: 0, locked: [], waiting: null }];
    try {
      while (stack.length > 0) {
        const f = stack[stack.length - 1]!;
        if (f.undef === null) {
          const s = f.t.storage;
          if (s.residency === "swapped") {
            this.#swapIn(s);
            if (f.t.defined) {
              stack.pop();
              continue;
            }
          }
          const p = f.t.producer;
          if (p === null || !p.replayable) {
            throw new Error(
              `${f.t.name} (storage ${s.id}, ${s.residency}) is not on the device and cannot be recomputed: ${
                p === null
                  ? "it has no producer"
                  : `its producer ${p.op} read a value that was overwritten`
              }`,
            );
          }
          const c = this.clock;
          const undef: TensorNode[] = [];
          for (const inp of p.inputs) inp.storage.lastAccess = c;
          for (const inp of p.inputs) {
            if (inp.defined) {
              this.#lock(inp.storage);
              f.locked.push(inp.storage);
            } else undef.push(inp);
          }
          f.undef = undef;
        }
        if (f.waiting !== null) {
          if (!f.waiting.defined) {
            throw new Error(`internal: re-materializing ${f.waiting.name} left it undefined`);
          }
          f.waiting = null;
        }
        let pushed = false;
        while (f.i < f.undef.length) {
          const inp = f.undef[f.i]!;
          if (!inp.defined) {
            f.waiting = inp;
            stack.push({ t: inp, remat: true, undef: null, i: 0, locked: [], waiting: null });
            pushed = true;
            break;
          }
          this.#lock(inp.storage);
          f.locked.push(inp.storage);
          f.i++;
        }
        if (pushed) continue;
        const call = f.t.producer!;
        if (this.used + call.totalBytes > this.#budget) this.reserve(call.totalBytes);
        this.#run(call, f.remat);
        for (const s of f.locked) this.#unlock(s);
        f.locked.length = 0;
        stack.pop();
      }
    } catch (e) {
      for (const f of stack) {
        for (const s of f.locked) this.#unlock(s);
        f.locked.length = 0;
      }
      throw e;
    }
  }

  /**
   * Before `call` runs on the compute stream: waits for its swapped-in inputs
   * to be back and for swap-outs in flight to release the memory it needs.
   */
  #awaitCopies(call: CallNode): void {
    const ce = this.copyEngine!;
    let wait = 0;
    if (this.#readyAt.size > 0) {
      for (const inp of call.inputs) {
        const t = this.#readyAt.get(inp.storage);
        if (t === undefined) continue;
        this.#readyAt.delete(inp.storage);
        wait += ce.waitUntil(t);
      }
    }
    if (this.#budget !== Infinity) {
      const excess = this.used + ce.heldBytes() + call.totalBytes - this.#budget;
      if (excess > 0) wait += ce.waitForMemory(excess);
    }
    if (wait > 0) {
      this.stats.swapStallNs += wait;
      this.clock += wait;
      this.#checkThrash();
    }
  }

  #run(call: CallNode, remat: boolean): void {
    const outs = call.outputs;
    const fresh: StorageNode[] = [];
    for (const o of outs) {
      const s = o.storage;
      if (s.residency !== "resident" && s.residency !== "freed" && !fresh.includes(s)) {
        fresh.push(s);
      }
    }
    if (this.copyEngine !== null) this.#awaitCopies(call);
    const measured = this.#exec.execute(call, remat);
    const st = this.stats;
    if (!remat) {
      if (this.#pricing === call) {
        this.#pricing = null;
        call.cost = this.#cost.callCost(
          {
            op: call.op,
            params: call.params,
            index: this.callIndex - this.stepBase,
            totalBytes: call.totalBytes,
          },
          measured,
        );
        for (const s of fresh) s.compute = storageCompute(s);
        for (const o of outs) if (o.isAlias) o.storage.compute = storageCompute(o.storage);
        this.lineage.invalidateNeighborhoods();
      }
      st.computeNs += call.cost;
      if (measured !== undefined) st.kernelNs += measured;
    } else {
      st.remats++;
      // In the cost model's units, like computeNs (the thrash limit compares the
      // two); the measured time goes to kernelNs.
      st.recomputeNs += this.#cost.measures === false ? call.cost : measured ?? call.cost;
      if (measured !== undefined) st.kernelNs += measured;
    }
    this.clock += call.cost;
    this.copyEngine?.compute(remat ? (measured ?? call.cost) : call.cost);
    this.#addUsed(call.totalBytes);
    for (let i = 0; i < outs.length; i++) {
      const o = outs[i]!;
      if (o.defined) {
        if (call.aliases[i]! < 0) this.used -= call.sizes[i]!;
      } else if (o.storage.residency !== "freed") {
        o.defined = true;
      } else if (call.aliases[i]! < 0) {
        this.used -= call.sizes[i]!;
      }
    }
    for (const s of fresh) {
      s.residency = "resident";
      if (s.eq !== null) {
        addToClass(s.eq, -s.compute);
        s.eq = null;
      }
      if (remat) {
        s.remats++;
        st.rematBytes += s.bytes;
      }
      this.#refreshPool(s);
    }
    if (remat) {
      this.timeline.mark(this.callIndex, this.used, "remat", call.outputs[0]?.name ?? call.op);
      if (this.#onEvent) {
        this.#emit({
          type: "remat",
          how: "recompute",
          name: call.outputs[0]?.name ?? "",
          bytes: call.totalBytes,
        });
      }
      this.#checkThrash();
    }
  }
}

function checkLimit(limit: number): number {
  if (!(limit >= 1)) {
    throw new RangeError(`overhead limit must be a number >= 1 (or Infinity), got ${limit}`);
  }
  return limit;
}

function allFreed(call: CallNode): boolean {
  for (const o of call.outputs) if (o.storage.residency !== "freed") return false;
  return true;
}

/** Tensors that were defined when their storage was swapped out (restored on swap-in). */
const swappedDefined = new WeakMap<StorageNode, TensorNode[]>();
