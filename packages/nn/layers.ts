/**
 * Layers with PyTorch's parameter names, shapes and default initialisation:
 * Linear, Conv2d, BatchNorm2d, LayerNorm, RMSNorm, Embedding, Dropout, ReLU,
 * GELU, CausalSelfAttention, Sequential, ModuleList.
 *
 * Every forward pass is made of `@libra/tensor` ops only (no host reads), so the
 * re-materialization runtime sees every kernel call; dropout draws from the
 * tensor package's seeded Philox generator.
 *
 * @module
 */

import {
  batchNorm2d,
  causalMask,
  conv2d,
  dropout,
  embedding,
  layerNorm,
  linear,
  ones,
  rmsNorm,
  type Tensor,
  uniform,
  zeros,
} from "./_ops.ts";
import { chain, normal, tidy } from "./_ops.ts";
import { Module } from "./module.ts";

/** A module with a one-input forward pass (what {@link Sequential} chains). */
export interface Layer extends Module {
  /** Runs the layer on `x`. */
  forward(x: Tensor): Tensor;
}

function checkInt(layer: string, o: Record<string, number>, min = 1): void {
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isInteger(v) || v < min) {
      throw new RangeError(`${layer}: ${k} must be an integer >= ${min}, got ${v}`);
    }
  }
}

function fmt(s: readonly number[]): string {
  return `[${s.join(",")}]`;
}

/** Options of {@link Linear}. */
export interface LinearOptions {
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** Initialise the weight N(0, std) and the bias to zero (GPT-2) instead of PyTorch's uniform rule. */
  initStd?: number;
}

/**
 * `y = x W^T + b` over the last axis; `weight` is `[out, in]`, `bias` `[out]`,
 * both initialised U(-1/sqrt(in), 1/sqrt(in)) like PyTorch.
 *
 * @example
 * ```ts
 * import { setDefaultBackend, zeros } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * import { Linear } from "@libra/nn/layers";
 * setDefaultBackend(new ReferenceBackend());
 * const fc = new Linear(4, 3);
 * const y = fc.forward(zeros([2, 4]));
 * if (y.shape.join() !== "2,3") throw new Error("shape");
 * ```
 */
export class Linear extends Module implements Layer {
  /** Weight `[out, in]`. */
  readonly weight: Tensor;
  /** Bias `[out]`, or null without bias. */
  readonly bias: Tensor | null;
  /** A linear layer from `inFeatures` to `outFeatures` with PyTorch's default initialisation. */
  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    options: LinearOptions = {},
  ) {
    super();
    checkInt("Linear", { inFeatures, outFeatures });
    const bound = 1 / Math.sqrt(inFeatures);
    const std = options.initStd;
    this.weight = this.param(
      "weight",
      std === undefined
        ? uniform([outFeatures, inFeatures], { low: -bound, high: bound })
        : normal([outFeatures, inFeatures], { std }),
    );
    this.bias = options.bias ?? true
      ? this.param(
        "bias",
        std === undefined
          ? uniform([outFeatures], { low: -bound, high: bound })
          : zeros([outFeatures]),
      )
      : null;
  }
  /** `x @ weight^T + bias` over the last dimension. */
  forward(x: Tensor): Tensor {
    if (x.shape[x.ndim - 1] !== this.inFeatures) {
      throw new RangeError(
        `Linear(${this.inFeatures}, ${this.outFeatures}): input ${
          fmt(x.shape)
        } must end in ${this.inFeatures}`,
      );
    }
    return linear(x, this.weight, this.bias);
  }
}

/** Options of {@link Conv2d}. */
export interface Conv2dOptions {
  /** Stride (default 1). */
  stride?: number;
  /** Zero padding on each side (default 0). */
  padding?: number;
  /** Dilation (default 1). */
  dilation?: number;
  /** Whether to add a bias (default true). */
  bias?: boolean;
}

