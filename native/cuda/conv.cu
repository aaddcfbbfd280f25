/*
 * conv.cu - conv2d (im2col + batched sgemm) and its gradients (col2im for the
 * input, as a gather), pooling, global average pooling and nearest 2x
 * upsampling, all NCHW; semantics as native/cpu/conv.c.
 *
 * Every overlapping accumulation is a gather that adds in the CPU build's
 * order (col2im: by (r, s); pooling gradients: by (oh, ow)), starting from
 * 0.0f, so it is deterministic and needs no atomics. The weight gradient sums
 * the images' GEMMs in image order (beta = 1 after the first image).
 */
#include "common.cuh"
#include "libra_conv_params.h"

/* Images per im2col chunk: the column buffer stays under 512 MiB (at least one image). */
static int64_t chunk_images(const convp* q) {
  const int64_t per = q->C * q->R * q->S * q->OH * q->OW;
  const int64_t cap = (int64_t)1 << 27;
  int64_t nb = per > 0 ? cap / per : q->N;
  if (nb < 1) nb = 1;
  return nb < q->N ? nb : q->N;
}

/* col[b][(ch*R + r)*S + s][oh*OW + ow] = x[n0 + b, ch, oh*sh - ph + r*dh, ow*sw - pw + s*dw] */
__global__ void im2col_k(convp q, int64_t nb, const float* __restrict__ x, float* __restrict__ col) {
  const int64_t L = q.OH * q.OW, CRS = q.C * q.R * q.S;
  GRID_LOOP(e, nb * CRS * L) {
    const int64_t l = e % L, row = (e / L) % CRS, b = e / (L * CRS);
    const int64_t ch = row / (q.R * q.S), r = (row / q.S) % q.R, s = row % q.S;
    const int64_t oh = l / q.OW, ow = l % q.OW;
    const int64_t h = oh * q.sh - q.ph + r * q.dh, w = ow * q.sw - q.pw + s * q.dw;
    col[e] = h >= 0 && h < q.H && w >= 0 && w < q.W ? x[((b * q.C + ch) * q.H + h) * q.W + w]
                                                    : 0.0f;
  }
}

/* x[b, ch, h, w] = sum over (r, s), in that order, of the col entry it went to. */
__global__ void col2im_k(convp q, int64_t nb, const float* __restrict__ col, float* __restrict__ x) {
  const int64_t L = q.OH * q.OW, CRS = q.C * q.R * q.S;
  GRID_LOOP(e, nb * q.C * q.H * q.W) {
    const int64_t w = e % q.W, h = (e / q.W) % q.H, ch = (e / (q.W * q.H)) % q.C,
                  b = e / (q.W * q.H * q.C);
    const float* cb = col + b * CRS * L;
    float acc = 0.0f;
    for (int64_t r = 0; r < q.R; r++) {
      const int64_t hh = h + q.ph - r * q.dh;
      if (hh < 0 || hh % q.sh != 0) continue;
      const int64_t oh = hh / q.sh;
      if (oh >= q.OH) continue;
      for (int64_t s = 0; s < q.S; s++) {
        const int64_t ww = w + q.pw - s * q.dw;
        if (ww < 0 || ww % q.sw != 0) continue;
        const int64_t ow = ww / q.sw;
        if (ow >= q.OW) continue;
        acc += cb[((ch * q.R + r) * q.S + s) * L + oh * q.OW + ow];
      }
    }
    x[e] = acc;
  }
}

__global__ void add_bias_k(int64_t N, int64_t K, int64_t L, const float* __restrict__ b,
                           float* __restrict__ y) {
  GRID_LOOP(e, N * K * L) y[e] += b[(e / L) % K];
}

int32_t k_conv2d(const kcall* c) {
  convp q;
  TRY(conv_parse(c, &q));
  TRY(conv_check_inputs(c, &q));
  const float *X = IN_F(0), *Wt = IN_F(1);
  float* Y = OUT_F(0);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, CHW = q.C * q.H * q.W;
  if (q.N * q.K == 0) return LIBRA_OK;
  const int pw = is_pointwise(&q);
  const int64_t nb = chunk_images(&q);
  tmpbuf col;
  if (!pw && CRS > 0) TRY(tmp_alloc(c, (uint64_t)(nb * CRS * L) * 4, &col));
  for (int64_t n0 = 0; n0 < q.N; n0 += nb) {
    const int64_t cnt = q.N - n0 < nb ? q.N - n0 : nb;
    const float* B = X + n0 * CHW;
    if (!pw && CRS > 0) {
      im2col_k<<<grid_for(cnt * CRS * L), TPB, 0, c->st>>>(q, cnt, B, col.as<float>());
      LAUNCHED(c);
      B = col.as<float>();
    }
    TRY(libra_sgemm(c, 0, 0, q.K, L, CRS, 1.0f, Wt, 0, B, CRS * L, 0.0f, Y + n0 * q.K * L, q.K * L,
                    cnt));
  }
  if (q.has_bias) {
    add_bias_k<<<grid_for(q.N * q.K * L), TPB, 0, c->st>>>(q.N, q.K, L, IN_F(2), Y);
    LAUNCHED(c);
  }
  return LIBRA_OK;
}

