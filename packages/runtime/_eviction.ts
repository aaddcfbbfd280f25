/**
 * Memory accounting and eviction: the device and host bytes in use, pool
 * membership (resident, unlocked, unpinned storages), `reserve` (asking the
 * policy for victims until a request fits the budget), dropping and swapping
 * victims out, swapping them back in, and the thrash limit.
 *
 * @module
 */

import { type EvictAction, needsOf, type Victim } from "@libra/evict";
import { NO_CLASS, type StorageNode, type TensorNode } from "@libra/lineage";
import type { Engine } from "./engine.ts";
import type { EngineState } from "./_engine_state.ts";
import { OutOfBudgetError, ThrashingError } from "./errors.ts";
import type { RuntimeEvent } from "./stats.ts";
import { collect } from "./_upkeep.ts";

/** Milliseconds (the engine's timer for bookkeeping statistics). */
export const now = (): number => performance.now();

let clockNs = -1;

/**
 * What one {@link now} costs, ns: a sampled interval takes out the reads it
 * made inside (a kernel timed within it) and half of each of its own.
 * Measured at the first call, 3-7 ms once: the least of four rounds of 4096
 * reads (the first few hundred reads, not yet compiled, cost 2-6 times what
 * reads cost in the runtime's hot paths, ~100-150 ns here).
 */
export function clockCost(): number {
  if (clockNs < 0) {
    clockNs = Infinity;
    for (let r = 0; r < 4; r++) {
      const t0 = now();
      for (let i = 0; i < 4096; i++) now();
      clockNs = Math.min(clockNs, ((now() - t0) * 1e6) / 4097);
    }
  }
  return clockNs;
}

/** Tensors that were defined when their storage was swapped out (restored on swap-in). */
const swappedDefined = new WeakMap<StorageNode, TensorNode[]>();

/** Sends `ev` to the listener, if any. */
export function emit(k: EngineState, ev: RuntimeEvent): void {
  k.onEvent?.(ev);
}

/** Counts `bytes` more in use on the device (and the peak). */
export function addUsed(e: Engine, bytes: number): void {
  e.used += bytes;
  if (e.used > e.stats.peakBytes) e.stats.peakBytes = e.used;
}

/** True when `s` belongs in the evictable pool. */
export function evictable(k: EngineState, s: StorageNode): boolean {
  return s.residency === "resident" && s.locks === 0 && !s.pinned &&
    (s.droppable || k.hostLimit > 0);
}

/** Adds `s` to the pool or removes it, as its state says (and while the pool is kept). */
export function refreshPool(k: EngineState, s: StorageNode): void {
  if (k.pooled && evictable(k, s)) k.pool.add(s);
  else k.pool.remove(s);
}

/** Locks `s` (out of the pool while locked). */
export function lock(k: EngineState, s: StorageNode): void {
  if (s.locks === 0) k.pool.remove(s);
  s.locks++;
}

/** Unlocks `s` (back in the pool when evictable). */
export function unlock(k: EngineState, s: StorageNode): void {
  s.locks--;
  if (s.locks === 0 && k.pooled && evictable(k, s)) k.pool.add(s);
}

/** Whether some action may evict `s` now (dropped, or swapped where the host has room). */
function actionable(k: EngineState, s: StorageNode): boolean {
  return s.droppable || k.ctx.canSwap(s);
}

/** Bytes of the evictable pool that some action may evict now. */
export function evictableBytes(e: Engine, k: EngineState): number {
  let b = 0;
  const count = (s: StorageNode) => {
    if (actionable(k, s)) b += s.bytes;
  };
  if (!k.pool.deferred) { for (const s of k.pool.items) count(s); }
  else for (const s of e.lineage.storages.values()) if (s.poolIndex === -2) count(s);
  return b;
}

/**
 * The bytes on the device that no eviction can free now: `lockedBytes` of
 * values locked as inputs of calls running or being re-materialized, and
 * `keptBytes` of the others that are pinned, or neither droppable nor
 * swappable (for {@link OutOfBudgetError}'s message).
 */
export function heldBytes(e: Engine, k: EngineState): { lockedBytes: number; keptBytes: number } {
  let lockedBytes = 0, keptBytes = 0;
  for (const s of e.lineage.storages.values()) {
    if (s.residency !== "resident") continue;
    if (s.locks > 0) lockedBytes += s.bytes;
    else if (s.pinned || !actionable(k, s)) keptBytes += s.bytes;
  }
  return { lockedBytes, keptBytes };
}

