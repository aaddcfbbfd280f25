/*
 * conv.c - conv2d (im2col + sgemm) and its gradients (col2im for the input),
 * pooling, global average pooling and nearest 2x upsampling, all NCHW.
 * Accumulations that overlap (col2im, pooling gradients) give each channel
 * plane to one thread, which adds in a fixed order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "libra_conv_params.h"

/* Images are processed in groups of G so that each sgemm has at least ~GROUP_COLS
 * columns: late CNN layers have few output pixels per image, and a GEMM with a
 * 49-column right-hand side runs far below peak. Group g's column matrix is
 * [CRS, G*L] with image i in columns [i*L, (i+1)*L). The grouping depends only
 * on the shapes, never on threads, so results stay deterministic. */
#define GROUP_COLS 1024

static int64_t group_size(const convp* q) {
  const int64_t L = q->OH * q->OW;
  int64_t g = L >= GROUP_COLS ? 1 : (GROUP_COLS + L - 1) / L;
  return g < q->N ? g : (q->N > 0 ? q->N : 1);
}

/* Output columns ow whose input column ow*sw - pw + off (off = s*dw) lies in [0, W):
 * [*lo, *hi). */
static inline void valid_cols(const convp* q, int64_t off, int64_t* lo, int64_t* hi) {
  const int64_t a = q->pw - off; /* need ow*sw >= a and ow*sw <= W - 1 + a */
  int64_t l = a <= 0 ? 0 : (a + q->sw - 1) / q->sw;
  int64_t h = q->W - 1 + a < 0 ? 0 : (q->W - 1 + a) / q->sw + 1;
  if (h > q->OW) h = q->OW;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

/* Row `row` of the column matrix: dst[oh*OW + ow] = x[ch, oh*sh - ph + r*dh, ow*sw - pw + s*dw]
 * (0 outside), row = (ch*R + r)*S + s. The valid column range is computed once per row,
 * so the inner loop is a plain copy (memcpy for stride 1). */
static inline void im2col_row(const convp* q, const float* x, float* dst, int64_t row) {
  const int64_t ch = row / (q->R * q->S), r = (row / q->S) % q->R, s = row % q->S;
  const float* plane = x + ch * q->H * q->W;
  const int64_t off = s * q->dw;
  int64_t lo, hi;
  valid_cols(q, off, &lo, &hi);
  for (int64_t oh = 0; oh < q->OH; oh++) {
    const int64_t h = oh * q->sh - q->ph + r * q->dh;
    float* d = dst + oh * q->OW;
    if (h < 0 || h >= q->H || lo >= hi) {
      memset(d, 0, sizeof(float) * (size_t)q->OW);
      continue;
    }
    const float* src = plane + h * q->W - q->pw + off;
    for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0.0f;
    if (q->sw == 1) {
      memcpy(d + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
    } else {
      for (int64_t ow = lo; ow < hi; ow++) d[ow] = src[ow * q->sw];
    }
    for (int64_t ow = hi; ow < q->OW; ow++) d[ow] = 0.0f;
  }
}

/* The column matrix col[CRS, ld] of one image (its columns [0, OH*OW)). */
static void im2col(const convp* q, const float* x, float* col, int64_t ld, int par) {
  const int64_t rows = q->C * q->R * q->S, L = q->OH * q->OW;
  PAR_FOR(par && rows * L > PAR_MIN,
  for (int64_t row = 0; row < rows; row++) im2col_row(q, x, col + row * ld, row););
}

/* x[ch] = sum of the col entries that came from it; one channel per thread. Terms are
 * added in (r, s, oh, ow) order, as before the valid ranges were hoisted. */
static void col2im(const convp* q, const float* col, int64_t ld, float* x, int par) {
  const int64_t L = q->OH * q->OW, HW = q->H * q->W;
  PAR_FOR(par && q->C * q->R * q->S * L > PAR_MIN,
  for (int64_t ch = 0; ch < q->C; ch++) {
    float* plane = x + ch * HW;
    memset(plane, 0, sizeof(float) * (size_t)HW);
    for (int64_t r = 0; r < q->R; r++) {
      for (int64_t s = 0; s < q->S; s++) {
        const float* src = col + ((ch * q->R + r) * q->S + s) * ld;
        const int64_t off = s * q->dw;
        int64_t lo, hi;
        valid_cols(q, off, &lo, &hi);
        if (lo >= hi) continue;
        for (int64_t oh = 0; oh < q->OH; oh++) {
          const int64_t h = oh * q->sh - q->ph + r * q->dh;
          if (h < 0 || h >= q->H) continue;
          float* d = plane + h * q->W - q->pw + off;
          const float* sr = src + oh * q->OW;
          if (q->sw == 1) {
            for (int64_t ow = lo; ow < hi; ow++) d[ow] += sr[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ow++) d[ow * q->sw] += sr[ow];
          }
        }
      }
    }
  });
}

/* dst[k, i*L + l] = src[i, k, l] for i < g ([g, K, L] -> [K, g*L]) */
static void gather_kl(const float* src, float* dst, int64_t g, int64_t K, int64_t L) {
  PAR_FOR(g * K * L > PAR_MIN,
  for (int64_t k = 0; k < K; k++) {
    for (int64_t i = 0; i < g; i++) {
      memcpy(dst + k * g * L + i * L, src + (i * K + k) * L, sizeof(float) * (size_t)L);
    }
  });
}

/* Scratch buffers kept between calls (per thread, three slots: the column matrix, a
 * gathered/regrouped operand and a transposed result) so that a conv does not pay malloc and first-touch page
 * faults every call; buffers over SCRATCH_KEEP bytes are released after the call. */
#define SCRATCH_KEEP ((int64_t)64 << 20)
static _Thread_local float* scratch_buf[3];
static _Thread_local int64_t scratch_cap[3];

static float* scratch_get(const kcall* c, int slot, int64_t floats, int32_t* status) {
  if (floats < 1) floats = 1;
  if (scratch_cap[slot] >= floats) return scratch_buf[slot];
  free(scratch_buf[slot]);
  scratch_buf[slot] = malloc(sizeof(float) * (size_t)floats);
  scratch_cap[slot] = scratch_buf[slot] ? floats : 0;
  if (!scratch_buf[slot]) {
    *status = set_error(LIBRA_ERR_OUT_OF_MEMORY,
                        "libra_run(%s): could not allocate %lld bytes of im2col scratch", c->name,
                        (long long)(floats * 4));
  }
  return scratch_buf[slot];
}

/* Ends a call's use of the scratch: large buffers are not kept. */
static void scratch_done(void) {
  for (int i = 0; i < 3; i++) {
    if (scratch_cap[i] * 4 > SCRATCH_KEEP) {
      free(scratch_buf[i]);
      scratch_buf[i] = NULL;
      scratch_cap[i] = 0;
    }
  }
}

/* ---- the small-weight path ----
 * When the weights are small (the output channels and kernels of a CIFAR-sized
 * network) each image is one GEMM on libra_sgemm_small, which beats OpenBLAS at
 * these shapes, with no grouping of images; images are split across threads. Every
 * output element is still computed by one thread in a fixed order, so results do not
 * depend on the thread count. */
#define SMALL_WEIGHTS 65536

static int use_small(const convp* q) {
  const int64_t CRS = q->C * q->R * q->S, L = q->OH * q->OW;
  return q->K * CRS <= SMALL_WEIGHTS && CRS * L * 4 <= SCRATCH_KEEP;
}

/* Whether to split images across threads: more than one image, more than one thread
 * and enough work that the fork/join is noise. */
static int par_images(const convp* q) {
  const int64_t CRS = q->C * q->R * q->S, L = q->OH * q->OW;
  return q->N > 1 && libra_threads() > 1 && q->K * CRS * L > PAR_MIN;
}

static int32_t conv_forward_small(const kcall* c, const convp* q, const float* X, const float* Wt,
                                  const float* B, float* Y) {
  const int64_t CRS = q->C * q->R * q->S, L = q->OH * q->OW, CHW = q->C * q->H * q->W;
  const int direct = is_pointwise(q);
  int failed = 0;
  /* Stride 1 with whole 16-column panels per output row: implicit GEMM on a zero-padded
   * copy of the image (row p = (ch, r, s) of the column matrix, output row oh, is the
   * padded row ch, oh + r*dh shifted by s*dw), so no column matrix is written. */
  const int implicit = !direct && q->sh == 1 && q->sw == 1 && q->OW % 16 == 0;
  /* Other widths and strides: copies of the zero-padded image, split into row phases
   * (stride sh), sampled at each column tap and cut to the output width
   * (libra_conv_shifted): row p = (ch, r, s) of the column matrix is the run of OH*OW
   * floats at plane s, row phase r*dh % sh, row r*dh / sh, so one GEMM per image reads
   * its right-hand side through row pointers and no column matrix is written. */
  const int shifted = !direct && !implicit;
  const int64_t Hp = q->H + 2 * q->ph, Wp = q->W + 2 * q->pw, Hq = (Hp + q->sh - 1) / q->sh;
  const int64_t PS = q->C * q->sh * Hq * q->OW;
  /* the weights are packed once, on this thread, and read by every thread */
  const float* ap = libra_sgemm_pack(q->K, CRS, Wt, CRS, 1);
  if (!ap) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(%s): could not allocate conv scratch",
                     c->name);
  }
  PAR_FOR(par_images(q),
  for (int64_t n = 0; n < q->N; n++) {
    int32_t st = 0;
    float* y = Y + n * q->K * L;
    if (implicit) {
      float* xp = scratch_get(c, 1, q->C * Hp * Wp, &st);
      /* row pointers, then each row's offset in the padded image (computed once) */
      const float** rows = (const float**)scratch_get(c, 0, 4 * CRS, &st);
      if (!xp || !rows) {
        failed = 1;
        continue;
      }
      int64_t* offs = (int64_t*)(rows + CRS);
      for (int64_t p = 0; p < CRS; p++) {
        const int64_t ch = p / (q->R * q->S), r = (p / q->S) % q->R, sx = p % q->S;
        offs[p] = (ch * Hp + r * q->dh) * Wp + sx * q->dw;
      }
      const float* x = X + n * CHW;
      memset(xp, 0, sizeof(float) * (size_t)(q->C * Hp * Wp));
      for (int64_t ch = 0; ch < q->C; ch++) {
        for (int64_t h = 0; h < q->H; h++) {
          memcpy(xp + (ch * Hp + h + q->ph) * Wp + q->pw, x + (ch * q->H + h) * q->W,
                 sizeof(float) * (size_t)q->W);
        }
      }
      for (int64_t oh = 0; oh < q->OH; oh++) {
        const float* base = xp + oh * Wp;
        for (int64_t p = 0; p < CRS; p++) rows[p] = base + offs[p];
        libra_sgemm_packed_rows(q->K, q->OW, CRS, ap, rows, y + oh * q->OW, L);
      }
    } else if (shifted) {
      float* xs = scratch_get(c, 1, q->S * PS, &st);
      const float** rows = (const float**)scratch_get(c, 0, 2 * CRS, &st);
      if (!xs || !rows) {
        failed = 1;
        continue;
      }
      libra_conv_shifted(X + n * CHW, q->C, q->H, q->W, q->S, q->ph, q->pw, q->sh, q->sw, q->dw,
                         q->OW, xs, PS);
      for (int64_t p = 0; p < CRS; p++) {
        const int64_t ch = p / (q->R * q->S), r = (p / q->S) % q->R, sx = p % q->S;
        const int64_t hr = r * q->dh;
        rows[p] = xs + sx * PS + ((ch * q->sh + hr % q->sh) * Hq + hr / q->sh) * q->OW;
      }
      libra_sgemm_packed_rows(q->K, L, CRS, ap, rows, y, L);
    } else {
      float* col = direct ? (float*)X + n * CHW : scratch_get(c, 0, CRS * L, &st);
      if (!col) {
        failed = 1;
        continue;
      }
      if (!direct) im2col(q, X + n * CHW, col, L, 0);
      libra_sgemm_packed(q->K, L, CRS, ap, col, L, y, L, 0);
    }
    if (B) {
      for (int64_t k = 0; k < q->K; k++) {
        const float b = B[k];
        for (int64_t l = 0; l < L; l++) y[k * L + l] += b;
      }
    }
  });
  scratch_done();
  if (failed) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(%s): could not allocate conv scratch",
                     c->name);
  }
  return LIBRA_OK;
}

