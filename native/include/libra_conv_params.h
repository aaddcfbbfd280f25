/* libra_conv_params.h - the params of conv2d and its gradients and of the 2-d pooling kernels,
 * read and checked for both builds (native/cpu/conv.c, native/cuda/conv.cu; host code, valid
 * C11 and C++17). Include after libra_kcall.h. Every element count a call implies goes through
 * pmul, so the cuda build rejects counts above 2^62. */
#ifndef LIBRA_CONV_PARAMS_H
#define LIBRA_CONV_PARAMS_H

#include <stdint.h>

#include "libra_kcall.h"

/* conv2d: x [N, C, H, W], w [K, C, R, S], y [N, K, OH, OW]. */
typedef struct convp {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, OH, OW;
  int has_bias;
} convp;

/* Output length of a window of k taps (dilation dil) sliding with stride over size + 2 pad. */
static inline int64_t out_size(int64_t size, int64_t k, int64_t stride, int64_t pad,
                               int64_t dil) {
  const int64_t num = size + 2 * pad - dil * (k - 1) - 1;
  /* floor division (num may be negative) */
  return (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
}

/* Reads "N, C, H, W, K, R, S, strideH, strideW, padH, padW, dilH, dilW, hasBias". */
static inline int32_t conv_parse(const kcall* c, convp* q) {
  if (pint(c, 0, 0, "N", &q->N) || pint(c, 1, 0, "C", &q->C) || pint(c, 2, 0, "H", &q->H) ||
      pint(c, 3, 0, "W", &q->W) || pint(c, 4, 0, "K", &q->K) || pint(c, 5, 0, "R", &q->R) ||
      pint(c, 6, 0, "S", &q->S) || pint(c, 7, 1, "strideH", &q->sh) ||
      pint(c, 8, 1, "strideW", &q->sw) || pint(c, 9, 0, "padH", &q->ph) ||
      pint(c, 10, 0, "padW", &q->pw) || pint(c, 11, 1, "dilH", &q->dh) ||
      pint(c, 12, 1, "dilW", &q->dw)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  const double hb = c->p[13];
  if (hb != 0.0 && hb != 1.0) return kfail(c, "hasBias must be 0 or 1, got %.17g", hb);
  q->has_bias = hb == 1.0;
  q->OH = out_size(q->H, q->R, q->sh, q->ph, q->dh);
  q->OW = out_size(q->W, q->S, q->sw, q->pw, q->dw);
  if (q->OH < 1 || q->OW < 1) {
    return kfail(c,
                 "input %lldx%lld with padding %lldx%lld is smaller than the dilated window "
                 "%lldx%lld (dilation %lldx%lld)",
                 (long long)q->H, (long long)q->W, (long long)q->ph, (long long)q->pw,
                 (long long)q->R, (long long)q->S, (long long)q->dh, (long long)q->dw);
  }
  int64_t a[4] = {q->N, q->C, q->H, q->W}, b[4] = {q->K, q->C, q->R, q->S},
          d[4] = {q->N, q->K, q->OH, q->OW}, e[5] = {q->N, q->C, q->R * q->S, q->OH, q->OW}, n;
  if (pmul(c, a, 4, &n) || pmul(c, b, 4, &n) || pmul(c, d, 4, &n) || pmul(c, e, 5, &n)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  return LIBRA_OK;
}

/* conv2d's input buffers: x, w and, with hasBias, b. */
static inline int32_t conv_check_inputs(const kcall* c, const convp* q) {
  if (c->n_in != 2 + q->has_bias) {
    return kfail(c, "expected %d input buffers (x, w%s) for hasBias = %d, got %d", 2 + q->has_bias,
                 q->has_bias ? ", b" : "", q->has_bias, c->n_in);
  }
  return LIBRA_OK;
}

/* A 1x1 window, stride 1, no padding: x of one image is already the column matrix. */
static inline int is_pointwise(const convp* q) {
  return q->R == 1 && q->S == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0;
}

/* Pooling: x [N, C, H, W], windows kH x kW, y [N, C, OH, OW]. */
typedef struct poolp {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW;
} poolp;

/* Reads "N, C, H, W, kH, kW, strideH, strideW, padH, padW". */
static inline int32_t pool_parse(const kcall* c, poolp* q) {
  if (pint(c, 0, 0, "N", &q->N) || pint(c, 1, 0, "C", &q->C) || pint(c, 2, 0, "H", &q->H) ||
      pint(c, 3, 0, "W", &q->W) || pint(c, 4, 1, "kH", &q->kh) || pint(c, 5, 1, "kW", &q->kw) ||
      pint(c, 6, 1, "strideH", &q->sh) || pint(c, 7, 1, "strideW", &q->sw) ||
      pint(c, 8, 0, "padH", &q->ph) || pint(c, 9, 0, "padW", &q->pw)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  if (2 * q->ph > q->kh || 2 * q->pw > q->kw) {
    return kfail(c, "padding %lldx%lld must be at most half the window %lldx%lld", (long long)q->ph,
                 (long long)q->pw, (long long)q->kh, (long long)q->kw);
  }
  q->OH = out_size(q->H, q->kh, q->sh, q->ph, 1);
  q->OW = out_size(q->W, q->kw, q->sw, q->pw, 1);
  if (q->OH < 1 || q->OW < 1) {
    return kfail(c, "input %lldx%lld is smaller than the window %lldx%lld", (long long)q->H,
                 (long long)q->W, (long long)q->kh, (long long)q->kw);
  }
  int64_t a[4] = {q->N, q->C, q->H, q->W}, b[4] = {q->N, q->C, q->OH, q->OW}, n;
  if (pmul(c, a, 4, &n) || pmul(c, b, 4, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  return LIBRA_OK;
}

#endif /* LIBRA_CONV_PARAMS_H */
