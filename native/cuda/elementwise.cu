/*
 * elementwise.cu - broadcasting binary ops, where, expand, sum_to, unary ops
 * and their gradients, scalar variants, fills, casts, add_inplace and the fused LSTM cell.
 *
 * Semantics follow native/cpu/elementwise.c expression for expression (float
 * arithmetic, scalars rounded to float, the same NaN and saturation rules).
 * Broadcast views are collapsed the same way (size-1 dims dropped, contiguous
 * neighbours merged) so most calls index with one stride per operand.
 */
#include <string.h>

#include "common.cuh"
#include "libra_broadcast_params.h"
#include "libra_kernel_params.h"

/* ---- broadcast views ---- */

/* Input offsets of output element i. */
template <int NIN>
__device__ inline void bview_offsets(const bview& v, int64_t i, int64_t* off) {
  if (v.nd == 1) {
#pragma unroll
    for (int j = 0; j < NIN; j++) off[j] = i * v.st[j + 1][0];
    return;
  }
#pragma unroll
  for (int j = 0; j < NIN; j++) off[j] = 0;
  int64_t r = i;
  for (int d = v.nd - 1; d >= 0; d--) {
    int64_t q = r % v.shape[d];
    r /= v.shape[d];
#pragma unroll
    for (int j = 0; j < NIN; j++) off[j] += q * v.st[j + 1][d];
  }
}

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE };

template <int OP>
__device__ inline float binop(float a, float b) {
  if (OP == B_ADD) return a + b;
  if (OP == B_SUB) return a - b;
  if (OP == B_MUL) return a * b;
  if (OP == B_DIV) return a / b;
  if (OP == B_EQ) return a == b ? 1.0f : 0.0f;
  if (OP == B_NE) return a != b ? 1.0f : 0.0f;
  if (OP == B_LT) return a < b ? 1.0f : 0.0f;
  if (OP == B_LE) return a <= b ? 1.0f : 0.0f;
  if (OP == B_GT) return a > b ? 1.0f : 0.0f;
  return a >= b ? 1.0f : 0.0f;
}

template <int OP>
__global__ void binary_k(bview v, const float* __restrict__ a, const float* __restrict__ b,
                         float* __restrict__ y) {
  GRID_LOOP(i, v.n) {
    int64_t off[2];
    bview_offsets<2>(v, i, off);
    y[i] = binop<OP>(a[off[0]], b[off[1]]);
  }
}