static int32_t conv_backward_input_small(const kcall* c, const convp* q, const float* GY,
                                         const float* Wt, float* GX) {
  const int64_t CRS = q->C * q->R * q->S, L = q->OH * q->OW, CHW = q->C * q->H * q->W;
  const int direct = is_pointwise(q);
  /* Stride 1: the input gradient is the forward conv of gy with the weights transposed
   * over channels and flipped in space, padded by dil*(R-1) - pad; that runs on the
   * forward path (reduction over K*R*S, no col2im). */
  if (!direct && q->sh == 1 && q->sw == 1 && q->dh * (q->R - 1) >= q->ph &&
      q->dw * (q->S - 1) >= q->pw) {
    convp t = *q;
    t.C = q->K;
    t.K = q->C;
    t.H = q->OH;
    t.W = q->OW;
    t.ph = q->dh * (q->R - 1) - q->ph;
    t.pw = q->dw * (q->S - 1) - q->pw;
    t.has_bias = 0;
    t.OH = out_size(t.H, t.R, 1, t.ph, t.dh);
    t.OW = out_size(t.W, t.S, 1, t.pw, t.dw);
    if (t.OH == q->H && t.OW == q->W && use_small(&t)) {
      int32_t st = 0;
      float* wf = scratch_get(c, 2, q->K * CRS, &st);
      if (!wf) return st;
      const int64_t RS = q->R * q->S;
      for (int64_t k = 0; k < q->K; k++) {
        for (int64_t ch = 0; ch < q->C; ch++) {
          const float* src = Wt + (k * q->C + ch) * RS;
          float* dst = wf + (ch * q->K + k) * RS;
          for (int64_t i = 0; i < RS; i++) dst[i] = src[RS - 1 - i];
        }
      }
      return conv_forward_small(c, &t, GY, wf, NULL, GX);
    }
  }
  int failed = 0;
  /* col = W^T gy_n: A[i, p] = W[p, i], packed once on this thread and read by every thread */
  const float* ap = libra_sgemm_pack(CRS, q->K, Wt, 1, CRS);
  if (!ap) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(%s): could not allocate conv scratch",
                     c->name);
  }
  PAR_FOR(par_images(q),
  for (int64_t n = 0; n < q->N; n++) {
    int32_t st = 0;
    float* col = direct ? GX + n * CHW : scratch_get(c, 0, CRS * L, &st);
    if (!col) {
      failed = 1;
      continue;
    }
    libra_sgemm_packed(CRS, L, q->K, ap, GY + n * q->K * L, L, col, L, 0);
    if (!direct) col2im(q, col, L, GX + n * CHW, 0);
  });
  scratch_done();
  if (failed) {
    return set_error(LIBRA_ERR_OUT_OF_MEMORY, "libra_run(%s): could not allocate conv scratch",
                     c->name);
  }
  return LIBRA_OK;
}

