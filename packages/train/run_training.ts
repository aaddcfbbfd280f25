/**
 * {@link runTraining}: trains a model of `@libra/nn` under a memory budget
 * with the re-materialization `Runtime` next to a budget-free copy of the same
 * model, and measures the overhead the way every live number of the project is
 * measured: `libra run`, `libra start`, the lab API's runs and the benchmark
 * suite all call it.
 *
 * The method: two copies of one seeded model (same initial weights, same
 * batches) train the same steps, one on the backend directly (budget-free) and
 * one under the `Runtime` with the budget. After warm-up steps, their steps
 * alternate (A B, B A, A B, ...), so load from other processes falls on both
 * alike, and each pair gives a ratio (budgeted / budget-free step time; a
 * budgeted step's time includes the runtime's end of step, `endStep`).
 * Before the warm-up, a copy whose kernels do nothing makes the runtime's
 * calls for a fraction of a second, so the JavaScript engine has compiled
 * the runtime's paths before anything is measured. The
 * overhead is the median of those ratios with a distribution-free 95% interval
 * (order statistics), in wall time and in process CPU time, next to the
 * overhead the runtime accounts for from its own counters. Losses of the two
 * copies are bitwise equal on the cpu backend (re-materialization is exact).
 *
 * Decisions are deterministic by default: the budgeted copy's policy prices
 * calls with the analytic cost model (or, with `costModel: "profiled"`, with a
 * profile of its warm-up steps frozen for the run), never with the time a call
 * just took; `costModel: "measured"` keeps the live-updating model.
 *
 * @module
 */

import {
  checkPolicyName,
  createPlanner,
  createPolicy,
  isPlannerName,
  type LibraPlan,
  type Plan,
  type Planner,
  plannerNeeds,
  type SearchOptions,
} from "@libra/evict";
import { cpuBackend, cudaBackend } from "@libra/native";
import {
  type CostModel,
  FrozenProfileCostModel,
  LIVE_COST_MODELS,
  liveCostModel,
  type LiveCostModelName,
} from "@libra/cost";
import {
  createData,
  createModel,
  getPreset,
  MODEL_NAMES,
  type ModelName,
  SGD,
  trainStep,
} from "@libra/nn";
import type { Trace } from "@libra/lineage/trace";
import {
  DEFAULT_SEARCH,
  formatTrace,
  OutOfBudgetError,
  plannerContext,
  RECORDED_STEP_REPLAY,
  Runtime,
  type RuntimeEvent,
  type RuntimeOptions,
  type RuntimeStats,
  type Timeline,
} from "@libra/runtime";
import { type Backend, manualSeed, randomState, setRandomState, withBackend } from "@libra/tensor";
import { LivePlan, stepTrace } from "./live_plan.ts";
import { withoutKernels } from "./_without_kernels.ts";
import { type MedianInterval, medianInterval, processCpuMs } from "./overhead_stats.ts";

/** The most steps a run may measure (the lab API's cap too). */
export const MAX_STEPS = 10_000;
/**
 * Measured steps per side by default (a 95% interval needs at least 6
 * pairs). On the 2-core development VM, two identical budget-free copies of
 * gpt small measured this way gave medians 0.959-1.012 over 7 pairs,
 * 0.980-1.020 over 21 and 0.996-1.005 over 40: with 21 that spread was as
 * wide as what the runtime adds to gpt small at ratio 1.0 (thirteen runs of
 * 21 pairs measured 1.013-1.039 with intervals ~4% wide, nine of 41 pairs
 * 1.009-1.037 with intervals ~3% wide). 41 pairs of
 * gpt small take ~5 s (3 s more than 21); an odd count makes the median one
 * of the pairs.
 */
export const DEFAULT_STEPS = 41;
/** Warm-up steps per side by default, at the least (the second has optimizer state, like every later one). */
export const DEFAULT_WARMUP_STEPS = 2;
/**
 * Runtime calls the warm-up runs by default, at the least: the JavaScript
 * engine compiles the runtime's hot paths with its optimizing tier only after
 * thousands of calls, and until then every call costs it several times what it
 * costs later (measured on gpt small: the runtime's time per step fell by a
 * third to a half between the 2nd and the 20th step, 280 calls each; on lstm
 * small, 2,650 calls a step before its fused cell, the budgeted steps measured after 6,000 calls of
 * warm-up took 1.3x the budget-free ones, after 30,000 1.08x, what the
 * runtime accounts for).
 */
export const DEFAULT_WARMUP_CALLS = 30_000;
/**
 * The warm-up goes past its minimum steps for {@link DEFAULT_WARMUP_CALLS}
 * while the steps it added have cost the budgeted copy less than this, in
 * the cost model's milliseconds: its priced compute, not the time on the
 * clock, so that the warm-up's length, and with it every loss of the run,
 * is the same however loaded the machine (a limit of 4 s on the clock ended
 * the same run's warm-up after different numbers of steps, under load).
 * With the analytic model on the 2-core development VM, gpt small's steps
 * are priced at 134 ms (97 ms on the clock), resnet small's at 87 (34),
 * unet small's at 100 (51): 15-23 added steps, 1.6-3 s a copy.
 */
export const WARMUP_EXTENSION_COMPUTE_MS = 2000;
/**
 * Warm-up steps per side under the budget by default, the last of the
 * warm-up: the runtime's budgeted paths (the pool, the policy's search,
 * eviction and re-materialization) compile and settle before measuring. The
 * first budgeted step measured straight after budget-free ones took 5-20%
 * longer than the next ones on gpt small at ratio 1.0.
 */
