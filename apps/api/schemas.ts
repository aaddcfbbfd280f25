/**
 * Request and payload schemas of the lab API, written with zod so that one
 * definition validates requests, types the handlers and documents the wire format.
 *
 * @module
 */

import { z } from "zod";

const name = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const nameMessage = "lower-case letters, digits, '.', '_' or '-', starting with a letter or digit";

/** A model, preset, policy or cost-model name. */
export const Name: z.ZodString = z.string().regex(name, nameMessage);

/** A policy or planner name: a {@linkcode Name}, optionally with a `+swap` suffix. */
export const PolicyName: z.ZodString = z.string().regex(
  /^[a-z0-9][a-z0-9._-]{0,63}(\+swap)?$/,
  `${nameMessage}, optionally followed by "+swap"`,
);

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** Free text of at most `max` characters without control characters (NUL, newlines, ...). */
export function text(max: number): z.ZodString {
  return z.string().max(max, `at most ${max} characters`).refine(
    (s) => !CONTROL.test(s),
    "must not contain control characters (NUL, newlines, escapes)",
  ) as unknown as z.ZodString;
}

/**
 * Why a budget was infeasible, as the runtime reports it: `out of memory` (the step did
 * not fit) or `thrashing` (recomputation and stalls passed the run's thrash limit).
 */
export type InfeasibleReason = "out of memory" | "thrashing";
/** The infeasibility reasons. */
export const INFEASIBLE_REASONS: readonly InfeasibleReason[] = ["out of memory", "thrashing"];

/** The thrash limit X of a run unless told otherwise (the published DTR evaluation's 2.0). */
export const DEFAULT_OVERHEAD_LIMIT = 2;

/**
 * Measured pairs per run by default: `@libra/train`'s `DEFAULT_STEPS`, as
 * `libra run` measures (a test checks they agree). Fewer give no 95% interval
 * (6 at the least) and medians that move with the machine's noise.
 */
export const DEFAULT_RUN_STEPS = 41;

/**
 * The thrash limit X: a number > 1. A run stops, infeasible for the reason
 * `thrashing`, once recomputation plus stalls pass (X - 1) x its budget-free compute.
 */
export const OverheadLimit: z.ZodNumber = z.number().gt(1, "must be > 1").lte(
  1e6,
  "must be <= 1000000",
);

/** A configuration: what to train, on what, under which budget and policy. */
export interface ConfigurationInput {
  /** Display name. */
  name: string;
  /** Model in the zoo (`gpt`, `resnet`, ...). */
  model: string;
  /** Size preset (default `tiny`). */
  preset: string;
  /** Model configuration overrides, or null. */
  config: Record<string, unknown> | null;
  /** Device (default `cpu`). */
  device: "cpu" | "cuda";
  /** Budget as a fraction (0, 1] of the budget-free peak; exactly one of ratio and bytes. */
  budgetRatio: number | null;
  /** Budget in bytes. */
  budgetBytes: number | null;
  /** Eviction policy or planner. */
  policy: string;
  /** Cost model (default `analytic`: the same decisions on every run). */
  costModel: string;
  /** Measured steps per copy, 1..10000 (default {@link DEFAULT_RUN_STEPS}). */
  steps: number;
  /** Seed, 0..2^31-1 (default 0). */
  seed: number;
  /**
   * Thrash limit X, > 1 (default 2.0, as `libra run --overhead-limit`): the budgeted
   * run stops, infeasible for the reason `thrashing`, once recomputation plus stalls
   * pass (X - 1) x its compute.
   */
  overheadLimit: number;
}

/** Partial update of a configuration. */
export type ConfigurationPatch = {
  [K in keyof ConfigurationInput]?: ConfigurationInput[K] | undefined;
};

