/*
 * runtime.cu - library, device, memory, stream, timing and registry functions
 * of the CUDA build, plus the host helpers every kernel file shares (errors,
 * params, temporaries, index checks).
 *
 * The CUDA runtime is linked statically, so the library loads on a machine
 * without a driver: libra_init() then fails with LIBRA_ERR_NO_DEVICE and so
 * does every later call that needs the device. Functions that need no device
 * (version, build info, kernel table, Philox, clock) always work.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <mutex>

#include "common.cuh"

#include "libra_common.inc"
#include "libra_params.inc"

int32_t cuda_fail(cudaError_t e, const char* fn, const char* what) {
  /* Clears the error if it is not sticky, so the next call starts clean. */
  cudaGetLastError();
  int32_t status = e == cudaErrorMemoryAllocation ? LIBRA_ERR_OUT_OF_MEMORY : LIBRA_ERR_DEVICE;
  return set_error(status, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

int32_t tmp_alloc(const kcall* c, uint64_t bytes, tmpbuf* out) {
  out->st = c->st;
  cudaError_t e = cudaMallocAsync(&out->p, bytes ? bytes : 1, c->st);
  if (e != cudaSuccess) {
    out->p = nullptr;
    cuda_fail(e, c->name, "cudaMallocAsync (temporary)");
    return set_error(e == cudaErrorMemoryAllocation ? LIBRA_ERR_OUT_OF_MEMORY : LIBRA_ERR_DEVICE,
                     "libra_run(%s): could not allocate %llu bytes of temporary device memory: %s",
                     c->name, (unsigned long long)bytes, cudaGetErrorString(e));
  }
  return LIBRA_OK;
}

__global__ void first_bad_index(const int32_t* idx, int64_t n, int64_t bound,
                                unsigned long long* first) {
  GRID_LOOP(j, n) {
    int32_t v = idx[j];
    if (v < 0 || (int64_t)v >= bound) atomicMin(first, (unsigned long long)j);
  }
}

int32_t check_indices(const kcall* c, const int32_t* idx, int64_t n, int64_t limit,
                      const char* what, const char* limit_name) {
  if (n == 0) return LIBRA_OK;
  tmpbuf t;
  TRY(tmp_alloc(c, sizeof(unsigned long long), &t));
  CUDA_TRY(c, cudaMemsetAsync(t.p, 0xff, sizeof(unsigned long long), c->st));
  first_bad_index<<<grid_for(n), TPB, 0, c->st>>>(idx, n, limit, t.as<unsigned long long>());
  LAUNCHED(c);
  unsigned long long first = 0;
  CUDA_TRY(c, cudaMemcpyAsync(&first, t.p, sizeof first, cudaMemcpyDeviceToHost, c->st));
  CUDA_TRY(c, cudaStreamSynchronize(c->st));
  if (first == ~0ull) return LIBRA_OK;
  int32_t v = 0;
  CUDA_TRY(c, cudaMemcpyAsync(&v, idx + first, sizeof v, cudaMemcpyDeviceToHost, c->st));
  CUDA_TRY(c, cudaStreamSynchronize(c->st));
  return kfail(c, "%s[%llu] = %d is out of range [0, %s = %lld)", what, first, v, limit_name,
               (long long)limit);
}

/* ---- library and device ---- */

static std::mutex init_mu;
static std::atomic<int> init_state{-1}; /* -1 not tried, else the libra_init status */
static char init_msg[512];
static char device_name[256];
static char build_info[128] = "cuda (not initialized: libra_init picks cublas or tiled sgemm)";
static std::atomic<void*> current{nullptr};
/* libra_alloc / libra_free use the stream-ordered pool (set by libra_init; see "memory"). */
static bool pooled_alloc = true;
static int32_t thread_setting = 1;

LIBRA_API const char* libra_build_info(void) { return build_info; }

LIBRA_API int32_t libra_init(void) {
  int s = init_state.load();
  if (s < 0) {
    std::lock_guard<std::mutex> lock(init_mu);
    s = init_state.load();
    if (s < 0) {
      int n = 0;
      cudaError_t e = cudaGetDeviceCount(&n);
      if (e == cudaSuccess && n < 1) e = cudaErrorNoDevice;
      if (e == cudaSuccess) e = cudaSetDevice(0);
      if (e == cudaSuccess) e = cudaFree(0); /* creates the context now, not at first use */
      cudaDeviceProp prop;
      if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, 0);
      if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(init_msg, sizeof init_msg, "no CUDA device: %s", cudaGetErrorString(e));
        snprintf(build_info, sizeof build_info, "cuda (no device)");
        s = LIBRA_ERR_NO_DEVICE;
      } else {
        snprintf(device_name, sizeof device_name, "%s (sm_%d%d, %d SMs)", prop.name, prop.major,
                 prop.minor, prop.multiProcessorCount);
        /* Device tensors come from the default stream-ordered pool (libra_alloc), which keeps
         * what is freed for reuse instead of handing it back at each synchronization.
         * LIBRA_CUDA_SYNC_ALLOC=1 selects plain cudaMalloc / cudaFree instead. */
        const char* sync_alloc = getenv("LIBRA_CUDA_SYNC_ALLOC");
        pooled_alloc = !(sync_alloc && sync_alloc[0] == '1');
        cudaMemPool_t pool;
        if (pooled_alloc && cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) {
          uint64_t keep = UINT64_MAX;
          cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        }
        cudaGetLastError();
        libra_load_cublas();
        snprintf(build_info, sizeof build_info, "cuda (%s)",
                 libra_have_cublas() ? "cublas" : "tiled sgemm");
        s = LIBRA_OK;
      }
      init_state.store(s);
    }
  }
  if (s != LIBRA_OK) return set_error(s, "%s", init_msg);
  return LIBRA_OK;
}

