/**
 * The names a run can use, taken from the packages that implement them (models and
 * presets from `@libra/nn`, policies and planners from `@libra/evict`), and a schema
 * per model for the configuration overrides a run may give. The API refuses anything
 * else when a configuration or a simulation is created, naming the valid choices.
 *
 * @module
 */

import { LIVE_COST_MODELS } from "@libra/cost";
import { PLANNER_NAMES } from "@libra/evict/planners";
import { POLICY_NAMES } from "@libra/evict/policies";
import { MODEL_NAMES, PRESETS } from "@libra/nn/zoo";
import { z } from "zod";

/** Models of the zoo. */
export const MODELS: readonly string[] = [...MODEL_NAMES];

/** Presets of each model. */
export function presetsOf(model: string): readonly string[] {
  const p = (PRESETS as Record<string, Record<string, unknown>>)[model];
  return p ? Object.keys(p) : [];
}

/** Policies and planners a training run can use (each policy also with `+swap`). */
export const TRAIN_POLICIES: readonly string[] = [
  ...POLICY_NAMES,
  ...POLICY_NAMES.map((p) => `${p}+swap`),
  ...PLANNER_NAMES,
];

/** Policies and planners a trace simulation can compare. */
export const TRACE_POLICIES: readonly string[] = TRAIN_POLICIES;

/** Cost models a live run can use (those of `@libra/cost`). */
export const COST_MODELS: readonly string[] = [...LIVE_COST_MODELS];

/** `unknown <what> "x"; valid: a, b, c` */
export function unknownName(what: string, value: string, valid: readonly string[]): string {
  return `unknown ${what} ${JSON.stringify(value)}; valid: ${valid.join(", ")}`;
}

const count = (max: number) =>
  z.number().int("must be an integer").min(1, "must be >= 1").max(max, `must be <= ${max}`);
const list = (max: number, len: number) =>
  z.array(count(max)).min(1, "must not be empty").max(len, `at most ${len} entries`);
const WIDTH = 1 << 16;

/**
 * Overrides a configuration may give per model: the fields of the model's
 * configuration, each bounded (the memory estimate before queuing bounds the whole).
 */
export const MODEL_OVERRIDES: Readonly<Record<string, z.ZodType<Record<string, unknown>>>> = {
  mlp: z.object({
    inFeatures: count(WIDTH),
    hidden: list(WIDTH, 64),
    outFeatures: count(WIDTH),
  }).partial().strict(),
  resnet: z.object({
    block: z.enum(["basic", "bottleneck"]),
    stem: z.enum(["cifar", "imagenet"]),
    layers: list(64, 8),
    widths: list(4096, 8),
    inChannels: count(64),
    numClasses: count(100_000),
  }).partial().strict(),
  gpt: z.object({
    vocabSize: count(1_000_000),
    contextLength: count(1 << 15),
    nLayer: count(256),
    nHead: count(256),
    nEmbd: count(WIDTH),
    dropout: z.number().min(0, "must be >= 0").lt(1, "must be < 1"),
    tiedHead: z.boolean(),
  }).partial().strict(),
  unet: z.object({
    inChannels: count(64),
    numClasses: z.literal(2, "must be 2 (the segmentation data has two classes)"),
    baseWidth: count(4096),
    depth: count(8),
  }).partial().strict(),
  lstm: z.object({
    vocabSize: count(1_000_000),
    embedDim: count(WIDTH),
    hiddenSize: count(WIDTH),
    numLayers: count(64),
  }).partial().strict(),
};

/** Checks that go across fields of a model's merged configuration; messages by field. */
export function crossCheck(model: string, merged: Record<string, unknown>): [string, string][] {
  const out: [string, string][] = [];
  if (model === "gpt") {
    const { nEmbd, nHead } = merged as { nEmbd?: number; nHead?: number };
    if (typeof nEmbd === "number" && typeof nHead === "number" && nEmbd % nHead !== 0) {
      out.push(["nEmbd", `must be divisible by nHead (${nEmbd} % ${nHead} != 0)`]);
    }
  }
  if (model === "resnet") {
    const { layers, widths } = merged as { layers?: unknown[]; widths?: unknown[] };
    if (Array.isArray(layers) && Array.isArray(widths) && layers.length !== widths.length) {
      out.push(["widths", `needs one width per stage (${layers.length} stages)`]);
    }
  }
  return out;
}

/** The preset's configuration of a model (for merging overrides), or null. */
export function presetConfig(model: string, preset: string): Record<string, unknown> | null {
  const p = (PRESETS as unknown as Record<string, Record<string, { config: object }>>)[model]
    ?.[preset];
  return p ? { ...p.config } : null;
}
