/**
 * `gpt`: a GPT-2 style decoder (Radford et al. 2019): token and position
 * embeddings, pre-norm blocks (LayerNorm, causal self-attention, LayerNorm,
 * GELU-tanh MLP of width 4C), a final LayerNorm and a language-model head tied
 * to the token embedding (or untied).
 *
 * Names follow Hugging Face GPT-2 (`wte`, `wpe`, `h.{i}.ln_1`, `h.{i}.attn.c_attn`,
 * `h.{i}.attn.c_proj`, `h.{i}.ln_2`, `h.{i}.mlp.c_fc`, `h.{i}.mlp.c_proj`, `ln_f`,
 * and `lm_head` when untied), but every projection uses the `nn.Linear` layout
 * `[out, in]`: Hugging Face checkpoints store GPT-2's Conv1D weights as
 * `[in, out]` and need a transpose before loading.
 *
 * @module
 */

import { arangeIds, causalMask, chain, type Tensor, tidy } from "./_ops.ts";
import type { HostTensor } from "./safetensors.ts";
import {
  CausalSelfAttention,
  Dropout,
  Embedding,
  GELU,
  type Layer,
  LayerNorm,
  Linear,
  ModuleList,
} from "./layers.ts";
import { Module } from "./module.ts";

/** Configuration of {@link GPT}. */
export interface GPTConfig {
  /** Number of distinct tokens (rows of `wte`). */
  vocabSize: number;
  /** Maximum sequence length (rows of `wpe`). */
  contextLength: number;
  /** Number of transformer blocks. */
  nLayer: number;
  /** Attention heads per block. */
  nHead: number;
  /** Embedding width (divisible by `nHead`). */
  nEmbd: number;
  /** Dropout on embeddings, attention and residual branches (default 0). */
  dropout?: number;
  /** Share the head with `wte` (GPT-2 does; default true). */
  tiedHead?: boolean;
}

/** GELU-tanh MLP: `c_fc` (C -> 4C), GELU, `c_proj` (4C -> C). */
export class GPTMLP extends Module implements Layer {
  /** Expansion to 4x the width. */
  readonly c_fc: Linear;
  /** GELU with the tanh approximation, as GPT-2. */
  readonly act: GELU = new GELU("tanh");
  /** Projection back to the width. */
  readonly c_proj: Linear;
  /** An MLP block for embedding width `nEmbd`. */
  constructor(nEmbd: number) {
    super();
    this.c_fc = this.child("c_fc", new Linear(nEmbd, 4 * nEmbd, { initStd: 0.02 }));
    this.c_proj = this.child("c_proj", new Linear(4 * nEmbd, nEmbd, { initStd: 0.02 }));
  }
  /** `c_proj(gelu(c_fc(x)))`. */
  forward(x: Tensor): Tensor {
    return tidy(() => this.c_proj.forward(this.act.forward(this.c_fc.forward(x))));
  }
}

/** One pre-norm transformer block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`. */
export class GPTBlock extends Module implements Layer {
  /** Layer norm before attention. */
  readonly ln_1: LayerNorm;
  /** Causal self-attention. */
  readonly attn: CausalSelfAttention;
  /** Layer norm before the MLP. */
  readonly ln_2: LayerNorm;
  /** The position-wise MLP. */
  readonly mlp: GPTMLP;
  /** A transformer block of width `nEmbd` with `nHead` heads. */
  constructor(nEmbd: number, nHead: number, dropout = 0) {
    super();
    this.ln_1 = this.child("ln_1", new LayerNorm(nEmbd));
    this.attn = this.child(
      "attn",
      new CausalSelfAttention(nEmbd, nHead, { dropout, initStd: 0.02 }),
    );
    this.ln_2 = this.child("ln_2", new LayerNorm(nEmbd));
    this.mlp = this.child("mlp", new GPTMLP(nEmbd));
  }
  /** `mask`: the causal mask shared by all blocks (see {@link CausalSelfAttention.forward}). */
  forward(x: Tensor, mask?: Tensor): Tensor {
    return tidy(() => {
      const h = x.add(this.attn.forward(this.ln_1.forward(x), mask));
      return h.add(this.mlp.forward(this.ln_2.forward(h)));
    });
  }
}