int32_t k_conv2d(const kcall* c) {

  convp q;
  int32_t st = conv_parse(c, &q);
  if (st) return st;
  st = conv_check_inputs(c, &q);
  if (st) return st;
  const float *X = IN_F(0), *Wt = IN_F(1), *B = q.has_bias ? IN_F(2) : NULL;
  float* Y = OUT_F(0);
  if (q.N == 0) return LIBRA_OK;
  if (use_small(&q)) return conv_forward_small(c, &q, X, Wt, B, Y);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, G = group_size(&q);
  const int64_t CHW = q.C * q.H * q.W;
  const int direct = G == 1 && is_pointwise(&q); /* x_n is already the column matrix */
  float* col = direct ? NULL : scratch_get(c, 0, CRS * G * L, &st);
  float* tmp = G > 1 ? scratch_get(c, 1, q.K * G * L, &st) : NULL;
  if ((!direct && !col) || (G > 1 && !tmp)) {
    scratch_done();
    return st;
  }
  for (int64_t n0 = 0; n0 < q.N; n0 += G) {
    const int64_t g = q.N - n0 < G ? q.N - n0 : G, ld = g * L;
    for (int64_t i = 0; i < g && !direct; i++) im2col(&q, X + (n0 + i) * CHW, col + i * L, ld, 1);
    float* out = G > 1 ? tmp : Y + n0 * q.K * L;
    libra_sgemm(0, 0, q.K, ld, CRS, 1.0f, Wt, CRS > 0 ? CRS : 1, direct ? X + n0 * CHW : col, ld,
                0.0f, out, ld);
    const int64_t rows = g * q.K;
    PAR_FOR(rows * L > PAR_MIN,
    for (int64_t t = 0; t < rows; t++) {
      const int64_t i = t / q.K, k = t % q.K;
      float* yrow = Y + ((n0 + i) * q.K + k) * L;
      if (G > 1) memcpy(yrow, tmp + k * ld + i * L, sizeof(float) * (size_t)L);
      if (B) {
        const float b = B[k];
        for (int64_t l = 0; l < L; l++) yrow[l] += b;
      }
    });
  }
  scratch_done();
  return LIBRA_OK;
}

