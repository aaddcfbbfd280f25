/* libra_layout_params.h - the params of permute, slice, slice_backward and concat, read and
 * checked for both builds (native/cpu/layout.c, native/cuda/layout.cu; host code, valid C11
 * and C++17). Include after libra_kcall.h. */
#ifndef LIBRA_LAYOUT_PARAMS_H
#define LIBRA_LAYOUT_PARAMS_H

#include <stdint.h>

#include "libra_kcall.h"

/* Reads "ndim, then `lists` lists of ndim integers >= 0" (the first list x's shape, whose
 * element count must pass pmul). */
static inline int32_t read_ndim(const kcall* c, int lists, const char* layout, int64_t* ndim) {
  if (pndim(c, ndim)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (pcount(c, (int32_t)(1 + lists * *ndim), layout)) return LIBRA_ERR_INVALID_ARGUMENT;
  for (int i = 1; i < c->np; i++) {
    int64_t v;
    if (pint(c, i, 0, "shape/index param", &v)) return LIBRA_ERR_INVALID_ARGUMENT;
  }
  int64_t xs[MAX_DIMS_C], n;
  for (int i = 0; i < *ndim; i++) xs[i] = (int64_t)c->p[1 + i];
  if (pmul(c, xs, (int)*ndim, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  return LIBRA_OK;
}

/* permute's "ndim, xShape[ndim], perm[ndim]": y's shape ys (ys[i] = xs[perm[i]]) and the
 * strides sst at which y's dims step through x (x's contiguous stride of dim perm[i]). */
typedef struct permute_params {
  int nd;
  int64_t ys[MAX_DIMS_C], sst[MAX_DIMS_C];
} permute_params;

static inline int32_t permute_parse(const kcall* c, permute_params* q) {
  int64_t ndim;
  TRY(read_ndim(c, 2, "ndim, xShape[ndim], perm[ndim]", &ndim));
  int64_t xs[MAX_DIMS_C], xst[MAX_DIMS_C];
  int seen[MAX_DIMS_C] = {0};
  for (int i = 0; i < ndim; i++) xs[i] = (int64_t)c->p[1 + i];
  for (int i = 0; i < ndim; i++) {
    const int64_t pi = (int64_t)c->p[1 + ndim + i];
    if (pi >= ndim || seen[pi]) {
      return kfail(c, "perm is not a permutation of 0..%lld (perm[%d] = %lld)", (long long)ndim - 1,
                   i, (long long)pi);
    }
    seen[pi] = 1;
  }
  contiguous_strides((int)ndim, xs, xst);
  q->nd = (int)ndim;
  for (int i = 0; i < ndim; i++) {
    const int64_t pi = (int64_t)c->p[1 + ndim + i];
    q->ys[i] = xs[pi];
    q->sst[i] = xst[pi];
  }
  return LIBRA_OK;
}

/* slice's and slice_backward's "ndim, xShape[ndim], starts[ndim], yShape[ndim]": the window
 * [starts, starts + yShape) of x; nx = x's element count, off = the window's first element. */
typedef struct slice_params {
  int nd;
  int64_t xs[MAX_DIMS_C], st[MAX_DIMS_C], ys[MAX_DIMS_C];
  int64_t xst[MAX_DIMS_C]; /* x's contiguous strides */
  int64_t nx, off;
} slice_params;

static inline int32_t slice_parse(const kcall* c, slice_params* q) {
  int64_t ndim;
  TRY(read_ndim(c, 3, "ndim, xShape[ndim], starts[ndim], yShape[ndim]", &ndim));
  q->nd = (int)ndim;
  for (int i = 0; i < ndim; i++) {
    q->xs[i] = (int64_t)c->p[1 + i];
    q->st[i] = (int64_t)c->p[1 + ndim + i];
    q->ys[i] = (int64_t)c->p[1 + 2 * ndim + i];
    if (q->st[i] + q->ys[i] > q->xs[i]) {
      return kfail(c, "dimension %d: start %lld + size %lld exceeds %lld", i, (long long)q->st[i],
                   (long long)q->ys[i], (long long)q->xs[i]);
    }
  }
  if (pmul(c, q->xs, q->nd, &q->nx)) return LIBRA_ERR_INVALID_ARGUMENT;
  contiguous_strides(q->nd, q->xs, q->xst);
  q->off = 0;
  for (int i = 0; i < ndim; i++) q->off += q->st[i] * q->xst[i];
  return LIBRA_OK;
}

/* concat's "nInputs, outer, inner, d[nInputs]" (one input buffer per part): y [outer,
 * total, inner] is the parts x_j [outer, d[j], inner] side by side, total = sum of d. */
typedef struct concat_params {
  int64_t nin, outer, inner, total;
} concat_params;

static inline int32_t concat_parse(const kcall* c, concat_params* q) {
  if (c->np < 1) return kfail(c, "expected params (nInputs, outer, inner, d[nInputs]), got none");
  if (pint(c, 0, 1, "nInputs", &q->nin)) return LIBRA_ERR_INVALID_ARGUMENT;
  const int64_t nin = q->nin;
  if (c->np != 3 + nin) {
    return kfail(c, "expected %lld params (nInputs, outer, inner, d[%lld]), got %d",
                 (long long)(3 + nin), (long long)nin, c->np);
  }
  if (c->n_in != nin) {
    return kfail(c, "nInputs is %lld but %d input buffers were passed", (long long)nin, c->n_in);
  }
  if (pint(c, 1, 0, "outer", &q->outer) || pint(c, 2, 0, "inner", &q->inner)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  q->total = 0;
  for (int j = 0; j < nin; j++) {
    int64_t d;
    if (pint(c, 3 + j, 0, "d", &d)) return LIBRA_ERR_INVALID_ARGUMENT;
    q->total += d;
  }
  int64_t dims[3] = {q->outer, q->total, q->inner}, n;
  if (pmul(c, dims, 3, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  return LIBRA_OK;
}

#endif /* LIBRA_LAYOUT_PARAMS_H */
