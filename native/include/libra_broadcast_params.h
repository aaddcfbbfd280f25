/* libra_broadcast_params.h - the params of the broadcasting kernels (binary ops, where, expand)
 * and of sum_to, read, checked and collapsed for both builds (native/cpu/elementwise.c,
 * native/cuda/elementwise.cu; host code, valid C11 and C++17). Include after libra_kcall.h. */
#ifndef LIBRA_BROADCAST_PARAMS_H
#define LIBRA_BROADCAST_PARAMS_H

#include <stdint.h>

#include "libra_kcall.h"

#define MAXOPS 4 /* output + up to three inputs */

/* A broadcast over the output's shape, collapsed: size-1 dims dropped and neighbours merged
 * where every operand is contiguous across them (at least one dim). */
typedef struct bview {
  int nd;
  int nops;
  int64_t n;
  int64_t shape[MAX_DIMS_C];
  int64_t st[MAXOPS][MAX_DIMS_C]; /* st[0] = output (contiguous), st[1..] = inputs */
} bview;

/* Parses "ndim, outShape[ndim], strides[ndim] x k" into a collapsed view. */
static inline int32_t bview_parse(const kcall* c, int k, bview* v) {
  int64_t ndim;
  if (pndim(c, &ndim)) return LIBRA_ERR_INVALID_ARGUMENT;
  int32_t need = (int32_t)(1 + ndim * (k + 1));
  if (c->np != need) {
    return kfail(c, "expected %d params (ndim, outShape[%lld], %d stride lists of %lld), got %d",
                 need, (long long)ndim, k, (long long)ndim, c->np);
  }
  int64_t shape[MAX_DIMS_C], st[MAXOPS][MAX_DIMS_C];
  for (int i = 0; i < ndim; i++) {
    if (pint(c, 1 + i, 0, "outShape", &shape[i])) return LIBRA_ERR_INVALID_ARGUMENT;
  }
  int64_t n;
  if (pmul(c, shape, (int)ndim, &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  for (int j = 0; j < k; j++) {
    for (int i = 0; i < ndim; i++) {
      if (pint(c, (int)(1 + ndim * (j + 1) + i), 0, "stride", &st[j + 1][i])) {
        return LIBRA_ERR_INVALID_ARGUMENT;
      }
    }
  }
  contiguous_strides((int)ndim, shape, st[0]);
  v->nops = k + 1;
  v->n = n;
  /* drop size-1 dims, then merge contiguous neighbours */
  int nd = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    v->shape[nd] = shape[i];
    for (int j = 0; j <= k; j++) v->st[j][nd] = st[j][i];
    nd++;
  }
  if (nd == 0) {
    v->shape[0] = 1;
    for (int j = 0; j <= k; j++) v->st[j][0] = 1;
    nd = 1;
  }
  int w = 0;
  for (int i = 1; i < nd; i++) {
    int merge = 1;
    for (int j = 0; j <= k; j++) {
      if (v->st[j][w] != v->st[j][i] * v->shape[i]) merge = 0;
    }
    if (merge) {
      v->shape[w] *= v->shape[i];
      for (int j = 0; j <= k; j++) v->st[j][w] = v->st[j][i];
    } else {
      w++;
      v->shape[w] = v->shape[i];
      for (int j = 0; j <= k; j++) v->st[j][w] = v->st[j][i];
    }
  }
  v->nd = w + 1;
  return LIBRA_OK;
}

/* sum_to's "ndim, xShape[ndim], yShape[ndim]": each yShape[i] is 1 or xShape[i]. */
typedef struct sumto_params {
  int nd;
  int64_t xs[MAX_DIMS_C], ys[MAX_DIMS_C];
  int64_t xstr[MAX_DIMS_C]; /* x's contiguous strides */
  int64_t nx, ny;           /* element counts of x and y */
} sumto_params;

static inline int32_t sum_to_parse(const kcall* c, sumto_params* q) {
  int64_t ndim;
  if (pndim(c, &ndim)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (pcount(c, (int32_t)(1 + 2 * ndim), "ndim, xShape[ndim], yShape[ndim]")) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  q->nd = (int)ndim;
  for (int i = 0; i < ndim; i++) {
    if (pint(c, 1 + i, 0, "xShape", &q->xs[i]) ||
        pint(c, (int)(1 + ndim + i), 0, "yShape", &q->ys[i])) {
      return LIBRA_ERR_INVALID_ARGUMENT;
    }
    if (q->ys[i] != 1 && q->ys[i] != q->xs[i]) {
      return kfail(c, "yShape[%d] = %lld must be 1 or xShape[%d] = %lld", i, (long long)q->ys[i],
                   i, (long long)q->xs[i]);
    }
  }
  if (pmul(c, q->xs, q->nd, &q->nx) || pmul(c, q->ys, q->nd, &q->ny)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  contiguous_strides(q->nd, q->xs, q->xstr);
  return LIBRA_OK;
}

#endif /* LIBRA_BROADCAST_PARAMS_H */
