/*
 * core.c - library, device, memory, stream, timing and registry functions of
 * the CPU build. "Device" memory is aligned host memory; streams and events
 * exist so the ABI is the same as CUDA's, and asynchronous copies complete
 * before they return.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifdef LIBRA_OPENBLAS
void openblas_set_num_threads(int num_threads);
#endif

#include "libra_common.inc"
#include "libra_params.inc"

/* ---- library ---- */

static int default_threads = 1;

__attribute__((constructor)) static void libra_cpu_init(void) {
#ifdef _OPENMP
  default_threads = omp_get_max_threads();
#endif
}

int libra_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

LIBRA_API const char* libra_build_info(void) {
#ifdef LIBRA_OPENBLAS
  return "cpu (openblas, openmp)";
#else
  return "cpu (portable, openmp)";
#endif
}
LIBRA_API int32_t libra_init(void) { return LIBRA_OK; }

LIBRA_API int32_t libra_set_threads(int32_t n) {
  int t = n > 0 ? n : default_threads;
#ifdef _OPENMP
  omp_set_num_threads(t);
#endif
#ifdef LIBRA_OPENBLAS
  openblas_set_num_threads(t);
#endif
  (void)t;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_get_threads(int32_t* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_get_threads: out is NULL");
  *out = libra_threads();
  return LIBRA_OK;
}

/* ---- device info ---- */

LIBRA_API int32_t libra_device_name(char* buf, int32_t len) {
  if (!buf || len <= 0) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_device_name: buf is NULL or len %d <= 0",
                     len);
  }
  char model[256] = "unknown cpu";
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        char* colon = strchr(line, ':');
        if (colon) {
          colon++;
          while (*colon == ' ' || *colon == '\t') colon++;
          size_t l = strcspn(colon, "\n");
          if (l >= sizeof model) l = sizeof model - 1;
          memcpy(model, colon, l);
          model[l] = 0;
        }
        break;
      }
    }
    fclose(f);
  }
  snprintf(buf, (size_t)len, "cpu: %s (%d threads)", model, libra_threads());
  return LIBRA_OK;
}

LIBRA_API int32_t libra_mem_info(uint64_t* free_bytes, uint64_t* total_bytes) {
  if (!free_bytes || !total_bytes) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_mem_info: NULL output pointer");
  }
  long page = sysconf(_SC_PAGESIZE);
  long phys = sysconf(_SC_PHYS_PAGES);
  long avail = sysconf(_SC_AVPHYS_PAGES);
  *total_bytes = phys > 0 && page > 0 ? (uint64_t)phys * (uint64_t)page : 0;
  *free_bytes = avail > 0 && page > 0 ? (uint64_t)avail * (uint64_t)page : 0;
  return LIBRA_OK;
}

/* ---- memory ---- */

/*
 * Freed device buffers are kept in a cache keyed by their rounded size and
 * handed out again by the next allocation of that size: a training step
 * allocates the same sizes every iteration, and a fresh large block would come
 * from mmap and pay a page fault per 4 KiB on first touch (often more than the
 * kernel that writes it). At most LIBRA_CPU_CACHE_MB (default 1024) MiB are
 * kept; beyond that, freed blocks go back to the system. Host buffers
 * (libra_host_alloc) are not cached.
 */
#include <pthread.h>

typedef struct cblock {
  struct cblock* next;
  uint64_t bytes; /* rounded size */
} cblock;

#define CACHE_SLOTS 1024 /* open addressing by rounded size */
static struct {
  uint64_t bytes;
  cblock* head;
} cache[CACHE_SLOTS];
static uint64_t cache_bytes = 0, cache_cap = 0;
static int cache_ready = 0;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* Size of each live allocation, so libra_free knows it: a small header before the block. */
#define HDR 256

static void cache_init(void) {
  if (cache_ready) return;
  const char* env = getenv("LIBRA_CPU_CACHE_MB");
  long long mb = env && *env ? atoll(env) : 1024;
  cache_cap = mb > 0 ? (uint64_t)mb << 20 : 0;
  cache_ready = 1;
}

