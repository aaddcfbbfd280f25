/*
 * random_optim.cu - the Philox random kernels (dropout, uniform, normal) and
 * the SGD / AdamW updates (in place); formulas as native/cpu/random.c and
 * native/cpu/loss_optim.c, in double.
 *
 * Element i of a random call with (seed, offset) uses counter offset + i and
 * key (lo32(seed), hi32(seed)) (see kernels.ts), so every element is drawn
 * independently of the launch geometry: the CPU and CUDA builds draw the same
 * words, and a recomputation draws the same numbers.
 */
#include "common.cuh"
#include "libra_kernel_params.h"

__device__ inline double unit(uint32_t w) { return (double)(w >> 8) * (1.0 / 16777216.0); }

__global__ void dropout_k(int64_t n, double p, uint32_t k0, uint32_t k1, uint64_t offset,
                          const float* __restrict__ X, float* __restrict__ Y) {
  const double keep_scale = 1.0 - p;
  GRID_LOOP(i, n) {
    uint32_t w0, w1;
    philox_element(k0, k1, offset, i, &w0, &w1);
    Y[i] = p < 1.0 && unit(w0) >= p ? (float)((double)X[i] / keep_scale) : 0.0f;
  }
}

static int32_t dropout_like(const kcall* c) {
  dropout_params q;
  TRY(dropout_parse(c, &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double p = q.p;
  if (n == 0) return LIBRA_OK;
  dropout_k<<<grid_for(n), TPB, 0, c->st>>>(n, p, (uint32_t)seed, (uint32_t)((uint64_t)seed >> 32),
                                            (uint64_t)offset, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_dropout(const kcall* c) { return dropout_like(c); }
int32_t k_dropout_backward(const kcall* c) { return dropout_like(c); }

__global__ void rand_uniform_k(int64_t n, uint32_t k0, uint32_t k1, uint64_t offset, double low,
                               double high, float* __restrict__ Y) {
  GRID_LOOP(i, n) {
    uint32_t w0, w1;
    philox_element(k0, k1, offset, i, &w0, &w1);
    Y[i] = (float)(low + (high - low) * unit(w0));
  }
}

int32_t k_rand_uniform(const kcall* c) {
  rand_params q;
  TRY(rand_parse(c, "low", "high", &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double low = q.a, high = q.b;
  if (n == 0) return LIBRA_OK;
  rand_uniform_k<<<grid_for(n), TPB, 0, c->st>>>(n, (uint32_t)seed,
                                                 (uint32_t)((uint64_t)seed >> 32),
                                                 (uint64_t)offset, low, high, OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void rand_normal_k(int64_t n, uint32_t k0, uint32_t k1, uint64_t offset, double mean,
                              double std, float* __restrict__ Y) {
  const double two_pi = 6.283185307179586;
  GRID_LOOP(i, n) {
    uint32_t w0, w1;
    philox_element(k0, k1, offset, i, &w0, &w1);
    const double u1 = ((double)(w0 >> 8) + 1.0) * (1.0 / 16777216.0);
    const double u2 = unit(w1);
    Y[i] = (float)(mean + std * sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
  }
}

int32_t k_rand_normal(const kcall* c) {
  rand_params q;
  TRY(rand_parse(c, "mean", "std", &q));
  const int64_t n = q.n, seed = q.seed, offset = q.offset;
  const double mean = q.a, std = q.b;
  if (n == 0) return LIBRA_OK;
  rand_normal_k<<<grid_for(n), TPB, 0, c->st>>>(n, (uint32_t)seed,
                                                (uint32_t)((uint64_t)seed >> 32),
                                                (uint64_t)offset, mean, std, OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- optimizer updates ---- */

__global__ void sgd_k(int64_t n, double lr, double momentum, double dampening, double wd,
                      int nesterov, int first, float* __restrict__ P, const float* __restrict__ G,
                      float* __restrict__ BUF) {
  GRID_LOOP(i, n) {
    double g = (double)G[i] + wd * P[i];
    if (momentum != 0.0) {
      const double b = first ? g : momentum * BUF[i] + (1.0 - dampening) * g;
      BUF[i] = (float)b;
      g = nesterov ? g + momentum * b : b;
    }
    P[i] = (float)(P[i] - lr * g);
  }
}

/* One tensor's SGD update on the call's stream. */
static void sgd_launch(const kcall* c, const sgd_params* q, int64_t n, float* P, const float* G,
                       float* BUF) {
  if (n == 0) return;
  sgd_k<<<grid_for(n), TPB, 0, c->st>>>(n, q->lr, q->momentum, q->dampening, q->wd,
                                        (int)q->nesterov, (int)q->first, P, G, BUF);
}

int32_t k_sgd_update(const kcall* c) {
  sgd_params q;
  TRY(sgd_parse(c, &q));
  if (q.n == 0) return LIBRA_OK;
  sgd_launch(c, &q, q.n, (float*)c->in[0], IN_F(1), (float*)c->in[2]);
  LAUNCHED(c);
  return LIBRA_OK;
}

/* One launch a tensor: the call saves the runtime's and the library's per-call work, not the
 * launches (a pointer table on the device would). */
int32_t k_sgd_update_multi(const kcall* c) {
  sgd_params q;
  int64_t stride;
  TRY(sgd_multi_parse(c, &q, &stride));
  for (int64_t t = 0; t < q.n; t++) {
    void* const* in = c->in + t * stride;
    sgd_launch(c, &q, multi_n(c, t), (float*)in[0], (const float*)in[1],
               stride == 3 ? (float*)in[2] : nullptr);
  }
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void adamw_k(int64_t n, double lr, double b1, double b2, double eps, double bc1,
                        double bc2, double decay, float* __restrict__ P,
                        const float* __restrict__ G, float* __restrict__ Mb,
                        float* __restrict__ Vb) {
  GRID_LOOP(i, n) {
    const double g = G[i];
    const double p = (double)P[i] * decay;
    const double m = b1 * Mb[i] + (1.0 - b1) * g;
    const double v = b2 * Vb[i] + (1.0 - b2) * g * g;
    Mb[i] = (float)m;
    Vb[i] = (float)v;
    P[i] = (float)(p - lr * (m / bc1) / (sqrt(v / bc2) + eps));
  }
}

/* One tensor's AdamW update on the call's stream. */
static void adamw_launch(const kcall* c, const adamw_params* q, int64_t n, float* P,
                         const float* G, float* Mb, float* Vb) {
  if (n == 0) return;
  adamw_k<<<grid_for(n), TPB, 0, c->st>>>(n, q->lr, q->b1, q->b2, q->eps, q->bc1, q->bc2,
                                          q->decay, P, G, Mb, Vb);
}

int32_t k_adamw_update(const kcall* c) {
  adamw_params q;
  TRY(adamw_parse(c, &q));
  if (q.n == 0) return LIBRA_OK;
  adamw_launch(c, &q, q.n, (float*)c->in[0], IN_F(1), (float*)c->in[2], (float*)c->in[3]);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_adamw_update_multi(const kcall* c) {
  adamw_params q;
  TRY(adamw_multi_parse(c, &q));
  for (int64_t t = 0; t < q.n; t++) {
    void* const* in = c->in + t * 4;
    adamw_launch(c, &q, multi_n(c, t), (float*)in[0], (const float*)in[1], (float*)in[2],
                 (float*)in[3]);
  }
  LAUNCHED(c);
  return LIBRA_OK;
}
