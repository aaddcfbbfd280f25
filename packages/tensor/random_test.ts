import assert from "node:assert/strict";
import { philoxElement, philoxUniform } from "./kernels.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import * as T from "./mod.ts";

T.setDefaultBackend(new ReferenceBackend());

function stats(v: number[]): { mean: number; std: number } {
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
  return { mean, std };
}

Deno.test("uniform/normal follow the Philox formulas of the kernel table exactly", () => {
  T.tidy(() => {
    T.manualSeed(2 ** 40 + 7);
    const u = T.uniform([5], { low: -2, high: 3 }).toArray();
    const expectU = [0, 1, 2, 3, 4].map((i) =>
      Math.fround(-2 + 5 * philoxUniform(philoxElement(2 ** 40 + 7, 0, i)[0]))
    );
    assert.deepEqual(u, expectU);
    const n = T.normal([3], { mean: 1, std: 2 }).toArray();
    const expectN = [0, 1, 2].map((i) => {
      const [w0, w1] = philoxElement(2 ** 40 + 7, 5, i);
      const u1 = ((w0 >>> 8) + 1) * 2 ** -24;
      return Math.fround(
        1 + 2 * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * philoxUniform(w1)),
      );
    });
    assert.deepEqual(n, expectN, "second draw continues at offset 5");
    assert.deepEqual(T.randomState(), { seed: 2 ** 40 + 7, offset: 8 });
  });
});

Deno.test("manualSeed makes draws reproducible; explicit seeds leave the generator alone", () => {
  T.tidy(() => {
    T.manualSeed(3);
    const a = T.normal([10]).toArray();
    const b = T.normal([10]).toArray();
    assert.notDeepEqual(a, b);
    T.manualSeed(3);
    assert.deepEqual(T.normal([10]).toArray(), a);
    const state = T.randomState();
    const s1 = T.uniform([4], { seed: 77 }).toArray();
    assert.deepEqual(T.randomState(), state);
    assert.deepEqual(T.uniform([4], { seed: 77 }).toArray(), s1);
    T.setRandomState({ seed: 3, offset: 10 });
    assert.deepEqual(T.normal([10]).toArray(), b);
    assert.throws(() => T.manualSeed(-1), /manualSeed: seed must be an integer/);
  });
});

Deno.test("distributions have the requested moments (n = 20000)", () => {
  T.tidy(() => {
    T.manualSeed(11);
    const u = stats(T.uniform([20000], { low: 1, high: 3 }).toArray());
    assert.ok(Math.abs(u.mean - 2) < 0.02, `uniform mean ${u.mean}`);
    assert.ok(Math.abs(u.std - 2 / Math.sqrt(12)) < 0.01, `uniform std ${u.std}`);
    const n = stats(T.normal([20000], { mean: -1, std: 0.5 }).toArray());
    assert.ok(Math.abs(n.mean + 1) < 0.015, `normal mean ${n.mean}`);
    assert.ok(Math.abs(n.std - 0.5) < 0.01, `normal std ${n.std}`);
  });
});

Deno.test("initializers use PyTorch's fans and gains", () => {
  T.tidy(() => {
    assert.deepEqual(T.fans([64, 32]), [32, 64]);
    assert.deepEqual(T.fans([16, 8, 3, 3]), [72, 144]);
    assert.throws(() => T.fans([5]), /fans: need at least 2 dimensions/);
    assert.equal(T.gain("relu"), Math.SQRT2);
    assert.equal(T.gain("leaky_relu", Math.sqrt(5)), Math.sqrt(2 / 6));
    T.manualSeed(0);
    const ku = T.kaimingUniform([200, 50], { a: Math.sqrt(5) }).toArray();
    const bound = Math.sqrt(3) * Math.sqrt(2 / 6) / Math.sqrt(50); // = 1/sqrt(50)
    assert.ok(ku.every((v) => Math.abs(v) <= bound + 1e-7));
    assert.ok(Math.abs(stats(ku).std - bound / Math.sqrt(3)) < 0.01 * bound * 3);
    const kn = stats(
      T.kaimingNormal([100, 20, 3, 3], { nonlinearity: "relu", mode: "fanOut" }).toArray(),
    );
    assert.ok(
      Math.abs(kn.std - Math.SQRT2 / Math.sqrt(900)) < 0.002,
      `kaimingNormal std ${kn.std}`,
    );
    const xu = T.xavierUniform([30, 70], { gain: 2 }).toArray();
    const xb = 2 * Math.sqrt(6 / 100);
    assert.ok(xu.every((v) => Math.abs(v) <= xb + 1e-6));
    const xn = stats(T.xavierNormal([300, 100]).toArray());
    assert.ok(Math.abs(xn.std - Math.sqrt(2 / 400)) < 0.002, `xavierNormal std ${xn.std}`);
    const w = T.kaimingUniform([4, 4], { requiresGrad: true });
    assert.equal(w.requiresGrad, true);
  });
});