int32_t k_conv2d_backward_input(const kcall* c) {
  convp q;
  int32_t st = conv_parse(c, &q);
  if (st) return st;
  const float *GY = IN_F(0), *Wt = IN_F(1);
  float* GX = OUT_F(0);
  if (q.N == 0) return LIBRA_OK;
  if (use_small(&q)) return conv_backward_input_small(c, &q, GY, Wt, GX);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, G = group_size(&q);
  const int64_t CHW = q.C * q.H * q.W;
  const int direct = G == 1 && is_pointwise(&q); /* the column matrix is gx_n itself */
  float* col = direct ? NULL : scratch_get(c, 0, CRS * G * L, &st);
  float* gyg = G > 1 ? scratch_get(c, 1, q.K * G * L, &st) : NULL;
  if ((!direct && !col) || (G > 1 && !gyg)) {
    scratch_done();
    return st;
  }
  for (int64_t n0 = 0; n0 < q.N; n0 += G) {
    const int64_t g = q.N - n0 < G ? q.N - n0 : G, ld = g * L;
    const float* rhs = GY + n0 * q.K * L;
    if (G > 1) {
      gather_kl(rhs, gyg, g, q.K, L);
      rhs = gyg;
    }
    libra_sgemm(1, 0, CRS, ld, q.K, 1.0f, Wt, CRS > 0 ? CRS : 1, rhs, ld, 0.0f,
                direct ? GX + n0 * CHW : col, ld);
    for (int64_t i = 0; i < g && !direct; i++) col2im(&q, col + i * L, ld, GX + (n0 + i) * CHW, 1);
  }
  scratch_done();
  return LIBRA_OK;
}

