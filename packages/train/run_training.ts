/**
 * {@link runTraining}: trains a model of `@libra/nn` under a memory budget
 * with the re-materialization `Runtime` and compares it with a budget-free
 * run of the same steps in the same process. The core of `libra run`, also
 * for the lab API and the benchmark suite.
 *
 * @module
 */

import {
  createPlanner,
  createPolicy,
  isPlannerName,
  type LibraPlan,
  type Plan,
  PLANNER_NAMES,
  POLICY_NAMES,
} from "@libra/evict";
import { cpuBackend, cudaBackend } from "@libra/native";
import type { CostModel } from "@libra/cost";
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
  formatTrace,
  OutOfBudgetError,
  plannerContext,
  Runtime,
  type RuntimeStats,
  type Timeline,
} from "@libra/runtime";
import { type Backend, manualSeed, withBackend } from "@libra/tensor";
import { LivePlan, stepTrace } from "./live_plan.ts";

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
  /** Training steps (>= 1). */
  steps: number;
  /** Device. Default `"cpu"`. */
  device?: "cpu" | "cuda";
  /** Seed of the model, data and policies. Default 0. */
  seed?: number;
  /** Backend to use instead of `device` (tests). */
  backend?: Backend;
  /** Learning rate of SGD (momentum 0.9). Default 0.01. */
  lr?: number;
  /** Cost model of the budgeted run's policy. Default: measured kernel times. */
  costModel?: CostModel;
  /** Record the budgeted run's memory timeline with the runtime's event markers. Default false. */
  timeline?: boolean;
  /** Record the last budgeted step as a DTR-format trace ({@link RunTrainingResult.trace}). */
  recordLastStep?: boolean;
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
  /** Progress messages (one line each). */
  onProgress?: (message: string) => void;
  /** Called when a phase starts, with the progress line it also gives `onProgress`. */
  onPhase?: (phase: TrainingPhase, message: string) => void;
  /** Called after every training step of every phase. */
  onStep?: (info: StepInfo) => void;
}

/** The phases of {@link runTraining}, in order (`plan` only for planners). */
export type TrainingPhase = "warm-up" | "baseline" | "plan" | "budget";

/** One finished training step (see {@link RunTrainingOptions.onStep}). */
export interface StepInfo {
  /** The phase the step belongs to (never `plan`). */
  phase: Exclude<TrainingPhase, "plan">;
  /** Step index in the phase, from 0. */
  step: number;
  /** Steps of the phase. */
  steps: number;
  /** The step's loss. */
  loss: number;
  /** The step's wall time, ms. */
  ms: number;
  /** The phase runtime's peak so far, bytes. */
  peakBytes: number;
}

