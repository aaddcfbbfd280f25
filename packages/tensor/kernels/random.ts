/**
 * The random kernels of the kernel table (the TypeScript side of `native/cpu/random.c`).
 *
 * @module
 */

import { type KernelSpec, simple } from "./_spec.ts";

// ---------------------------------------------------------------- Philox

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

function mulhilo(a: number, b: number): [number, number] {
  const p = BigInt(a) * BigInt(b);
  return [Number(p >> 32n) >>> 0, Number(p & 0xffffffffn) >>> 0];
}

/**
 * Philox4x32-10 reference: four 32-bit words from a 4-word counter and a
 * 2-word key. Known-answer vectors (Random123 `kat_vectors`):
 * - ctr 0,0,0,0 key 0,0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
 * - ctr ffffffff x4 key ffffffff x2 -> 408f276d 41c83b0e a20bc7c6 6d5451fd
 * - ctr 243f6a88 85a308d3 13198a2e 03707344 key a4093822 299f31d0
 *   -> d16cfe09 94fdcceb 5001e420 24126ea1
 *
 * @example
 * ```ts
 * import { philox4x32 } from "@libra/tensor/kernels";
 * const words = philox4x32([0, 0, 0, 0], [0, 0]);
 * if (words[0] !== 0x6627e8d5) throw new Error("philox mismatch");
 * ```
 */
export function philox4x32(
  counter: readonly [number, number, number, number],
  key: readonly [number, number],
): [number, number, number, number] {
  let [c0, c1, c2, c3] = counter.map((x) => x >>> 0) as [number, number, number, number];
  let [k0, k1] = key.map((x) => x >>> 0) as [number, number];
  for (let round = 0; round < 10; round++) {
    const [hi0, lo0] = mulhilo(M0, c0);
    const [hi1, lo1] = mulhilo(M1, c2);
    [c0, c1, c2, c3] = [(hi1 ^ c1 ^ k0) >>> 0, lo1, (hi0 ^ c3 ^ k1) >>> 0, lo0];
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  return [c0, c1, c2, c3];
}

/** Philox words `[w0, w1]` for element `i` of a random kernel with `(seed, offset)`. */
export function philoxElement(seed: number, offset: number, i: number): [number, number] {
  const key: [number, number] = [seed % 2 ** 32, Math.floor(seed / 2 ** 32)];
  const c = offset + i;
  const w = philox4x32([c % 2 ** 32, Math.floor(c / 2 ** 32), 0, 0], key);
  return [w[0], w[1]];
}

/** `(w >>> 8) * 2^-24`: the uniform in [0, 1) every backend derives from a Philox word. */
export function philoxUniform(w: number): number {
  return (w >>> 8) * 2 ** -24;
}

/** Name of a random kernel. */
export type RandomKernelName =
  | "dropout"
  | "dropout_backward"
  | "rand_uniform"
  | "rand_normal";

/** The random kernels, by name. */
export const RANDOM_KERNELS: Readonly<Record<RandomKernelName, KernelSpec>> = {
  // -- random
  dropout: simple(
    ["x"],
    ["y"],
    ["n", "p", "seed", "offset"],
    "y = keep ? x / (1 - p) : 0 with keep from Philox (see module doc); p in [0, 1]; p = 1 gives zeros.",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]!] }),
    (p) => 2 * p[0]!,
    { random: true },
    ["n"],
  ),
  dropout_backward: simple(
    ["gy"],
    ["gx"],
    ["n", "p", "seed", "offset"],
    "gx = keep ? gy / (1 - p) : 0, regenerating the same mask from (seed, offset).",
    (p) => ({ inputs: [p[0]!], outputs: [p[0]!] }),
    (p) => 2 * p[0]!,
    { random: true },
    ["n"],
  ),
  rand_uniform: simple(
    [],
    ["y"],
    ["n", "seed", "offset", "low", "high"],
    "y = uniform in [low, high) from Philox (see module doc).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    (p) => 4 * p[0]!,
    { random: true },
    ["n", "seed", "offset"],
  ),
  rand_normal: simple(
    [],
    ["y"],
    ["n", "seed", "offset", "mean", "std"],
    "y = normal(mean, std) by Box-Muller from Philox (see module doc).",
    (p) => ({ inputs: [], outputs: [p[0]!] }),
    (p) => 20 * p[0]!,
    { random: true },
    ["n", "seed", "offset"],
  ),
};
