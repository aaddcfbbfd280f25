/**
 * The lineage's table of live storages (see {@link StorageTable}).
 *
 * @module
 */

import type { StorageNode } from "./_nodes.ts";

/**
 * Live storages by id, in the order they were added (which is id order: the
 * lineage adds each storage as it makes it, with the next id). A read-only
 * `Map` to its readers; the lineage adds and removes. Two arrays rather than a
 * `Map`: a live runtime adds and removes a storage on nearly every kernel call,
 * and a `Map` churned that way rehashes its table over and over (about 100 ns
 * and 100 bytes per call). A removal leaves a hole (found by a search of the
 * ids); holes are squeezed out when they outnumber the members, on an add
 * only, so removing storages while iterating is safe (as with a `Map`, a
 * removed storage is not visited).
 */
export class StorageTable implements ReadonlyMap<number, StorageNode> {
  /**
   * Members and holes (`null`) in id order, in slots `0..#len`; the slots past
   * `#len` are `null` (room kept: the list never shrinks, so adds do not
   * regrow it after each squeeze).
   */
  #nodes: (StorageNode | null)[] = [];
  /** The id of each slot `0..#len` of {@link #nodes} (holes keep theirs), increasing. */
  #ids: Float64Array = new Float64Array(64);
  /** Slots in use (members and holes). */
  #len = 0;
  #size = 0;
  /**
   * Iterations in progress (a squeeze then writes new lists rather than
   * compact these in place under them). An iterator its consumer abandons
   * without closing leaves this above zero: squeezes then allocate, as they
   * always did.
   */
  #iterating = 0;

  /** Number of storages. */
  get size(): number {
    return this.#size;
  }

  /** Adds `s`, whose id must exceed every id added before. */
  add(s: StorageNode): void {
    const n = this.#len;
    if (n > 0 && !(s.id > this.#ids[n - 1]!)) {
      throw new RangeError(
        `storage table: id ${s.id} is not above the last (${this.#ids[n - 1]})`,
      );
    }
    if (n - this.#size > 1024 && n - this.#size > this.#size) this.#squeeze();
    const at = this.#len;
    if (at === this.#ids.length) {
      const ids = new Float64Array(2 * at);
      ids.set(this.#ids);
      this.#ids = ids;
    }
    this.#ids[at] = s.id;
    const nodes = this.#nodes;
    if (at < nodes.length) nodes[at] = s;
    else nodes.push(s);
    this.#len = at + 1;
    this.#size++;
  }

  /** Removes the storage with id `id`; returns whether it was a member. */
  remove(id: number): boolean {
    const i = this.#find(id);
    if (i < 0 || this.#nodes[i] === null) return false;
    this.#nodes[i] = null;
    this.#size--;
    return true;
  }

  /** The storage with id `id`, if a member. */
  get(id: number): StorageNode | undefined {
    const i = this.#find(id);
    return i < 0 ? undefined : this.#nodes[i] ?? undefined;
  }

  /** Whether a storage with id `id` is a member. */
  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  /** Calls `fn` on every member in order. */
  forEach(
    fn: (value: StorageNode, key: number, map: ReadonlyMap<number, StorageNode>) => void,
    thisArg?: unknown,
  ): void {
    const nodes = this.#nodes;
    this.#iterating++;
    try {
      for (let i = 0; i < nodes.length; i++) {
        const s = nodes[i];
        if (s !== null && s !== undefined) fn.call(thisArg, s, s.id, this);
      }
    } finally {
      this.#iterating--;
    }
  }

  /** The members in order. */
  *values(): MapIterator<StorageNode> {
    const nodes = this.#nodes;
    this.#iterating++;
    try {
      for (let i = 0; i < nodes.length; i++) {
        const s = nodes[i];
        if (s !== null && s !== undefined) yield s;
      }
    } finally {
      this.#iterating--;
    }
  }

  /** The members' ids in order. */
  *keys(): MapIterator<number> {
    for (const s of this.values()) yield s.id;
  }

  /** `[id, storage]` pairs in order. */
  *entries(): MapIterator<[number, StorageNode]> {
    for (const s of this.values()) yield [s.id, s];
  }

  /** Same as {@link entries}. */
  [Symbol.iterator](): MapIterator<[number, StorageNode]> {
    return this.entries();
  }

  /**
   * Slot of `id` in the id list, or -1: a galloping search from the slot
   * found last, then bisection within the bracket. Storages leave in about the
   * order they came (a chain freed at once, a stream's values in turn), so the
   * next is usually a few slots on, in cache, where bisection of the whole
   * list read ~14 slots, the last ones cold (~60 ns a removal in the
   * dispatch stream).
   */
  #find(id: number): number {
    const ids = this.#ids, n = this.#len;
    if (n === 0) return -1;
    const at = this.#hint < n ? this.#hint : n - 1;
    let lo: number, hi: number;
    const v = ids[at]!;
    if (v === id) return at;
    if (v < id) {
      // Gallop right: ids[lo] < id, until ids[hi] >= id (or the end).
      let step = 1;
      lo = at;
      hi = at + 1;
      while (hi < n && ids[hi]! < id) {
        lo = hi;
        step *= 2;
        hi = at + step;
      }
      if (hi >= n) hi = n - 1;
      lo++;
    } else {
      // Gallop left: ids[hi] > id, until ids[lo] <= id (or the start).
      let step = 1;
      hi = at;
      lo = at - 1;
      while (lo >= 0 && ids[lo]! > id) {
        hi = lo;
        step *= 2;
        lo = at - step;
      }
      if (lo < 0) lo = 0;
      hi--;
    }
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const m = ids[mid]!;
      if (m === id) {
        this.#hint = mid;
        return mid;
      }
      if (m < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** The slot {@link #find} found last (where it starts). */
  #hint = 0;

  /**
   * Drops the holes: in place, where no iteration is in progress (nothing
   * allocated: a squeeze that made new lists, and the adds that regrew them,
   * were ~100 bytes a call of the 10k-live dispatch stream); otherwise into
   * new lists, so that an iteration in progress keeps walking the old ones.
   */
  #squeeze(): void {
    const n = this.#len, from = this.#nodes, fromIds = this.#ids;
    const inPlace = this.#iterating === 0;
    const nodes = inPlace ? from : [], ids = inPlace ? fromIds : new Float64Array(fromIds.length);
    let j = 0;
    for (let i = 0; i < n; i++) {
      const s = from[i];
      if (s === null || s === undefined) continue;
      nodes[j] = s;
      ids[j++] = fromIds[i]!;
    }
    // In place, the slots the members left keep nothing alive.
    if (inPlace) { for (let i = j; i < n; i++) nodes[i] = null; }
    this.#nodes = nodes;
    this.#ids = ids;
    this.#len = j;
    this.#hint = 0;
  }
}
