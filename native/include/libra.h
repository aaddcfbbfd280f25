/*
 * libra.h - the one C ABI of the Libra kernel library.
 *
 * Two builds implement it: native/cpu (libra_cpu.so: C, OpenMP, OpenBLAS sgemm
 * or a portable blocked fallback) and native/cuda (libra_cuda.so: CUDA, cuBLAS
 * loaded at run time or a tiled fallback). TypeScript calls it through Deno FFI
 * (packages/native/symbols.ts mirrors every declaration below).
 *
 * Conventions
 * - Every function returns a status code (LIBRA_OK = 0) unless it says otherwise.
 *   On failure, libra_last_error() returns a message for the calling thread
 *   that names the function and the values involved.
 * - "Device" pointers are what libra_alloc returns: host memory in the CPU build,
 *   GPU memory in the CUDA build. "Host" pointers are ordinary or pinned host memory.
 * - Kernels are addressed by id; ids come from libra_kernel_id(name) and are only
 *   valid for the loaded library. Names, buffer orders and parameter layouts are
 *   the kernel table in packages/tensor/kernels.ts (the single source of truth).
 * - Parameters are passed as doubles; integers in them are exact.
 */
#ifndef LIBRA_H
#define LIBRA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LIBRA_API __attribute__((visibility("default")))
#else
#define LIBRA_API
#endif

/* Bumped whenever a declaration in this file changes. */
#define LIBRA_ABI_VERSION 2

typedef enum {
  LIBRA_OK = 0,
  LIBRA_ERR_INVALID_ARGUMENT = 1, /* bad sizes, params, pointers, out-of-range indices */
  LIBRA_ERR_OUT_OF_MEMORY = 2,    /* allocation failed */
  LIBRA_ERR_NO_DEVICE = 3,        /* CUDA build: no CUDA device or driver on this machine */
  LIBRA_ERR_UNKNOWN_KERNEL = 4,   /* kernel name or id not implemented by this build */
  LIBRA_ERR_DEVICE = 5,           /* a CUDA runtime or launch error */
  LIBRA_ERR_UNSUPPORTED = 6,      /* operation not available in this build */
  LIBRA_ERR_INTERNAL = 7
} libra_status;

/* ---- library ---------------------------------------------------------------- */

/* Returns LIBRA_ABI_VERSION of the build (no status). */
LIBRA_API int32_t libra_abi_version(void);
/* Message of the last failed call on this thread ("" if none); owned by the library. */
LIBRA_API const char* libra_last_error(void);
/* Build description, e.g. "cpu (openblas, openmp)", "cpu (portable, openmp)", "cuda (sm_90; cublas at run time)". */
LIBRA_API const char* libra_build_info(void);
/* Initializes the device. CPU: always OK. CUDA: LIBRA_ERR_NO_DEVICE when no GPU/driver. Idempotent. */
LIBRA_API int32_t libra_init(void);
/* Number of worker threads (OpenMP) for CPU kernels; CUDA ignores it. n <= 0 restores the default. */
LIBRA_API int32_t libra_set_threads(int32_t n);
LIBRA_API int32_t libra_get_threads(int32_t* out);

/* ---- device info ------------------------------------------------------------ */

/* Writes a NUL-terminated device name into buf (truncated to len - 1 bytes). */
LIBRA_API int32_t libra_device_name(char* buf, int32_t len);
/* Free and total device memory in bytes (CPU: from the OS; CUDA: memory the allocator's pool
 * holds unused counts as free). */
LIBRA_API int32_t libra_mem_info(uint64_t* free_bytes, uint64_t* total_bytes);

/* ---- memory ----------------------------------------------------------------- */

/* Device allocation, 256-byte aligned. bytes = 0 returns a unique non-NULL pointer. The CUDA
 * build allocates and frees in stream order from a caching pool: libra_free does not wait for
 * the device, and a block is reused only after the work queued before its free. */
LIBRA_API int32_t libra_alloc(uint64_t bytes, void** out);
LIBRA_API int32_t libra_free(void* ptr);
/* Sets bytes of device memory to (uint8_t)value. */
LIBRA_API int32_t libra_memset(void* ptr, int32_t value, uint64_t bytes);
/* Host memory for swapping: page-locked in the CUDA build, aligned malloc in the CPU build. */
LIBRA_API int32_t libra_host_alloc(uint64_t bytes, void** out);
LIBRA_API int32_t libra_host_free(void* ptr);