/**
 * Throws {@link ThrashingError} when recomputation plus stalls passed
 * `(limit - 1)` x the budget-free compute (the check DTR's simulator makes
 * after every materialization), stalls as priced (`thrashStallNs`).
 */
export function checkThrash(e: Engine, k: EngineState): void {
  const limit = k.overheadLimit;
  if (limit === Infinity) return;
  const st = e.stats;
  const base = k.baselineComputeNs ?? st.computeNs;
  const extra = st.recomputeNs + k.thrashStallNs;
  if (extra <= (limit - 1) * base) return;
  st.oomErrors++;
  e.timeline.mark(e.callIndex, e.used, "oom", "thrashing");
  emit(k, { type: "oom", bytes: 0, usedBytes: e.used, reason: "thrashing" });
  throw new ThrashingError({
    neededBytes: 0,
    usedBytes: e.used,
    evictableBytes: evictableBytes(e, k),
    budgetBytes: k.budget,
    ...(k.knownFeasible !== undefined ? { knownFeasibleBytes: k.knownFeasible } : {}),
    recomputeNs: st.recomputeNs,
    stallNs: k.thrashStallNs,
    overheadLimit: limit,
    baselineComputeNs: base,
  });
}

/**
 * Searches timed in {@link reserve}: one in this many on average (the gaps
 * between them drawn at random, 1 to 2x-1, so that a step whose searches
 * repeat with some period is not sampled at one phase of it). Three clock
 * reads on every search cost ~0.4 us, as much as the rest of an eviction by
 * the oldest-first policy.
 */
export const SEARCH_SAMPLE = 16;

/**
 * Whether {@link reserve} times the search it is about to make, and with
 * what weight (set in `k.searchWeight`): always, with weight 1, while the
 * executor times the call around it (a dispatch sample takes out the
 * bookkeeping counted within it, so that must be what the search took);
 * otherwise at the end of each random gap, weighted by the gap's length (the
 * searches it stands for: the counted total is the searches' number).
 */
function timesSearch(k: EngineState): boolean {
  if (k.exec.sampling === true) {
    k.searchWeight = 1;
    return true;
  }
  if (--k.searchGap > 0) return false;
  k.searchWeight = k.searchGapLength;
  // xorshift32: statistics only, never a decision.
  let r = k.searchRng;
  r ^= r << 13;
  r ^= r >>> 17;
  r ^= r << 5;
  k.searchRng = r;
  k.searchGap = k.searchGapLength = 1 + ((r >>> 0) % (2 * SEARCH_SAMPLE - 1));
  return true;
}

/** What {@link reserve} starts each round with (shared: a list a round was garbage on every call). */
const NO_VICTIMS: readonly Victim[] = Object.freeze([]);

/** Frees memory until `bytes` more fit in the budget, or throws {@link OutOfBudgetError}. */
export function reserve(e: Engine, k: EngineState, bytes: number): void {
  if (e.used + bytes <= k.budget) return;
  let collected = false;
  while (e.used + bytes > k.budget) {
    let victims: readonly Victim[] = NO_VICTIMS;
    let t0 = 0, t1 = 0;
    // The search and the drops it chose (release, pool, classes) are one interval, timed
    // in a sample of searches (see `timesSearch`); a clock read costs ~0.1 us, about what
    // a drop does.
    let timed = false;
    if (k.pool.deferred) {
      // Once: the first search lays the pool out (see `Pool`), in the bookkeeping.
      const t = now();
      k.pool.layOut(e.lineage.storages.values());
      e.stats.bookkeepingNs += (now() - t) * 1e6;
    }
    if (k.pool.size > 0) {
      k.bytesNeeded = e.used + bytes - k.budget;
      timed = timesSearch(k);
      if (timed) t0 = now();
      if (!k.eqClasses) keepClassesIfNeeded(e, k);
      victims = k.policy.choose(k.ctx);
      if (timed) {
        t1 = now();
        e.stats.policyNs += k.searchWeight * (t1 - t0) * 1e6;
      }
    }
    if (victims.length === 0 && timed) e.stats.bookkeepingNs += k.searchWeight * (t1 - t0) * 1e6;
    if (victims.length === 0 && k.gc && !collected) {
      // Unreferenced leaves nothing needs may still hold memory: collect, retry.
      collected = true;
      if (collect(e, k) > 0) continue;
    }
    if (victims.length === 0) {
      const err = new OutOfBudgetError({
        neededBytes: bytes,
        usedBytes: e.used,
        evictableBytes: evictableBytes(e, k),
        ...heldBytes(e, k),
        budgetBytes: k.budget,
        // A budget at or below this one did not complete this step: not known to work.
        ...(k.knownFeasible !== undefined && k.knownFeasible > k.budget
          ? { knownFeasibleBytes: k.knownFeasible }
          : {}),
      });
      e.stats.oomErrors++;
      e.timeline.mark(e.callIndex, e.used, "oom", "");
      emit(k, { type: "oom", bytes, usedBytes: e.used });
      throw err;
    }
    // A swap's copy is its stall, counted apart: with one, the interval is the search
    // alone, and each drop times its own merge (an empty search's time was counted above).
    let drops = true;
    for (const v of victims) if (v.action !== "drop") drops = false;
    for (const v of victims) evict(e, k, v.storage, v.action, "policy", drops);
    if (timed) e.stats.bookkeepingNs += k.searchWeight * ((drops ? now() : t1) - t0) * 1e6;
  }
}

