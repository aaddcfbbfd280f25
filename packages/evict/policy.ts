/**
 * The `EvictionPolicy` contract and the shared candidate search.
 *
 * The runtime keeps the pool of evictable storages (resident, unpinned,
 * unlocked) and asks its policy for victims whenever memory runs short. A
 * score-based policy only defines `score` (lower = evict first); the search
 * over the pool (full scan, sqrt(N) sampling, a minimum storage size) is shared.
 *
 * @module
 */

import type { CostModel } from "@libra/cost";
import type { Lineage, StorageNode } from "@libra/lineage";
import { mulberry32, mulberry32On } from "@libra/util/rng";
import { clearList } from "@libra/util/list";

/** What to do with a victim: drop it (recompute later) or swap it to host. */
export type EvictAction = "drop" | "swap";

/** One storage to evict and how. */
export interface Victim {
  /** The storage to evict. */
  readonly storage: StorageNode;
  /** Drop or swap. */
  readonly action: EvictAction;
}

import {
  leastBounds,
  type SampleBounds,
  sampleBounds,
  SLOT_BYTES,
  SLOT_COMPUTE,
  SLOT_FLOOR,
  SLOT_LAST_ACCESS,
  SLOT_STRIDE,
} from "./sample_bounds.ts";

export { SLOT_BYTES, SLOT_COMPUTE, SLOT_FLOOR, SLOT_LAST_ACCESS, SLOT_STRIDE };

/** The evictable pool: insertion-ordered, with O(1) random access for sampling. */
export interface EvictablePool {
  /** Number of evictable storages. */
  readonly size: number;
  /** Storage at position `i` (0 <= i < size); positions change as the pool changes. */
  at(i: number): StorageNode;
  /** Iterates in insertion order (oldest first). */
  [Symbol.iterator](): Iterator<StorageNode>;
  /**
   * Optional copies of the fields a score reads, one record of
   * {@link SLOT_STRIDE} numbers per position `i` from `i * SLOT_STRIDE`: the
   * member's `lastAccess`, `compute` and `bytes` at {@link SLOT_LAST_ACCESS},
   * {@link SLOT_COMPUTE} and {@link SLOT_BYTES}, equal to the storage's own
   * while a policy chooses, and the policy's {@link SLOT_FLOOR}. A sampled
   * search reads a candidate's record (one cache line) instead of the storage
   * (several) to rule it out by a {@link ScorePolicy.localBound}.
   */
  readonly slots?: Float64Array;
  /**
   * Optional, with {@link slots}: writes the members' positions in insertion
   * order (the order the iterator visits them) into `out` (at least `size`
   * long) and returns it. The full scan then reads the slots in that order
   * and scores only the members a bound cannot rule out (same victim).
   */
  order?(out: Int32Array): Int32Array;
  /**
   * Optional, with {@link slots}: the position of member `s` (-1 when it is
   * none). A policy that keeps floors clears the floors of the members whose
   * floor lapsed by it; without it, every floor.
   */
  positionOf?(s: StorageNode): number;
}

/** What a policy may look at when choosing. */
export interface EvictionContext {
  /** The staleness clock (cost units). */
  readonly clock: number;
  /** Evictable storages. */
  readonly pool: EvictablePool;
  /** The lineage graph (neighbourhoods, equivalence classes). */
  readonly lineage: Lineage;
  /** The cost model (swap cost for swap-aware policies). */
  readonly costModel: CostModel;
  /** Bytes that must be freed. */
  readonly bytesNeeded: number;
  /** True when `s` may be dropped (it has a replayable producer). */
  canDrop(s: StorageNode): boolean;
  /** True when `s` may be swapped now (swapping enabled and host pool has room). */
  canSwap(s: StorageNode): boolean;
  /**
   * True when every storage in the pool may be dropped (the runtime admits
   * only droppable storages when it has no host memory), so a search need not
   * ask {@link canDrop} per candidate.
   */
  readonly onlyDroppable?: boolean;
  /**
   * A native {@link sampleBounds} (bitwise the same results), used by the
   * sampled search in its place; the runtime passes its backend's.
   */
  readonly sampleBounds?: SampleBounds;
}

/**
 * What a policy needs the runtime to provide or maintain, declared instead of
 * inferred from its name (as the published DTR simulator's heuristics declare
 * the features they read). Absent fields are false.
 */
export interface PolicyNeeds {
  /**
   * The policy chooses between dropping and swapping: the runtime gives it
   * host memory unless told otherwise (`hostLimitBytes`).
   */
  readonly swaps?: boolean;
  /**
   * The policy reads `dtr-eq`'s union-find of evicted equivalence classes
   * (`Lineage.neighborClassCost`): the runtime builds and maintains them on
   * eviction and re-materialization. Without it no classes are kept.
   */
  readonly equivalenceClasses?: boolean;
  /**
   * The policy reads evicted regions (`Lineage.evictedNeighborhoodCost`,
   * whose cache the lineage keeps up to date from the first question on; a
   * replayer with its own region bookkeeping maintains it only when asked).
   */
  readonly regions?: boolean;
}