/* Initializes on first use; every entry point that touches the device calls it. */
static int32_t need_device(const char* fn) {
  int s = init_state.load();
  if (s == LIBRA_OK) return LIBRA_OK;
  if (s < 0 && libra_init() == LIBRA_OK) return LIBRA_OK;
  return set_error(LIBRA_ERR_NO_DEVICE, "%s: %s", fn, init_msg);
}

#define NEED_DEVICE(fn)                                                         \
  do {                                                                          \
    int32_t s_ = need_device(fn);                                               \
    if (s_ != LIBRA_OK) return s_;                                              \
  } while (0)
#define API_CUDA(fn, call)                                                      \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) return cuda_fail(e_, fn, #call);                     \
  } while (0)

static cudaStream_t cur_stream(void) { return (cudaStream_t)current.load(); }

LIBRA_API int32_t libra_set_threads(int32_t n) {
  thread_setting = n > 0 ? n : 1;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_get_threads(int32_t* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_get_threads: out is NULL");
  *out = thread_setting;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_device_name(char* buf, int32_t len) {
  if (!buf || len <= 0) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_device_name: buf is NULL or len %d <= 0",
                     len);
  }
  NEED_DEVICE("libra_device_name");
  snprintf(buf, (size_t)len, "%s", device_name);
  return LIBRA_OK;
}

LIBRA_API int32_t libra_mem_info(uint64_t* free_bytes, uint64_t* total_bytes) {
  if (!free_bytes || !total_bytes) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_mem_info: NULL output pointer");
  }
  NEED_DEVICE("libra_mem_info");
  size_t f = 0, t = 0;
  API_CUDA("libra_mem_info", cudaMemGetInfo(&f, &t));
  /* What the allocator's pool holds for reuse (reserved but not in use) is free to a caller. */
  cudaMemPool_t pool;
  uint64_t reserved = 0, used = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
      reserved > used) {
    f += (size_t)(reserved - used);
  }
  cudaGetLastError();
  *free_bytes = f;
  *total_bytes = t;
  return LIBRA_OK;
}

/* ---- memory ---- */

/* Device memory is stream-ordered (cudaMallocAsync / cudaFreeAsync) on the legacy default
 * stream, from the device's default pool, which libra_init tells to keep what is freed. So a
 * free neither waits for the device (cudaFree synchronizes it: one stall per tensor freed) nor
 * hands the memory back, and an allocation of a size seen before is served from the pool, as
 * a framework's caching allocator does. It stays safe: the legacy default stream orders after
 * the work already queued on every stream the library creates (they are blocking streams), so
 * a block freed while a kernel or an async copy still reads it is reused only after that work,
 * and work queued on any stream after an allocation sees it made. The library is built without
 * per-thread default streams, so stream 0 is the legacy one. */
static cudaStream_t const ALLOC_STREAM = 0;

static cudaError_t device_alloc(void** p, uint64_t bytes) {
  size_t n = bytes ? (size_t)bytes : 1;
  return pooled_alloc ? cudaMallocAsync(p, n, ALLOC_STREAM) : cudaMalloc(p, n);
}