static size_t slot_of(uint64_t bytes) {
  uint64_t h = (bytes >> 8) * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 54) & (CACHE_SLOTS - 1);
}

/* Takes a cached block of exactly `bytes` (rounded), or NULL. Lock held. */
static void* cache_take(uint64_t bytes) {
  for (size_t i = slot_of(bytes), n = 0; n < CACHE_SLOTS; i = (i + 1) & (CACHE_SLOTS - 1), n++) {
    if (cache[i].bytes == 0) return NULL;
    if (cache[i].bytes == bytes) {
      cblock* b = cache[i].head;
      if (!b) return NULL;
      cache[i].head = b->next;
      cache_bytes -= bytes;
      return b;
    }
  }
  return NULL;
}

/* Keeps a block; returns 0 when the cache is full (the caller frees it). Lock held. */
static int cache_put(void* base, uint64_t bytes) {
  if (cache_bytes + bytes > cache_cap) return 0;
  for (size_t i = slot_of(bytes), n = 0; n < CACHE_SLOTS; i = (i + 1) & (CACHE_SLOTS - 1), n++) {
    if (cache[i].bytes == 0 || cache[i].bytes == bytes) {
      cache[i].bytes = bytes;
      cblock* b = base;
      b->next = cache[i].head;
      b->bytes = bytes;
      cache[i].head = b;
      cache_bytes += bytes;
      return 1;
    }
  }
  return 0;
}

static int32_t aligned(uint64_t bytes, void** out, const char* fn) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  if (bytes > (UINT64_MAX >> 2)) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "%s: %llu bytes is not allocatable", fn,
                     (unsigned long long)bytes);
  }
  uint64_t rounded = bytes == 0 ? 256 : (bytes + 255) / 256 * 256;
  void* p = aligned_alloc(256, (size_t)rounded);
  if (!p) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "%s: could not allocate %llu bytes", fn,
                     (unsigned long long)bytes);
  }
  *out = p;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_alloc(uint64_t bytes, void** out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_alloc: out is NULL");
  if (bytes > (UINT64_MAX >> 2)) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_alloc: %llu bytes is not allocatable",
                     (unsigned long long)bytes);
  }
  const uint64_t rounded = bytes == 0 ? 256 : (bytes + 255) / 256 * 256;
  pthread_mutex_lock(&cache_lock);
  cache_init();
  void* base = cache_cap ? cache_take(rounded) : NULL;
  pthread_mutex_unlock(&cache_lock);
  if (!base) {
    base = aligned_alloc(256, (size_t)(rounded + HDR));
    if (!base) {
      /* give the cached blocks back and try once more */
      pthread_mutex_lock(&cache_lock);
      for (size_t i = 0; i < CACHE_SLOTS; i++) {
        while (cache[i].head) {
          cblock* b = cache[i].head;
          cache[i].head = b->next;
          free(b);
        }
      }
      cache_bytes = 0;
      pthread_mutex_unlock(&cache_lock);
      base = aligned_alloc(256, (size_t)(rounded + HDR));
    }
    if (!base) {
      return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_alloc: could not allocate %llu bytes",
                       (unsigned long long)bytes);
    }
  }
  ((cblock*)base)->bytes = rounded;
  *out = (char*)base + HDR;
  return LIBRA_OK;
}

LIBRA_API int32_t libra_free(void* ptr) {
  if (!ptr) return LIBRA_OK;
  void* base = (char*)ptr - HDR;
  const uint64_t rounded = ((cblock*)base)->bytes;
  pthread_mutex_lock(&cache_lock);
  cache_init();
  const int kept = cache_put(base, rounded);
  pthread_mutex_unlock(&cache_lock);
  if (!kept) free(base);
  return LIBRA_OK;
}
LIBRA_API int32_t libra_memset(void* ptr, int32_t value, uint64_t bytes) {
  if (bytes == 0) return LIBRA_OK;
  if (!ptr) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_memset: ptr is NULL");
  memset(ptr, value, (size_t)bytes);
  return LIBRA_OK;
}
LIBRA_API int32_t libra_host_alloc(uint64_t bytes, void** out) {
  return aligned(bytes, out, "libra_host_alloc");
}
LIBRA_API int32_t libra_host_free(void* ptr) {
  free(ptr);
  return LIBRA_OK;
}

