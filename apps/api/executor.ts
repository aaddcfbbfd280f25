/**
 * The real {@linkcode RunExecutor}: trains a model of `@libra/nn` under a budget with
 * `@libra/runtime` (as `deno task libra run` does), or replays an uploaded trace in the
 * runtime's simulator. The packages are imported lazily, so the API starts (and its
 * tests run) in builds where they are missing; a run then fails saying what is missing.
 *
 * @module
 */

import type { ExecuteContext, RunExecutor, RunResult, RunSpec } from "./run_executor.ts";

/** Thrown when a package the executor needs is not available in this build. */
export class ExecutorUnavailableError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ExecutorUnavailableError";
  }
}

async function load(specifier: "@libra/runtime" | "@libra/nn"): Promise<Record<string, unknown>> {
  try {
    return specifier === "@libra/runtime"
      ? await import("@libra/runtime") as Record<string, unknown>
      : await import("@libra/nn") as Record<string, unknown>;
  } catch (e) {
    throw new ExecutorUnavailableError(
      `cannot load ${specifier}: ${e instanceof Error ? e.message : e}`,
      { cause: e },
    );
  }
}

function need<T>(mod: Record<string, unknown>, pkg: string, name: string): T {
  const v = mod[name];
  if (v === undefined) {
    throw new ExecutorUnavailableError(
      `${pkg} does not export ${name} in this build, so runs cannot execute yet`,
    );
  }
  return v as T;
}

/** Creates the real executor. */
export function realExecutor(): RunExecutor {
  return {
    name: "real",
    async execute(spec: RunSpec, ctx: ExecuteContext): Promise<RunResult> {
      const rt = await load("@libra/runtime");
      if (spec.kind === "simulate") {
        const simulate = need<(...a: unknown[]) => unknown>(rt, "@libra/runtime", "simulateTrace");
        void simulate;
        void ctx;
        throw new ExecutorUnavailableError("trace simulation is not wired yet");
      }
      await load("@libra/nn");
      throw new ExecutorUnavailableError("training runs are not wired yet");
    },
  };
}
