/**
 * The names a run can use, taken from the packages that implement them (models and
 * presets from `@libra/nn`, policies and planners from `@libra/evict`, live cost models
 * from `@libra/cost`), and a schema
 * per model for the configuration overrides a run may give. The API refuses anything
 * else when a configuration or a simulation is created, naming the valid choices.
 *
 * @module
 */

import { LIVE_COST_MODELS } from "@libra/cost/cost-model";
import { PLANNER_NAMES } from "@libra/evict/planners";
import { POLICY_NAMES } from "@libra/evict/policies";
import { MODEL_NAMES, PRESETS } from "@libra/nn/zoo";
import { z } from "zod";
import { ConfigurationInput, type FieldError } from "./schemas.ts";

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

/** Cost models a live run can use (`LIVE_COST_MODELS` of `@libra/cost`). */
export const COST_MODELS: readonly string[] = [...LIVE_COST_MODELS];

/** `unknown <what> "x"; choose one of a, b, c` (the dashboard's form says the same) */
export function unknownName(what: string, value: string, valid: readonly string[]): string {
  return `unknown ${what} ${JSON.stringify(value)}; choose one of ${valid.join(", ")}`;
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

/**
 * Checks the names against what the packages implement (model, its preset, policy,
 * cost model) and the overrides against the model's schema, naming the valid choices.
 */
export function knownNames(
  v: { model: string; preset: string; policy: string; costModel: string; config: unknown },
  ctx: z.RefinementCtx,
): void {
  const bad = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: "custom", path, message });
  if (!MODELS.includes(v.model)) return bad(["model"], unknownName("model", v.model, MODELS));
  const presets = presetsOf(v.model);
  if (!presets.includes(v.preset)) {
    bad(["preset"], unknownName(`preset of ${v.model}`, v.preset, presets));
  }
  if (!TRAIN_POLICIES.includes(v.policy)) {
    bad(["policy"], unknownName("policy", v.policy, TRAIN_POLICIES));
  }
  if (!COST_MODELS.includes(v.costModel)) {
    bad(["costModel"], unknownName("cost model", v.costModel, COST_MODELS));
  }
  if (v.config === null || v.config === undefined) return;
  const schema = MODEL_OVERRIDES[v.model]!;
  const r = schema.safeParse(v.config);
  if (!r.success) {
    for (const i of r.error.issues) {
      const message = i.code === "unrecognized_keys"
        ? `${i.message}; ${v.model} takes: ${
          Object.keys((schema as unknown as { shape: object }).shape).join(", ")
        }`
        : i.message;
      bad(["config", ...i.path.map((p) => typeof p === "symbol" ? String(p) : p)], message);
    }
    return;
  }
  const merged = { ...presetConfig(v.model, v.preset), ...r.data };
  for (const [field, message] of crossCheck(v.model, merged)) bad(["config", field], message);
}

/** {@linkcode ConfigurationInput} plus {@linkcode knownNames}: what the server accepts. */
export const KnownConfigurationInput: z.ZodType<ConfigurationInput> = ConfigurationInput
  .superRefine(knownNames);

/** Field errors for trace policies the packages do not implement (`query.policies.N`). */
export function unknownTracePolicies(policies: readonly string[]): FieldError[] {
  return policies.flatMap((p, i) =>
    TRACE_POLICIES.includes(p) ? [] : [{
      field: `query.policies.${i}`,
      reason: unknownName("trace policy", p, TRACE_POLICIES),
    }]
  );
}