/**
 * Starts keeping the evictable pool at the first finite budget: every
 * evictable storage of the moment enters it, in the order they were made
 * (kept from the start, the order would be the one they last became
 * evictable in, which sets the candidates a search sees and its ties).
 */
export function keepPoolIfNeeded(e: Engine, k: EngineState): void {
  if (k.pooled || k.budget === Infinity) return;
  k.pooled = true;
  for (const s of e.lineage.storages.values()) {
    if (evictable(k, s)) k.pool.add(s);
  }
}

/**
 * Starts keeping `dtr-eq`'s equivalence classes when a policy that needs them
 * first chooses (before that, an eager drop's class would be work for nothing
 * on every free: a run whose budget is never reached keeps none). The
 * storages evicted by then form the classes of their connected evicted
 * regions, as if they had been evicted with classes kept, except that what
 * was freed meanwhile counts in none (it is gone from the graph). Kept for
 * good from then on.
 */
export function keepClassesIfNeeded(e: Engine, k: EngineState): void {
  if (k.eqClasses || k.budget === Infinity || !needsOf(k.policy).equivalenceClasses) return;
  k.eqClasses = true;
  for (const s of e.lineage.storages.values()) {
    if (s.residency === "evicted" && e.lineage.classOf(s) === NO_CLASS) {
      e.lineage.joinEvictedClass(s);
    }
  }
}

/** Evicts a resident, unlocked, unpinned storage by dropping or swapping it. */
export function evict(
  e: Engine,
  k: EngineState,
  s: StorageNode,
  action: EvictAction,
  why: "policy" | "eager" | "plan",
  timedByCaller = false,
): void {
  if (s.residency !== "resident" || s.locks > 0 || s.pinned) {
    throw new Error(
      `evict ${s.name}: storage is ${s.residency}${s.locks > 0 ? ", locked" : ""}${
        s.pinned ? ", pinned" : ""
      } (the policy returned a storage outside the evictable pool)`,
    );
  }
  if (action === "drop") drop(e, k, s, why, timedByCaller);
  else swapOut(e, k, s);
}

function drop(
  e: Engine,
  k: EngineState,
  s: StorageNode,
  why: "policy" | "eager" | "plan",
  timedByCaller: boolean,
): void {
  if (!s.droppable) {
    throw new Error(`evict ${s.name}: a leaf (no replayable producer) cannot be dropped`);
  }
  k.exec.release(s);
  s.residency = "evicted";
  for (const t of s.tensors) t.defined = false;
  e.used -= s.bytes;
  k.pool.remove(s);
  s.evictions++;
  const st = e.stats;
  if (why === "eager") st.eagerDrops++;
  else {
    st.evictions++;
    st.drops++;
    st.dropBytes += s.bytes;
  }
  // Eager drops (a value freed by its last handle) are not timed: two clock
  // reads cost more than the merge they would measure, on every free.
  const timed = why !== "eager" && !timedByCaller;
  if (k.eqClasses) {
    const t0 = timed ? now() : 0;
    e.lineage.joinEvictedClass(s);
    if (timed) st.bookkeepingNs += (now() - t0) * 1e6;
  }
  if (e.recordDecisions && why !== "eager") e.decisions.push(`drop:${s.name}`);
  // Names read only where kept: a carried name is made when first read (see `NameScope`).
  if (why !== "eager" && e.timeline.enabled) e.timeline.mark(e.callIndex, e.used, "drop", s.name);
  if (k.onEvent) {
    emit(k, {
      type: "evict",
      action: "drop",
      name: s.name,
      bytes: s.bytes,
      eager: why === "eager",
    });
  }
}

