/**
 * The dynamic eviction policies (ARCHITECTURE.md, "Contracts"): `dtr`, `dtr-eq`,
 * `dtr-local`, `msps`, `lru`, `largest`, `random`, and swap-aware variants
 * (`<name>+swap`) that choose per victim between dropping and swapping.
 *
 * @module
 */

import type { StorageNode } from "@libra/lineage";
import {
  type EvictAction,
  type EvictionContext,
  type EvictionPolicy,
  type PolicyNeeds,
  ScorePolicy,
  type SearchOptions,
  seededRandom,
} from "./policy.ts";

function staleness(s: StorageNode, ctx: EvictionContext): number {
  return ctx.clock - s.lastAccess;
}

function ratio(num: number, den: number): number {
  return den > 0 ? num / den : Infinity;
}

/**
 * `c(t) / (m(t) * staleness(t))` from a storage's `compute`, `bytes` and
 * `lastAccess` (its own, or the pool's copy): `dtr-local`'s score, and the
 * bound below `dtr`'s and `dtr-eq`'s.
 */
function localScore(
  compute: number,
  bytes: number,
  lastAccess: number,
  ctx: EvictionContext,
): number {
  return ratio(compute, bytes * (ctx.clock - lastAccess));
}

/** `dtr`: (c(t) + sum of c over the evicted neighbourhood e*(t)) / (m(t) * staleness(t)). */
export class DtrPolicy extends ScorePolicy {
  /** `"dtr"`. */
  readonly name: string = "dtr";
  /** Reads evicted regions (neighbourhood costs). */
  override readonly needs: PolicyNeeds = { regions: true };
  /** (c(t) + neighbourhood cost) / (m(t) x staleness). */
  score(s: StorageNode, ctx: EvictionContext): number {
    const c = s.compute + ctx.lineage.evictedNeighborhoodCost(s);
    return ratio(c, s.bytes * staleness(s, ctx));
  }
  /**
   * `c(t) / (m(t) * staleness(t))`: the neighbourhood cost is never negative,
   * and adding it and dividing round monotonically, so this never exceeds
   * {@link score}. The full scan walks only the neighbourhoods of storages
   * whose bound is at most one known score (same victim, far fewer walks).
   */
  override lowerBound(s: StorageNode, ctx: EvictionContext): number {
    return localScore(s.compute, s.bytes, s.lastAccess, ctx);
  }
}

/**
 * `dtr-eq`: like `dtr`, with the neighbourhood cost read from the union-find of
 * evicted equivalence classes (each distinct neighbouring class counted once).
 */
export class DtrEqPolicy extends ScorePolicy {
  /** `"dtr-eq"`. */
  readonly name: string = "dtr-eq";
  /** Reads the evicted equivalence classes. */
  override readonly needs: PolicyNeeds = { equivalenceClasses: true };
  /** (c(t) + distinct neighbouring class costs) / (m(t) x staleness). */
  score(s: StorageNode, ctx: EvictionContext): number {
    return this.slotScore(s, s.compute, s.bytes, s.lastAccess, ctx);
  }
  /** {@link score} with `s`'s `compute`, `bytes` and `lastAccess` given. */
  override slotScore(
    s: StorageNode,
    compute: number,
    bytes: number,
    lastAccess: number,
    ctx: EvictionContext,
  ): number {
    const nc = ctx.lineage.neighborClassCost(s);
    this.lastFloor = nc;
    return ratio(compute + nc, bytes * (ctx.clock - lastAccess));
  }
  /**
   * The lineage's {@link Lineage.neighborCostEpoch}: within it the
   * neighbouring class cost only grows, so one found is a floor of it.
   */
  protected override floorEpoch(ctx: EvictionContext): number {
    return ctx.lineage.neighborCostEpoch;
  }
  /** The lineage's {@link Lineage.classDecrease} (what re-materializations took out of classes). */
  protected override floorSlack(ctx: EvictionContext): number {
    return ctx.lineage.classDecrease;
  }
  /**
   * The lineage's {@link Lineage.floorsLapsed}, kept from the first search on
   * ({@link Lineage.keepsFloors}): epochs then change only where edges do.
   */
  protected override floorLapsed(ctx: EvictionContext): StorageNode[] {
    ctx.lineage.keepsFloors = true;
    return ctx.lineage.floorsLapsed;
  }
  /**
   * The value of `v`'s class while `v` is evicted with one: each neighbour
   * counts that class among its distinct neighbouring classes, whose values
   * are not negative while {@link slotBoundHolds}.
   */
  protected override evictedFloor(v: StorageNode, ctx: EvictionContext): number | undefined {
    return v.residency === "evicted" ? ctx.lineage.classValueOf(v) : undefined;
  }
  /**
   * `(c(t) + floor) / (m(t) * staleness(t))` bounds the score: with no class
   * of negative value the neighbouring class cost is a sum of non-negative
   * numbers, at least the floor kept of it in this epoch (0 when none), and
   * adding it and dividing round monotonically.
   */
  protected override readonly localBound = true;
  /** While the lineage knows every class value non-negative. */
  protected override slotBoundHolds(ctx: EvictionContext): boolean {
    return ctx.lineage.classesNonNegative;
  }
}

