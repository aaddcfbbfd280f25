/**
 * `@libra/util`: the small host-side helpers every other package shares, each
 * written once: seeded generators for test data and sampling ({@link mulberry32},
 * {@link Rng}), {@link median}, {@link clearList}, {@link removeLast} and a {@link Stack} for scratch lists, a text {@link renderTable} and the terminal
 * {@link Progress} display.
 *
 * ```ts
 * import { median, mulberry32, renderTable } from "@libra/util";
 * const r = mulberry32(1);
 * const xs = [r(), r(), r()];
 * if (!(xs.every((x) => x >= 0 && x < 1))) throw new Error("example: out of range");
 * if (median([3, 1, 2]) !== 2) throw new Error("example: median");
 * console.log(renderTable(["name", "n"], [["a", "1"], ["bb", "22"]], [false, true]));
 * ```
 *
 * @module
 */

export * from "./rng.ts";
export * from "./stats.ts";
export * from "./table.ts";
export * from "./progress.ts";
export * from "./list.ts";