int32_t k_conv2d_backward_input(const kcall* c) {
  convp q;
  TRY(conv_parse(c, &q));
  const float *GY = IN_F(0), *Wt = IN_F(1);
  float* GX = OUT_F(0);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, CHW = q.C * q.H * q.W;
  if (q.N * CHW == 0) return LIBRA_OK;
  const int pw = is_pointwise(&q);
  const int64_t nb = chunk_images(&q);
  tmpbuf col;
  if (!pw) TRY(tmp_alloc(c, (uint64_t)(nb * CRS * L) * 4, &col));
  for (int64_t n0 = 0; n0 < q.N; n0 += nb) {
    const int64_t cnt = q.N - n0 < nb ? q.N - n0 : nb;
    float* dst = pw ? GX + n0 * CHW : col.as<float>();
    TRY(libra_sgemm(c, 1, 0, CRS, L, q.K, 1.0f, Wt, 0, GY + n0 * q.K * L, q.K * L, 0.0f, dst,
                    CRS * L, cnt));
    if (!pw) {
      col2im_k<<<grid_for(cnt * CHW), TPB, 0, c->st>>>(q, cnt, col.as<float>(), GX + n0 * CHW);
      LAUNCHED(c);
    }
  }
  return LIBRA_OK;
}

int32_t k_conv2d_backward_weight(const kcall* c) {
  convp q;
  TRY(conv_parse(c, &q));
  const float *X = IN_F(0), *GY = IN_F(1);
  float* GW = OUT_F(0);
  const int64_t CRS = q.C * q.R * q.S, L = q.OH * q.OW, CHW = q.C * q.H * q.W;
  if (q.K * CRS == 0) return LIBRA_OK;
  if (q.N == 0) {
    CUDA_TRY(c, cudaMemsetAsync(GW, 0, (size_t)(q.K * CRS) * 4, c->st));
    return LIBRA_OK;
  }
  const int pw = is_pointwise(&q);
  const int64_t nb = chunk_images(&q);
  tmpbuf col;
  if (!pw) TRY(tmp_alloc(c, (uint64_t)(nb * CRS * L) * 4, &col));
  for (int64_t n0 = 0; n0 < q.N; n0 += nb) {
    const int64_t cnt = q.N - n0 < nb ? q.N - n0 : nb;
    const float* B = X + n0 * CHW;
    if (!pw) {
      im2col_k<<<grid_for(cnt * CRS * L), TPB, 0, c->st>>>(q, cnt, B, col.as<float>());
      LAUNCHED(c);
      B = col.as<float>();
    }
    for (int64_t b = 0; b < cnt; b++) {
      TRY(libra_sgemm(c, 0, 1, q.K, CRS, L, 1.0f, GY + (n0 + b) * q.K * L, 0, B + b * CRS * L, 0,
                      n0 + b == 0 ? 0.0f : 1.0f, GW, 0, 1));
    }
  }
  return LIBRA_OK;
}

/* gb[k] = sum over n, l of gy[n, k, l]: one block per k, double tree. */
__global__ void bias_grad_k(int64_t N, int64_t K, int64_t L, const float* __restrict__ gy,
                            float* __restrict__ gb) {
  __shared__ double sh[TPB];
  for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
    double s = 0.0;
    for (int64_t m = threadIdx.x; m < N * L; m += blockDim.x) {
      const int64_t n = m / L, l = m % L;
      s += gy[(n * K + k) * L + l];
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) gb[k] = (float)s;
  }
}

