/**
 * The model registry ({@link MODELS}: name -> presets, factory and matching
 * synthetic data, registered once), `createModel(name, preset | config)` and
 * `createData`. Unknown names and presets are errors that list the available ones.
 *
 * Presets: `tiny` (a training step well under a second on 2 CPU cores; the
 * tests train them), `small` (benchmarks), `paper` (the configuration used in
 * the literature; build it on the meta backend unless you have the memory):
 *
 * | family | paper preset |
 * |--------|--------------|
 * | mlp    | 784-1024-1024-1024-10, batch 128 |
 * | resnet | ResNet-32 for CIFAR-10 (3 stages x 5 basic blocks, widths 16/32/64; DTR's evaluation), 32x32, batch 128; also `resnet50`: ImageNet ResNet-50, 224x224, batch 32 |
 * | gpt    | GPT-2 small: 12 layers, 12 heads, width 768, context 1024, vocabulary 50257, tied head; batch 8 x 1024 tokens |
 * | unet   | U-Net with 64 base channels and 4 levels (Ronneberger et al.), 3 -> 2 classes, 256x256 ("same" padding), batch 4 |
 * | lstm   | 2-layer LSTM LM, 650 units, vocabulary 10000 (Zaremba et al.'s medium PTB model), 35 steps, batch 20 |
 *
 * @module
 */

import { type Backend, withBackend } from "@libra/tensor";
import { type DataSource, imageData, segmentationData, tokenData, vectorData } from "./data.ts";
import { GPT, type GPTConfig } from "./gpt.ts";
import type { Layer } from "./layers.ts";
import { type LSTMConfig, LSTMLM } from "./lstm.ts";
import { MLP, type MLPConfig } from "./mlp.ts";
import { ResNet, type ResNetConfig } from "./resnet.ts";
import { UNet, type UNetConfig } from "./unet.ts";

/** Model families of the zoo. */
export type ModelName = "mlp" | "resnet" | "gpt" | "unet" | "lstm";

/** Configuration type of each family. */
export interface ModelConfigs {
  /** Configuration of {@link MLP}. */
  mlp: MLPConfig;
  /** Configuration of {@link ResNet}. */
  resnet: ResNetConfig;
  /** Configuration of {@link GPT}. */
  gpt: GPTConfig;
  /** Configuration of {@link UNet}. */
  unet: UNetConfig;
  /** Configuration of {@link LSTMLM}. */
  lstm: LSTMConfig;
}

/** Batch geometry that goes with a preset (image side or sequence length). */
export interface InputSpec {
  /** Samples per batch. */
  batchSize: number;
  /** Image side (resnet, unet). */
  imageSize?: number;
  /** Sequence length (gpt, lstm). */
  seqLen?: number;
}

/** A named configuration plus the input it is meant for. */
export interface Preset<C> {
  /** The model configuration. */
  readonly config: C;
  /** The batch geometry it is meant for. */
  readonly input: InputSpec;
  /** What the preset is, in a few words. */
  readonly description: string;
}

const basic = (layers: number[], widths: number[], classes = 10): ResNetConfig => ({
  block: "basic",
  stem: "cifar",
  layers,
  widths,
  inChannels: 3,
  numClasses: classes,
});

const MLP_PRESETS: Readonly<Record<string, Preset<MLPConfig>>> = {
  tiny: {
    config: { inFeatures: 16, hidden: [32, 32], outFeatures: 4 },
    input: { batchSize: 32 },
    description: "16-32-32-4",
  },
  small: {
    config: { inFeatures: 64, hidden: [256, 256], outFeatures: 10 },
    input: { batchSize: 64 },
    description: "64-256-256-10",
  },
  paper: {
    config: { inFeatures: 784, hidden: [1024, 1024, 1024], outFeatures: 10 },
    input: { batchSize: 128 },
    description: "784-1024x3-10 (MNIST-sized)",
  },
};

const RESNET_PRESETS: Readonly<Record<string, Preset<ResNetConfig>>> = {
  tiny: {
    config: basic([1, 1, 1], [8, 16, 32]),
    input: { batchSize: 8, imageSize: 16 },
    description: "ResNet-8, widths 8/16/32, 16x16",
  },
  small: {
    config: basic([3, 3, 3], [16, 32, 64]),
    input: { batchSize: 16, imageSize: 32 },
    description: "ResNet-20 (CIFAR)",
  },
  paper: {
    config: basic([5, 5, 5], [16, 32, 64]),
    input: { batchSize: 128, imageSize: 32 },
    description: "ResNet-32 (CIFAR-10), as in DTR",
  },
  resnet32: {
    config: basic([5, 5, 5], [16, 32, 64]),
    input: { batchSize: 128, imageSize: 32 },
    description: "ResNet-32 (CIFAR-10)",
  },
  resnet50: {
    config: {
      block: "bottleneck",
      stem: "imagenet",
      layers: [3, 4, 6, 3],
      widths: [64, 128, 256, 512],
      inChannels: 3,
      numClasses: 1000,
    },
    input: { batchSize: 32, imageSize: 224 },
    description: "ResNet-50 (ImageNet)",
  },
};