static int32_t copy(void* dst, const void* src, uint64_t bytes, const char* fn) {
  if (bytes == 0) return LIBRA_OK;
  if (!dst || !src) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "%s: NULL %s pointer for %llu bytes", fn,
                     dst ? "source" : "destination", (unsigned long long)bytes);
  }
  memmove(dst, src, (size_t)bytes);
  return LIBRA_OK;
}

LIBRA_API int32_t libra_copy_h2d(void* dst, const void* src, uint64_t bytes) {
  return copy(dst, src, bytes, "libra_copy_h2d");
}
LIBRA_API int32_t libra_copy_d2h(void* dst, const void* src, uint64_t bytes) {
  return copy(dst, src, bytes, "libra_copy_d2h");
}
LIBRA_API int32_t libra_copy_d2d(void* dst, const void* src, uint64_t bytes) {
  return copy(dst, src, bytes, "libra_copy_d2d");
}

/* ---- streams ---- */

LIBRA_API int32_t libra_stream_create(libra_stream* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_stream_create: out is NULL");
  *out = malloc(1);
  if (!*out) return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_stream_create: out of memory");
  return LIBRA_OK;
}
LIBRA_API int32_t libra_stream_destroy(libra_stream s) {
  free(s);
  return LIBRA_OK;
}
LIBRA_API int32_t libra_stream_sync(libra_stream s) {
  (void)s;
  return LIBRA_OK;
}
LIBRA_API int32_t libra_copy_h2d_async(void* dst, const void* src, uint64_t bytes, libra_stream s) {
  (void)s;
  return copy(dst, src, bytes, "libra_copy_h2d_async");
}
LIBRA_API int32_t libra_copy_d2h_async(void* dst, const void* src, uint64_t bytes, libra_stream s) {
  (void)s;
  return copy(dst, src, bytes, "libra_copy_d2h_async");
}
LIBRA_API int32_t libra_sync(void) { return LIBRA_OK; }
LIBRA_API int32_t libra_set_stream(libra_stream s) {
  (void)s;
  return LIBRA_OK;
}

/* ---- timing ---- */

LIBRA_API int32_t libra_event_create(libra_event* out) {
  if (!out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_create: out is NULL");
  uint64_t* e = calloc(1, sizeof *e);
  if (!e) return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_event_create: out of memory");
  *out = e;
  return LIBRA_OK;
}
LIBRA_API int32_t libra_event_destroy(libra_event e) {
  free(e);
  return LIBRA_OK;
}
LIBRA_API int32_t libra_event_record(libra_event e, libra_stream s) {
  (void)s;
  if (!e) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_record: event is NULL");
  *(uint64_t*)e = now_ns();
  return LIBRA_OK;
}
LIBRA_API int32_t libra_event_query(libra_event e, int32_t* out) {
  if (!e || !out) return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_query: NULL argument");
  *out = 1;
  return LIBRA_OK;
}
LIBRA_API int32_t libra_event_elapsed(libra_event start, libra_event end, float* ms) {
  if (!start || !end || !ms) {
    return set_error(LIBRA_ERR_INVALID_ARGUMENT, "libra_event_elapsed: NULL argument");
  }
  uint64_t a = *(uint64_t*)start, b = *(uint64_t*)end;
  *ms = (float)(((double)b - (double)a) / 1e6);
  return LIBRA_OK;
}

/* ---- registry ---- */

#include "libra_registry.inc"

LIBRA_API int32_t libra_run(int32_t kernel, void* const* inputs, int32_t n_in, void* const* outputs,
                            int32_t n_out, const double* params, int32_t n_params) {
  const kentry* e = NULL;
  TRY(run_entry(kernel, &e));
  const kcall c = {e->name, inputs, n_in, outputs, n_out, params, n_params};
  TRY(run_check(e, &c));
  return e->fn(&c);
}
