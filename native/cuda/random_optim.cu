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
  PINT(n, 0, 0, "n");
  PREAL(p, 1, "p");
  PINT(seed, 2, 0, "seed");
  PINT(offset, 3, 0, "offset");
  if (p < 0.0 || p > 1.0) return kfail(c, "p (param 1) must be in [0, 1], got %.17g", p);
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
  PINT(n, 0, 0, "n");
  PINT(seed, 1, 0, "seed");
  PINT(offset, 2, 0, "offset");
  PREAL(low, 3, "low");
  PREAL(high, 4, "high");
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
  PINT(n, 0, 0, "n");
  PINT(seed, 1, 0, "seed");
  PINT(offset, 2, 0, "offset");
  PREAL(mean, 3, "mean");
  PREAL(std, 4, "std");
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

int32_t k_sgd_update(const kcall* c) {
  PINT(n, 0, 0, "n");
  PREAL(lr, 1, "lr");
  PREAL(momentum, 2, "momentum");
  PREAL(dampening, 3, "dampening");
  PREAL(wd, 4, "weightDecay");
  PINT(nesterov, 5, 0, "nesterov");
  PINT(first, 6, 0, "firstStep");
  if (nesterov > 1 || first > 1) {
    return kfail(c, "nesterov and firstStep must be 0 or 1, got %lld and %lld", (long long)nesterov,
                 (long long)first);
  }
  if (n == 0) return LIBRA_OK;
  sgd_k<<<grid_for(n), TPB, 0, c->st>>>(n, lr, momentum, dampening, wd, (int)nesterov, (int)first,
                                        (float*)c->in[0], IN_F(1), (float*)c->in[2]);
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

int32_t k_adamw_update(const kcall* c) {
  PINT(n, 0, 0, "n");
  PREAL(lr, 1, "lr");
  PREAL(b1, 2, "beta1");
  PREAL(b2, 3, "beta2");
  PREAL(eps, 4, "eps");
  PREAL(wd, 5, "weightDecay");
  PINT(step, 6, 1, "step");
  if (n == 0) return LIBRA_OK;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const double decay = 1.0 - lr * wd;
  adamw_k<<<grid_for(n), TPB, 0, c->st>>>(n, lr, b1, b2, eps, bc1, bc2, decay, (float*)c->in[0],
                                          IN_F(1), (float*)c->in[2], (float*)c->in[3]);
  LAUNCHED(c);
  return LIBRA_OK;
}