const configurationFields = {
  name: text(100).pipe(z.string().trim().min(1, "must not be empty")),
  model: Name,
  preset: Name.default("tiny"),
  config: z.record(z.string(), z.unknown()).nullable().default(null),
  device: z.enum(["cpu", "cuda"]).default("cpu"),
  budgetRatio: z.number().gt(0, "must be > 0").lte(1, "must be <= 1").nullable().default(null),
  budgetBytes: z.number().int("must be an integer").positive("must be > 0").nullable().default(
    null,
  ),
  policy: PolicyName,
  costModel: Name.default("analytic"),
  steps: z.number().int("must be an integer").min(1, "must be >= 1").max(
    10_000,
    "must be <= 10000",
  ).default(DEFAULT_RUN_STEPS),
  seed: z.number().int("must be an integer").min(0, "must be >= 0").max(
    2 ** 31 - 1,
    "must be < 2^31",
  ).default(0),
  overheadLimit: OverheadLimit.default(DEFAULT_OVERHEAD_LIMIT),
};

function exactlyOneBudget(
  v: { budgetRatio: number | null; budgetBytes: number | null },
  ctx: z.RefinementCtx,
): void {
  if ((v.budgetRatio === null) === (v.budgetBytes === null)) {
    ctx.addIssue({
      code: "custom",
      path: ["budgetRatio"],
      message: v.budgetRatio === null
        ? "give a budget: budgetRatio (0 < r <= 1) or budgetBytes"
        : "give budgetRatio or budgetBytes, not both",
    });
  }
}

/**
 * Validates a configuration (POST, PUT): the fields and their ranges. This module has
 * no dependencies beyond zod (the dashboard's form validates with it in the browser);
 * the server also checks the names against the packages (`KnownConfigurationInput` in
 * catalog.ts).
 */
export const ConfigurationInput: z.ZodType<ConfigurationInput> = z.object(configurationFields)
  .strict().superRefine(exactlyOneBudget);

/** Partial update of a configuration (PATCH); the merged result is validated again. */
export const ConfigurationPatch: z.ZodType<ConfigurationPatch> = z.object({
  name: configurationFields.name,
  model: Name,
  preset: Name,
  config: z.record(z.string(), z.unknown()).nullable(),
  device: z.enum(["cpu", "cuda"]),
  budgetRatio: z.number().gt(0, "must be > 0").lte(1, "must be <= 1").nullable(),
  budgetBytes: z.number().int("must be an integer").positive("must be > 0").nullable(),
  policy: PolicyName,
  costModel: Name,
  steps: z.number().int().min(1).max(10_000),
  seed: z.number().int().min(0).max(2 ** 31 - 1),
  overheadLimit: OverheadLimit,
}).partial().strict();

/** A stored configuration. */
export interface Configuration extends ConfigurationInput {
  /** Identifier (`cfg_...`). */
  id: string;
  /** Creation time, ms since the epoch. */
  createdAt: number;
  /** Last update, ms since the epoch. */
  updatedAt: number;
  /** Set when stored values of this row could not be read: why. */
  corrupt?: string;
}

/** A page of a list. */
export interface Page {
  /** Items per page, 1..200 (default 50). */
  limit: number;
  /** Items to skip (default 0). */
  offset: number;
}

const pageFields = {
  limit: z.coerce.number().int("must be an integer").min(1, "must be >= 1").max(
    200,
    "must be <= 200",
  ).default(50),
  offset: z.coerce.number().int("must be an integer").min(0, "must be >= 0").default(0),
};
/** Validates pagination (query `limit`, `offset`). */
export const Page: z.ZodType<Page> = z.object(pageFields);

/** Run state. `succeeded` means the experiment ran to the end (it may be infeasible). */
export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "canceled";
/** All run states. */
export const RUN_STATUSES: readonly RunStatus[] = [
  "queued",
  "running",
  "succeeded",
  "failed",
  "canceled",
];

/** Filters of the run list. */
export interface RunFilter extends Page {
  /** Only this model. */
  model?: string | undefined;
  /** Only this policy. */
  policy?: string | undefined;
  /** Only this state. */
  status?: RunStatus | undefined;
  /** Only this kind. */
  kind?: "train" | "simulate" | "bench" | undefined;
}
/** Validates run filters. */
export const RunFilter: z.ZodType<RunFilter> = z.object({
  ...pageFields,
  model: Name.optional(),
  policy: Name.optional(),
  status: z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]).optional(),
  kind: z.enum(["train", "simulate", "bench"]).optional(),
});

