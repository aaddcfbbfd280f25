/*
 * reduce.c - reductions over the middle axis of [outer, dim, inner] and the
 * row-wise softmax family. Every output element is reduced by one thread in
 * index order (double accumulators), so results do not depend on threading.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "libra_kernel_params.h"

#define CHUNK 512 /* inner elements per task */

/* mode 0: sum, 1: mean */
static int32_t sum_like(const kcall* c, int mode) {
  int64_t outer, dim, inner;
  if (read_odi(c, &outer, &dim, &inner)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  const int64_t chunks = (inner + CHUNK - 1) / CHUNK, tasks = outer * chunks;
  const double scale = mode == 1 ? 1.0 / (double)dim : 1.0; /* dim = 0 gives inf * 0 = NaN */
  PAR_FOR(outer * dim * inner > PAR_MIN,
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t o = t / chunks, i0 = (t % chunks) * CHUNK;
    const int64_t len = inner - i0 < CHUNK ? inner - i0 : CHUNK;
    double acc[CHUNK];
    for (int64_t i = 0; i < len; i++) acc[i] = 0.0;
    const float* xo = X + o * dim * inner + i0;
    for (int64_t j = 0; j < dim; j++) {
      const float* xr = xo + j * inner;
      for (int64_t i = 0; i < len; i++) acc[i] += xr[i];
    }
    float* yo = Y + o * inner + i0;
    for (int64_t i = 0; i < len; i++) yo[i] = (float)(mode == 1 ? (dim == 0 ? NAN : acc[i] * scale) : acc[i]);
  });
  return LIBRA_OK;
}

int32_t k_sum_axis(const kcall* c) { return sum_like(c, 0); }
int32_t k_mean_axis(const kcall* c) { return sum_like(c, 1); }

/* Index of the first maximum (NaN counts as the maximum; the first NaN wins). */
static inline int64_t argmax_strided(const float* x, int64_t dim, int64_t stride) {
  int64_t best = 0;
  float bv = x[0];
  if (bv != bv) return 0;
  for (int64_t j = 1; j < dim; j++) {
    const float v = x[j * stride];
    if (v != v) return j;
    if (v > bv) {
      bv = v;
      best = j;
    }
  }
  return best;
}

static int32_t max_like(const kcall* c, int mode) {
  int64_t outer, dim, inner;
  if (read_odi(c, &outer, &dim, &inner)) return LIBRA_ERR_INVALID_ARGUMENT;
  TRY(need_dim(c, outer, dim, inner));
  const float* X = IN_F(0);
  const int64_t n = outer * inner;
  PAR_FOR(n * dim > PAR_MIN,
  for (int64_t t = 0; t < n; t++) {
    const int64_t o = t / inner, i = t % inner;
    const float* x = X + o * dim * inner + i;
    const int64_t j = argmax_strided(x, dim, inner);
    if (mode == 0) {
      OUT_F(0)[t] = x[j * inner];
    } else if (mode == 1) {
      OUT_I(0)[t] = (int32_t)j;
    } else {
      const float g = IN_F(1)[t];
      float* gx = OUT_F(0) + o * dim * inner + i;
      for (int64_t k = 0; k < dim; k++) gx[k * inner] = k == j ? g : 0.0f;
    }
  });
  return LIBRA_OK;
}

int32_t k_max_axis(const kcall* c) { return max_like(c, 0); }
int32_t k_argmax_axis(const kcall* c) { return max_like(c, 1); }
int32_t k_max_axis_backward(const kcall* c) { return max_like(c, 2); }

static int32_t softmax_like(const kcall* c, int logmode) {
  int64_t rows, cols;
  if (read_rc(c, &rows, &cols)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (cols == 0) return LIBRA_OK;
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    float m = -INFINITY;
    for (int64_t j = 0; j < cols; j++) m = x[j] > m || x[j] != x[j] ? x[j] : m;
    if (m == -INFINITY) m = 0.0f; /* all -inf: exp(-inf - 0) = 0 */
    /* exp(x - m) into y, then summed in double lanes (see ld8d) */
    for (int64_t j = 0; j < cols; j++) y[j] = fast_expf(x[j] - m);
    const int64_t c8 = cols - cols % 8;
    v8d acc = {0};
    double tail = 0.0;
    for (int64_t j = 0; j < c8; j += 8) acc += ld8d(y + j);
    for (int64_t j = c8; j < cols; j++) tail += y[j];
    const double s = hsum8(acc) + tail;
    if (logmode) {
      const float lse = (float)log(s);
      for (int64_t j = 0; j < cols; j++) y[j] = x[j] - m - lse;
    } else {
      const float inv = (float)(1.0 / s);
      for (int64_t j = 0; j < cols; j++) y[j] *= inv;
    }
  });
  return LIBRA_OK;
}

int32_t k_softmax(const kcall* c) { return softmax_like(c, 0); }
int32_t k_log_softmax(const kcall* c) { return softmax_like(c, 1); }

static int32_t softmax_bw_like(const kcall* c, int logmode) {
  int64_t rows, cols;
  if (read_rc(c, &rows, &cols)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float* Yv = IN_F(0);
  const float* G = IN_F(1);
  float* GX = OUT_F(0);
  PAR_FOR(rows * cols > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* y = Yv + r * cols;
    const float* g = G + r * cols;
    float* gx = GX + r * cols;
    const int64_t c8 = cols - cols % 8;
    v8d acc = {0};
    double tail = 0.0;
    if (logmode) {
      for (int64_t j = 0; j < c8; j += 8) acc += ld8d(g + j);
      for (int64_t j = c8; j < cols; j++) tail += g[j];
      const float sf = (float)(hsum8(acc) + tail);
      for (int64_t j = 0; j < cols; j++) gx[j] = g[j] - fast_expf(y[j]) * sf;
    } else {
      for (int64_t j = 0; j < c8; j += 8) acc += ld8d(g + j) * ld8d(y + j);
      for (int64_t j = c8; j < cols; j++) tail += (double)g[j] * y[j];
      const float sf = (float)(hsum8(acc) + tail);
      for (int64_t j = 0; j < cols; j++) gx[j] = y[j] * (g[j] - sf);
    }
  });
  return LIBRA_OK;
}

int32_t k_softmax_backward(const kcall* c) { return softmax_bw_like(c, 0); }
int32_t k_log_softmax_backward(const kcall* c) { return softmax_bw_like(c, 1); }
