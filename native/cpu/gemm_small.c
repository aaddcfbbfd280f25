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
#define COMMA ,

static _Thread_local float* pack_buf;
static _Thread_local int64_t pack_cap;

/* fp-contract: let a*b + c become one fused multiply-add (the library is built as
 * ISO C, where GCC would otherwise keep them separate). The kernels are written once
 * for a strided B (BROW(p) = b + p*ldb) and once for a table of row pointers
 * (BROW(p) = rows[p] + j0, the implicit-GEMM convolution). */
#define GEMM_KERNELS(SUFFIX, BARGS, BROW)                                                          \
  __attribute__((optimize("fp-contract=fast"))) static void block##SUFFIX(                        \
      int64_t rows, int64_t k, const float* ap, BARGS, float* c, int64_t ldc, int accumulate) {   \
    v16 acc[MR][2];                                                                                \
    for (int i = 0; i < MR; i++) {                                                                 \
      if (accumulate && i < rows) {                                                                \
        acc[i][0] = *(const v16*)(c + i * ldc);                                                    \
        acc[i][1] = *(const v16*)(c + i * ldc + 16);                                               \
      } else {                                                                                     \
        acc[i][0] = (v16){0};                                                                      \
        acc[i][1] = (v16){0};                                                                      \
      }                                                                                            \
    }                                                                                              \
    for (int64_t p = 0; p < k; p++) {                                                              \
      const float* br = BROW(p);                                                                   \
      const v16 b0 = *(const v16*)br, b1 = *(const v16*)(br + 16);                                 \
      const float* a = ap + p * MR;                                                                \
      for (int i = 0; i < MR; i++) {                                                               \
        acc[i][0] += a[i] * b0;                                                                    \
        acc[i][1] += a[i] * b1;                                                                    \
      }                                                                                            \
    }                                                                                              \
    for (int i = 0; i < rows; i++) {                                                               \
      *(v16*)(c + i * ldc) = acc[i][0];                                                            \
      *(v16*)(c + i * ldc + 16) = acc[i][1];                                                       \
    }                                                                                              \
  }                                                                                                \
  __attribute__((optimize("fp-contract=fast"))) static void block16##SUFFIX(                      \
      int64_t rows, int64_t k, const float* ap, BARGS, float* c, int64_t ldc, int accumulate) {   \
    v16 acc[MR];                                                                                   \
    for (int i = 0; i < MR; i++) {                                                                 \
      acc[i] = accumulate && i < rows ? *(const v16*)(c + i * ldc) : (v16){0};                     \
    }                                                                                              \
    for (int64_t p = 0; p < k; p++) {                                                              \
      const v16 b0 = *(const v16*)BROW(p);                                                         \
      const float* a = ap + p * MR;                                                                \
      for (int i = 0; i < MR; i++) acc[i] += a[i] * b0;                                            \
    }                                                                                              \
    for (int i = 0; i < rows; i++) *(v16*)(c + i * ldc) = acc[i];                                  \
  }                                                                                                \
  __attribute__((optimize("fp-contract=fast"))) static void block_tail##SUFFIX(                   \
      int64_t rows, int64_t cols, int64_t k, const float* ap, BARGS, float* c, int64_t ldc,        \
      int accumulate) {                                                                            \
    for (int64_t i = 0; i < rows; i++) {                                                           \
      for (int64_t jj = 0; jj < cols; jj++) {                                                      \
        float s = accumulate ? c[i * ldc + jj] : 0.0f;                                             \
        for (int64_t p = 0; p < k; p++) s += ap[p * MR + i] * BROW(p)[jj];                         \
        c[i * ldc + jj] = s;                                                                       \
      }                                                                                            \
    }                                                                                              \
  }

#define BROW_STRIDED(p) (b + (p) * ldb)
GEMM_KERNELS(, const float* b COMMA int64_t ldb, BROW_STRIDED)
#define BROW_TABLE(p) (rows_[p] + j0)
GEMM_KERNELS(_rows, const float* const* rows_ COMMA int64_t j0, BROW_TABLE)

/* Packs A (m x k, read as a[i*ars + p*acs]) into zero-padded 8-row slivers in this
 * thread's buffer; NULL when out of memory. */
static float* pack_a(int64_t m, int64_t k, const float* a, int64_t ars, int64_t acs) {
  const int64_t mb = (m + MR - 1) / MR, need = mb * MR * (k > 0 ? k : 1);
  if (pack_cap < need) {
    free(pack_buf);
    pack_buf = malloc(sizeof(float) * (size_t)need);
    pack_cap = pack_buf ? need : 0;
    if (!pack_buf) return NULL;
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
  return ap;
}

void libra_sgemm_packed(int64_t m, int64_t n, int64_t k, const float* ap, const float* b,
                        int64_t ldb, float* c, int64_t ldc, int accumulate) {
  const int64_t mb = (m + MR - 1) / MR;
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
}

int libra_sgemm_small(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                      const float* b, int64_t ldb, float* c, int64_t ldc, int accumulate) {
  if (m <= 0 || n <= 0) return 0;
  float* ap = pack_a(m, k, a, ars, acs);
  if (!ap) return -1;
  libra_sgemm_packed(m, n, k, ap, b, ldb, c, ldc, accumulate);
  return 0;
}

float* libra_sgemm_pack_buffer(int64_t floats) {
  if (pack_cap < floats) {
    free(pack_buf);
    pack_buf = malloc(sizeof(float) * (size_t)(floats > 0 ? floats : 1));
    pack_cap = pack_buf ? floats : 0;
  }
  return pack_buf;
}

float* libra_sgemm_pack(int64_t m, int64_t k, const float* a, int64_t ars, int64_t acs) {
  return pack_a(m, k, a, ars, acs);
}

void libra_sgemm_packed_rows(int64_t m, int64_t n, int64_t k, const float* ap,
                             const float* const* rows_, float* c, int64_t ldc) {
  const int64_t mb = (m + MR - 1) / MR;
  int64_t j = 0;
  for (; j + NR <= n; j += NR) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block_rows(rows, k, ap + ib * MR * k, rows_, j, c + ib * MR * ldc + j, ldc, 0);
    }
  }
  if (j + 16 <= n) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block16_rows(rows, k, ap + ib * MR * k, rows_, j, c + ib * MR * ldc + j, ldc, 0);
    }
    j += 16;
  }
  if (j < n) {
    for (int64_t ib = 0; ib < mb; ib++) {
      const int64_t rows = m - ib * MR < MR ? m - ib * MR : MR;
      block_tail_rows(rows, n - j, k, ap + ib * MR * k, rows_, j, c + ib * MR * ldc + j, ldc, 0);
    }
  }
}
