import assert from "node:assert/strict";
import { imageData, segmentationData, tokenData, vectorData } from "./data.ts";

Deno.test("data generators give the documented shapes and dtypes and are deterministic in the seed", () => {
  const cases = [
    [vectorData({ features: 5, classes: 3, batchSize: 4, seed: 1 }), [4, 5], [4]],
    [imageData({ channels: 3, size: 6, classes: 4, batchSize: 2, seed: 1 }), [2, 3, 6, 6], [2]],
    [segmentationData({ channels: 1, size: 8, batchSize: 3, seed: 1 }), [3, 1, 8, 8], [3, 8, 8]],
    [tokenData({ vocabSize: 9, seqLen: 7, batchSize: 2, seed: 1 }), [2, 7], [2, 7]],
  ] as const;
  for (const [src, xs, ts] of cases) {
    const b = src.next();
    assert.deepEqual(b.x.shape, xs, src.name);
    assert.deepEqual(b.targets.shape, ts, src.name);
    assert.equal(b.targets.dtype, "i32");
    assert.ok(b.targets.data.every((t) => t >= 0 && t < src.classes), src.name);
  }
  const a = tokenData({ vocabSize: 9, seqLen: 7, batchSize: 2, seed: 5 });
  const b = tokenData({ vocabSize: 9, seqLen: 7, batchSize: 2, seed: 5 });
  assert.deepEqual(a.next().x.data, b.next().x.data);
  assert.notDeepEqual(
    a.next().x.data,
    tokenData({ vocabSize: 9, seqLen: 7, batchSize: 2, seed: 6 }).next().x.data,
  );
});

Deno.test("tokenData() targets are the inputs shifted by one and mostly follow one successor per token", () => {
  const src = tokenData({ vocabSize: 8, seqLen: 16, batchSize: 32, noise: 0.1, seed: 3 });
  const counts = Array.from({ length: 8 }, () => new Array<number>(8).fill(0));
  for (let k = 0; k < 4; k++) {
    const { x, targets } = src.next();
    for (let b = 0; b < 32; b++) {
      for (let s = 0; s < 15; s++) assert.equal(targets.data[b * 16 + s], x.data[b * 16 + s + 1]);
      for (let s = 0; s < 16; s++) counts[x.data[b * 16 + s]!]![targets.data[b * 16 + s]!]!++;
    }
  }
  // the best bigram predictor is right ~ (1 - noise) + noise / vocab = 91% of the time
  const right = counts.reduce((a, row) => a + Math.max(...row), 0);
  const total = counts.reduce((a, row) => a + row.reduce((x, y) => x + y, 0), 0);
  assert.ok(right / total > 0.85, `bigram accuracy ${right / total}`);
});

Deno.test("imageData() classes are separable: nearest class mean beats chance by far", () => {
  const src = imageData({ channels: 2, size: 4, classes: 3, batchSize: 64, noise: 1, seed: 2 });
  const train = src.next(), test = src.next();
  const per = 2 * 16;
  const means = Array.from({ length: 3 }, () => new Float64Array(per));
  const n = [0, 0, 0];
  for (let b = 0; b < 64; b++) {
    const c = train.targets.data[b]!;
    n[c]!++;
    for (let k = 0; k < per; k++) means[c]![k]! += train.x.data[b * per + k]!;
  }
  means.forEach((m, c) => m.forEach((_, k) => (m[k]! /= Math.max(1, n[c]!))));
  let right = 0;
  for (let b = 0; b < 64; b++) {
    const d = means.map((m) => m.reduce((s, v, k) => s + (v - test.x.data[b * per + k]!) ** 2, 0));
    if (d.indexOf(Math.min(...d)) === test.targets.data[b]) right++;
  }
  assert.ok(right / 64 > 0.8, `nearest-mean accuracy ${right / 64}`);
});

Deno.test("segmentationData() marks bright pixels: thresholding the image at 0.25 recovers most of the mask", () => {
  const { x, targets } = segmentationData({ channels: 1, size: 16, batchSize: 4, seed: 4 }).next();
  let agree = 0;
  for (let i = 0; i < targets.data.length; i++) {
    if ((x.data[i]! > 0.25 ? 1 : 0) === targets.data[i]) agree++;
  }
  assert.ok(
    agree / targets.data.length > 0.85,
    `threshold agreement ${agree / targets.data.length}`,
  );
  assert.ok(targets.data.some((t) => t === 1) && targets.data.some((t) => t === 0));
});

Deno.test("data generators reject non-positive sizes naming the option", () => {
  assert.throws(
    () => tokenData({ vocabSize: 0, seqLen: 2, batchSize: 1 }),
    /vocabSize must be a positive integer, got 0/,
  );
});
