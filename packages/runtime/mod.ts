/**
 * `@libra/runtime`: the re-materialization runtime. {@link Runtime} is a
 * `Backend` that runs a training step under a memory budget by evicting
 * tensors (drop or swap) and re-materializing them on use; the same
 * {@link Engine} replays traces on the meta backend ({@link simulateTrace}).
 *
 * @example
 * ```ts
 * import { parseTrace, simulateTrace } from "@libra/runtime";
 * const t = parseTrace(`{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"x"}`);
 * const r = simulateTrace(t, { policy: "dtr-eq", ratios: [1] });
 * if (r.baseline.peakBytes !== 4) throw new Error("one constant");
 * ```
 *
 * @module
 */

export * from "./copy_engine.ts";
export * from "./engine.ts";
export * from "./errors.ts";
export * from "./stats.ts";
export * from "./trace.ts";
export * from "./simulator.ts";
export * from "./runtime.ts";
