/**
 * The results file of `deno task bench` (`OUT/results.json`), schema
 * `libra-bench/1`. The zod schema below is the single definition: the suite
 * validates every report against it before writing, the tests validate
 * reports built from small inputs, and `OUT/schema.json` is its JSON Schema
 * export for readers in other languages. Field meanings follow ARCHITECTURE.md,
 * "Numbers everyone reports the same way".
 *
 * @module
 */

import { z } from "zod";
import { INFEASIBLE_KINDS, type InfeasibleKind } from "./engine.ts";

/** Identifier of this schema version, stored in every report. */
export const SCHEMA_ID = "libra-bench/1";

/** Median, minimum and maximum over repeats. */
export interface SpreadJson {
  median: number;
  min: number;
  max: number;
}

/** What was measured: a live training step or a replay on the meta backend. */
export type ExperimentKind = "live" | "simulated";

/** One workload: a model trained live, a live step recorded and replayed, or an imported trace. */
export interface WorkloadJson {
  /** Stable label, e.g. `live:mlp/tiny`, `sim:mlp/tiny`, `trace:resnet32-56`. */
  id: string;
  kind: ExperimentKind;
  /** `model`: trained live; `recorded`: a live step recorded as a trace; `imported`: a trace file. */
  source: "model" | "recorded" | "imported";
  model: string;
  preset: string | null;
  /** Path of the imported trace file. */
  trace: string | null;
  /** Peak bytes of the budget-free run: the denominator of every budget ratio. */
  baselinePeakBytes: number;
  /** Live: wall time of the budget-free steps (ms) over repeats. Simulated: null. */
  baselineTimeMs: SpreadJson | null;
  /** Simulated: total compute time of the trace's calls (ms). Live: null. */
  computeMs: number | null;
  /** Kernel calls in one step (simulated) or null when unknown. */
  calls: number | null;
  /** Training steps per measurement (live) or null. */
  steps: number | null;
}

/** One repeat of one experiment. */
export interface MeasurementJson {
  feasible: boolean;
  /** Time under the budget over time without it; null when infeasible. */
  overhead: number | null;
  /**
   * Evictions in one step: the replayed step of a simulation, the mean over the
   * measured budgeted steps of a live run (over the steps it began, when it
   * ran out of budget while measuring); as are `remats`, `swapBytes` and
   * `bookkeepingMs`. An infeasible live run stopped before its measured steps
   * (out of budget in the warm-up, or past the time limit) reports what it made
   * up to then, whole.
   */
  evictions: number;
  remats: number;
  swapBytes: number;
  bookkeepingMs: number;
  peakBytes: number;
  /** Live: wall time of the steps under the budget (ms). */
  timeMs: number | null;
  /** Live: wall time of the paired budget-free run (ms). */
  baselineTimeMs: number | null;
  /**
   * Live: the 95% interval of `overhead`, the median of the interleaved pairs'
   * step-time ratios (order statistics; absent for simulations and infeasible runs).
   */
  overheadLow?: number | null | undefined;
  overheadHigh?: number | null | undefined;
  /** Live: the same median in process CPU time. */
  cpuOverhead?: number | null | undefined;
  /** Live: what the runtime's counters account for (recompute, bookkeeping, swap stalls). */
  accountedOverhead?: number | null | undefined;
  /** Why the run was infeasible or failed (e.g. the OutOfBudgetError message). */
  error: string | null;
  /** Why it was infeasible: `out of memory`, `thrashing`, `time limit` or `failed` (absent in older reports). */
  reason?: InfeasibleKind | null | undefined;
}

/** One experiment (workload, policy, ratio) aggregated over its repeats. */
export interface ResultJson {
  workload: string;
  kind: ExperimentKind;
  policy: string;
  ratio: number;
  budgetBytes: number;
  /** True when every repeat completed within the budget. */
  feasible: boolean;
  feasibleRepeats: number;
  repeats: number;
  /** Over feasible repeats; null when none was feasible. */
  overhead: SpreadJson | null;
  evictions: SpreadJson;
  remats: SpreadJson;
  swapBytes: SpreadJson;
  bookkeepingMs: SpreadJson;
  peakBytes: SpreadJson;
  /** The first repeat's error, if any. */
  error: string | null;
  /** The first infeasible repeat's reason, if any (absent in older reports). */
  reason?: InfeasibleKind | null | undefined;
  measurements: MeasurementJson[];
}

