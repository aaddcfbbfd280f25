/**
 * Union-find over evicted equivalence classes (DTR's `dtr-eq` heuristic).
 *
 * Each evicted storage owns a node whose class value is the summed recompute
 * cost of the class. Evicting merges the new node with the classes of its
 * evicted neighbours; re-materializing subtracts the storage's cost from its
 * class root. Classes never split (the approximation DTR makes).
 *
 * @module
 */

/** A union-find node carrying a class value (summed cost) at its root. */
export class EqNode {
  /** Parent in the forest; `null` at a root. */
  parent: EqNode | null = null;
  /** Class value; meaningful only at a root. */
  value: number;
  /** Union-by-size rank: the nodes merged into the class. */
  size = 1;
  /**
   * The next node of the class: `next` leads through every node merged into
   * it (a cycle of {@link size} nodes) and back to this one.
   */
  next: EqNode = this;
  /**
   * What the node stands for (the lineage's storage), or `null`; the lineage
   * sets it to {@link DEPARTED} when its storage leaves the class (the class
   * keeps the node, not the storage).
   */
  item: unknown;
  /** A singleton class holding `value`, for `item`. */
  constructor(value: number, item: unknown = null) {
    this.value = value;
    this.item = item;
  }
}

/** {@link EqNode.item} of a node whose member left the class. */
export const DEPARTED: unique symbol = Symbol("departed");

/**
 * Root of `node`'s class, compressing the path (iterative: no recursion).
 *
 * @example
 * ```ts
 * import { EqNode, find, merge } from "@libra/lineage/union-find";
 * const a = new EqNode(1), b = new EqNode(2);
 * merge(a, b);
 * if (find(a).value !== 3) throw new Error("merge sums values");
 * ```
 */
export function find(node: EqNode): EqNode {
  let root = node;
  while (root.parent !== null) root = root.parent;
  let n = node;
  while (n.parent !== null && n.parent !== root) {
    const next: EqNode = n.parent;
    n.parent = root;
    n = next;
  }
  return root;
}

/** Merges the classes of `a` and `b` (no-op when already one); the root value is the sum. */
export function merge(a: EqNode, b: EqNode): EqNode {
  const ra = find(a), rb = find(b);
  if (ra === rb) return ra;
  let big = ra, small = rb;
  if (ra.size < rb.size) {
    big = rb;
    small = ra;
  }
  small.parent = big;
  // The two cycles of nodes become one (each node's place in its own cycle is kept).
  const an = a.next;
  a.next = b.next;
  b.next = an;
  big.size += small.size;
  big.value += small.value;
  return big;
}

/** Value of `node`'s class. */
export function classValue(node: EqNode): number {
  return find(node).value;
}

/** Adds `delta` to the value of `node`'s class (negative on re-materialization). */
export function addToClass(node: EqNode, delta: number): void {
  find(node).value += delta;
}