/** 2-D convolution (NCHW); `weight` `[out, in, k, k]`, PyTorch's default initialisation. */
export class Conv2d extends Module implements Layer {
  /** Weight `[out, in, k, k]`. */
  readonly weight: Tensor;
  /** Bias `[out]`, or null without bias. */
  readonly bias: Tensor | null;
  /** Stride. */
  readonly stride: number;
  /** Zero padding on each side. */
  readonly padding: number;
  /** Dilation. */
  readonly dilation: number;
  /** A `kernelSize` x `kernelSize` convolution from `inChannels` to `outChannels`. */
  constructor(
    readonly inChannels: number,
    readonly outChannels: number,
    readonly kernelSize: number,
    options: Conv2dOptions = {},
  ) {
    super();
    this.stride = options.stride ?? 1;
    this.padding = options.padding ?? 0;
    this.dilation = options.dilation ?? 1;
    checkInt("Conv2d", {
      inChannels,
      outChannels,
      kernelSize,
      stride: this.stride,
      dilation: this.dilation,
    });
    checkInt("Conv2d", { padding: this.padding }, 0);
    const bound = 1 / Math.sqrt(inChannels * kernelSize * kernelSize);
    this.weight = this.param(
      "weight",
      uniform([outChannels, inChannels, kernelSize, kernelSize], { low: -bound, high: bound }),
    );
    this.bias = options.bias ?? true
      ? this.param("bias", uniform([outChannels], { low: -bound, high: bound }))
      : null;
  }
  /** Convolves `x` `[N, in, H, W]`. */
  forward(x: Tensor): Tensor {
    if (x.ndim !== 4 || x.shape[1] !== this.inChannels) {
      throw new RangeError(
        `Conv2d(${this.inChannels}, ${this.outChannels}): input ${
          fmt(x.shape)
        } must be [N, ${this.inChannels}, H, W]`,
      );
    }
    return conv2d(x, this.weight, this.bias, {
      stride: this.stride,
      padding: this.padding,
      dilation: this.dilation,
    });
  }
}

/** Options of {@link BatchNorm2d}. */
export interface BatchNormOptions {
  /** Added to the variance (default 1e-5). */
  eps?: number;
  /** Weight of the new batch in the running statistics (default 0.1). */
  momentum?: number;
}

/**
 * Batch normalisation over N, H, W per channel. Parameters `weight`, `bias`;
 * buffers `running_mean`, `running_var` (PyTorch's `num_batches_tracked` is not
 * kept; loading a state dict that has it is fine). Training uses batch
 * statistics and updates the running ones in place.
 */
export class BatchNorm2d extends Module implements Layer {
  /** Scale `[C]` (gamma). */
  readonly weight: Tensor;
  /** Shift `[C]` (beta). */
  readonly bias: Tensor;
  /** Running mean `[C]`, used in eval mode. */
  readonly runningMean: Tensor;
  /** Running (unbiased) variance `[C]`, used in eval mode. */
  readonly runningVar: Tensor;
  /** Added to the variance. */
  readonly eps: number;
  /** Weight of the new batch in the running statistics. */
  readonly momentum: number;
  /** Batch norm over `numFeatures` channels. */
  constructor(readonly numFeatures: number, options: BatchNormOptions = {}) {
    super();
    checkInt("BatchNorm2d", { numFeatures });
    this.eps = options.eps ?? 1e-5;
    this.momentum = options.momentum ?? 0.1;
    this.weight = this.param("weight", ones([numFeatures]));
    this.bias = this.param("bias", zeros([numFeatures]));
    this.runningMean = this.buffer("running_mean", zeros([numFeatures]));
    this.runningVar = this.buffer("running_var", ones([numFeatures]));
  }
  /** PyTorch's batch counter is accepted on load and ignored (momentum is fixed). */
  protected override ignoredStateKeys(): readonly string[] {
    return ["num_batches_tracked"];
  }
  /** Normalizes `x` `[N, C, H, W]` with batch statistics (training) or the running ones (eval). */
  forward(x: Tensor): Tensor {
    if (x.ndim !== 4 || x.shape[1] !== this.numFeatures) {
      throw new RangeError(
        `BatchNorm2d(${this.numFeatures}): input ${
          fmt(x.shape)
        } must be [N, ${this.numFeatures}, H, W]`,
      );
    }
    return batchNorm2d(x, this.weight, this.bias, this.runningMean, this.runningVar, {
      training: this.training,
      momentum: this.momentum,
      eps: this.eps,
    });
  }
}

