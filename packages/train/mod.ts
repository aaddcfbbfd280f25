/**
 * `@libra/train`: experiments that compose the other packages. {@link runTraining}
 * trains a model of `@libra/nn` under a memory budget with the `Runtime` next to a
 * budget-free copy of the same model and measures the overhead (warm-up, then the
 * two copies' steps interleaved, the median paired ratio with a 95% interval, CPU
 * time beside wall time, the runtime's accounted overhead beside the measured one):
 * the one measuring function of `libra run`, `libra start`, the lab API's runs and
 * the benchmark suite; {@link medianInterval} is its statistics; {@link LivePlan}
 * applies a static plan made on a recorded step to live steps; {@link simulatePlanner}
 * replays a planner's plans on a trace.
 *
 * @module
 */

export * from "./run_training.ts";
export * from "./overhead_stats.ts";
export * from "./live_plan.ts";
export * from "./simulate_plan.ts";
