/**
 * The engine's evictable pool (resident, unlocked, unpinned storages).
 *
 * @module
 */

import {
  type EvictablePool,
  SLOT_BYTES,
  SLOT_COMPUTE,
  SLOT_FLOOR,
  SLOT_LAST_ACCESS,
  SLOT_STRIDE,
} from "@libra/evict";
import type { StorageNode } from "@libra/lineage";

/**
 * The evictable pool: an array for O(1) random access (sampling), a copy of
 * the fields a score reads per position ({@link slots}), and a doubly linked
 * list by position for insertion order (a `Set` reallocates its table when a
 * small pool churns, which cost more than a whole kernel call). Its state is
 * its own, apart from each member's {@link StorageNode.poolIndex}; the
 * engine writes a member's `lastAccess` and `compute` through {@link touch}
 * and {@link sync}, so the copies stay true. Not to be modified while iterated.
 *
 * Made `deferred`, it is not laid out until {@link layOut}: a member is a mark
 * on the node with its place in the insertion order (adding and removing write
 * the node alone), and the list, positions and copies are made in one pass
 * when a search first needs them. Until then only {@link size}, {@link bytes}
 * and membership are kept. An engine whose budget is never reached (ratio 1.0)
 * lays out none: a removal and an insertion per call's input, in arrays and on
 * storages the kernels had pushed out of the caches, cost ~0.3 ms of a 120 ms
 * gpt small step.
 */