/** Per (workload, policy): the smallest feasible ratio and the overhead curve. */
export interface PolicySummaryJson {
  workload: string;
  policy: string;
  smallestFeasibleRatio: number | null;
  nonMonotone: boolean;
  curve: { ratio: number; feasible: boolean; overhead: number | null }[];
}

/** Per (workload, ratio): the feasible policy with the lowest median overhead. */
export interface BestJson {
  workload: string;
  ratio: number;
  policy: string | null;
  overhead: number | null;
}

/** Memory in use after each kernel call of one run, with the budget. */
export interface TimelineJson {
  workload: string;
  policy: string;
  ratio: number;
  budgetBytes: number;
  /** `call`: index of the kernel call; `bytes`: memory in use after it (downsampled to at most 2000 points). */
  points: { call: number; bytes: number }[];
  /** Eviction and re-materialization markers (at most 2000), when the runtime reports them. */
  events: { call: number; kind: string }[];
}

/** A side-by-side micro-benchmark: a subject against a reference, from one run. */
export interface MicroJson {
  name: string;
  subject: string;
  reference: string;
  /** Unit of both values, e.g. `ns/call`, `GFLOP/s`, `ms/step`. */
  unit: string;
  subjectValue: number | null;
  referenceValue: number | null;
  /** subjectValue / referenceValue; null when skipped. */
  ratio: number | null;
  /** Extra numbers or the reason it was skipped. */
  note: string;
  skipped: boolean;
}

/** The machine, software and settings a report came from. */
export interface EnvironmentJson {
  os: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  memoryBytes: number;
  hostname: string;
  deno: string;
  v8: string;
  typescript: string;
  /** Versions of the @libra packages, from their deno.json. */
  packages: Record<string, string>;
  commit: { sha: string; dirty: boolean } | null;
  device: { kind: string; name: string };
  seed: number;
}

/** The whole results file. */
export interface BenchReport {
  schema: typeof SCHEMA_ID;
  createdAt: string;
  durationMs: number;
  /** The arguments `benchmarks/main.ts` was run with. */
  args: string[];
  options: {
    models: string[];
    presets: string[];
    policies: string[];
    ratios: number[];
    device: string;
    costModel: string;
    timeLimitMs: number;
    traces: string[];
    steps: number;
    repeat: number;
    quick: boolean;
    seed: number;
    skip: string[];
  };
  environment: EnvironmentJson;
  workloads: WorkloadJson[];
  results: ResultJson[];
  summary: { policies: PolicySummaryJson[]; best: BestJson[] };
  timelines: TimelineJson[];
  micro: MicroJson[];
  /** Parts or workloads that did not run, and why. */
  skipped: { what: string; reason: string }[];
}

const count = z.number().int().nonnegative();
const bytes = z.number().nonnegative();
const spread = z.object({ median: z.number(), min: z.number(), max: z.number() }).refine(
  (s) => s.min <= s.median && s.median <= s.max,
  { message: "spread must satisfy min <= median <= max" },
);
const kind = z.enum(["live", "simulated"]);

const workload = z.object({
  id: z.string().min(1),
  kind,
  source: z.enum(["model", "recorded", "imported"]),
  model: z.string().min(1),
  preset: z.string().nullable(),
  trace: z.string().nullable(),
  baselinePeakBytes: bytes.describe("peak bytes of the budget-free run"),
  baselineTimeMs: spread.nullable(),
  computeMs: z.number().nonnegative().nullable(),
  calls: count.nullable(),
  steps: count.nullable(),
});

const reasonSchema = z.enum(INFEASIBLE_KINDS).nullable()
  .optional();

const measurement = z.object({
  feasible: z.boolean(),
  overhead: z.number().positive().nullable(),
  // Per step: a live run's mean over its measured steps need not be whole.
  evictions: z.number().nonnegative(),
  remats: z.number().nonnegative(),
  swapBytes: bytes,
  bookkeepingMs: z.number().nonnegative(),
  peakBytes: bytes,
  timeMs: z.number().nonnegative().nullable(),
  baselineTimeMs: z.number().nonnegative().nullable(),
  overheadLow: z.number().positive().nullable().optional(),
  overheadHigh: z.number().positive().nullable().optional(),
  cpuOverhead: z.number().positive().nullable().optional(),
  accountedOverhead: z.number().positive().nullable().optional(),
  error: z.string().nullable(),
  reason: reasonSchema,
}).refine((m) => m.feasible === (m.overhead !== null), {
  message: "overhead must be a number exactly when the measurement is feasible",
});