/** What {@link runTraining} returns. */
export interface RunTrainingResult {
  /** Peak of the budget-free run under the Runtime, bytes. */
  baselinePeakBytes: number;
  /** floor(budgetRatio * baselinePeakBytes), or the `budgetBytes` given. */
  budgetBytes: number;
  /** Peak of the budgeted run, bytes (never above budgetBytes). */
  peakBytes: number;
  /** Wall time of the budgeted steps / wall time of the budget-free steps (meaningless when out of budget). */
  overhead: number;
  /** Losses of the budgeted run (only the steps completed when out of budget). */
  losses: number[];
  /** Losses of the budget-free run (bitwise equal on the cpu backend). */
  baselineLosses: number[];
  /** Runtime statistics of the budgeted run. */
  stats: RuntimeStats;
  /** Summed step times, ms. */
  timeMs: number;
  /** Summed budget-free step times, ms. */
  baselineTimeMs: number;
  /** Each budgeted step's time, ms. */
  stepTimesMs: number[];
  /** Each budget-free step's time, ms. */
  baselineStepTimesMs: number[];
  /** The budgeted run's memory timeline with markers (with `timeline: true`). */
  timeline?: Timeline;
  /** The last budgeted step as a DTR-format trace (with `recordLastStep: true`, when it ran). */
  trace?: string;
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
  if (!isPlannerName(o.policy)) {
    const base = o.policy.endsWith("+swap") ? o.policy.slice(0, -5) : o.policy;
    if (!POLICY_NAMES.includes(base)) {
      throw new RangeError(
        `unknown policy "${o.policy}" (policies: ${
          POLICY_NAMES.join(", ")
        }, each also with +swap; planners: ${PLANNER_NAMES.join(", ")})`,
      );
    }
  }
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
  if (!Number.isInteger(o.steps) || o.steps < 1) {
    throw new RangeError(`steps must be an integer >= 1, got ${o.steps}`);
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
 * The dynamic policy that evicts whatever a planner's plan leaves over the
 * budget: `dtr-eq`, swap-aware (`dtr-eq+swap`) for `libra`, which runs with
 * host memory (plain `dtr-eq` would score leaves, which cost nothing to
 * recompute by its formula, first and swap them all).
 */
export function fallbackFor(planner: string): string {
  return planner === "libra" ? "dtr-eq+swap" : "dtr-eq";
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

/**
 * Trains `options.steps` steps of a fresh, seeded model on `rt`: model, data and
 * optimizer are created under `rt` (so every run starts from the same state).
 * `before(i)` runs before step i, `after(i)` after it (before `endStep`). Appends the
 * losses and step times (ms) to `done` as the steps finish (so they survive a throw) and returns it.
 */
function trainOn(
  rt: Runtime,
  o: RunTrainingOptions,
  phase: StepInfo["phase"],
  steps: number,
  hooks: { before?: (i: number) => void; after?: (i: number) => void; endStep?: boolean } = {},
  done: { losses: number[]; times: number[] } = { losses: [], times: [] },
): { losses: number[]; times: number[] } {
  return withBackend(rt, () => {
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
    const model = createModel(name, config, { backend: rt });
    const data = createData(name, config, { ...input, seed });
    const optimizer = new SGD(model.parameters(), { lr: o.lr ?? 0.01, momentum: 0.9 });
    model.train();
    const { losses, times } = done;
    for (let i = 0; i < steps; i++) {
      if (o.signal?.aborted) throw new Error(`canceled before ${phase} step ${i + 1}/${steps}`);
      const batch = data.next();
      hooks.before?.(i);
      const t0 = performance.now();
      losses.push(trainStep({ model, batch, optimizer, backend: rt }));
      times.push(performance.now() - t0);
      hooks.after?.(i);
      if (hooks.endStep !== false) rt.endStep();
      o.onStep?.({
        phase,
        step: i,
        steps,
        loss: losses[i]!,
        ms: times[i]!,
        peakBytes: rt.stats.peakBytes,
      });
      o.onProgress?.(`step ${i + 1}/${steps}: loss ${losses[i]!.toFixed(6)}`);
    }
    return { losses, times };
  });
}

/**
 * Trains under a budget and against a budget-free baseline (see the module doc):
 * 1. two budget-free warm-up steps (JIT, allocator); for a planner they are
 *    recorded and the second (steady-state) step is cut out of the trace;
 * 2. the budget-free run of `steps` steps under the Runtime: its peak sets the budget;
 * 3. for a planner, the plan for that budget (validated by replay);
 * 4. the budgeted run of the same steps, the plan applied to every step.
 *
 * Throws `OutOfBudgetError` when the budget is infeasible, `RangeError` for bad options.
 *
 * @example
 * ```ts ignore
 * import { runTraining } from "./run_training.ts";
 * const r = runTraining({ model: "mlp", policy: "libra", budgetRatio: 0.6, steps: 2 });
 * console.log(r.overhead, r.peakBytes <= r.budgetBytes);
 * ```
 */
export function runTraining(options: RunTrainingOptions): RunTrainingResult {
  checkOptions(options);
  const o = options;
  const backend = o.backend ?? openBackend(o.device ?? "cpu");
  const planner = isPlannerName(o.policy);
  const say = (phase: TrainingPhase, m: string) => {
    o.onPhase?.(phase, m);
    o.onProgress?.(m);
  };

  // Two warm-up steps (JIT, allocator); for a planner they are recorded and the
  // second one, a steady-state step (optimizer state exists), is planned.
  say("warm-up", planner ? "recording two budget-free steps for the planner" : "warm-up steps");
  const rec = new Runtime({ backend, record: planner, timeline: false });
  let from = 0;
  let recorded: Trace | undefined;
  trainOn(rec, { ...o, onProgress: () => {} }, "warm-up", 2, {
    // No endStep: the recording keeps run-wide names (c<call>.<k> restarts at
    // every endStep, and values from earlier steps would share names with the
    // step's own outputs in the recorded trace).
    endStep: false,
    before: () => {
      if (planner) from = rec.trace().events.length;
    },
    after: (i) => {
      if (planner && i === 1) recorded = stepTrace(rec.trace(), from);
    },
  });

  say("baseline", "budget-free run");
  const base = new Runtime({ backend, timeline: false });
  const baseline = trainOn(base, o, "baseline", o.steps);
  const baselinePeakBytes = base.stats.peakBytes;
  const budgetBytes = o.budgetBytes ??
    Math.max(1, Math.floor(o.budgetRatio! * baselinePeakBytes));
  const ratio = o.budgetRatio ?? budgetBytes / baselinePeakBytes;

  let live: LivePlan | undefined;
  let planStats: unknown;
  let outOfBudget: OutOfBudgetError | undefined;
  const infeasible = (e: unknown) => {
    if (!(o.allowInfeasible && e instanceof OutOfBudgetError)) throw e;
    outOfBudget = e;
  };
  if (planner && recorded !== undefined) {
    const trace = recorded;
    const ctx = plannerContext(trace, {
      hostLimitBytes: o.policy === "libra" ? Infinity : 0,
      fallback: fallbackFor(o.policy),
    });
    say("plan", `planning ${o.policy} for ${budgetBytes} bytes`);
    try {
      const plan: Plan = createPlanner(o.policy).plan(trace, budgetBytes, ctx);
      planStats = (plan as Partial<LibraPlan>).stats;
      live = new LivePlan(plan, trace, createPolicy(fallbackFor(o.policy), { seed: o.seed ?? 0 }));
    } catch (e) {
      infeasible(e);
    }
  }

  say("budget", `budgeted run (${budgetBytes} bytes, ratio ${ratio}, ${o.policy})`);
  const rt = new Runtime({
    backend,
    budget: budgetBytes,
    policy: live ? live.policy : o.policy,
    search: { seed: o.seed ?? 0 },
    timeline: o.timeline ?? false,
    record: o.recordLastStep ?? false,
    overheadLimit: o.overheadLimit ?? 2,
    ...(o.costModel ? { costModel: o.costModel } : {}),
    // libra's plans swap, so it gets host memory (and a swap-aware fallback);
    // chen-sqrt only drops, like dtr-eq.
    ...(o.policy === "libra" ? { hostLimitBytes: Infinity } : {}),
  });
  if (live) live.attach(rt.engine);
  const run = { losses: [] as number[], times: [] as number[] };
  let trace: string | undefined;
  if (outOfBudget === undefined) {
    try {
      trainOn(rt, o, "budget", o.steps, {
        before: () => live?.beginStep(),
        after: (i) => {
          if (o.recordLastStep && i === o.steps - 1) trace = formatTrace(rt.trace());
        },
      }, run);
    } catch (e) {
      infeasible(e);
    }
  }
  const sum = (xs: number[]) => xs.reduce((a, x) => a + x, 0);
  const timeMs = sum(run.times), baselineTimeMs = sum(baseline.times);
  const result: RunTrainingResult = {
    baselinePeakBytes,
    budgetBytes,
    peakBytes: rt.stats.peakBytes,
    overhead: baselineTimeMs > 0 ? timeMs / baselineTimeMs : 1,
    losses: run.losses,
    baselineLosses: baseline.losses,
    stats: rt.stats,
    timeMs,
    baselineTimeMs,
    stepTimesMs: run.times,
    baselineStepTimesMs: baseline.times,
    ...(o.timeline ? { timeline: rt.timeline } : {}),
    ...(trace !== undefined ? { trace } : {}),
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
