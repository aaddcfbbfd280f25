/*
 * matmul.c - single-precision GEMM (OpenBLAS cblas_sgemm when built with
 * -DLIBRA_OPENBLAS, otherwise a portable cache-blocked kernel) and the batched
 * matmul kernel.
 *
 * The portable kernel packs a KC x NC panel of op(B) once per block and an
 * MC x KC block of op(A) per thread, then runs a 4 x 16 register-tiled micro
 * kernel. Rows of C are split statically across threads, and each C element is
 * accumulated by one thread in k order, so results do not depend on timing.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "libra_kernel_params.h"

#ifdef LIBRA_OPENBLAS
#include <cblas.h>
#endif

#define MC 128
#define KC 256
#define NC 1024
#define MR 4
#define NR 8

static inline float a_at(int ta, const float* a, int64_t lda, int64_t i, int64_t p) {
  return ta ? a[p * lda + i] : a[i * lda + p];
}
static inline float b_at(int tb, const float* b, int64_t ldb, int64_t p, int64_t j) {
  return tb ? b[j * ldb + p] : b[p * ldb + j];
}

#ifndef LIBRA_OPENBLAS
/* GCC/Clang vector extension: 4 floats, compiled to SSE/NEON without intrinsics. */
typedef float v4f __attribute__((vector_size(16), aligned(16)));

/* Packs op(B)[pc.., jc..] (kc x nc) as NR-column panels: panel q holds rows p of
 * columns q*NR..q*NR+NR-1 contiguously (zero padded). */
static void pack_b(int tb, const float* b, int64_t ldb, int64_t pc, int64_t jc, int64_t kc,
                   int64_t nc, float* bp, int par) {
  const int64_t panels = (nc + NR - 1) / NR;
  PAR_FOR(par,
  for (int64_t q = 0; q < panels; q++) {
    float* dst = bp + q * kc * NR;
    const int64_t j0 = q * NR, nr = nc - j0 < NR ? nc - j0 : NR;
    for (int64_t p = 0; p < kc; p++) {
      for (int64_t j = 0; j < nr; j++) dst[p * NR + j] = b_at(tb, b, ldb, pc + p, jc + j0 + j);
      for (int64_t j = nr; j < NR; j++) dst[p * NR + j] = 0.0f;
    }
  });
}

/* Packs op(A)[ic.., pc..] (mc x kc) as MR-row panels: element (r, p) at p*MR + r. */
static void pack_a(int ta, const float* a, int64_t lda, int64_t ic, int64_t pc, int64_t mc,
                   int64_t kc, float* ap) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    float* dst = ap + i0 * kc;
    const int64_t mr = mc - i0 < MR ? mc - i0 : MR;
    for (int64_t p = 0; p < kc; p++) {
      for (int64_t r = 0; r < mr; r++) dst[p * MR + r] = a_at(ta, a, lda, ic + i0 + r, pc + p);
      for (int64_t r = mr; r < MR; r++) dst[p * MR + r] = 0.0f;
    }
  }
}

/* C[mr x nr] (+)= alpha * Apanel (MR x kc) * Bpanel (kc x NR), k in increasing order. */
static void micro(int64_t kc, const float* restrict ap, const float* restrict bp, float* cm,
                  int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta, int first) {
  v4f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  for (int64_t p = 0; p < kc; p++) {
    const v4f b0 = *(const v4f*)(bp + p * NR);
    const v4f b1 = *(const v4f*)(bp + p * NR + 4);
    const float* a = ap + p * MR;
    c00 += a[0] * b0;
    c01 += a[0] * b1;
    c10 += a[1] * b0;
    c11 += a[1] * b1;
    c20 += a[2] * b0;
    c21 += a[2] * b1;
    c30 += a[3] * b0;
    c31 += a[3] * b1;
  }
  float acc[MR][NR] __attribute__((aligned(16)));
  *(v4f*)&acc[0][0] = c00;
  *(v4f*)&acc[0][4] = c01;
  *(v4f*)&acc[1][0] = c10;
  *(v4f*)&acc[1][4] = c11;
  *(v4f*)&acc[2][0] = c20;
  *(v4f*)&acc[2][4] = c21;
  *(v4f*)&acc[3][0] = c30;
  *(v4f*)&acc[3][4] = c31;
  for (int64_t r = 0; r < mr; r++) {
    float* crow = cm + r * ldc;
    if (first) {
      if (beta == 0.0f) {
        for (int64_t j = 0; j < nr; j++) crow[j] = alpha * acc[r][j];
      } else {
        for (int64_t j = 0; j < nr; j++) crow[j] = beta * crow[j] + alpha * acc[r][j];
      }
    } else {
      for (int64_t j = 0; j < nr; j++) crow[j] += alpha * acc[r][j];
    }
  }
}

