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

#ifdef LIBRA_OPENBLAS
#include <cblas.h>
#endif

#define MC 64
#define KC 256
#define NC 512
#define MR 4
#define NR 16

static inline float a_at(int ta, const float* a, int64_t lda, int64_t i, int64_t p) {
  return ta ? a[p * lda + i] : a[i * lda + p];
}
static inline float b_at(int tb, const float* b, int64_t ldb, int64_t p, int64_t j) {
  return tb ? b[j * ldb + p] : b[p * ldb + j];
}

#ifndef LIBRA_OPENBLAS
/* C[mr x nr] (+)= alpha * Ap[mr x kc] Bp[kc x nc](cols j0..j0+nr) */
static void micro(int64_t kc, const float* ap, int64_t lda_p, const float* bp, int64_t ldb_p,
                  float* cm, int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta,
                  int first) {
  float acc[MR][NR];
  memset(acc, 0, sizeof acc);
  if (mr == MR && nr == NR) {
    for (int64_t p = 0; p < kc; p++) {
      const float* brow = bp + p * ldb_p;
      for (int r = 0; r < MR; r++) {
        const float av = ap[r * lda_p + p];
        for (int j = 0; j < NR; j++) acc[r][j] += av * brow[j];
      }
    }
  } else {
    for (int64_t p = 0; p < kc; p++) {
      const float* brow = bp + p * ldb_p;
      for (int64_t r = 0; r < mr; r++) {
        const float av = ap[r * lda_p + p];
        for (int64_t j = 0; j < nr; j++) acc[r][j] += av * brow[j];
      }
    }
  }
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

static void portable_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                           float* cm, int64_t ldc) {
  const int par = m * n * k > 64 * 64 * 64;
  float* bp = malloc(sizeof(float) * KC * NC);
  if (!bp) abort();
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = n - jc < NC ? n - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = k - pc < KC ? k - pc : KC;
      const int first = pc == 0;
      PAR_FOR(par,
      for (int64_t p = 0; p < kc; p++) {
        float* dst = bp + p * nc;
        if (!tb) {
          memcpy(dst, b + (pc + p) * ldb + jc, sizeof(float) * (size_t)nc);
        } else {
          for (int64_t j = 0; j < nc; j++) dst[j] = b_at(tb, b, ldb, pc + p, jc + j);
        }
      });
      const int64_t mblocks = (m + MC - 1) / MC;
#pragma omp parallel if (par)
      {
        float ap[MC * KC];
#pragma omp for schedule(static)
        for (int64_t ib = 0; ib < mblocks; ib++) {
          const int64_t ic = ib * MC;
          const int64_t mc = m - ic < MC ? m - ic : MC;
          for (int64_t i = 0; i < mc; i++) {
            float* dst = ap + i * kc;
            if (!ta) {
              memcpy(dst, a + (ic + i) * lda + pc, sizeof(float) * (size_t)kc);
            } else {
              for (int64_t p = 0; p < kc; p++) dst[p] = a_at(ta, a, lda, ic + i, pc + p);
            }
          }
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t mr = mc - ir < MR ? mc - ir : MR;
            for (int64_t jr = 0; jr < nc; jr += NR) {
              const int64_t nr = nc - jr < NR ? nc - jr : NR;
              micro(kc, ap + ir * kc, kc, bp + jr, nc, cm + (ic + ir) * ldc + jc + jr, ldc, mr, nr,
                    alpha, beta, first);
            }
          }
        }
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
  PINT(batch, 0, 0, "batch");
  PINT(m, 1, 0, "m");
  PINT(n, 2, 0, "n");
  PINT(k, 3, 0, "k");
  PINT(ta, 4, 0, "transA");
  PINT(tb, 5, 0, "transB");
  PINT(sa, 6, 0, "strideA");
  PINT(sb, 7, 0, "strideB");
  if (ta > 1 || tb > 1) {
    return kfail(c, "transA/transB must be 0 or 1, got %lld/%lld", (long long)ta, (long long)tb);
  }
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