const result = z.object({
  workload: z.string().min(1),
  kind,
  policy: z.string().min(1),
  ratio: z.number().positive().max(1).describe("budget / budget-free peak"),
  budgetBytes: bytes,
  feasible: z.boolean(),
  feasibleRepeats: count,
  repeats: z.number().int().positive(),
  overhead: spread.nullable(),
  evictions: spread,
  remats: spread,
  swapBytes: spread,
  bookkeepingMs: spread,
  peakBytes: spread,
  error: z.string().nullable(),
  reason: reasonSchema,
  measurements: z.array(measurement).min(1),
}).refine((r) => r.measurements.length === r.repeats, {
  message: "measurements must hold one entry per repeat",
}).refine((r) => r.feasible === (r.feasibleRepeats === r.repeats), {
  message: "feasible must be true exactly when every repeat was feasible",
});

const micro = z.object({
  name: z.string().min(1),
  subject: z.string(),
  reference: z.string(),
  unit: z.string(),
  subjectValue: z.number().nullable(),
  referenceValue: z.number().nullable(),
  ratio: z.number().nullable(),
  note: z.string(),
  skipped: z.boolean(),
});

/** The zod schema of {@link BenchReport}. */
export const benchReportSchema: z.ZodType<BenchReport> = z.object({
  schema: z.literal(SCHEMA_ID),
  createdAt: z.string().datetime(),
  durationMs: z.number().nonnegative(),
  args: z.array(z.string()),
  options: z.object({
    models: z.array(z.string()),
    presets: z.array(z.string()),
    policies: z.array(z.string()),
    ratios: z.array(z.number().positive().max(1)),
    device: z.string(),
    costModel: z.enum(["measured", "analytic"]),
    timeLimitMs: z.number().positive(),
    traces: z.array(z.string()),
    steps: z.number().int().positive(),
    repeat: z.number().int().positive(),
    quick: z.boolean(),
    seed: count,
    skip: z.array(z.string()),
  }),
  environment: z.object({
    os: z.string(),
    arch: z.string(),
    cpus: count,
    cpuModel: z.string(),
    memoryBytes: bytes,
    hostname: z.string(),
    deno: z.string(),
    v8: z.string(),
    typescript: z.string(),
    packages: z.record(z.string(), z.string()),
    commit: z.object({ sha: z.string().regex(/^[0-9a-f]{7,64}$/), dirty: z.boolean() }).nullable(),
    device: z.object({ kind: z.string(), name: z.string() }),
    seed: count,
  }),
  workloads: z.array(workload),
  results: z.array(result),
  summary: z.object({
    policies: z.array(z.object({
      workload: z.string(),
      policy: z.string(),
      smallestFeasibleRatio: z.number().nullable(),
      nonMonotone: z.boolean(),
      curve: z.array(
        z.object({ ratio: z.number(), feasible: z.boolean(), overhead: z.number().nullable() }),
      ),
    })),
    best: z.array(z.object({
      workload: z.string(),
      ratio: z.number(),
      policy: z.string().nullable(),
      overhead: z.number().nullable(),
    })),
  }),
  timelines: z.array(z.object({
    workload: z.string(),
    policy: z.string(),
    ratio: z.number(),
    budgetBytes: bytes,
    points: z.array(z.object({ call: count, bytes })).max(2000),
    events: z.array(z.object({ call: count, kind: z.string() })).max(2000),
  })),
  micro: z.array(micro),
  skipped: z.array(z.object({ what: z.string(), reason: z.string() })),
}).superRefine((r, ctx) => {
  const ids = new Set(r.workloads.map((w) => w.id));
  r.results.forEach((x, i) => {
    if (!ids.has(x.workload)) {
      ctx.addIssue({
        code: "custom",
        path: ["results", i, "workload"],
        message: `result names workload "${x.workload}", which is not in workloads`,
      });
    }
  });
});

/**
 * Validates `value` as a {@link BenchReport}; throws an error listing every
 * problem as `path: message`.
 */
export function validateReport(value: unknown): BenchReport {
  const r = benchReportSchema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.slice(0, 10).map((i) =>
    `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`
  );
  const more = r.error.issues.length > 10 ? ` (and ${r.error.issues.length - 10} more)` : "";
  throw new Error(`invalid ${SCHEMA_ID} report: ${problems.join("; ")}${more}`);
}

/** The JSON Schema (draft 2020-12) export of the report schema, written as `OUT/schema.json`. */
export function reportJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(benchReportSchema, { unrepresentable: "any" }) as Record<string, unknown>;
}