/** What a policy that declares no {@link PolicyNeeds} gets: equivalence classes, no host memory. */
export const UNDECLARED_NEEDS: Readonly<Required<PolicyNeeds>> = Object.freeze({
  swaps: false,
  equivalenceClasses: true,
  regions: false,
});

/** The needs of `policy`, with {@link UNDECLARED_NEEDS} when it declares none. */
export function needsOf(policy: EvictionPolicy): Readonly<Required<PolicyNeeds>> {
  const n = policy.needs;
  if (n === undefined) return UNDECLARED_NEEDS;
  return {
    swaps: n.swaps === true,
    equivalenceClasses: n.equivalenceClasses === true,
    regions: n.regions === true,
  };
}

/**
 * The `EvictionPolicy` contract (ARCHITECTURE.md). `choose` returns at least one
 * victim from the pool with an action the context allows, or an empty list
 * when nothing in the pool may be evicted.
 */
export interface EvictionPolicy {
  /** Name, e.g. `"dtr-eq"` (for reports; the runtime reads {@link needs}, never the name). */
  readonly name: string;
  /**
   * What the runtime must provide or maintain for this policy. A policy that
   * declares nothing gets {@link UNDECLARED_NEEDS} (equivalence classes kept,
   * as a policy reading them would need).
   */
  readonly needs?: PolicyNeeds;
  /** Picks victims to free `ctx.bytesNeeded`. */
  choose(ctx: EvictionContext): Victim[];
  /**
   * Called by the runtime when a step starts (`Runtime.endStep`): a policy
   * whose choices draw on state of its own (a sampled search's random
   * numbers) restarts it, so that a step's choices depend on that step alone
   * and not on how many steps ran before (a warm-up's length varies with the
   * machine's speed).
   */
  startStep?(): void;
  /** Optional hooks for static plans (see `planner.ts`). */
  readonly hooks?: PlanHooks;
}

/** Control surface a plan uses from its hooks. */
export interface PlanControl {
  /** Evicts a tensor by trace/handle name now, if resident and evictable. Returns whether it did. */
  evict(name: string, action: EvictAction): boolean;
  /** Brings a tensor back now (recompute or swap-in; prefetch where async). Returns whether it did. */
  restore(name: string): boolean;
}

/** Hooks the runtime calls around every model call (index = call sequence number). */
export interface PlanHooks {
  /** Called before model call `index`. */
  beforeCall?(index: number, ctl: PlanControl): void;
  /** Called after model call `index`. */
  afterCall?(index: number, ctl: PlanControl): void;
}

/** How the shared candidate search looks at the pool. */
export interface SearchOptions {
  /**
   * `"full"` scans every storage; `"sqrt"` scores ceil(sqrt(N)) random ones
   * of a pool of N above {@link fullUpTo}. Default `"full"`.
   */
  mode?: "full" | "sqrt";
  /**
   * With `"sqrt"`: a pool of at most this many storages is scanned in full,
   * as `"full"` does (a non-negative integer, or Infinity). Default 16.
   */
  fullUpTo?: number;
  /** Storages smaller than this are skipped unless nothing else is evictable. Default 0. */
  minBytes?: number;
  /** Seed of the sampling generator. Default 1. */
  seed?: number;
}

const NO_NEEDS: PolicyNeeds = Object.freeze({});

/** A small seeded generator (mulberry32), deterministic across runs. */
export function seededRandom(seed: number): () => number {
  return mulberry32(seed);
}

/**
 * A policy defined by a score (lower = evict first) and, for swap-aware
 * policies, a per-victim action.
 */
export abstract class ScorePolicy implements EvictionPolicy {
  abstract readonly name: string;
  /** What the score reads (none by default; see {@link PolicyNeeds}). */
  readonly needs: PolicyNeeds = NO_NEEDS;
  readonly #mode: "full" | "sqrt";
  readonly #fullUpTo: number;
  readonly #minBytes: number;
  readonly #rng: () => number;
  /** The state {@link #rng} draws from (`#boundedSample` draws from it in place). */
  readonly #rngState = new Int32Array(1);
  /** The seed {@link #rngState} starts from, and restarts from at each step. */
  readonly #seed: number;
  /** Storages scored by the last `choose` (bookkeeping statistics). */
  scored = 0;

