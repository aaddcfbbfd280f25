/* libra_kernel_params.h - the params of the reduction, normalization, matmul, random,
 * optimizer and LSTM kernels, read and checked for both builds (native/cpu/{reduce,norm,matmul,
 * random,loss_optim,elementwise}.c, native/cuda/{reduce,norm,matmul,random_optim,elementwise}.cu;
 * host code, valid C11 and C++17). Include after libra_kcall.h. Element counts go through pmul (pints). */
#ifndef LIBRA_KERNEL_PARAMS_H
#define LIBRA_KERNEL_PARAMS_H

#include <math.h>
#include <stdint.h>

#include "libra_kcall.h"

/* "outer, dim, inner": x viewed as [outer, dim, inner], reduced over dim. */
static inline int32_t read_odi(const kcall* c, int64_t* outer, int64_t* dim, int64_t* inner) {
  static const char* const names[] = {"outer", "dim", "inner"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  *outer = v[0];
  *dim = v[1];
  *inner = v[2];
  return LIBRA_OK;
}

/* max_axis, argmax_axis and max_axis_backward need dim >= 1 unless the output is empty. */
static inline int32_t need_dim(const kcall* c, int64_t outer, int64_t dim, int64_t inner) {
  if (dim == 0 && outer * inner > 0) {
    return kfail(c,
                 "dim must be >= 1 (no maximum of an empty axis), got outer %lld, dim 0, inner %lld",
                 (long long)outer, (long long)inner);
  }
  return LIBRA_OK;
}

/* "rows, cols" of the row-wise kernels (softmax family, layer norm, RMS norm). */
static inline int32_t read_rc(const kcall* c, int64_t* rows, int64_t* cols) {
  static const char* const names[] = {"rows", "cols"};
  int64_t v[2];
  if (pints(c, v, names, 2)) return LIBRA_ERR_INVALID_ARGUMENT;
  *rows = v[0];
  *cols = v[1];
  return LIBRA_OK;
}

/* "N, C, HW" of the batch norm kernels. */
static inline int32_t read_nchw(const kcall* c, int64_t* N, int64_t* C, int64_t* HW) {
  static const char* const names[] = {"N", "C", "HW"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  *N = v[0];
  *C = v[1];
  *HW = v[2];
  return LIBRA_OK;
}

/* Param i as eps: finite and >= 0. */
static inline int32_t read_eps(const kcall* c, int i, double* eps) {
  if (preal(c, i, "eps", eps)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (*eps < 0) return kfail(c, "eps (param %d) must be >= 0, got %.17g", i, *eps);
  return LIBRA_OK;
}

/* matmul's "batch, m, n, k, transA, transB, strideA, strideB": C_i [m, n] = op(A_i) op(B_i)
 * with A_i = a + i*strideA ([m, k], or stored [k, m] when transA) and likewise B_i. */
typedef struct matmul_params {
  int64_t batch, m, n, k, ta, tb, sa, sb;
} matmul_params;

static inline int32_t matmul_parse(const kcall* c, matmul_params* q) {
  if (pint(c, 0, 0, "batch", &q->batch) || pint(c, 1, 0, "m", &q->m) ||
      pint(c, 2, 0, "n", &q->n) || pint(c, 3, 0, "k", &q->k) || pint(c, 4, 0, "transA", &q->ta) ||
      pint(c, 5, 0, "transB", &q->tb) || pint(c, 6, 0, "strideA", &q->sa) ||
      pint(c, 7, 0, "strideB", &q->sb)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  if (q->ta > 1 || q->tb > 1) {
    return kfail(c, "transA/transB must be 0 or 1, got %lld/%lld", (long long)q->ta,
                 (long long)q->tb);
  }
  int64_t dims[4] = {q->batch, q->m, q->n, q->k}, total;
  if (pmul(c, dims, 4, &total)) return LIBRA_ERR_INVALID_ARGUMENT;
  return LIBRA_OK;
}

/* linear's "m, n, k": y [m, n] = x [m, k] w [n, k]^T + b [n]. */
static inline int32_t linear_parse(const kcall* c, int64_t* m, int64_t* n, int64_t* k) {
  static const char* const names[] = {"m", "n", "k"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  *m = v[0];
  *n = v[1];
  *k = v[2];
  return LIBRA_OK;
}

/* dropout's and dropout_backward's "n, p, seed, offset" (p in [0, 1]). */
typedef struct dropout_params {
  int64_t n, seed, offset;
  double p;
} dropout_params;

static inline int32_t dropout_parse(const kcall* c, dropout_params* q) {
  if (pint(c, 0, 0, "n", &q->n) || preal(c, 1, "p", &q->p) || pint(c, 2, 0, "seed", &q->seed) ||
      pint(c, 3, 0, "offset", &q->offset)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  if (q->p < 0.0 || q->p > 1.0) return kfail(c, "p (param 1) must be in [0, 1], got %.17g", q->p);
  return LIBRA_OK;
}

/* rand_uniform's "n, seed, offset, low, high" and rand_normal's "n, seed, offset, mean, std"
 * (a, b). */
typedef struct rand_params {
  int64_t n, seed, offset;
  double a, b;
} rand_params;

static inline int32_t rand_parse(const kcall* c, const char* a, const char* b, rand_params* q) {
  if (pint(c, 0, 0, "n", &q->n) || pint(c, 1, 0, "seed", &q->seed) ||
      pint(c, 2, 0, "offset", &q->offset) || preal(c, 3, a, &q->a) || preal(c, 4, b, &q->b)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  return LIBRA_OK;
}

/* sgd_update's "n, lr, momentum, dampening, weightDecay, nesterov, firstStep" (sgd_update_multi's
 * with "count" for "n": `first` names param 0). */
typedef struct sgd_params {
  int64_t n, nesterov, first;
  double lr, momentum, dampening, wd;
} sgd_params;

static inline int32_t sgd_parse_as(const kcall* c, const char* first, sgd_params* q) {
  if (pint(c, 0, 0, first, &q->n) || preal(c, 1, "lr", &q->lr) ||
      preal(c, 2, "momentum", &q->momentum) || preal(c, 3, "dampening", &q->dampening) ||
      preal(c, 4, "weightDecay", &q->wd) || pint(c, 5, 0, "nesterov", &q->nesterov) ||
      pint(c, 6, 0, "firstStep", &q->first)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  if (q->nesterov > 1 || q->first > 1) {
    return kfail(c, "nesterov and firstStep must be 0 or 1, got %lld and %lld",
                 (long long)q->nesterov, (long long)q->first);
  }
  return LIBRA_OK;
}

static inline int32_t sgd_parse(const kcall* c, sgd_params* q) {
  return sgd_parse_as(c, "n", q);
}

/* adamw_update's "n, lr, beta1, beta2, eps, weightDecay, step" and the derived bias
 * corrections bc1 = 1 - beta1^step, bc2 = 1 - beta2^step and decay = 1 - lr * weightDecay. */
typedef struct adamw_params {
  int64_t n, step;
  double lr, b1, b2, eps, wd, bc1, bc2, decay;
} adamw_params;

static inline int32_t adamw_parse_as(const kcall* c, const char* first, adamw_params* q) {
  if (pint(c, 0, 0, first, &q->n) || preal(c, 1, "lr", &q->lr) || preal(c, 2, "beta1", &q->b1) ||
      preal(c, 3, "beta2", &q->b2) || preal(c, 4, "eps", &q->eps) ||
      preal(c, 5, "weightDecay", &q->wd) || pint(c, 6, 1, "step", &q->step)) {
    return LIBRA_ERR_INVALID_ARGUMENT;
  }
  q->bc1 = 1.0 - pow(q->b1, (double)q->step);
  q->bc2 = 1.0 - pow(q->b2, (double)q->step);
  q->decay = 1.0 - q->lr * q->wd;
  return LIBRA_OK;
}

static inline int32_t adamw_parse(const kcall* c, adamw_params* q) {
  return adamw_parse_as(c, "n", q);
}

/* The *_multi updates' "count, <the update's six params>, n[count]": `count` tensors of `stride`
 * input buffers each (the update's own, in order), tensor t of n[t] elements. */
#define MULTI_LAYOUT(p1_6) "count, " p1_6 ", n[count]"

/* Before the update's own params are read: at least the seven fixed ones. */
static inline int32_t multi_min(const kcall* c, const char* layout) {
  if (c->np < 7) return kfail(c, "expected at least 7 params (%s), got %d", layout, c->np);
  return LIBRA_OK;
}

/* After: the param and buffer counts `count` and `stride` imply, and every n[t] (read again
 * with multi_n). */
static inline int32_t multi_check(const kcall* c, int64_t count, int64_t stride) {
  if (c->np != 7 + count) {
    return kfail(c, "expected %lld params (count, 6 update params, n[count = %lld]), got %d",
                 (long long)(7 + count), (long long)count, c->np);
  }
  if (c->n_in != stride * count) {
    return kfail(c, "expected %lld input buffers (%lld tensors of %lld), got %d",
                 (long long)(stride * count), (long long)count, (long long)stride, c->n_in);
  }
  for (int64_t t = 0; t < count; t++) {
    int64_t n;
    if (pint(c, (int)(7 + t), 0, "n[t]", &n)) return LIBRA_ERR_INVALID_ARGUMENT;
  }
  return LIBRA_OK;
}

/* n[t] of a call multi_check passed. */
static inline int64_t multi_n(const kcall* c, int64_t t) {
  return (int64_t)c->p[7 + t];
}

/* sgd_update_multi's params: q->n is the count; `stride` 3 buffers a tensor with momentum
 * (param, grad, momentumBuf), else 2 (param, grad). */
static inline int32_t sgd_multi_parse(const kcall* c, sgd_params* q, int64_t* stride) {
  TRY(multi_min(c, MULTI_LAYOUT("lr, momentum, dampening, weightDecay, nesterov, firstStep")));
  TRY(sgd_parse_as(c, "count", q));
  *stride = q->momentum != 0.0 ? 3 : 2;
  return multi_check(c, q->n, *stride);
}

/* adamw_update_multi's params: q->n is the count; 4 buffers a tensor (param, grad, m, v). */
static inline int32_t adamw_multi_parse(const kcall* c, adamw_params* q) {
  TRY(multi_min(c, MULTI_LAYOUT("lr, beta1, beta2, eps, weightDecay, step")));
  TRY(adamw_parse_as(c, "count", q));
  return multi_check(c, q->n, 4);
}

/* lstm_cell's "batch, hidden". */
static inline int32_t read_bh(const kcall* c, int64_t* b, int64_t* h) {
  static const char* const names[] = {"batch", "hidden"};
  int64_t v[2];
  if (pints(c, v, names, 2)) return LIBRA_ERR_INVALID_ARGUMENT;
  *b = v[0];
  *h = v[1];
  return LIBRA_OK;
}

/* lstm_cell_backward's "batch, hidden, extra": extra (0-2) more h gradients after gnext, which
 * set its input count. */
static inline int32_t lstm_backward_parse(const kcall* c, int64_t* b, int64_t* h, int64_t* extra) {
  static const char* const names[] = {"batch", "hidden", "extra"};
  int64_t v[3];
  if (pints(c, v, names, 3)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (v[2] > 2) return kfail(c, "extra must be 0, 1 or 2, got %lld", (long long)v[2]);
  if (c->n_in != 4 + v[2]) {
    return kfail(c, "expected %lld input buffers (extra %lld), got %d", (long long)(4 + v[2]),
                 (long long)v[2], c->n_in);
  }
  *b = v[0];
  *h = v[1];
  *extra = v[2];
  return LIBRA_OK;
}

/* lstm_step's "batch, steps, hidden, t, recurrent": step t of xw [B, T, 4H]; with recurrent 1
 * the inputs after state are h [B, H] (the step before's) and W_hh [4H, H]. */
typedef struct lstm_step_params {
  int64_t B, T, H, t, rec;
} lstm_step_params;

/* Reads "batch, steps, hidden, t" (t below steps) into q. */
static inline int32_t lstm_bsht_parse(const kcall* c, lstm_step_params* q) {
  static const char* const names[] = {"batch", "steps", "hidden", "t"};
  int64_t v[4];
  if (pints(c, v, names, 4)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (v[3] >= v[1]) {
    return kfail(c, "t = %lld must be below steps = %lld", (long long)v[3], (long long)v[1]);
  }
  q->B = v[0];
  q->T = v[1];
  q->H = v[2];
  q->t = v[3];
  return LIBRA_OK;
}

static inline int32_t lstm_step_parse(const kcall* c, lstm_step_params* q) {
  TRY(lstm_bsht_parse(c, q));
  if (pint(c, 4, 0, "recurrent", &q->rec)) return LIBRA_ERR_INVALID_ARGUMENT;
  if (q->rec > 1) return kfail(c, "recurrent must be 0 or 1, got %lld", (long long)q->rec);
  if (c->n_in != 2 + 2 * q->rec) {
    return kfail(c, "expected %lld input buffers (recurrent %lld), got %d",
                 (long long)(2 + 2 * q->rec), (long long)q->rec, c->n_in);
  }
  return LIBRA_OK;
}

/* lstm_step_backward's "batch, steps, hidden, t": the gradient of h_t through step t + 1 is an
 * input when t < steps - 1, that of h_(t-1) through step t an output when t > 0. */
static inline int32_t lstm_step_backward_parse(const kcall* c, lstm_step_params* q) {
  TRY(lstm_bsht_parse(c, q));
  const int32_t ins = 6 + (q->t < q->T - 1), outs = 2 + (q->t > 0);
  if (c->n_in != ins || c->n_out != outs) {
    return kfail(c, "expected %d input and %d output buffers (t = %lld of %lld steps), got %d and %d",
                 ins, outs, (long long)q->t, (long long)q->T, c->n_in, c->n_out);
  }
  q->rec = q->t > 0;
  return LIBRA_OK;
}

#endif /* LIBRA_KERNEL_PARAMS_H */
