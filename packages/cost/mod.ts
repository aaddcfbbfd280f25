/**
 * `@libra/cost`: cost models for re-materialization. A {@link CostModel} gives
 * the cost of (re)computing a call and of swapping bytes; implementations are
 * measured, analytic (roofline from the kernel table), profiled (from a trace),
 * plus the swap cost and the {@link Clock} that staleness runs on.
 *
 * @example
 * ```ts
 * import { AnalyticCostModel, Clock } from "@libra/cost";
 * const m = new AnalyticCostModel();
 * const clock = new Clock();
 * clock.advance(m.callCost({ op: "relu", params: [1024], totalBytes: 4096 }));
 * if (!(clock.now > 1)) throw new Error("the clock advances by cost");
 * ```
 *
 * @module
 */

export * from "./cost_model.ts";
