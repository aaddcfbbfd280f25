/**
 * The {@link Engine} the suite runs on: `@libra/runtime` (trace import,
 * `replayTrace` on the meta backend, the `Runtime` backend), `@libra/evict`
 * (policy names), `@libra/nn` (model zoo, synthetic data, `train`) and
 * `@libra/native` (cpu and cuda backends).
 *
 * @module
 */

import { AnalyticCostModel } from "@libra/cost";
import {
  createPlanner,
  createPolicy,
  isPlannerName,
  type Plan,
  planHostLimit,
  PLANNER_NAMES,
  plannerNeeds,
  planPolicy,
  POLICY_NAMES,
} from "@libra/evict";
import { cpuBackend, cudaBackend } from "@libra/native";
import {
  createData,
  createModel,
  MODEL_NAMES,
  type ModelName,
  PRESETS,
  SGD,
  train,
} from "@libra/nn";
import {
  DEFAULT_LINK,
  DEFAULT_SEARCH,
  plannerContext,
  PUBLISHED_LEAF_RELEASE,
  readTrace,
  RECORDED_STEP_REPLAY,
  type ReplayResult,
  replayTrace,
  Runtime,
  type RuntimeEvent,
  type Timeline,
} from "@libra/runtime";
import type { Trace } from "@libra/lineage/trace";
import {
  DEFAULT_WARMUP_CALLS,
  runTraining,
  type RunTrainingResult,
  warmupGoesOn,
} from "@libra/train/run-training";
import { stepTrace } from "@libra/train/live-plan";
import { type Backend, manualSeed, withBackend } from "@libra/tensor";
import type {
  DeviceInfo,
  Engine,
  MicroDeps,
  Outcome,
  PreparedModel,
  PreparedTrace,
  RunSettings,
} from "./engine.ts";
import type { BenchOptions } from "./options.ts";
import { spread } from "./stats.ts";
import { evictingRuntimeOptions } from "./micro.ts";

/**
 * The suite's JIT warm-up (see `warmJit`) goes on for at most this long on the clock: it only
 * warms the process's compiled code (its model is then trained afresh for each measured run),
 * so unlike a run's own warm-up it may end by time.
 */
const JIT_WARMUP_MS = 4000;

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
}

/** Thrown from the runtime's event stream when a run passes its time limit. */
class TimeLimitError extends Error {
  constructor(ms: number) {
    super(
      `time limit: stopped after ${
        ms / 1000
      } s (the policy is thrashing at this budget; raise --time-limit to wait longer)`,
    );
    this.name = "TimeLimitError";
  }
}

/**
 * An event listener that stops a run past `ms` by throwing from the runtime's
 * event stream (the run is abandoned; its runtime is not used again), and
 * counts evictions and re-materializations so an abandoned run still reports them.
 */
function watchdog(ms: number): {
  onEvent: (e: RuntimeEvent) => void;
  evictions: number;
  remats: number;
} {
  const end = performance.now() + ms;
  let n = 0;
  const w = {
    evictions: 0,
    remats: 0,
    onEvent(e: RuntimeEvent): void {
      if (e.type === "evict" && !e.eager) w.evictions++;
      else if (e.type === "remat") w.remats++;
      if ((++n & 255) === 0 && performance.now() > end) throw new TimeLimitError(ms);
    },
  };
  return w;
}

function abandoned(e: TimeLimitError, w: ReturnType<typeof watchdog>, peakBytes: number): Outcome {
  return {
    feasible: false,
    overhead: null,
    evictions: w.evictions,
    remats: w.remats,
    swapBytes: 0,
    bookkeepingMs: 0,
    peakBytes,
    timeMs: null,
    baselineTimeMs: null,
    error: e.message,
    reason: "time limit",
  };
}

/** Kernel calls of a trace (CALL and MUTATE events). */
function callCount(trace: Trace): number {
  let n = 0;
  for (const e of trace.events) if (e.kind === "call" || e.kind === "mutate") n++;
  return n;
}