  /** A policy whose candidate search follows `search`. */
  constructor(search: SearchOptions = {}) {
    this.#mode = search.mode ?? "full";
    const upTo = search.fullUpTo ?? 16;
    if (!(upTo === Infinity || (Number.isInteger(upTo) && upTo >= 0))) {
      throw new RangeError(
        `search.fullUpTo must be a non-negative integer or Infinity, got ${search.fullUpTo}`,
      );
    }
    this.#fullUpTo = upTo;
    this.#minBytes = search.minBytes ?? 0;
    this.#seed = search.seed ?? 1;
    this.#rngState[0] = this.#seed;
    this.#rng = mulberry32On(this.#rngState);
  }

  /** Restarts the sampled search's random numbers from the seed (see {@link EvictionPolicy.startStep}). */
  startStep(): void {
    this.#rngState[0] = this.#seed;
  }

  /** Score of evicting `s` (lower = evict first). */
  abstract score(s: StorageNode, ctx: EvictionContext): number;

  /**
   * Optional cheap lower bound of {@link score} (never above it, in floating
   * point too). When defined, the full scan only scores storages whose bound
   * does not exceed one known score, which cannot change the victim.
   */
  lowerBound?(s: StorageNode, ctx: EvictionContext): number;

  /**
   * True when {@link score} is never below the local score
   * `(compute + floor) / (bytes x (clock - lastAccess))` (Infinity when that
   * denominator is not positive), in floating point too, while
   * {@link slotBoundHolds}; `floor` is the member's {@link SLOT_FLOOR} for a
   * policy with a {@link floorEpoch}, else 0. When true and the pool keeps
   * {@link EvictablePool.slots}, the sampled search computes that bound from
   * each sampled member's slot and scores only the storages whose bound does
   * not exceed one known score (same victim). The search computes it itself:
   * a bound method called per candidate, even one the compiler inlined, left
   * a heap number per candidate (~1.5 KB of garbage per search of 95).
   */
  protected readonly localBound: boolean = false;

  /**
   * Optional: the epoch within which the part of a score that
   * {@link lastFloor} reports only grows (while {@link slotBoundHolds}). A
   * policy that defines it keeps, in each scored member's
   * {@link SLOT_FLOOR}, a lower bound of that part, and gets it back as the
   * {@link localBound}'s `floor` until the epoch changes (0 otherwise): a
   * member scored once is then ruled out by its bound alone.
   */
  protected floorEpoch?(ctx: EvictionContext): number;

  /** Set by {@link slotScore} of a policy with a {@link floorEpoch}: the growing part it found. */
  protected lastFloor = 0;

  /**
   * Optional, with {@link floorEpoch}: how much the floored part may have
   * fallen in all, within the epoch, for members {@link floorLapsed} does not
   * name (never decreasing). A floor kept when this was `d` holds, less the
   * growth of this since: the slot keeps the floor plus `d`.
   */
  protected floorSlack?(ctx: EvictionContext): number;

  /**
   * Optional, with {@link floorEpoch}: the members whose floored part may
   * have fallen by more than {@link floorSlack} says since their floors were
   * kept; the search clears their floors and empties the list.
   */
  protected floorLapsed?(ctx: EvictionContext): StorageNode[];

  /**
   * Optional, with {@link floorEpoch}: a lower bound, now, of the floored
   * part of the score of each neighbour of `v` (see
   * {@link Lineage.neighbors}), a victim this policy chose; `undefined` when
   * it gives none. The next search that keeps the floors raises those of the
   * members among `v`'s neighbours to it: an eviction grows exactly their
   * parts, and their bounds would otherwise stay what they were, low enough
   * that a search scored them for nothing (they were about as stale as the
   * victim). In the 10k-live dispatch stream with `dtr-eq`: 2.9 storages
   * scored a search without, 1.7 with.
   */
  protected evictedFloor?(v: StorageNode, ctx: EvictionContext): number | undefined;

  /**
   * Optional {@link score} of `s` with its `compute`, `bytes` and
   * `lastAccess` given (the pool's copies, equal to its own): the sampled
   * search over {@link EvictablePool.slots} scores through it, so the
   * storage's own fields need not be read again.
   */
  slotScore?(
    s: StorageNode,
    compute: number,
    bytes: number,
    lastAccess: number,
    ctx: EvictionContext,
  ): number;

  /** True when the {@link localBound} holds now (default true). */
  protected slotBoundHolds(_ctx: EvictionContext): boolean {
    return true;
  }

  /** Action for a chosen victim; default: drop when allowed, else swap. */
  action(s: StorageNode, ctx: EvictionContext): EvictAction {
    // With only droppable members in the pool, no need to ask (a storage's `droppable`
    // reads its producer through its first tensor, nodes seldom cached: 1.7% of a
    // profile of the 10k-live dispatch stream).
    return ctx.onlyDroppable === true || ctx.canDrop(s) ? "drop" : "swap";
  }

  /** True when the context allows some action on `s` (a pool member). */
  protected allowed(s: StorageNode, ctx: EvictionContext): boolean {
    return ctx.onlyDroppable === true || ctx.canDrop(s) || ctx.canSwap(s);
  }

