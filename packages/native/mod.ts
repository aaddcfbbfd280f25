/**
 * `@libra/native`: Deno FFI bindings to the Libra kernel library
 * (`native/build/libra_cpu.so`, `native/build/libra_cuda.so`, built by
 * `deno task build:native`) and the `cpu` and `cuda` backends that implement
 * the `Backend` contract of `@libra/tensor` on it.
 *
 * The library is looked up in `$LIBRA_NATIVE_DIR` when set, otherwise in the
 * repository's `native/build/`. Native status codes become typed errors
 * ({@link NoDeviceError}, {@link InvalidArgumentError}, ...); malformed kernel
 * calls are rejected before they reach C as a `KernelError`.
 *
 * @example
 * ```ts
 * import { cpuBackend } from "@libra/native";
 * const cpu = cpuBackend();
 * const a = cpu.alloc(8), b = cpu.alloc(8), c = cpu.alloc(8);
 * cpu.write(a, new Float32Array([1, 2]));
 * cpu.write(b, new Float32Array([10, 20]));
 * cpu.run("add", [a, b], [c], [1, 2, 1, 1]);
 * console.log(new Float32Array(cpu.read(c).buffer)); // Float32Array [ 11, 22 ]
 * for (const buf of [a, b, c]) cpu.free(buf);
 * ```
 *
 * @module
 */

export {
  cpuBackend,
  type CpuBackendOptions,
  cudaBackend,
  type CudaBackendOptions,
  type KernelProfileEntry,
  NativeBackend,
  type NativeBackendOptions,
  type NativeBackendStats,
  NativeBuffer,
} from "./native_backend.ts";
export * from "./errors.ts";
export { ABI_VERSION, Status, SYMBOLS } from "./symbols.ts";
