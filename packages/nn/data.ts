/**
 * Synthetic data generators with learnable structure, one per model family, so
 * a few training steps visibly lower the loss. Batches are host arrays
 * ({@link HostTensor}); `train` uploads them. Every generator is deterministic
 * in its seed.
 *
 * - {@link vectorData} (mlp): Gaussian vectors labelled by a fixed random linear
 *   teacher (`argmax(x W)`).
 * - {@link imageData} (resnet): images = class template (a per-class channel
 *   offset plus a low-frequency spatial pattern) + Gaussian noise; label = class.
 * - {@link segmentationData} (unet): noisy images with bright rectangles; the
 *   per-pixel target is 1 inside a rectangle, 0 outside.
 * - {@link tokenData} (gpt, lstm): sequences that follow a fixed random
 *   permutation (`next = perm[cur]`) except for a fraction `noise` of uniformly
 *   random tokens; targets are the inputs shifted by one.
 *
 * @module
 */

import { Rng } from "@libra/util/rng";
import type { HostTensor } from "./safetensors.ts";

/** One training batch: model input and targets (class indices, i32). */
export interface Batch {
  /** Model input: features, images or token ids. */
  readonly x: HostTensor;
  /** Targets: class indices (i32), one per sample, pixel or token. */
  readonly targets: HostTensor;
}

/** An endless deterministic stream of batches. */
export interface DataSource {
  /** Short description, e.g. `"tokens(vocab=16, seq=8, batch=4)"`. */
  readonly name: string;
  /** Number of target classes (the cross-entropy width). */
  readonly classes: number;
  /** The next batch. */
  next(): Batch;
}

function f32(shape: number[], data: Float32Array): HostTensor {
  return { dtype: "f32", shape, data };
}
function i32(shape: number[], data: Int32Array): HostTensor {
  return { dtype: "i32", shape, data };
}

function checkPositive(fn: string, o: Record<string, number>): void {
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RangeError(`${fn}: ${k} must be a positive integer, got ${v}`);
    }
  }
}

/** Options of {@link vectorData}. */
export interface VectorDataOptions {
  /** Features per sample. */
  features: number;
  /** Number of classes. */
  classes: number;
  /** Samples per batch. */
  batchSize: number;
  /** Seed of the generator (default 0). */
  seed?: number;
}

/**
 * Vectors labelled by a random linear teacher.
 *
 * @example
 * ```ts
 * import { vectorData } from "@libra/nn/data";
 * const b = vectorData({ features: 4, classes: 3, batchSize: 2 }).next();
 * if (b.x.shape.join() !== "2,4" || b.targets.shape.join() !== "2") throw new Error("shape");
 * ```
 */
export function vectorData(o: VectorDataOptions): DataSource {
  const { features, classes, batchSize } = o;
  checkPositive("vectorData", { features, classes, batchSize });
  const rng = new Rng(o.seed ?? 0);
  const teacher = Float64Array.from({ length: features * classes }, () => rng.normal());
  return {
    name: `vectors(features=${features}, classes=${classes}, batch=${batchSize})`,
    classes,
    next() {
      const x = new Float32Array(batchSize * features);
      const t = new Int32Array(batchSize);
      for (let b = 0; b < batchSize; b++) {
        for (let i = 0; i < features; i++) x[b * features + i] = rng.normal();
        let best = -Infinity;
        for (let c = 0; c < classes; c++) {
          let s = 0;
          for (let i = 0; i < features; i++) s += x[b * features + i]! * teacher[i * classes + c]!;
          if (s > best) [best, t[b]] = [s, c];
        }
      }
      return { x: f32([batchSize, features], x), targets: i32([batchSize], t) };
    },
  };
}

/** Options of {@link imageData}. */
export interface ImageDataOptions {
  /** Image channels. */
  channels: number;
  /** Height and width. */
  size: number;
  /** Number of classes. */
  classes: number;
  /** Images per batch. */
  batchSize: number;
  /** Standard deviation of the noise (default 1). */
  noise?: number;
  /** Seed of the generator (default 0). */
  seed?: number;
}

