/**
 * The workload `cache_profile.ts` runs under callgrind's cache simulation:
 * training steps of a zoo model's small preset on the portable cpu library
 * (valgrind cannot decode AVX-512), through a runtime at the budget-free peak
 * (ratio 1.0, as `libra run` sets it) or on the backend directly, with every
 * kernel replaced by a native copy of `--stream-mb` megabytes (half read, half
 * written): a pass larger than the simulated last-level cache, so that what
 * runs between two kernels starts from caches the way real kernels leave
 * them, without the kernels' own instructions. The warm-up's kernels do
 * nothing (it only brings the hot code to the optimizing tier).
 *
 * `deno run -A benchmarks/_cache_workload.ts --target runtime --warmup 600 --steps 8`
 * prints `steps <n>` once done.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { cpuBackend } from "@libra/native";
import { MODEL_NAMES, type ModelName } from "@libra/nn";
import { Runtime } from "@libra/runtime";
import type { Backend, DeviceBuffer } from "@libra/tensor/backend";
import { stepper, withoutKernels } from "../packages/train/_step_parts.ts";
import { choiceOption, integerOption } from "./_instr_workload.ts";

/** What the steps run on: a runtime at the budget-free peak, or the backend itself. */
export const CACHE_TARGETS = ["runtime", "direct"] as const;

/** One of {@link CACHE_TARGETS}. */
export type CacheTarget = typeof CACHE_TARGETS[number];

/** The workload's options and their defaults (`cache_profile.ts` takes them too). */
export const CACHE_WORKLOAD_OPTIONS = {
  model: { type: "string", default: "gpt" },
  target: { type: "string", default: "runtime" },
  warmup: { type: "string", default: "600" },
  steps: { type: "string", default: "8" },
  "stream-mb": { type: "string", default: "8" },
} as const;

/** `v` as a {@link CacheTarget}, else a RangeError naming `tool`'s `--target`. */
export function targetOption(tool: string, v: string): CacheTarget {
  return choiceOption(tool, "target", v, CACHE_TARGETS);
}

/** `v` as a zoo model's name, else a RangeError naming `tool`'s `--model`. */
export function modelOption(tool: string, v: string): ModelName {
  return choiceOption(tool, "model", v, MODEL_NAMES);
}

/**
 * A step of `model` (small) on `target` over `inner` with its kernels
 * replaced: by nothing until `streaming()` is called, then by a copy of
 * `streamMb` megabytes each. The runtime's budget is its budget-free peak.
 */
export function cacheWorkload(
  inner: Backend,
  model: ModelName,
  target: CacheTarget,
  streamMb: number,
): { step: () => void; streaming: () => void } {
  const floats = Math.max(1, Math.floor((streamMb * 2 ** 20) / 8));
  const src: DeviceBuffer = inner.alloc(4 * floats), dst: DeviceBuffer = inner.alloc(4 * floats);
  let on = false;
  const b = withoutKernels(inner, () => {
    if (on) inner.run("copy", [src], [dst], [floats]);
  });
  let step: () => void;
  if (target === "runtime") {
    const rt = new Runtime({ backend: b, timeline: false });
    step = stepper(model, rt, () => rt.endStep());
    // The budget-free peak, then that budget (as `libra run` sets a ratio of 1.0).
    step();
    step();
    rt.setBudget(rt.stats.peakBytes);
  } else step = stepper(model, b);
  return { step, streaming: () => void (on = true) };
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: CACHE_WORKLOAD_OPTIONS });
  const count = (name: string, v: string, min: number) =>
    integerOption("_cache_workload", name, v, min);
  const steps = count("steps", values.steps, 0);
  const w = cacheWorkload(
    cpuBackend({ variant: "portable", threads: 1 }),
    modelOption("_cache_workload", values.model),
    targetOption("_cache_workload", values.target),
    count("stream-mb", values["stream-mb"], 1),
  );
  for (let i = count("warmup", values.warmup, 0); i > 0; i--) w.step();
  w.streaming();
  for (let i = 0; i < steps; i++) w.step();
  console.log(`steps ${steps}`);
}
