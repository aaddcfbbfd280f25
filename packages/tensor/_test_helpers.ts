/**
 * Test helpers (private): seeded input data, and the gradient checker.
 *
 * Gradient checks run on a {@link ReferenceBackend} in `"f64"` precision: its
 * kernels keep doubles, so the whole forward (op under test plus the scalar
 * projection `sum(y * r)` with fixed random `r`) is evaluated in float64 and
 * central finite differences with `h = 1e-6` are accurate to ~1e-9. The
 * analytic gradients come from the same autograd engine and gradient rules
 * that run on every backend, so the check validates the rules; f32 backends
 * (reference f32, native cpu) are then compared against the f64 gradients.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend } from "./backend.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import { fromTypedArray, type Tensor, tidy, withBackend } from "./tensor.ts";
import { mul, sum } from "./ops.ts";
import { mulberry32 } from "@libra/util/rng";
import { noGrad } from "./autograd.ts";
import { manualSeed } from "./random.ts";

/** mulberry32: a tiny seeded generator for test data. */
export const rng: (seed: number) => () => number = mulberry32;

/** `n` f32-representable values uniform in `[lo, hi)`. */
export function randomValues(n: number, seed: number, lo = -1, hi = 1): number[] {
  const r = rng(seed);
  return Array.from({ length: n }, () => Math.fround(lo + (hi - lo) * r()));
}

/** Asserts element-wise closeness: |a - e| <= atol + rtol |e|. */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  atol: number,
  rtol: number,
  what = "",
): void {
  assert.equal(
    actual.length,
    expected.length,
    `${what}: length ${actual.length} vs ${expected.length}`,
  );
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!, e = expected[i]!;
    if (Number.isNaN(e) && Number.isNaN(a)) continue;
    if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) {
      assert.fail(`${what}: element ${i}: got ${a}, expected ${e} (atol ${atol}, rtol ${rtol})`);
    }
  }
}

/** One input of a gradient case. */
export interface CaseInput {
  shape: number[];
  /** Default f32. */
  dtype?: "f32" | "i32";
  /** Explicit values (default: random in `range`). */
  values?: number[];
  /** Range of random values (default [-1, 1]). */
  range?: [number, number];
  /** Whether to check this input's gradient (default: true for f32). */
  grad?: boolean;
}

/** A gradient test case: inputs and the function of them whose gradients are checked. */
export interface GradCase {
  name: string;
  inputs: CaseInput[];
  build: (xs: Tensor[]) => Tensor;
}

function inputValues(c: GradCase, i: number): number[] {
  const inp = c.inputs[i]!;
  if (inp.values) return inp.values;
  const n = inp.shape.reduce((a, b) => a * b, 1);
  const [lo, hi] = inp.range ?? [-1, 1];
  return randomValues(n, 1000 + 17 * i + c.name.length, lo, hi);
}

function makeInputs(c: GradCase, be: Backend): Tensor[] {
  return c.inputs.map((inp, i) => {
    const vals = inputValues(c, i);
    if (inp.dtype === "i32") {
      return fromTypedArray(Int32Array.from(vals), inp.shape, { backend: be });
    }
    const t = fromTypedArray(Float32Array.from(vals), inp.shape, { backend: be });
    if (inp.grad ?? true) t.requiresGrad = true;
    return t;
  });
}

function projection(shape: readonly number[]): number[] {
  const n = shape.reduce((a, b) => a * b, 1);
  return randomValues(n, 4242 + n, -1, 1);
}

const SEED = 1234;

/** Analytic gradients (per checked input) of `sum(build(xs) * r)` on `be`. */
export function analyticGrads(c: GradCase, be: Backend): (Float64Array | null)[] {
  return withBackend(be, () => {
    const xs = makeInputs(c, be);
    try {
      manualSeed(SEED);
      const loss = tidy(() => {
        const y = c.build(xs);
        const r = fromTypedArray(Float32Array.from(projection(y.shape)), [...y.shape]);
        return sum(mul(y, r));
      });
      loss.backward();
      loss.dispose();
      return xs.map((x) => {
        if (!x.requiresGrad) return null;
        assert.ok(x.grad, `${c.name}: input of shape [${x.shape}] got no gradient`);
        return be instanceof ReferenceBackend
          ? be.readF64(x.grad.storage.buffer, x.size)
          : Float64Array.from(x.grad.toTypedArray());
      });
    } finally {
      for (const x of xs) x.dispose();
    }
  });
}

/**
 * Checks the analytic gradients of a case against central finite differences
 * in float64; returns the analytic gradients.
 */
export function gradcheck(c: GradCase, atol = 1e-7, rtol = 1e-6): (Float64Array | null)[] {
  const be = new ReferenceBackend({ precision: "f64" });
  const analytic = analyticGrads(c, be);
  assert.equal(be.memory().usedBytes, 0, `${c.name}: memory left after backward`);
  withBackend(be, () => {
    const xs = makeInputs(c, be);
    const evalLoss = (): number =>
      noGrad(() =>
        tidy(() => {
          manualSeed(SEED);
          const y = c.build(xs);
          const r = fromTypedArray(Float32Array.from(projection(y.shape)), [...y.shape]);
          const l = sum(mul(y, r));
          return be.readF64(l.storage.buffer, 1)[0]!;
        })
      );
    const h = 1e-6;
    xs.forEach((x, i) => {
      const g = analytic[i];
      if (!g) return;
      const base = be.readF64(x.storage.buffer, x.size);
      const numeric = new Float64Array(x.size);
      for (let j = 0; j < x.size; j++) {
        be.write(x.storage.buffer, Float64Array.of(base[j]! + h), 4 * j);
        const fp = evalLoss();
        be.write(x.storage.buffer, Float64Array.of(base[j]! - h), 4 * j);
        const fm = evalLoss();
        be.write(x.storage.buffer, Float64Array.of(base[j]!), 4 * j);
        numeric[j] = (fp - fm) / (2 * h);
      }
      assertClose(g, numeric, atol, rtol, `${c.name}: d/d input ${i}`);
    });
    for (const x of xs) x.dispose();
  });
  assert.equal(be.memory().usedBytes, 0, `${c.name}: memory left after finite differences`);
  return analytic;
}
