/*
 * reduce.cu - reductions over the middle axis of [outer, dim, inner], the
 * row-wise softmax family and the losses (cross-entropy, mse).
 *
 * Semantics follow native/cpu/reduce.c: double accumulators, max/argmax pick
 * the first maximum with NaN as the largest value, softmax subtracts the row
 * maximum (0 when the whole row is -inf). Reductions run in a fixed per-thread
 * order and a fixed tree (deterministic, no atomics).
 */
#include "common.cuh"
#include "libra_kernel_params.h"

struct acc_t {
  double s;
  float v;
  int64_t i;
};

template <int MODE>
__device__ inline void acc_init(acc_t& a) {
  a.s = 0.0;
  a.v = 0.0f;
  a.i = -1;
}

template <int MODE>
__device__ inline void acc_add(acc_t& a, float x, int64_t j) {
  if (MODE < 2) {
    a.s += x;
  } else if (argmax_better(x, j, a.v, a.i)) {
    a.v = x;
    a.i = j;
  }
}

template <int MODE>
__device__ inline void acc_merge(acc_t& a, const acc_t& b) {
  if (MODE < 2) {
    a.s += b.s;
  } else if (argmax_better(b.v, b.i, a.v, a.i)) {
    a.v = b.v;
    a.i = b.i;
  }
}

template <int MODE>
__device__ inline void acc_store(void* y, int64_t t, const acc_t& a, int64_t dim) {
  if (MODE == 0) ((float*)y)[t] = (float)a.s;
  if (MODE == 1) ((float*)y)[t] = dim == 0 ? __int_as_float(0x7fc00000) : (float)(a.s * (1.0 / (double)dim));
  if (MODE == 2) ((float*)y)[t] = a.v;
  if (MODE == 3) ((int32_t*)y)[t] = (int32_t)a.i;
}

/*
 * A long axis with few outputs is split into P chunks of `chunk` elements:
 * stage 1 reduces every (output, chunk) into a partial, stage 2 merges each
 * output's P partials in chunk order. P and chunk depend only on the sizes, so
 * the result is still bitwise reproducible. P = 1 writes the outputs directly.
 */

/* inner == 1: one block per (row, chunk), threads stride over the chunk, then a tree. */
template <int MODE>
__global__ void axis_rows_k(const float* __restrict__ x, void* y, acc_t* __restrict__ part,
                            int64_t outer, int64_t dim, int64_t chunk, int64_t P) {
  __shared__ acc_t sh[256];
  for (int64_t b = blockIdx.x; b < outer * P; b += gridDim.x) {
    const int64_t o = b / P, p = b % P;
    const int64_t j0 = p * chunk, j1 = j0 + chunk < dim ? j0 + chunk : dim;
    const float* xo = x + o * dim;
    acc_t a;
    acc_init<MODE>(a);
    for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) acc_add<MODE>(a, xo[j], j);
    sh[threadIdx.x] = a;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) acc_merge<MODE>(sh[threadIdx.x], sh[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (P == 1) acc_store<MODE>(y, o, sh[0], dim);
      else part[o * P + p] = sh[0];
    }
    __syncthreads();
  }
}

/* inner > 1: blocks of 32 inner lanes x 8 dim groups (coalesced along inner) per
 * (tile, chunk); group g takes j = j0 + g, j0 + g + 8, ...; then a tree over the groups. */
template <int MODE>
__global__ void axis_cols_k(const float* __restrict__ x, void* y, acc_t* __restrict__ part,
                            int64_t outer, int64_t dim, int64_t inner, int64_t chunk, int64_t P) {
  __shared__ acc_t sh[8][32];
  const int64_t tiles = (inner + 31) / 32;
  const int lane = threadIdx.x, grp = threadIdx.y;
  for (int64_t b = blockIdx.x; b < outer * tiles * P; b += gridDim.x) {
    const int64_t p = b % P, ot = b / P;
    const int64_t o = ot / tiles, i = (ot % tiles) * 32 + lane;
    const int64_t j0 = p * chunk, j1 = j0 + chunk < dim ? j0 + chunk : dim;
    acc_t a;
    acc_init<MODE>(a);
    if (i < inner) {
      const float* xo = x + o * dim * inner + i;
      for (int64_t j = j0 + grp; j < j1; j += 8) acc_add<MODE>(a, xo[j * inner], j);
    }
    sh[grp][lane] = a;
    __syncthreads();
    for (int s = 4; s > 0; s >>= 1) {
      if (grp < s) acc_merge<MODE>(sh[grp][lane], sh[grp + s][lane]);
      __syncthreads();
    }
    if (grp == 0 && i < inner) {
      const int64_t t = o * inner + i;
      if (P == 1) acc_store<MODE>(y, t, sh[0][lane], dim);
      else part[t * P + p] = sh[0][lane];
    }
    __syncthreads();
  }
}