LIBRA_API int32_t libra_copy_h2d(void* dst, const void* src, uint64_t bytes);
LIBRA_API int32_t libra_copy_d2h(void* dst, const void* src, uint64_t bytes);
LIBRA_API int32_t libra_copy_d2d(void* dst, const void* src, uint64_t bytes);

/* ---- streams and asynchronous copies ---------------------------------------- */
/* CPU build: streams are dummies and async copies complete before returning. */

typedef void* libra_stream;
typedef void* libra_event;

LIBRA_API int32_t libra_stream_create(libra_stream* out);
LIBRA_API int32_t libra_stream_destroy(libra_stream s);
LIBRA_API int32_t libra_stream_sync(libra_stream s);
LIBRA_API int32_t libra_copy_h2d_async(void* dst, const void* src, uint64_t bytes, libra_stream s);
LIBRA_API int32_t libra_copy_d2h_async(void* dst, const void* src, uint64_t bytes, libra_stream s);
/* Waits for all work on all streams. */
LIBRA_API int32_t libra_sync(void);

/* ---- timing ----------------------------------------------------------------- */

/* CUDA: cudaEvent_t; CPU: a recorded CLOCK_MONOTONIC timestamp. s may be NULL (default stream). */
LIBRA_API int32_t libra_event_create(libra_event* out);
LIBRA_API int32_t libra_event_destroy(libra_event e);
LIBRA_API int32_t libra_event_record(libra_event e, libra_stream s);
/* 1 in *out when the event has completed (CPU: always). */
LIBRA_API int32_t libra_event_query(libra_event e, int32_t* out);
/* Milliseconds between two recorded events (waits for end). */
LIBRA_API int32_t libra_event_elapsed(libra_event start, libra_event end, float* ms);
/* Monotonic host clock in nanoseconds. */
LIBRA_API int32_t libra_now_ns(uint64_t* out);

/* ---- random numbers --------------------------------------------------------- */

/* Philox4x32-10: out[0..3] = philox(counter = ctr[0..3], key = key[0..1]). For known-answer tests. */
LIBRA_API int32_t libra_philox4x32(const uint32_t* ctr, const uint32_t* key, uint32_t* out);

/* ---- eviction search -------------------------------------------------------- */

/*
 * The draws and bounds of a sampled eviction search over a pool of n members
 * (packages/evict/sample_bounds.ts is the reference: the results are bitwise
 * the same). slots holds 4 doubles a member: last access, compute, bytes, kept
 * floor. Draws k positions in [0, n) with mulberry32 from rng[0] (advanced in
 * place); keeps those of at least min_bytes bytes, in draw order, in
 * sampled[0..m) with their local bounds in bounds[0..m): (compute + floor) /
 * (bytes * (clock - last access)), Infinity where that product is not
 * positive, -Infinity for NaN, the floor max(0, kept - slack - (kept + slack)
 * * 2^-50) when floors != 0. out[0] = the index (in 0..m) of the first least
 * bound, out[1] = the least bound of the others (Infinity if none). Returns m
 * (no status; nothing is checked: the caller owns the sizes).
 */
LIBRA_API int32_t libra_sample_bounds(const double* slots, int32_t n, int32_t k, int32_t* rng,
                                      int32_t* sampled, double* bounds, double min_bytes,
                                      double slack, int32_t floors, double clock, double* out);

/* ---- kernels ---------------------------------------------------------------- */

/* Number of kernels this build implements. */
LIBRA_API int32_t libra_kernel_count(void);
/* Name of kernel id (NULL if out of range; no status). */
LIBRA_API const char* libra_kernel_name(int32_t id);
/* Looks up a kernel id by table name; LIBRA_ERR_UNKNOWN_KERNEL when absent. */
LIBRA_API int32_t libra_kernel_id(const char* name, int32_t* out);
/*
 * Runs one kernel on the current stream (CUDA: asynchronous; errors from the
 * launch are reported, errors inside the kernel surface at the next sync).
 * inputs/outputs: arrays of device pointers; params: n_params doubles.
 * The library validates n_in, n_out and n_params and the params' ranges; byte
 * sizes of the buffers are validated by the caller (it cannot see them).
 */
LIBRA_API int32_t libra_run(int32_t kernel, void* const* inputs, int32_t n_in, void* const* outputs,
                            int32_t n_out, const double* params, int32_t n_params);
/* Makes s the stream kernels and synchronous copies run on (NULL = default stream). */
LIBRA_API int32_t libra_set_stream(libra_stream s);

#ifdef __cplusplus
}
#endif

#endif /* LIBRA_H */