/** `dtr-local`: c(t) / (m(t) * staleness(t)). */
export class DtrLocalPolicy extends ScorePolicy {
  /** `"dtr-local"`. */
  readonly name: string = "dtr-local";
  /** c(t) / (m(t) x staleness). */
  score(s: StorageNode, ctx: EvictionContext): number {
    return localScore(s.compute, s.bytes, s.lastAccess, ctx);
  }
  /** The score is the local score itself (no floor). */
  protected override readonly localBound = true;
}

/**
 * `msps` (Capuchin's memory saving per second, inverted so lower = evict first):
 * (c(t) + cost of the evicted ancestors its recomputation needs) / m(t).
 */
export class MspsPolicy extends ScorePolicy {
  /** `"msps"`. */
  readonly name: string = "msps";
  /** (c(t) + evicted ancestors' cost) / m(t). */
  score(s: StorageNode, ctx: EvictionContext): number {
    return ratio(s.compute + ctx.lineage.evictedAncestorCost(s), s.bytes);
  }
}

/** `lru`: least recently used first. */
export class LruPolicy extends ScorePolicy {
  /** `"lru"`. */
  readonly name: string = "lru";
  /** The last access time. */
  score(s: StorageNode): number {
    return s.lastAccess;
  }
}

/**
 * `largest`: largest storage first. Scored 1 / m(t) as in DTR's simulator: an
 * empty storage scores Infinity (last), where -m(t) would score 0 and, a zero
 * score ending the scan, pick it.
 */
export class LargestPolicy extends ScorePolicy {
  /** `"largest"`. */
  readonly name: string = "largest";
  /** 1 / m(t) (Infinity when empty). */
  score(s: StorageNode): number {
    return s.bytes > 0 ? 1 / s.bytes : Infinity;
  }
}

/** `random`: a seeded random victim. */
export class RandomPolicy extends ScorePolicy {
  /** `"random"`. */
  readonly name: string = "random";
  readonly #rng: () => number;
  /** A random policy seeded from `search.seed`. */
  constructor(search: SearchOptions = {}) {
    super(search);
    this.#rng = seededRandom((search.seed ?? 1) ^ 0x5bd1e995);
  }
  /** A seeded random number. */
  score(): number {
    return this.#rng() + 1e-9;
  }
}

/**
 * Swap-aware wrapper: scores each storage with the cheaper of its recompute
 * cost (the base policy's numerator is approximated by `c(t)` plus evicted
 * ancestors) and its swap cost, keeping the base policy's denominator, and
 * picks the cheaper action per victim.
 */