/* Stage 2: output t merges part[t * P + 0 .. P) in order. */
template <int MODE>
__global__ void axis_finish_k(const acc_t* __restrict__ part, void* y, int64_t n, int64_t P,
                              int64_t dim) {
  GRID_LOOP(t, n) {
    acc_t a = part[t * P];
    for (int64_t p = 1; p < P; p++) acc_merge<MODE>(a, part[t * P + p]);
    acc_store<MODE>(y, t, a, dim);
  }
}

template <int MODE>
static int32_t axis_launch(const kcall* c, const float* x, void* y, int64_t outer, int64_t dim,
                           int64_t inner) {
  const int64_t tiles = inner == 1 ? 1 : (inner + 31) / 32;
  const int64_t blocks = outer * tiles;
  /* Enough blocks for the whole device: split long axes when there are few outputs. */
  int64_t P = 1;
  const int64_t min_chunk = 4096, want_blocks = 2048;
  if (blocks < want_blocks && dim > 2 * min_chunk) {
    P = (want_blocks + blocks - 1) / blocks;
    const int64_t max_p = (dim + min_chunk - 1) / min_chunk;
    if (P > max_p) P = max_p;
  }
  const int64_t chunk = P == 1 ? dim : (dim + P - 1) / P;
  if (P > 1) P = (dim + chunk - 1) / chunk; /* no empty chunk */
  tmpbuf part;
  if (P > 1) TRY(tmp_alloc(c, (uint64_t)(outer * inner * P) * sizeof(acc_t), &part));
  if (inner == 1) {
    axis_rows_k<MODE><<<grid_for(outer * P, 1), row_block(P == 1 ? dim : chunk), 0, c->st>>>(
        x, y, part.as<acc_t>(), outer, dim, chunk, P);
  } else {
    axis_cols_k<MODE><<<grid_for(blocks * P, 1), dim3(32, 8), 0, c->st>>>(
        x, y, part.as<acc_t>(), outer, dim, inner, chunk, P);
  }
  LAUNCHED(c);
  if (P > 1) {
    axis_finish_k<MODE><<<grid_for(outer * inner), TPB, 0, c->st>>>(part.as<acc_t>(), y,
                                                                    outer * inner, P, dim);
    LAUNCHED(c);
  }
  return LIBRA_OK;
}

int32_t libra_axis_reduce(const kcall* c, int mode, const float* x, void* y, int64_t outer,
                          int64_t dim, int64_t inner) {
  if (outer == 0 || inner == 0) return LIBRA_OK;
  switch (mode) {
    case 0: return axis_launch<0>(c, x, y, outer, dim, inner);
    case 1: return axis_launch<1>(c, x, y, outer, dim, inner);
    case 2: return axis_launch<2>(c, x, y, outer, dim, inner);
    default: return axis_launch<3>(c, x, y, outer, dim, inner);
  }
}

static int32_t sum_like(const kcall* c, int mode) {
  int64_t outer, dim, inner;
  TRY(read_odi(c, &outer, &dim, &inner));
  return libra_axis_reduce(c, mode, IN_F(0), c->out[0], outer, dim, inner);
}

int32_t k_sum_axis(const kcall* c) { return sum_like(c, 0); }
int32_t k_mean_axis(const kcall* c) { return sum_like(c, 1); }

int32_t k_max_axis(const kcall* c) {
  int64_t outer, dim, inner;
  TRY(read_odi(c, &outer, &dim, &inner));
  TRY(need_dim(c, outer, dim, inner));
  return libra_axis_reduce(c, 2, IN_F(0), c->out[0], outer, dim, inner);
}

int32_t k_argmax_axis(const kcall* c) {
  int64_t outer, dim, inner;
  TRY(read_odi(c, &outer, &dim, &inner));
  TRY(need_dim(c, outer, dim, inner));
  return libra_axis_reduce(c, 3, IN_F(0), c->out[0], outer, dim, inner);
}

__global__ void route_max_k(int64_t outer, int64_t dim, int64_t inner,
                            const int32_t* __restrict__ am, const float* __restrict__ gy,
                            float* __restrict__ gx) {
  GRID_LOOP(e, outer * dim * inner) {
    int64_t i = e % inner, j = (e / inner) % dim, o = e / (inner * dim);
    int64_t t = o * inner + i;
    gx[e] = am[t] == j ? gy[t] : 0.0f;
  }
}

