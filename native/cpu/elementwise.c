/*
 * elementwise.c - broadcasting binary ops, where, expand, sum_to, unary ops and
 * their gradients, scalar variants, fills, casts, add_inplace and the fused LSTM cell.
 *
 * Broadcasting kernels collapse the shape first (size-1 dims dropped, adjacent
 * dims merged where every operand is contiguous across them) so the common
 * cases run as one long inner loop with unit or zero strides.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "libra_broadcast_params.h"
#include "libra_kernel_params.h"

/* ---- broadcast views ---- */

/* Offsets of each input at the start of row r (all dims but the last). */
static inline void bview_row(const bview* v, int64_t r, int64_t* off) {
  for (int j = 1; j < v->nops; j++) off[j] = 0;
  for (int d = v->nd - 2; d >= 0; d--) {
    int64_t i = r % v->shape[d];
    r /= v->shape[d];
    for (int j = 1; j < v->nops; j++) off[j] += i * v->st[j][d];
  }
}

#define BINARY(NAME, EXPR)                                                           \
  int32_t k_##NAME(const kcall* c) {                                                 \
    bview v;                                                                         \
    int32_t s = bview_parse(c, 2, &v);                                               \
    if (s != LIBRA_OK || v.n == 0) return s;                                         \
    const float* A = IN_F(0);                                                        \
    const float* B = IN_F(1);                                                        \
    float* Y = OUT_F(0);                                                             \
    const int64_t inner = v.shape[v.nd - 1], rows = v.n / inner;                     \
    const int64_t sa = v.st[1][v.nd - 1], sb = v.st[2][v.nd - 1];                    \
    PAR_FOR(v.n > PAR_MIN, \
    for (int64_t r = 0; r < rows; r++) {                                             \
      int64_t off[MAXOPS];                                                           \
      bview_row(&v, r, off);                                                         \
      const float* ar = A + off[1];                                                  \
      const float* br = B + off[2];                                                  \
      float* yr = Y + r * inner;                                                     \
      if (sa == 1 && sb == 1) {                                                      \
        for (int64_t i = 0; i < inner; i++) {                                        \
          const float a = ar[i], b = br[i];                                          \
          yr[i] = (EXPR);                                                            \
        }                                                                            \
      } else if (sa == 1 && sb == 0) {                                               \
        const float b = br[0];                                                       \
        for (int64_t i = 0; i < inner; i++) {                                        \
          const float a = ar[i];                                                     \
          yr[i] = (EXPR);                                                            \
        }                                                                            \
      } else if (sa == 0 && sb == 1) {                                               \
        const float a = ar[0];                                                       \
        for (int64_t i = 0; i < inner; i++) {                                        \
          const float b = br[i];                                                     \
          yr[i] = (EXPR);                                                            \
        }                                                                            \
      } else {                                                                       \
        for (int64_t i = 0; i < inner; i++) {                                        \
          const float a = ar[i * sa], b = br[i * sb];                                \
          yr[i] = (EXPR);                                                            \
        }                                                                            \
      }                                                                              \
    });                                                                                \
    return LIBRA_OK;                                                                 \
  }

BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a * b)
BINARY(div, a / b)
BINARY(eq, a == b ? 1.0f : 0.0f)
BINARY(ne, a != b ? 1.0f : 0.0f)
BINARY(lt, a < b ? 1.0f : 0.0f)
BINARY(le, a <= b ? 1.0f : 0.0f)
BINARY(gt, a > b ? 1.0f : 0.0f)
BINARY(ge, a >= b ? 1.0f : 0.0f)

int32_t k_where(const kcall* c) {
  bview v;
  int32_t s = bview_parse(c, 3, &v);
  if (s != LIBRA_OK || v.n == 0) return s;
  const float *C = IN_F(0), *A = IN_F(1), *B = IN_F(2);
  float* Y = OUT_F(0);
  const int64_t inner = v.shape[v.nd - 1], rows = v.n / inner;
  const int64_t sc = v.st[1][v.nd - 1], sa = v.st[2][v.nd - 1], sb = v.st[3][v.nd - 1];
  PAR_FOR(v.n > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    int64_t off[MAXOPS];
    bview_row(&v, r, off);
    const float *cr = C + off[1], *ar = A + off[2], *br = B + off[3];
    float* yr = Y + r * inner;
    for (int64_t i = 0; i < inner; i++) yr[i] = cr[i * sc] != 0.0f ? ar[i * sa] : br[i * sb];
  });
  return LIBRA_OK;
}

