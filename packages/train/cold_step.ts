/**
 * The runtime's time per training step with the caches as real kernels leave
 * them, without the kernels' own noise: a zoo model's small preset (gpt by
 * default) on the native cpu
 * backend, each kernel replaced by a pass over a buffer of `--stream-mb`
 * megabytes (one read and write a cache line, as a kernel streams its
 * tensors), once on the backend and once under a `Runtime` at the
 * budget-free peak (ratio 1.0), their steps interleaved. What it prints is
 * each copy's time per step outside the kernels (the median of the measured
 * steps) and what the runtime adds: with no stream that is what
 * `step_bench.ts` measures, with one what `libra run` at ratio 1.0 adds to a
 * step (gpt small on the 2-core development VM: 0.4-0.7 ms with no stream,
 * 2-3.5 ms with 16 MB, as with real kernels).
 *
 * Run with `deno run -A packages/train/cold_step.ts [--model NAME]
 * [--stream-mb 16] [--steps 60] [--warmup 150]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { cpuBackend } from "@libra/native";
import { MODEL_NAMES, type ModelName } from "@libra/nn";
import { Runtime } from "@libra/runtime";
import { median } from "@libra/util";
import { stepper, withoutKernels } from "./_step_parts.ts";

const USAGE =
  "usage: deno run -A packages/train/cold_step.ts [--model NAME] [--stream-mb N] [--steps N] [--warmup N]";

function count(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    throw new RangeError(`cold_step: --${name} must be an integer >= ${min}, got "${v}"\n${USAGE}`);
  }
  return n;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      model: { type: "string", default: "gpt" },
      "stream-mb": { type: "string", default: "16" },
      steps: { type: "string", default: "60" },
      warmup: { type: "string", default: "150" },
    },
  });
  const model = values.model as ModelName;
  if (!MODEL_NAMES.includes(model)) {
    throw new RangeError(
      `cold_step: unknown model "${values.model}" (one of ${MODEL_NAMES.join(", ")})\n${USAGE}`,
    );
  }
  const mb = count("stream-mb", values["stream-mb"]!, 0);
  const steps = count("steps", values.steps!, 1);
  const warmup = count("warmup", values.warmup!, 0);

  // The stream: one number of each 64-byte line read and written, as a kernel passes its tensors.
  const stream = new Float64Array(mb * 131072);
  let kernelMs = 0;
  const kernel = () => {
    const t0 = performance.now();
    let s = 0;
    for (let i = 0; i < stream.length; i += 8) {
      s += stream[i]!;
      stream[i] = s;
    }
    kernelMs += performance.now() - t0;
  };
  const b = withoutKernels(cpuBackend(), kernel);
  const base = stepper(model, b);
  const rt = new Runtime({ backend: b, timeline: false });
  const under = stepper(model, rt, () => rt.endStep());
  // The budget-free peak, then that budget (as `libra run` sets a ratio of 1.0).
  under();
  under();
  rt.setBudget(rt.stats.peakBytes);
  for (let i = 0; i < warmup; i++) {
    base();
    under();
  }
  const outside = (step: () => void) => {
    kernelMs = 0;
    const t0 = performance.now();
    step();
    return performance.now() - t0 - kernelMs;
  };
  const a: number[] = [], u: number[] = [], added: number[] = [];
  for (let i = 0; i < steps; i++) {
    // Alternating which goes first, so that load from elsewhere falls on both alike.
    let x: number, y: number;
    if (i % 2 === 0) {
      x = outside(base);
      y = outside(under);
    } else {
      y = outside(under);
      x = outside(base);
    }
    a.push(x);
    u.push(y);
    added.push(y - x);
  }
  console.log(
    `${model}/small, kernels replaced by a ${mb} MB stream, ${steps} interleaved pairs after ${warmup}: ` +
      `outside the kernels ${median(a).toFixed(3)} ms a step budget-free, ` +
      `${median(u).toFixed(3)} ms under the runtime at ratio 1.0; ` +
      `the runtime adds ${median(added).toFixed(3)} ms (median of the pairs)`,
  );
}
