/*
 * fake_cublas.c - a column-major reference with the cuBLAS v2 signatures that
 * matmul.cu looks up (cublasCreate_v2, cublasSetStream_v2,
 * cublasSgemmStridedBatched). Loaded through LIBRA_CUBLAS_PATH into the
 * emulated build, it checks the row-major operand swap and the leading
 * dimensions that matmul.cu passes to the real cuBLAS.
 */
#include <stdlib.h>

int cublasCreate_v2(void** h) {
  *h = malloc(1);
  return 0;
}

int cublasSetStream_v2(void* h, void* s) {
  (void)h;
  (void)s;
  return 0;
}

int cublasSgemmStridedBatched(void* h, int ta, int tb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, long long sa, const float* B, int ldb,
                              long long sb, const float* beta, float* C, int ldc, long long sc,
                              int batch) {
  (void)h;
  /* CUBLAS_STATUS_INVALID_VALUE for the argument errors the real library rejects */
  if (m < 0 || n < 0 || k < 0 || batch < 0) return 7;
  if (lda < (ta ? (k > 1 ? k : 1) : (m > 1 ? m : 1))) return 7;
  if (ldb < (tb ? (n > 1 ? n : 1) : (k > 1 ? k : 1))) return 7;
  if (ldc < (m > 1 ? m : 1)) return 7;
  for (int z = 0; z < batch; z++) {
    const float* a = A + z * sa;
    const float* b = B + z * sb;
    float* c = C + z * sc;
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < m; i++) {
        double s = 0;
        for (int l = 0; l < k; l++) {
          const float av = ta ? a[l + (long)i * lda] : a[i + (long)l * lda];
          const float bv = tb ? b[j + (long)l * ldb] : b[l + (long)j * ldb];
          s += (double)av * bv;
        }
        float v = (float)(*alpha * s);
        if (*beta != 0) v += *beta * c[i + (long)j * ldc];
        c[i + (long)j * ldc] = v;
      }
    }
  }
  return 0;
}
