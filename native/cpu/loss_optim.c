/*
 * loss_optim.c - cross-entropy and MSE losses (mean reduction) with their
 * gradients, and the SGD / AdamW updates (in place). Loss sums are formed from
 * fixed-size blocks added in order, so they do not depend on the thread count.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "libra_kernel_params.h"

#define BLOCK 4096

static int32_t check_targets(const kcall* c, const int32_t* t, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; r++) {
    if (t[r] < 0 || t[r] >= classes) {
      return kfail(c, "targets[%lld] = %d is out of range [0, classes = %lld)", (long long)r, t[r],
                   (long long)classes);
    }
  }
  return LIBRA_OK;
}

/* log-sum-exp of a row, max-subtracted: exp in float (fast_expf, vectorized, on chunks
 * of the row), summed in double lanes in a fixed order. */
static double row_lse(const float* x, int64_t cols) {
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; j++) m = x[j] > m || x[j] != x[j] ? x[j] : m;
  if (m == -INFINITY) return -INFINITY;
  if (m != m) return NAN;
  enum { CH = 256 };
  float e[CH];
  v8d acc = {0};
  double tail = 0.0;
  for (int64_t j0 = 0; j0 < cols; j0 += CH) {
    const int64_t w = cols - j0 < CH ? cols - j0 : CH, w8 = w - w % 8;
    for (int64_t j = 0; j < w; j++) e[j] = fast_expf(x[j0 + j] - m);
    for (int64_t j = 0; j < w8; j += 8) acc += ld8d(e + j);
    for (int64_t j = w8; j < w; j++) tail += e[j];
  }
  return m + log(hsum8(acc) + tail);
}

int32_t k_cross_entropy(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(classes, 1, 0, "classes");
  const float* X = IN_F(0);
  const int32_t* T = IN_I(1);
  int32_t st = check_targets(c, T, rows, classes);
  if (st) return st;
  double* per = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1));
  if (!per) return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(cross_entropy): out of memory");
  PAR_FOR(rows * classes > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * classes;
    per[r] = row_lse(x, classes) - x[T[r]];
  });
  double s = 0.0;
  for (int64_t r = 0; r < rows; r++) s += per[r];
  free(per);
  OUT_F(0)[0] = (float)(s / (double)rows);
  return LIBRA_OK;
}

int32_t k_cross_entropy_backward(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(classes, 1, 0, "classes");
  const float* X = IN_F(0);
  const int32_t* T = IN_I(1);
  int32_t st = check_targets(c, T, rows, classes);
  if (st) return st;
  const double g = (double)IN_F(2)[0] / (double)rows;
  float* GX = OUT_F(0);
  PAR_FOR(rows * classes > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * classes;
    float* gx = GX + r * classes;
    const float lse = (float)row_lse(x, classes), gf = (float)g;
    for (int64_t j = 0; j < classes; j++) gx[j] = fast_expf(x[j] - lse) * gf;
    gx[T[r]] = (float)(((double)fast_expf(x[T[r]] - lse) - 1.0) * g);
  });
  return LIBRA_OK;
}

int32_t k_mse(const kcall* c) {
  PINT(n, 0, 0, "n");
  const float *A = IN_F(0), *B = IN_F(1);
  const int64_t blocks = (n + BLOCK - 1) / BLOCK;
  double* part = malloc(sizeof(double) * (size_t)(blocks > 0 ? blocks : 1));
  if (!part) return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(mse): out of memory");
  PAR_FOR(n > PAR_MIN,
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * BLOCK, i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
    double s = 0.0;
    for (int64_t i = i0; i < i1; i++) {
      const double d = (double)A[i] - B[i];
      s += d * d;
    }
    part[b] = s;
  });
  double s = 0.0;
  for (int64_t b = 0; b < blocks; b++) s += part[b];
  free(part);
  OUT_F(0)[0] = (float)(s / (double)n);
  return LIBRA_OK;
}

int32_t k_mse_backward(const kcall* c) {
  PINT(n, 0, 0, "n");
  const float *A = IN_F(0), *B = IN_F(1);
  const double g = 2.0 * (double)IN_F(2)[0] / (double)n;
  float* GA = OUT_F(0);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) GA[i] = (float)(((double)A[i] - B[i]) * g););
  return LIBRA_OK;
}

/* One tensor's SGD update (n elements), as PyTorch's SGD step. */
static void sgd_apply(const sgd_params* q, int64_t n, float* P, const float* G, float* BUF) {
  const int64_t nesterov = q->nesterov, first = q->first;
  const double lr = q->lr, momentum = q->momentum, dampening = q->dampening, wd = q->wd;
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) {
    double g = (double)G[i] + wd * P[i];
    if (momentum != 0.0) {
      const double b = first ? g : momentum * BUF[i] + (1.0 - dampening) * g;
      BUF[i] = (float)b;
      g = nesterov ? g + momentum * b : b;
    }
    P[i] = (float)(P[i] - lr * g);
  });
}

int32_t k_sgd_update(const kcall* c) {
  sgd_params q;
  TRY(sgd_parse(c, &q));
  sgd_apply(&q, q.n, (float*)c->in[0], IN_F(1), (float*)c->in[2]);
  return LIBRA_OK;
}

int32_t k_sgd_update_multi(const kcall* c) {
  sgd_params q;
  int64_t stride;
  TRY(sgd_multi_parse(c, &q, &stride));
  for (int64_t t = 0; t < q.n; t++) {
    void* const* in = c->in + t * stride;
    sgd_apply(&q, multi_n(c, t), (float*)in[0], (const float*)in[1],
              stride == 3 ? (float*)in[2] : NULL);
  }
  return LIBRA_OK;
}

/* One tensor's AdamW update (n elements), as PyTorch's AdamW step. */
static void adamw_apply(const adamw_params* q, int64_t n, float* P, const float* G, float* Mb,
                        float* Vb) {
  const double lr = q->lr, b1 = q->b1, b2 = q->b2, eps = q->eps, bc1 = q->bc1, bc2 = q->bc2,
               decay = q->decay;
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) {
    const double g = G[i];
    const double p = (double)P[i] * decay;
    const double m = b1 * Mb[i] + (1.0 - b1) * g;
    const double v = b2 * Vb[i] + (1.0 - b2) * g * g;
    Mb[i] = (float)m;
    Vb[i] = (float)v;
    P[i] = (float)(p - lr * (m / bc1) / (sqrt(v / bc2) + eps));
  });
}

int32_t k_adamw_update(const kcall* c) {
  adamw_params q;
  TRY(adamw_parse(c, &q));
  adamw_apply(&q, q.n, (float*)c->in[0], IN_F(1), (float*)c->in[2], (float*)c->in[3]);
  return LIBRA_OK;
}

int32_t k_adamw_update_multi(const kcall* c) {
  adamw_params q;
  TRY(adamw_multi_parse(c, &q));
  for (int64_t t = 0; t < q.n; t++) {
    void* const* in = c->in + t * 4;
    adamw_apply(&q, multi_n(c, t), (float*)in[0], (const float*)in[1], (float*)in[2],
                (float*)in[3]);
  }
  return LIBRA_OK;
}