export const DEFAULT_BUDGETED_WARMUP_STEPS = 2;
/**
 * Evictions and re-materializations the budgeted warm-up runs at the least,
 * once its first steps made some: it adds steps (up to
 * {@link MAX_WARMUP_STEPS} budgeted ones, for at most
 * {@link BUDGETED_WARMUP_EXTENSION_MS}) while they made fewer. The eviction
 * and re-materialization paths compile only after as many runs: gpt tiny at
 * ratio 0.9 (8 a step), timed over 50 budgeted steps after W budgeted warm-up
 * ones, took 1.76x its budget-free steps after 2, 1.34x after 60, 1.31x after
 * 125 and 1.22x after 250. A step that evicts nothing (ratio 1.0) adds none;
 * gpt small at 0.5 (~160 a step) runs 7 budgeted warm-up steps.
 */
export const DEFAULT_BUDGETED_WARMUP_EVENTS = 1000;
/**
 * The budgeted warm-up goes past its minimum steps while the steps it added
 * have cost the budgeted copy less than this, compute and recomputation, in
 * the cost model's milliseconds (see {@link WARMUP_EXTENSION_COMPUTE_MS}): a
 * small preset's steps (~100 ms priced) that evict a few dozen times reach
 * it first, after ~10 steps.
 */
export const BUDGETED_WARMUP_EXTENSION_COMPUTE_MS = 1000;
/** The most warm-up steps a run takes: its `warmupSteps`, and the steps it adds for `warmupCalls`. */
export const MAX_WARMUP_STEPS = 100;

/**
 * Whether a warm-up past its minimum steps goes on: it has run `steps` steps
 * (fewer than {@link MAX_WARMUP_STEPS}), made `calls` runtime calls (fewer
 * than `target`), and spent `spent` of its `limit` past its minimum (less:
 * in any one unit, the cost model's milliseconds in `runTraining`).
 */
export function warmupGoesOn(
  steps: number,
  calls: number,
  target: number,
  spent: number,
  limit: number,
): boolean {
  return steps < MAX_WARMUP_STEPS && calls < target && spent < limit;
}
/** Measured and accounted overheads that differ by more than this fraction get a warning. */
export const AGREEMENT_TOLERANCE = 0.1;

/** Options of {@link runTraining}. */
export interface RunTrainingOptions {
  /** Model family (`mlp`, `resnet`, `gpt`, `unet`, `lstm`). */
  model: string;
  /** Preset. Default `"tiny"`. */
  preset?: string;
  /** A dynamic policy (`dtr-eq`, ..., optionally `+swap`) or a planner (`libra`, `chen-sqrt`). */
  policy: string;
  /** Budget as a fraction of the budget-free peak, in (0, 1] (exactly one of this and `budgetBytes`). */
  budgetRatio?: number;
  /** Budget in bytes (exactly one of this and `budgetRatio`). */
  budgetBytes?: number;
  /** Overrides of the preset's model configuration (the preset's input shape is kept). */
  config?: Record<string, unknown> | null;
  /** Measured steps per side, 1..{@link MAX_STEPS}. Default {@link DEFAULT_STEPS}. */
  steps?: number;
  /** Warm-up steps per side before measuring, at the least, 1..100. Default {@link DEFAULT_WARMUP_STEPS}. */
  warmupSteps?: number;
  /**
   * Runtime calls the warm-up runs at the least (it adds steps, up to 100 in
   * all, while it has run fewer and the steps it added cost less than
   * {@link WARMUP_EXTENSION_COMPUTE_MS} of priced compute); 0 for exactly
   * `warmupSteps`. Default
   * {@link DEFAULT_WARMUP_CALLS}.
   */
  warmupCalls?: number;
  /**
   * Before the warm-up, a copy whose kernels do nothing makes `warmupCalls`
   * runtime calls (see {@link OverheadMeasurement.jitWarmupCalls}), so the
   * JavaScript engine has compiled the runtime's paths before anything is
   * measured. Default true (nothing when `warmupCalls` is 0).
   */
  jitWarmup?: boolean;
  /**
   * Warm-up steps per side under the budget, 0..100, after the others (whose
   * peak sets a `budgetRatio` budget), at the least: more while they made
   * fewer than {@link DEFAULT_BUDGETED_WARMUP_EVENTS} evictions and
   * re-materializations (but some; see {@link budgetedWarmupEvents}). Default
   * {@link DEFAULT_BUDGETED_WARMUP_STEPS}.
   */
  budgetedWarmupSteps?: number;
  /**
   * Evictions and re-materializations the budgeted warm-up runs at the least
   * (see {@link DEFAULT_BUDGETED_WARMUP_EVENTS}), 0..1000000; 0 for exactly
   * `budgetedWarmupSteps`. Default {@link DEFAULT_BUDGETED_WARMUP_EVENTS}.
   */
  budgetedWarmupEvents?: number;
  /** Device. Default `"cpu"`. */
  device?: "cpu" | "cuda";
  /** Seed of the model, data and policies. Default 0. */
  seed?: number;
  /** Backend to use instead of `device` (tests). */
  backend?: Backend;
  /** Learning rate of SGD (momentum 0.9). Default 0.01. */
  lr?: number;
  /**
   * Cost model of the budgeted copy's policy: a name (`analytic`, the default;
   * `profiled`, the warm-up steps' kernel times frozen for the run; `measured`,
   * live-updating) or a model.
   */
  costModel?: CostModel | LiveCostModelName;
  /** Record the budgeted steps' memory timeline with the runtime's event markers. Default false. */
  timeline?: boolean;
  /** Record the last budgeted step as a DTR-format trace ({@link RunTrainingResult.trace}). */
  recordLastStep?: boolean;
  /** Record the policy's eviction decisions ({@link RunTrainingResult.decisions}). Default false. */
  recordDecisions?: boolean;
  /**
   * Return (with {@link RunTrainingResult.outOfBudget}) instead of throwing when the
   * budget is infeasible (planning or the budgeted run hit `OutOfBudgetError`). Default false.
   */
  allowInfeasible?: boolean;
  /**
   * Thrash limit X of the budgeted run (default 2.0): it stops, infeasible with
   * reason `"thrashing"`, once recomputation plus stalls pass (X - 1) x its compute.
   */
  overheadLimit?: number;
  /** Checked before every step; an aborted signal stops the run with an Error. */
  signal?: AbortSignal;
  /**
   * The budgeted runtime's events (warm-up included); an error thrown from it
   * stops the run and propagates (a time limit, say).
   */
  onEvent?: (e: RuntimeEvent) => void;
  /** Progress messages (one line each). */
  onProgress?: (message: string) => void;
  /** Called when a phase starts, with the progress line it also gives `onProgress`. */
  onPhase?: (phase: TrainingPhase, message: string) => void;
  /** Called after every training step of either copy. */
  onStep?: (info: StepInfo) => void;
}