/** The GPT-2 style model. Input: i32 token ids `[B, T]`; output: logits `[B, T, vocabSize]`. */
export class GPT extends Module implements Layer {
  /** Token embeddings. */
  readonly wte: Embedding;
  /** Position embeddings. */
  readonly wpe: Embedding;
  /** Dropout on the summed embeddings. */
  readonly drop: Dropout;
  /** The transformer blocks. */
  readonly h: ModuleList<GPTBlock>;
  /** Final layer norm. */
  readonly ln_f: LayerNorm;
  /** Output head; null when it is tied to `wte`. */
  readonly lm_head: Linear | null;
  /** Builds the model described by `config` with GPT-2's initialisation. */
  constructor(readonly config: GPTConfig) {
    super();
    const c = config;
    if (c.nEmbd % c.nHead !== 0) {
      throw new RangeError(`GPT: nEmbd ${c.nEmbd} is not divisible by nHead ${c.nHead}`);
    }
    // GPT-2 initialises embeddings and projections N(0, 0.02)
    this.wte = this.child("wte", new Embedding(c.vocabSize, c.nEmbd, 0.02));
    this.wpe = this.child("wpe", new Embedding(c.contextLength, c.nEmbd, 0.02));
    this.drop = this.child("drop", new Dropout(c.dropout ?? 0));
    this.h = this.child(
      "h",
      new ModuleList(
        Array.from({ length: c.nLayer }, () => new GPTBlock(c.nEmbd, c.nHead, c.dropout ?? 0)),
      ),
    );
    this.ln_f = this.child("ln_f", new LayerNorm(c.nEmbd));
    this.lm_head = c.tiedHead ?? true
      ? null
      : this.child("lm_head", new Linear(c.nEmbd, c.vocabSize, { bias: false, initStd: 0.02 }));
  }
  /** Logits `[batch, seq, vocab]` for token ids `[batch, seq]` (i32). */
  forward(ids: Tensor): Tensor {
    const [, T] = ids.shape as [number, number];
    if (ids.ndim !== 2 || ids.dtype !== "i32") {
      throw new TypeError(`GPT: input must be i32 [B, T], got ${ids.dtype} [${ids.shape}]`);
    }
    if (T > this.config.contextLength) {
      throw new RangeError(
        `GPT: sequence length ${T} exceeds contextLength ${this.config.contextLength}`,
      );
    }
    // Each value between blocks is freed once the next block has run (what the backward
    // pass needs of it, autograd keeps).
    return tidy(() => {
      const mask = causalMask(T, ids.backend);
      return chain(ids, [
        (i) =>
          tidy(() =>
            this.drop.forward(this.wte.forward(i).add(this.wpe.forward(arangeIds(T, i.backend))))
          ),
        ...[...this.h].map((blk) => (x: Tensor) => blk.forward(x, mask)),
        (x) => this.ln_f.forward(x),
        (x) => this.lm_head ? this.lm_head.forward(x) : x.matmul(this.wte.weight, { transB: true }),
      ]);
    });
  }
}

/** Options of {@link fromHuggingFaceGPT2}. */
export interface HuggingFaceGPT2Options {
  /** Drop `lm_head.weight` (Hugging Face stores the tied copy); default true. */
  tiedHead?: boolean;
}

const CONV1D = /\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$/;

/**
 * Converts a Hugging Face GPT-2 state dict (`GPT2Model` or `GPT2LMHeadModel`,
 * e.g. read with `readSafetensors`) to this model's names and layouts: strips
 * the `transformer.` prefix, transposes the Conv1D weights `[in, out]` to
 * `[out, in]`, drops the causal-mask buffers (`attn.bias`, `attn.masked_bias`)
 * and, for a tied head, `lm_head.weight`. The result loads with
 * `model.loadStateDict(...)` strictly.
 */
export function fromHuggingFaceGPT2(
  entries: ReadonlyMap<string, HostTensor>,
  options: HuggingFaceGPT2Options = {},
): Map<string, HostTensor> {
  const out = new Map<string, HostTensor>();
  for (const [key, t] of entries) {
    const k = key.startsWith("transformer.") ? key.slice("transformer.".length) : key;
    if (/\.attn\.(bias|masked_bias)$/.test(k)) continue;
    if (k === "lm_head.weight" && (options.tiedHead ?? true)) continue;
    if (CONV1D.test(k)) {
      if (t.shape.length !== 2 || t.dtype !== "f32") {
        throw new RangeError(
          `fromHuggingFaceGPT2: ${key} should be a 2-D f32 Conv1D weight, got ${t.dtype}[${t.shape}]`,
        );
      }
      const [rows, cols] = t.shape as [number, number];
      const data = new Float32Array(rows * cols);
      for (let i = 0; i < rows; i++) {
        for (let j = 0; j < cols; j++) data[j * rows + i] = t.data[i * cols + j]!;
      }
      out.set(k, { dtype: "f32", shape: [cols, rows], data });
    } else out.set(k, t);
  }
  return out;
}