const GPT_PRESETS: Readonly<Record<string, Preset<GPTConfig>>> = {
  tiny: {
    config: { vocabSize: 32, contextLength: 16, nLayer: 2, nHead: 2, nEmbd: 32 },
    input: { batchSize: 8, seqLen: 16 },
    description: "2 layers, width 32, context 16",
  },
  small: {
    config: { vocabSize: 256, contextLength: 128, nLayer: 4, nHead: 4, nEmbd: 128 },
    input: { batchSize: 8, seqLen: 128 },
    description: "4 layers, width 128, context 128",
  },
  paper: {
    config: { vocabSize: 50257, contextLength: 1024, nLayer: 12, nHead: 12, nEmbd: 768 },
    input: { batchSize: 8, seqLen: 1024 },
    description: "GPT-2 small (124M)",
  },
};

const UNET_PRESETS: Readonly<Record<string, Preset<UNetConfig>>> = {
  tiny: {
    config: { inChannels: 1, numClasses: 2, baseWidth: 4, depth: 2 },
    input: { batchSize: 4, imageSize: 16 },
    description: "base 4, depth 2, 16x16",
  },
  small: {
    config: { inChannels: 3, numClasses: 2, baseWidth: 16, depth: 3 },
    input: { batchSize: 4, imageSize: 64 },
    description: "base 16, depth 3, 64x64",
  },
  paper: {
    config: { inChannels: 3, numClasses: 2, baseWidth: 64, depth: 4 },
    input: { batchSize: 4, imageSize: 256 },
    description: "U-Net (base 64, 4 levels), 256x256",
  },
};

const LSTM_PRESETS: Readonly<Record<string, Preset<LSTMConfig>>> = {
  tiny: {
    config: { vocabSize: 32, embedDim: 32, hiddenSize: 32, numLayers: 1 },
    input: { batchSize: 8, seqLen: 12 },
    description: "1 layer, 32 units, 12 steps",
  },
  small: {
    config: { vocabSize: 256, embedDim: 128, hiddenSize: 128, numLayers: 2 },
    // Batch 80: a step of 50 ms or more on 2 cores (55-57 ms here; batch 48 took 35 ms since
    // the recurrence is one op with a fused cell, 71 ms before).
    input: { batchSize: 80, seqLen: 32 },
    description: "2 layers, 128 units, 32 steps, batch 80",
  },
  paper: {
    config: { vocabSize: 10000, embedDim: 650, hiddenSize: 650, numLayers: 2 },
    input: { batchSize: 20, seqLen: 35 },
    description: "medium PTB LSTM (Zaremba et al. 2014)",
  },
};

/** The batch geometry and seed {@link ModelEntry.data} gets. */
export interface DataInput {
  /** Samples per batch. */
  batchSize: number;
  /** Image side (image models). */
  imageSize: number;
  /** Sequence length (token models). */
  seqLen: number;
  /** Seed of the data generator. */
  seed: number;
}

/** One family of the registry: its presets, how to build it and the data it trains on. */
export interface ModelEntry<C> {
  /** What the family is, in a few words. */
  readonly description: string;
  /** Named configurations (`tiny`, `small`, `paper`, ...). */
  readonly presets: Readonly<Record<string, Preset<C>>>;
  /** Builds the model on the current default backend. */
  build(config: C): ZooModel;
  /** The synthetic data source that matches a configuration. */
  data(config: C, input: DataInput): DataSource;
}

/** A model of the zoo: a module with a one-input forward pass. */
export type ZooModel = Layer;

/**
 * The model registry: every family by name, registered once. The lists the
 * CLI, the benchmarks, the lab API and the web forms show derive from it
 * ({@link MODEL_NAMES}, {@link PRESETS}).
 */
export const MODELS: { readonly [K in ModelName]: ModelEntry<ModelConfigs[K]> } = {
  mlp: {
    description: "multilayer perceptron (ReLU) on synthetic vectors",
    presets: MLP_PRESETS,
    build: (c) => new MLP(c),
    data: (c, i) =>
      vectorData({
        features: c.inFeatures,
        classes: c.outFeatures,
        batchSize: i.batchSize,
        seed: i.seed,
      }),
  },
  resnet: {
    description: "ResNet (basic or bottleneck blocks) on synthetic images",
    presets: RESNET_PRESETS,
    build: (c) => new ResNet(c),
    data: (c, i) =>
      imageData({
        channels: c.inChannels,
        size: i.imageSize,
        classes: c.numClasses,
        batchSize: i.batchSize,
        seed: i.seed,
      }),
  },
  gpt: {
    description: "GPT-2 style decoder-only transformer on synthetic tokens",
    presets: GPT_PRESETS,
    build: (c) => new GPT(c),
    data: (c, i) =>
      tokenData({ vocabSize: c.vocabSize, seqLen: i.seqLen, batchSize: i.batchSize, seed: i.seed }),
  },
  unet: {
    description: "U-Net segmentation on synthetic images (2 classes)",
    presets: UNET_PRESETS,
    build: (c) => new UNet(c),
    data: (c, i) => {
      if (c.numClasses !== 2) {
        throw new RangeError(
          `createData("unet"): the segmentation data has 2 classes, the config ${c.numClasses}`,
        );
      }
      return segmentationData({
        channels: c.inChannels,
        size: i.imageSize,
        batchSize: i.batchSize,
        seed: i.seed,
      });
    },
  },
  lstm: {
    description: "LSTM language model on synthetic tokens",
    presets: LSTM_PRESETS,
    build: (c) => new LSTMLM(c),
    data: (c, i) =>
      tokenData({ vocabSize: c.vocabSize, seqLen: i.seqLen, batchSize: i.batchSize, seed: i.seed }),
  },
};

