/**
 * The runtime's own JavaScript per training step, side by side with the
 * budget-free step: gpt small and lstm small on the native cpu backend with
 * every kernel replaced by a no-op (allocations, frees, reads and writes are
 * real), once on the backend and once under a `Runtime` at the budget-free
 * peak (ratio 1.0: no eviction; the pool, lineage, checks and the release
 * path all work as in a measured run). What the two rows differ by is what
 * the runtime adds to a step with warm caches, without the kernels' noise:
 * `libra run` at ratio 1.0 measures that and what real kernels do to those
 * caches besides (gpt small on the 2-core development VM: 0.4-0.8 ms a step
 * here, median and mean, against 2.2-3.3 ms with real kernels).
 * Run with `deno bench -A packages/train/step_bench.ts`; skipped when the
 * native library is not built.
 *
 * @module
 */

import { cpuBackend } from "@libra/native";
import type { ModelName } from "@libra/nn";
import { Runtime } from "@libra/runtime";
import type { Backend } from "@libra/tensor";
import { lazily, stepper, withoutKernels } from "./_step_parts.ts";

let native: Backend | null = null;
try {
  native = cpuBackend();
} catch (e) {
  console.warn(`step_bench: skipped: no native cpu backend (${(e as Error).message})`);
}

// Warm-up steps: about `DEFAULT_WARMUP_CALLS` (30,000) runtime calls, after which the JavaScript
// engine runs the runtime's hot paths optimized (gpt small makes 280 calls a step, lstm 363).
const WARMUP: Record<string, number> = { gpt: 120, lstm: 80 };

for (const name of ["gpt", "lstm"] as ModelName[]) {
  const group = `${name}-js`;
  const warmup = WARMUP[name]!;
  if (native === null) {
    Deno.bench({ name: `${name}/small step without kernels`, ignore: true, fn() {} });
    continue;
  }
  const b = withoutKernels(native);
  Deno.bench({
    name: `${name}/small step without kernels, on the backend`,
    group,
    baseline: true,
    warmup,
    n: 200,
    fn: lazily(() => stepper(name, b)),
  });
  Deno.bench({
    name: `${name}/small step without kernels, under a runtime at the budget-free peak`,
    group,
    warmup,
    n: 200,
    fn: lazily(() => {
      const rt = new Runtime({ backend: b, timeline: false });
      const step = stepper(name, rt, () => rt.endStep());
      // The budget-free peak, then that budget (as `libra run` sets a ratio of 1.0).
      for (let i = 0; i < 3; i++) step();
      rt.setBudget(rt.stats.peakBytes);
      return step;
    }),
  });
}