int32_t k_expand(const kcall* c) {
  bview v;
  int32_t s = bview_parse(c, 1, &v);
  if (s != LIBRA_OK || v.n == 0) return s;
  const uint32_t* X = (const uint32_t*)c->in[0];
  uint32_t* Y = (uint32_t*)c->out[0];
  const int64_t inner = v.shape[v.nd - 1], rows = v.n / inner, sx = v.st[1][v.nd - 1];
  PAR_FOR(v.n > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    int64_t off[MAXOPS];
    bview_row(&v, r, off);
    const uint32_t* xr = X + off[1];
    uint32_t* yr = Y + r * inner;
    if (sx == 1) {
      memcpy(yr, xr, (size_t)inner * 4);
    } else if (sx == 0) {
      const uint32_t x0 = xr[0];
      for (int64_t i = 0; i < inner; i++) yr[i] = x0;
    } else {
      for (int64_t i = 0; i < inner; i++) yr[i] = xr[i * sx];
    }
  });
  return LIBRA_OK;
}

/* Sums x over the dims where yShape is 1; each output element is summed on one
 * thread, in row-major order of the reduced index, in double precision. */
int32_t k_sum_to(const kcall* c) {
  sumto_params q;
  TRY(sum_to_parse(c, &q));
  const int ndim = q.nd;
  const int64_t *xs = q.xs, *ys = q.ys, *xstr = q.xstr, nx = q.nx, ny = q.ny;
  /* kept dims (index from y) and reduced dims (xShape > 1, yShape == 1) */
  int64_t ksh[MAX_DIMS_C], kst[MAX_DIMS_C], rsh[MAX_DIMS_C], rst[MAX_DIMS_C];
  int nk = 0, nr = 0;
  int64_t nred = 1;
  for (int i = 0; i < ndim; i++) {
    if (ys[i] == xs[i]) {
      ksh[nk] = ys[i];
      kst[nk++] = xstr[i];
    } else {
      rsh[nr] = xs[i];
      rst[nr++] = xstr[i];
      nred *= xs[i];
    }
  }
  const float* X = IN_F(0);
  float* Y = OUT_F(0);
  if (ny == 0) return LIBRA_OK;
  if (nx == 0) {
    memset(Y, 0, (size_t)ny * 4);
    return LIBRA_OK;
  }
  /* Every reduced dim before every kept one (a bias gradient: [rows, cols] -> [cols]):
   * x is [nred, ny] row-major; sum column blocks row by row, which adds each output's
   * terms in the same order as the general loop below (so the same bits), but reads
   * memory contiguously. */
  int leading = 1, seen_kept = 0;
  for (int i = 0; i < ndim; i++) {
    if (xs[i] == 1) continue;
    if (ys[i] == xs[i]) seen_kept = 1;
    else if (seen_kept) leading = 0;
  }
  if (leading && nred > 1) {
    enum { CB = 256 };
    const int64_t blocks = (ny + CB - 1) / CB;
    PAR_FOR(nx > PAR_MIN && blocks > 1,
    for (int64_t b = 0; b < blocks; b++) {
      double acc[CB];
      const int64_t j0 = b * CB, w = ny - j0 < CB ? ny - j0 : CB;
      for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
      for (int64_t r = 0; r < nred; r++) {
        const float* row = X + r * ny + j0;
        for (int64_t j = 0; j < w; j++) acc[j] += row[j];
      }
      for (int64_t j = 0; j < w; j++) Y[j0 + j] = (float)acc[j];
    });
    return LIBRA_OK;
  }
  PAR_FOR(nx > PAR_MIN,
  for (int64_t o = 0; o < ny; o++) {
    int64_t base = 0, r = o;
    for (int d = nk - 1; d >= 0; d--) {
      base += (r % ksh[d]) * kst[d];
      r /= ksh[d];
    }
    double s = 0.0;
    int64_t idx[MAX_DIMS_C] = {0};
    int64_t off = base;
    for (int64_t t = 0; t < nred; t++) {
      s += X[off];
      for (int d = nr - 1; d >= 0; d--) {
        idx[d]++;
        off += rst[d];
        if (idx[d] < rsh[d]) break;
        off -= rst[d] * rsh[d];
        idx[d] = 0;
      }
    }
    Y[o] = (float)s;
  });
  return LIBRA_OK;
}

/* ---- unary ---- */

