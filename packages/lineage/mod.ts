/**
 * `@libra/lineage`: the storage/call graph of the re-materialization runtime:
 * storages with residency, pins, references and sizes; tensors and views; the
 * calls that produced them; evicted neighbourhoods; the union-find of evicted
 * equivalence classes; re-materialization plans (explicit stack); DOT/JSON export.
 *
 * @example
 * ```ts
 * import { Lineage } from "@libra/lineage";
 * const g = new Lineage();
 * const x = g.addLeaf(16, "x");
 * const [y] = g.addCall("relu", [4], [x], [{ bytes: 16 }], 5);
 * x.defined = true;
 * if (g.rematPlan(y!).length !== 1) throw new Error("one call recomputes y");
 * ```
 *
 * @module
 */

export * from "./graph.ts";
export * from "./union_find.ts";
export type * from "./trace.ts";