/** The phases of {@link runTraining}, in order (`plan` only for planners). */
export type TrainingPhase = "warm-up" | "plan" | "measure";

/** One finished training step (see {@link RunTrainingOptions.onStep}). */
export interface StepInfo {
  /**
   * `warm-up` (either copy, before measuring), `baseline` (a measured
   * budget-free step) or `budget` (a measured budgeted step).
   */
  phase: "warm-up" | "baseline" | "budget";
  /** Step index in the phase, from 0. */
  step: number;
  /** Steps of the phase (per copy). */
  steps: number;
  /** The step's loss. */
  loss: number;
  /** The step's wall time, ms. */
  ms: number;
  /** The budgeted copy's peak so far, bytes (0 for budget-free steps). */
  peakBytes: number;
}

/** A measured overhead: median of the paired ratios with its interval and the raw samples. */
export interface PairedOverhead extends MedianInterval {
  /** Ratio of each pair (budgeted / budget-free), in pair order. */
  ratios: number[];
  /** Budgeted step times, ms (wall or CPU), in pair order. */
  budgetMs: number[];
  /** Budget-free step times, ms, in pair order. */
  baselineMs: number[];
}

/**
 * The overhead the budgeted runtime accounts for from its own counters over the
 * measured steps: what it added (recomputation, bookkeeping, its dispatch of
 * kernel calls, swap stalls) on top of the compute, taken as the budget-free
 * copy's step times.
 */
export interface AccountedOverhead {
  /**
   * The median over the pairs of (compute + recompute + bookkeeping +
   * dispatch + swap stall) / compute, each pair's from its own steps: a
   * median of per-pair ratios, as the measured overhead is. (A sampled call
   * or release that a garbage-collection pause lands in is counted 16 or 8
   * times over: in a sum of the steps it moved lstm small's accounted overhead
   * at ratio 1.0 up to 1.34 against 1.00-1.12 measured.)
   */
  overhead: number;
  /** Each pair's accounted ratio, in pair order. */
  ratios: number[];
  /** The same ratio of the sums over all measured pairs. */
  sumsOverhead: number;
  /** The budget-free copy's measured step times, summed, ms. */
  computeMs: number;
  /** Measured kernel time of recomputations (and copy-on-write copies of updated values), ms. */
  recomputeMs: number;
  /** Policy search, equivalence classes, graph upkeep and the release path, ms. */
  bookkeepingMs: number;
  /**
   * The runtime's own time in kernel calls beyond the bookkeeping (checks,
   * lineage, pool upkeep, the re-materialization path; sampled), ms.
   */
  dispatchMs: number;
  /** Time stalled on swaps, ms. */
  swapStallMs: number;
}

/** How the overhead was measured and what came out (see the module doc). */
export interface OverheadMeasurement {
  /** Always `"interleaved"`: budget-free and budgeted steps alternate A B, B A, ... */
  method: "interleaved";
  /**
   * Warm-up steps run per copy (at least the `warmupSteps` asked for; more for
   * `warmupCalls`), with the budgeted ones.
   */
  warmupSteps: number;
  /** Of {@link warmupSteps}, the last ones, which the budgeted copy ran under its budget. */
  budgetedWarmupSteps: number;
  /** Runtime calls the budgeted copy ran during the warm-up. */
  warmupCalls: number;
  /** Runtime calls of the kernel-free copy that warmed the JavaScript engine up first (0 for none). */
  jitWarmupCalls: number;
  /** Measured pairs. */
  pairs: number;
  /** Wall time: the overhead as reported. */
  wall: PairedOverhead;
  /** Process CPU time (all threads): less sensitive to waiting for a busy machine. */
  cpu: PairedOverhead;
  /** What the runtime's counters account for. */
  accounted: AccountedOverhead;
  /** Wall overhead / accounted overhead - 1. */
  disagreement: number;
  /** Set when the measured and accounted overheads differ by more than 10%. */
  warning: string | null;
  /** The budgeted copy's cost model. */
  costModel: string;
  /** Load average of the machine when the measurement ended (1, 5, 15 minutes), if known. */
  loadAverage: number[] | null;
  /**
   * Set when the 1-minute load average exceeded the CPU count: other processes
   * took turns on the cores, so wall-time ratios are unreliable and the CPU-time
   * ratio is the steadier number.
   */
  busy: string | null;
}