/** Body of `POST /api/runs`. */
export const RunCreate: z.ZodType<{ configurationId: string }> = z.object({
  configurationId: z.string().min(1).max(64),
}).strict();

/** Budget ratios a trace simulation sweeps unless told otherwise. */
export const DEFAULT_RATIOS: readonly number[] = [1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1];
/** Policies a trace simulation compares unless told otherwise. */
export const DEFAULT_SIM_POLICIES: readonly string[] = ["dtr-eq", "dtr", "lru"];

/** Query of `POST /api/traces`: the trace is the request body (or a multipart `trace` file). */
export const TraceUploadQuery: z.ZodType<
  {
    name?: string | undefined;
    policies?: string[] | undefined;
    ratios?: number[] | undefined;
    overheadLimit?: number | undefined;
  },
  Record<string, string | undefined>
> = z.object({
  name: Name.optional(),
  policies: z.string().transform((s) => s.split(",").map((p) => p.trim()).filter((p) => p))
    .pipe(
      z.array(PolicyName).min(1, "name at least one policy").max(12),
    ).optional(),
  ratios: z.string().transform((s) => s.split(",").map((p) => Number(p.trim())))
    .pipe(
      z.array(z.number().gt(0, "ratios must be > 0").lte(1, "ratios must be <= 1")).min(1).max(
        50,
      ),
    ).optional(),
  overheadLimit: z.string().transform((s) => s.trim() === "" ? NaN : Number(s)).pipe(
    z.number("must be a number").gt(1, "must be > 1").lte(1e6, "must be <= 1000000"),
  ).optional(),
});

/** Query of `GET /api/compare`. */
export const CompareQuery: z.ZodType<
  { model: string; preset?: string | undefined; source?: "live" | "simulated" | undefined }
> = z.object({
  model: Name,
  preset: Name.optional(),
  source: z.enum(["live", "simulated"]).optional(),
});

// --- benchmark ingestion -------------------------------------------------------

/**
 * One measurement of `deno task bench` (issue 5): a (model, preset, policy, ratio)
 * cell, live or simulated. `overhead` is null when the budget was infeasible.
 */
export interface BenchResult {
  /** `live` (real training steps) or `simulated` (trace replay). */
  kind: "live" | "simulated";
  /** Model (or trace name). */
  model: string;
  /** Preset (default `tiny`). */
  preset: string;
  /** Policy. */
  policy: string;
  /** Budget ratio, (0, 1]. */
  ratio: number;
  /** Whether the step completed under the budget. */
  feasible: boolean;
  /** Median overhead; null when infeasible. */
  overhead: number | null;
  /** Why it was infeasible (`out of memory` or `thrashing`), when it was and the bench says. */
  reason?: InfeasibleReason | null | undefined;
  /** Smallest overhead over repeats. */
  overheadMin?: number | null | undefined;
  /** Largest overhead over repeats. */
  overheadMax?: number | null | undefined;
  /** Budget in bytes. */
  budgetBytes?: number | undefined;
  /** Budget-free peak in bytes. */
  baselinePeakBytes?: number | undefined;
  /** Peak under the budget. */
  peakBytes?: number | undefined;
  /** Evictions in one step (`deno task bench`: a live row's mean over its measured steps). */
  evictions?: number | undefined;
  /** Re-materializations in one step. */
  remats?: number | undefined;
  /** Bytes swapped in one step. */
  swapBytes?: number | undefined;
  /** Bookkeeping time (policy search + cost upkeep) of one step, ms. */
  bookkeepingMs?: number | undefined;
  /** Training steps measured. */
  steps?: number | undefined;
  /** Repeats. */
  repeat?: number | undefined;
  /** Seed. */
  seed?: number | undefined;
  /** Device. */
  device?: "cpu" | "cuda" | "meta" | undefined;
  /** Trace file the simulation replayed. */
  trace?: string | undefined;
  /** Loss per step. */
  losses?: number[] | undefined;
  /** Memory timeline as `[t, bytes]` pairs. */
  memory?: [number, number][] | undefined;
}