template <int OP>
static int32_t binary(const kcall* c) {
  bview v;
  int32_t s = bview_parse(c, 2, &v);
  if (s != LIBRA_OK || v.n == 0) return s;
  binary_k<OP><<<grid_for(v.n), TPB, 0, c->st>>>(v, IN_F(0), IN_F(1), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_add(const kcall* c) { return binary<B_ADD>(c); }
int32_t k_sub(const kcall* c) { return binary<B_SUB>(c); }
int32_t k_mul(const kcall* c) { return binary<B_MUL>(c); }
int32_t k_div(const kcall* c) { return binary<B_DIV>(c); }
int32_t k_eq(const kcall* c) { return binary<B_EQ>(c); }
int32_t k_ne(const kcall* c) { return binary<B_NE>(c); }
int32_t k_lt(const kcall* c) { return binary<B_LT>(c); }
int32_t k_le(const kcall* c) { return binary<B_LE>(c); }
int32_t k_gt(const kcall* c) { return binary<B_GT>(c); }
int32_t k_ge(const kcall* c) { return binary<B_GE>(c); }

__global__ void where_k(bview v, const float* __restrict__ cond, const float* __restrict__ a,
                        const float* __restrict__ b, float* __restrict__ y) {
  GRID_LOOP(i, v.n) {
    int64_t off[3];
    bview_offsets<3>(v, i, off);
    y[i] = cond[off[0]] != 0.0f ? a[off[1]] : b[off[2]];
  }
}

int32_t k_where(const kcall* c) {
  bview v;
  int32_t s = bview_parse(c, 3, &v);
  if (s != LIBRA_OK || v.n == 0) return s;
  where_k<<<grid_for(v.n), TPB, 0, c->st>>>(v, IN_F(0), IN_F(1), IN_F(2), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void expand_k(bview v, const uint32_t* __restrict__ x, uint32_t* __restrict__ y) {
  GRID_LOOP(i, v.n) {
    int64_t off[1];
    bview_offsets<1>(v, i, off);
    y[i] = x[off[0]];
  }
}

int32_t k_expand(const kcall* c) {
  bview v;
  int32_t s = bview_parse(c, 1, &v);
  if (s != LIBRA_OK || v.n == 0) return s;
  expand_k<<<grid_for(v.n), TPB, 0, c->st>>>(v, (const uint32_t*)c->in[0], (uint32_t*)c->out[0]);
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- sum_to ---- */

struct redview {
  int nk, nr;
  int64_t ksh[MAX_DIMS_C], kst[MAX_DIMS_C], rsh[MAX_DIMS_C], rst[MAX_DIMS_C];
  int64_t nred, ny;
};

/* One block per output element: threads stride over the reduced index (row-major),
 * then a fixed tree; double accumulation. */
__global__ void sum_to_block_k(redview v, const float* __restrict__ x, float* __restrict__ y) {
  __shared__ double sh[TPB];
  for (int64_t o = blockIdx.x; o < v.ny; o += gridDim.x) {
    int64_t base = 0, r = o;
    for (int d = v.nk - 1; d >= 0; d--) {
      base += (r % v.ksh[d]) * v.kst[d];
      r /= v.ksh[d];
    }
    double s = 0.0;
    for (int64_t t = threadIdx.x; t < v.nred; t += blockDim.x) {
      int64_t off = base, q = t;
      for (int d = v.nr - 1; d >= 0; d--) {
        off += (q % v.rsh[d]) * v.rst[d];
        q /= v.rsh[d];
      }
      s += x[off];
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) y[o] = (float)s;
  }
}

int32_t k_sum_to(const kcall* c) {
  sumto_params q;
  TRY(sum_to_parse(c, &q));
  const int ndim = q.nd;
  const int64_t *xs = q.xs, *ys = q.ys, *xstr = q.xstr, nx = q.nx, ny = q.ny;
  if (ny == 0) return LIBRA_OK;
  float* Y = OUT_F(0);
  if (nx == 0) {
    CUDA_TRY(c, cudaMemsetAsync(Y, 0, (size_t)ny * 4, c->st));
    return LIBRA_OK;
  }
  if (nx == ny) {
    CUDA_TRY(c, cudaMemcpyAsync(Y, c->in[0], (size_t)ny * 4, cudaMemcpyDeviceToDevice, c->st));
    return LIBRA_OK;
  }
  /* Runs of kept (K) and reduced (R) dims over x's dims of size > 1. x is
   * contiguous, so [K...] R [K...] is exactly an [outer, dim, inner] reduction. */
  int runs[2 * MAX_DIMS_C];
  int64_t run_size[2 * MAX_DIMS_C];
  int nruns = 0;
  redview v;
  v.nk = v.nr = 0;
  v.nred = 1;
  v.ny = ny;
  for (int i = 0; i < ndim; i++) {
    if (xs[i] == 1) continue;
    int red = ys[i] != xs[i];
    if (red) {
      v.rsh[v.nr] = xs[i];
      v.rst[v.nr++] = xstr[i];
      v.nred *= xs[i];
    } else {
      v.ksh[v.nk] = ys[i];
      v.kst[v.nk++] = xstr[i];
    }
    if (nruns > 0 && runs[nruns - 1] == red) {
      run_size[nruns - 1] *= xs[i];
    } else {
      runs[nruns] = red;
      run_size[nruns++] = xs[i];
    }
  }
  int first_r = -1, n_r = 0;
  for (int i = 0; i < nruns; i++) {
    if (runs[i]) {
      n_r++;
      if (first_r < 0) first_r = i;
    }
  }
  if (n_r == 1) {
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < first_r; i++) outer *= run_size[i];
    for (int i = first_r + 1; i < nruns; i++) inner *= run_size[i];
    return libra_axis_reduce(c, 0, IN_F(0), Y, outer, run_size[first_r], inner);
  }
  if (v.nk == 0) {
    v.ksh[0] = 1;
    v.kst[0] = 0;
    v.nk = 1;
  }
  sum_to_block_k<<<grid_for(ny, 1), TPB, 0, c->st>>>(v, IN_F(0), Y);
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- unary ---- */

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_C 0.044715f
#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

__device__ inline float gelu_tanh_f(float x) {
  return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + GELU_C * x * x * x)));
}
__device__ inline float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ inline float gelu_tanh_grad(float x) {
  const float u = SQRT_2_OVER_PI * (x + GELU_C * x * x * x);
  const float t = tanhf(u);
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x * x);
}
__device__ inline float gelu_erf_grad(float x) {
  return 0.5f * (1.0f + erff(x * INV_SQRT2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}
__device__ inline float silu_grad(float x) {
  const float s = sigmoid_f(x);
  return s * (1.0f + x * (1.0f - s));
}

enum {
  U_NEG, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_RELU, U_GELU_TANH, U_GELU_ERF, U_SILU, U_SIGMOID, U_TANH
};

template <int OP>
__device__ inline float unop(float x) {
  if (OP == U_NEG) return -x;
  if (OP == U_EXP) return expf(x);
  if (OP == U_LOG) return logf(x);
  if (OP == U_SQRT) return sqrtf(x);
  if (OP == U_RSQRT) return 1.0f / sqrtf(x);
  if (OP == U_RELU) return x > 0.0f ? x : 0.0f;
  if (OP == U_GELU_TANH) return gelu_tanh_f(x);
  if (OP == U_GELU_ERF) return 0.5f * x * (1.0f + erff(x * INV_SQRT2));
  if (OP == U_SILU) return x * sigmoid_f(x);
  if (OP == U_SIGMOID) return sigmoid_f(x);
  return tanhf(x);
}

template <int OP>
__global__ void unary_k(int64_t n, const float* __restrict__ x, float* __restrict__ y) {
  GRID_LOOP(i, n) y[i] = unop<OP>(x[i]);
}

static int32_t read_n(const kcall* c, int64_t* n) {
  return pint(c, 0, 0, "n", n) ? LIBRA_ERR_INVALID_ARGUMENT : LIBRA_OK;
}

template <int OP>
static int32_t unary(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  unary_k<OP><<<grid_for(n), TPB, 0, c->st>>>(n, IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_neg(const kcall* c) { return unary<U_NEG>(c); }
int32_t k_exp(const kcall* c) { return unary<U_EXP>(c); }
int32_t k_log(const kcall* c) { return unary<U_LOG>(c); }
int32_t k_sqrt(const kcall* c) { return unary<U_SQRT>(c); }
int32_t k_rsqrt(const kcall* c) { return unary<U_RSQRT>(c); }
int32_t k_relu(const kcall* c) { return unary<U_RELU>(c); }
int32_t k_gelu_tanh(const kcall* c) { return unary<U_GELU_TANH>(c); }
int32_t k_gelu_erf(const kcall* c) { return unary<U_GELU_ERF>(c); }
int32_t k_silu(const kcall* c) { return unary<U_SILU>(c); }
int32_t k_sigmoid(const kcall* c) { return unary<U_SIGMOID>(c); }
int32_t k_tanh(const kcall* c) { return unary<U_TANH>(c); }

int32_t k_copy(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n > 0) {
    CUDA_TRY(c, cudaMemcpyAsync(c->out[0], c->in[0], (size_t)n * 4, cudaMemcpyDeviceToDevice,
                                c->st));
  }
  return LIBRA_OK;
}

__global__ void cast_f32_i32_k(int64_t n, const float* __restrict__ x, int32_t* __restrict__ y) {
  GRID_LOOP(i, n) {
    float v = x[i];
    int32_t r;
    if (v != v) r = 0;
    else if (v >= 2147483647.0f) r = INT32_MAX;
    else if (v <= -2147483648.0f) r = INT32_MIN;
    else r = (int32_t)v;
    y[i] = r;
  }
}

int32_t k_cast_f32_i32(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  cast_f32_i32_k<<<grid_for(n), TPB, 0, c->st>>>(n, IN_F(0), OUT_I(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void cast_i32_f32_k(int64_t n, const int32_t* __restrict__ x, float* __restrict__ y) {
  GRID_LOOP(i, n) y[i] = (float)x[i];
}

int32_t k_cast_i32_f32(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  cast_i32_f32_k<<<grid_for(n), TPB, 0, c->st>>>(n, IN_I(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

enum { G_RELU, G_GELU_TANH, G_GELU_ERF, G_SILU, G_SIGMOID, G_TANH };

template <int OP>
__device__ inline float gradop(float x, float g) {
  if (OP == G_RELU) return x > 0.0f ? g : 0.0f;
  if (OP == G_GELU_TANH) return g * gelu_tanh_grad(x);
  if (OP == G_GELU_ERF) return g * gelu_erf_grad(x);
  if (OP == G_SILU) return g * silu_grad(x);
  if (OP == G_SIGMOID) return g * x * (1.0f - x);
  return g * (1.0f - x * x);
}

template <int OP>
__global__ void unary_bw_k(int64_t n, const float* __restrict__ s, const float* __restrict__ g,
                           float* __restrict__ y) {
  GRID_LOOP(i, n) y[i] = gradop<OP>(s[i], g[i]);
}

template <int OP>
static int32_t unary_bw(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  unary_bw_k<OP><<<grid_for(n), TPB, 0, c->st>>>(n, IN_F(0), IN_F(1), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_relu_backward(const kcall* c) { return unary_bw<G_RELU>(c); }
int32_t k_gelu_tanh_backward(const kcall* c) { return unary_bw<G_GELU_TANH>(c); }
int32_t k_gelu_erf_backward(const kcall* c) { return unary_bw<G_GELU_ERF>(c); }
int32_t k_silu_backward(const kcall* c) { return unary_bw<G_SILU>(c); }
int32_t k_sigmoid_backward(const kcall* c) { return unary_bw<G_SIGMOID>(c); }
int32_t k_tanh_backward(const kcall* c) { return unary_bw<G_TANH>(c); }

/* ---- scalar variants ---- */

enum { S_ADD, S_MUL, S_RSUB, S_RDIV, S_POW, S_EQ, S_NE, S_LT, S_LE, S_GT, S_GE };

template <int OP>
__device__ inline float scalop(float x, float s) {
  if (OP == S_ADD) return x + s;
  if (OP == S_MUL) return x * s;
  if (OP == S_RSUB) return s - x;
  if (OP == S_RDIV) return s / x;
  if (OP == S_POW) return powf(x, s);
  if (OP == S_EQ) return x == s ? 1.0f : 0.0f;
  if (OP == S_NE) return x != s ? 1.0f : 0.0f;
  if (OP == S_LT) return x < s ? 1.0f : 0.0f;
  if (OP == S_LE) return x <= s ? 1.0f : 0.0f;
  if (OP == S_GT) return x > s ? 1.0f : 0.0f;
  return x >= s ? 1.0f : 0.0f;
}

template <int OP>
__global__ void scalar_k(int64_t n, float s, const float* __restrict__ x, float* __restrict__ y) {
  GRID_LOOP(i, n) y[i] = scalop<OP>(x[i], s);
}

template <int OP>
static int32_t scalar(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  scalar_k<OP><<<grid_for(n), TPB, 0, c->st>>>(n, (float)c->p[1], IN_F(0), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_add_scalar(const kcall* c) { return scalar<S_ADD>(c); }
int32_t k_mul_scalar(const kcall* c) { return scalar<S_MUL>(c); }
int32_t k_rsub_scalar(const kcall* c) { return scalar<S_RSUB>(c); }
int32_t k_rdiv_scalar(const kcall* c) { return scalar<S_RDIV>(c); }
int32_t k_pow_scalar(const kcall* c) { return scalar<S_POW>(c); }
int32_t k_eq_scalar(const kcall* c) { return scalar<S_EQ>(c); }
int32_t k_ne_scalar(const kcall* c) { return scalar<S_NE>(c); }
int32_t k_lt_scalar(const kcall* c) { return scalar<S_LT>(c); }
int32_t k_le_scalar(const kcall* c) { return scalar<S_LE>(c); }
int32_t k_gt_scalar(const kcall* c) { return scalar<S_GT>(c); }
int32_t k_ge_scalar(const kcall* c) { return scalar<S_GE>(c); }

__global__ void fill_k(int64_t n, uint32_t bits, uint32_t* __restrict__ y) {
  GRID_LOOP(i, n) y[i] = bits;
}

static int32_t fill_bits(const kcall* c, int64_t n, uint32_t bits) {
  if (n == 0) return LIBRA_OK;
  fill_k<<<grid_for(n), TPB, 0, c->st>>>(n, bits, (uint32_t*)c->out[0]);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_fill(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  float v = (float)c->p[1];
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return fill_bits(c, n, bits);
}

int32_t k_fill_i32(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  const double d = c->p[1];
  if (d != floor(d) || d < -2147483648.0 || d > 2147483647.0) {
    return kfail(c, "value (param 1) must be an integer in the i32 range, got %.17g", d);
  }
  int32_t v = (int32_t)d;
  uint32_t bits;
  memcpy(&bits, &v, 4);
  return fill_bits(c, n, bits);
}

__global__ void add_inplace_k(int64_t n, float* __restrict__ acc, const float* __restrict__ x) {
  GRID_LOOP(i, n) acc[i] += x[i];
}

int32_t k_add_inplace(const kcall* c) {
  int64_t n;
  TRY(read_n(c, &n));
  if (n == 0) return LIBRA_OK;
  add_inplace_k<<<grid_for(n), TPB, 0, c->st>>>(n, (float*)c->in[0], IN_F(1));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- fused LSTM cell (native/cpu/elementwise.c k_lstm_cell, one thread an element of [B, H]) ---- */

__global__ void lstm_cell_k(int64_t B, int64_t H, const float* __restrict__ G,
                            const float* __restrict__ S, float* __restrict__ N) {
  GRID_LOOP(e, B * H) {
    const int64_t r = e / H, j = e % H;
    const float* g = G + r * 4 * H;
    const float i = sigmoid_f(g[j]), f = sigmoid_f(g[H + j]);
    const float gg = tanhf(g[2 * H + j]), o = sigmoid_f(g[3 * H + j]);
    const float cv = f * S[r * 2 * H + H + j] + i * gg;
    N[r * 2 * H + H + j] = cv;
    N[r * 2 * H + j] = o * tanhf(cv);
  }
}

int32_t k_lstm_cell(const kcall* c) {
  int64_t B, H;
  TRY(read_bh(c, &B, &H));
  if (B * H == 0) return LIBRA_OK;
  lstm_cell_k<<<grid_for(B * H), TPB, 0, c->st>>>(B, H, IN_F(0), IN_F(1), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* E1's rows are e1s apart (H for lstm_cell_backward's extra input, steps H for a step of gy). */
__global__ void lstm_cell_backward_k(int64_t B, int64_t H, int64_t e1s, const float* __restrict__ G,
                                     const float* __restrict__ S, const float* __restrict__ N,
                                     const float* __restrict__ D, const float* __restrict__ E1,
                                     const float* __restrict__ E2, float* __restrict__ GG,
                                     float* __restrict__ GS) {
  GRID_LOOP(e, B * H) {
    const int64_t r = e / H, j = e % H;
    const float* g = G + r * 4 * H;
    const float i = sigmoid_f(g[j]), f = sigmoid_f(g[H + j]);
    const float t = tanhf(g[2 * H + j]), o = sigmoid_f(g[3 * H + j]);
    const float tc = tanhf(N[r * 2 * H + H + j]);
    float dh = D[r * 2 * H + j];
    if (E1) dh += E1[r * e1s * H + j];
    if (E2) dh += E2[e];
    const float d = D[r * 2 * H + H + j] + dh * o * (1.0f - tc * tc);
    float* gg = GG + r * 4 * H;
    gg[j] = d * t * i * (1.0f - i);
    gg[H + j] = d * S[r * 2 * H + H + j] * f * (1.0f - f);
    gg[2 * H + j] = d * i * (1.0f - t * t);
    gg[3 * H + j] = dh * tc * o * (1.0f - o);
    GS[r * 2 * H + j] = 0.0f;
    GS[r * 2 * H + H + j] = d * f;
  }
}

int32_t k_lstm_cell_backward(const kcall* c) {
  int64_t B = 0, H = 0, extra = 0;
  TRY(lstm_backward_parse(c, &B, &H, &extra));
  if (B * H == 0) return LIBRA_OK;
  lstm_cell_backward_k<<<grid_for(B * H), TPB, 0, c->st>>>(
      B, H, 1, IN_F(0), IN_F(1), IN_F(2), IN_F(3), extra > 0 ? IN_F(4) : nullptr,
      extra > 1 ? IN_F(5) : nullptr, OUT_F(0), OUT_F(1));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* One step of an LSTM layer (native/cpu/elementwise.c k_lstm_step), one thread an element of
 * [B, H]: its four gates from xw[r, t, :] (+ h W_hh^T, already in G when rec), written out,
 * then the cell. */
__global__ void lstm_step_k(int64_t B, int64_t T, int64_t H, int64_t t, int rec,
                            const float* __restrict__ XW, const float* __restrict__ S,
                            float* __restrict__ N, float* __restrict__ HO, float* G) {
  GRID_LOOP(e, B * H) {
    const int64_t r = e / H, j = e % H;
    const float* x = XW + (r * T + t) * 4 * H;
    float* g = G + r * 4 * H;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      // each thread reads and writes its own four gates
      v[k] = rec ? x[k * H + j] + g[k * H + j] : x[k * H + j];
      g[k * H + j] = v[k];
    }
    const float i = sigmoid_f(v[0]), f = sigmoid_f(v[1]);
    const float gg = tanhf(v[2]), o = sigmoid_f(v[3]);
    const float cv = f * S[r * 2 * H + H + j] + i * gg;
    const float hv = o * tanhf(cv);
    N[r * 2 * H + H + j] = cv;
    N[r * 2 * H + j] = hv;
    HO[e] = hv;
  }
}

int32_t k_lstm_step(const kcall* c) {
  lstm_step_params q = {0, 0, 0, 0, 0};
  TRY(lstm_step_parse(c, &q));
  const int64_t B = q.B, T = q.T, H = q.H, t = q.t, rec = q.rec;
  if (B * H == 0) return LIBRA_OK;
  // h W_hh^T into the gates (as the matmul kernel computes it), then the cell
  if (rec) TRY(libra_sgemm(c, 0, 1, B, 4 * H, H, 1.0f, IN_F(2), 0, IN_F(3), 0, 0.0f, OUT_F(2), 0, 1));
  lstm_step_k<<<grid_for(B * H), TPB, 0, c->st>>>(B, T, H, t, (int)rec, IN_F(0), IN_F(1), OUT_F(0),
                                                  OUT_F(1), OUT_F(2));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* The gradient of one step (native/cpu/elementwise.c k_lstm_step_backward): the cell's, with dh
 * gnext's h half + gy[r, t, :] (+ dhnext), then dhprev = ggates W_hh. */
int32_t k_lstm_step_backward(const kcall* c) {
  lstm_step_params q = {0, 0, 0, 0, 0};
  TRY(lstm_step_backward_parse(c, &q));
  const int64_t B = q.B, T = q.T, H = q.H, t = q.t;
  if (B * H == 0) return LIBRA_OK;
  lstm_cell_backward_k<<<grid_for(B * H), TPB, 0, c->st>>>(
      B, H, T, IN_F(0), IN_F(1), IN_F(2), IN_F(3), IN_F(4) + t * H, t < T - 1 ? IN_F(6) : nullptr,
      OUT_F(0), OUT_F(1));
  LAUNCHED(c);
  if (q.rec) TRY(libra_sgemm(c, 0, 0, B, H, 4 * H, 1.0f, OUT_F(0), 0, IN_F(5), 0, 0.0f, OUT_F(2), 0, 1));
  return LIBRA_OK;
}
