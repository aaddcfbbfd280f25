/*
 * norm.c - batch norm (statistics, apply, running update, backward), layer norm
 * and RMS norm with their gradients. Statistics are accumulated in double by
 * one thread per channel/row/column, in index order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "libra_kernel_params.h"

#define COLCHUNK 256

int32_t k_batch_norm_stats(const kcall* c) {
  int64_t N, C, HW;
  if (read_nchw(c, &N, &C, &HW)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float* X = IN_F(0);
  float *MEAN = OUT_F(0), *VAR = OUT_F(1);
  const double M = (double)(N * HW);
  PAR_FOR(N * C * HW > PAR_MIN,
  for (int64_t ch = 0; ch < C; ch++) {
    v8d acc = {0};
    double tail = 0.0;
    const int64_t HW8 = HW - HW % 8;
    for (int64_t n = 0; n < N; n++) {
      const float* x = X + (n * C + ch) * HW;
      for (int64_t j = 0; j < HW8; j += 8) acc += ld8d(x + j);
      for (int64_t j = HW8; j < HW; j++) tail += x[j];
    }
    const double mean = (hsum8(acc) + tail) / M;
    v8d vacc = {0};
    double vtail = 0.0;
    for (int64_t n = 0; n < N; n++) {
      const float* x = X + (n * C + ch) * HW;
      for (int64_t j = 0; j < HW8; j += 8) {
        const v8d d = ld8d(x + j) - mean;
        vacc += d * d;
      }
      for (int64_t j = HW8; j < HW; j++) {
        const double d = x[j] - mean;
        vtail += d * d;
      }
    }
    const double v = hsum8(vacc) + vtail;
    MEAN[ch] = (float)mean;
    VAR[ch] = (float)(v / M);
  });
  return LIBRA_OK;
}

int32_t k_batch_norm_apply(const kcall* c) {
  int64_t N, C, HW;
  double eps;
  if (read_nchw(c, &N, &C, &HW) || read_eps(c, 3, &eps)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *MEAN = IN_F(1), *VAR = IN_F(2), *G = IN_F(3), *B = IN_F(4);
  float* Y = OUT_F(0);
  const int64_t planes = N * C;
  PAR_FOR(planes * HW > PAR_MIN,
  for (int64_t pl = 0; pl < planes; pl++) {
    const int64_t ch = pl % C;
    const float rstd = (float)(1.0 / sqrt((double)VAR[ch] + eps));
    const float scale = rstd * G[ch], mean = MEAN[ch], beta = B[ch];
    const float* x = X + pl * HW;
    float* y = Y + pl * HW;
    for (int64_t j = 0; j < HW; j++) y[j] = (x[j] - mean) * scale + beta;
  });
  return LIBRA_OK;
}

int32_t k_batch_norm_update_running(const kcall* c) {
  PINT(C, 0, 0, "C");
  PREAL(momentum, 1, "momentum");
  PREAL(count, 2, "count");
  const float *MEAN = IN_F(0), *VAR = IN_F(1);
  float *RM = (float*)c->in[2], *RV = (float*)c->in[3];
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  for (int64_t ch = 0; ch < C; ch++) {
    RM[ch] = (float)((1.0 - momentum) * RM[ch] + momentum * MEAN[ch]);
    RV[ch] = (float)((1.0 - momentum) * RV[ch] + momentum * VAR[ch] * unbias);
  }
  return LIBRA_OK;
}

int32_t k_batch_norm_backward(const kcall* c) {
  int64_t N, C, HW;
  double eps;
  if (read_nchw(c, &N, &C, &HW) || read_eps(c, 3, &eps)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *GY = IN_F(1), *MEAN = IN_F(2), *VAR = IN_F(3), *G = IN_F(4);
  float *GX = OUT_F(0), *GG = OUT_F(1), *GB = OUT_F(2);
  const double M = (double)(N * HW);
  PAR_FOR(N * C * HW > PAR_MIN,
  for (int64_t ch = 0; ch < C; ch++) {
    const double mean = MEAN[ch], rstd = 1.0 / sqrt((double)VAR[ch] + eps);
    v8d ag = {0}, agx = {0};
    double tg = 0.0, tgx = 0.0;
    const int64_t HW8 = HW - HW % 8;
    for (int64_t n = 0; n < N; n++) {
      const float* x = X + (n * C + ch) * HW;
      const float* gy = GY + (n * C + ch) * HW;
      for (int64_t j = 0; j < HW8; j += 8) {
        const v8d g = ld8d(gy + j);
        ag += g;
        agx += g * ((ld8d(x + j) - mean) * rstd);
      }
      for (int64_t j = HW8; j < HW; j++) {
        tg += gy[j];
        tgx += gy[j] * ((x[j] - mean) * rstd);
      }
    }
    const double sg = hsum8(ag) + tg, sgx = hsum8(agx) + tgx;
    GB[ch] = (float)sg;
    GG[ch] = (float)sgx;
    const double k = G[ch] * rstd / M;
    for (int64_t n = 0; n < N; n++) {
      const float* x = X + (n * C + ch) * HW;
      const float* gy = GY + (n * C + ch) * HW;
      float* gx = GX + (n * C + ch) * HW;
      for (int64_t j = 0; j < HW; j++) {
        const double xhat = (x[j] - mean) * rstd;
        gx[j] = (float)(k * (M * gy[j] - sg - xhat * sgx));
      }
    }
  });
  return LIBRA_OK;
}

int32_t k_layer_norm(const kcall* c) {
  int64_t rows, cols;
  double eps;
  if (read_rc(c, &rows, &cols) || read_eps(c, 2, &eps)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *G = IN_F(1), *B = IN_F(2);
  float *Y = OUT_F(0), *MEAN = OUT_F(1), *RSTD = OUT_F(2);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    const int64_t c8 = cols - cols % 8;
    v8d acc = {0};
    double tail = 0.0;
    for (int64_t j = 0; j < c8; j += 8) acc += ld8d(x + j);
    for (int64_t j = c8; j < cols; j++) tail += x[j];
    const double mean = (hsum8(acc) + tail) / (double)cols;
    v8d vacc = {0};
    double vtail = 0.0;
    for (int64_t j = 0; j < c8; j += 8) {
      const v8d d = ld8d(x + j) - mean;
      vacc += d * d;
    }
    for (int64_t j = c8; j < cols; j++) {
      const double d = x[j] - mean;
      vtail += d * d;
    }
    const double v = hsum8(vacc) + vtail;
    const double rstd = 1.0 / sqrt(v / (double)cols + eps);
    for (int64_t j = 0; j < cols; j++) y[j] = (float)((x[j] - mean) * rstd * G[j] + B[j]);
    MEAN[r] = (float)mean;
    RSTD[r] = (float)rstd;
  });
  return LIBRA_OK;
}

/* gsum[j] = sum_r gy[r, j] * f(r, j) for column chunks; one thread per chunk. */
int32_t k_layer_norm_backward(const kcall* c) {
  int64_t rows, cols;
  if (read_rc(c, &rows, &cols)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *GY = IN_F(1), *MEAN = IN_F(2), *RSTD = IN_F(3), *G = IN_F(4);
  float *GX = OUT_F(0), *GG = OUT_F(1), *GB = OUT_F(2);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * cols;
    const float* gy = GY + r * cols;
    float* gx = GX + r * cols;
    const double mean = MEAN[r], rstd = RSTD[r];
    /* a = sum gxhat, b = sum gxhat * xhat */
    const int64_t c8 = cols - cols % 8;
    v8d va = {0}, vb = {0};
    double ta = 0.0, tb = 0.0;
    for (int64_t j = 0; j < c8; j += 8) {
      const v8d gh = ld8d(gy + j) * ld8d(G + j);
      va += gh;
      vb += gh * ((ld8d(x + j) - mean) * rstd);
    }
    for (int64_t j = c8; j < cols; j++) {
      const double gh = (double)gy[j] * G[j];
      ta += gh;
      tb += gh * ((x[j] - mean) * rstd);
    }
    const double a = hsum8(va) + ta, b = hsum8(vb) + tb;
    const double inv = 1.0 / (double)cols;
    for (int64_t j = 0; j < cols; j++) {
      const double xhat = (x[j] - mean) * rstd;
      const double gh = (double)gy[j] * G[j];
      gx[j] = (float)(rstd * (gh - a * inv - xhat * b * inv));
    }
  });
  const int64_t chunks = (cols + COLCHUNK - 1) / COLCHUNK;
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t t = 0; t < chunks; t++) {
    const int64_t j0 = t * COLCHUNK, len = cols - j0 < COLCHUNK ? cols - j0 : COLCHUNK;
    double sg[COLCHUNK], sb[COLCHUNK];
    for (int64_t j = 0; j < len; j++) sg[j] = sb[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
      const float* x = X + r * cols + j0;
      const float* gy = GY + r * cols + j0;
      const double mean = MEAN[r], rstd = RSTD[r];
      for (int64_t j = 0; j < len; j++) {
        sb[j] += gy[j];
        sg[j] += gy[j] * ((x[j] - mean) * rstd);
      }
    }
    for (int64_t j = 0; j < len; j++) {
      GG[j0 + j] = (float)sg[j];
      GB[j0 + j] = (float)sb[j];
    }
  });
  return LIBRA_OK;
}

