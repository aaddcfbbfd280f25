/*
 * conv_wgrad.c - the weight gradient of a conv2d as register-tiled dot products over
 * whole images, with no column matrix:
 *
 *   gw[k, ch, r, s] = sum_n sum_t gy_n[k, t] xs_n[s][((ch*sh + r*dh % sh)*Hq + r*dh / sh)*OW + t]
 *
 * where plane set xs_n[s] holds image n zero-padded to Hp rows, split into sh row phases
 * of Hq = ceil(Hp/sh) rows, sampled at columns ow*sw + s*dw and cut to OW columns
 * (xs[s][ch, p, i, ow] = padded x[ch, i*sh + p, ow*sw + s*dw]), so output pixel
 * t = oh*OW + ow meets padded input (oh*sh + r*dh, ow*sw + s*dw) at offset t of the tap's
 * run. For stride 1 there is one phase and the planes are the padded image shifted by
 * each column tap. Both operands of every dot product are contiguous runs of OH*OW floats (gy
 * zero-padded to a multiple of 16), so a 4 x NB tile of (k, row of gw^T) keeps 4*NB
 * vector accumulators in registers, loading 4 + NB vectors per 4*NB fused multiply-adds.
 *
 * Determinism: lane j of an accumulator sums the terms t = j (mod 16) in (n, t) order;
 * the 16 lanes are added in a fixed tree at the end. Threads split the tiles, never
 * the images, so every element is computed the same way at any thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef float v16 __attribute__((vector_size(64), aligned(4)));

enum { VL = 16, MK = 4 };
#ifdef __AVX512F__
enum { NB = 6 }; /* 24 accumulators + 4 gy vectors + 1 x vector of 32 zmm */
#else
enum { NB = 2 }; /* a v16 is two ymm (AVX2) or four xmm: keep the tile small */
#endif

/* Buffers kept between calls on this thread (padded x, padded gy, vector accumulators);
 * over KEEP bytes they are released after the call. */
#define KEEP ((int64_t)64 << 20)
static _Thread_local float* buf[3];
static _Thread_local int64_t cap[3];

static float* get(int slot, int64_t floats) {
  if (floats < 1) floats = 1;
  if (cap[slot] >= floats) return buf[slot];
  free(buf[slot]);
  /* 64-byte aligned: whole cache lines for the gy vectors */
  buf[slot] = aligned_alloc(64, (sizeof(float) * (size_t)floats + 63) / 64 * 64);
  cap[slot] = buf[slot] ? floats : 0;
  return buf[slot];
}

static void done(void) {
  for (int i = 0; i < 3; i++) {
    if (cap[i] * 4 > KEEP) {
      free(buf[i]);
      buf[i] = NULL;
      cap[i] = 0;
    }
  }
}

/* acc[a][b] += sum over images i < n, then t < len (step 16), of
 * g[i*gn + a*gs + t] * x[b][i*xn + t]. */
__attribute__((always_inline, optimize("fp-contract=fast"))) static inline void tile_body(
    const float* g, int64_t gs, int64_t gn, const float* const* x, int64_t xn, int64_t n,
    int64_t len, v16 acc[MK][NB]) {
  v16 c[MK][NB];
  for (int a = 0; a < MK; a++) {
    for (int b = 0; b < NB; b++) c[a][b] = acc[a][b];
  }
  const float* xb[NB];
  for (int b = 0; b < NB; b++) xb[b] = x[b];
  for (int64_t i = 0; i < n; i++, g += gn) {
  for (int b = 0; b < NB; b++) xb[b] = x[b] + i * xn;
  for (int64_t t = 0; t < len; t += VL) {
    v16 gv[MK];
    for (int a = 0; a < MK; a++) gv[a] = *(const v16*)(g + a * gs + t);
    for (int b = 0; b < NB; b++) {
      v16 xv = *(const v16*)(xb[b] + t);
#if defined(__AVX512F__)
      __asm__("" : "+v"(xv)); /* one load per x vector, not one per multiply-add */
#endif
      for (int a = 0; a < MK; a++) c[a][b] += gv[a] * xv;
    }
  }
  }
  for (int a = 0; a < MK; a++) {
    for (int b = 0; b < NB; b++) acc[a][b] = c[a][b];
  }
}

/* tile_body with the run length fixed at compile time for short runs (8x8 outputs: 4
 * vectors per image), so the per-image loop is straight-line code */
__attribute__((noinline, optimize("fp-contract=fast"))) static void tile(
    const float* g, int64_t gs, int64_t gn, const float* const* x, int64_t xn, int64_t n,
    int64_t len, v16 acc[MK][NB]) {
  if (len == 4 * VL) {
    tile_body(g, gs, gn, x, xn, n, 4 * VL, acc);
  } else {
    tile_body(g, gs, gn, x, xn, n, len, acc);
  }
}

