/**
 * Parts of the step measurements (`step_bench.ts`, `cold_step.ts`): a backend
 * whose kernels are replaced, a seeded training step of a small preset, and a
 * lazily made step.
 *
 * @module
 */

import { createData, createModel, type ModelName, SGD, trainStep } from "@libra/nn";
import { type Backend, manualSeed, withBackend } from "@libra/tensor";

/**
 * `inner` with every kernel call replaced by `kernel` (a no-op by default;
 * allocations, frees, reads and writes are `inner`'s own).
 */
export function withoutKernels(inner: Backend, kernel: () => void = () => {}): Backend {
  const b: Backend = Object.create(inner);
  Object.defineProperty(b, "name", { value: `${inner.name} (no kernels)` });
  b.run = kernel;
  if (inner.runValidated) b.runValidated = kernel;
  for (
    const m of ["alloc", "free", "read", "write", "memory", "sync", "resetPeak"] as const
  ) {
    // deno-lint-ignore no-explicit-any
    (b as any)[m] = (inner[m] as (...a: unknown[]) => unknown).bind(inner);
  }
  return b;
}

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