/* One MC-row block of C for the packed B panel: pack op(A), then run the micro-kernels. */
static void row_block(int ta, const float* a, int64_t lda, int64_t ib, int64_t m, int64_t pc,
                      int64_t kc, int64_t jc, int64_t nc, const float* bp, float* ap, float* cm,
                      int64_t ldc, float alpha, float beta, int first) {
  const int64_t ic = ib * MC;
  const int64_t mc = m - ic < MC ? m - ic : MC;
  pack_a(ta, a, lda, ic, pc, mc, kc, ap);
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t nr = nc - jr < NR ? nc - jr : NR;
    const float* bpanel = bp + (jr / NR) * kc * NR;
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t mr = mc - ir < MR ? mc - ir : MR;
      micro(kc, ap + ir * kc, bpanel, cm + (ic + ir) * ldc + jc + jr, ldc, mr, nr, alpha, beta,
            first);
    }
  }
}

/* Goto-style blocking: a KC x NC panel of op(B) is packed once (shared), each
 * thread packs its own MC x KC block of op(A); blocks of C rows are split
 * statically across threads and every C element is accumulated by one thread
 * in k order, so the result does not depend on timing. */
static void portable_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                           float* cm, int64_t ldc) {
  const int par = m * n * k > 64 * 64 * 64;
  /* scratch sized to the problem: a tiny product must not pay for a 1 MiB mmap */
  const int64_t kcap = k < KC ? k : KC, ncap = (n < NC ? n : NC) + NR;
  const size_t ap_bytes = sizeof(float) * (size_t)(((m < MC ? m : MC) + MR) * kcap);
  float* bp = aligned_alloc(64, (sizeof(float) * (size_t)(kcap * ncap) + 63) / 64 * 64);
  if (!bp) abort();
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = n - jc < NC ? n - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = k - pc < KC ? k - pc : KC;
      const int first = pc == 0;
      pack_b(tb, b, ldb, pc, jc, kc, nc, bp, par);
      const int64_t mblocks = (m + MC - 1) / MC;
      if (par) {
#pragma omp parallel
        {
          float* ap = aligned_alloc(64, (ap_bytes + 63) / 64 * 64);
          if (!ap) abort();
#pragma omp for schedule(static)
          for (int64_t ib = 0; ib < mblocks; ib++) {
            row_block(ta, a, lda, ib, m, pc, kc, jc, nc, bp, ap, cm, ldc, alpha, beta, first);
          }
          free(ap);
        }
      } else {
        /* small products stay on the calling thread: an OpenMP region costs microseconds */
        float* ap = aligned_alloc(64, (ap_bytes + 63) / 64 * 64);
        if (!ap) abort();
        for (int64_t ib = 0; ib < mblocks; ib++) {
          row_block(ta, a, lda, ib, m, pc, kc, jc, nc, bp, ap, cm, ldc, alpha, beta, first);
        }
        free(ap);
      }
    }
  }
  free(bp);
}
#endif

void libra_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* cm, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++) {
      float* row = cm + i * ldc;
      if (beta == 0.0f) {
        memset(row, 0, sizeof(float) * (size_t)n);
      } else {
        for (int64_t j = 0; j < n; j++) row[j] *= beta;
      }
    }
    return;
  }
#ifdef LIBRA_OPENBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, cm,
              (blasint)ldc);
#else
  portable_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc);
#endif
}

int32_t k_matmul(const kcall* c) {
  matmul_params q;
  TRY(matmul_parse(c, &q));
  const int64_t batch = q.batch, m = q.m, n = q.n, k = q.k, ta = q.ta, tb = q.tb, sa = q.sa,
                sb = q.sb;
  const float* A = IN_F(0);
  const float* B = IN_F(1);
  float* C = OUT_F(0);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  for (int64_t i = 0; i < batch; i++) {
    libra_sgemm((int)ta, (int)tb, m, n, k, 1.0f, A + i * sa, lda > 0 ? lda : 1, B + i * sb,
                ldb > 0 ? ldb : 1, 0.0f, C + i * m * n, n > 0 ? n : 1);
  }
  return LIBRA_OK;
}

/* x w^T as the matmul kernel computes it (transB), then b added to every row as the add kernel
 * adds: the bits of those two calls, in one, with no buffer for the product alone. */
int32_t k_linear(const kcall* c) {
  int64_t m, n, k;
  TRY(linear_parse(c, &m, &n, &k));
  const float* b = IN_F(2);
  float* Y = OUT_F(0);
  libra_sgemm(0, 1, m, n, k, 1.0f, IN_F(0), k > 0 ? k : 1, IN_F(1), k > 0 ? k : 1, 0.0f, Y,
              n > 0 ? n : 1);
  PAR_FOR(m * n > PAR_MIN,
  for (int64_t i = 0; i < m; i++) {
    float* restrict row = Y + i * n;
    for (int64_t j = 0; j < n; j++) row[j] = row[j] + b[j];
  });
  return LIBRA_OK;
}
