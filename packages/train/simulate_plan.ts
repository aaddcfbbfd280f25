/**
 * {@link simulatePlanner}: `simulateTrace` for the static planners. At each
 * budget ratio the planner makes a plan (validating it by replays), and the
 * plan is replayed on the meta backend with `dtr-eq` (`dtr-eq+swap` for
 * `libra`, which gets host memory) as the fallback for whatever it leaves
 * over the budget. Replays follow the published DTR simulator's semantics,
 * as `simulateTrace`'s do (constants freed once unreferenced without a
 * budget, pinned under one), so a planner's rows compare with a policy's.
 *
 * @module
 */

import { createPlanner, createPolicy, planHostLimit, plannerNeeds, planPolicy } from "@libra/evict";
import type { Trace } from "@libra/lineage/trace";
import {
  plannerContext,
  PUBLISHED_LEAF_RELEASE,
  replayTrace,
  type SimulateOptions,
  type SimulationReport,
  type SimulationResult,
  simulationRow,
} from "@libra/runtime";

/**
 * Replays `trace` without a budget, then plans it with `planner` (`libra` or
 * `chen-sqrt`) at each ratio and replays the plan. `libra` gets unlimited host
 * memory for its swaps unless `hostLimitBytes` says otherwise. `bookkeepingMs`
 * includes the planning time.
 *
 * @example
 * ```ts
 * import { parseTrace } from "@libra/runtime";
 * import { simulatePlanner } from "./simulate_plan.ts";
 * const L = [`{"INSTRUCTION":"CONSTANT","NAME":"x"}`, `{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"x"}`];
 * const r = simulatePlanner(parseTrace(L.join("\n")), "chen-sqrt", { ratios: [1] });
 * if (r.baseline.peakBytes !== 8 || !r.results[0]!.feasible) throw new Error("one constant");
 * ```
 */
export function simulatePlanner(
  trace: Trace,
  planner: string,
  options: Omit<SimulateOptions, "policy">,
): SimulationReport {
  const { ratios, onProgress, ...rest } = options;
  for (const r of ratios) {
    if (!(r > 0) || !Number.isFinite(r)) throw new RangeError(`budget ratio must be > 0, got ${r}`);
  }
  const p = createPlanner(planner);
  const { swaps, fallback } = plannerNeeds(p);
  const replayOptions = {
    ...rest,
    hostLimitBytes: rest.hostLimitBytes ?? (swaps ? Infinity : 0),
  };
  // The published simulator's semantics, as `simulateTrace` replays the dynamic policies (so
  // the rows compare): constants freed once unreferenced without a budget, pinned under one.
  const base = replayTrace(trace, {
    ...replayOptions,
    budgetBytes: Infinity,
    leafRelease: rest.leafRelease ?? PUBLISHED_LEAF_RELEASE.baseline,
  });
  const peak = base.stats.peakBytes;
  const leafRelease = rest.leafRelease ?? PUBLISHED_LEAF_RELEASE.budgeted;
  const ctx = plannerContext(trace, { ...replayOptions, fallback, leafRelease });
  const results: SimulationResult[] = [];
  for (const ratio of ratios) {
    const budgetBytes = Math.floor(ratio * peak);
    const t0 = performance.now();
    const plan = p.plan(trace, budgetBytes, ctx);
    const planMs = performance.now() - t0;
    const r = replayTrace(trace, {
      ...replayOptions,
      leafRelease,
      budgetBytes,
      hostLimitBytes: planHostLimit(plan, replayOptions.hostLimitBytes),
      knownFeasibleBytes: peak,
      policy: planPolicy(plan, createPolicy(fallback, rest.search)),
    });
    const row = simulationRow(ratio, budgetBytes, r, planMs);
    results.push(row);
    onProgress?.(results.length, ratios.length, row);
  }
  return { baseline: { peakBytes: peak, computeNs: base.stats.computeNs }, results };
}

/**
 * `simulateTrace`'s shape for a planner: `(trace, options) => report`, with
 * `options.policy` ignored. Lets a caller pick the simulation by name.
 */
export function plannerSimulation(
  planner: string,
): (trace: Trace, options: SimulateOptions) => SimulationReport {
  createPlanner(planner);
  return (trace, { policy: _, ...options }) => simulatePlanner(trace, planner, options);
}
