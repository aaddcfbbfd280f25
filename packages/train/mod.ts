/**
 * `@libra/train`: experiments that compose the other packages. {@link runTraining}
 * trains a model of `@libra/nn` under a memory budget with the `Runtime` next to a
 * budget-free run of the same steps (the core of `libra run`, the lab API's runs and
 * `start`); {@link LivePlan} applies a static plan made on a recorded step to live
 * steps; {@link simulatePlanner} replays a planner's plans on a trace.
 *
 * @module
 */

export * from "./run_training.ts";
export * from "./live_plan.ts";
export * from "./simulate_plan.ts";
