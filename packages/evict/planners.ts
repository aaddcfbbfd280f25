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
import { isPolicyName, POLICY_NAMES } from "./policies.ts";

/** Names accepted by {@link createPlanner}. */
export const PLANNER_NAMES: readonly string[] = ["libra", "chen-sqrt", "lookahead", "checkmate"];

/** True when `name` is a planner (not a dynamic policy). */
export function isPlannerName(name: string): boolean {
  return PLANNER_NAMES.includes(name);
}

/**
 * Throws a `RangeError` naming every policy and planner when `name` is
 * neither a policy of `createPolicy` (with or without `+swap`) nor a
 * planner of {@link createPlanner}: the one check of a policy option, made
 * before any work (a trace read, a model built).
 *
 * @example
 * ```ts
 * import { checkPolicyName } from "@libra/evict";
 * checkPolicyName("dtr-eq+swap");
 * checkPolicyName("libra");
 * let message = "";
 * try {
 *   checkPolicyName("libr");
 * } catch (e) {
 *   message = (e as Error).message;
 * }
 * if (!message.includes("planners: libra")) throw new Error(message);
 * ```
 */
export function checkPolicyName(name: string): void {
  if (isPlannerName(name) || isPolicyName(name)) return;
  throw new RangeError(
    `unknown policy "${name}" (policies: ${
      POLICY_NAMES.join(", ")
    }, each also with +swap; planners: ${PLANNER_NAMES.join(", ")})`,
  );
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