export class SwapAwarePolicy extends ScorePolicy {
  /** The base name with `+swap`. */
  readonly name: string;
  /** The base policy's needs, and host memory for swaps. */
  override readonly needs: PolicyNeeds;
  readonly #base: ScorePolicy;
  /** The wrapped policy (what chooses when nothing may be swapped). */
  get base(): ScorePolicy {
    return this.#base;
  }
  /** Wraps `base`. */
  constructor(base: ScorePolicy, search: SearchOptions = {}) {
    super(search);
    this.#base = base;
    this.name = `${base.name}+swap`;
    this.needs = { ...base.needs, swaps: true };
  }
  /** Restarts this search's random numbers and the base policy's. */
  override startStep(): void {
    super.startStep();
    this.#base.startStep();
  }
  #recompute(s: StorageNode, ctx: EvictionContext): number {
    return s.compute + ctx.lineage.evictedAncestorCost(s);
  }
  /** The base score, rescaled when swapping is cheaper. */
  score(s: StorageNode, ctx: EvictionContext): number {
    const base = this.#base.score(s, ctx);
    const drop = ctx.canDrop(s) ? this.#recompute(s, ctx) : Infinity;
    const swap = ctx.canSwap(s) ? 2 * ctx.costModel.swapCost(s.bytes) : Infinity;
    if (drop <= swap) return base;
    // Rescale the base score by how much cheaper swapping is than recomputing.
    if (!Number.isFinite(drop) || drop === 0) return ratio(swap, s.bytes * staleness(s, ctx));
    return base * (swap / drop);
  }
  /** Drop when recomputing costs no more than a swap round trip (2 x the swap cost), else swap. */
  override action(s: StorageNode, ctx: EvictionContext): EvictAction {
    const drop = ctx.canDrop(s) ? this.#recompute(s, ctx) : Infinity;
    const swap = ctx.canSwap(s) ? 2 * ctx.costModel.swapCost(s.bytes) : Infinity;
    return drop <= swap ? "drop" : "swap";
  }
}

/** Names accepted by {@link createPolicy} (each also with a `+swap` suffix). */
export const POLICY_NAMES: readonly string[] = [
  "dtr",
  "dtr-eq",
  "dtr-local",
  "msps",
  "lru",
  "largest",
  "random",
];

/** True when `name` is one of {@link POLICY_NAMES}, optionally suffixed `+swap`. */
export function isPolicyName(name: string): boolean {
  return POLICY_NAMES.includes(name.endsWith("+swap") ? name.slice(0, -5) : name);
}

/**
 * Builds a policy by name: one of {@link POLICY_NAMES}, optionally suffixed
 * `+swap` for the swap-aware variant.
 *
 * @example
 * ```ts
 * import { createPolicy } from "@libra/evict";
 * const p = createPolicy("dtr-eq+swap", { mode: "sqrt" });
 * if (p.name !== "dtr-eq+swap") throw new Error(p.name);
 * ```
 */
export function createPolicy(name: string, search: SearchOptions = {}): EvictionPolicy {
  const swap = name.endsWith("+swap");
  const base = swap ? name.slice(0, -5) : name;
  let p: ScorePolicy;
  switch (base) {
    case "dtr":
      p = new DtrPolicy(search);
      break;
    case "dtr-eq":
      p = new DtrEqPolicy(search);
      break;
    case "dtr-local":
      p = new DtrLocalPolicy(search);
      break;
    case "msps":
      p = new MspsPolicy(search);
      break;
    case "lru":
      p = new LruPolicy(search);
      break;
    case "largest":
      p = new LargestPolicy(search);
      break;
    case "random":
      p = new RandomPolicy(search);
      break;
    default:
      throw new RangeError(
        `unknown eviction policy "${name}" (policies: ${
          POLICY_NAMES.join(", ")
        }; add "+swap" for swap-aware)`,
      );
  }
  return swap ? new SwapAwarePolicy(p, search) : p;
}
