/**
 * Scratch-list helpers for hot paths.
 *
 * @module
 */

/**
 * Empties `a` in place, keeping its capacity: `a.length = 0` drops the
 * backing store in V8, so the next push allocates a new one (about 150 bytes,
 * on every call of a hot path); popping keeps it.
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
