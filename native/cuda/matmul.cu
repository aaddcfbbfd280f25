/*
 * matmul.cu - single-precision GEMM: cuBLAS loaded at run time (dlopen, so the
 * build needs no cuBLAS headers or libraries) or a tiled shared-memory kernel,
 * and the matmul kernel of the table.
 *
 * cuBLAS is column-major; a row-major C = op(A) op(B) is computed as the
 * column-major C^T = op(B)^T op(A)^T, i.e. by swapping the operands.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

#include "common.cuh"
#include "libra_kernel_params.h"

/* ---- cuBLAS, declared here (no headers on the build machine) ---- */

typedef void* cublas_handle;
typedef int (*cublas_create_fn)(cublas_handle*);
typedef int (*cublas_set_stream_fn)(cublas_handle, cudaStream_t);
typedef int (*cublas_sgemm_sb_fn)(cublas_handle, int transa, int transb, int m, int n, int k,
                                  const float* alpha, const float* a, int lda, long long sa,
                                  const float* b, int ldb, long long sb, const float* beta,
                                  float* cm, int ldc, long long sc, int batch);
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1, CUBLAS_STATUS_SUCCESS_ = 0 };

static cublas_handle blas_handle = nullptr;
static cublas_set_stream_fn blas_set_stream = nullptr;
static cublas_sgemm_sb_fn blas_sgemm = nullptr;
static std::mutex blas_mu; /* a handle carries one stream: calls are serialized */

void libra_load_cublas(void) {
  const char* off = getenv("LIBRA_NO_CUBLAS");
  if (off && strcmp(off, "1") == 0) return;
  const char* names[] = {getenv("LIBRA_CUBLAS_PATH"), "libcublas.so.13", "libcublas.so.12",
                         "libcublas.so"};
  for (const char* name : names) {
    if (!name || !*name) continue;
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    cublas_create_fn create = (cublas_create_fn)dlsym(lib, "cublasCreate_v2");
    cublas_set_stream_fn set_stream = (cublas_set_stream_fn)dlsym(lib, "cublasSetStream_v2");
    cublas_sgemm_sb_fn sgemm = (cublas_sgemm_sb_fn)dlsym(lib, "cublasSgemmStridedBatched");
    cublas_handle h = nullptr;
    if (create && set_stream && sgemm && create(&h) == CUBLAS_STATUS_SUCCESS_ && h) {
      blas_handle = h;
      blas_set_stream = set_stream;
      blas_sgemm = sgemm;
      return;
    }
    dlclose(lib);
  }
  cudaGetLastError();
}

int libra_have_cublas(void) { return blas_handle != nullptr; }

/* ---- tiled fallback ---- */

#define BM 64
#define BN 64
#define BK 16

/*
 * One 64x64 tile of C per block of 256 threads, each thread a 4x4 sub-tile;
 * k advances in steps of 16 through shared memory. Every output sums its k
 * products in increasing k with fmaf: deterministic.
 */