/** What {@link runTraining} returns. */
export interface RunTrainingResult {
  /** Peak of the budget-free warm-up steps under the Runtime, bytes. */
  baselinePeakBytes: number;
  /** floor(budgetRatio * baselinePeakBytes), or the `budgetBytes` given. */
  budgetBytes: number;
  /** Peak of the budgeted steps, bytes (never above budgetBytes when feasible). */
  peakBytes: number;
  /** The median paired wall-time ratio (see {@link measurement}); 1 when nothing was measured. */
  overhead: number;
  /** The full measurement (absent when the budget was infeasible before a pair completed). */
  measurement?: OverheadMeasurement;
  /** Warm-up steps run per copy (see {@link RunTrainingOptions.warmupCalls}); their losses come first. */
  warmupSteps: number;
  /** Losses of the budgeted copy, warm-up steps first (only the steps completed when out of budget). */
  losses: number[];
  /** Losses of the budget-free copy, warm-up steps first (bitwise equal on the cpu backend). */
  baselineLosses: number[];
  /** Runtime statistics of the budgeted steps (warm-up excluded). */
  stats: RuntimeStats;
  /** Summed measured budgeted step times, ms. */
  timeMs: number;
  /** Summed measured budget-free step times, ms. */
  baselineTimeMs: number;
  /** Each measured budgeted step's time, ms. */
  stepTimesMs: number[];
  /** Each measured budget-free step's time, ms. */
  baselineStepTimesMs: number[];
  /** The budgeted steps' memory timeline with markers (with `timeline: true`). */
  timeline?: Timeline;
  /** The last budgeted step as a DTR-format trace (with `recordLastStep: true`, when it ran). */
  trace?: string;
  /** The policy's eviction decisions, in order (with `recordDecisions: true`). */
  decisions?: string[];
  /** With `allowInfeasible`: why the budget was infeasible (the run stopped there). */
  outOfBudget?: OutOfBudgetError;
  /** For planners: the plan's size and statistics, and how it applied live. */
  plan?: {
    planner: string;
    steps: number;
    stats?: unknown;
    applied: number;
    skipped: number;
    mismatchedSteps: number;
  };
}

function checkOptions(o: RunTrainingOptions): void {
  if (!(MODEL_NAMES as readonly string[]).includes(o.model)) {
    throw new RangeError(`unknown model "${o.model}" (models: ${MODEL_NAMES.join(", ")})`);
  }
  checkPolicyName(o.policy);
  if ((o.budgetRatio === undefined) === (o.budgetBytes === undefined)) {
    throw new RangeError(
      `give exactly one of budgetRatio and budgetBytes (got ${o.budgetRatio} and ${o.budgetBytes})`,
    );
  }
  if (o.budgetRatio !== undefined && !(o.budgetRatio > 0 && o.budgetRatio <= 1)) {
    throw new RangeError(`budget ratio must be in (0, 1], got ${o.budgetRatio}`);
  }
  if (o.budgetBytes !== undefined && !(Number.isInteger(o.budgetBytes) && o.budgetBytes > 0)) {
    throw new RangeError(`budget bytes must be an integer > 0, got ${o.budgetBytes}`);
  }
  const steps = o.steps ?? DEFAULT_STEPS;
  if (!Number.isInteger(steps) || steps < 1 || steps > MAX_STEPS) {
    throw new RangeError(`steps must be an integer in 1..${MAX_STEPS}, got ${o.steps}`);
  }
  const warm = o.warmupSteps ?? DEFAULT_WARMUP_STEPS;
  if (!Number.isInteger(warm) || warm < 1 || warm > MAX_WARMUP_STEPS) {
    throw new RangeError(
      `warmupSteps must be an integer in 1..${MAX_WARMUP_STEPS}, got ${o.warmupSteps}`,
    );
  }
  const budgeted = o.budgetedWarmupSteps ?? DEFAULT_BUDGETED_WARMUP_STEPS;
  if (!Number.isInteger(budgeted) || budgeted < 0 || budgeted > MAX_WARMUP_STEPS) {
    throw new RangeError(
      `budgetedWarmupSteps must be an integer in 0..${MAX_WARMUP_STEPS}, got ${o.budgetedWarmupSteps}`,
    );
  }
  const warmEvents = o.budgetedWarmupEvents ?? DEFAULT_BUDGETED_WARMUP_EVENTS;
  if (!Number.isInteger(warmEvents) || warmEvents < 0 || warmEvents > 1_000_000) {
    throw new RangeError(
      `budgetedWarmupEvents must be an integer in 0..1000000, got ${o.budgetedWarmupEvents}`,
    );
  }
  const warmCalls = o.warmupCalls ?? DEFAULT_WARMUP_CALLS;
  if (!Number.isInteger(warmCalls) || warmCalls < 0 || warmCalls > 1_000_000) {
    throw new RangeError(
      `warmupCalls must be an integer in 0..1000000, got ${o.warmupCalls}`,
    );
  }
  if (
    typeof o.costModel === "string" &&
    !(LIVE_COST_MODELS as readonly string[]).includes(o.costModel)
  ) {
    throw new RangeError(
      `unknown cost model "${o.costModel}" (choose one of ${LIVE_COST_MODELS.join(", ")})`,
    );
  }
  if (o.lr !== undefined && !(Number.isFinite(o.lr) && o.lr > 0)) {
    throw new RangeError(`lr must be a finite number > 0, got ${o.lr}`);
  }
  if (o.device !== undefined && o.device !== "cpu" && o.device !== "cuda") {
    throw new RangeError(`device must be cpu or cuda, got ${o.device}`);
  }
  const seed = o.seed ?? 0;
  if (!Number.isInteger(seed) || seed < 0) {
    throw new RangeError(`seed must be a non-negative integer, got ${seed}`);
  }
}

/**
 * The dynamic policy that evicts whatever the named planner's plan leaves over
 * the budget, as the planner declares it (`Planner.needs.fallback`): `dtr-eq`,
 * swap-aware (`dtr-eq+swap`) for `libra`, which runs with host memory.
 */
export function fallbackFor(planner: string): string {
  return plannerNeeds(createPlanner(planner)).fallback;
}

function openBackend(device: "cpu" | "cuda"): Backend {
  try {
    return device === "cuda" ? cudaBackend() : cpuBackend();
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0];
    throw new Error(
      `the ${device} backend is unavailable: ${msg}${
        device === "cpu" ? " (run deno task build:native)" : " (use --device cpu)"
      }`,
    );
  }
}

