/*
 * internal.h - shared declarations of the CPU build (not part of the ABI).
 *
 * Every kernel is a function taking one `kcall` (the arguments of libra_run)
 * that validates its own parameters, sets the thread-local error through
 * kfail() and returns a libra_status. The registry in registry.c maps table
 * names to these functions and checks the fixed buffer/param counts first.
 */
#ifndef LIBRA_CPU_INTERNAL_H
#define LIBRA_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "libra.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Below this many elements a kernel runs on the calling thread: an OpenMP
 * fork/join costs microseconds, more than the work itself. */
#define PAR_MIN 32768

/* Runs a for statement across OpenMP threads (static schedule, so each index
 * always lands on the same thread) when `cond` holds, and on the calling thread
 * otherwise: entering an OpenMP region costs microseconds even with if(0). */
#define PAR_FOR(cond, ...)                                      \
  do {                                                          \
    if (cond) {                                                 \
      _Pragma("omp parallel for schedule(static)") __VA_ARGS__ \
    } else {                                                    \
      __VA_ARGS__                                               \
    }                                                           \
  } while (0)

/* Largest tensor rank (MAX_DIMS in kernels.ts). */
#define MAX_DIMS_C 8

typedef struct {
  const char* name; /* kernel name, for messages */
  void* const* in;
  int32_t n_in;
  void* const* out;
  int32_t n_out;
  const double* p;
  int32_t np;
} kcall;

typedef int32_t (*kfn)(const kcall* c);

/* Sets the thread-local last error (printf-style) and returns `status`. */
int32_t set_error(int32_t status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, prefixed with "libra_run(<kernel>): "; returns LIBRA_ERR_INVALID_ARGUMENT. */
int32_t kfail(const kcall* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads param i as an integer >= lo (exact, at most 2^53); on failure sets the error. */
int pint(const kcall* c, int i, int64_t lo, const char* what, int64_t* out);
/* Reads param i as a finite double. */
int preal(const kcall* c, int i, const char* what, double* out);
/* Checks the exact number of params. */
int pcount(const kcall* c, int32_t n, const char* layout);

#define PINT(var, idx, lo, what)                                                \
  int64_t var;                                                                  \
  if (pint(c, (idx), (lo), (what), &var)) return LIBRA_ERR_INVALID_ARGUMENT
#define PREAL(var, idx, what)                                                   \
  double var;                                                                   \
  if (preal(c, (idx), (what), &var)) return LIBRA_ERR_INVALID_ARGUMENT

#define IN_F(i) ((const float*)c->in[i])
#define IN_I(i) ((const int32_t*)c->in[i])
#define OUT_F(i) ((float*)c->out[i])
#define OUT_I(i) ((int32_t*)c->out[i])

/* Row-major single-precision GEMM: C = alpha op(A) op(B) + beta C (OpenBLAS or portable). */
void libra_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* cm,
                 int64_t ldc);
/* Single-threaded GEMM for convolution shapes (gemm_small.c): C (+)= A B with A read as
 * a[i*ars + k*acs] and B, C row-major; each C element summed in k order. -1 when out of
 * memory for the packed A. */
int libra_sgemm_small(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int accumulate);
/* Philox4x32-10 on one block. */
#include "libra_philox.h"

/* Number of threads kernels use (for splitting work deterministically). */
int libra_threads(void);

/* ---- kernel functions, by family ---- */
#define K(name, ni, no, np) int32_t k_##name(const kcall* c);
#include "libra_kernels.h"
#undef K

#endif