function swapOut(e: Engine, k: EngineState, s: StorageNode): void {
  if (e.hostUsed + s.bytes > k.hostLimit) {
    throw new Error(
      `swap ${s.name}: host pool full (${e.hostUsed} + ${s.bytes} > ${k.hostLimit} bytes); raise hostLimitBytes`,
    );
  }
  const defined = s.tensors.filter((t) => t.defined);
  const measured = k.exec.swapOut(s);
  const sync = measured !== undefined || e.copyEngine === null;
  // Asynchronous: the memory stays held until the copy ends (a call that
  // needs it waits in `_remat.ts`); nothing stalls now.
  if (!sync) e.copyEngine!.swapOut(s.bytes);
  s.residency = "swapped";
  s.host = s.host ?? undefined;
  swappedDefined.set(s, defined);
  for (const t of s.tensors) t.defined = false;
  e.used -= s.bytes;
  e.hostUsed += s.bytes;
  k.pool.remove(s);
  s.evictions++;
  const st = e.stats;
  st.evictions++;
  st.swapOuts++;
  st.swapOutBytes += s.bytes;
  if (sync) chargeSyncSwap(e, k, measured, s.bytes);
  if (e.recordDecisions) e.decisions.push(`swap:${s.name}`);
  if (e.timeline.enabled) e.timeline.mark(e.callIndex, e.used, "swap-out", s.name);
  if (k.onEvent) {
    emit(k, { type: "evict", action: "swap", name: s.name, bytes: s.bytes, eager: false });
  }
}

/**
 * Counts a synchronous swap of `bytes`, which the executor timed at `measured`
 * ns or did not time: its stall (`stats.swapStallNs`) as measured, else as the
 * cost model prices it; and what moves the clock and counts toward the thrash
 * limit (`thrashStallNs`) as the cost model prices it unless the model
 * measures. The clock orders the storages' staleness, which the policies'
 * scores read: a measured copy time there made a swap-aware run's choices
 * differ from run to run (216-226 evictions, a different digest each time, on
 * gpt small at ratio 0.4), and in the limit made whether a run stopped depend
 * on how long a copy took.
 */
function chargeSyncSwap(
  e: Engine,
  k: EngineState,
  measured: number | undefined,
  bytes: number,
): void {
  const stall = measured ?? k.cost.swapCost(bytes);
  const tick = measured !== undefined && k.cost.measures === false ? k.cost.swapCost(bytes) : stall;
  e.stats.swapStallNs += stall;
  k.thrashStallNs += tick;
  e.clock += tick;
}

/**
 * When the swap-in of `s` on the copy stream completes (copy-engine time), or
 * -1 when none is pending; forgets it either way.
 */
export function takeReady(k: EngineState, s: StorageNode): number {
  const t = s.readyAt;
  if (t >= 0) {
    s.readyAt = -1;
    k.readyCount--;
  }
  return t;
}

/** Brings swapped `s` back into new device memory (reserving it first). */
export function swapIn(e: Engine, k: EngineState, s: StorageNode): void {
  reserve(e, k, s.bytes);
  const measured = k.exec.swapIn(s);
  const sync = measured !== undefined || e.copyEngine === null;
  if (!sync) {
    // Asynchronous: the call that reads it waits for the copy (`_remat.ts`).
    if (s.readyAt < 0) k.readyCount++;
    s.readyAt = e.copyEngine!.swapIn(s.bytes).endNs;
  }
  s.residency = "resident";
  e.hostUsed -= s.bytes;
  addUsed(e, s.bytes);
  for (const t of swappedDefined.get(s) ?? [s.tensors[0]!]) t.defined = true;
  swappedDefined.delete(s);
  s.remats++;
  const st = e.stats;
  st.swapIns++;
  st.swapInBytes += s.bytes;
  if (sync) chargeSyncSwap(e, k, measured, s.bytes);
  refreshPool(k, s);
  if (e.timeline.enabled) e.timeline.mark(e.callIndex, e.used, "swap-in", s.name);
  if (k.onEvent) emit(k, { type: "remat", how: "swap", name: s.name, bytes: s.bytes });
  checkThrash(e, k);
}