/** Layer normalisation over the last axis; `weight` ones, `bias` zeros. */
export class LayerNorm extends Module implements Layer {
  /** Scale `[dim]`. */
  readonly weight: Tensor;
  /** Shift `[dim]`. */
  readonly bias: Tensor;
  /** Layer norm over a last dimension of size `dim`. */
  constructor(readonly dim: number, readonly eps = 1e-5) {
    super();
    checkInt("LayerNorm", { dim });
    this.weight = this.param("weight", ones([dim]));
    this.bias = this.param("bias", zeros([dim]));
  }
  /** Normalizes `x` over its last dimension. */
  forward(x: Tensor): Tensor {
    if (x.shape[x.ndim - 1] !== this.dim) {
      throw new RangeError(`LayerNorm(${this.dim}): input ${fmt(x.shape)} must end in ${this.dim}`);
    }
    return layerNorm(x, this.weight, this.bias, this.eps);
  }
}

/** RMS normalisation over the last axis: `x / sqrt(mean(x^2) + eps) * weight`. */
export class RMSNorm extends Module implements Layer {
  /** Scale `[dim]`. */
  readonly weight: Tensor;
  /** RMS norm over a last dimension of size `dim`. */
  constructor(readonly dim: number, readonly eps = 1e-6) {
    super();
    checkInt("RMSNorm", { dim });
    this.weight = this.param("weight", ones([dim]));
  }
  /** Normalizes `x` by the root mean square of its last dimension. */
  forward(x: Tensor): Tensor {
    if (x.shape[x.ndim - 1] !== this.dim) {
      throw new RangeError(`RMSNorm(${this.dim}): input ${fmt(x.shape)} must end in ${this.dim}`);
    }
    return rmsNorm(x, this.weight, this.eps);
  }
}

/** Lookup table `[num, dim]` initialised N(0, 1) like PyTorch; input: i32 ids of any shape. */
export class Embedding extends Module {
  /** Embedding table `[numEmbeddings, dim]`. */
  readonly weight: Tensor;
  /** A table of `numEmbeddings` vectors of size `dim`, drawn from N(0, std^2). */
  constructor(readonly numEmbeddings: number, readonly dim: number, std = 1) {
    super();
    checkInt("Embedding", { numEmbeddings, dim });
    this.weight = this.param("weight", normal([numEmbeddings, dim], { std }));
  }
  /** The rows of `weight` for `ids` (i32): shape `[...ids.shape, dim]`. */
  forward(ids: Tensor): Tensor {
    if (ids.dtype !== "i32") {
      throw new TypeError(`Embedding: ids must be i32, got ${ids.dtype} ${fmt(ids.shape)}`);
    }
    return embedding(this.weight, ids);
  }
}

/** Inverted dropout with the seeded generator of `@libra/tensor`; identity in eval mode or for p = 0. */
export class Dropout extends Module implements Layer {
  /** Dropout with drop probability `p`. */
  constructor(readonly p = 0.5) {
    super();
    if (!(p >= 0 && p <= 1)) throw new RangeError(`Dropout: p must be in [0, 1], got ${p}`);
  }
  /** Drops elements with probability `p` in training mode; the identity in eval mode. */
  forward(x: Tensor): Tensor {
    return this.training && this.p > 0 ? dropout(x, this.p) : x;
  }
}

/** `max(x, 0)`. */
export class ReLU extends Module implements Layer {
  /** `max(x, 0)`. */
  forward(x: Tensor): Tensor {
    return x.relu();
  }
}

/** GELU, exact (`"none"`) or with the tanh approximation GPT-2 uses. */
export class GELU extends Module implements Layer {
  /** GELU, exact (`"none"`) or with the tanh approximation. */
  constructor(readonly approximate: "none" | "tanh" = "none") {
    super();
  }
  /** GELU of `x`. */
  forward(x: Tensor): Tensor {
    return x.gelu(this.approximate);
  }
}

/** Runs children in order; names are `0`, `1`, ... as in PyTorch. */
export class Sequential extends Module implements Layer {
  /** The layers, in order. */
  readonly layers: readonly Layer[];
  /** A chain of `layers`. */
  constructor(...layers: Layer[]) {
    super();
    layers.forEach((l, i) => this.child(String(i), l));
    this.layers = layers;
  }
  /** Runs the layers in order (each intermediate freed once the next layer has run). */
  forward(x: Tensor): Tensor {
    return chain(x, this.layers.map((l) => (h: Tensor) => l.forward(h)));
  }
}

