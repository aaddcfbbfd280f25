/**
 * Scratch-list helpers for hot paths.
 *
 * @module
 */

/**
 * Empties `a` in place, keeping a small list's room: `a.length = 0` drops the
 * backing store in V8, so the next push allocates a new one (about 150 bytes,
 * on every call of a hot path); popping keeps the last 16 or so slots (each
 * pop that leaves it under half full trims it: a list of hundreds regrows on
 * its next use, where {@link Stack} keeps its room).
 *
 * @example
 * ```ts
 * import { clearList } from "@libra/util/list";
 * const scratch = [1, 2, 3];
 * clearList(scratch);
 * if (scratch.length !== 0) throw new Error("example: not emptied");
 * ```
 */
export function clearList(a: unknown[]): void {
  while (a.length > 0) a.pop();
}

/**
 * Removes the last occurrence of `x` from `a`, in place (no-op when absent):
 * what `a.splice(a.lastIndexOf(x), 1)` does, without the array of removed
 * elements `splice` returns (garbage on every call of a hot path).
 *
 * @example
 * ```ts
 * import { removeLast } from "@libra/util/list";
 * const a = [1, 2, 1, 3];
 * removeLast(a, 1);
 * if (a.join() !== "1,2,3") throw new Error("example: not removed");
 * ```
 */
export function removeLast<T>(a: T[], x: T): void {
  const i = a.lastIndexOf(x);
  if (i < 0) return;
  for (let j = i + 1; j < a.length; j++) a[j - 1] = a[j]!;
  a.pop();
}

/**
 * A stack that keeps its room: popping a list empty gives back most of its
 * backing store in V8 (each pop past half the capacity trims it), so a walk
 * that pushes and pops a few hundred items regrows it on every use. This one
 * never shrinks; {@link clear} forgets the items it held (so they can be
 * collected) and keeps the room.
 *
 * @example
 * ```ts
 * import { Stack } from "@libra/util/list";
 * const s = new Stack<string>();
 * s.push("a");
 * s.push("b");
 * const top = s.pop();
 * s.clear();
 * if (top !== "b" || s.size !== 0) throw new Error("example: not last in, first out");
 * ```
 */
export class Stack<T> {
  #items: (T | undefined)[] = [];
  #top = 0;

  /** Items on the stack. */
  get size(): number {
    return this.#top;
  }

  /** Puts `x` on top. */
  push(x: T): void {
    this.#items[this.#top++] = x;
  }

  /** Takes the top item off (the stack must not be empty). */
  pop(): T {
    const x = this.#items[--this.#top] as T;
    this.#items[this.#top] = undefined;
    return x;
  }

  /** Empties the stack, keeping its room. */
  clear(): void {
    const items = this.#items;
    for (let i = 0; i < this.#top; i++) items[i] = undefined;
    this.#top = 0;
  }
}
