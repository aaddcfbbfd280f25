/**
 * Seeded host-side generators. Model initialisation and dropout use
 * `@libra/tensor`'s Philox generator instead; these make reproducible test
 * data, synthetic batches and sampling decisions on the host.
 *
 * @module
 */

/**
 * mulberry32: a tiny seeded generator of uniforms in [0, 1), deterministic
 * across runs and platforms.
 *
 * @example
 * ```ts
 * import { mulberry32 } from "@libra/util/rng";
 * const a = mulberry32(7), b = mulberry32(7);
 * if (a() !== b()) throw new Error("example: not deterministic");
 * ```
 */
export function mulberry32(seed: number): () => number {
  // The state in a typed array: as a closure's number it was a fresh heap number on
  // most draws (above the small-integer range), which a sampling search draws ~100 of.
  const state = new Int32Array(1);
  state[0] = seed;
  return mulberry32On(state);
}

/**
 * {@link mulberry32} drawing from (and advancing) `state[0]`: a hot loop may
 * advance the same state with the generator's steps written out in place,
 * where a call per draw that the optimizing compiler did not inline cost
 * about as much as the rest of the loop.
 *
 * @example
 * ```ts
 * import { mulberry32, mulberry32On } from "@libra/util/rng";
 * const state = Int32Array.of(7);
 * if (mulberry32On(state)() !== mulberry32(7)()) throw new Error("example: not the same stream");
 * ```
 */
export function mulberry32On(state: Int32Array): () => number {
  return () => {
    let t = state[0] = (state[0]! + 0x6d2b79f5) | 0;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Deterministic host random numbers from a 32-bit seed (splitmix32, with
 * Box-Muller normals).
 *
 * @example
 * ```ts
 * import { Rng } from "@libra/util/rng";
 * const r = new Rng(3);
 * const p = r.permutation(5);
 * if ([...p].sort().join() !== "0,1,2,3,4") throw new Error("example: not a permutation");
 * ```
 */
export class Rng {
  #s: number;
  #spare: number | undefined;
  /** A generator whose state starts at `seed` (taken mod 2^32). */
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** Next 32-bit unsigned integer (splitmix32). */
  nextU32(): number {
    this.#s = (this.#s + 0x9e3779b9) >>> 0;
    let z = this.#s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  }
  /** Uniform in [0, 1). */
  uniform(): number {
    return this.nextU32() / 2 ** 32;
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }
  /** Standard normal. */
  normal(): number {
    if (this.#spare !== undefined) {
      const s = this.#spare;
      this.#spare = undefined;
      return s;
    }
    const u1 = (this.nextU32() + 1) / (2 ** 32 + 1);
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.#spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
  /** A random permutation of 0..n-1 (Fisher-Yates). */
  permutation(n: number): Int32Array {
    const p = new Int32Array(n);
    for (let i = 0; i < n; i++) p[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = p[i]!;
      p[i] = p[j]!;
      p[j] = t;
    }
    return p;
  }
}
