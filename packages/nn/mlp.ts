/**
 * `mlp`: a multi-layer perceptron (Linear, ReLU, ..., Linear).
 *
 * @module
 */

import type { Tensor } from "./_ops.ts";
import { type Layer, Linear, ReLU, Sequential } from "./layers.ts";
import { Module } from "./module.ts";

/** Configuration of {@link MLP}. */
export interface MLPConfig {
  /** Input features. */
  inFeatures: number;
  /** Hidden widths, one Linear + ReLU each. */
  hidden: number[];
  /** Output features (classes). */
  outFeatures: number;
}

/**
 * `layers` is a Sequential of Linear and ReLU, so parameters are named
 * `layers.0.weight`, `layers.2.weight`, ... exactly as the PyTorch equivalent.
 */
export class MLP extends Module implements Layer {
  /** The linear layers and activations, in order. */
  readonly layers: Sequential;
  /** Builds the MLP described by `config` with fresh parameters. */
  constructor(readonly config: MLPConfig) {
    super();
    const dims = [config.inFeatures, ...config.hidden, config.outFeatures];
    const mods: Layer[] = [];
    for (let i = 0; i + 1 < dims.length; i++) {
      mods.push(new Linear(dims[i]!, dims[i + 1]!));
      if (i + 2 < dims.length) mods.push(new ReLU());
    }
    this.layers = this.child("layers", new Sequential(...mods));
  }
  /** `[B, inFeatures]` -> logits `[B, outFeatures]`. */
  forward(x: Tensor): Tensor {
    return this.layers.forward(x);
  }
}
