/**
 * The static planners by name: `libra`, `chen-sqrt` and `lookahead`.
 *
 * @module
 */

import { ChenSqrtPlanner } from "./chen_sqrt_planner.ts";
import { type LibraOptions, LibraPlanner } from "./libra_planner.ts";
import { type LookaheadOptions, LookaheadPlanner } from "./lookahead_planner.ts";
import type { Planner } from "./planner.ts";

/** Names accepted by {@link createPlanner}. */
export const PLANNER_NAMES: readonly string[] = ["libra", "chen-sqrt", "lookahead"];

/** True when `name` is a planner (not a dynamic policy). */
export function isPlannerName(name: string): boolean {
  return PLANNER_NAMES.includes(name);
}

/**
 * Builds a planner by name. `options` configure `libra` (swap cost model,
 * swapping on or off, replay limits) and `lookahead` (variants, interval MILPs).
 *
 * @example
 * ```ts
 * import { createPlanner } from "@libra/evict";
 * if (createPlanner("chen-sqrt").name !== "chen-sqrt") throw new Error("name");
 * ```
 */
export function createPlanner(
  name: string,
  options: LibraOptions & LookaheadOptions = {},
): Planner {
  switch (name) {
    case "libra":
      return new LibraPlanner(options);
    case "chen-sqrt":
      return new ChenSqrtPlanner();
    case "lookahead":
      return new LookaheadPlanner(options);
    default:
      throw new RangeError(`unknown planner "${name}" (planners: ${PLANNER_NAMES.join(", ")})`);
  }
}
