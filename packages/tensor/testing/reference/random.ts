/**
 * Reference implementations of the random kernels (the plain-TypeScript twin of `native/cpu/random.c`).
 *
 * @module
 */

import { KernelError } from "../../backend.ts";
import { philoxElement, philoxUniform, type RandomKernelName } from "../../kernels.ts";
import type { FArr, RefKernel } from "./_common.ts";

const refDropout: RefKernel = (k, ins, outs, p) => {
  const x = ins[0]?.f as FArr;
  const y = outs[0]?.f as FArr;
  const [n, prob, seed, offset] = p as [number, number, number, number];
  if (prob < 0 || prob > 1) throw new KernelError(k, `p must be in [0, 1], got ${prob}`);
  for (let i = 0; i < n; i++) {
    const keep = prob < 1 && philoxUniform(philoxElement(seed, offset, i)[0]) >= prob;
    y[i] = keep ? x[i]! / (1 - prob) : 0;
  }
};

const refRandUniform: RefKernel = (_k, _ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  const [n, seed, offset, low, high] = p as [number, number, number, number, number];
  for (let i = 0; i < n; i++) {
    y[i] = low + (high - low) * philoxUniform(philoxElement(seed, offset, i)[0]);
  }
};

const refRandNormal: RefKernel = (_k, _ins, outs, p) => {
  const y = outs[0]?.f as FArr;
  const [n, seed, offset, mean, std] = p as [number, number, number, number, number];
  for (let i = 0; i < n; i++) {
    const [w0, w1] = philoxElement(seed, offset, i);
    const u1 = ((w0 >>> 8) + 1) * 2 ** -24;
    const u2 = philoxUniform(w1);
    y[i] = mean + std * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }
};

/** The reference random kernels, by name. */
export const REF_RANDOM: Readonly<Record<RandomKernelName, RefKernel>> = {
  dropout: refDropout,
  dropout_backward: refDropout,
  rand_uniform: refRandUniform,
  rand_normal: refRandNormal,
};