/** One training step of a copy. */
interface Step {
  loss: number;
  ms: number;
  cpuMs: number;
}

/** A copy of the model: created fresh and seeded, so every copy starts from the same state. */
interface Copy {
  step(): Step;
  dispose(): void;
}

/**
 * A fresh, seeded copy of the model with its data and optimizer on `b`. Each
 * copy keeps its own random-generator state (dropout draws), restored around
 * its steps, so interleaved copies draw the same numbers as copies run apart.
 * `after` runs at the end of every step, inside its timing: the budgeted
 * copy's runtime ends its step there (`Runtime.endStep`, a collection of the
 * step's lineage among what it does), which a program under a runtime does
 * every step too.
 */
function makeCopy(b: Backend, o: RunTrainingOptions, after?: () => void): Copy {
  return withBackend(b, () => {
    const seed = o.seed ?? 0;
    manualSeed(seed);
    const name = o.model as ModelName;
    const preset = o.preset ?? "tiny";
    // deno-lint-ignore no-explicit-any
    let config: any = preset;
    let input = {};
    if (o.config) {
      const p = getPreset(name, preset);
      config = { ...p.config, ...o.config };
      input = p.input;
    }
    const model = createModel(name, config, { backend: b });
    const data = createData(name, config, { ...input, seed });
    const optimizer = new SGD(model.parameters(), { lr: o.lr ?? 0.01, momentum: 0.9 });
    model.train();
    let rng = randomState();
    return {
      step(): Step {
        return withBackend(b, () => {
          const batch = data.next();
          setRandomState(rng);
          const c0 = processCpuMs();
          const t0 = performance.now();
          const loss = trainStep({ model, batch, optimizer, backend: b });
          after?.();
          const ms = performance.now() - t0;
          const cpuMs = processCpuMs() - c0;
          rng = randomState();
          return { loss, ms, cpuMs };
        });
      },
      dispose(): void {
        withBackend(b, () => {
          optimizer.dispose();
          model.dispose();
        });
      },
    };
  });
}

function costModelOf(o: RunTrainingOptions, device: "cpu" | "cuda"): CostModel {
  const c = o.costModel ?? "analytic";
  return typeof c === "string" ? liveCostModel(c, device) : c;
}

/** Counters that add up over steps (the rest, peak and budget, are levels). */
function statsSince(now: RuntimeStats, then: RuntimeStats): RuntimeStats {
  const out = { ...now };
  for (const k of Object.keys(now) as (keyof RuntimeStats)[]) {
    if (k !== "peakBytes" && k !== "budgetBytes") out[k] = now[k] - then[k];
  }
  return out;
}

function paired(budget: number[], base: number[]): PairedOverhead {
  const ratios = budget.map((b, i) => b / Math.max(base[i]!, 1e-9));
  return { ...medianInterval(ratios), ratios, budgetMs: budget, baselineMs: base };
}

function loadAverage(): number[] | null {
  try {
    return Deno.loadavg();
  } catch {
    return null;
  }
}

/**
 * The budgeted copy's policy, which the JIT warm-up's copy runs too: a
 * dynamic policy, or a planner's fallback; the runtime's default search (a
 * full scan up to 1024 evictable storages, sampling above) with the run's
 * seed for the samples; host memory for a planner whose plans swap (libra,
 * with a swap-aware fallback; one that only drops, chen-sqrt, runs like
 * dtr-eq).
 */
function policyOptions(
  o: RunTrainingOptions,
  needs: ReturnType<typeof plannerNeeds> | undefined,
): Pick<RuntimeOptions, "policy" | "hostLimitBytes"> & { search: SearchOptions } {
  return {
    policy: needs !== undefined ? needs.fallback : o.policy,
    search: { ...DEFAULT_SEARCH, seed: o.seed ?? 0 },
    ...(needs?.swaps ? { hostLimitBytes: Infinity } : {}),
  };
}

/** The run's budget, bytes: `budgetBytes`, or `budgetRatio` of the budget-free `peakBytes`. */
function budgetOf(o: RunTrainingOptions, peakBytes: number): number {
  return o.budgetBytes ?? Math.max(1, Math.floor(o.budgetRatio! * peakBytes));
}

/**
 * JIT warm-up on a kernel-free copy: the JavaScript engine compiles the
 * runtime's hot paths with its optimizing tier only after thousands of calls,
 * and a copy of the budgeted model under a runtime whose backend runs no
 * kernels (allocations, frees, reads and writes are the backend's own) makes
 * them for the cost of the JavaScript alone (~1 ms a step of gpt small). It
 * trains until its runtime has made `calls` calls (at most
 * {@link MAX_WARMUP_STEPS} steps), under the run's budget from its third step
 * on (the run's policy, or a planner's fallback), so the budgeted paths
 * compile as well; running out of that budget ends it. Returns the calls it
 * made. It shares nothing with the measured copies but the engine's compiled
 * code: their losses and decisions are the same without it. Measured on gpt
 * small at ratio 1.0: without it the first ten of 41 pairs measured 1.01-1.09
 * (the engine still compiling ~90 functions, ~97 ms, during the measured
 * steps) and runs 1.009-1.044; with it 0.98-1.03 and 1.004-1.016 (five runs
 * each, alternating).
 */
function jitWarmUp(
  backend: Backend,
  o: RunTrainingOptions,
  device: "cpu" | "cuda",
  needs: ReturnType<typeof plannerNeeds> | undefined,
  calls: number,
  check: (what: string, i: number, n: number) => void,
): number {
  const rt = new Runtime({
    backend: withoutKernels(backend),
    ...policyOptions(o, needs),
    timeline: false,
    costModel: costModelOf(o, device),
  });
  const c = makeCopy(rt, o, () => rt.endStep());
  try {
    for (let i = 0; i < MAX_WARMUP_STEPS && rt.engine.callIndex < calls; i++) {
      check("JIT warm-up", i, MAX_WARMUP_STEPS);
      c.step();
      if (i === 1) rt.setBudget(budgetOf(o, rt.stats.peakBytes));
    }
  } catch (e) {
    if (!(e instanceof OutOfBudgetError)) throw e;
  } finally {
    c.dispose();
  }
  return rt.engine.callIndex;
}

