/**
 * `lstm`: an LSTM language model (embedding, stacked LSTM, linear head) whose
 * recurrence is unrolled over the sequence (`lstmLayer`: per time step the
 * recurrent matmul and one kernel for the gate sum and the cell, each its own
 * kernel call), so the re-materialization runtime sees (and may evict) every
 * time step.
 *
 * The LSTM follows `torch.nn.LSTM` (batch first): per layer `k` the parameters
 * `weight_ih_l{k}` `[4H, in]`, `weight_hh_l{k}` `[4H, H]`, `bias_ih_l{k}`,
 * `bias_hh_l{k}` `[4H]`, gates in the order i, f, g, o, all initialised
 * U(-1/sqrt(H), 1/sqrt(H)); zero initial state.
 *
 * @module
 */

import { chain, linear, lstmLayer, type Tensor, tidy, uniform } from "./_ops.ts";
import { Embedding, type Layer, Linear } from "./layers.ts";
import { Module } from "./module.ts";

/** Configuration of {@link LSTMLM}. */
export interface LSTMConfig {
  /** Number of distinct tokens. */
  vocabSize: number;
  /** Embedding width. */
  embedDim: number;
  /** Hidden units per layer. */
  hiddenSize: number;
  /** Stacked LSTM layers. */
  numLayers: number;
}

/** A stacked LSTM over `[B, T, in]` returning the top layer's hidden states `[B, T, H]`. */
export class LSTM extends Module implements Layer {
  /** Per layer: input and hidden weights and biases (PyTorch's gate order i, f, g, o). */
  readonly weights: { ih: Tensor; hh: Tensor; bih: Tensor; bhh: Tensor }[] = [];
  /** A stack of `numLayers` LSTM layers from `inputSize` to `hiddenSize`. */
  constructor(readonly inputSize: number, readonly hiddenSize: number, readonly numLayers: number) {
    super();
    const H = hiddenSize, b = 1 / Math.sqrt(H);
    const u = (shape: number[]) => uniform(shape, { low: -b, high: b });
    for (let k = 0; k < numLayers; k++) {
      const inp = k === 0 ? inputSize : H;
      this.weights.push({
        ih: this.param(`weight_ih_l${k}`, u([4 * H, inp])),
        hh: this.param(`weight_hh_l${k}`, u([4 * H, H])),
        bih: this.param(`bias_ih_l${k}`, u([4 * H])),
        bhh: this.param(`bias_hh_l${k}`, u([4 * H])),
      });
    }
  }
  /** Hidden states `[batch, seq, hidden]` of the last layer for `x` `[batch, seq, input]`. */
  forward(x: Tensor): Tensor {
    // the input projection of all time steps in one matmul, with both biases (added once
    // here rather than to each step's product), then the recurrence as one op: per step the
    // product h W_hh^T and one kernel (gate sum and cell), and in its backward one gradient
    // concatenation and one W_hh matmul over all steps; each layer's input freed once the
    // next has run
    return chain(
      x,
      this.weights.map((w) => (seq: Tensor) =>
        tidy(() => lstmLayer(linear(seq, w.ih, w.bih.add(w.bhh)), w.hh))
      ),
    );
  }
}

/** Embedding -> LSTM -> Linear head. Input i32 `[B, T]`; output logits `[B, T, vocabSize]`. */
export class LSTMLM extends Module implements Layer {
  /** Token embeddings. */
  readonly embed: Embedding;
  /** The LSTM stack. */
  readonly lstm: LSTM;
  /** Output head to the vocabulary. */
  readonly head: Linear;
  /** Builds the model described by `config`. */
  constructor(readonly config: LSTMConfig) {
    super();
    const c = config;
    this.embed = this.child("embed", new Embedding(c.vocabSize, c.embedDim));
    this.lstm = this.child("lstm", new LSTM(c.embedDim, c.hiddenSize, c.numLayers));
    this.head = this.child("head", new Linear(c.hiddenSize, c.vocabSize));
  }
  /** Logits `[batch, seq, vocab]` for token ids `[batch, seq]` (i32). */
  forward(ids: Tensor): Tensor {
    if (ids.ndim !== 2 || ids.dtype !== "i32") {
      throw new TypeError(`LSTMLM: input must be i32 [B, T], got ${ids.dtype} [${ids.shape}]`);
    }
    return chain(ids, [
      (i) => this.embed.forward(i),
      (h) => this.lstm.forward(h),
      (h) => this.head.forward(h),
    ]);
  }
}
