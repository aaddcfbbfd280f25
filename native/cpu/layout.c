/*
 * layout.c - permute, slice, concat, index_select, embedding and their
 * gradients. Data is moved as 4-byte words, so these work for f32 and i32.
 * Scatter-adds (index_select_backward, embedding_backward) give every output
 * row to one thread, which adds contributions in increasing source order.
 */
#include <string.h>

#include "internal.h"
#include "libra_layout_params.h"

/* dst[idx . dst_st] = src[idx . src_st] over `shape`, 4-byte elements. */
static void strided_copy(int nd, const int64_t* shape_in, const int64_t* dst_in,
                         const int64_t* src_in, uint32_t* dst, const uint32_t* src) {
  int64_t shape[MAX_DIMS_C], ds[MAX_DIMS_C], ss[MAX_DIMS_C];
  int64_t n = 1;
  int k = 0;
  for (int i = 0; i < nd; i++) {
    n *= shape_in[i];
    if (shape_in[i] == 1) continue;
    if (k > 0 && ds[k - 1] == dst_in[i] * shape_in[i] && ss[k - 1] == src_in[i] * shape_in[i]) {
      shape[k - 1] *= shape_in[i];
      ds[k - 1] = dst_in[i];
      ss[k - 1] = src_in[i];
      continue;
    }
    shape[k] = shape_in[i];
    ds[k] = dst_in[i];
    ss[k] = src_in[i];
    k++;
  }
  if (n == 0) return;
  if (k == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[k - 1], rows = n / inner, di = ds[k - 1], si = ss[k - 1];
  PAR_FOR(n > PAR_MIN,
  for (int64_t r = 0; r < rows; r++) {
    int64_t od = 0, os = 0, q = r;
    for (int d = k - 2; d >= 0; d--) {
      const int64_t i = q % shape[d];
      q /= shape[d];
      od += i * ds[d];
      os += i * ss[d];
    }
    uint32_t* dr = dst + od;
    const uint32_t* sr = src + os;
    if (di == 1 && si == 1) {
      memcpy(dr, sr, (size_t)inner * 4);
    } else {
      for (int64_t i = 0; i < inner; i++) dr[i * di] = sr[i * si];
    }
  });
}

int32_t k_permute(const kcall* c) {
  permute_params q;
  TRY(permute_parse(c, &q));
  int64_t yst[MAX_DIMS_C];
  contiguous_strides(q.nd, q.ys, yst);
  strided_copy(q.nd, q.ys, yst, q.sst, (uint32_t*)c->out[0], (const uint32_t*)c->in[0]);
  return LIBRA_OK;
}

static int32_t slice_like(const kcall* c, int backward) {
  slice_params q;
  TRY(slice_parse(c, &q));
  int64_t yst[MAX_DIMS_C];
  contiguous_strides(q.nd, q.ys, yst);
  if (!backward) {
    strided_copy(q.nd, q.ys, yst, q.xst, (uint32_t*)c->out[0], (const uint32_t*)c->in[0] + q.off);
  } else {
    if (q.nx > 0) memset(c->out[0], 0, (size_t)q.nx * 4);
    strided_copy(q.nd, q.ys, q.xst, yst, (uint32_t*)c->out[0] + q.off, (const uint32_t*)c->in[0]);
  }
  return LIBRA_OK;
}

int32_t k_slice(const kcall* c) { return slice_like(c, 0); }
int32_t k_slice_backward(const kcall* c) { return slice_like(c, 1); }

int32_t k_concat(const kcall* c) {
  concat_params q;
  TRY(concat_parse(c, &q));
  const int64_t nin = q.nin, outer = q.outer, inner = q.inner, total = q.total;
  uint32_t* Y = (uint32_t*)c->out[0];
  const int64_t tasks = outer * nin;
  PAR_FOR(outer * total * inner > PAR_MIN,
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t o = t / nin, j = t % nin;
    int64_t before = 0;
    for (int64_t q = 0; q < j; q++) before += (int64_t)c->p[3 + q];
    const int64_t d = (int64_t)c->p[3 + j];
    if (d * inner == 0) continue;
    memcpy(Y + (o * total + before) * inner, (const uint32_t*)c->in[j] + o * d * inner,
           (size_t)(d * inner) * 4);
  });
  return LIBRA_OK;
}

