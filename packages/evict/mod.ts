/**
 * `@libra/evict`: eviction policies and the planner contract. A dynamic
 * {@link EvictionPolicy} picks victims from the runtime's evictable pool; the
 * score-based ones share one candidate search (full scan, sqrt(N) sampling,
 * minimum size). A {@link Planner} makes a static plan from a trace.
 *
 * @example
 * ```ts
 * import { createPolicy, POLICY_NAMES } from "@libra/evict";
 * for (const n of POLICY_NAMES) createPolicy(n);
 * ```
 *
 * @module
 */

export * from "./policy.ts";
export * from "./sample_bounds.ts";
export * from "./policies.ts";
export * from "./planner.ts";
export * from "./planners.ts";
export * from "./libra_planner.ts";
export * from "./chen_sqrt_planner.ts";
export * from "./lookahead.ts";
export * from "./lookahead_planner.ts";
export * from "./checkmate_planner.ts";
export * from "./lower_bound.ts";
