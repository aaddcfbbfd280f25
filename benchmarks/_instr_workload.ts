/**
 * The workload `instr_profile.ts` runs under callgrind: the dispatch stream of
 * `@libra/runtime/dispatch-stream` (the stream the micro-benchmarks and
 * `runtime_bench.ts` time) on the portable cpu library (built without machine
 * flags: valgrind cannot decode AVX-512), through a runtime or on the backend
 * directly.
 *
 * `deno run -A benchmarks/_instr_workload.ts --policy dtr-eq --live 10000 --warmup 100000 --calls 20000`
 * prints `calls <n>` once done (the warm-up's and the stream's set-up calls not counted).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { cpuBackend } from "@libra/native";
import { Runtime } from "@libra/runtime";
import { dispatchStream, OLDEST_FIRST, STREAM_VALUE_BYTES } from "@libra/runtime/dispatch-stream";
import type { Backend } from "@libra/tensor/backend";

/** What the stream runs through: a runtime choosing its victims by a policy, or the backend. */
export const WORKLOAD_POLICIES = ["dtr-eq", "oldest-first", "unlimited", "direct"] as const;

/** One of {@link WORKLOAD_POLICIES}. */
export type WorkloadPolicy = typeof WORKLOAD_POLICIES[number];

/**
 * The stream's target: `direct` is `backend` itself; `unlimited` a runtime
 * without a budget; `dtr-eq` (sqrt sampling) and `oldest-first` runtimes under
 * a budget of 90% of `live` values, as the micro-benchmarks make them.
 */
export function workloadTarget(backend: Backend, policy: WorkloadPolicy, live: number): Backend {
  const budget = Math.floor(0.9 * live * STREAM_VALUE_BYTES);
  switch (policy) {
    case "direct":
      return backend;
    case "unlimited":
      return new Runtime({ backend, timeline: false });
    case "dtr-eq":
      return new Runtime({ backend, timeline: false, budget, search: { mode: "sqrt" } });
    case "oldest-first":
      return new Runtime({ backend, timeline: false, budget, policy: OLDEST_FIRST });
  }
}

/** Runs `warmup` then `calls` calls of the stream on `target` with `live` values live. */
export function runWorkload(target: Backend, live: number, warmup: number, calls: number): void {
  const step = dispatchStream(target, live);
  for (let i = 0; i < warmup; i++) step();
  for (let i = 0; i < calls; i++) step();
}

/** The workload's options and their defaults (`instr_profile.ts` takes them too). */
export const WORKLOAD_OPTIONS = {
  policy: { type: "string", default: "dtr-eq" },
  live: { type: "string", default: "10000" },
  warmup: { type: "string", default: "100000" },
  calls: { type: "string", default: "20000" },
} as const;

/** `v` as an integer of at least `min`, else a RangeError naming `tool`'s `--name`. */
export function integerOption(tool: string, name: string, v: string, min: number): number {
  const n = v.trim() === "" ? NaN : Number(v);
  if (!Number.isInteger(n) || n < min) {
    throw new RangeError(`${tool}: --${name} must be an integer of at least ${min}, got ${v}`);
  }
  return n;
}

/** `v` as one of `choices`, else a RangeError naming `tool`'s `--name` and the choices. */
export function choiceOption<T extends string>(
  tool: string,
  name: string,
  v: string,
  choices: readonly T[],
): T {
  if (!(choices as readonly string[]).includes(v)) {
    throw new RangeError(`${tool}: --${name} must be one of ${choices.join(", ")}, got ${v}`);
  }
  return v as T;
}

/** `v` as a {@link WorkloadPolicy}, else a RangeError naming `tool`'s `--policy`. */
export function policyOption(tool: string, v: string): WorkloadPolicy {
  return choiceOption(tool, "policy", v, WORKLOAD_POLICIES);
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: WORKLOAD_OPTIONS });
  const policy = policyOption("_instr_workload", values.policy);
  const count = (name: string, v: string, min: number) =>
    integerOption("_instr_workload", name, v, min);
  const live = count("live", values.live, 1);
  const calls = count("calls", values.calls, 0);
  const backend = cpuBackend({ variant: "portable", threads: 1 });
  runWorkload(
    workloadTarget(backend, policy, live),
    live,
    count("warmup", values.warmup, 0),
    calls,
  );
  console.log(`calls ${calls}`);
}
