/**
 * `libra run`: trains a model of the zoo under a memory budget next to a
 * budget-free copy and measures the overhead with `runTraining` of
 * `@libra/train` (interleaved steps, median paired ratio with a 95% interval).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { PLANNER_NAMES, POLICY_NAMES } from "@libra/evict";
import { MODEL_NAMES } from "@libra/nn";
import { LIVE_COST_MODELS, type LiveCostModelName } from "@libra/cost";
import {
  BUDGETED_WARMUP_EXTENSION_COMPUTE_MS,
  DEFAULT_BUDGETED_WARMUP_EVENTS,
  DEFAULT_BUDGETED_WARMUP_STEPS,
  DEFAULT_STEPS,
  DEFAULT_WARMUP_CALLS,
  DEFAULT_WARMUP_STEPS,
  MAX_STEPS,
  MAX_WARMUP_STEPS,
  runTraining,
  type RunTrainingResult,
  WARMUP_EXTENSION_COMPUTE_MS,
} from "@libra/train/run-training";

/** Largest `--seed`. */
const MAX_SEED = 2 ** 31 - 1;

/** One-line description for `--help`. */
export const summary = "train a model under a memory budget and compare with no budget";

const HELP =
  `Usage: deno task libra run --model M --budget-ratio R [--preset tiny] [--policy P] [--steps N]
                           [--warmup W] [--warmup-calls K] [--budgeted-warmup B] [--cost-model C]
                           [--device cpu|cuda] [--seed S]
                           [--json] [--quiet]

Trains two copies of a model of @libra/nn (same seed, same batches; SGD with
momentum, synthetic data): one on the backend directly, one under the
re-materialization runtime with budget = R x the budget-free peak (measured in
the warm-up steps). After W warm-up steps each (more while the runtime has run
fewer than K calls: JavaScript compiles its hot paths only after thousands of
calls), their steps alternate (A B, B A, ...), so load from other processes
falls on both alike. The overhead is the median of the N paired ratios (budgeted step time / budget-free step time), with
a distribution-free 95% interval; CPU time is shown beside wall time, and the
overhead the runtime accounts for (recompute + bookkeeping + its dispatch of
kernel calls + swap stalls on top of the budget-free step) beside the measured one. Losses are bitwise the same.

Options:
  --model M          ${MODEL_NAMES.join(", ")} (required)
  --preset NAME      model preset; default tiny
  --policy P         ${POLICY_NAMES.join(", ")} (append +swap for swap-aware),
                     or a planner: ${PLANNER_NAMES.join(", ")}; default dtr-eq
  --budget-ratio R   budget as a fraction of the budget-free peak, in (0, 1] (required)
  --steps N          measured steps per copy, 1..${MAX_STEPS}; default ${DEFAULT_STEPS}
                     (6 or more give a 95% interval)
  --warmup W         warm-up steps per copy, at the least, 1..${MAX_WARMUP_STEPS}; default ${DEFAULT_WARMUP_STEPS}
  --warmup-calls K   and more steps (up to ${MAX_WARMUP_STEPS}, and ${
    WARMUP_EXTENSION_COMPUTE_MS / 1000
  } s of compute as the cost model
                     prices it, not time on the clock) until the runtime has run K calls,
                     0..1000000; default ${DEFAULT_WARMUP_CALLS}. Before them a copy whose kernels
                     do nothing runs K calls (up to ${MAX_WARMUP_STEPS} steps, ~1 ms each on gpt small)
                     so the JavaScript engine compiles the runtime's paths first; 0 for neither
  --budgeted-warmup B  then B warm-up steps per copy under the budget, 0..${MAX_WARMUP_STEPS};
                     default ${DEFAULT_BUDGETED_WARMUP_STEPS} (the budgeted paths compile before measuring),
                     and more (up to ${MAX_WARMUP_STEPS}, and ${
    BUDGETED_WARMUP_EXTENSION_COMPUTE_MS / 1000
  } s of priced compute) while they evict and have made
                     fewer than ${DEFAULT_BUDGETED_WARMUP_EVENTS} evictions and re-materializations
  --cost-model C     ${LIVE_COST_MODELS.join(", ")}; default analytic (deterministic
                     decisions); profiled = the warm-up's kernel times, frozen for the
                     run; measured = every call's own time (decisions follow noise)
  --device D         cpu (default) or cuda
  --seed S           seed of the model, data and policy, 0..${MAX_SEED}; default 0
  --overhead-limit X thrash limit (default 2.0): the budgeted run stops, infeasible for
                     the reason "thrashing", once recomputation passes (X-1) x its compute
  --json             print { baselinePeakBytes, budgetBytes, peakBytes, overhead, losses,
                     baselineLosses, stats, measurement, decisions: { count, digest } }
                     as one JSON object
  --quiet            no progress on stderr`;