/** A trace and whether its replays take costs from the analytic model instead of its times. */
interface TraceHandle {
  readonly trace: Trace;
  readonly analytic: boolean;
  /**
   * An imported log, replayed as `libra simulate` replays it: the published
   * simulator's constant handling (freed once unreferenced without a budget,
   * pinned under one) and swaps on the default copy stream. A recorded live
   * step keeps the Engine's default handling (under pinned constants a plan
   * of a recorded step evicts nothing).
   */
  readonly published: boolean;
  /** Plans of static planners by `planner@budget`, with the time planning took (ms). */
  readonly plans: Map<string, { plan: Plan; ms: number }>;
}

function prepareTrace(trace: Trace, analytic: boolean, published: boolean): PreparedTrace {
  const base = replayTrace(trace, {
    budgetBytes: Infinity,
    ...(analytic ? { costModel: new AnalyticCostModel() } : {}),
    ...(published ? { leafRelease: PUBLISHED_LEAF_RELEASE.baseline } : RECORDED_STEP_REPLAY),
  });
  if (!base.feasible) {
    throw new Error(
      `budget-free replay of ${trace.source ?? "trace"} failed: ${base.error?.message}`,
    );
  }
  const handle: TraceHandle = { trace, analytic, published, plans: new Map() };
  return {
    peakBytes: base.stats.peakBytes,
    computeNs: base.stats.computeNs,
    calls: callCount(trace),
    handle,
  };
}

function replayOutcome(r: ReplayResult, timeline: boolean): Outcome {
  return {
    feasible: r.feasible,
    overhead: r.feasible ? r.overhead : null,
    evictions: r.stats.evictions,
    remats: r.stats.remats,
    swapBytes: r.stats.swapOutBytes,
    bookkeepingMs: r.stats.bookkeepingNs / 1e6,
    peakBytes: r.stats.peakBytes,
    timeMs: null,
    baselineTimeMs: null,
    error: r.error ? firstLine(r.error) : null,
    ...(r.error ? { reason: r.error.reason } : {}),
    ...(timeline ? { timeline: timelineOf(r.timeline) } : {}),
  };
}

function timelineOf(t: Timeline): NonNullable<Outcome["timeline"]> {
  return {
    points: t.calls.map((call, i) => ({ call, bytes: t.bytes[i]! })),
    events: t.markers.map((m) => ({ call: m.call, kind: m.kind })),
  };
}

interface ModelHandle {
  readonly name: ModelName;
  readonly preset: string;
  readonly backend: Backend;
}

