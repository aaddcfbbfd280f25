/**
 * The static planners by name: `libra`, `chen-sqrt`, `lookahead` and `checkmate`.
 *
 * @module
 */

import { ChenSqrtPlanner } from "./chen_sqrt_planner.ts";
import { type CheckmateOptions, CheckmatePlanner } from "./checkmate_planner.ts";
import { type LibraOptions, LibraPlanner } from "./libra_planner.ts";
import { type LookaheadOptions, LookaheadPlanner } from "./lookahead_planner.ts";
import type { Planner } from "./planner.ts";

/** Names accepted by {@link createPlanner}. */
export const PLANNER_NAMES: readonly string[] = ["libra", "chen-sqrt", "lookahead", "checkmate"];

/** True when `name` is a planner (not a dynamic policy). */
export function isPlannerName(name: string): boolean {
  return PLANNER_NAMES.includes(name);
}

/**
 * Builds a planner by name. `options` configure `libra` (swap cost model,
 * swapping on or off, replay limits), `lookahead` (variants, interval MILPs)
 * and `checkmate` (solver, time limit).
 *
 * @example
 * ```ts
 * import { createPlanner } from "@libra/evict";
 * if (createPlanner("chen-sqrt").name !== "chen-sqrt") throw new Error("name");
 * ```
 */
export function createPlanner(
  name: string,
  options: LibraOptions & LookaheadOptions & CheckmateOptions = {},
): Planner {
  switch (name) {
    case "libra":
      return new LibraPlanner(options);
    case "chen-sqrt":
      return new ChenSqrtPlanner();
    case "lookahead":
      return new LookaheadPlanner(options);
    case "checkmate":
      return new CheckmatePlanner(options);
    default:
      throw new RangeError(`unknown planner "${name}" (planners: ${PLANNER_NAMES.join(", ")})`);
  }
}
