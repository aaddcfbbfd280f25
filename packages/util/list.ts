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