static int32_t read_n(const kcall* c, int64_t* n) {
  return pint(c, 0, 0, "n", n) ? LIBRA_ERR_INVALID_ARGUMENT : LIBRA_OK;
}

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_C 0.044715f
#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

#define UNARY(NAME, EXPR)                                        \
  int32_t k_##NAME(const kcall* c) {                             \
    int64_t n;                                                   \
    if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;        \
    const float* X = IN_F(0);                                    \
    float* Y = OUT_F(0);                                         \
    PAR_FOR(n > PAR_MIN, \
    for (int64_t i = 0; i < n; i++) {                            \
      const float x = X[i];                                      \
      Y[i] = (EXPR);                                             \
    });                                                            \
    return LIBRA_OK;                                             \
  }

static inline float sigmoid_f(float x) { return 1.0f / (1.0f + fast_expf(-x)); }

/* 0.5 x (1 + tanh(u)) written as x sigmoid(2u), which has no cancellation for x << 0. */
static inline float gelu_tanh_f(float x) {
  const float u = SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
  return x / (1.0f + fast_expf(-2.0f * u));
}


UNARY(neg, -x)
UNARY(exp, expf(x))
UNARY(log, logf(x))
UNARY(sqrt, sqrtf(x))
UNARY(rsqrt, 1.0f / sqrtf(x))
UNARY(relu, x > 0.0f ? x : 0.0f)
UNARY(gelu_tanh, gelu_tanh_f(x))
UNARY(gelu_erf, 0.5f * x * (1.0f + erff(x * INV_SQRT2)))
UNARY(silu, x * sigmoid_f(x))
UNARY(sigmoid, sigmoid_f(x))
UNARY(tanh, fast_tanhf(x))

int32_t k_copy(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (n > 0) memcpy(c->out[0], c->in[0], (size_t)n * 4);
  return LIBRA_OK;
}

static inline int32_t f32_to_i32(float x) {
  if (x != x) return 0;
  if (x >= 2147483647.0f) return INT32_MAX;
  if (x <= -2147483648.0f) return INT32_MIN;
  return (int32_t)x;
}

int32_t k_cast_f32_i32(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float* X = IN_F(0);
  int32_t* Y = OUT_I(0);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) Y[i] = f32_to_i32(X[i]););
  return LIBRA_OK;
}

int32_t k_cast_i32_f32(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  const int32_t* X = IN_I(0);
  float* Y = OUT_F(0);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) Y[i] = (float)X[i];);
  return LIBRA_OK;
}

#define UNARY_BW(NAME, EXPR)                                     \
  int32_t k_##NAME(const kcall* c) {                             \
    int64_t n;                                                   \
    if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;        \
    const float* S = IN_F(0);                                    \
    const float* G = IN_F(1);                                    \
    float* Y = OUT_F(0);                                         \
    PAR_FOR(n > PAR_MIN, \
    for (int64_t i = 0; i < n; i++) {                            \
      const float x = S[i], g = G[i];                            \
      Y[i] = (EXPR);                                             \
    });                                                            \
    return LIBRA_OK;                                             \
  }

/* With s = sigmoid(2u) = (1 + tanh u) / 2: d/dx = s + x 2 s (1 - s) du/dx. */
static inline float gelu_tanh_grad(float x) {
  const float u = SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
  const float s = 1.0f / (1.0f + fast_expf(-2.0f * u));
  return s + 2.0f * x * s * (1.0f - s) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x * x);
}
static inline float gelu_erf_grad(float x) {
  return 0.5f * (1.0f + erff(x * INV_SQRT2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}
static inline float silu_grad(float x) {
  const float s = sigmoid_f(x);
  return s * (1.0f + x * (1.0f - s));
}

UNARY_BW(relu_backward, x > 0.0f ? g : 0.0f)
UNARY_BW(gelu_tanh_backward, g * gelu_tanh_grad(x))
UNARY_BW(gelu_erf_backward, g * gelu_erf_grad(x))
UNARY_BW(silu_backward, g * silu_grad(x))
UNARY_BW(sigmoid_backward, g * x * (1.0f - x))
UNARY_BW(tanh_backward, g * (1.0f - x * x))

/* ---- scalar variants ---- */

#define SCALAR(NAME, EXPR)                                                      \
  int32_t k_##NAME(const kcall* c) {                                            \
    int64_t n;                                                                  \
    if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;                       \
    const float s = (float)c->p[1];                                             \
    const float* X = IN_F(0);                                                   \
    float* Y = OUT_F(0);                                                        \
    PAR_FOR(n > PAR_MIN, \
    for (int64_t i = 0; i < n; i++) {                                           \
      const float x = X[i];                                                     \
      Y[i] = (EXPR);                                                            \
    });                                                                           \
    return LIBRA_OK;                                                            \
  }

SCALAR(add_scalar, x + s)
SCALAR(mul_scalar, x * s)
SCALAR(rsub_scalar, s - x)
SCALAR(rdiv_scalar, s / x)
SCALAR(pow_scalar, powf(x, s))
SCALAR(eq_scalar, x == s ? 1.0f : 0.0f)
SCALAR(ne_scalar, x != s ? 1.0f : 0.0f)
SCALAR(lt_scalar, x < s ? 1.0f : 0.0f)
SCALAR(le_scalar, x <= s ? 1.0f : 0.0f)
SCALAR(gt_scalar, x > s ? 1.0f : 0.0f)
SCALAR(ge_scalar, x >= s ? 1.0f : 0.0f)

int32_t k_fill(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float v = (float)c->p[1];
  float* Y = OUT_F(0);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) Y[i] = v;);
  return LIBRA_OK;
}