/** Names of all families, in registry order. */
export const MODEL_NAMES: readonly ModelName[] = Object.keys(MODELS) as ModelName[];

/** Every preset of every family (the registry's presets, by family). */
export const PRESETS: {
  readonly [K in ModelName]: Readonly<Record<string, Preset<ModelConfigs[K]>>>;
} = {
  mlp: MODELS.mlp.presets,
  resnet: MODELS.resnet.presets,
  gpt: MODELS.gpt.presets,
  unet: MODELS.unet.presets,
  lstm: MODELS.lstm.presets,
};

/** True when `name` is a family of the registry. */
export function isModelName(name: string): name is ModelName {
  return Object.hasOwn(MODELS, name);
}

/**
 * The registry entry of a family, with an error listing the available ones.
 *
 * @example
 * ```ts
 * import { modelEntry } from "@libra/nn/zoo";
 * if (!("tiny" in modelEntry("gpt").presets)) throw new Error("example: no tiny gpt");
 * ```
 */
export function modelEntry<K extends ModelName>(name: K): ModelEntry<ModelConfigs[K]> {
  if (!isModelName(name)) {
    throw new RangeError(`unknown model "${name}"; available: ${MODEL_NAMES.join(", ")}`);
  }
  return MODELS[name] as unknown as ModelEntry<ModelConfigs[K]>;
}

/** Looks up a preset, with an error listing the available ones. */
export function getPreset<K extends ModelName>(name: K, preset: string): Preset<ModelConfigs[K]> {
  const presets = modelEntry(name).presets;
  const p = Object.hasOwn(presets, preset) ? presets[preset] : undefined;
  if (!p) {
    throw new RangeError(
      `unknown preset "${preset}" for ${name}; available: ${Object.keys(presets).join(", ")}`,
    );
  }
  return p;
}

/** Options of {@link createModel}. */
export interface CreateModelOptions {
  /** Backend for the parameters (default: the tensor package's default backend). */
  backend?: Backend;
}

/**
 * Builds a model of the zoo from a preset name or a configuration object.
 *
 * @example
 * ```ts
 * import { MetaBackend } from "@libra/tensor";
 * import { createModel } from "@libra/nn/zoo";
 * const meta = new MetaBackend();
 * const gpt2 = createModel("gpt", "paper", { backend: meta }); // sizes only, no data
 * if (gpt2.numParameters() !== 124439808) throw new Error("GPT-2 small has 124.4M parameters");
 * ```
 */
export function createModel<K extends ModelName>(
  name: K,
  presetOrConfig: string | ModelConfigs[K] = "tiny",
  options: CreateModelOptions = {},
): ZooModel {
  const entry = modelEntry(name);
  const config = typeof presetOrConfig === "string"
    ? getPreset(name, presetOrConfig).config
    : presetOrConfig;
  const build = (): ZooModel => entry.build(config);
  return options.backend ? withBackend(options.backend, build) : build();
}

/** Options of {@link createData}: override the preset's batch geometry or the seed. */
export interface CreateDataOptions extends Partial<InputSpec> {
  /** Seed of the data generator (default 0). */
  seed?: number;
}

/**
 * The synthetic data source that matches a model (see `./data.ts`). With a
 * config object instead of a preset name, `batchSize` and the image side or
 * sequence length must be given (defaults: batch 8, image 16, sequence 16).
 */
export function createData<K extends ModelName>(
  name: K,
  presetOrConfig: string | ModelConfigs[K] = "tiny",
  options: CreateDataOptions = {},
): DataSource {
  const entry = modelEntry(name);
  const preset = typeof presetOrConfig === "string" ? getPreset(name, presetOrConfig) : undefined;
  const config = (preset?.config ?? presetOrConfig) as ModelConfigs[K];
  return entry.data(config, {
    batchSize: options.batchSize ?? preset?.input.batchSize ?? 8,
    imageSize: options.imageSize ?? preset?.input.imageSize ?? 16,
    seqLen: options.seqLen ?? preset?.input.seqLen ?? 16,
    seed: options.seed ?? 0,
  });
}