int32_t k_conv2d_backward_bias(const kcall* c) {
  PINT(N, 0, 0, "N");
  PINT(K, 1, 0, "K");
  PINT(L, 2, 0, "L");
  int64_t d[3] = {N, K, L}, n;
  if (pmul(c, d, 3, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (K == 0) return LIBRA_OK;
  bias_grad_k<<<grid_for(K, 1), TPB, 0, c->st>>>(N, K, L, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- pooling ---- */

/* Flat index (in the plane) of the first maximum of window (oh, ow); NaN wins; -1 if empty. */
__device__ inline int64_t window_argmax(const poolp& q, const float* plane, int64_t oh,
                                        int64_t ow) {
  int64_t best = -1;
  float bv = -INFINITY;
  for (int64_t i = 0; i < q.kh; i++) {
    const int64_t h = oh * q.sh - q.ph + i;
    if (h < 0 || h >= q.H) continue;
    for (int64_t j = 0; j < q.kw; j++) {
      const int64_t w = ow * q.sw - q.pw + j;
      if (w < 0 || w >= q.W) continue;
      const float v = plane[h * q.W + w];
      if (v != v) return h * q.W + w;
      if (best < 0 || v > bv) {
        bv = v;
        best = h * q.W + w;
      }
    }
  }
  return best;
}

/* Output y (mode 0) or the window's argmax (mode 1) for every output element. */
template <int MODE>
__global__ void max_pool_k(poolp q, const float* __restrict__ x, float* __restrict__ y,
                           int64_t* __restrict__ am) {
  const int64_t L = q.OH * q.OW;
  GRID_LOOP(e, q.N * q.C * L) {
    const int64_t pl = e / L, oh = (e % L) / q.OW, ow = e % q.OW;
    const float* plane = x + pl * q.H * q.W;
    const int64_t a = window_argmax(q, plane, oh, ow);
    if (MODE == 0) y[e] = a >= 0 ? plane[a] : -INFINITY;
    else am[e] = a;
  }
}

/* Output rows oh whose window covers input row h (likewise for columns). */
__device__ inline void covering(int64_t h, int64_t k, int64_t s, int64_t p, int64_t out,
                                int64_t* lo, int64_t* hi) {
  const int64_t num = h + p - k + 1;
  *lo = num <= 0 ? 0 : (num + s - 1) / s;
  const int64_t top = (h + p) / s;
  *hi = top < out - 1 ? top : out - 1;
}

/* gx[h, w] = sum over windows (oh, ow) in increasing order whose argmax is (h, w). */
__global__ void max_pool_bw_k(poolp q, const int64_t* __restrict__ am, const float* __restrict__ gy,
                              float* __restrict__ gx) {
  GRID_LOOP(e, q.N * q.C * q.H * q.W) {
    const int64_t w = e % q.W, h = (e / q.W) % q.H, pl = e / (q.W * q.H);
    const int64_t me = h * q.W + w, base = pl * q.OH * q.OW;
    int64_t oh0, oh1, ow0, ow1;
    covering(h, q.kh, q.sh, q.ph, q.OH, &oh0, &oh1);
    covering(w, q.kw, q.sw, q.pw, q.OW, &ow0, &ow1);
    float acc = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; oh++) {
      for (int64_t ow = ow0; ow <= ow1; ow++) {
        const int64_t o = base + oh * q.OW + ow;
        if (am[o] == me) acc += gy[o];
      }
    }
    gx[e] = acc;
  }
}

int32_t k_max_pool2d(const kcall* c) {
  poolp q;
  TRY(pool_parse(c, &q));
  const int64_t n = q.N * q.C * q.OH * q.OW;
  if (n == 0) return LIBRA_OK;
  max_pool_k<0><<<grid_for(n), TPB, 0, c->st>>>(q, IN_F(0), OUT_F(0), nullptr);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_max_pool2d_backward(const kcall* c) {
  poolp q;
  TRY(pool_parse(c, &q));
  const int64_t n = q.N * q.C * q.OH * q.OW;
  if (n == 0) return LIBRA_OK;
  tmpbuf am;
  TRY(tmp_alloc(c, (uint64_t)n * 8, &am));
  max_pool_k<1><<<grid_for(n), TPB, 0, c->st>>>(q, IN_F(0), nullptr, am.as<int64_t>());
  LAUNCHED(c);
  max_pool_bw_k<<<grid_for(q.N * q.C * q.H * q.W), TPB, 0, c->st>>>(q, am.as<int64_t>(), IN_F(1),
                                                                    OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void avg_pool_k(poolp q, const float* __restrict__ x, float* __restrict__ y) {
  const int64_t L = q.OH * q.OW;
  const double inv = 1.0 / (double)(q.kh * q.kw);
  GRID_LOOP(e, q.N * q.C * L) {
    const int64_t pl = e / L, oh = (e % L) / q.OW, ow = e % q.OW;
    const float* plane = x + pl * q.H * q.W;
    double s = 0.0;
    for (int64_t i = 0; i < q.kh; i++) {
      const int64_t h = oh * q.sh - q.ph + i;
      if (h < 0 || h >= q.H) continue;
      for (int64_t j = 0; j < q.kw; j++) {
        const int64_t w = ow * q.sw - q.pw + j;
        if (w >= 0 && w < q.W) s += plane[h * q.W + w];
      }
    }
    y[e] = (float)(s * inv);
  }
}

/* gx[h, w] = sum over covering windows in increasing (oh, ow) of gy * (1 / (kh kw)). */
__global__ void avg_pool_bw_k(poolp q, const float* __restrict__ gy, float* __restrict__ gx) {
  const float inv = (float)(1.0 / (double)(q.kh * q.kw));
  GRID_LOOP(e, q.N * q.C * q.H * q.W) {
    const int64_t w = e % q.W, h = (e / q.W) % q.H, pl = e / (q.W * q.H);
    const float* g = gy + pl * q.OH * q.OW;
    int64_t oh0, oh1, ow0, ow1;
    covering(h, q.kh, q.sh, q.ph, q.OH, &oh0, &oh1);
    covering(w, q.kw, q.sw, q.pw, q.OW, &ow0, &ow1);
    float acc = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; oh++) {
      for (int64_t ow = ow0; ow <= ow1; ow++) acc += g[oh * q.OW + ow] * inv;
    }
    gx[e] = acc;
  }
}

int32_t k_avg_pool2d(const kcall* c) {
  poolp q;
  TRY(pool_parse(c, &q));
  const int64_t n = q.N * q.C * q.OH * q.OW;
  if (n == 0) return LIBRA_OK;
  avg_pool_k<<<grid_for(n), TPB, 0, c->st>>>(q, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_avg_pool2d_backward(const kcall* c) {
  poolp q;
  TRY(pool_parse(c, &q));
  const int64_t n = q.N * q.C * q.H * q.W;
  if (n == 0) return LIBRA_OK;
  avg_pool_bw_k<<<grid_for(n), TPB, 0, c->st>>>(q, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* y[r] = sum(x[r, :]) / hw in double (NaN when hw = 0): one block per row. */
__global__ void gap_k(int64_t rows, int64_t hw, const float* __restrict__ x, float* __restrict__ y) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) s += x[r * hw + j];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) y[r] = hw == 0 ? __int_as_float(0x7fc00000) : (float)(s / (double)hw);
  }
}

int32_t k_global_avg_pool(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(hw, 1, 0, "hw");
  int64_t d[2] = {rows, hw}, n;
  if (pmul(c, d, 2, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (rows == 0) return LIBRA_OK;
  gap_k<<<grid_for(rows, 1), row_block(hw), 0, c->st>>>(rows, hw, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void gap_bw_k(int64_t rows, int64_t hw, const float* __restrict__ gy,
                         float* __restrict__ gx) {
  GRID_LOOP(e, rows * hw) gx[e] = (float)((double)gy[e / hw] / (double)hw);
}

int32_t k_global_avg_pool_backward(const kcall* c) {
  PINT(rows, 0, 0, "rows");
  PINT(hw, 1, 0, "hw");
  int64_t d[2] = {rows, hw}, n;
  if (pmul(c, d, 2, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (n == 0) return LIBRA_OK;
  gap_bw_k<<<grid_for(n), TPB, 0, c->st>>>(rows, hw, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void upsample_k(int64_t rows, int64_t W, const float* __restrict__ x,
                           float* __restrict__ y) {
  GRID_LOOP(e, rows * 4 * W) {
    /* y row yr = 2r + a of width 2W */
    const int64_t yc = e % (2 * W), yr = e / (2 * W);
    y[e] = x[(yr / 2) * W + yc / 2];
  }
}

__global__ void upsample_bw_k(int64_t rows, int64_t W, const float* __restrict__ gy,
                              float* __restrict__ gx) {
  GRID_LOOP(e, rows * W) {
    const int64_t r = e / W, j = e % W;
    const float* g0 = gy + 2 * r * 2 * W;
    const float* g1 = g0 + 2 * W;
    gx[e] = (float)((double)g0[2 * j] + g0[2 * j + 1] + g1[2 * j] + g1[2 * j + 1]);
  }
}

/* rows = planes * H and W of "planes, H, W". */
static int32_t read_phw(const kcall* c, int64_t* rows, int64_t* W) {
  static const char* const names[] = {"planes", "H", "W"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  *rows = v[0] * v[1];
  *W = v[2];
  return LIBRA_OK;
}

int32_t k_upsample_nearest2x(const kcall* c) {
  int64_t rows, W;
  TRY(read_phw(c, &rows, &W));
  if (rows * W == 0) return LIBRA_OK;
  upsample_k<<<grid_for(rows * 4 * W), TPB, 0, c->st>>>(rows, W, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_upsample_nearest2x_backward(const kcall* c) {
  int64_t rows, W;
  TRY(read_phw(c, &rows, &W));
  if (rows * W == 0) return LIBRA_OK;
  upsample_bw_k<<<grid_for(rows * W), TPB, 0, c->st>>>(rows, W, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}