/* the 16 lanes in a fixed tree: lane i += lane i + 8, then i + 4, i + 2, i + 1 */
static float hsum(v16 v) {
  typedef float v8h __attribute__((vector_size(32)));
  typedef float v4h __attribute__((vector_size(16)));
  const v8h h8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4h h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) +
                 __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
  const float h20 = h4[0] + h4[2], h21 = h4[1] + h4[3];
  return h20 + h21;
}

typedef float v8 __attribute__((vector_size(32), aligned(4)));

/* d[0, n) = s[0, n) in 8-float blocks: rows here are short (often 8..32 floats), too short
 * for a memcpy call per row */
static inline void copy_run(float* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) *(v8*)(d + i) = *(const v8*)(s + i);
  for (; i < n; i++) d[i] = s[i];
}

/* Unit column stride, moderate widths: each input row is zero-padded once into a local row,
 * and every column tap's run is a plain copy out of it. */
enum { ROW_MAX = 2048 };
static void shifted_unit(const float* X, int64_t C, int64_t H, int64_t W, int64_t S, int64_t ph,
                         int64_t pw, int64_t sh, int64_t dw, int64_t OW, float* xs, int64_t PS,
                         int64_t Hq) {
  float row[ROW_MAX];
  const int64_t U = (S - 1) * dw + OW; /* padded columns read, from padded column 0 */
  const int64_t in0 = pw < U ? pw : U, in1 = pw + W < U ? pw + W : U;
  for (int64_t u = 0; u < in0; u++) row[u] = 0.0f;
  for (int64_t u = in1; u < U; u++) row[u] = 0.0f;
  for (int64_t ch = 0; ch < C; ch++) {
    for (int64_t ph2 = 0; ph2 < sh; ph2++) {
      for (int64_t i = 0; i < Hq; i++) {
        const int64_t o = ((ch * sh + ph2) * Hq + i) * OW;
        const int64_t ih = i * sh + ph2 - ph;
        if (ih < 0 || ih >= H) {
          for (int64_t s = 0; s < S; s++) memset(xs + s * PS + o, 0, sizeof(float) * (size_t)OW);
          continue;
        }
        copy_run(row + in0, X + (ch * H + ih) * W + (in0 - pw), in1 - in0);
        for (int64_t s = 0; s < S; s++) copy_run(xs + s * PS + o, row + s * dw, OW);
      }
    }
  }
}

void libra_conv_shifted(const float* X, int64_t C, int64_t H, int64_t W, int64_t S, int64_t ph,
                        int64_t pw, int64_t sh, int64_t sw, int64_t dw, int64_t OW, float* xs,
                        int64_t PS) {
  const int64_t Hp = H + 2 * ph, Hq = (Hp + sh - 1) / sh;
  if (sw == 1 && (S - 1) * dw + OW <= ROW_MAX) {
    shifted_unit(X, C, H, W, S, ph, pw, sh, dw, OW, xs, PS, Hq);
    return;
  }
  for (int64_t s = 0; s < S; s++) {
    const int64_t a = s * dw - pw; /* input column of ow = 0 */
    /* output columns whose input column a + ow*sw lies in [0, W): [lo, hi) */
    int64_t lo = a < 0 ? (-a + sw - 1) / sw : 0;
    int64_t hi = W - 1 - a < 0 ? 0 : (W - 1 - a) / sw + 1;
    if (lo > OW) lo = OW;
    if (hi > OW) hi = OW;
    if (hi < lo) hi = lo;
    for (int64_t ch = 0; ch < C; ch++) {
      for (int64_t ph2 = 0; ph2 < sh; ph2++) {
        for (int64_t i = 0; i < Hq; i++) {
          float* d = xs + s * PS + ((ch * sh + ph2) * Hq + i) * OW;
          const int64_t ih = i * sh + ph2 - ph;
          if (ih < 0 || ih >= H) {
            memset(d, 0, sizeof(float) * (size_t)OW);
            continue;
          }
          const float* src = X + (ch * H + ih) * W + a;
          for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0.0f;
          if (sw == 1) {
            memcpy(d + lo, src + lo, sizeof(float) * (size_t)(hi - lo));
          } else {
            for (int64_t ow = lo; ow < hi; ow++) d[ow] = src[ow * sw];
          }
          for (int64_t ow = hi; ow < OW; ow++) d[ow] = 0.0f;
        }
      }
    }
  }
}

