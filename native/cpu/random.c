/*
 * random.c - the random kernels (dropout, uniform, normal) on Philox4x32-10 (include/libra_philox.h).
 * Element i of a call with (seed, offset) uses counter offset + i, so any
 * element can be regenerated on its own: a recomputation draws the same numbers
 * whatever the thread count.
 */
#include <math.h>

#include "internal.h"
#include "libra_kernel_params.h"

/* Words w0, w1 for element i of (seed, offset). */
static inline void philox_element(uint64_t seed, uint64_t offset, int64_t i, uint32_t* w0,
                                  uint32_t* w1) {
  const uint64_t ctr64 = offset + (uint64_t)i;
  const uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  philox4x32_10(ctr, key, out);
  *w0 = out[0];
  *w1 = out[1];
}

static inline double unit(uint32_t w) { return (double)(w >> 8) * (1.0 / 16777216.0); }

static int32_t dropout_like(const kcall* c) {
  dropout_params q;
  TRY(dropout_parse(c, &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double p = q.p;
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  const double keep_scale = 1.0 - p;
  PAR_FOR(n > PAR_MIN / 8,
  for (int64_t i = 0; i < n; i++) {
    uint32_t w0, w1;
    philox_element((uint64_t)seed, (uint64_t)offset, i, &w0, &w1);
    Y[i] = p < 1.0 && unit(w0) >= p ? (float)((double)X[i] / keep_scale) : 0.0f;
  });
  return LIBRA_OK;
}

int32_t k_dropout(const kcall* c) { return dropout_like(c); }
int32_t k_dropout_backward(const kcall* c) { return dropout_like(c); }

int32_t k_rand_uniform(const kcall* c) {
  rand_params q;
  TRY(rand_parse(c, "low", "high", &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double low = q.a, high = q.b;
  float* Y = OUT_F(0);
  PAR_FOR(n > PAR_MIN / 8,
  for (int64_t i = 0; i < n; i++) {
    uint32_t w0, w1;
    philox_element((uint64_t)seed, (uint64_t)offset, i, &w0, &w1);
    Y[i] = (float)(low + (high - low) * unit(w0));
  });
  return LIBRA_OK;
}

int32_t k_rand_normal(const kcall* c) {
  rand_params q;
  TRY(rand_parse(c, "mean", "std", &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double mean = q.a, std = q.b;
  float* Y = OUT_F(0);
  const double two_pi = 6.283185307179586;
  PAR_FOR(n > PAR_MIN / 8,
  for (int64_t i = 0; i < n; i++) {
    uint32_t w0, w1;
    philox_element((uint64_t)seed, (uint64_t)offset, i, &w0, &w1);
    const double u1 = ((double)(w0 >> 8) + 1.0) * (1.0 / 16777216.0);
    const double u2 = unit(w1);
    Y[i] = (float)(mean + std * sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
  });
  return LIBRA_OK;
}