/**
 * Trains under a budget next to a budget-free copy and measures the overhead
 * (see the module doc):
 * 1. for a planner, two budget-free steps are recorded on a runtime of their
 *    own and the second (steady-state) step is what the plan is made for;
 * 1b. JIT warm-up: a copy whose kernels do nothing makes `warmupCalls`
 *    runtime calls (see `jitWarmUp`);
 * 2. warm-up: both copies train `warmupSteps` steps, alternating; the
 *    budgeted copy's runtime has no budget yet, and its peak sets the budget
 *    (`budgetRatio` x peak) and its kernel times the `profiled` cost model;
 * 3. for a planner, the plan for that budget (validated by replay);
 * 4. `budgetedWarmupSteps` more warm-up pairs, under the budget;
 * 5. measurement: `steps` pairs, the order alternating (A B, B A, ...).
 *
 * Throws `OutOfBudgetError` when the budget is infeasible (unless
 * `allowInfeasible`), `RangeError` for bad options.
 *
 * @example
 * ```ts ignore
 * import { runTraining } from "@libra/train";
 * const r = runTraining({ model: "gpt", policy: "dtr-eq", budgetRatio: 0.7 });
 * const m = r.measurement!;
 * console.log(`${m.wall.median} [${m.wall.low}, ${m.wall.high}] accounted ${m.accounted.overhead}`);
 * ```
 */
