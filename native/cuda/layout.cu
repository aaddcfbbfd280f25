/*
 * layout.cu - permute, slice, concat, index_select, embedding and their
 * gradients. Data moves as 4-byte words, so these work for f32 and i32.
 *
 * The scatter-adds (index_select_backward, embedding_backward) are gathers:
 * the (index, position) pairs are sorted once (bitonic sort of unique 64-bit
 * keys idx << 32 | j, so the order is total), and every output element adds
 * its contributions in increasing j starting from 0.0f, exactly the order of
 * the CPU build's sequential scatter: bitwise the same sums, every time.
 */
#include <string.h>

#include "common.cuh"
#include "libra_layout_params.h"

struct gview {
  int nd;
  int64_t n;
  int64_t shape[MAX_DIMS_C];
  int64_t ss[MAX_DIMS_C]; /* source strides; the destination is contiguous */
};

/* dst[i] = src[offset of i], dst contiguous over `shape`. */
__global__ void gather_k(gview v, const uint32_t* __restrict__ src, uint32_t* __restrict__ dst) {
  GRID_LOOP(i, v.n) {
    int64_t off = 0, r = i;
    for (int d = v.nd - 1; d >= 0; d--) {
      off += (r % v.shape[d]) * v.ss[d];
      r /= v.shape[d];
    }
    dst[i] = src[off];
  }
}