/** The object printed with `--json`. */
export function toJson(r: RunTrainingResult): Record<string, unknown> {
  return {
    baselinePeakBytes: r.baselinePeakBytes,
    budgetBytes: r.budgetBytes,
    peakBytes: r.peakBytes,
    overhead: r.overhead,
    losses: r.losses,
    baselineLosses: r.baselineLosses,
    stats: r.stats,
    measurement: r.measurement ?? null,
    decisions: decisionSummary(r.decisions ?? []),
  };
}

/**
 * The budgeted steps' eviction decisions as a count and a digest (FNV-1a of
 * the `drop:name`/`swap:name` list), so two runs can be compared at a glance.
 */
export function decisionSummary(decisions: readonly string[]): { count: number; digest: string } {
  let h = 0x811c9dc5;
  for (const d of decisions) {
    for (let i = 0; i < d.length; i++) h = Math.imul(h ^ d.charCodeAt(i), 0x01000193) >>> 0;
    h = Math.imul(h ^ 10, 0x01000193) >>> 0;
  }
  return { count: decisions.length, digest: h.toString(16).padStart(8, "0") };
}

const x3 = (v: number) => v.toFixed(3);

function formatText(r: RunTrainingResult, policy: string): string {
  const s = r.stats;
  const same = r.losses.length === r.baselineLosses.length &&
    r.losses.every((l, i) => Object.is(l, r.baselineLosses[i]));
  const m = r.measurement!;
  const pct = (c: number) => `${(c * 100).toFixed(1)}%`;
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const lines = [
    `policy ${policy}: budget ${r.budgetBytes} bytes of a ${r.baselinePeakBytes}-byte budget-free peak; peak ${r.peakBytes} bytes`,
    `overhead ${x3(m.wall.median)} [${x3(m.wall.low)}, ${x3(m.wall.high)}] wall (${
      pct(m.wall.confidence)
    } interval, ${m.pairs} interleaved pairs after ${m.warmupSteps} warm-up steps (${m.warmupCalls} calls; the last ${m.budgetedWarmupSteps} budgeted; ${m.jitWarmupCalls} kernel-free calls before them); median step ${
      med(m.wall.budgetMs).toFixed(1)
    } vs ${med(m.wall.baselineMs).toFixed(1)} ms)`,
    `         ${x3(m.cpu.median)} [${x3(m.cpu.low)}, ${x3(m.cpu.high)}] process CPU time`,
    `         ${x3(m.accounted.overhead)} accounted (recompute ${
      m.accounted.recomputeMs.toFixed(1)
    } ms + bookkeeping ${m.accounted.bookkeepingMs.toFixed(1)} ms + dispatch ${
      m.accounted.dispatchMs.toFixed(1)
    } ms + swap stall ${m.accounted.swapStallMs.toFixed(1)} ms on ${
      m.accounted.computeMs.toFixed(1)
    } ms of budget-free steps)`,
    `evictions ${s.evictions} (drops ${s.drops}, swaps ${s.swapOuts}), re-materializations ${s.remats}; decisions digest ${
      decisionSummary(r.decisions ?? []).digest
    }; cost model ${m.costModel}${
      m.loadAverage ? `; load average ${m.loadAverage.map((l) => l.toFixed(2)).join(" ")}` : ""
    }`,
    `losses ${r.losses.map((l) => l.toFixed(6)).join(" ")} (${
      same ? "bitwise equal to" : "DIFFERENT from"
    } the budget-free copy)`,
  ];
  if (m.warning !== null) lines.push(`warning: ${m.warning}`);
  if (m.busy !== null) lines.push(`note: ${m.busy}`);
  if (r.plan) {
    lines.push(
      `plan: ${r.plan.steps} steps, ${r.plan.applied} applied, ${r.plan.skipped} skipped live`,
    );
    if (r.plan.stats !== undefined) lines.push(`plan statistics: ${JSON.stringify(r.plan.stats)}`);
  }
  return lines.join("\n");
}