int libra_conv_wgrad(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                     int64_t ph, int64_t pw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                     const float* X, const float* GY, float* GW) {
  const int64_t Hp = H + 2 * ph, Wp = W + 2 * pw, Hq = (Hp + sh - 1) / sh;
  const int64_t OH = (Hp - dh * (R - 1) - 1) / sh + 1, OW = (Wp - dw * (S - 1) - 1) / sw + 1;
  const int64_t L = OH * OW;
  const int64_t CRS = C * R * S;
  const int64_t Lp = (L + VL - 1) / VL * VL; /* run length, zero-padded to whole vectors */
  const int64_t PS = C * sh * Hq * OW + VL;  /* one shifted plane set, room for the last run */
  const int64_t XS = S * PS;                 /* per image */
  const int64_t K4 = (K + MK - 1) / MK * MK, J = (CRS + NB - 1) / NB * NB;
  const int64_t KT = K4 / MK, JT = J / NB;
  /* gy is read in place when its rows are whole vectors and whole tiles */
  const int gy_direct = L % VL == 0 && K % MK == 0;
  const int64_t GS = gy_direct ? L : Lp, GN = gy_direct ? K * L : K4 * Lp;
  /* Images are prepared and consumed a chunk at a time, so the chunk stays in cache: about
   * 2048 columns, at most 2 MiB of operands (fixed by the shapes). */
  const int64_t per_image = XS + (gy_direct ? 0 : GN);
  int64_t chunk = (2048 + Lp - 1) / Lp;
  if (chunk * per_image > ((int64_t)1 << 19)) chunk = ((int64_t)1 << 19) / per_image;
  if (chunk < 1) chunk = 1;
  if (chunk > N) chunk = N;
  float* xp = get(0, chunk * XS);
  float* gyp = gy_direct ? NULL : get(1, chunk * GN);
  /* the vector accumulators live in vacc between chunks; with one chunk they never leave
   * the registers */
  const int multi = chunk < N;
  const int64_t VA = multi ? K4 * J * VL : 0;
  float* vacc = get(2, VA + (int64_t)J * 2); /* + the stream offsets */
  if (!xp || (!gy_direct && !gyp) || !vacc) {
    done();
    return -1;
  }
  int64_t* offs = (int64_t*)(vacc + VA);
  for (int64_t j = 0; j < J; j++) {
    const int64_t p = j < CRS ? j : 0; /* padding rows repeat row 0; discarded */
    const int64_t ch = p / (R * S), r = (p / S) % R, s = p % S;
    offs[j] = s * PS + ((ch * sh + r * dh % sh) * Hq + r * dh / sh) * OW;
  }
  if (N == 0) memset(GW, 0, sizeof(float) * (size_t)(K * CRS));
  const int64_t tiles = KT * JT;
  const int64_t T0 = libra_threads();
  const int64_t T = T0 < tiles ? T0 : tiles;
  const int par = T > 1 && K * CRS * L * N > PAR_MIN;
  /* one parallel region: each chunk is prepared (images split across threads), then its
   * tiles are computed (tiles split across threads); the barriers of the two loops order
   * them */
#pragma omp parallel if (par)
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t n1 = n0 + chunk < N ? n0 + chunk : N;
#pragma omp for schedule(static)
    for (int64_t n = n0; n < n1; n++) {
      float* x = xp + (n - n0) * XS;
      libra_conv_shifted(X + n * C * H * W, C, H, W, S, ph, pw, sh, sw, dw, OW, x, PS);
      for (int64_t s = 0; s < S; s++) memset(x + s * PS + C * sh * Hq * OW, 0, sizeof(float) * VL);
      if (!gy_direct) {
        float* g = gyp + (n - n0) * GN;
        for (int64_t k = 0; k < K4; k++) {
          if (k < K) {
            memcpy(g + k * Lp, GY + (n * K + k) * L, sizeof(float) * (size_t)L);
            memset(g + k * Lp + L, 0, sizeof(float) * (size_t)(Lp - L));
          } else {
            memset(g + k * Lp, 0, sizeof(float) * (size_t)Lp);
          }
        }
      }
    }
    const float* gbase = gy_direct ? GY + n0 * GN : gyp;
#pragma omp for schedule(static)
    for (int64_t th = 0; th < T; th++) {
      const int64_t t0 = tiles * th / T, t1 = tiles * (th + 1) / T;
      for (int64_t ti = t0; ti < t1; ti++) {
        /* k fastest: the NB x runs of a tile stay in cache across k */
        const int64_t kt = ti % KT, jt = ti / KT;
        v16 acc[MK][NB];
        for (int a = 0; a < MK; a++) {
          for (int b = 0; b < NB; b++) {
            if (n0 == 0) {
              acc[a][b] = (v16){0};
            } else {
              memcpy(&acc[a][b], vacc + ((kt * MK + a) * J + jt * NB + b) * VL, sizeof(v16));
            }
          }
        }
        const float* xs[NB];
        for (int b = 0; b < NB; b++) xs[b] = xp + offs[jt * NB + b];
        tile(gbase + kt * MK * GS, GS, GN, xs, XS, n1 - n0, Lp, acc);
        for (int a = 0; a < MK; a++) {
          for (int b = 0; b < NB; b++) {
            const int64_t k = kt * MK + a, j = jt * NB + b;
            if (n1 < N) {
              memcpy(vacc + (k * J + j) * VL, &acc[a][b], sizeof(v16));
            } else if (k < K && j < CRS) {
              GW[k * CRS + j] = hsum(acc[a][b]);
            }
          }
        }
      }
    }
  }
  done();
  return 0;
}
