/**
 * `libra_sample_bounds` of every build against `sampleBounds` of `@libra/evict`
 * (the reference): the same draws, bounds, least bounds and generator state,
 * bit for bit, over random pools with the edge cases a pool's slots can hold.
 */

import assert from "node:assert/strict";
import { sampleBounds, SLOT_STRIDE } from "@libra/evict";
import { type LibraryKind, loadLibrary } from "./_loader.ts";
import { LibraryLoadError } from "./errors.ts";

/** Uniforms in [0, 1) from a small LCG. */
function lcg(seed: number): () => number {
  let a = seed;
  return () => (a = (Math.imul(a, 1664525) + 1013904223) >>> 0) / 4294967296;
}

/** A value of `x`'s kind, or one of the edge cases a slot may hold. */
function edgy(rnd: () => number, x: number): number {
  const u = rnd();
  if (u < 0.02) return NaN;
  if (u < 0.04) return Infinity;
  if (u < 0.06) return -Infinity;
  if (u < 0.1) return 0;
  if (u < 0.12) return -x;
  return x;
}

for (const kind of ["cpu", "cpu_portable", "cuda"] as LibraryKind[]) {
  let why = "";
  let native: ((...a: never[]) => number) | undefined;
  try {
    native = loadLibrary(kind).lib.symbols.libra_sample_bounds as never;
  } catch (e) {
    if (!(e instanceof LibraryLoadError)) throw e;
    why = e.message;
  }
  Deno.test({
    name:
      `libra_sample_bounds (${kind}) is bitwise sampleBounds (oracle: the TypeScript reference)`,
    ignore: why !== "",
    fn() {
      const run = native as unknown as typeof sampleBounds;
      const rnd = lcg(kind.length * 7919 + 1);
      let compared = 0, filtered = 0;
      for (let c = 0; c < 3000; c++) {
        const n = 1 + Math.floor(rnd() * (c % 10 === 0 ? 20_000 : 300));
        const k = 1 + Math.floor(rnd() * 130);
        const slots = new Float64Array(n * SLOT_STRIDE + 8);
        const clock = 1e3 + rnd() * 1e7;
        for (let i = 0; i < n; i++) {
          const o = i * SLOT_STRIDE;
          slots[o] = edgy(rnd, clock * rnd() * 1.1); // last access (sometimes after the clock)
          slots[o + 1] = edgy(rnd, rnd() * 1e6); // compute
          slots[o + 2] = edgy(rnd, 1 + Math.floor(rnd() * 1e7)); // bytes
          slots[o + 3] = rnd() < 0.5 ? 0 : edgy(rnd, rnd() * 1e6); // kept floor
        }
        const minBytes = rnd() < 0.7 ? 0 : rnd() * 1e7;
        const slack = rnd() < 0.3 ? 0 : rnd() * 1e5;
        const floors = rnd() < 0.5 ? 1 : 0;
        const seed = (rnd() * 2 ** 32) | 0;
        const got = {
          rng: new Int32Array([seed]),
          sampled: new Int32Array(k),
          bounds: new Float64Array(k),
          out: new Float64Array(2),
        };
        const want = structuredClone(got);
        const args = [minBytes, slack, floors, clock] as const;
        const m = run(slots, n, k, got.rng, got.sampled, got.bounds, ...args, got.out);
        const mw = sampleBounds(
          slots,
          n,
          k,
          want.rng,
          want.sampled,
          want.bounds,
          ...args,
          want.out,
        );
        const at = `case ${c} (n ${n}, k ${k})`;
        assert.equal(m, mw, `${at}: candidates kept`);
        assert.equal(got.rng[0], want.rng[0], `${at}: generator state`);
        assert.deepEqual([...got.sampled.subarray(0, m)], [...want.sampled.subarray(0, m)], at);
        for (let t = 0; t < m; t++) {
          assert.ok(Object.is(got.bounds[t], want.bounds[t]), `${at}: bound ${t}`);
        }
        assert.ok(Object.is(got.out[0], want.out[0]) && Object.is(got.out[1], want.out[1]), at);
        compared += m;
        filtered += k - m;
      }
      assert.ok(compared > 100_000 && filtered > 1000, `${compared} bounds, ${filtered} filtered`);
    },
  });
  if (why) console.log(`libra_sample_bounds (${kind}) skipped: ${why}`);
}

Deno.test("cpuBackend().sampleBounds (arrays by address, kept between calls) is bitwise sampleBounds", async () => {
  let backend;
  try {
    const { cpuBackend } = await import("./mod.ts");
    backend = cpuBackend();
  } catch (e) {
    if (!(e instanceof LibraryLoadError)) throw e;
    console.log(`skipped: ${e.message}`);
    return;
  }
  const run = backend.sampleBounds;
  const rnd = lcg(17);
  const gc = (globalThis as { gc?: () => void }).gc;
  // The native side keeps the arrays' addresses while the same arrays come back: arrays small
  // enough to live on the JavaScript heap (rng, out, a few draws) must not move under it when
  // collections run between calls (`--expose-gc`: `deno task test`), and new arrays must be
  // seen as new.
  let slots = new Float64Array(0), n = 0;
  let sampled = new Int32Array(1), bounds = new Float64Array(1);
  let rng = new Int32Array([7]), out = new Float64Array(2);
  const want = { rng: new Int32Array([7]) };
  for (let c = 0; c < 600; c++) {
    if (c % 50 === 0) {
      n = 1 + Math.floor(rnd() * (c % 100 === 0 ? 5000 : 40));
      slots = new Float64Array(n * SLOT_STRIDE);
      for (let i = 0; i < slots.length; i++) slots[i] = rnd() * 1e4;
    }
    const k = 1 + Math.floor(rnd() * (c % 3 === 0 ? 4 : 120));
    if (sampled.length < k || rnd() < 0.1) {
      sampled = new Int32Array(k);
      bounds = new Float64Array(k);
    }
    if (rnd() < 0.05) {
      rng = new Int32Array([rng[0]!]);
      out = new Float64Array(2);
    }
    if (c % 7 === 0) {
      // Garbage, and a collection: what lives on the heap moves.
      const junk = [];
      for (let i = 0; i < 2000; i++) junk.push(new Float64Array(4));
      gc?.();
    }
    const wSampled = new Int32Array(k), wBounds = new Float64Array(k), wOut = new Float64Array(2);
    const args = [rnd() < 0.8 ? 0 : rnd() * 1e4, rnd() * 10, c & 1, 2e4] as const;
    const m = run(slots, n, k, rng, sampled, bounds, ...args, out);
    const mw = sampleBounds(slots, n, k, want.rng, wSampled, wBounds, ...args, wOut);
    assert.equal(m, mw, `call ${c}`);
    assert.equal(rng[0], want.rng[0], `call ${c}: generator state`);
    assert.deepEqual([...sampled.subarray(0, m)], [...wSampled.subarray(0, m)], `call ${c}`);
    for (let t = 0; t < m; t++) assert.ok(Object.is(bounds[t], wBounds[t]), `call ${c}: ${t}`);
    assert.ok(Object.is(out[0], wOut[0]) && Object.is(out[1], wOut[1]), `call ${c}: out`);
  }
  assert.throws(
    () => run(slots, n, 1, new Int32Array(0), sampled, bounds, 0, 0, 0, 1, out),
    /rng needs 1 element/,
  );
});