int32_t k_max_axis_backward(const kcall* c) {
  int64_t outer, dim, inner;
  TRY(read_odi(c, &outer, &dim, &inner));
  TRY(need_dim(c, outer, dim, inner));
  if (outer * dim * inner == 0) return LIBRA_OK;
  tmpbuf am;
  TRY(tmp_alloc(c, (uint64_t)(outer * inner) * 4, &am));
  TRY(libra_axis_reduce(c, 3, IN_F(0), am.p, outer, dim, inner));
  route_max_k<<<grid_for(outer * dim * inner), TPB, 0, c->st>>>(outer, dim, inner,
                                                                am.as<int32_t>(), IN_F(1),
                                                                OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- softmax family: one block per row ---- */

__device__ inline float max_nan(float m, float x) { return x > m || x != x ? x : m; }

/* Row maximum with the CPU's rule (NaN sticks), 0 when the row is all -inf. */
__device__ inline float row_max(const float* x, int64_t cols, float* shf) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = max_nan(m, x[j]);
  shf[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shf[threadIdx.x] = max_nan(shf[threadIdx.x], shf[threadIdx.x + s]);
    __syncthreads();
  }
  m = shf[0];
  __syncthreads();
  return m == -INFINITY ? 0.0f : m;
}

template <int LOG>
__global__ void softmax_k(int64_t rows, int64_t cols, const float* __restrict__ X,
                          float* __restrict__ Y) {
  __shared__ double sh[256];
  __shared__ float shf[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    const float m = row_max(x, cols, shf);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(x[j] - m);
    s = block_sum(s, sh);
    if (LOG) {
      const float lse = (float)log(s);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = x[j] - m - lse;
    } else {
      const float inv = (float)(1.0 / s);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = expf(x[j] - m) * inv;
    }
  }
}

template <int LOG>
static int32_t softmax_like(const kcall* c) {
  int64_t rows, cols;
  TRY(read_rc(c, &rows, &cols));
  if (rows == 0 || cols == 0) return LIBRA_OK;
  softmax_k<LOG><<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(rows, cols, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_softmax(const kcall* c) { return softmax_like<0>(c); }
int32_t k_log_softmax(const kcall* c) { return softmax_like<1>(c); }

template <int LOG>
__global__ void softmax_bw_k(int64_t rows, int64_t cols, const float* __restrict__ Yv,
                             const float* __restrict__ G, float* __restrict__ GX) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* y = Yv + r * cols;
    const float* g = G + r * cols;
    float* gx = GX + r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      s += LOG ? (double)g[j] : (double)g[j] * y[j];
    }
    const float sf = (float)block_sum(s, sh);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      gx[j] = LOG ? g[j] - expf(y[j]) * sf : y[j] * (g[j] - sf);
    }
  }
}

template <int LOG>
static int32_t softmax_bw_like(const kcall* c) {
  int64_t rows, cols;
  TRY(read_rc(c, &rows, &cols));
  if (rows == 0 || cols == 0) return LIBRA_OK;
  softmax_bw_k<LOG><<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(rows, cols, IN_F(0),
                                                                      IN_F(1), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_softmax_backward(const kcall* c) { return softmax_bw_like<0>(c); }
int32_t k_log_softmax_backward(const kcall* c) { return softmax_bw_like<1>(c); }

/* ---- losses ---- */

/* Row log-sum-exp as native/cpu/loss_optim.c: max-subtracted, exp in double, -inf
 * when the whole row is -inf. Every thread of the block gets the value. */
__device__ inline double row_lse(const float* x, int64_t cols, float* shf, double* sh) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = max_nan(m, x[j]);
  shf[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shf[threadIdx.x] = max_nan(shf[threadIdx.x], shf[threadIdx.x + s]);
    __syncthreads();
  }
  m = shf[0];
  __syncthreads();
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += exp((double)x[j] - m);
  s = block_sum(s, sh);
  return m == -INFINITY ? -(double)INFINITY : (double)m + log(s);
}

/* Per-row loss logsumexp(x) - x[target], in double. */
__global__ void ce_rows_k(int64_t rows, int64_t classes, const float* __restrict__ X,
                          const int32_t* __restrict__ T, double* __restrict__ out) {
  __shared__ double sh[256];
  __shared__ float shf[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * classes;
    const double lse = row_lse(x, classes, shf, sh);
    if (threadIdx.x == 0) out[r] = lse - (double)x[T[r]];
  }
}

/* out = sum(v[0..n)) * scale, in one block of 256 threads (fixed order). */
__global__ void sum_scale_k(const double* __restrict__ v, int64_t n, double scale,
                            float* __restrict__ out) {
  __shared__ double sh[256];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) out[0] = (float)(s * scale);
}