int32_t k_fill_i32(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  const double d = c->p[1];
  if (d != floor(d) || d < -2147483648.0 || d > 2147483647.0) {
    return kfail(c, "value (param 1) must be an integer in the i32 range, got %.17g", d);
  }
  const int32_t v = (int32_t)d;
  int32_t* Y = OUT_I(0);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) Y[i] = v;);
  return LIBRA_OK;
}

int32_t k_add_inplace(const kcall* c) {
  int64_t n;
  if (read_n(c, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  float* A = (float*)c->in[0];
  const float* X = IN_F(1);
  PAR_FOR(n > PAR_MIN,
  for (int64_t i = 0; i < n; i++) A[i] += X[i];);
  return LIBRA_OK;
}

/* ---- fused LSTM cell ---- */

/* One row of k_lstm_cell: gate pre-activations i, f, g, o, the previous c, the next h and c
 * (separate restrict pointers, so the loop vectorizes). */
static void lstm_row(int64_t H, const float* restrict gi, const float* restrict gf,
                     const float* restrict gc, const float* restrict go,
                     const float* restrict cp, float* restrict hn, float* restrict cn) {
  for (int64_t j = 0; j < H; j++) {
    const float i = sigmoid_f(gi[j]), f = sigmoid_f(gf[j]);
    const float g = fast_tanhf(gc[j]), o = sigmoid_f(go[j]);
    const float cv = f * cp[j] + i * g;
    cn[j] = cv;
    hn[j] = o * fast_tanhf(cv);
  }
}

/* Gates i, f, g, o of row r at [r 4H, r 4H + 4H); state rows h then c at [r 2H, r 2H + 2H). */
int32_t k_lstm_cell(const kcall* c) {
  int64_t B, H;
  if (read_bh(c, &B, &H)) return LIBRA_ERR_INVALID_ARGUMENT;
  const float *G = IN_F(0), *S = IN_F(1);
  float* N = OUT_F(0);
  PAR_FOR(B * H > PAR_MIN,
  for (int64_t r = 0; r < B; r++) {
    const float* g = G + r * 4 * H;
    float* n = N + r * 2 * H;
    lstm_row(H, g, g + H, g + 2 * H, g + 3 * H, S + r * 2 * H + H, n, n + H);
  });
  return LIBRA_OK;
}

/* One row of k_lstm_cell_backward (see lstm_row): the gate gradients and the previous c's;
 * the previous h's is 0 (the cell does not read it). dh is dh0 plus e1 and e2 where given. */
static void lstm_row_backward(int64_t H, const float* restrict g, const float* restrict cp,
                              const float* restrict cn, const float* restrict dh0,
                              const float* restrict e1, const float* restrict e2,
                              const float* restrict dc, float* restrict gg,
                              float* restrict gh, float* restrict gcp) {
  for (int64_t j = 0; j < H; j++) {
    float dh = dh0[j];
    if (e1) dh += e1[j];
    if (e2) dh += e2[j];
    const float i = sigmoid_f(g[j]), f = sigmoid_f(g[H + j]);
    const float t = fast_tanhf(g[2 * H + j]), o = sigmoid_f(g[3 * H + j]);
    const float tc = fast_tanhf(cn[j]);
    const float d = dc[j] + dh * o * (1.0f - tc * tc);
    gg[j] = d * t * i * (1.0f - i);
    gg[H + j] = d * cp[j] * f * (1.0f - f);
    gg[2 * H + j] = d * i * (1.0f - t * t);
    gg[3 * H + j] = dh * tc * o * (1.0f - o);
    gh[j] = 0.0f;
    gcp[j] = d * f;
  }
}

int32_t k_lstm_cell_backward(const kcall* c) {
  int64_t B = 0, H = 0, extra = 0;
  TRY(lstm_backward_parse(c, &B, &H, &extra));
  const float *G = IN_F(0), *S = IN_F(1), *N = IN_F(2), *D = IN_F(3);
  const float* E1 = extra > 0 ? IN_F(4) : NULL;
  const float* E2 = extra > 1 ? IN_F(5) : NULL;
  float *GG = OUT_F(0), *GS = OUT_F(1);
  PAR_FOR(B * H > PAR_MIN,
  for (int64_t r = 0; r < B; r++) {
    const int64_t o2 = r * 2 * H;
    lstm_row_backward(H, G + r * 4 * H, S + o2 + H, N + o2 + H, D + o2, E1 ? E1 + r * H : NULL,
                      E2 ? E2 + r * H : NULL, D + o2 + H, GG + r * 4 * H, GS + o2, GS + o2 + H);
  });
  return LIBRA_OK;
}

/* One step of an LSTM layer: with recurrent 1 the gates are first h W_hh^T (the same sgemm call
 * as the matmul kernel's for it), then row r's gates are xw[r, t, :] plus them, written out,
 * then lstm_row on them; h is next's h half again, contiguous. */
int32_t k_lstm_step(const kcall* c) {
  lstm_step_params q = {0, 0, 0, 0, 0};
  TRY(lstm_step_parse(c, &q));
  const int64_t B = q.B, T = q.T, H = q.H, t = q.t, rec = q.rec;
  const float *XW = IN_F(0), *S = IN_F(1);
  float *N = OUT_F(0), *HO = OUT_F(1), *G = OUT_F(2);
  const int64_t G4 = 4 * H;
  if (rec) {
    libra_sgemm(0, 1, B, G4, H, 1.0f, IN_F(2), H > 0 ? H : 1, IN_F(3), H > 0 ? H : 1, 0.0f, G,
                G4 > 0 ? G4 : 1);
  }
  PAR_FOR(B * H > PAR_MIN,
  for (int64_t r = 0; r < B; r++) {
    const float* x = XW + (r * T + t) * G4;
    float* g = G + r * G4;
    if (rec) {
      for (int64_t j = 0; j < G4; j++) g[j] = x[j] + g[j];
    } else if (G4 > 0) {
      memcpy(g, x, (size_t)G4 * 4);
    }
    float* n = N + r * 2 * H;
    lstm_row(H, g, g + H, g + 2 * H, g + 3 * H, S + r * 2 * H + H, n, n + H);
    if (H > 0) memcpy(HO + r * H, n, (size_t)H * 4);
  });
  return LIBRA_OK;
}

/* The gradient of one step of an LSTM layer: lstm_row_backward with dh = gnext's h half +
 * gy[r, t, :] (+ dhnext), then dhprev = ggates W_hh (the matmul kernel's sgemm call). */
int32_t k_lstm_step_backward(const kcall* c) {
  lstm_step_params q = {0, 0, 0, 0, 0};
  TRY(lstm_step_backward_parse(c, &q));
  const int64_t B = q.B, T = q.T, H = q.H, t = q.t;
  const float *G = IN_F(0), *S = IN_F(1), *N = IN_F(2), *D = IN_F(3), *GY = IN_F(4);
  const float* DN = t < T - 1 ? IN_F(6) : NULL;
  float *GG = OUT_F(0), *GS = OUT_F(1);
  PAR_FOR(B * H > PAR_MIN,
  for (int64_t r = 0; r < B; r++) {
    const int64_t o2 = r * 2 * H;
    lstm_row_backward(H, G + r * 4 * H, S + o2 + H, N + o2 + H, D + o2, GY + (r * T + t) * H,
                      DN ? DN + r * H : NULL, D + o2 + H, GG + r * 4 * H, GS + o2, GS + o2 + H);
  });
  if (q.rec) {
    libra_sgemm(0, 0, B, H, 4 * H, 1.0f, GG, H > 0 ? 4 * H : 1, IN_F(5), H > 0 ? H : 1, 0.0f,
                OUT_F(2), H > 0 ? H : 1);
  }
  return LIBRA_OK;
}