/* Checks every index is in [0, limit); names the first bad one. */
static int32_t check_indices(const kcall* c, const int32_t* idx, int64_t n, int64_t limit,
                             const char* what, const char* limit_name) {
  for (int64_t j = 0; j < n; j++) {
    if (idx[j] < 0 || idx[j] >= limit) {
      return kfail(c, "%s[%lld] = %d is out of range [0, %s = %lld)", what, (long long)j, idx[j],
                   limit_name, (long long)limit);
    }
  }
  return LIBRA_OK;
}

int32_t k_index_select(const kcall* c) {
  PINT(outer, 0, 0, "outer");
  PINT(dim, 1, 0, "dim");
  PINT(inner, 2, 0, "inner");
  PINT(nidx, 3, 0, "nIdx");
  const int32_t* idx = IN_I(1);
  int32_t s = check_indices(c, idx, nidx, dim, "idx", "dim");
  if (s) return s;
  const uint32_t* X = (const uint32_t*)c->in[0];
  uint32_t* Y = (uint32_t*)c->out[0];
  const int64_t tasks = outer * nidx;
  if (inner == 0) return LIBRA_OK;
  PAR_FOR(tasks * inner > PAR_MIN,
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t o = t / nidx, j = t % nidx;
    memcpy(Y + t * inner, X + (o * dim + idx[j]) * inner, (size_t)inner * 4);
  });
  return LIBRA_OK;
}

#define ICHUNK 256

int32_t k_index_select_backward(const kcall* c) {
  PINT(outer, 0, 0, "outer");
  PINT(dim, 1, 0, "dim");
  PINT(inner, 2, 0, "inner");
  PINT(nidx, 3, 0, "nIdx");
  const int32_t* idx = IN_I(1);
  int32_t s = check_indices(c, idx, nidx, dim, "idx", "dim");
  if (s) return s;
  const float* GY = IN_F(0);
  float* GX = OUT_F(0);
  if (outer * dim * inner > 0) memset(GX, 0, (size_t)(outer * dim * inner) * 4);
  const int64_t chunks = (inner + ICHUNK - 1) / ICHUNK, tasks = outer * chunks;
  PAR_FOR(outer * nidx * inner > PAR_MIN,
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t o = t / chunks, i0 = (t % chunks) * ICHUNK;
    const int64_t len = inner - i0 < ICHUNK ? inner - i0 : ICHUNK;
    for (int64_t j = 0; j < nidx; j++) {
      float* dst = GX + (o * dim + idx[j]) * inner + i0;
      const float* src = GY + (o * nidx + j) * inner + i0;
      for (int64_t i = 0; i < len; i++) dst[i] += src[i];
    }
  });
  return LIBRA_OK;
}

int32_t k_embedding(const kcall* c) {
  PINT(nids, 0, 0, "nIds");
  PINT(vocab, 1, 0, "vocab");
  PINT(dim, 2, 0, "dim");
  const int32_t* ids = IN_I(1);
  int32_t s = check_indices(c, ids, nids, vocab, "ids", "vocab");
  if (s) return s;
  const uint32_t* W = (const uint32_t*)c->in[0];
  uint32_t* Y = (uint32_t*)c->out[0];
  if (dim == 0) return LIBRA_OK;
  PAR_FOR(nids * dim > PAR_MIN,
  for (int64_t j = 0; j < nids; j++) memcpy(Y + j * dim, W + (int64_t)ids[j] * dim, (size_t)dim * 4););
  return LIBRA_OK;
}

int32_t k_embedding_backward(const kcall* c) {
  PINT(nids, 0, 0, "nIds");
  PINT(vocab, 1, 0, "vocab");
  PINT(dim, 2, 0, "dim");
  const int32_t* ids = IN_I(1);
  int32_t s = check_indices(c, ids, nids, vocab, "ids", "vocab");
  if (s) return s;
  const float* GY = IN_F(0);
  float* GW = OUT_F(0);
  if (vocab * dim > 0) memset(GW, 0, (size_t)(vocab * dim) * 4);
  if (dim == 0) return LIBRA_OK;
  /* Row ids[j] belongs to part ids[j] % parts; each part adds its rows in increasing j. */
  const int64_t parts = nids * dim > PAR_MIN ? libra_threads() : 1;
  PAR_FOR(parts > 1,
  for (int64_t part = 0; part < parts; part++) {
    for (int64_t j = 0; j < nids; j++) {
      if (ids[j] % parts != part) continue;
      float* dst = GW + (int64_t)ids[j] * dim;
      const float* src = GY + j * dim;
      for (int64_t i = 0; i < dim; i++) dst[i] += src[i];
    }
  });
  return LIBRA_OK;
}
