/**
 * `@libra/tensor`: tensors, the kernel table, autograd, and the `Backend`
 * contract that every device implementation (cpu, cuda, meta, and the
 * re-materialization runtime) satisfies.
 *
 * ```ts
 * import { setDefaultBackend, tensor, matmul, tidy } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = tensor([[0.5, -1], [2, 0]], undefined, { requiresGrad: true });
 * const loss = tidy(() => matmul(tensor([[1, 2]]), w).relu().sum());
 * loss.backward();
 * if (!(w.grad!.toArray().join() === "1,0,2,0")) throw new Error("example: unexpected result");
 * ```
 *
 * Tensors are contiguous handles over refcounted storages; every op is a
 * function and a method, with numpy broadcasting; the op table
 * ({@link OP_TABLE}) keeps each op's forward next to its gradient rule;
 * lifetimes are deterministic (`dispose`, `using`, `tidy`); random ops are
 * seeded (`manualSeed`) and exactly reproducible.
 *
 * @module
 */

export * from "./backend.ts";
export * from "./kernels.ts";
export * from "./meta_backend.ts";
export {
  arange,
  empty,
  fromTypedArray,
  full,
  getDefaultBackend,
  keep,
  type NestedArray,
  ones,
  onesLike,
  setDefaultBackend,
  Storage,
  Tensor,
  tensor,
  type TensorLike,
  type TensorOptions,
  tidy,
  view,
  withBackend,
  zeros,
  zerosLike,
} from "./tensor.ts";
export * from "./ops.ts";
export { backward, type GradNode, type GradRule, isGradEnabled, noGrad } from "./autograd.ts";
export * from "./random.ts";
export * from "./optim.ts";