  choose(ctx: EvictionContext): Victim[] {
    const best = this.#search(ctx, this.#minBytes) ??
      (this.#minBytes > 0 ? this.#search(ctx, 0) : null);
    if (best === null) return [];
    if (this.evictedFloor !== undefined) {
      const victims = this.#victims;
      // A choice a search never follows names none for good (floors are only raised).
      if (victims.length === VICTIMS_KEPT) clearList(victims);
      victims.push(best);
    }
    return [{ storage: best, action: this.action(best, ctx) }];
  }

  /** Victims chosen since the last search that readied floors (see {@link evictedFloor}). */
  readonly #victims: StorageNode[] = [];

  #search(ctx: EvictionContext, minBytes: number): StorageNode | null {
    const pool = ctx.pool;
    const n = pool.size;
    let best: StorageNode | null = null;
    let bestScore = Infinity;
    let scored = 0;
    if (this.#mode === "sqrt" && n > this.#fullUpTo) {
      const k = Math.ceil(Math.sqrt(n));
      const slots = pool.slots;
      if (
        slots !== undefined && this.localBound && this.slotBoundHolds(ctx)
      ) {
        best = this.#boundedSample(ctx, slots, k, minBytes);
        if (best !== null) return best;
      } else {
        for (let j = 0; j < k; j++) {
          const s = pool.at(Math.floor(this.#rng() * n));
          if (s.bytes < minBytes || !this.allowed(s, ctx)) continue;
          const sc = this.score(s, ctx);
          scored++;
          if (sc <= bestScore) {
            bestScore = sc;
            best = s;
          }
        }
        if (best !== null) {
          this.scored = scored;
          return best;
        }
      }
    }
    const slots = pool.slots;
    if (
      slots !== undefined && pool.order !== undefined && this.localBound &&
      this.slotBoundHolds(ctx)
    ) return this.#slotScan(ctx, slots, minBytes);
    if (this.lowerBound !== undefined) return this.#boundedScan(ctx, minBytes);
    // Full scan in pool order; ties go to the later storage and a zero score
    // stops the scan, as in DTR's simulator (so figures are comparable).
    for (const s of pool) {
      if (s.bytes < minBytes || !this.allowed(s, ctx)) continue;
      const sc = this.score(s, ctx);
      scored++;
      if (sc <= bestScore) {
        bestScore = sc;
        best = s;
      }
      if (sc === 0) break;
    }
    this.scored = scored;
    return best;
  }

  /**
   * The full scan's victim, scoring fewer storages: every storage whose lower
   * bound exceeds the score of the storage with the smallest bound scores
   * above the minimum, so it can be neither the last minimal storage in pool
   * order nor a zero that stops the scan; skipping it leaves the choice as is.
   */
  #boundedScan(ctx: EvictionContext, minBytes: number): StorageNode | null {
    const cands = this.#cands, bounds = this.#bounds;
    clearList(cands);
    clearList(bounds);
    let first = -1, firstBound = Infinity;
    for (const s of ctx.pool) {
      if (s.bytes < minBytes || !this.allowed(s, ctx)) continue;
      const b = this.lowerBound!(s, ctx);
      if (b < firstBound) {
        firstBound = b;
        first = cands.length;
      }
      cands.push(s);
      bounds.push(b);
    }
    let scored = 0;
    let firstScore = Infinity;
    if (first >= 0) {
      firstScore = this.score(cands[first]!, ctx);
      scored++;
    }
    const limit = firstScore;
    let best: StorageNode | null = null;
    let bestScore = Infinity;
    for (let i = 0; i < cands.length; i++) {
      if (bounds[i]! > limit) continue;
      const s = cands[i]!;
      let sc: number;
      if (i === first) sc = firstScore;
      else {
        sc = this.score(s, ctx);
        scored++;
      }
      if (sc <= bestScore) {
        bestScore = sc;
        best = s;
      }
      if (sc === 0) break;
    }
    clearList(cands);
    clearList(bounds);
    this.scored = scored;
    return best;
  }

  readonly #cands: StorageNode[] = [];
  readonly #bounds: number[] = [];

  /**
   * The full scan's victim (in pool order, ties to the later storage, a zero
   * score stopping the scan) from the pool's slots, scoring few storages by
   * their {@link localBound}: those of bound at most zero in pool order (where
   * any zero or negative score is), then, if that found neither, the others in
   * increasing order of bound while it is at most the lowest score so far;
   * one left scores above it. (The plain scan of `dtr-eq` walked every
   * member's neighbourhood: 75 us a search on a pool of ~2000 storages;
   * scoring in pool order those with a bound below the lowest score so far
   * still scored 42 of ~800 on lstm small at ratio 0.7.)
   */
  #slotScan(ctx: EvictionContext, slots: Float64Array, minBytes: number): StorageNode | null {
    const pool = ctx.pool, n = pool.size, only = ctx.onlyDroppable === true;
    const clock = ctx.clock;
    const floors = this.floorEpoch !== undefined;
    const keep = this.#readyFloors(ctx, slots, n), slack = this.#slack;
    if (this.#scanOrder.length < n) {
      this.#scanOrder = new Int32Array(2 * n);
      this.#scanRank = new Int32Array(2 * n);
      this.#scanBounds = new Float64Array(2 * n);
      this.#scanHeap = new Int32Array(2 * n);
    }
    // The bound of the member at each position, read in position order (the slots one
    // after another; pool order is needed only where zeros or ties are): a NaN bound as
    // -Infinity (such a member is always scored), NaN for a member the search skips.
    const bounds = this.#scanBounds;
    let m = 0, first = -1, firstBound = Infinity;
    for (let i = 0; i < n; i++) {
      const o = i * SLOT_STRIDE;
      const bytes = slots[o + SLOT_BYTES]!;
      if (bytes < minBytes || (!only && !this.allowed(pool.at(i), ctx))) {
        bounds[i] = NaN;
        continue;
      }
      // The local bound (see `localBound`), as `localScore` in policies.ts computes it.
      // Written out here and in `#boundedSample` on purpose: one function serving both
      // doubled this scan's time (6 vs 12 us a search in the bench's full-scan group).
      const c = slots[o + SLOT_COMPUTE]! + (floors ? floorOf(slots[o + SLOT_FLOOR]!, slack) : 0);
      const den = bytes * (clock - slots[o + SLOT_LAST_ACCESS]!);
      let b = den > 0 ? c / den : Infinity;
      if (b !== b) b = -Infinity;
      bounds[i] = b;
      m++;
      if (b < firstBound || first < 0) {
        firstBound = b;
        first = i;
      }
    }
    if (m === 0) return null;
    // `best` and `first` are positions; `rank` (made when needed) their pool order.
    let best = -1, bestScore = Infinity, scored = 0, ranked = false;
    const rank = this.#scanRank;
    // Only a member whose bound is at most zero may score zero or below: the plain
    // scan over those, in pool order, stops at the first zero as it does, and finds
    // a negative minimum (every member of that score is among them).
    if (firstBound <= 0) {
      const order = pool.order!(this.#scanOrder);
      let stop = false;
      for (let j = 0; j < n && !stop; j++) {
        const i = order[j]!;
        rank[i] = j;
        if (!(bounds[i]! <= 0)) continue;
        const sc = this.#keptScore(pool, slots, i, ctx, keep, slack);
        scored++;
        if (sc <= bestScore) {
          bestScore = sc;
          best = i;
        }
        stop = sc === 0;
      }
      if (stop || bestScore < 0) return this.#scanned(pool, best, scored, keep);
      ranked = true;
    } else {
      bestScore = this.#keptScore(pool, slots, first, ctx, keep, slack);
      scored++;
      if (bestScore === bestScore) best = first;
      else bestScore = Infinity; // NaN is never the lowest
    }
    // No zero, no negative score: the lowest score, ties to the later member in pool
    // order. The members of positive bound at most the lowest so far are scored in
    // increasing order of bound until the next bound exceeds it: each left
    // scores above.
    const heap = this.#scanHeap;
    let h = 0;
    for (let i = 0; i < n; i++) {
      const b = bounds[i]!;
      if (b > 0 && b <= bestScore && i !== first) heap[h++] = i;
    }
    // The first few in order of bound are each found by a pass over the list, which drops
    // those whose bound the lowest score has gone below since; past them a heap orders what
    // is left. (On lstm small at ratio 0.5 a search scored 3.4 storages on average from
    // lists of 60-600: building a heap of the whole list cost more than the scoring.)
    let picks = 0;
    while (h > 0) {
      let i: number;
      if (picks < LINEAR_PICKS) {
        let w = 0, at = -1, low = Infinity;
        for (let r = 0; r < h; r++) {
          const c = heap[r]!, b = bounds[c]!;
          if (b > bestScore) continue;
          if (b < low || at < 0) {
            low = b;
            at = w;
          }
          heap[w++] = c;
        }
        h = w;
        if (h === 0) break;
        i = heap[at]!;
        heap[at] = heap[--h]!;
        if (++picks === LINEAR_PICKS) {
          for (let j = (h >> 1) - 1; j >= 0; j--) siftDown(heap, bounds, j, h);
        }
      } else {
        i = heap[0]!;
        if (bounds[i]! > bestScore) break;
        heap[0] = heap[--h]!;
        siftDown(heap, bounds, 0, h);
      }
      const sc = this.#keptScore(pool, slots, i, ctx, keep, slack);
      scored++;
      if (sc < bestScore || best < 0) {
        if (sc === sc) {
          bestScore = sc;
          best = i;
        }
      } else if (sc === bestScore) {
        if (!ranked) {
          const order = pool.order!(this.#scanOrder);
          for (let j = 0; j < n; j++) rank[order[j]!] = j;
          ranked = true;
        }
        if (rank[i]! > rank[best]!) best = i;
      }
    }
    return this.#scanned(pool, best, scored, keep);
  }

  /** {@link slotScan}'s end: floors marked, statistics set, the victim at position `best` (or none). */
  #scanned(
    pool: EvictablePool,
    best: number,
    scored: number,
    keep: boolean,
  ): StorageNode | null {
    if (keep) this.#floorState!.dirty = true;
    this.scored = scored;
    return best < 0 ? null : pool.at(best);
  }

  #scanHeap: Int32Array = new Int32Array(0);
  #scanOrder: Int32Array = new Int32Array(0);
  #scanRank: Int32Array = new Int32Array(0);
  #scanBounds: Float64Array = new Float64Array(0);

  /**
   * The sampled search's victim (the last of the `k` sampled storages with
   * the lowest score), scoring few of them: their bounds come from the pool's
   * slots; the one of least bound is scored first (its score is usually the
   * lowest, or near it), then those whose bound does not exceed its score, in
   * increasing order of bound while the least bound left does not exceed the
   * lowest score so far. Every storage skipped scores above the lowest score
   * found in the end, so it can be no victim and no tie. Draws the same
   * numbers as the plain sampled search, and picks the same storage: the
   * lowest score, ties to the later sample, whatever order the scores come
   * in. (A heap of all 95 candidates in order of bound cost 0.6-0.8 us a
   * search to build; the few left after the first score are picked by scans.)
   */
  #boundedSample(
    ctx: EvictionContext,
    slots: Float64Array,
    k: number,
    minBytes: number,
  ): StorageNode | null {
    const pool = ctx.pool, n = pool.size, only = ctx.onlyDroppable === true;
    const clock = ctx.clock;
    // Floors are read once the slots are known to hold this epoch's (or none), and kept
    // only when the epoch is the one of the last search: one that changes at every
    // search would clear what was kept for nothing.
    const floors = this.floorEpoch !== undefined;
    const keep = this.#readyFloors(ctx, slots, n), slack = this.#slack;
    if (this.#sampled.length < k) {
      this.#sampled = new Int32Array(2 * k);
      this.#sampleBounds = new Float64Array(2 * k);
      this.#open = new Int32Array(2 * k);
    }
    // Candidate t (in sampling order, t < m): pool position sampled[t], bound
    // bounds[t] (a NaN bound as -Infinity: such a candidate is always scored).
    const sampled = this.#sampled, bounds = this.#sampleBounds, out = this.#least;
    // The draws, the bounds and the candidate of least bound (the first of them) with the
    // least bound of the others: when that exceeds the first's score, as in ~99% of the
    // searches of the 10k-live dispatch stream, no other can score at most it, and the pass
    // that lists them is skipped. Natively where the backend offers it: the draws and
    // bounds were ~2.2 of the ~3 us a search took in that stream.
    let m = (ctx.sampleBounds ?? sampleBounds)(
      slots,
      n,
      k,
      this.#rngState,
      sampled,
      bounds,
      minBytes,
      slack,
      floors ? 1 : 0,
      clock,
      out,
    );
    let first = out[0]!;
    if (!only) {
      // Candidates the context allows no action on are left out (in draw order, as if never
      // drawn): then the least bounds are found again.
      const m0 = m;
      m = 0;
      for (let t = 0; t < m0; t++) {
        const i = sampled[t]!;
        if (!this.allowed(pool.at(i), ctx)) continue;
        sampled[m] = i;
        bounds[m++] = bounds[t]!;
      }
      if (m < m0) first = leastBounds(bounds, m, out);
    }
    if (m === 0) return null;
    const others = out[1]!;
    let best = -1, bestScore = Infinity;
    let sc = this.#keptScore(pool, slots, sampled[first]!, ctx, keep, slack);
    let scored = 1;
    // A NaN score is never the lowest; Infinity is, when no score is lower.
    if (sc === sc) {
      bestScore = sc;
      best = first;
    }
    // The others that may score at most the first's, then scored in increasing order of
    // bound while the least bound left is at most the lowest score so far: no more are
    // scored than must be. (In sampling order, each whose bound was at most the lowest
    // score so far: 5.3 scored a search of the 10k-live dispatch stream, 2.8 needed.)
    const open = this.#open;
    let n2 = 0;
    if (others <= bestScore) {
      for (let t = 0; t < m; t++) if (t !== first && bounds[t]! <= bestScore) open[n2++] = t;
    }
    while (n2 > 0) {
      let at = 0, t = open[0]!, b = bounds[t]!;
      for (let u = 1; u < n2; u++) {
        const v = open[u]!, bv = bounds[v]!;
        if (bv < b) {
          at = u;
          t = v;
          b = bv;
        }
      }
      if (b > bestScore) break;
      open[at] = open[--n2]!;
      sc = this.#keptScore(pool, slots, sampled[t]!, ctx, keep, slack);
      scored++;
      // Ties go to the later sample, as in the plain search (`<=` in sampling order).
      if (sc < bestScore || (sc === bestScore && t > best)) {
        bestScore = sc;
        best = t;
      }
    }
    if (keep) this.#floorState!.dirty = true;
    if (best < 0) return null;
    this.scored = scored;
    return pool.at(sampled[best]!);
  }