/** Creates the engine on the @libra packages. */
export function createLibraEngine(options: Pick<BenchOptions, "device">): Promise<Engine> {
  let backend: Backend | string | undefined;
  const getBackend = (device: "cpu" | "cuda"): Backend | string => {
    if (backend === undefined) {
      try {
        backend = device === "cuda" ? cudaBackend() : cpuBackend();
      } catch (e) {
        backend = `${device} backend unavailable: ${firstLine(e)}${
          device === "cpu" ? " (run deno task build:native)" : ""
        }`;
      }
    }
    return backend;
  };
  void options;

  /**
   * A fresh, seeded model with its data and optimizer on `b`; `step()` trains
   * one step and returns its wall time (ms). `b` is also the default backend
   * meanwhile, for tensors a model makes in its forward pass.
   */
  const trainer = (m: ModelHandle, b: Backend, s: RunSettings, onStep?: () => void) => {
    const { model, data, optimizer } = withBackend(b, () => {
      manualSeed(s.seed);
      const model = createModel(m.name, m.preset, { backend: b });
      const data = createData(m.name, m.preset, { seed: s.seed });
      return { model, data, optimizer: new SGD(model.parameters(), { lr: 0.01, momentum: 0.9 }) };
    });
    return {
      step: (): number =>
        withBackend(
          b,
          () =>
            train({ model, data, optimizer, steps: 1, backend: b, ...(onStep ? { onStep } : {}) })
              .times[0]!,
        ),
      dispose(): void {
        optimizer.dispose();
        model.dispose();
      },
    };
  };
  /**
   * Trains `settings.steps` steps; returns the summed and the fastest step time (ms). With
   * `endSteps`, a runtime `b` ends each step as a program under it does (what only the
   * finished step could need goes, as in `runTraining`; without that the budget-free peak
   * counted what the last step left: 72.7 KiB instead of 37.2 on mlp tiny, whose ratios
   * down to 0.52 then evicted nothing).
   */
  const runSteps = (
    m: ModelHandle,
    b: Backend,
    s: RunSettings,
    endSteps = false,
  ): { totalMs: number; fastestMs: number } => {
    const t = trainer(m, b, s);
    const rt = endSteps && b instanceof Runtime ? b : null;
    try {
      const times = Array.from({ length: s.steps }, () => {
        const ms = t.step();
        rt?.endStep();
        return ms;
      });
      return { totalMs: times.reduce((x, y) => x + y, 0), fastestMs: spread(times).min };
    } finally {
      t.dispose();
    }
  };
  /** Runtime calls this process has made in the suite's preparation (see {@link warmJit}). */
  let processCalls = 0;
  /**
   * JIT warm-up for the whole suite: JavaScript compiles the runtime's hot
   * paths only after thousands of calls, and that code serves every later run
   * of the process. So the first model prepared trains under a runtime until
   * the process has made `DEFAULT_WARMUP_CALLS` runtime calls (as long as
   * `warmupGoesOn` says a run's warm-up goes on), and the measured live runs then warm
   * up `runTraining`'s minimum steps each, all alike.
   */
  const warmJit = (m: ModelHandle, b: Backend, s: RunSettings) => {
    if (processCalls >= DEFAULT_WARMUP_CALLS) return;
    const rt = new Runtime({ backend: b, timeline: false, ...costModel(s) });
    const t = trainer(m, rt, s);
    const t0 = performance.now();
    try {
      for (
        let i = 0;
        warmupGoesOn(
          i,
          processCalls + rt.engine.callIndex,
          DEFAULT_WARMUP_CALLS,
          performance.now() - t0,
          JIT_WARMUP_MS,
        );
        i++
      ) {
        t.step();
        rt.endStep();
      }
    } finally {
      t.dispose();
      processCalls += rt.engine.callIndex;
    }
  };
  const costModel = (s: RunSettings) =>
    s.costModel === "analytic" ? { costModel: new AnalyticCostModel() } : {};
  const modelName = (name: string): ModelName => {
    if (!(MODEL_NAMES as readonly string[]).includes(name)) {
      throw new RangeError(`unknown model "${name}" (available: ${MODEL_NAMES.join(", ")})`);
    }
    return name as ModelName;
  };

  const engine: Engine = {
    policies: () => [...POLICY_NAMES, ...POLICY_NAMES.map((p) => `${p}+swap`), ...PLANNER_NAMES],
    liveUnsupported: (policy) =>
      isPlannerName(policy)
        ? `${policy} is a static planner; the suite runs planners on the simulated path only`
        : null,
    models: () => MODEL_NAMES,
    presets: (model) =>
      (MODEL_NAMES as readonly string[]).includes(model)
        ? Object.keys(PRESETS[model as ModelName])
        : [],
    liveUnavailable(s) {
      const b = getBackend(s.device);
      return typeof b === "string" ? b : null;
    },
    simulateUnavailable: () => null,
    device(s): DeviceInfo {
      const b = getBackend(s.device);
      if (typeof b === "string") return { kind: s.device, name: "unavailable" };
      const name = (b as { deviceName?: string }).deviceName;
      return { kind: b.device, name: name ?? b.name };
    },
    microDeps(s): MicroDeps {
      return {
        backend: () => getBackend(s.device),
        unlimitedRuntime: (b) => new Runtime({ backend: b, timeline: false }),
        evictingRuntime: (b, budget, choice) => {
          const rt = new Runtime({
            backend: b,
            timeline: false,
            budget,
            ...evictingRuntimeOptions(choice),
          });
          return { backend: rt, searchNs: () => rt.stats.policyNs, calls: () => rt.stats.calls };
        },
      };
    },

    async importTrace(path) {
      return prepareTrace(await readTrace(path), false, true);
    },
    recordTrace(model, preset, s) {
      const b = getBackend(s.device);
      if (typeof b === "string") return Promise.reject(new Error(b));
      // The second step, as `runTraining` records one for a planner: the first makes the
      // optimizer's state at its end, where every later step (the live rows') starts with
      // it held. (The first step of gpt small peaked at 50.7 MB against 54.1 MB live, and
      // dtr-eq replayed it at ratio 0.4 with overhead 1.34 where live steps ran at 2.0.)
      // No endStep between: it restarts the runtime's names (c<call>.<k>), and values of
      // the first step would share names with the second's outputs in the trace.
      const rt = new Runtime({ backend: b, record: true, timeline: false });
      const t = trainer({ name: modelName(model), preset, backend: b }, rt, s);
      let from = 0;
      try {
        t.step();
        from = rt.trace().events.length;
        t.step();
      } finally {
        t.dispose();
      }
      const step = stepTrace(rt.trace(), from);
      return Promise.resolve(prepareTrace(step, s.costModel === "analytic", false));
    },
    simulate(trace, policy, budgetBytes, s) {
      const h = trace.handle as TraceHandle;
      const costs = h.analytic ? { costModel: new AnalyticCostModel() } : {};
      // Budgeted replays of an imported log: pinned constants, swaps on the copy stream, a
      // full scan (the published figures'). A step this runtime recorded replays as the
      // runtime ran it (updates in place, copy-on-write where needed; its leaves released
      // as the runtime releases them) with its default search: the live rows' decisions.
      // (With the published simulator's MUTATE, a new version of each value an optimizer
      // updates, mlp tiny's steady-state step ran out of memory at ratio 0.9 where its live
      // steps fit.)
      const published = h.published
        ? { leafRelease: PUBLISHED_LEAF_RELEASE.budgeted }
        : RECORDED_STEP_REPLAY;
      const link = h.published ? { link: DEFAULT_LINK } : {};
      const search = h.published ? { seed: s.seed } : { ...DEFAULT_SEARCH, seed: s.seed };
      const w = watchdog(s.timeLimitMs);
      try {
        if (!isPlannerName(policy)) {
          const r = replayTrace(h.trace, {
            ...costs,
            ...published,
            ...(policy.endsWith("+swap") ? link : {}),
            budgetBytes,
            policy,
            search,
            timeline: s.timeline,
            knownFeasibleBytes: trace.peakBytes,
            onEvent: w.onEvent,
            overheadLimit: s.overheadLimit ?? 2,
          });
          return Promise.resolve(replayOutcome(r, s.timeline));
        }
        // A static planner plans once per budget (validated by replays, as the
        // Libra paper did with real steps); the plan is reused by later repeats
        // and its planning time is part of every repeat's bookkeeping. A planner
        // whose plans swap gets unlimited host memory; its declared fallback
        // chooses if a plan under-evicts.
        const planner = createPlanner(policy);
        const needs = plannerNeeds(planner);
        const host = needs.swaps ? Infinity : 0;
        const key = `${policy}@${budgetBytes}`;
        let planned = h.plans.get(key);
        if (planned === undefined) {
          const t0 = performance.now();
          const ctx = plannerContext(h.trace, {
            ...costs,
            ...published,
            ...link,
            hostLimitBytes: host,
            fallback: needs.fallback,
            onEvent: w.onEvent,
          });
          const plan = planner.plan(h.trace, budgetBytes, ctx);
          planned = { plan, ms: performance.now() - t0 };
          h.plans.set(key, planned);
        }
        const r = replayTrace(h.trace, {
          ...costs,
          ...published,
          ...link,
          budgetBytes,
          hostLimitBytes: planHostLimit(planned.plan, host),
          policy: planPolicy(planned.plan, createPolicy(needs.fallback, search)),
          timeline: s.timeline,
          knownFeasibleBytes: trace.peakBytes,
          onEvent: w.onEvent,
          overheadLimit: s.overheadLimit ?? 2,
        });
        const o = replayOutcome(r, s.timeline);
        return Promise.resolve({ ...o, bookkeepingMs: o.bookkeepingMs + planned.ms });
      } catch (e) {
        if (!(e instanceof TimeLimitError)) throw e;
        return Promise.resolve(abandoned(e, w, budgetBytes));
      }
    },

    prepareModel(model, preset, s) {
      const b = getBackend(s.device);
      if (typeof b === "string") return Promise.reject(new Error(b));
      const handle: ModelHandle = { name: modelName(model), preset, backend: b };
      // Warm-up (JIT, allocator, thread pool), then the peak of a budget-free run under the runtime.
      runSteps(handle, b, s);
      const rt = new Runtime({ backend: b, timeline: false, ...costModel(s) });
      runSteps(handle, rt, s, true);
      processCalls += rt.engine.callIndex;
      warmJit(handle, b, s);
      return Promise.resolve({ peakBytes: rt.stats.peakBytes, handle } satisfies PreparedModel);
    },
    baseline(m, s) {
      const h = m.handle as ModelHandle;
      return Promise.resolve(runSteps(h, h.backend, s).totalMs);
    },
    live(m, policy, budgetBytes, s) {
      // The one measuring method of the project (`runTraining` of @libra/train):
      // a budget-free and a budgeted copy of the model, warm-up, then their steps
      // interleaved; the overhead is the median of the paired ratios.
      const h = m.handle as ModelHandle;
      const w = watchdog(s.timeLimitMs);
      let r: RunTrainingResult;
      try {
        r = runTraining({
          model: h.name,
          preset: h.preset,
          policy,
          budgetBytes,
          steps: s.steps,
          // The suite warmed the process up front (`warmJit`): every run warms up alike.
          warmupCalls: 0,
          seed: s.seed,
          backend: h.backend,
          costModel: s.costModel,
          timeline: s.timeline,
          allowInfeasible: true,
          onEvent: w.onEvent,
          overheadLimit: s.overheadLimit ?? 2,
        });
      } catch (e) {
        if (e instanceof TimeLimitError) return Promise.resolve(abandoned(e, w, budgetBytes));
        throw e;
      }
      const st = r.stats;
      const mm = r.measurement;
      const feasible = r.outOfBudget === undefined && mm !== undefined;
      // The counters cover the measured budgeted steps: per step, as a `sim:` row counts its
      // one replayed step (out of budget while measuring: over the steps it began; before
      // measuring, the counters are the warm-up's, reported whole).
      const per = Math.max(1, r.stepTimesMs.length + (r.outOfBudget !== undefined ? 1 : 0));
      return Promise.resolve({
        feasible,
        overhead: feasible ? mm.wall.median : null,
        ...(feasible
          ? {
            overheadLow: mm.wall.low,
            overheadHigh: mm.wall.high,
            cpuOverhead: mm.cpu.median,
            accountedOverhead: mm.accounted.overhead,
          }
          : {}),
        evictions: st.evictions / per,
        remats: st.remats / per,
        swapBytes: st.swapOutBytes / per,
        bookkeepingMs: st.bookkeepingNs / 1e6 / per,
        peakBytes: st.peakBytes,
        timeMs: feasible ? r.timeMs : null,
        baselineTimeMs: r.baselineTimeMs,
        error: r.outOfBudget ? firstLine(r.outOfBudget) : null,
        ...(r.outOfBudget ? { reason: r.outOfBudget.reason } : {}),
        ...(s.timeline && r.timeline ? { timeline: timelineOf(r.timeline) } : {}),
      });
    },
  };
  return Promise.resolve(engine);
}
