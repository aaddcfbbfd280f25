/*
 * common.cuh - shared declarations of the CUDA build (not part of the ABI).
 *
 * Every .cu file of native/cuda includes this header and is compiled on its
 * own (no relocatable device code): device helpers here are inline templates,
 * host helpers are defined once in runtime.cu (errors, params, temporaries,
 * index checks) or matmul.cu (sgemm). The call record, param readers and
 * kernel declarations are shared with the cpu build (include/libra_kcall.h).
 *
 * Determinism: no floating-point atomics anywhere. Every reduction is a fixed
 * per-thread order followed by a fixed shared-memory tree whose shape depends
 * only on the sizes, so the same call gives bitwise the same result. Sums
 * accumulate in double.
 */
#ifndef LIBRA_CUDA_COMMON_CUH
#define LIBRA_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

/* The call record carries the current stream; a product of counts above 2^62 fails
 * (pmul), as launch geometry indexes in int64. */
#define LIBRA_KCALL_EXTRA cudaStream_t st;
#define LIBRA_LIMIT_COUNTS
#include "libra_kcall.h"

/* Converts a CUDA error into LIBRA_ERR_DEVICE (or OUT_OF_MEMORY) naming the function. */
int32_t cuda_fail(cudaError_t e, const char* fn, const char* what);

/* After every launch: a launch error becomes LIBRA_ERR_DEVICE naming the kernel. */
#define LAUNCHED(c)                                                             \
  do {                                                                          \
    cudaError_t e_ = cudaGetLastError();                                        \
    if (e_ != cudaSuccess) return cuda_fail(e_, (c)->name, "kernel launch");    \
  } while (0)
#define CUDA_TRY(c, call)                                                       \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) return cuda_fail(e_, (c)->name, #call);              \
  } while (0)

/* Stream-ordered temporary device memory (cudaMallocAsync), freed on scope exit. */
struct tmpbuf {
  void* p = nullptr;
  cudaStream_t st = nullptr;
  tmpbuf() = default;
  tmpbuf(const tmpbuf&) = delete;
  tmpbuf& operator=(const tmpbuf&) = delete;
  ~tmpbuf() {
    if (p) cudaFreeAsync(p, st);
  }
  template <class T>
  T* as() const {
    return (T*)p;
  }
};
int32_t tmp_alloc(const kcall* c, uint64_t bytes, tmpbuf* out);

/*
 * Checks that every idx[j] (i32, j < n) lies in [0, limit); this synchronizes
 * the stream. On failure (as the CPU build words it):
 * "<what>[j] = v is out of range [0, <limit_name> = limit)".
 */
int32_t check_indices(const kcall* c, const int32_t* idx, int64_t n, int64_t limit,
                      const char* what, const char* limit_name);

/*
 * Row-major batched sgemm on c->st: C_i = alpha op(A_i) op(B_i) + beta C_i with
 * A_i = a + i*sa ([m,k], or stored [k,m] when ta), B_i = b + i*sb ([k,n] or
 * stored [n,k]), C_i = cm + i*sc ([m,n], contiguous rows). beta = 0 never reads C.
 * cuBLAS when loaded, the tiled kernel otherwise. k = 0 scales C by beta.
 */
int32_t libra_sgemm(const kcall* c, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t sa, const float* b, int64_t sb, float beta, float* cm,
                    int64_t sc, int64_t batch);
/*
 * Reduces x viewed as [outer, dim, inner] over the middle axis on c->st.
 * mode 0: sum, 1: mean (NaN when dim = 0), 2: max (first maximum, NaN wins),
 * 3: argmax (i32 index of the first maximum). Modes 2 and 3 need dim >= 1.
 */
int32_t libra_axis_reduce(const kcall* c, int mode, const float* x, void* y, int64_t outer,
                          int64_t dim, int64_t inner);

/* Called once by libra_init: tries to dlopen cuBLAS (unless LIBRA_NO_CUBLAS=1). */
void libra_load_cublas(void);
/* 1 when cuBLAS is in use. */
int libra_have_cublas(void);

/* ---- launch geometry ---- */

#define TPB 256
/* Blocks for a grid-stride loop over n items (n > 0). */
static inline unsigned grid_for(int64_t n, int tpb = TPB) {
  int64_t g = (n + tpb - 1) / tpb;
  const int64_t cap = 1 << 16;
  return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}
/* Grid-stride loop with 64-bit indices. */
#define GRID_LOOP(i, n)                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- device helpers ---- */

/* Tree sum of one double per thread over the block (blockDim.x a power of two <= 1024). */
__device__ inline double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

/* True when (vb at ib) should replace (va at ia) as "the first maximum": NaN is the
 * largest value, ties go to the lower index, ia < 0 marks "nothing yet". */
__device__ inline bool argmax_better(float vb, int64_t ib, float va, int64_t ia) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  bool nb = vb != vb, na = va != va;
  if (nb || na) return nb && (!na || ib < ia);
  return vb > va || (vb == va && ib < ia);
}

/* Smallest power of two >= n, clamped to [32, 256]: the block size of row kernels. */
static inline int row_block(int64_t n) {
  int b = 32;
  while (b < n && b < 256) b *= 2;
  return b;
}

/* ---- Philox4x32-10 (host and device) ---- */

#include "libra_philox.h"

/* Words w0, w1 of element i for key (seed) and 64-bit offset (see kernels.ts). */
__device__ inline void philox_element(uint32_t k0, uint32_t k1, uint64_t offset, int64_t i,
                                      uint32_t* w0, uint32_t* w1) {
  uint64_t ctr64 = offset + (uint64_t)i;
  uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32), 0u, 0u};
  uint32_t key[2] = {k0, k1};
  uint32_t out[4];
  philox4x32_10(ctr, key, out);
  *w0 = out[0];
  *w1 = out[1];
}

#endif