template <int TA, int TB>
__global__ void __launch_bounds__(256) sgemm_tiled(int64_t m, int64_t n, int64_t k, float alpha,
                                                   const float* __restrict__ a, int64_t sa,
                                                   const float* __restrict__ b, int64_t sb,
                                                   float beta, float* __restrict__ cm, int64_t sc,
                                                   int64_t batch0) {
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const int64_t z = batch0 + blockIdx.z;
  a += z * sa;
  b += z * sb;
  cm += z * sc;
  const int64_t row0 = (int64_t)blockIdx.y * BM, col0 = (int64_t)blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += BK) {
    /* A tile: op(A)[row0 + i][k0 + kk] for i < 64, kk < 16; 4 loads per thread. */
    for (int l = 0; l < 4; l++) {
      int e = tid + l * 256;
      int i, kk;
      if (TA) { /* stored [k, m]: consecutive threads walk i (contiguous) */
        i = e % BM;
        kk = e / BM;
      } else { /* stored [m, k]: consecutive threads walk kk */
        kk = e % BK;
        i = e / BK;
      }
      int64_t gi = row0 + i, gk = k0 + kk;
      float v = 0.0f;
      if (gi < m && gk < k) v = TA ? a[gk * m + gi] : a[gi * k + gk];
      As[kk][i] = v;
    }
    /* B tile: op(B)[k0 + kk][col0 + j] */
    for (int l = 0; l < 4; l++) {
      int e = tid + l * 256;
      int j, kk;
      if (TB) { /* stored [n, k]: walk kk */
        kk = e % BK;
        j = e / BK;
      } else { /* stored [k, n]: walk j */
        j = e % BN;
        kk = e / BN;
      }
      int64_t gj = col0 + j, gk = k0 + kk;
      float v = 0.0f;
      if (gj < n && gk < k) v = TB ? b[gj * k + gk] : b[gk * n + gj];
      Bs[kk][j] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float av[4], bv[4];
#pragma unroll
      for (int r = 0; r < 4; r++) av[r] = As[kk][ty + 16 * r];
#pragma unroll
      for (int s = 0; s < 4; s++) bv[s] = Bs[kk][tx + 16 * s];
#pragma unroll
      for (int r = 0; r < 4; r++)
#pragma unroll
        for (int s = 0; s < 4; s++) acc[r][s] = fmaf(av[r], bv[s], acc[r][s]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; r++) {
    int64_t gi = row0 + ty + 16 * r;
    if (gi >= m) continue;
#pragma unroll
    for (int s = 0; s < 4; s++) {
      int64_t gj = col0 + tx + 16 * s;
      if (gj >= n) continue;
      float v = alpha * acc[r][s];
      if (beta != 0.0f) v += beta * cm[gi * n + gj];
      cm[gi * n + gj] = v;
    }
  }
}

__global__ void scale_matrices(float* cm, int64_t mn, int64_t sc, int64_t batch, float beta) {
  GRID_LOOP(e, mn * batch) {
    int64_t z = e / mn, r = e % mn;
    float* p = cm + z * sc + r;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

static int32_t sgemm_tiled_launch(const kcall* c, int ta, int tb, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float* a, int64_t sa, const float* b,
                                  int64_t sb, float beta, float* cm, int64_t sc, int64_t batch) {
  int64_t gx = (n + BN - 1) / BN, gy = (m + BM - 1) / BM;
  if (gy > 65535) return kfail(c, "m = %lld is too large for the tiled sgemm", (long long)m);
  if (gx > 2147483647) return kfail(c, "n = %lld is too large for the tiled sgemm", (long long)n);
  for (int64_t z0 = 0; z0 < batch; z0 += 65535) {
    int64_t nz = batch - z0 < 65535 ? batch - z0 : 65535;
    dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)nz);
    if (ta && tb)
      sgemm_tiled<1, 1><<<grid, 256, 0, c->st>>>(m, n, k, alpha, a, sa, b, sb, beta, cm, sc, z0);
    else if (ta)
      sgemm_tiled<1, 0><<<grid, 256, 0, c->st>>>(m, n, k, alpha, a, sa, b, sb, beta, cm, sc, z0);
    else if (tb)
      sgemm_tiled<0, 1><<<grid, 256, 0, c->st>>>(m, n, k, alpha, a, sa, b, sb, beta, cm, sc, z0);
    else
      sgemm_tiled<0, 0><<<grid, 256, 0, c->st>>>(m, n, k, alpha, a, sa, b, sb, beta, cm, sc, z0);
    LAUNCHED(c);
  }
  return LIBRA_OK;
}

int32_t libra_sgemm(const kcall* c, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t sa, const float* b, int64_t sb, float beta, float* cm,
                    int64_t sc, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return LIBRA_OK;
  if (k == 0) {
    scale_matrices<<<grid_for(m * n * batch), TPB, 0, c->st>>>(cm, m * n, sc, batch, beta);
    LAUNCHED(c);
    return LIBRA_OK;
  }
  const int64_t imax = 2147483647;
  if (blas_handle && m <= imax && n <= imax && k <= imax) {
    std::lock_guard<std::mutex> lock(blas_mu);
    int st = blas_set_stream(blas_handle, c->st);
    if (st != CUBLAS_STATUS_SUCCESS_) {
      return set_error(LIBRA_ERR_DEVICE, "libra_run(%s): cublasSetStream_v2 failed with status %d",
                       c->name, st);
    }
    for (int64_t z0 = 0; z0 < batch; z0 += imax) {
      int64_t nz = batch - z0 < imax ? batch - z0 : imax;
      st = blas_sgemm(blas_handle, tb ? CUBLAS_OP_T_ : CUBLAS_OP_N_, ta ? CUBLAS_OP_T_ : CUBLAS_OP_N_,
                      (int)n, (int)m, (int)k, &alpha, b + z0 * sb, (int)(tb ? k : n), sb,
                      a + z0 * sa, (int)(ta ? m : k), sa, &beta, cm + z0 * sc, (int)n, sc, (int)nz);
      if (st != CUBLAS_STATUS_SUCCESS_) {
        return set_error(LIBRA_ERR_DEVICE,
                         "libra_run(%s): cublasSgemmStridedBatched failed with status %d "
                         "(m %lld, n %lld, k %lld, batch %lld)",
                         c->name, st, (long long)m, (long long)n, (long long)k, (long long)nz);
      }
    }
    LAUNCHED(c);
    return LIBRA_OK;
  }
  return sgemm_tiled_launch(c, ta, tb, m, n, k, alpha, a, sa, b, sb, beta, cm, sc, batch);
}

int32_t k_matmul(const kcall* c) {
  matmul_params q;
  TRY(matmul_parse(c, &q));
  const int64_t batch = q.batch, m = q.m, n = q.n, k = q.k, ta = q.ta, tb = q.tb, sa = q.sa,
                sb = q.sb;
  return libra_sgemm(c, (int)ta, (int)tb, m, n, k, 1.0f, IN_F(0), sa, IN_F(1), sb, 0.0f, OUT_F(0),
                     m * n, batch);
}

__global__ void add_rows_k(int64_t m, int64_t n, float* __restrict__ Y,
                           const float* __restrict__ b) {
  GRID_LOOP(e, m * n) Y[e] = Y[e] + b[e % n];
}

/* native/cpu/matmul.c k_linear: the matmul kernel's product, then b added to every row. */
int32_t k_linear(const kcall* c) {
  int64_t m, n, k;
  TRY(linear_parse(c, &m, &n, &k));
  if (m * n == 0) return LIBRA_OK;
  TRY(libra_sgemm(c, 0, 1, m, n, k, 1.0f, IN_F(0), 0, IN_F(1), 0, 0.0f, OUT_F(0), m * n, 1));
  add_rows_k<<<grid_for(m * n), TPB, 0, c->st>>>(m, n, OUT_F(0), IN_F(2));
  LAUNCHED(c);
  return LIBRA_OK;
}