/** Class-templated noisy images, NCHW. */
export function imageData(o: ImageDataOptions): DataSource {
  const { channels, size, classes, batchSize } = o;
  checkPositive("imageData", { channels, size, classes, batchSize });
  const noise = o.noise ?? 1;
  const rng = new Rng(o.seed ?? 0);
  const plane = size * size;
  const templates = new Float32Array(classes * channels * plane);
  for (let c = 0; c < classes; c++) {
    for (let ch = 0; ch < channels; ch++) {
      const offset = rng.normal();
      const fy = 1 + rng.int(2), fx = 1 + rng.int(2), phase = rng.uniform() * 2 * Math.PI;
      for (let i = 0; i < size; i++) {
        for (let j = 0; j < size; j++) {
          templates[(c * channels + ch) * plane + i * size + j] = offset +
            Math.sin((2 * Math.PI * (fy * i + fx * j)) / size + phase);
        }
      }
    }
  }
  const per = channels * plane;
  return {
    name: `images(${channels}x${size}x${size}, classes=${classes}, batch=${batchSize})`,
    classes,
    next() {
      const x = new Float32Array(batchSize * per);
      const t = new Int32Array(batchSize);
      for (let b = 0; b < batchSize; b++) {
        const c = rng.int(classes);
        t[b] = c;
        for (let k = 0; k < per; k++) {
          x[b * per + k] = templates[c * per + k]! + noise * rng.normal();
        }
      }
      return { x: f32([batchSize, channels, size, size], x), targets: i32([batchSize], t) };
    },
  };
}

/** Options of {@link segmentationData}. */
export interface SegmentationDataOptions {
  /** Image channels. */
  channels: number;
  /** Height and width. */
  size: number;
  /** Images per batch. */
  batchSize: number;
  /** Rectangles per image (default 2). */
  shapes?: number;
  /** Seed of the generator (default 0). */
  seed?: number;
}

/** Noisy images with bright rectangles; targets `[N, H, W]` in {0, 1}. */
export function segmentationData(o: SegmentationDataOptions): DataSource {
  const { channels, size, batchSize } = o;
  checkPositive("segmentationData", { channels, size, batchSize });
  const shapes = o.shapes ?? 2;
  const rng = new Rng(o.seed ?? 0);
  const plane = size * size;
  return {
    name: `segmentation(${channels}x${size}x${size}, batch=${batchSize})`,
    classes: 2,
    next() {
      const x = new Float32Array(batchSize * channels * plane);
      const t = new Int32Array(batchSize * plane);
      for (let b = 0; b < batchSize; b++) {
        for (let s = 0; s < shapes; s++) {
          const h = 1 + rng.int(Math.max(1, size >> 1)), w = 1 + rng.int(Math.max(1, size >> 1));
          const i0 = rng.int(size - h + 1), j0 = rng.int(size - w + 1);
          for (let i = i0; i < i0 + h; i++) {
            for (let j = j0; j < j0 + w; j++) t[b * plane + i * size + j] = 1;
          }
        }
        for (let ch = 0; ch < channels; ch++) {
          for (let k = 0; k < plane; k++) {
            x[(b * channels + ch) * plane + k] = 1.5 * t[b * plane + k]! - 0.5 +
              0.5 * rng.normal();
          }
        }
      }
      return {
        x: f32([batchSize, channels, size, size], x),
        targets: i32([batchSize, size, size], t),
      };
    },
  };
}

/** Options of {@link tokenData}. */
export interface TokenDataOptions {
  /** Number of distinct tokens. */
  vocabSize: number;
  /** Tokens per sequence. */
  seqLen: number;
  /** Sequences per batch. */
  batchSize: number;
  /** Fraction of tokens drawn uniformly instead of following the permutation (default 0.1). */
  noise?: number;
  /** Seed of the generator (default 0). */
  seed?: number;
}

/** Token sequences `[B, T]` (i32) following a hidden permutation; targets are shifted by one. */
export function tokenData(o: TokenDataOptions): DataSource {
  const { vocabSize, seqLen, batchSize } = o;
  checkPositive("tokenData", { vocabSize, seqLen, batchSize });
  const noise = o.noise ?? 0.1;
  const rng = new Rng(o.seed ?? 0);
  const perm = rng.permutation(vocabSize);
  return {
    name: `tokens(vocab=${vocabSize}, seq=${seqLen}, batch=${batchSize})`,
    classes: vocabSize,
    next() {
      const x = new Int32Array(batchSize * seqLen);
      const t = new Int32Array(batchSize * seqLen);
      for (let b = 0; b < batchSize; b++) {
        let cur = rng.int(vocabSize);
        for (let s = 0; s <= seqLen; s++) {
          if (s < seqLen) x[b * seqLen + s] = cur;
          if (s > 0) t[b * seqLen + s - 1] = cur;
          cur = rng.uniform() < noise ? rng.int(vocabSize) : perm[cur]!;
        }
      }
      return { x: i32([batchSize, seqLen], x), targets: i32([batchSize, seqLen], t) };
    },
  };
}
