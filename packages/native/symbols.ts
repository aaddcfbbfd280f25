/**
 * The FFI symbol table of `native/include/libra.h`, one entry per C function,
 * with the C type of each parameter in a comment. Output parameters (`T* out`)
 * are passed as typed arrays (`"buffer"`); device pointers as `"pointer"`. The
 * hot paths (`libra_run_ptr`, `libra_sample_bounds_ptr`: the same C functions)
 * take their arrays as pointers, which cost Deno's FFI next to nothing a call.
 *
 * @module
 */

/** The ABI version these symbols describe (`LIBRA_ABI_VERSION` in libra.h). */
export const ABI_VERSION = 2;

/** Status codes of libra.h (`libra_status`). */
export const Status = {
  OK: 0,
  INVALID_ARGUMENT: 1,
  OUT_OF_MEMORY: 2,
  NO_DEVICE: 3,
  UNKNOWN_KERNEL: 4,
  DEVICE: 5,
  UNSUPPORTED: 6,
  INTERNAL: 7,
} as const;

/** Every function of the C ABI. */
export const SYMBOLS = {
  /** int32_t libra_abi_version(void) */
  libra_abi_version: { parameters: [], result: "i32" },
  /** const char* libra_last_error(void) */
  libra_last_error: { parameters: [], result: "pointer" },
  /** const char* libra_build_info(void) */
  libra_build_info: { parameters: [], result: "pointer" },
  /** int32_t libra_init(void) */
  libra_init: { parameters: [], result: "i32" },
  /** int32_t libra_set_threads(int32_t n) */
  libra_set_threads: { parameters: ["i32"], result: "i32" },
  /** int32_t libra_get_threads(int32_t* out) */
  libra_get_threads: { parameters: ["buffer"], result: "i32" },

  /** int32_t libra_device_name(char* buf, int32_t len) */
  libra_device_name: { parameters: ["buffer", "i32"], result: "i32" },
  /** int32_t libra_mem_info(uint64_t* free_bytes, uint64_t* total_bytes) */
  libra_mem_info: { parameters: ["buffer", "buffer"], result: "i32" },

  /** int32_t libra_alloc(uint64_t bytes, void** out) */
  libra_alloc: { parameters: ["u64", "buffer"], result: "i32" },
  /** int32_t libra_free(void* ptr) */
  libra_free: { parameters: ["pointer"], result: "i32" },
  /** int32_t libra_memset(void* ptr, int32_t value, uint64_t bytes) */
  libra_memset: { parameters: ["pointer", "i32", "u64"], result: "i32" },
  /** int32_t libra_host_alloc(uint64_t bytes, void** out) */
  libra_host_alloc: { parameters: ["u64", "buffer"], result: "i32" },
  /** int32_t libra_host_free(void* ptr) */
  libra_host_free: { parameters: ["pointer"], result: "i32" },
  /** int32_t libra_copy_h2d(void* dst, const void* src, uint64_t bytes) */
  libra_copy_h2d: { parameters: ["pointer", "buffer", "u64"], result: "i32" },
  /** int32_t libra_copy_d2h(void* dst, const void* src, uint64_t bytes) */
  libra_copy_d2h: { parameters: ["buffer", "pointer", "u64"], result: "i32" },
  /** int32_t libra_copy_d2d(void* dst, const void* src, uint64_t bytes) */
  libra_copy_d2d: { parameters: ["pointer", "pointer", "u64"], result: "i32" },

  /** int32_t libra_stream_create(libra_stream* out) */
  libra_stream_create: { parameters: ["buffer"], result: "i32" },
  /** int32_t libra_stream_destroy(libra_stream s) */
  libra_stream_destroy: { parameters: ["pointer"], result: "i32" },
  /** int32_t libra_stream_sync(libra_stream s) */
  libra_stream_sync: { parameters: ["pointer"], result: "i32" },
  /** int32_t libra_copy_h2d_async(void* dst, const void* src, uint64_t bytes, libra_stream s) */
  libra_copy_h2d_async: { parameters: ["pointer", "pointer", "u64", "pointer"], result: "i32" },
  /** int32_t libra_copy_d2h_async(void* dst, const void* src, uint64_t bytes, libra_stream s) */
  libra_copy_d2h_async: { parameters: ["pointer", "pointer", "u64", "pointer"], result: "i32" },
  /** int32_t libra_sync(void) */
  libra_sync: { parameters: [], result: "i32" },

  /** int32_t libra_event_create(libra_event* out) */
  libra_event_create: { parameters: ["buffer"], result: "i32" },
  /** int32_t libra_event_destroy(libra_event e) */
  libra_event_destroy: { parameters: ["pointer"], result: "i32" },
  /** int32_t libra_event_record(libra_event e, libra_stream s) */
  libra_event_record: { parameters: ["pointer", "pointer"], result: "i32" },
  /** int32_t libra_event_query(libra_event e, int32_t* out) */
  libra_event_query: { parameters: ["pointer", "buffer"], result: "i32" },
  /** int32_t libra_event_elapsed(libra_event start, libra_event end, float* ms) */
  libra_event_elapsed: { parameters: ["pointer", "pointer", "buffer"], result: "i32" },
  /** int32_t libra_now_ns(uint64_t* out) */
  libra_now_ns: { parameters: ["buffer"], result: "i32" },

  /** int32_t libra_philox4x32(const uint32_t* ctr, const uint32_t* key, uint32_t* out) */
  libra_philox4x32: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },

  /**
   * int32_t libra_sample_bounds(const double* slots, int32_t n, int32_t k, int32_t* rng,
   *                             int32_t* sampled, double* bounds, double min_bytes,
   *                             double slack, int32_t floors, double clock, double* out)
   */
  libra_sample_bounds: {
    parameters: [
      "buffer",
      "i32",
      "i32",
      "buffer",
      "buffer",
      "buffer",
      "f64",
      "f64",
      "i32",
      "f64",
      "buffer",
    ],
    result: "i32",
  },

  /** int32_t libra_kernel_count(void) */
  libra_kernel_count: { parameters: [], result: "i32" },
  /** const char* libra_kernel_name(int32_t id) */
  libra_kernel_name: { parameters: ["i32"], result: "pointer" },
  /** int32_t libra_kernel_id(const char* name, int32_t* out) */
  libra_kernel_id: { parameters: ["buffer", "buffer"], result: "i32" },
  /**
   * int32_t libra_run(int32_t kernel, void* const* inputs, int32_t n_in,
   *                   void* const* outputs, int32_t n_out, const double* params, int32_t n_params)
   */
  libra_run: {
    parameters: ["i32", "buffer", "i32", "buffer", "i32", "buffer", "i32"],
    result: "i32",
  },
  /**
   * `libra_run` with its three lists as pointers (`"pointer"`): the backend's
   * hot path passes pointers to scratch arrays it keeps, where a `"buffer"`
   * parameter costs Deno's FFI ~10 ns a call warm (a kernel call passes three).
   */
  libra_run_ptr: {
    name: "libra_run",
    parameters: ["i32", "pointer", "i32", "pointer", "i32", "pointer", "i32"],
    result: "i32",
  },
  /** `libra_sample_bounds` with its arrays as pointers (see `libra_run_ptr`). */
  libra_sample_bounds_ptr: {
    name: "libra_sample_bounds",
    parameters: [
      "pointer",
      "i32",
      "i32",
      "pointer",
      "pointer",
      "pointer",
      "f64",
      "f64",
      "i32",
      "f64",
      "pointer",
    ],
    result: "i32",
  },
  /** int32_t libra_set_stream(libra_stream s) */
  libra_set_stream: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The opened library's function table. */
export type LibraSymbols = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
