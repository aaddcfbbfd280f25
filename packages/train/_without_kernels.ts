/**
 * A backend whose kernels do nothing: the runtime's JIT warm-up in
 * `runTraining` and the step measurements (`_step_parts.ts`) run on it.
 *
 * @module
 */

import type { Backend } from "@libra/tensor";

/**
 * `inner` with every kernel call replaced by `kernel` (a no-op by default;
 * allocations, frees, reads, writes and host copies are `inner`'s own).
 */
export function withoutKernels(inner: Backend, kernel: () => void = () => {}): Backend {
  const b: Backend = Object.create(inner);
  Object.defineProperty(b, "name", { value: `${inner.name} (no kernels)` });
  b.run = kernel;
  if (inner.runValidated) b.runValidated = kernel;
  for (
    const m of [
      "alloc",
      "free",
      "read",
      "write",
      "memory",
      "sync",
      "resetPeak",
      "allocHost",
      "freeHost",
      "copy",
      "copyAsync",
    ] as const
  ) {
    // deno-lint-ignore no-explicit-any
    (b as any)[m] = (inner[m] as (...a: unknown[]) => unknown).bind(inner);
  }
  return b;
}
