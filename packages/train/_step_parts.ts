/**
 * Parts of the step measurements (`step_bench.ts`, `cold_step.ts`): a backend
 * whose kernels are replaced, a seeded training step of a small preset, and a
 * lazily made step.
 *
 * @module
 */

import { createData, createModel, type ModelName, SGD, trainStep } from "@libra/nn";
import { type Backend, manualSeed, withBackend } from "@libra/tensor";
import { withoutKernels } from "./_without_kernels.ts";

export { withoutKernels };

/** A training step of a fresh seeded copy of `name` (small) on `b`; `after` ends each step. */
export function stepper(name: ModelName, b: Backend, after?: () => void): () => void {
  return withBackend(b, () => {
    manualSeed(0);
    const model = createModel(name, "small", { backend: b });
    const data = createData(name, "small", { seed: 0 });
    const optimizer = new SGD(model.parameters(), { lr: 0.01, momentum: 0.9 });
    model.train();
    return () =>
      withBackend(b, () => {
        trainStep({ model, batch: data.next(), optimizer, backend: b });
        after?.();
      });
  });
}

/** Made on the first call, so that each benchmark builds its model when it starts. */
export function lazily(make: () => () => void): () => void {
  let f: (() => void) | null = null;
  return () => (f ??= make())();
}
