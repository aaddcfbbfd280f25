/*
 * norm.cu - batch norm (statistics, apply, running update, backward), layer
 * norm and RMS norm with their gradients; formulas as native/cpu/norm.c, in
 * double. Per-channel and per-row statistics use one block each (fixed
 * per-thread order, then a fixed tree); per-column sums over rows use blocks of
 * 32 columns x 8 row groups with a fixed tree over the groups.
 */
#include "common.cuh"
#include "libra_kernel_params.h"

/* ---- batch norm ---- */

__global__ void bn_stats_k(int64_t N, int64_t C, int64_t HW, const float* __restrict__ X,
                           float* __restrict__ MEAN, float* __restrict__ VAR) {
  __shared__ double sh[TPB];
  const int64_t Mi = N * HW;
  const double M = (double)Mi;
  for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
    double s = 0.0;
    for (int64_t m = threadIdx.x; m < Mi; m += blockDim.x) {
      s += X[((m / HW) * C + ch) * HW + m % HW];
    }
    const double mean = block_sum(s, sh) / M;
    double v = 0.0;
    for (int64_t m = threadIdx.x; m < Mi; m += blockDim.x) {
      const double d = X[((m / HW) * C + ch) * HW + m % HW] - mean;
      v += d * d;
    }
    v = block_sum(v, sh);
    if (threadIdx.x == 0) {
      MEAN[ch] = (float)mean;
      VAR[ch] = (float)(v / M);
    }
  }
}

