/**
 * `@libra/tensor`: tensors, the kernel table, autograd, and the `Backend`
 * contract that every device implementation (cpu, cuda, meta, and the
 * re-materialization runtime) satisfies.
 *
 * @module
 */

export * from "./backend.ts";
export * from "./kernels.ts";
export * from "./meta_backend.ts";