/** Validates one bench measurement. */
export const BenchResult: z.ZodType<BenchResult> = z.object({
  kind: z.enum(["live", "simulated"]),
  model: Name,
  preset: Name.default("tiny"),
  policy: Name,
  ratio: z.number().gt(0, "must be > 0").lte(1, "must be <= 1"),
  feasible: z.boolean(),
  overhead: z.number().positive("must be > 0").nullable(),
  reason: z.enum(INFEASIBLE_REASONS as [InfeasibleReason, ...InfeasibleReason[]]).nullable()
    .optional(),
  overheadMin: z.number().positive().nullable().optional(),
  overheadMax: z.number().positive().nullable().optional(),
  budgetBytes: z.number().int().nonnegative().optional(),
  baselinePeakBytes: z.number().int().nonnegative().optional(),
  peakBytes: z.number().int().nonnegative().optional(),
  evictions: z.number().int().nonnegative().optional(),
  remats: z.number().int().nonnegative().optional(),
  swapBytes: z.number().int().nonnegative().optional(),
  bookkeepingMs: z.number().nonnegative().optional(),
  steps: z.number().int().positive().optional(),
  repeat: z.number().int().positive().optional(),
  seed: z.number().int().nonnegative().optional(),
  device: z.enum(["cpu", "cuda", "meta"]).optional(),
  trace: text(200).optional(),
  losses: z.array(z.number()).max(100_000).optional(),
  memory: z.array(z.tuple([z.number(), z.number()])).max(200_000).optional(),
}).strict().superRefine((v, ctx) => {
  if (v.feasible && v.overhead === null) {
    ctx.addIssue({ code: "custom", path: ["overhead"], message: "a feasible result needs one" });
  }
  if (v.feasible && v.reason) {
    ctx.addIssue({
      code: "custom",
      path: ["reason"],
      message: "only an infeasible result has a reason",
    });
  }
});
/** Body of `POST /api/bench`: the results of one `deno task bench` invocation. */
export interface BenchUpload {
  /** Suite name (default `default`). */
  suite: string;
  /** When the bench ran (ISO 8601 with offset); default: upload time. */
  createdAt?: string | undefined;
  /** Commit the bench ran on. */
  commit?: string | undefined;
  /** Machine description (free-form beyond these fields). */
  machine: {
    hostname?: string | undefined;
    os?: string | undefined;
    cpu?: string | undefined;
    gpu?: string | undefined;
    deno?: string | undefined;
    [k: string]: unknown;
  };
  /** The measurements, 1..10000. */
  results: BenchResult[];
}

/** Validates a bench upload. */
export const BenchUpload: z.ZodType<BenchUpload> = z.object({
  suite: text(100).default("default"),
  createdAt: z.iso.datetime({ offset: true }).optional(),
  commit: text(64).optional(),
  machine: z.object({
    hostname: text(200).optional(),
    os: text(200).optional(),
    cpu: text(200).optional(),
    gpu: text(200).optional(),
    deno: text(50).optional(),
  }).passthrough().default({}),
  results: z.array(BenchResult).min(1, "an upload needs at least one result").max(10_000),
}).strict();

/** One field error of a 400 answer. */
export interface FieldError {
  /** Dotted path of the offending field (`body` for the whole body). */
  field: string;
  /** Why it was rejected. */
  reason: string;
}

/** Turns a zod error into field errors. */
export function fieldErrors(error: z.ZodError, prefix = ""): FieldError[] {
  return error.issues.map((i) => {
    const path = i.path.map(String).join(".");
    const field = path ? prefix + path : prefix ? prefix.replace(/\.$/, "") : "body";
    return { field, reason: i.message };
  });
}
