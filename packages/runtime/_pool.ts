/**
 * The engine's evictable pool (resident, unlocked, unpinned storages).
 *
 * @module
 */

import type { EvictablePool } from "@libra/evict";
import type { StorageNode } from "@libra/lineage";

/**
 * The evictable pool: an array for O(1) random access (sampling) and an
 * intrusive doubly linked list through the storages' `PoolLinks` (`s.pool`,
 * which only this pool reads or writes) for insertion order (a
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
    const l = s.pool;
    if (l.index >= 0) return;
    l.index = this.items.length;
    this.items.push(s);
    const tail = this.#tail;
    l.prev = tail;
    l.next = null;
    if (tail === null) this.#head = s;
    else tail.pool.next = s;
    this.#tail = s;
    this.bytes += s.bytes;
  }
  /** Removes `s` (no-op when it is not a member). */
  remove(s: StorageNode): void {
    const l = s.pool;
    const i = l.index;
    if (i < 0) return;
    const last = this.items.pop()!;
    if (last !== s) {
      this.items[i] = last;
      last.pool.index = i;
    }
    l.index = -1;
    const prev = l.prev, next = l.next;
    if (prev === null) this.#head = next;
    else prev.pool.next = next;
    if (next === null) this.#tail = prev;
    else next.pool.prev = prev;
    l.prev = null;
    l.next = null;
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
    this.#cur = c.pool.next;
    return { done: false, value: c };
  }
}
