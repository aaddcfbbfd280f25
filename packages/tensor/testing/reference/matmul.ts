/**
 * Reference implementations of the matmul kernels (the plain-TypeScript twin of `native/cpu/matmul.c`).
 *
 * @module
 */

import type { MatmulKernelName } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

/**
 * `y[bi] = op(a_bi) op(b_bi)` for `bi < batch` (a_bi at `bi * sa`, `[m, k]` or stored `[k, m]`
 * with `ta`; likewise b), each sum taken in f64 and rounded once to f32 in `y`. Shared by the
 * kernels that compute a product (matmul, linear, the LSTM steps).
 */
export function matmulF32(
  y: FArr,
  a: FArr,
  b: FArr,
  [batch, m, n, kk, ta, tb, sa, sb]: readonly number[],
): void {
  for (let bi = 0; bi < batch!; bi++) {
    for (let i = 0; i < m!; i++) {
      for (let j = 0; j < n!; j++) {
        let s = 0;
        for (let l = 0; l < kk!; l++) {
          const av = ta ? a[bi * sa! + l * m! + i]! : a[bi * sa! + i * kk! + l]!;
          const bv = tb ? b[bi * sb! + j * kk! + l]! : b[bi * sb! + l * n! + j]!;
          s += av * bv;
        }
        y[bi * m! * n! + i * n! + j] = s;
      }
    }
  }
}

const refMatmul: RefKernel = (_k, ins, outs, p) => {
  matmulF32(outs[0]!.f, ins[0]!.f, ins[1]!.f, p);
};

/** `linear`: refMatmul's product (transB), rounded to f32, plus b, as the add kernel sums. */
const refLinear: RefKernel = (_k, ins, outs, p) => {
  const [m, n, kk] = p as [number, number, number];
  matmulF32(outs[0]!.f, ins[0]!.f, ins[1]!.f, [1, m, n, kk, 0, 1, 0, 0]);
  const y = outs[0]!.f, b = ins[2]!.f;
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) y[i * n + j] = y[i * n + j]! + b[j]!;
};

/** The reference matmul kernels, by name. */
export const REF_MATMUL: Readonly<Record<MatmulKernelName, RefKernel>> = {
  matmul: refMatmul,
  linear: refLinear,
};
