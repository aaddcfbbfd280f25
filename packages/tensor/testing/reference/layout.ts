/**
 * Reference implementations of the layout kernels (the plain-TypeScript twin of `native/cpu/layout.c`).
 *
 * @module
 */

import { KernelError } from "../../backend.ts";
import type { LayoutKernelName } from "../../kernels.ts";
import { type FArr, prod, type RefKernel, stridedOffset } from "./_common.ts";

const refPermute: RefKernel = (_k, ins, outs, p) => {
  const nd = p[0]!;
  const xs = p.slice(1, 1 + nd);
  const perm = p.slice(1 + nd);
  const xstr = new Array<number>(nd);
  let s = 1;
  for (let d = nd - 1; d >= 0; d--) {
    xstr[d] = s;
    s *= xs[d]!;
  }
  const ys = perm.map((q) => xs[q]!);
  const ystr = perm.map((q) => xstr[q]!);
  const xi = ins[0]!.i, yi = outs[0]!.i;
  const n = prod(xs);
  for (let i = 0; i < n; i++) yi[i] = xi[stridedOffset(i, ys, ystr)]!;
  return;
};

const refSlice: RefKernel = (k, ins, outs, p) => {
  const nd = p[0]!;
  const xs = p.slice(1, 1 + nd);
  const st = p.slice(1 + nd, 1 + 2 * nd);
  const ys = p.slice(1 + 2 * nd);
  const xstr = new Array<number>(nd);
  let s = 1;
  let base = 0;
  for (let d = nd - 1; d >= 0; d--) {
    xstr[d] = s;
    base += st[d]! * s;
    s *= xs[d]!;
  }
  const n = prod(ys);
  const src = ins[0]!.i, dst = outs[0]!.i;
  if (k === "slice") {
    for (let i = 0; i < n; i++) dst[i] = src[base + stridedOffset(i, ys, xstr)]!;
  } else {
    dst.fill(0, 0, prod(xs));
    for (let i = 0; i < n; i++) dst[base + stridedOffset(i, ys, xstr)] = src[i]!;
  }
  return;
};

const refConcat: RefKernel = (_k, ins, outs, p) => {
  const [nIn, outer, inner] = p as [number, number, number];
  const ds = p.slice(3);
  const total = ds.reduce((u, v) => u + v, 0);
  const dst = outs[0]!.i;
  let at = 0;
  for (let j = 0; j < nIn; j++) {
    const src = ins[j]!.i;
    const d = ds[j]!;
    for (let o = 0; o < outer; o++) {
      for (let q = 0; q < d * inner; q++) {
        dst[o * total * inner + at * inner + q] = src[o * d * inner + q]!;
      }
    }
    at += d;
  }
  return;
};

const refIndexSelect: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [outer, dim, inner, nIdx] = p as [number, number, number, number];
  const idx = ins[1]!.i;
  for (let j = 0; j < nIdx; j++) {
    const v = idx[j]!;
    if (!Number.isInteger(v) || v < 0 || v >= dim) {
      throw new KernelError(k, `index ${v} at position ${j} is outside [0, ${dim})`);
    }
  }
  if (k === "index_select") {
    const src = ins[0]!.i, dst = outs[0]!.i;
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < nIdx; j++) {
        for (let q = 0; q < inner; q++) {
          dst[(o * nIdx + j) * inner + q] = src[(o * dim + idx[j]!) * inner + q]!;
        }
      }
    }
  } else {
    y.fill(0, 0, outer * dim * inner);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < nIdx; j++) {
        for (let q = 0; q < inner; q++) {
          const t = (o * dim + idx[j]!) * inner + q;
          y[t] = y[t]! + x[(o * nIdx + j) * inner + q]!;
        }
      }
    }
  }
};

const refEmbedding: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [nIds, vocab, dim] = p as [number, number, number];
  const ids = ins[1]!.i;
  for (let j = 0; j < nIds; j++) {
    const v = ids[j]!;
    if (!Number.isInteger(v) || v < 0 || v >= vocab) {
      throw new KernelError(k, `id ${v} at position ${j} is outside [0, ${vocab})`);
    }
  }
  if (k === "embedding") {
    for (let j = 0; j < nIds; j++) {
      for (let q = 0; q < dim; q++) y[j * dim + q] = x[ids[j]! * dim + q]!;
    }
  } else {
    y.fill(0, 0, vocab * dim);
    for (let j = 0; j < nIds; j++) {
      for (let q = 0; q < dim; q++) {
        const t = ids[j]! * dim + q;
        y[t] = y[t]! + x[j * dim + q]!;
      }
    }
  }
};

/** The reference layout kernels, by name. */
export const REF_LAYOUT: Readonly<Record<LayoutKernelName, RefKernel>> = {
  permute: refPermute,
  slice: refSlice,
  slice_backward: refSlice,
  concat: refConcat,
  index_select: refIndexSelect,
  index_select_backward: refIndexSelect,
  embedding: refEmbedding,
  embedding_backward: refEmbedding,
};