int32_t k_batch_norm_stats(const kcall* c) {
  int64_t N, C, HW;
  TRY(read_nchw(c, &N, &C, &HW));
  if (C == 0) return LIBRA_OK;
  bn_stats_k<<<grid_for(C, 1), TPB, 0, c->st>>>(N, C, HW, IN_F(0), OUT_F(0), OUT_F(1));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void bn_apply_k(int64_t n, int64_t C, int64_t HW, double eps, const float* __restrict__ X,
                           const float* __restrict__ MEAN, const float* __restrict__ VAR,
                           const float* __restrict__ G, const float* __restrict__ B,
                           float* __restrict__ Y) {
  GRID_LOOP(e, n) {
    const int64_t ch = (e / HW) % C;
    const float rstd = (float)(1.0 / sqrt((double)VAR[ch] + eps));
    const float scale = rstd * G[ch];
    Y[e] = (X[e] - MEAN[ch]) * scale + B[ch];
  }
}

int32_t k_batch_norm_apply(const kcall* c) {
  int64_t N, C, HW;
  double eps;
  TRY(read_nchw(c, &N, &C, &HW));
  TRY(read_eps(c, 3, &eps));
  const int64_t n = N * C * HW;
  if (n == 0) return LIBRA_OK;
  bn_apply_k<<<grid_for(n), TPB, 0, c->st>>>(n, C, HW, eps, IN_F(0), IN_F(1), IN_F(2), IN_F(3),
                                             IN_F(4), OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void bn_running_k(int64_t C, double momentum, double unbias,
                             const float* __restrict__ MEAN, const float* __restrict__ VAR,
                             float* __restrict__ RM, float* __restrict__ RV) {
  GRID_LOOP(ch, C) {
    RM[ch] = (float)((1.0 - momentum) * RM[ch] + momentum * MEAN[ch]);
    RV[ch] = (float)((1.0 - momentum) * RV[ch] + momentum * VAR[ch] * unbias);
  }
}

int32_t k_batch_norm_update_running(const kcall* c) {
  PINT(C, 0, 0, "C");
  PREAL(momentum, 1, "momentum");
  PREAL(count, 2, "count");
  if (C == 0) return LIBRA_OK;
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  bn_running_k<<<grid_for(C), TPB, 0, c->st>>>(C, momentum, unbias, IN_F(0), IN_F(1),
                                               (float*)c->in[2], (float*)c->in[3]);
  LAUNCHED(c);
  return LIBRA_OK;
}

/* Per channel: sg = sum gy, sgx = sum gy * xhat (written as gbeta, ggamma and kept in double). */
__global__ void bn_bw_sums_k(int64_t N, int64_t C, int64_t HW, double eps,
                             const float* __restrict__ X, const float* __restrict__ GY,
                             const float* __restrict__ MEAN, const float* __restrict__ VAR,
                             float* __restrict__ GG, float* __restrict__ GB,
                             double* __restrict__ sums) {
  __shared__ double sh[TPB];
  const int64_t Mi = N * HW;
  for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
    const double mean = MEAN[ch], rstd = 1.0 / sqrt((double)VAR[ch] + eps);
    double sg = 0.0, sgx = 0.0;
    for (int64_t m = threadIdx.x; m < Mi; m += blockDim.x) {
      const int64_t e = ((m / HW) * C + ch) * HW + m % HW;
      sg += GY[e];
      sgx += GY[e] * ((X[e] - mean) * rstd);
    }
    sg = block_sum(sg, sh);
    sgx = block_sum(sgx, sh);
    if (threadIdx.x == 0) {
      GB[ch] = (float)sg;
      GG[ch] = (float)sgx;
      sums[2 * ch] = sg;
      sums[2 * ch + 1] = sgx;
    }
  }
}

__global__ void bn_bw_gx_k(int64_t n, int64_t C, int64_t HW, double M, double eps,
                           const float* __restrict__ X, const float* __restrict__ GY,
                           const float* __restrict__ MEAN, const float* __restrict__ VAR,
                           const float* __restrict__ G, const double* __restrict__ sums,
                           float* __restrict__ GX) {
  GRID_LOOP(e, n) {
    const int64_t ch = (e / HW) % C;
    const double mean = MEAN[ch], rstd = 1.0 / sqrt((double)VAR[ch] + eps);
    const double k = G[ch] * rstd / M;
    const double xhat = (X[e] - mean) * rstd;
    GX[e] = (float)(k * (M * GY[e] - sums[2 * ch] - xhat * sums[2 * ch + 1]));
  }
}

int32_t k_batch_norm_backward(const kcall* c) {
  int64_t N, C, HW;
  double eps;
  TRY(read_nchw(c, &N, &C, &HW));
  TRY(read_eps(c, 3, &eps));
  if (C == 0) return LIBRA_OK;
  tmpbuf sums;
  TRY(tmp_alloc(c, (uint64_t)C * 16, &sums));
  bn_bw_sums_k<<<grid_for(C, 1), TPB, 0, c->st>>>(N, C, HW, eps, IN_F(0), IN_F(1), IN_F(2),
                                                  IN_F(3), OUT_F(1), OUT_F(2), sums.as<double>());
  LAUNCHED(c);
  const int64_t n = N * C * HW;
  if (n == 0) return LIBRA_OK;
  bn_bw_gx_k<<<grid_for(n), TPB, 0, c->st>>>(n, C, HW, (double)(N * HW), eps, IN_F(0), IN_F(1),
                                             IN_F(2), IN_F(3), IN_F(4), sums.as<double>(),
                                             OUT_F(0));
  LAUNCHED(c);
  return LIBRA_OK;
}

/* ---- layer norm and RMS norm ---- */

__global__ void layer_norm_k(int64_t rows, int64_t cols, double eps, const float* __restrict__ X,
                             const float* __restrict__ G, const float* __restrict__ B,
                             float* __restrict__ Y, float* __restrict__ MEAN,
                             float* __restrict__ RSTD) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += x[j];
    const double mean = block_sum(s, sh) / (double)cols;
    double v = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = x[j] - mean;
      v += d * d;
    }
    v = block_sum(v, sh);
    const double rstd = 1.0 / sqrt(v / (double)cols + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      y[j] = (float)((x[j] - mean) * rstd * G[j] + B[j]);
    }
    if (threadIdx.x == 0) {
      MEAN[r] = (float)mean;
      RSTD[r] = (float)rstd;
    }
  }
}

int32_t k_layer_norm(const kcall* c) {
  int64_t rows, cols;
  double eps;
  TRY(read_rc(c, &rows, &cols));
  TRY(read_eps(c, 2, &eps));
  if (rows == 0) return LIBRA_OK;
  layer_norm_k<<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(
      rows, cols, eps, IN_F(0), IN_F(1), IN_F(2), OUT_F(0), OUT_F(1), OUT_F(2));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void layer_norm_bw_rows_k(int64_t rows, int64_t cols, const float* __restrict__ X,
                                     const float* __restrict__ GY, const float* __restrict__ MEAN,
                                     const float* __restrict__ RSTD, const float* __restrict__ G,
                                     float* __restrict__ GX) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * cols;
    const float* gy = GY + r * cols;
    float* gx = GX + r * cols;
    const double mean = MEAN[r], rstd = RSTD[r];
    double a = 0.0, b = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double gh = (double)gy[j] * G[j];
      a += gh;
      b += gh * ((x[j] - mean) * rstd);
    }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    const double inv = 1.0 / (double)cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xhat = (x[j] - mean) * rstd;
      const double gh = (double)gy[j] * G[j];
      gx[j] = (float)(rstd * (gh - a * inv - xhat * b * inv));
    }
  }
}

/* Column sums over rows: ggamma[j] = sum_r gy * xhat (layer: (x - mean) rstd; rms: x rstd),
 * gbeta[j] = sum_r gy (layer norm only). */
