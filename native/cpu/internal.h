/*
 * internal.h - shared declarations of the CPU build (not part of the ABI).
 *
 * The kernel call record, the param readers and the kernel declarations are
 * shared with the cuda build (include/libra_kcall.h).
 */
#ifndef LIBRA_CPU_INTERNAL_H
#define LIBRA_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "libra_kcall.h"

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

/* ---- deterministic vectorized sums ----
 * Row reductions accumulate in double in 8 lanes (element j of a run goes to lane
 * j % 8 of the full 8-blocks, the rest to a scalar tail), combined in a fixed tree:
 * the order depends only on the lengths, never on threads, and the loops vectorize. */
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));
static inline v8d ld8d(const float* p) { return __builtin_convertvector(*(const v8f_u*)p, v8d); }
static inline double hsum8(v8d a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* expf without a library call, so loops over it vectorize: Cephes' range reduction
 * (x = k ln2 + r) and degree-6 polynomial, 2^k built in the exponent bits; within
 * ~2 ulp of expf; 0 below -87.3 (where expf is subnormal or 0) and +inf above 88.7. */
static inline float fast_expf(float x) {
  const float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float k = __builtin_rintf(xc * 1.44269504088896341f);
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  union {
    int32_t i;
    float f;
  } e;
  e.i = ((int32_t)k + 127) << 23;
  const float y = p * e.f;
  return x < -87.3f ? 0.0f : (x > 88.7f ? __builtin_inff() : y);
}

/* tanhf without a library call (libm's costs ~9 ns an element here and keeps loops scalar):
 * below |x| = 0.4 the odd Taylor polynomial to x^13 (truncation under 1e-8 relative), above
 * it (1 - e) / (1 + e) with e = fast_expf(-2|x|) (1 - e >= 0.55 there: no cancellation);
 * within a few ulp of tanhf, +-1 for large |x|, NaN for NaN. */
static inline float fast_tanhf(float x) {
  const float a = __builtin_fabsf(x), z = x * x;
  float p = 21844.0f / 6081075.0f;
  p = p * z - 1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  p = p * z + 1.0f;
  const float e = fast_expf(-2.0f * a);
  const float big = __builtin_copysignf((1.0f - e) / (1.0f + e), x);
  return a < 0.4f ? x * p : big;
}

/* Row-major single-precision GEMM: C = alpha op(A) op(B) + beta C (OpenBLAS or portable). */
void libra_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* cm,
                 int64_t ldc);
/* Single-threaded GEMM for convolution shapes (gemm_small.c): C (+)= A B with A read as
 * a[i*ars + k*acs] and B, C row-major; each C element summed in k order. -1 when out of
 * memory for the packed A. */
int libra_sgemm_small(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int accumulate);
/* The same kernel in two steps for an implicit-GEMM convolution: A packed once into
 * this thread's buffer (NULL when out of memory; valid until the next call on this
 * thread), then C[i, j] = sum_p A[i, p] rows[p][j] with B given by row pointers. */
float* libra_sgemm_pack(int64_t m, int64_t k, const float* a, int64_t ars, int64_t acs);
void libra_sgemm_packed_rows(int64_t m, int64_t n, int64_t k, const float* ap,
                             const float* const* rows, float* c, int64_t ldc);
/* C (+)= A B with A already packed by the caller in 8-row slivers ([ceil(m/8)][k][8],
 * zero-padded), in the buffer libra_sgemm_pack_buffer returns (this thread's; NULL
 * when out of memory). */
void libra_sgemm_packed(int64_t m, int64_t n, int64_t k, const float* ap, const float* b,
                        int64_t ldb, float* c, int64_t ldc, int accumulate);
float* libra_sgemm_pack_buffer(int64_t floats);
/* One image x [C, H, W] zero-padded to Hp = H + 2*ph rows, split into sh row phases of
 * Hq = ceil(Hp/sh) rows, and for each column tap s < S sampled at columns ow*sw + s*dw - pw,
 * ow < OW: xs[s*PS + ((ch*sh + p)*Hq + i)*OW + ow] = padded x[ch, i*sh + p, ow*sw + s*dw]
 * (0 outside; rows past Hp are 0). Row (ch, r, s) of a conv's column matrix is then the
 * contiguous run of OH*OW floats at s*PS + ((ch*sh + r*dh % sh)*Hq + r*dh / sh)*OW
 * (conv_wgrad.c). */
void libra_conv_shifted(const float* X, int64_t C, int64_t H, int64_t W, int64_t S, int64_t ph,
                        int64_t pw, int64_t sh, int64_t sw, int64_t dw, int64_t OW, float* xs,
                        int64_t PS);
/* The weight gradient of a conv2d (conv_wgrad.c): x [N, C, H, W], gy [N, K, OH, OW],
 * gw [K, C, R, S] with padding ph, pw, stride sh, sw and dilation dh, dw. -1 when out of
 * memory. */
int libra_conv_wgrad(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                     int64_t ph, int64_t pw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                     const float* X, const float* GY, float* GW);
/* Philox4x32-10 on one block. */
#include "libra_philox.h"

/* Number of threads kernels use (for splitting work deterministically). */
int libra_threads(void);

#endif