int32_t k_conv2d_backward_weight(const kcall* c) {

  convp q;
  int32_t st = conv_parse(c, &q);
  if (st) return st;
  const float *X = IN_F(0), *GY = IN_F(1);
  float* GW = OUT_F(0);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, G = group_size(&q);
  const int64_t CHW = q.C * q.H * q.W;
  if (q.N == 0) {
    if (q.K * CRS > 0) memset(GW, 0, sizeof(float) * (size_t)(q.K * CRS));
    return LIBRA_OK;
  }
  if (use_small(&q)) {
    if (libra_conv_wgrad(q.N, q.C, q.H, q.W, q.K, q.R, q.S, q.ph, q.pw, q.sh, q.sw, q.dh, q.dw, X,
                         GY, GW)) {
      return set_error(LIBRA_ERR_OUT_OF_MEMORY,
                       "libra_run(%s): could not allocate conv weight-gradient scratch", c->name);
    }
    return LIBRA_OK;
  }
  const int direct = G == 1 && is_pointwise(&q);
  float* col = direct ? NULL : scratch_get(c, 0, CRS * G * L, &st);
  float* gyg = G > 1 ? scratch_get(c, 1, q.K * G * L, &st) : NULL;
  if ((!direct && !col) || (G > 1 && !gyg)) {
    scratch_done();
    return st;
  }
  for (int64_t n0 = 0; n0 < q.N; n0 += G) {
    const int64_t g = q.N - n0 < G ? q.N - n0 : G, ld = g * L;
    for (int64_t i = 0; i < g && !direct; i++) im2col(&q, X + (n0 + i) * CHW, col + i * L, ld, 1);
    const float* lhs = GY + n0 * q.K * L;
    if (G > 1) {
      gather_kl(lhs, gyg, g, q.K, L);
      lhs = gyg;
    }
    libra_sgemm(0, 1, q.K, CRS, ld, 1.0f, lhs, ld, direct ? X + n0 * CHW : col, ld,
                n0 == 0 ? 0.0f : 1.0f, GW, CRS > 0 ? CRS : 1);
  }
  scratch_done();
  return LIBRA_OK;
}