/* Contiguous dst over shape_in, strided src; size-1 dims dropped, mergeable dims merged. */
static int32_t strided_gather(const kcall* c, int nd, const int64_t* shape_in,
                              const int64_t* src_in, uint32_t* dst, const uint32_t* src) {
  gview v;
  v.n = 1;
  int k = 0;
  for (int i = 0; i < nd; i++) {
    v.n *= shape_in[i];
    if (shape_in[i] == 1) continue;
    if (k > 0 && v.ss[k - 1] == src_in[i] * shape_in[i]) {
      v.shape[k - 1] *= shape_in[i];
      v.ss[k - 1] = src_in[i];
      continue;
    }
    v.shape[k] = shape_in[i];
    v.ss[k] = src_in[i];
    k++;
  }
  if (v.n == 0) return LIBRA_OK;
  if (k == 0) {
    v.shape[0] = 1;
    v.ss[0] = 0;
    k = 1;
  }
  v.nd = k;
  if (k == 1 && v.ss[0] == 1) {
    CUDA_TRY(c, cudaMemcpyAsync(dst, src, (size_t)v.n * 4, cudaMemcpyDeviceToDevice, c->st));
    return LIBRA_OK;
  }
  gather_k<<<grid_for(v.n), TPB, 0, c->st>>>(v, src, dst);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_permute(const kcall* c) {
  permute_params q;
  TRY(permute_parse(c, &q));
  return strided_gather(c, q.nd, q.ys, q.sst, (uint32_t*)c->out[0], (const uint32_t*)c->in[0]);
}

/* gx[idx] = gy[idx - starts] inside the slice, 0 outside (a gather: no memset, no scatter). */
__global__ void slice_bw_k(slice_params v, const uint32_t* __restrict__ gy,
                           uint32_t* __restrict__ gx) {
  GRID_LOOP(i, v.nx) {
    int64_t r = i, off = 0, mul = 1;
    bool inside = true;
    for (int d = v.nd - 1; d >= 0; d--) {
      const int64_t q = r % v.xs[d] - v.st[d];
      r /= v.xs[d];
      if (q < 0 || q >= v.ys[d]) inside = false;
      off += q * mul;
      mul *= v.ys[d];
    }
    gx[i] = inside ? gy[off] : 0u;
  }
}

static int32_t slice_like(const kcall* c, int backward) {
  slice_params q;
  TRY(slice_parse(c, &q));
  if (!backward) {
    return strided_gather(c, q.nd, q.ys, q.xst, (uint32_t*)c->out[0],
                          (const uint32_t*)c->in[0] + q.off);
  }
  if (q.nx == 0) return LIBRA_OK;
  if (q.nd == 0) {
    q.nd = 1;
    q.xs[0] = q.ys[0] = 1;
    q.st[0] = 0;
  }
  slice_bw_k<<<grid_for(q.nx), TPB, 0, c->st>>>(q, (const uint32_t*)c->in[0], (uint32_t*)c->out[0]);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_slice(const kcall* c) { return slice_like(c, 0); }
int32_t k_slice_backward(const kcall* c) { return slice_like(c, 1); }

/* y[o, before + q] (rows of total*inner words) = x[o, q] (rows of len words). */
__global__ void concat_part_k(int64_t outer, int64_t len, int64_t row, int64_t before,
                              const uint32_t* __restrict__ x, uint32_t* __restrict__ y) {
  GRID_LOOP(e, outer * len) {
    const int64_t o = e / len, q = e % len;
    y[o * row + before + q] = x[e];
  }
}

int32_t k_concat(const kcall* c) {
  concat_params q;
  TRY(concat_parse(c, &q));
  const int64_t nin = q.nin, outer = q.outer, inner = q.inner, total = q.total;
  if (outer * total * inner == 0) return LIBRA_OK;
  uint32_t* Y = (uint32_t*)c->out[0];
  int64_t before = 0;
  for (int j = 0; j < nin; j++) {
    const int64_t d = (int64_t)c->p[3 + j], len = d * inner;
    if (len > 0) {
      concat_part_k<<<grid_for(outer * len), TPB, 0, c->st>>>(
          outer, len, total * inner, before * inner, (const uint32_t*)c->in[j], Y);
      LAUNCHED(c);
    }
    before += d;
  }
  return LIBRA_OK;
}

/* ---- gathers by index ---- */

__global__ void index_select_k(int64_t outer, int64_t dim, int64_t inner, int64_t nidx,
                               const uint32_t* __restrict__ x, const int32_t* __restrict__ idx,
                               uint32_t* __restrict__ y) {
  GRID_LOOP(e, outer * nidx * inner) {
    const int64_t i = e % inner, j = (e / inner) % nidx, o = e / (inner * nidx);
    y[e] = x[(o * dim + idx[j]) * inner + i];
  }
}

int32_t k_index_select(const kcall* c) {
  static const char* const names[] = {"outer", "dim", "inner", "nIdx"};
  int64_t v[4];
  if (pints(c, v, names, 4)) return LIBRA_ERR_INVALID_ARGUMENT;
  const int64_t outer = v[0], dim = v[1], inner = v[2], nidx = v[3];
  TRY(check_indices(c, IN_I(1), nidx, dim, "idx", "dim"));
  if (outer * nidx * inner == 0) return LIBRA_OK;
  index_select_k<<<grid_for(outer * nidx * inner), TPB, 0, c->st>>>(
      outer, dim, inner, nidx, (const uint32_t*)c->in[0], IN_I(1), (uint32_t*)c->out[0]);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_embedding(const kcall* c) {
  static const char* const names[] = {"nIds", "vocab", "dim"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  const int64_t nids = v[0], vocab = v[1], dim = v[2];
  TRY(check_indices(c, IN_I(1), nids, vocab, "ids", "vocab"));
  if (nids * dim == 0) return LIBRA_OK;
  index_select_k<<<grid_for(nids * dim), TPB, 0, c->st>>>(
      1, vocab, dim, nids, (const uint32_t*)c->in[0], IN_I(1), (uint32_t*)c->out[0]);
  LAUNCHED(c);
  return LIBRA_OK;
}

__global__ void make_keys_k(int64_t n, int64_t padded, const int32_t* __restrict__ idx,
                            uint64_t* __restrict__ keys) {
  GRID_LOOP(j, padded) {
    keys[j] = j < n ? ((uint64_t)(uint32_t)idx[j] << 32) | (uint64_t)j : ~0ull;
  }
}

/* The whole bitonic network in one block, in shared memory (padded <= 2048). */
__global__ void bitonic_small_k(uint64_t* keys, int padded) {
  __shared__ uint64_t s[2048];
  for (int i = threadIdx.x; i < padded; i += blockDim.x) s[i] = keys[i];
  __syncthreads();
  for (int k = 2; k <= padded; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < padded; i += blockDim.x) {
        const int ixj = i ^ j;
        if (ixj > i) {
          const uint64_t a = s[i], b = s[ixj];
          const bool up = (i & k) == 0;
          if ((a > b) == up) {
            s[i] = b;
            s[ixj] = a;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < padded; i += blockDim.x) keys[i] = s[i];
}

__global__ void bitonic_step_k(uint64_t* keys, int64_t padded, int64_t j, int64_t k) {
  GRID_LOOP(i, padded) {
    const int64_t ixj = i ^ j;
    if (ixj > i) {
      const uint64_t a = keys[i], b = keys[ixj];
      const bool up = (i & k) == 0;
      if ((a > b) == up) {
        keys[i] = b;
        keys[ixj] = a;
      }
    }
  }
}

/* seg[2d], seg[2d+1] = [first, end) positions of index d in the sorted keys. */
__global__ void segments_k(int64_t n, const uint64_t* __restrict__ keys, int64_t* __restrict__ seg) {
  GRID_LOOP(p, n) {
    const uint64_t d = keys[p] >> 32;
    if (p == 0 || (keys[p - 1] >> 32) != d) seg[2 * d] = p;
    if (p == n - 1 || (keys[p + 1] >> 32) != d) seg[2 * d + 1] = p + 1;
  }
}

/* gx[o, d, i] = 0 + gy[o, j1, i] + gy[o, j2, i] + ... for j1 < j2 < ... with idx[j] = d. */
__global__ void scatter_gather_k(int64_t outer, int64_t dim, int64_t inner, int64_t nidx,
                                 const uint64_t* __restrict__ keys, const int64_t* __restrict__ seg,
                                 const float* __restrict__ gy, float* __restrict__ gx) {
  GRID_LOOP(e, outer * dim * inner) {
    const int64_t i = e % inner, d = (e / inner) % dim, o = e / (inner * dim);
    float acc = 0.0f;
    const int64_t end = seg[2 * d + 1];
    for (int64_t p = seg[2 * d]; p < end; p++) {
      const int64_t j = (int64_t)(uint32_t)keys[p];
      acc += gy[(o * nidx + j) * inner + i];
    }
    gx[e] = acc;
  }
}

/* gx [outer, dim, inner] = scatter-add of gy [outer, nidx, inner] by idx (validated). */
static int32_t scatter_add(const kcall* c, int64_t outer, int64_t dim, int64_t inner, int64_t nidx,
                           const int32_t* idx, const float* gy, float* gx) {
  const int64_t n_out = outer * dim * inner;
  if (n_out == 0) return LIBRA_OK;
  if (nidx == 0) {
    CUDA_TRY(c, cudaMemsetAsync(gx, 0, (size_t)n_out * 4, c->st));
    return LIBRA_OK;
  }
  if (nidx > 0xffffffffll) return kfail(c, "nIdx %lld exceeds 2^32 - 1", (long long)nidx);
  int64_t padded = 1;
  while (padded < nidx) padded <<= 1;
  tmpbuf keys, seg;
  TRY(tmp_alloc(c, (uint64_t)padded * 8, &keys));
  TRY(tmp_alloc(c, (uint64_t)dim * 16, &seg));
  uint64_t* K = keys.as<uint64_t>();
  make_keys_k<<<grid_for(padded), TPB, 0, c->st>>>(nidx, padded, idx, K);
  LAUNCHED(c);
  if (padded <= 2048) {
    bitonic_small_k<<<1, 1024, 0, c->st>>>(K, (int)padded);
    LAUNCHED(c);
  } else {
    for (int64_t k = 2; k <= padded; k <<= 1) {
      for (int64_t j = k >> 1; j > 0; j >>= 1) {
        bitonic_step_k<<<grid_for(padded), TPB, 0, c->st>>>(K, padded, j, k);
        LAUNCHED(c);
      }
    }
  }
  CUDA_TRY(c, cudaMemsetAsync(seg.p, 0, (size_t)dim * 16, c->st));
  segments_k<<<grid_for(nidx), TPB, 0, c->st>>>(nidx, K, seg.as<int64_t>());
  LAUNCHED(c);
  scatter_gather_k<<<grid_for(n_out), TPB, 0, c->st>>>(outer, dim, inner, nidx, K,
                                                       seg.as<int64_t>(), gy, gx);
  LAUNCHED(c);
  return LIBRA_OK;
}

int32_t k_index_select_backward(const kcall* c) {
  static const char* const names[] = {"outer", "dim", "inner", "nIdx"};
  int64_t v[4];
  if (pints(c, v, names, 4)) return LIBRA_ERR_INVALID_ARGUMENT;
  TRY(check_indices(c, IN_I(1), v[3], v[1], "idx", "dim"));
  return scatter_add(c, v[0], v[1], v[2], v[3], IN_I(1), IN_F(0), OUT_F(0));
}

int32_t k_embedding_backward(const kcall* c) {
  static const char* const names[] = {"nIds", "vocab", "dim"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  TRY(check_indices(c, IN_I(1), v[0], v[1], "ids", "vocab"));
  return scatter_add(c, 1, v[1], v[2], v[0], IN_I(1), IN_F(0), OUT_F(0));
}
