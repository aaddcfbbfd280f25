/*
 * gemm_small.c - a single-threaded GEMM for the shapes of convolution layers,
 * where OpenBLAS runs well below peak: few rows of A (output channels) or a short
 * reduction, and a right-hand side whose 32-column panel fits in cache.
 *
 *   C[i, j] (+)= sum_k A[i*ars + k*acs] * B[k*ldb + j]
 *
 * A is packed once into 8-row slivers (zero-padded), then for each 32-column panel
 * of B every 8-row block of C is computed in registers (16 vectors of 16 floats)
 * over the whole reduction. Every C element is accumulated by one thread in k order,
 * so the result never depends on threads or timing. GCC vector extensions give
 * AVX-512/AVX2 code under -march and plain SSE otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef float v16 __attribute__((vector_size(64), aligned(4)));

enum { MR = 8, NR = 32 };

static _Thread_local float* pack_buf;
static _Thread_local int64_t pack_cap;

/* fp-contract: let a*b + c become one fused multiply-add (the library is built as
 * ISO C, where GCC would otherwise keep them separate). */
__attribute__((optimize("fp-contract=fast"))) static void block(
    int64_t rows, int64_t k, const float* ap, const float* b, int64_t ldb, float* c, int64_t ldc,
    int accumulate) {
  v16 acc[MR][2];
  for (int i = 0; i < MR; i++) {
    if (accumulate && i < rows) {
      acc[i][0] = *(const v16*)(c + i * ldc);
      acc[i][1] = *(const v16*)(c + i * ldc + 16);
    } else {
      acc[i][0] = (v16){0};
      acc[i][1] = (v16){0};
    }
  }
  for (int64_t p = 0; p < k; p++) {
    const v16 b0 = *(const v16*)(b + p * ldb), b1 = *(const v16*)(b + p * ldb + 16);
    const float* a = ap + p * MR;
    for (int i = 0; i < MR; i++) {
      acc[i][0] += a[i] * b0;
      acc[i][1] += a[i] * b1;
    }
  }
  for (int i = 0; i < rows; i++) {
    *(v16*)(c + i * ldc) = acc[i][0];
    *(v16*)(c + i * ldc + 16) = acc[i][1];
  }
}

__attribute__((optimize("fp-contract=fast"))) static void block16(
    int64_t rows, int64_t k, const float* ap, const float* b, int64_t ldb, float* c, int64_t ldc,
    int accumulate) {
  v16 acc[MR];
  for (int i = 0; i < MR; i++) acc[i] = accumulate && i < rows ? *(const v16*)(c + i * ldc) : (v16){0};
  for (int64_t p = 0; p < k; p++) {
    const v16 b0 = *(const v16*)(b + p * ldb);
    const float* a = ap + p * MR;
    for (int i = 0; i < MR; i++) acc[i] += a[i] * b0;
  }
  for (int i = 0; i < rows; i++) *(v16*)(c + i * ldc) = acc[i];
}

__attribute__((optimize("fp-contract=fast"))) static void block_tail(
    int64_t rows, int64_t cols, int64_t k, const float* ap, const float* b, int64_t ldb, float* c,
    int64_t ldc, int accumulate) {
  for (int64_t i = 0; i < rows; i++) {
    for (int64_t j = 0; j < cols; j++) {
      float s = accumulate ? c[i * ldc + j] : 0.0f;
      for (int64_t p = 0; p < k; p++) s += ap[p * MR + i] * b[p * ldb + j];
      c[i * ldc + j] = s;
    }
  }
}

int libra_sgemm_small(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int accumulate) {
  if (m <= 0 || n <= 0) return 0;
  const int64_t mb = (m + MR - 1) / MR, need = mb * MR * (k > 0 ? k : 1);
  if (pack_cap < need) {
    free(pack_buf);
    pack_buf = malloc(sizeof(float) * (size_t)need);
    pack_cap = pack_buf ? need : 0;
    if (!pack_buf) return -1;
  }
  float* ap = pack_buf;
  for (int64_t ib = 0; ib < mb; ib++) {
    float* dst = ap + ib * MR * k;
    for (int64_t p = 0; p < k; p++) {
      for (int i = 0; i < MR; i++) {
        const int64_t row = ib * MR + i;
        dst[p * MR + i] = row < m ? a[row * ars + p * acs] : 0.0f;
      }
    }
  }
  int64_t j = 0;
  for (; j + NR <= n; j += NR) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block(rows, k, ap + ib * MR * k, b + j, ldb, c + ib * MR * ldc + j, ldc, accumulate);
    }
  }
  if (j + 16 <= n) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block16(rows, k, ap + ib * MR * k, b + j, ldb, c + ib * MR * ldc + j, ldc, accumulate);
    }
    j += 16;
  }
  if (j < n) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block_tail(rows, n - j, k, ap + ib * MR * k, b + j, ldb, c + ib * MR * ldc + j, ldc,
                 accumulate);
    }
  }
  return 0;
}