export function runTraining(options: RunTrainingOptions): RunTrainingResult {
  checkOptions(options);
  const o = options;
  const device = o.device ?? "cpu";
  const backend = o.backend ?? openBackend(device);
  const steps = o.steps ?? DEFAULT_STEPS;
  const minWarmup = o.warmupSteps ?? DEFAULT_WARMUP_STEPS;
  const budgetedWarmup = o.budgetedWarmupSteps ?? DEFAULT_BUDGETED_WARMUP_STEPS;
  const warmupCalls = o.warmupCalls ?? DEFAULT_WARMUP_CALLS;
  const warmupEvents = o.budgetedWarmupEvents ?? DEFAULT_BUDGETED_WARMUP_EVENTS;
  let warmup = 0, warmedCalls = 0, budgetedWarmed = 0;
  const plannerOf: Planner | undefined = isPlannerName(o.policy)
    ? createPlanner(o.policy)
    : undefined;
  const planner = plannerOf !== undefined;
  // What the planner's plans need: host memory for swaps, the fallback policy.
  const needs = plannerOf !== undefined ? plannerNeeds(plannerOf) : undefined;
  const say = (phase: TrainingPhase, m: string) => {
    o.onPhase?.(phase, m);
    o.onProgress?.(m);
  };
  const check = (what: string, i: number, n: number) => {
    if (o.signal?.aborted) throw new Error(`canceled before ${what} step ${i + 1}/${n}`);
  };

  say(
    "warm-up",
    `${minWarmup} warm-up steps per copy${
      warmupCalls > 0 ? ` or more, until ${warmupCalls} runtime calls` : ""
    }${planner ? " (and two recorded for the planner)" : ""}`,
  );
  let recorded: Trace | undefined;
  if (planner) {
    // A steady-state step (optimizer state exists) is what the planner plans.
    const rec = new Runtime({ backend, record: true, timeline: false });
    const c = makeCopy(rec, o);
    try {
      for (let i = 0; i < 2; i++) {
        check("recorded", i, 2);
        // No endStep: the recording keeps run-wide names (c<call>.<k> restarts at
        // every endStep, and values from earlier steps would share names with the
        // step's own outputs in the recorded trace).
        const from = rec.trace().events.length;
        c.step();
        if (i === 1) recorded = stepTrace(rec.trace(), from);
      }
    } finally {
      c.dispose();
    }
  }

  // JIT warm-up first: a kernel-free copy makes the runtime's calls for a fraction of a
  // second (see `jitWarmUp`).
  const jit = warmupCalls > 0 && o.jitWarmup !== false
    ? jitWarmUp(backend, o, device, needs, warmupCalls, check)
    : 0;
  const cost = costModelOf(o, device);
  const policy = policyOptions(o, needs);
  // The runtime's search: its policy's, and a plan's fallback's.
  const search = policy.search;
  const rt = new Runtime({
    backend,
    ...policy,
    timeline: o.timeline ?? false,
    // Recording starts before the last budgeted step (`startRecording`): every step
    // recorded would cost each measured one an event per call.
    costModel: cost,
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
    overheadLimit: o.overheadLimit ?? 2,
  });
  // Set before a step that records (the last measured one, with `recordLastStep`): the
  // trace is taken before the step's end starts the next recording.
  let recording = false;
  let recordedEvents: Trace | undefined;
  const base = makeCopy(backend, o);
  const under = makeCopy(rt, o, () => {
    if (recording) recordedEvents = rt.trace();
    rt.endStep();
  });
  const losses: number[] = [], baselineLosses: number[] = [];
  const wall = { a: [] as number[], b: [] as number[] };
  const cpu = { a: [] as number[], b: [] as number[] };
  const acc = { compute: 0, recompute: 0, bookkeeping: 0, dispatch: 0, stall: 0 };
  const accRatios: number[] = [];
  let outOfBudget: OutOfBudgetError | undefined;
  let live: LivePlan | undefined;
  let planStats: unknown;
  let trace: string | undefined;
  const infeasible = (e: unknown) => {
    if (!(o.allowInfeasible && e instanceof OutOfBudgetError)) throw e;
    outOfBudget = e;
  };
  const report = (phase: StepInfo["phase"], step: number, n: number, s: Step, peak: number) => {
    o.onStep?.({ phase, step, steps: n, loss: s.loss, ms: s.ms, peakBytes: peak });
    o.onProgress?.(`${phase} step ${step + 1}/${n}: loss ${s.loss.toFixed(6)}`);
  };
  let baselinePeakBytes = 0, budgetBytes = 0;
  let before: RuntimeStats | undefined;
  try {
    const stepA = (phase: "warm-up" | "baseline", i: number, n: number): Step => {
      check(phase, i, n);
      const s = base.step();
      baselineLosses.push(s.loss);
      report(phase, i, n, s, 0);
      return s;
    };
    // `budgeted`: the step runs under the budget (a measured one, or the warm-up's last).
    const stepB = (phase: "warm-up" | "budget", i: number, n: number, budgeted = false): Step => {
      check(phase, i, n);
      if (budgeted) live?.beginStep();
      recording = phase === "budget" && o.recordLastStep === true && i === n - 1;
      if (recording) rt.startRecording();
      const s = under.step();
      if (recording) {
        trace = formatTrace(recordedEvents!);
        recording = false;
      }
      losses.push(s.loss);
      report(phase, i, n, s, phase === "budget" ? rt.stats.peakBytes : 0);
      return s;
    };
    // Past its minimum steps, the warm-up goes on while the runtime has run fewer than
    // `warmupCalls` calls (JIT warm-up), for a bounded amount of priced compute.
    // What the budgeted copy's calls have cost so far, as its cost model prices them (the
    // analytic model's estimates by default: the same however loaded the machine).
    const pricedNs = () => {
      const st = rt.stats;
      return st.computeNs + st.recomputeNs;
    };
    let warmComputeNs = 0, extendedFrom = 0;
    const calls0 = rt.engine.callIndex;
    const more = (i: number) => {
      if (i < minWarmup) return true;
      if (i === minWarmup) extendedFrom = pricedNs();
      return warmupGoesOn(
        i,
        rt.engine.callIndex - calls0,
        warmupCalls,
        (pricedNs() - extendedFrom) / 1e6,
        WARMUP_EXTENSION_COMPUTE_MS,
      );
    };
    for (let i = 0; more(i); i++) {
      const n = Math.max(minWarmup, i + 1);
      if (i % 2 === 0) stepA("warm-up", i, n);
      const c0 = rt.stats.computeNs;
      stepB("warm-up", i, n);
      warmComputeNs = rt.stats.computeNs - c0;
      if (i % 2 === 1) stepA("warm-up", i, n);
      warmup = i + 1;
    }
    warmedCalls = rt.engine.callIndex - calls0;
    baselinePeakBytes = rt.stats.peakBytes;
    budgetBytes = budgetOf(o, baselinePeakBytes);
    if (cost instanceof FrozenProfileCostModel) cost.freeze();

    if (plannerOf !== undefined && needs !== undefined && recorded !== undefined) {
      const ctx = plannerContext(recorded, {
        hostLimitBytes: needs.swaps ? Infinity : 0,
        fallback: needs.fallback,
        // replayed as the runtime ran the step
        ...RECORDED_STEP_REPLAY,
      });
      say("plan", `planning ${o.policy} for ${budgetBytes} bytes`);
      try {
        const plan: Plan = plannerOf.plan(recorded, budgetBytes, ctx);
        planStats = (plan as Partial<LibraPlan>).stats;
        live = new LivePlan(
          plan,
          recorded,
          createPolicy(needs.fallback, search),
        );
        rt.engine.setPolicy(live.policy);
        live.attach(rt.engine);
      } catch (e) {
        infeasible(e);
      }
    }

    rt.setBudget(budgetBytes);
    // Thrash limit: recomputation plus stalls past (X - 1) x the budget-free
    // compute of the budgeted steps (the warm-up's last budget-free step's x
    // steps) stop the run. Both sides are what the runtime counts per call, in
    // the cost model's units (its estimates, or per-call measured times with
    // their timer cost), never a per-call sum against a whole step's wall time.
    // Set for the budgeted steps to come (the budgeted warm-up's, then the measured ones);
    // widened by a step for each step the budgeted warm-up adds past its minimum.
    const limitOver = (budgetedSteps: number) => {
      if (warmComputeNs > 0) {
        rt.engine.setOverheadLimit(o.overheadLimit ?? 2, warmComputeNs * (budgetedSteps + steps));
      }
    };
    limitOver(budgetedWarmup);
    // What the copy carries between steps must fit before the budgeted steps start.
    if (outOfBudget === undefined) {
      try {
        rt.engine.reserve(0);
      } catch (e) {
        infeasible(e);
      }
    }
    const warmed = warmup;
    // Past its minimum steps, the budgeted warm-up goes on while its steps evict and have
    // made fewer than `warmupEvents` evictions and re-materializations.
    const events = () => {
      const st = rt.stats;
      return st.evictions + st.remats;
    };
    const events0 = events();
    let budgetedFrom = 0;
    const moreBudgeted = (i: number) => {
      if (i < budgetedWarmup) return true;
      const made = events() - events0;
      if (budgetedWarmup === 0 || made === 0) return false;
      if (i === budgetedWarmup) budgetedFrom = pricedNs();
      return warmupGoesOn(
        i,
        made,
        warmupEvents,
        (pricedNs() - budgetedFrom) / 1e6,
        BUDGETED_WARMUP_EXTENSION_COMPUTE_MS,
      );
    };
    for (let i = 0; moreBudgeted(i) && outOfBudget === undefined; i++) {
      const n = warmed + Math.max(budgetedWarmup, i + 1);
      if (i >= budgetedWarmup) limitOver(i + 1);
      if (i % 2 === 0) stepA("warm-up", warmed + i, n);
      try {
        stepB("warm-up", warmed + i, n, true);
      } catch (e) {
        infeasible(e);
        break;
      }
      if (i % 2 === 1) stepA("warm-up", warmed + i, n);
      warmup++;
      budgetedWarmed++;
    }
    rt.resetPeak();
    rt.timeline.clear();
    rt.engine.recordDecisions = o.recordDecisions ?? false;
    // The run's statistics, the plan's counts with them, are the measured steps'.
    before = rt.stats;
    live?.resetCounts();
    const ratio = o.budgetRatio ?? budgetBytes / baselinePeakBytes;
    say(
      "measure",
      `${steps} budget-free and ${steps} budgeted steps interleaved (${budgetBytes} bytes, ratio ${ratio}, ${o.policy})`,
    );
    for (let i = 0; i < steps && outOfBudget === undefined; i++) {
      let a: Step | undefined, b: Step | undefined;
      if (i % 2 === 0) a = stepA("baseline", i, steps);
      const k0 = rt.stats;
      try {
        b = stepB("budget", i, steps, true);
      } catch (e) {
        infeasible(e);
        break;
      }
      const k1 = rt.stats;
      if (i % 2 === 1) a = stepA("baseline", i, steps);
      wall.a.push(a!.ms);
      wall.b.push(b.ms);
      cpu.a.push(a!.cpuMs);
      cpu.b.push(b.cpuMs);
      // The budget-free copy's step is the compute the budgeted one repeats; the
      // runtime's counters say what it added (recomputations are always timed).
      const computeNs = a!.ms * 1e6;
      // Measured recomputation: with a cost model that prices calls without their
      // times, recomputations and copy-on-write copies are still timed (addedKernelNs).
      const recompute = cost.measures === false
        ? k1.addedKernelNs - k0.addedKernelNs
        : k1.recomputeNs - k0.recomputeNs;
      const bookkeeping = k1.bookkeepingNs - k0.bookkeepingNs;
      const dispatch = k1.dispatchNs - k0.dispatchNs;
      const stall = k1.swapStallNs - k0.swapStallNs;
      acc.compute += computeNs;
      acc.recompute += recompute;
      acc.bookkeeping += bookkeeping;
      acc.dispatch += dispatch;
      acc.stall += stall;
      accRatios.push(
        (computeNs + recompute + bookkeeping + dispatch + stall) / Math.max(computeNs, 1e-9),
      );
    }
  } catch (e) {
    infeasible(e);
  } finally {
    base.dispose();
    try {
      under.dispose();
    } catch {
      // After an out-of-budget error some tensors may be half-made; the runtime goes anyway.
    }
  }

  const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
  let measurement: OverheadMeasurement | undefined;
  if (wall.b.length > 0) {
    const w = paired(wall.b, wall.a);
    const load = loadAverage();
    const cores = navigator.hardwareConcurrency;
    const sumsOverhead = acc.compute > 0
      ? (acc.compute + acc.recompute + acc.bookkeeping + acc.dispatch + acc.stall) / acc.compute
      : 1;
    const accounted = medianInterval(accRatios).median;
    const disagreement = w.median / accounted - 1;
    measurement = {
      method: "interleaved",
      warmupSteps: warmup,
      budgetedWarmupSteps: budgetedWarmed,
      warmupCalls: warmedCalls,
      jitWarmupCalls: jit,
      pairs: wall.b.length,
      wall: w,
      cpu: paired(cpu.b, cpu.a),
      accounted: {
        overhead: accounted,
        ratios: accRatios,
        sumsOverhead,
        computeMs: acc.compute / 1e6,
        recomputeMs: acc.recompute / 1e6,
        bookkeepingMs: acc.bookkeeping / 1e6,
        dispatchMs: acc.dispatch / 1e6,
        swapStallMs: acc.stall / 1e6,
      },
      disagreement,
      warning: Math.abs(disagreement) > AGREEMENT_TOLERANCE
        ? `measured overhead ${w.median.toFixed(3)} differs from the accounted ${
          accounted.toFixed(3)
        } by ${(disagreement * 100).toFixed(0)}% (more than ${
          AGREEMENT_TOLERANCE * 100
        }%): time the runtime does not count (garbage collection, kernels slowed by its memory traffic) or load from other processes`
        : null,
      costModel: cost.name,
      loadAverage: load,
      busy: load !== null && load[0]! > cores
        ? `the machine was busy (load ${
          load[0]!.toFixed(1)
        } on ${cores} cores): wall-time ratios are unreliable, the CPU-time ratio ${
          paired(cpu.b, cpu.a).median.toFixed(3)
        } is the steadier number`
        : null,
    };
  }
  const stats = before !== undefined ? statsSince(rt.stats, before) : rt.stats;
  const result: RunTrainingResult = {
    baselinePeakBytes,
    budgetBytes,
    peakBytes: before !== undefined ? rt.stats.peakBytes : 0,
    overhead: measurement?.wall.median ?? 1,
    ...(measurement ? { measurement } : {}),
    warmupSteps: warmup,
    losses,
    baselineLosses,
    stats,
    timeMs: sum(wall.b),
    baselineTimeMs: sum(wall.a),
    stepTimesMs: wall.b,
    baselineStepTimesMs: wall.a,
    ...(o.timeline ? { timeline: rt.timeline } : {}),
    ...(trace !== undefined ? { trace } : {}),
    ...(o.recordDecisions ? { decisions: [...rt.engine.decisions] } : {}),
    ...(outOfBudget ? { outOfBudget } : {}),
  };
  if (live) {
    result.plan = {
      planner: live.plan.planner,
      steps: live.plan.steps.length,
      ...(planStats !== undefined ? { stats: planStats } : {}),
      applied: live.applied,
      skipped: live.skipped,
      mismatchedSteps: live.mismatches,
    };
  }
  return result;
}