  /**
   * Readies the floors of `slots` (a pool of `n` members) for a search of a
   * policy with a {@link floorEpoch} (see `keptFloors`): sets {@link #slack}
   * to the search's {@link floorSlack} and returns whether the floors it
   * finds may be kept (false without a floor epoch).
   */
  #readyFloors(ctx: EvictionContext, slots: Float64Array, n: number): boolean {
    if (this.floorEpoch === undefined) {
      this.#slack = 0;
      return false;
    }
    this.#slack = this.floorSlack?.(ctx) ?? 0;
    // The state of the slots of the last search, kept here: the pool's array changes only
    // as the pool grows, and a lookup in the weak map on every search cost two.
    if (this.#floorSlots !== slots) {
      this.#floorSlots = slots;
      this.#floorState = floorStateOf(slots);
    }
    const keep = keptFloors(
      slots,
      this.#floorState!,
      this,
      ctx.lineage,
      this.floorEpoch(ctx),
      n,
      this.floorLapsed?.(ctx),
      ctx.pool,
    );
    const victims = this.#victims;
    if (victims.length > 0) {
      if (keep) this.#raiseFloors(ctx, slots, n, victims);
      clearList(victims);
    }
    return keep;
  }

  /**
   * Raises the floors of the members of a pool of `n` next to each of
   * `victims` to its {@link evictedFloor} (found now, after the lapsed
   * floors were cleared, so it holds now whatever happened since the choice).
   */
  #raiseFloors(ctx: EvictionContext, slots: Float64Array, n: number, victims: StorageNode[]): void {
    const pool = ctx.pool;
    if (pool.positionOf === undefined) return;
    const slack = this.#slack;
    for (let j = 0; j < victims.length; j++) {
      const v = victims[j]!;
      const f = this.evictedFloor!(v, ctx);
      if (f === undefined || !(f > 0)) continue;
      const kept = f * FLOOR_MARGIN + slack;
      const ns = ctx.lineage.neighborsInto(v, this.#neighbors);
      for (let k = 0; k < ns.length; k++) {
        const i: number = pool.positionOf(ns[k]!);
        if (i < 0 || i >= n) continue;
        const o = i * SLOT_STRIDE + SLOT_FLOOR;
        if (!(slots[o]! >= kept)) slots[o] = kept;
      }
      clearList(ns);
    }
  }

  /** The {@link floorSlack} of the search under way (see {@link #readyFloors}). */
  #slack = 0;
  /** {@link #raiseFloors}' list of a victim's neighbours. */
  readonly #neighbors: StorageNode[] = [];
  /** The slots of the last search that read floors, and their {@link FloorState}. */
  #floorSlots: Float64Array | null = null;
  #floorState: FloorState | null = null;

  /**
   * {@link slotScore} of the member at position `i`, keeping in its slot the
   * floor found when `keep`.
   */
  #keptScore(
    pool: EvictablePool,
    slots: Float64Array,
    i: number,
    ctx: EvictionContext,
    keep: boolean,
    slack: number,
  ): number {
    const sc = this.#slotScore(pool, slots, i, ctx);
    if (keep) slots[i * SLOT_STRIDE + SLOT_FLOOR] = this.lastFloor * FLOOR_MARGIN + slack;
    return sc;
  }

  /** The score of the member at position `i`, from its slot where the policy can. */
  #slotScore(pool: EvictablePool, slots: Float64Array, i: number, ctx: EvictionContext): number {
    const s = pool.at(i);
    if (this.slotScore === undefined) return this.score(s, ctx);
    const o = i * SLOT_STRIDE;
    return this.slotScore(
      s,
      slots[o + SLOT_COMPUTE]!,
      slots[o + SLOT_BYTES]!,
      slots[o + SLOT_LAST_ACCESS]!,
      ctx,
    );
  }

  #sampled: Int32Array = new Int32Array(0);
  #sampleBounds: Float64Array = new Float64Array(0);
  /** `#boundedSample`'s least bounds (see `sampleBounds`). */
  readonly #least: Float64Array = new Float64Array(2);
  /** `#boundedSample`'s candidates not yet scored nor ruled out. */
  #open: Int32Array = new Int32Array(0);
}