template <int LAYER>
__global__ void norm_cols_k(int64_t rows, int64_t cols, const float* __restrict__ X,
                            const float* __restrict__ GY, const float* __restrict__ MEAN,
                            const float* __restrict__ RSTD, float* __restrict__ GG,
                            float* __restrict__ GB) {
  __shared__ double sg[8][32], sb[8][32];
  const int lane = threadIdx.x, grp = threadIdx.y;
  const int64_t tiles = (cols + 31) / 32;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t j = t * 32 + lane;
    double g = 0.0, b = 0.0;
    if (j < cols) {
      for (int64_t r = grp; r < rows; r += 8) {
        const float x = X[r * cols + j], gy = GY[r * cols + j];
        const double rstd = RSTD[r];
        if (LAYER) {
          b += gy;
          g += gy * ((x - (double)MEAN[r]) * rstd);
        } else {
          g += gy * (x * rstd);
        }
      }
    }
    sg[grp][lane] = g;
    sb[grp][lane] = b;
    __syncthreads();
    for (int s = 4; s > 0; s >>= 1) {
      if (grp < s) {
        sg[grp][lane] += sg[grp + s][lane];
        sb[grp][lane] += sb[grp + s][lane];
      }
      __syncthreads();
    }
    if (grp == 0 && j < cols) {
      GG[j] = (float)sg[0][lane];
      if (LAYER) GB[j] = (float)sb[0][lane];
    }
    __syncthreads();
  }
}

int32_t k_layer_norm_backward(const kcall* c) {
  int64_t rows, cols;
  TRY(read_rc(c, &rows, &cols));
  if (cols == 0) return LIBRA_OK;
  if (rows > 0) {
    layer_norm_bw_rows_k<<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(
        rows, cols, IN_F(0), IN_F(1), IN_F(2), IN_F(3), IN_F(4), OUT_F(0));
    LAUNCHED(c);
  }
  norm_cols_k<1><<<grid_for((cols + 31) / 32, 1), dim3(32, 8), 0, c->st>>>(
      rows, cols, IN_F(0), IN_F(1), IN_F(2), IN_F(3), OUT_F(1), OUT_F(2));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void rms_norm_k(int64_t rows, int64_t cols, double eps, const float* __restrict__ X,
                           const float* __restrict__ G, float* __restrict__ Y,
                           float* __restrict__ RSTD) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * cols;
    float* y = Y + r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += (double)x[j] * x[j];
    s = block_sum(s, sh);
    const double rstd = 1.0 / sqrt(s / (double)cols + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[j] = (float)(x[j] * rstd * G[j]);
    if (threadIdx.x == 0) RSTD[r] = (float)rstd;
  }
}

int32_t k_rms_norm(const kcall* c) {
  int64_t rows, cols;
  double eps;
  TRY(read_rc(c, &rows, &cols));
  TRY(read_eps(c, 2, &eps));
  if (rows == 0) return LIBRA_OK;
  rms_norm_k<<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(rows, cols, eps, IN_F(0), IN_F(1),
                                                               OUT_F(0), OUT_F(1));
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void rms_norm_bw_rows_k(int64_t rows, int64_t cols, const float* __restrict__ X,
                                   const float* __restrict__ GY, const float* __restrict__ RSTD,
                                   const float* __restrict__ G, float* __restrict__ GX) {
  __shared__ double sh[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = X + r * cols;
    const float* gy = GY + r * cols;
    float* gx = GX + r * cols;
    const double rstd = RSTD[r];
    double d = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) d += (double)gy[j] * G[j] * x[j];
    d = block_sum(d, sh);
    const double k = rstd * rstd * rstd * d / (double)cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      gx[j] = (float)(rstd * G[j] * gy[j] - x[j] * k);
    }
  }
}

int32_t k_rms_norm_backward(const kcall* c) {
  int64_t rows, cols;
  TRY(read_rc(c, &rows, &cols));
  if (cols == 0) return LIBRA_OK;
  if (rows > 0) {
    rms_norm_bw_rows_k<<<grid_for(rows, 1), row_block(cols), 0, c->st>>>(
        rows, cols, IN_F(0), IN_F(1), IN_F(2), IN_F(3), OUT_F(0));
    LAUNCHED(c);
  }
  norm_cols_k<0><<<grid_for((cols + 31) / 32, 1), dim3(32, 8), 0, c->st>>>(
      rows, cols, IN_F(0), IN_F(1), nullptr, IN_F(2), OUT_F(1), nullptr);
  LAUNCHED(c);
  return LIBRA_OK;
}