int32_t k_conv2d_backward_bias(const kcall* c) {
  PINT(N, 0, 0, "N");
  PINT(K, 1, 0, "K");
  PINT(L, 2, 0, "L");
  const float* GY = IN_F(0);
  float* GB = OUT_F(0);
  PAR_FOR(N * K * L > PAR_MIN,
  for (int64_t k = 0; k < K; k++) {
    double s = 0.0;
    for (int64_t n = 0; n < N; n++) {
      const float* row = GY + (n * K + k) * L;
      for (int64_t l = 0; l < L; l++) s += row[l];
    }
    GB[k] = (float)s;
  });
  return LIBRA_OK;
}

/* ---- pooling ---- */

/* Flat index (in the plane) of the first maximum of window (oh, ow); NaN wins. */
static inline int64_t window_argmax(const poolp* q, const float* plane, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float bv = -INFINITY;
  for (int64_t i = 0; i < q->kh; i++) {
    const int64_t h = oh * q->sh - q->ph + i;
    if (h < 0 || h >= q->H) continue;
    for (int64_t j = 0; j < q->kw; j++) {
      const int64_t w = ow * q->sw - q->pw + j;
      if (w < 0 || w >= q->W) continue;
      const float v = plane[h * q->W + w];
      if (v != v) return h * q->W + w;
      if (best < 0 || v > bv) {
        bv = v;
        best = h * q->W + w;
      }
    }
  }
  return best;
}

int32_t k_max_pool2d(const kcall* c) {
  poolp q;
  int32_t st = pool_parse(c, &q);
  if (st) return st;
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  const int64_t planes = q.N * q.C;
  PAR_FOR(planes * q.OH * q.OW * q.kh * q.kw > PAR_MIN,
  for (int64_t pl = 0; pl < planes; pl++) {
    const float* plane = X + pl * q.H * q.W;
    float* y = Y + pl * q.OH * q.OW;
    for (int64_t oh = 0; oh < q.OH; oh++) {
      for (int64_t ow = 0; ow < q.OW; ow++) {
        const int64_t a = window_argmax(&q, plane, oh, ow);
        y[oh * q.OW + ow] = a >= 0 ? plane[a] : -INFINITY;
      }
    }
  });
  return LIBRA_OK;
}

int32_t k_max_pool2d_backward(const kcall* c) {
  poolp q;
  int32_t st = pool_parse(c, &q);
  if (st) return st;
  const float *X = IN_F(0), *GY = IN_F(1);
  float* GX = OUT_F(0);
  const int64_t planes = q.N * q.C;
  PAR_FOR(planes * q.OH * q.OW * q.kh * q.kw > PAR_MIN,
  for (int64_t pl = 0; pl < planes; pl++) {
    const float* plane = X + pl * q.H * q.W;
    const float* gy = GY + pl * q.OH * q.OW;
    float* gx = GX + pl * q.H * q.W;
    memset(gx, 0, sizeof(float) * (size_t)(q.H * q.W));
    for (int64_t oh = 0; oh < q.OH; oh++) {
      for (int64_t ow = 0; ow < q.OW; ow++) {
        const int64_t a = window_argmax(&q, plane, oh, ow);
        if (a >= 0) gx[a] += gy[oh * q.OW + ow];
      }
    }
  });
  return LIBRA_OK;
}