/** At most this many victims wait for a search to raise their neighbours' floors. */
const VICTIMS_KEPT = 64;

/** Storages {@link ScorePolicy}'s full scan finds by a pass over its list before it builds a heap. */
const LINEAR_PICKS = 4;

/**
 * Restores the min-heap order of `heap[0..size)` (candidates keyed by
 * `keys[candidate]`) below position `h`.
 */
function siftDown(heap: Int32Array, keys: Float64Array, h: number, size: number): void {
  const item = heap[h]!, key = keys[item]!;
  for (;;) {
    let c = 2 * h + 1;
    if (c >= size) break;
    if (c + 1 < size && keys[heap[c + 1]!]! < keys[heap[c]!]!) c++;
    if (keys[heap[c]!]! >= key) break;
    heap[h] = heap[c]!;
    h = c;
  }
  heap[h] = item;
}

/**
 * A kept floor is the part found times this: the same values summed in
 * another order (classes merged since) may round below the sum found, by far
 * less than this margin, so the floor stays below the part as it is now.
 */
const FLOOR_MARGIN = 1 - 2 ** -20;

/** Whose floors a pool's slots hold, and in which epoch (see {@link keptFloors}). */
interface FloorState {
  kind: unknown;
  owner: unknown;
  epoch: number;
  /** Some floor may be non-zero. */
  dirty: boolean;
}