static int32_t read_ce(const kcall* c, int64_t* rows, int64_t* classes) {
  if (pint(c, 0, 0, "rows", rows) || pint(c, 1, 0, "classes", classes)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  int64_t d[2] = {*rows, *classes}, n;
  if (pmul(c, d, 2, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  return check_indices(c, IN_I(1), *rows, *classes, "targets", "classes");
}

static const double NAN_D = __builtin_nan("");

int32_t k_cross_entropy(const kcall* c) {
  int64_t rows, classes;
  TRY(read_ce(c, &rows, &classes));
  if (rows == 0) {
    /* mean over no rows */
    sum_scale_k<<<1, 256, 0, c->st>>>(nullptr, 0, NAN_D, OUT_F(0));
    LAUNCHED(c);
    return LIBRA_OK;
  }
  tmpbuf t;
  TRY(tmp_alloc(c, (uint64_t)rows * 8, &t));
  ce_rows_k<<<grid_for(rows, 1), row_block(classes), 0, c->st>>>(rows, classes, IN_F(0), IN_I(1),
                                                                 t.as<double>());
  LAUNCHED(c);
  sum_scale_k<<<1, 256, 0, c->st>>>(t.as<double>(), rows, 1.0 / (double)rows, OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void ce_bw_k(int64_t rows, int64_t classes, const float* __restrict__ X,
                        const int32_t* __restrict__ T, const float* __restrict__ gloss,
                        float* __restrict__ GX) {
  __shared__ double sh[256];
  __shared__ float shf[256];
  const double g = (double)gloss[0] / (double)rows;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * classes;
    float* gx = GX + r * classes;
    const double lse = row_lse(x, classes, shf, sh);
    const int64_t t = T[r];
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
      const double p = exp((double)x[j] - lse);
      gx[j] = (float)((p - (j == t ? 1.0 : 0.0)) * g);
    }
  }
}

int32_t k_cross_entropy_backward(const kcall* c) {
  int64_t rows, classes;
  TRY(read_ce(c, &rows, &classes));
  if (rows == 0 || classes == 0) return LIBRA_OK;
  ce_bw_k<<<grid_for(rows, 1), row_block(classes), 0, c->st>>>(rows, classes, IN_F(0), IN_I(1),
                                                               IN_F(2), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

#define PARTIALS 1024

/* Stage 1 of mse: block b sums (a - b)^2 over a fixed grid-stride slice. */
__global__ void mse_partial_k(int64_t n, const float* __restrict__ a, const float* __restrict__ b,
                              double* __restrict__ part) {
  __shared__ double sh[TPB];
  double s = 0.0;
  GRID_LOOP(i, n) {
    const double d = (double)a[i] - (double)b[i];
    s += d * d;
  }
  s = block_sum(s, sh);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

int32_t k_mse(const kcall* c) {
  PINT(n, 0, 0, "n");
  if (n == 0) {
    sum_scale_k<<<1, 256, 0, c->st>>>(nullptr, 0, NAN_D, OUT_F(0));
    LAUNCHED(c);
    return LIBRA_OK;
  }
  int64_t g = (n + TPB - 1) / TPB;
  if (g > PARTIALS) g = PARTIALS;
  tmpbuf t;
  TRY(tmp_alloc(c, (uint64_t)g * 8, &t));
  mse_partial_k<<<(unsigned)g, TPB, 0, c->st>>>(n, IN_F(0), IN_F(1), t.as<double>());
  LAUNCHED(c);
  sum_scale_k<<<1, 256, 0, c->st>>>(t.as<double>(), g, 1.0 / (double)n, OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void mse_bw_k(int64_t n, const float* __restrict__ a, const float* __restrict__ b,
                         const float* __restrict__ gloss, float* __restrict__ ga) {
  const double scale = 2.0 * (double)gloss[0] / (double)n;
  GRID_LOOP(i, n) ga[i] = (float)(((double)a[i] - (double)b[i]) * scale);
}

int32_t k_mse_backward(const kcall* c) {
  PINT(n, 0, 0, "n");
  if (n == 0) return LIBRA_OK;
  mse_bw_k<<<grid_for(n), TPB, 0, c->st>>>(n, IN_F(0), IN_F(1), IN_F(2), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}