int32_t k_avg_pool2d(const kcall* c) {
  poolp q;
  int32_t st = pool_parse(c, &q);
  if (st) return st;
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  const int64_t planes = q.N * q.C;
  const double inv = 1.0 / (double)(q.kh * q.kw);
  PAR_FOR(planes * q.OH * q.OW * q.kh * q.kw > PAR_MIN,
  for (int64_t pl = 0; pl < planes; pl++) {
    const float* plane = X + pl * q.H * q.W;
    float* y = Y + pl * q.OH * q.OW;
    for (int64_t oh = 0; oh < q.OH; oh++) {
      for (int64_t ow = 0; ow < q.OW; ow++) {
        double s = 0.0;
        for (int64_t i = 0; i < q.kh; i++) {
          const int64_t h = oh * q.sh - q.ph + i;
          if (h < 0 || h >= q.H) continue;
          for (int64_t j = 0; j < q.kw; j++) {
            const int64_t w = ow * q.sw - q.pw + j;
            if (w >= 0 && w < q.W) s += plane[h * q.W + w];
          }
        }
        y[oh * q.OW + ow] = (float)(s * inv);
      }
    }
  });
  return LIBRA_OK;
}

int32_t k_avg_pool2d_backward(const kcall* c) {
  poolp q;
  int32_t st = pool_parse(c, &q);
  if (st) return st;
  const float* GY = IN_F(0);
  float* GX = OUT_F(0);
  const int64_t planes = q.N * q.C;
  const float inv = (float)(1.0 / (double)(q.kh * q.kw));
  PAR_FOR(planes * q.OH * q.OW * q.kh * q.kw > PAR_MIN,
  for (int64_t pl = 0; pl < planes; pl++) {
    const float* gy = GY + pl * q.OH * q.OW;
    float* gx = GX + pl * q.H * q.W;
    memset(gx, 0, sizeof(float) * (size_t)(q.H * q.W));
    for (int64_t oh = 0; oh < q.OH; oh++) {
      for (int64_t ow = 0; ow < q.OW; ow++) {
        const float g = gy[oh * q.OW + ow] * inv;
        for (int64_t i = 0; i < q.kh; i++) {
          const int64_t h = oh * q.sh - q.ph + i;
          if (h < 0 || h >= q.H) continue;
          for (int64_t j = 0; j < q.kw; j++) {
            const int64_t w = ow * q.sw - q.pw + j;
            if (w >= 0 && w < q.W) gx[h * q.W + w] += g;
          }
        }
      }
    }
  });
  return LIBRA_OK;
}

int32_t k_global_avg_pool(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(hw, 1, 0, "hw");
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  PAR_FOR(rows * hw > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    double s = 0.0;
    for (int64_t j = 0; j < hw; j++) s += X[r * hw + j];
    Y[r] = hw == 0 ? NAN : (float)(s / (double)hw);
  });
  return LIBRA_OK;
}

int32_t k_global_avg_pool_backward(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(hw, 1, 0, "hw");
  const float* GY = IN_F(0);
  float* GX = OUT_F(0);
  PAR_FOR(rows * hw > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float g = (float)((double)GY[r] / (double)hw);
    for (int64_t j = 0; j < hw; j++) GX[r * hw + j] = g;
  });
  return LIBRA_OK;
}

int32_t k_upsample_nearest2x(const kcall* c) {
  PINT(planes, 0, 0, "planes");
  PINT(H, 1, 0, "H");
  PINT(W, 2, 0, "W");
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  const int64_t rows = planes * H;
  PAR_FOR(rows * W * 4 > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* x = X + r * W;
    float* y0 = Y + 2 * r * 2 * W;
    float* y1 = y0 + 2 * W;
    for (int64_t j = 0; j < W; j++) {
      y0[2 * j] = y0[2 * j + 1] = y1[2 * j] = y1[2 * j + 1] = x[j];
    }
  });
  return LIBRA_OK;
}

int32_t k_upsample_nearest2x_backward(const kcall* c) {
  PINT(planes, 0, 0, "planes");
  PINT(H, 1, 0, "H");
  PINT(W, 2, 0, "W");
  const float* GY = IN_F(0);
  float* GX = OUT_F(0);
  const int64_t rows = planes * H;
  PAR_FOR(rows * W * 4 > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    const float* g0 = GY + 2 * r * 2 * W;
    const float* g1 = g0 + 2 * W;
    float* gx = GX + r * W;
    for (int64_t j = 0; j < W; j++) {
      gx[j] = (float)((double)g0[2 * j] + g0[2 * j + 1] + g1[2 * j] + g1[2 * j + 1]);
    }
  });
  return LIBRA_OK;
}
