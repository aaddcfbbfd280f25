/**
 * Union-find over evicted equivalence classes (DTR's `dtr-eq` heuristic).
 *
 * Each evicted storage owns a node whose class value is the summed recompute
 * cost of the class. Evicting merges the new node with the classes of its
 * evicted neighbours; re-materializing subtracts the storage's cost from its
 * class root. Classes never split (the approximation DTR makes).
 *
 * The nodes are slots of typed arrays in a {@link ClassForest}, named by
 * their index, not objects: a drop that joins a class allocates nothing, and
 * an old storage handed a new class holds a number, not a pointer to a young
 * object (a class object made on every drop cost the collector ~1.5 times as
 * much per scavenge on the 10k-live dispatch stream). A class's slots are
 * reused once every member has {@link ClassForest.depart departed}: no
 * storage names one of them any more.
 *
 * @module
 */

/** A storage's class slot when it has none. */
export const NO_CLASS: -1 = -1;

/** {@link ClassForest.item} of a node whose member left the class. */
export const DEPARTED: unique symbol = Symbol("departed");

const FIRST_CAPACITY = 256;

/**
 * A forest of union-find nodes, each an index: a parent (-1 at a root), the
 * class value and size (meaningful at a root), the next node of the class (a
 * cycle through every node merged into it) and what the node stands for.
 *
 * @example
 * ```ts
 * import { ClassForest } from "@libra/lineage/union-find";
 * const f = new ClassForest();
 * const a = f.add(1), b = f.add(2);
 * f.merge(a, b);
 * if (f.value(a) !== 3) throw new Error("merge sums values");
 * ```
 */
export class ClassForest {
  #parent = new Int32Array(FIRST_CAPACITY);
  #next = new Int32Array(FIRST_CAPACITY);
  #size = new Int32Array(FIRST_CAPACITY);
  /** Members not departed, at a root: the class's slots are reused at 0. */
  #live = new Int32Array(FIRST_CAPACITY);
  #value = new Float64Array(FIRST_CAPACITY);
  /** 1 once a node's member left (see {@link depart}). */
  #left = new Uint8Array(FIRST_CAPACITY);
  #items: unknown[] = [];
  /** Slots handed out so far (the high-water mark); free ones are on the free list. */
  #top = 0;
  /** First reusable slot (linked through `#next`), or -1. */
  #free = -1;
  #inUse = 0;

  /** Nodes in use: those of classes with a member not yet departed. */
  get nodes(): number {
    return this.#inUse;
  }

  /** A singleton class holding `value`, for `item`; returns its node. */
  add(value: number, item: unknown = null): number {
    let x = this.#free;
    if (x >= 0) this.#free = this.#next[x]!;
    else {
      x = this.#top++;
      if (x === this.#parent.length) this.#grow();
      this.#items.push(null);
    }
    this.#inUse++;
    this.#parent[x] = -1;
    this.#next[x] = x;
    this.#size[x] = 1;
    this.#live[x] = 1;
    this.#value[x] = value;
    this.#left[x] = 0;
    this.#items[x] = item;
    return x;
  }

  #grow(): void {
    const n = this.#parent.length * 2;
    this.#parent = grown(this.#parent, n);
    this.#next = grown(this.#next, n);
    this.#size = grown(this.#size, n);
    this.#live = grown(this.#live, n);
    this.#value = grown(this.#value, n);
    this.#left = grown(this.#left, n);
  }

  /** Root of `x`'s class, compressing the path (iterative: no recursion). */
  find(x: number): number {
    const parent = this.#parent;
    let root = x;
    while (parent[root]! >= 0) root = parent[root]!;
    let n = x;
    while (parent[n]! >= 0 && parent[n] !== root) {
      const up = parent[n]!;
      parent[n] = root;
      n = up;
    }
    return root;
  }

  /** Merges the classes of `a` and `b` (no-op when already one); the root's value is the sum. */
  merge(a: number, b: number): number {
    const ra = this.find(a), rb = this.find(b);
    if (ra === rb) return ra;
    const size = this.#size;
    let big = ra, small = rb;
    if (size[ra]! < size[rb]!) {
      big = rb;
      small = ra;
    }
    this.#parent[small] = big;
    // The two cycles of nodes become one (each node's place in its own cycle is kept).
    const next = this.#next;
    const an = next[a]!;
    next[a] = next[b]!;
    next[b] = an;
    size[big] = size[big]! + size[small]!;
    this.#live[big] = this.#live[big]! + this.#live[small]!;
    this.#value[big] = this.#value[big]! + this.#value[small]!;
    return big;
  }

  /** Value of `x`'s class. */
  value(x: number): number {
    return this.#value[this.find(x)]!;
  }

  /** Adds `delta` to the value of `x`'s class (negative on re-materialization). */
  addTo(x: number, delta: number): void {
    const r = this.find(x);
    this.#value[r] = this.#value[r]! + delta;
  }

  /** Nodes merged into `x`'s class (departed ones included). */
  size(x: number): number {
    return this.#size[this.find(x)]!;
  }

  /** The next node of `x`'s class: following it leads through every node of the class and back. */
  next(x: number): number {
    return this.#next[x]!;
  }

  /** What `x` stands for: the item it was added with, or {@link DEPARTED}. */
  item(x: number): unknown {
    return this.#items[x];
  }

  /**
   * `x`'s member leaves its class: the class keeps the node (its size, its
   * value), with {@link DEPARTED} for an item, or the item it was added with
   * where `keepItem` (a member freed with its class's value, whose node a walk
   * of the class still reads). Once no member is left the class's nodes are
   * reused; `x` must then not be named again.
   */
  depart(x: number, keepItem = false): void {
    if (this.#left[x] !== 0) throw new Error(`class node ${x} has already departed`);
    this.#left[x] = 1;
    const items = this.#items;
    if (!keepItem) items[x] = DEPARTED;
    const r = this.find(x);
    const live = this.#live[r]! - 1;
    this.#live[r] = live;
    if (live > 0) return;
    // No member left: no storage names a node of the class. Each goes to the free list.
    const next = this.#next;
    let n = x, free = this.#free, count = 0;
    do {
      const after = next[n]!;
      next[n] = free;
      free = n;
      items[n] = null;
      n = after;
      count++;
    } while (n !== x);
    this.#free = free;
    this.#inUse -= count;
  }
}

/** A typed array of `n` elements starting with `a`'s. */
function grown<T extends Int32Array | Float64Array | Uint8Array>(a: T, n: number): T {
  const b = new (a.constructor as new (length: number) => T)(n);
  b.set(a);
  return b;
}
