/**
 * The engine's evictable pool (resident, unlocked, unpinned storages).
 *
 * @module
 */

import type { EvictablePool } from "@libra/evict";
import type { StorageNode } from "@libra/lineage";

/**
 * The evictable pool: an array for O(1) random access (sampling) and an
 * intrusive doubly linked list through the storages for insertion order (a
 * `Set` reallocates its table when a small pool churns, which cost more than a
 * whole kernel call). Not to be modified while iterated.
 */
export class Pool implements EvictablePool {
  /** The members, in no particular order (positions change on removal). */
  readonly items: StorageNode[] = [];
  /** Summed bytes of the members. */
  bytes = 0;
  #head: StorageNode | null = null;
  #tail: StorageNode | null = null;
  /** Number of members. */
  get size(): number {
    return this.items.length;
  }
  /** The member at position `i`. */
  at(i: number): StorageNode {
    return this.items[i]!;
  }
  /** Members in insertion order (oldest first). */
  [Symbol.iterator](): Iterator<StorageNode> {
    return new PoolIterator(this.#head);
  }
  /** Adds `s` at the end (no-op when it is a member). */
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
  /** Removes `s` (no-op when it is not a member). */
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