export class Pool implements EvictablePool {
  /** The members, in no particular order (positions change on removal). */
  readonly items: StorageNode[] = [];
  /**
   * Per position `i`: the member's `lastAccess`, `compute` and `bytes` at
   * `i * SLOT_STRIDE` plus `SLOT_LAST_ACCESS`, `SLOT_COMPUTE`, `SLOT_BYTES`,
   * and the policy's floor at `SLOT_FLOOR` (0 when a member enters, moved
   * with it; replaced by a larger array as the pool grows).
   */
  slots: Float64Array = new Float64Array(64 * SLOT_STRIDE);
  /** Summed bytes of the members. */
  bytes = 0;
  // Insertion order: the position of the previous and next member (-1 at the ends).
  #prev: Int32Array = new Int32Array(64);
  #next: Int32Array = new Int32Array(64);
  #head = -1;
  #tail = -1;
  /** Not laid out yet (see the class note): members are marks, counted in {@link #count}. */
  #deferred: boolean;
  #count = 0;
  #seq = 0;
  /** A pool laid out from the start, or (`deferred`) once {@link layOut} is called. */
  constructor(deferred = false) {
    this.#deferred = deferred;
  }
  /** True until a deferred pool is laid out. */
  get deferred(): boolean {
    return this.#deferred;
  }
  /** Number of members. */
  get size(): number {
    return this.#deferred ? this.#count : this.items.length;
  }
  /**
   * Lays out a deferred pool: its members, found among `storages` (every
   * member must be there), enter the list in the order they entered the pool.
   * A no-op once laid out.
   */
  layOut(storages: Iterable<StorageNode>): void {
    if (!this.#deferred) return;
    const members: StorageNode[] = [];
    for (const s of storages) if (s.poolIndex === -2) members.push(s);
    if (members.length !== this.#count) {
      throw new Error(
        `Pool.layOut: ${this.#count} members marked, ${members.length} found among the storages`,
      );
    }
    members.sort((a, b) => a.poolSeq - b.poolSeq);
    this.#deferred = false;
    this.#count = 0;
    this.bytes = 0;
    for (const s of members) {
      s.poolIndex = -1;
      this.add(s);
    }
  }
  /** The member at position `i`. */
  at(i: number): StorageNode {
    return this.items[i]!;
  }
  /** Members in insertion order (oldest first). */
  [Symbol.iterator](): Iterator<StorageNode> {
    this.#laidOut("iterated");
    return new PoolIterator(this.items, this.#next, this.#head);
  }
  /** The position of member `s`, or -1. */
  positionOf(s: StorageNode): number {
    return s.poolIndex;
  }
  /** Writes the members' positions in insertion order into `out`; returns it. */
  order(out: Int32Array): Int32Array {
    this.#laidOut("ordered");
    const next = this.#next;
    let j = 0;
    for (let c = this.#head; c >= 0; c = next[c]!) out[j++] = c;
    return out;
  }
  /** Adds `s` at the end (no-op when it is a member). */
  add(s: StorageNode): void {
    if (this.#deferred) {
      if (s.poolIndex !== -1) return;
      s.poolIndex = -2;
      s.poolSeq = ++this.#seq;
      this.#count++;
      this.bytes += s.bytes;
      return;
    }
    if (s.poolIndex >= 0) return;
    const i = this.items.length;
    if (i === this.#prev.length) this.#grow(2 * i);
    s.poolIndex = i;
    this.items.push(s);
    const o = i * SLOT_STRIDE, slots = this.slots;
    slots[o + SLOT_LAST_ACCESS] = s.lastAccess;
    slots[o + SLOT_COMPUTE] = s.compute;
    slots[o + SLOT_BYTES] = s.bytes;
    slots[o + SLOT_FLOOR] = 0;
    const tail = this.#tail;
    this.#prev[i] = tail;
    this.#next[i] = -1;
    if (tail < 0) this.#head = i;
    else this.#next[tail] = i;
    this.#tail = i;
    this.bytes += s.bytes;
  }
  /** Removes `s` (no-op when it is not a member). */
  remove(s: StorageNode): void {
    const i = s.poolIndex;
    if (i < 0) {
      if (i === -2) {
        s.poolIndex = -1;
        this.#count--;
        this.bytes -= s.bytes;
      }
      return;
    }
    const prevs = this.#prev, nexts = this.#next;
    const prev = prevs[i]!, next = nexts[i]!;
    if (prev < 0) this.#head = next;
    else nexts[prev] = next;
    if (next < 0) this.#tail = prev;
    else prevs[next] = prev;
    const last = this.items.pop()!;
    const j = this.items.length;
    if (last !== s) {
      // The last member moves to position i: its links, its neighbours' links to it, its slot.
      this.items[i] = last;
      last.poolIndex = i;
      const lp = prevs[j]!, ln = nexts[j]!;
      prevs[i] = lp;
      nexts[i] = ln;
      if (lp < 0) this.#head = i;
      else nexts[lp] = i;
      if (ln < 0) this.#tail = i;
      else prevs[ln] = i;
      const slots = this.slots, o = i * SLOT_STRIDE, p = j * SLOT_STRIDE;
      slots[o + SLOT_LAST_ACCESS] = slots[p + SLOT_LAST_ACCESS]!;
      slots[o + SLOT_COMPUTE] = slots[p + SLOT_COMPUTE]!;
      slots[o + SLOT_BYTES] = slots[p + SLOT_BYTES]!;
      slots[o + SLOT_FLOOR] = slots[p + SLOT_FLOOR]!;
    }
    s.poolIndex = -1;
    this.bytes -= s.bytes;
  }
  /** Sets `s.lastAccess` to `clock` (and the pool's copy, when `s` is a member). */
  touch(s: StorageNode, clock: number): void {
    s.lastAccess = clock;
    const i = s.poolIndex;
    if (i >= 0) this.slots[i * SLOT_STRIDE + SLOT_LAST_ACCESS] = clock;
  }
  /** `s.compute` or `s.lastAccess` changed: copies them, when `s` is a member. */
  sync(s: StorageNode): void {
    const i = s.poolIndex;
    if (i < 0) return;
    const o = i * SLOT_STRIDE, slots = this.slots;
    slots[o + SLOT_LAST_ACCESS] = s.lastAccess;
    slots[o + SLOT_COMPUTE] = s.compute;
  }
  /**
   * The first member whose copied fields differ from its own (`null` when all
   * agree, as they must; for tests).
   */
  stale(): StorageNode | null {
    const slots = this.slots;
    for (let i = 0; i < this.items.length; i++) {
      const s = this.items[i]!, o = i * SLOT_STRIDE;
      if (
        s.poolIndex !== i || !Object.is(slots[o + SLOT_LAST_ACCESS], s.lastAccess) ||
        !Object.is(slots[o + SLOT_COMPUTE], s.compute) || slots[o + SLOT_BYTES] !== s.bytes
      ) return s;
    }
    return null;
  }
  #laidOut(what: string): void {
    if (this.#deferred) throw new Error(`Pool: a deferred pool is ${what} before layOut()`);
  }
  #grow(cap: number): void {
    const prev = new Int32Array(cap), next = new Int32Array(cap);
    prev.set(this.#prev);
    next.set(this.#next);
    this.#prev = prev;
    this.#next = next;
    const slots = new Float64Array(cap * SLOT_STRIDE);
    slots.set(this.slots);
    this.slots = slots;
  }
}

class PoolIterator implements Iterator<StorageNode> {
  readonly #items: readonly StorageNode[];
  readonly #next: Int32Array;
  #cur: number;
  constructor(items: readonly StorageNode[], next: Int32Array, head: number) {
    this.#items = items;
    this.#next = next;
    this.#cur = head;
  }
  next(): IteratorResult<StorageNode> {
    const c = this.#cur;
    if (c < 0) return { done: true, value: undefined };
    this.#cur = this.#next[c]!;
    return { done: false, value: this.#items[c]! };
  }
}