/**
 * Parses a non-negative integer flag written in digits (no sign, exponent,
 * fraction or spaces) within `min..max`, or returns the error message.
 */
export function intFlag(name: string, value: string, min: number, max: number): number | string {
  const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : NaN;
  if (!(Number.isSafeInteger(n) && n >= min && n <= max)) {
    return `--${name} must be an integer in ${min}..${max}, got "${value}"`;
  }
  return n;
}

/** Runs the command; returns the exit code. */
export function main(args: string[]): number {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        model: { type: "string" },
        preset: { type: "string", default: "tiny" },
        policy: { type: "string", default: "dtr-eq" },
        "budget-ratio": { type: "string" },
        steps: { type: "string", default: String(DEFAULT_STEPS) },
        warmup: { type: "string", default: String(DEFAULT_WARMUP_STEPS) },
        "warmup-calls": { type: "string", default: String(DEFAULT_WARMUP_CALLS) },
        "budgeted-warmup": { type: "string", default: String(DEFAULT_BUDGETED_WARMUP_STEPS) },
        "cost-model": { type: "string", default: "analytic" },
        device: { type: "string", default: "cpu" },
        seed: { type: "string", default: "0" },
        "overhead-limit": { type: "string", default: "2" },
        json: { type: "boolean", default: false },
        quiet: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (e) {
    console.error(`libra run: ${(e as Error).message} (see --help)`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const fail = (msg: string, code = 2) => {
    console.error(`libra run: ${msg}`);
    return code;
  };
  if (!values.model) return fail("--model M is required (see --help)");
  if (values["budget-ratio"] === undefined) {
    return fail("--budget-ratio R is required (see --help)");
  }
  const rv = values["budget-ratio"];
  const ratio = /^\s*$/.test(rv) ? NaN : Number(rv);
  if (!(ratio > 0 && ratio <= 1)) {
    return fail(`--budget-ratio must be a number in (0, 1], got "${rv}"`);
  }
  const steps = intFlag("steps", values.steps, 1, MAX_STEPS);
  if (typeof steps === "string") return fail(steps);
  const warmup = intFlag("warmup", values.warmup, 1, MAX_WARMUP_STEPS);
  if (typeof warmup === "string") return fail(warmup);
  const warmupCalls = intFlag("warmup-calls", values["warmup-calls"], 0, 1_000_000);
  if (typeof warmupCalls === "string") return fail(warmupCalls);
  const budgetedWarmup = intFlag("budgeted-warmup", values["budgeted-warmup"], 0, MAX_WARMUP_STEPS);
  if (typeof budgetedWarmup === "string") return fail(budgetedWarmup);
  const seed = intFlag("seed", values.seed, 0, MAX_SEED);
  if (typeof seed === "string") return fail(seed);
  if (values.device !== "cpu" && values.device !== "cuda") {
    return fail(`--device must be cpu or cuda, got "${values.device}"`);
  }
  const costModel = values["cost-model"];
  if (!(LIVE_COST_MODELS as readonly string[]).includes(costModel)) {
    return fail(
      `--cost-model must be one of ${LIVE_COST_MODELS.join(", ")}, got "${costModel}"`,
    );
  }
  const limitText = values["overhead-limit"].trim();
  const overheadLimit = /^inf(inity)?$/i.test(limitText) ? Infinity : Number(limitText);
  if (limitText === "" || !(overheadLimit >= 1)) {
    return fail(`--overhead-limit must be a number >= 1 or inf, got "${values["overhead-limit"]}"`);
  }
  const enc = new TextEncoder();
  try {
    const r = runTraining({
      overheadLimit,
      model: values.model,
      preset: values.preset,
      policy: values.policy,
      budgetRatio: ratio,
      steps,
      warmupSteps: warmup,
      warmupCalls,
      budgetedWarmupSteps: budgetedWarmup,
      costModel: costModel as LiveCostModelName,
      device: values.device,
      seed,
      recordDecisions: true,
      ...(values.quiet
        ? {}
        : { onProgress: (m: string) => Deno.stderr.writeSync(enc.encode(`libra run: ${m}\n`)) }),
    });
    console.log(values.json ? JSON.stringify(toJson(r)) : formatText(r, values.policy));
    return 0;
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
    return fail(msg, e instanceof RangeError ? 2 : 1);
  }
}