/** A list of modules named `0`, `1`, ... (no forward of its own). */
export class ModuleList<M extends Module = Module> extends Module {
  /** The modules, in order. */
  readonly items: readonly M[];
  /** A list of `items`, registered as children `0`, `1`, ... */
  constructor(items: M[]) {
    super();
    items.forEach((m, i) => this.child(String(i), m));
    this.items = items;
  }
  /** Number of modules. */
  get length(): number {
    return this.items.length;
  }
  /** The module at `i`. */
  at(i: number): M {
    const m = this.items[i];
    if (!m) throw new RangeError(`ModuleList: index ${i} out of range [0, ${this.items.length})`);
    return m;
  }
  /** Iterates the modules in order. */
  [Symbol.iterator](): Iterator<M> {
    return this.items[Symbol.iterator]();
  }
}

/** Options of {@link CausalSelfAttention}. */
export interface AttentionOptions {
  /** Dropout on attention weights and on the output (default 0). */
  dropout?: number;
  /** Initialise projections N(0, initStd) (see {@link LinearOptions.initStd}). */
  initStd?: number;
}

/**
 * GPT-2 causal multi-head self-attention: `c_attn` (Linear C -> 3C, q|k|v),
 * scaled dot products per head with a causal mask, softmax, `c_proj` (C -> C).
 * Input and output `[B, T, C]`.
 */
export class CausalSelfAttention extends Module implements Layer {
  /** Joint query, key and value projection. */
  readonly c_attn: Linear;
  /** Output projection. */
  readonly c_proj: Linear;
  /** Dropout on the attention weights. */
  readonly attnDropout: Dropout;
  /** Dropout on the output. */
  readonly residDropout: Dropout;
  /** Causal self-attention of width `nEmbd` with `nHead` heads. */
  constructor(readonly nEmbd: number, readonly nHead: number, options: AttentionOptions = {}) {
    super();
    checkInt("CausalSelfAttention", { nEmbd, nHead });
    if (nEmbd % nHead !== 0) {
      throw new RangeError(
        `CausalSelfAttention: nEmbd ${nEmbd} is not divisible by nHead ${nHead}`,
      );
    }
    const init = options.initStd === undefined ? {} : { initStd: options.initStd };
    this.c_attn = this.child("c_attn", new Linear(nEmbd, 3 * nEmbd, init));
    this.c_proj = this.child("c_proj", new Linear(nEmbd, nEmbd, init));
    this.attnDropout = this.child("attn_dropout", new Dropout(options.dropout ?? 0));
    this.residDropout = this.child("resid_dropout", new Dropout(options.dropout ?? 0));
  }
  /**
   * `mask` is the additive `[T, T]` causal mask; models with several attention
   * layers build it once per forward pass and pass it down (default: built here).
   */
  forward(x: Tensor, mask?: Tensor): Tensor {
    const [B, T, C] = x.shape as [number, number, number];
    if (x.ndim !== 3 || C !== this.nEmbd) {
      throw new RangeError(
        `CausalSelfAttention(${this.nEmbd}): input ${fmt(x.shape)} must be [B, T, ${this.nEmbd}]`,
      );
    }
    const nh = this.nHead, hd = C / nh;
    // Its intermediates (scores, weights, heads) are freed when it returns.
    return tidy(() => {
      // [B, T, 3, nh, hd] -> [3, B, nh, T, hd]: one copy yields q, k and v head-major
      const qkv = this.c_attn.forward(x).reshape([B, T, 3, nh, hd]).permute([2, 0, 3, 1, 4]);
      const q = qkv.narrow(0, 0, 1).reshape([B, nh, T, hd]);
      const k = qkv.narrow(0, 1, 1).reshape([B, nh, T, hd]);
      const v = qkv.narrow(0, 2, 1).reshape([B, nh, T, hd]);
      const m = mask ?? causalMask(T, x.backend);
      const scores = q.matmul(k, { transB: true }).mul(1 / Math.sqrt(hd)).add(m);
      const att = this.attnDropout.forward(scores.softmax());
      const y = att.matmul(v).permute([0, 2, 1, 3]).reshape([B, T, C]);
      return this.residDropout.forward(this.c_proj.forward(y));
    });
  }
}