LIBRA_API int32_t libra_alloc(uint64_t bytes, void** out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_alloc: out is NULL");
  NEED_DEVICE("libra_alloc");
  /* 0 bytes allocate 1: a distinct 256-byte aligned block, the unique pointer for 0 bytes. */
  void* p = nullptr;
  cudaError_t e = device_alloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    /* The pool may hold freed blocks that do not fit this request (or kernel temporaries):
     * wait for the device, give the pool's unused memory back, and try once more. */
    cudaGetLastError();
    cudaMemPool_t pool;
    if (cudaDeviceSynchronize() == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) {
      cudaMemPoolTrimTo(pool, 0);
    }
    cudaGetLastError();
    e = device_alloc(&p, bytes);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    cudaGetLastError();
    return set_error(e == cudaErrorMemoryAllocation ? LIBRA_ERR_OUT_OF_MEMORY : LIBRA_ERR_DEVICE,
                     "libra_alloc: %s of %llu bytes failed: %s (%llu of %llu bytes free)",
                     pooled_alloc ? "cudaMallocAsync" : "cudaMalloc", (unsigned long long)bytes,
                     cudaGetErrorString(e), (unsigned long long)f, (unsigned long long)t);
  }
  *out = p;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_free(void* ptr) {
  if (!ptr) return LIBRA_OK;
  NEED_DEVICE("libra_free");
  if (pooled_alloc) {
    API_CUDA("libra_free", cudaFreeAsync(ptr, ALLOC_STREAM));
  } else {
    API_CUDA("libra_free", cudaFree(ptr));
  }
  return LIBRA_OK;
}

LIBRA_API int32_t libra_memset(void* ptr, int32_t value, uint64_t bytes) {
  if (bytes == 0) return LIBRA_OK;
  if (!ptr) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_memset: ptr is NULL");
  NEED_DEVICE("libra_memset");
  API_CUDA("libra_memset", cudaMemsetAsync(ptr, value & 0xff, (size_t)bytes, cur_stream()));
  return LIBRA_OK;
}

LIBRA_API int32_t libra_host_alloc(uint64_t bytes, void** out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_host_alloc: out is NULL");
  NEED_DEVICE("libra_host_alloc");
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, bytes ? (size_t)bytes : 1);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return set_error(e == cudaErrorMemoryAllocation ? LIBRA_ERR_OUT_OF_MEMORY : LIBRA_ERR_DEVICE,
                     "libra_host_alloc: cudaMallocHost of %llu bytes failed: %s",
                     (unsigned long long)bytes, cudaGetErrorString(e));
  }
  *out = p;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_host_free(void* ptr) {
  if (!ptr) return LIBRA_OK;
  NEED_DEVICE("libra_host_free");
  API_CUDA("libra_host_free", cudaFreeHost(ptr));
  return LIBRA_OK;
}

static int32_t copy_sync(void* dst, const void* src, uint64_t bytes, cudaMemcpyKind kind,
                         const char* fn, bool wait) {
  if (bytes == 0) return LIBRA_OK;
  if (!dst || !src) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "%s: NULL %s pointer for %llu bytes", fn,
                     dst ? "source" : "destination", (unsigned long long)bytes);
  }
  NEED_DEVICE(fn);
  cudaStream_t s = cur_stream();
  API_CUDA(fn, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, s));
  if (wait) API_CUDA(fn, cudaStreamSynchronize(s));
  return LIBRA_OK;
}

/* Host copies wait for completion (the host buffer may be reused at once); the
 * device-to-device copy is ordered on the current stream like any kernel. */
LIBRA_API int32_t libra_copy_h2d(void* dst, const void* src, uint64_t bytes) {
  return copy_sync(dst, src, bytes, cudaMemcpyHostToDevice, "libra_copy_h2d", true);
}
LIBRA_API int32_t libra_copy_d2h(void* dst, const void* src, uint64_t bytes) {
  return copy_sync(dst, src, bytes, cudaMemcpyDeviceToHost, "libra_copy_d2h", true);
}
LIBRA_API int32_t libra_copy_d2d(void* dst, const void* src, uint64_t bytes) {
  return copy_sync(dst, src, bytes, cudaMemcpyDeviceToDevice, "libra_copy_d2d", false);
}

/* ---- streams ---- */

/* Streams are blocking streams: they order against the legacy default stream,
 * so a swap copy issued after a kernel on the default stream sees its output. */
