/* libra_kcall.h - the kernel call record and the host helpers every kernel uses, shared by the
 * cpu build (native/cpu/internal.h) and the cuda build (native/cuda/common.cuh); not part of
 * the ABI. Valid C11 and C++17.
 *
 * Every kernel is a function taking one `kcall` (the arguments of libra_run) that validates
 * its own parameters, sets the thread-local error through kfail() and returns a libra_status.
 * The registry (libra_registry.inc) maps table names to these functions and checks the fixed
 * buffer/param counts first. An including build may add fields to the call record by
 * defining LIBRA_KCALL_EXTRA (the cuda build: the current stream) before including this. */
#ifndef LIBRA_KCALL_H
#define LIBRA_KCALL_H

#include <stdint.h>

#include "libra.h"

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
#ifdef LIBRA_KCALL_EXTRA
  LIBRA_KCALL_EXTRA
#endif
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
/* Product of counts; the cuda build fails (kfail) when it exceeds 2^62 (libra_params.inc). */
int pmul(const kcall* c, const int64_t* xs, int n, int64_t* out);
/* Reads param 0 as ndim in [0, MAX_DIMS_C]. */
int pndim(const kcall* c, int64_t* ndim);
/* Reads params 0..n-1 as integers >= 0 named names[i] into v, then checks their product (pmul). */
int pints(const kcall* c, int64_t* v, const char* const* names, int n);

#define PINT(var, idx, lo, what)                                                \
  int64_t var;                                                                  \
  if (pint(c, (idx), (lo), (what), &var)) return LIBRA_ERR_INVALID_ARGUMENT
#define PREAL(var, idx, what)                                                   \
  double var;                                                                   \
  if (preal(c, (idx), (what), &var)) return LIBRA_ERR_INVALID_ARGUMENT
#define TRY(expr)                                                               \
  do {                                                                          \
    int32_t s_ = (expr);                                                        \
    if (s_ != LIBRA_OK) return s_;                                              \
  } while (0)

/* Row-major strides of a contiguous array of `shape`. */
static inline void contiguous_strides(int nd, const int64_t* shape, int64_t* st) {
  int64_t acc = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i];
  }
}

#define IN_F(i) ((const float*)c->in[i])
#define IN_I(i) ((const int32_t*)c->in[i])
#define OUT_F(i) ((float*)c->out[i])
#define OUT_I(i) ((int32_t*)c->out[i])

/* ---- kernel functions, by family ---- */
#define K(name, ni, no, np) int32_t k_##name(const kcall* c);
#include "libra_kernels.h"
#undef K

#endif /* LIBRA_KCALL_H */