/** Per slots array (a pool's, replaced when it grows). */
const FLOORS = new WeakMap<Float64Array, FloorState>();

/**
 * The {@link FloorState} of `slots`, made for an array not seen before (its
 * floors are then cleared before they are first read: it may be a grown
 * pool's copy).
 */
function floorStateOf(slots: Float64Array): FloorState {
  let st = FLOORS.get(slots);
  if (st === undefined) {
    st = { kind: null, owner: null, epoch: NaN, dirty: true };
    FLOORS.set(slots, st);
  }
  return st;
}

/**
 * Makes the floors of `slots` (a pool of `size` members, their state `st`)
 * hold for `policy`'s kind, `owner` (the lineage) and `epoch`, clearing them
 * when they may be another's (an array not seen before may be a grown pool's
 * copy), and clearing those of the members `lapsed` names (every floor,
 * without the pool's `positionOf`), which it empties; returns whether they
 * held already, so that the search may keep more.
 */
function keptFloors(
  slots: Float64Array,
  st: FloorState,
  policy: object,
  owner: unknown,
  epoch: number,
  size: number,
  lapsed: StorageNode[] | undefined,
  pool: EvictablePool,
): boolean {
  const kind = policy.constructor;
  if (st.kind === kind && st.owner === owner && st.epoch === epoch) {
    if (lapsed !== undefined && lapsed.length > 0) {
      if (pool.positionOf === undefined) clearFloors(slots, size);
      else {
        for (let j = 0; j < lapsed.length; j++) {
          const i = pool.positionOf(lapsed[j]!);
          if (i >= 0 && i < size) slots[i * SLOT_STRIDE + SLOT_FLOOR] = 0;
        }
      }
      clearList(lapsed);
    }
    return true;
  }
  if (lapsed !== undefined) clearList(lapsed);
  if (st.dirty) clearFloors(slots, size);
  st.kind = kind;
  st.owner = owner;
  st.epoch = epoch;
  st.dirty = false;
  return false;
}

function clearFloors(slots: Float64Array, size: number): void {
  for (let o = SLOT_FLOOR; o < size * SLOT_STRIDE; o += SLOT_STRIDE) slots[o] = 0;
}

/**
 * The floor a slot's `kept` number gives with `slack` (see
 * {@link ScorePolicy.floorSlack}): `kept - slack`, less a margin for the
 * rounding of both sums, and never below zero (zero for a NaN `kept`).
 */
function floorOf(kept: number, slack: number): number {
  return kept > slack ? sampledFloor(kept, slack) : 0;
}

/**
 * {@link floorOf} without a branch, for the sampled search, whose draws land on
 * members with and without a kept floor at random: there the branch was
 * mispredicted about as often as taken (a loop of 95 draws over bounds with
 * floors on half the members: 19 ns a draw, 8 this way). The same number for
 * every floor a search keeps (non-negative, as the slack); NaN for a NaN one,
 * whose bound is then read as -Infinity: that member is scored.
 */
function sampledFloor(kept: number, slack: number): number {
  const f = kept - slack - (kept + slack) * 2 ** -50;
  // (f + |f|) / 2 is f where f is positive and zero otherwise (exact: 2f is exact).
  return (f + Math.abs(f)) * 0.5;
}