LIBRA_API int32_t libra_stream_create(libra_stream* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_stream_create: out is NULL");
  NEED_DEVICE("libra_stream_create");
  cudaStream_t s;
  API_CUDA("libra_stream_create", cudaStreamCreate(&s));
  *out = (libra_stream)s;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_stream_destroy(libra_stream s) {
  if (!s) return LIBRA_OK;
  NEED_DEVICE("libra_stream_destroy");
  void* expected = s;
  current.compare_exchange_strong(expected, nullptr);
  API_CUDA("libra_stream_destroy", cudaStreamDestroy((cudaStream_t)s));
  return LIBRA_OK;
}

LIBRA_API int32_t libra_stream_sync(libra_stream s) {
  NEED_DEVICE("libra_stream_sync");
  API_CUDA("libra_stream_sync", cudaStreamSynchronize((cudaStream_t)s));
  return LIBRA_OK;
}

static int32_t copy_async(void* dst, const void* src, uint64_t bytes, libra_stream s,
                          cudaMemcpyKind kind, const char* fn) {
  if (bytes == 0) return LIBRA_OK;
  if (!dst || !src) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "%s: NULL %s pointer for %llu bytes", fn,
                     dst ? "source" : "destination", (unsigned long long)bytes);
  }
  NEED_DEVICE(fn);
  API_CUDA(fn, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, (cudaStream_t)s));
  return LIBRA_OK;
}

LIBRA_API int32_t libra_copy_h2d_async(void* dst, const void* src, uint64_t bytes, libra_stream s) {
  return copy_async(dst, src, bytes, s, cudaMemcpyHostToDevice, "libra_copy_h2d_async");
}
LIBRA_API int32_t libra_copy_d2h_async(void* dst, const void* src, uint64_t bytes, libra_stream s) {
  return copy_async(dst, src, bytes, s, cudaMemcpyDeviceToHost, "libra_copy_d2h_async");
}

LIBRA_API int32_t libra_sync(void) {
  NEED_DEVICE("libra_sync");
  API_CUDA("libra_sync", cudaDeviceSynchronize());
  return LIBRA_OK;
}

LIBRA_API int32_t libra_set_stream(libra_stream s) {
  NEED_DEVICE("libra_set_stream");
  current.store(s);
  return LIBRA_OK;
}

/* ---- timing ---- */

LIBRA_API int32_t libra_event_create(libra_event* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_create: out is NULL");
  NEED_DEVICE("libra_event_create");
  cudaEvent_t e;
  API_CUDA("libra_event_create", cudaEventCreate(&e));
  *out = (libra_event)e;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_event_destroy(libra_event e) {
  if (!e) return LIBRA_OK;
  NEED_DEVICE("libra_event_destroy");
  API_CUDA("libra_event_destroy", cudaEventDestroy((cudaEvent_t)e));
  return LIBRA_OK;
}

LIBRA_API int32_t libra_event_record(libra_event e, libra_stream s) {
  if (!e) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_record: event is NULL");
  NEED_DEVICE("libra_event_record");
  API_CUDA("libra_event_record", cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
  return LIBRA_OK;
}

LIBRA_API int32_t libra_event_query(libra_event e, int32_t* out) {
  if (!e || !out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_query: NULL argument");
  NEED_DEVICE("libra_event_query");
  cudaError_t r = cudaEventQuery((cudaEvent_t)e);
  if (r == cudaErrorNotReady) {
    /* "not ready" is an answer, not an error: keep it out of cudaGetLastError. */
    if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
    *out = 0;
    return LIBRA_OK;
  }
  if (r != cudaSuccess) return cuda_fail(r, "libra_event_query", "cudaEventQuery");
  *out = 1;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_event_elapsed(libra_event start, libra_event end, float* ms) {
  if (!start || !end || !ms) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_elapsed: NULL argument");
  }
  NEED_DEVICE("libra_event_elapsed");
  API_CUDA("libra_event_elapsed", cudaEventSynchronize((cudaEvent_t)end));
  API_CUDA("libra_event_elapsed",
           cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
  return LIBRA_OK;
}

/* ---- registry ---- */

#include "libra_registry.inc"

LIBRA_API int32_t libra_run(int32_t kernel, void* const* inputs, int32_t n_in, void* const* outputs,
                            int32_t n_out, const double* params, int32_t n_params) {
  const kentry* e = nullptr;
  TRY(run_entry(kernel, &e));
  NEED_DEVICE("libra_run");
  const kcall c = {e->name, inputs, n_in, outputs, n_out, params, n_params, cur_stream()};
  TRY(run_check(e, &c));
  return e->fn(&c);
}