int32_t k_rms_norm(const kcall* c) {
  int64_t rows, cols;
  double eps;
  if (read_rc(c, &rows, &cols) || read_eps(c, 2, &eps)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *G = IN_F(1);
  float *Y = OUT_F(0), *RSTD = OUT_F(1);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; j++) s += (double)x[j] * x[j];
    const double rstd = 1.0 / sqrt(s / (double)cols + eps);
    for (int64_t j = 0; j < cols; j++) y[j] = (float)(x[j] * rstd * G[j]);
    RSTD[r] = (float)rstd;
  });
  return LIBRA_OK;
}

int32_t k_rms_norm_backward(const kcall* c) {
  int64_t rows, cols;
  if (read_rc(c, &rows, &cols)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *X = IN_F(0), *GY = IN_F(1), *RSTD = IN_F(2), *G = IN_F(3);
  float *GX = OUT_F(0), *GG = OUT_F(1);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * cols;
    const float* gy = GY + r * cols;
    float* gx = GX + r * cols;
    const double rstd = RSTD[r];
    double d = 0.0;
    for (int64_t j = 0; j < cols; j++) d += (double)gy[j] * G[j] * x[j];
    const double k = rstd * rstd * rstd * d / (double)cols;
    for (int64_t j = 0; j < cols; j++) gx[j] = (float)(rstd * G[j] * gy[j] - x[j] * k);
  });
  const int64_t chunks = (cols + COLCHUNK - 1) / COLCHUNK;
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t t = 0; t < chunks; t++) {
    const int64_t j0 = t * COLCHUNK, len = cols - j0 < COLCHUNK ? cols - j0 : COLCHUNK;
    double sg[COLCHUNK];
    for (int64_t j = 0; j < len; j++) sg[j] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
      const float* x = X + r * cols + j0;
      const float* gy = GY + r * cols + j0;
      const double rstd = RSTD[r];
      for (int64_t j = 0; j < len; j++) sg[j] += gy[j] * (x[j] * rstd);
    }
    for (int64_t j = 0; j < len; j++) GG[j0 + j] = (float)sg[j];
  });
  return LIBRA_OK;
}
