/**
 * The real {@linkcode RunExecutor}: trains a model of `@libra/nn` under a budget with
 * `@libra/runtime` on the native cpu (or cuda) backend through `runTraining`
 * (`@libra/train/run-training`, the core of `deno task libra run`), dynamic policies and
 * static planners (`libra`, `chen-sqrt`) alike, or replays an uploaded DTR-format trace
 * in the runtime's simulator.
 *
 * Training is synchronous compute and may need much memory, so by default each run
 * executes in its own Deno process with its own memory limits ({@linkcode realExecutor}):
 * the server keeps answering, progress and heartbeats flow while the run computes, a
 * run that exhausts its memory takes only its process down, and canceling a run kills
 * its process.
 * The packages are imported lazily, so the API starts (and its tests run) in builds
 * where they are missing; a run then fails saying what is missing.
 *
 * @module
 */

import { median, thinSamples } from "@libra/util/stats";
import { DEFAULT_OVERHEAD_LIMIT, type InfeasibleReason } from "./schemas.ts";
import type {
  CurvePoint,
  ExecuteContext,
  MemoryMarker,
  MemoryTimeline,
  RunExecutor,
  RunResult,
  RunSpec,
  SimulateSpec,
  TrainSpec,
} from "./run_executor.ts";

type RuntimeMod = typeof import("@libra/runtime");
type NnMod = typeof import("@libra/nn");
type NativeMod = typeof import("@libra/native");
type CostMod = typeof import("@libra/cost");
type EvictMod = typeof import("@libra/evict");
type TrainingMod = typeof import("@libra/train/run-training");

/** Thrown when a package the executor needs is not available in this build. */
export class ExecutorUnavailableError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ExecutorUnavailableError";
  }
}

async function load<T>(name: string, f: () => Promise<unknown>): Promise<T> {
  try {
    return await f() as T;
  } catch (e) {
    throw new ExecutorUnavailableError(
      `cannot load ${name}: ${e instanceof Error ? e.message : e}`,
      { cause: e },
    );
  }
}

const loadRuntime = () => load<RuntimeMod>("@libra/runtime", () => import("@libra/runtime"));
const loadNn = () => load<NnMod>("@libra/nn", () => import("@libra/nn"));
const loadNative = () => load<NativeMod>("@libra/native", () => import("@libra/native"));
const loadCost = () => load<CostMod>("@libra/cost", () => import("@libra/cost"));
const loadEvict = () => load<EvictMod>("@libra/evict", () => import("@libra/evict"));
const loadTraining = () =>
  load<TrainingMod>("@libra/train/run-training", () => import("@libra/train/run-training"));
type SimulatePlanMod = typeof import("@libra/train/simulate-plan");
const loadSimulatePlan = () =>
  load<SimulatePlanMod>("@libra/train/simulate-plan", () => import("@libra/train/simulate-plan"));

/** Most samples stored per memory timeline (peaks are kept when thinning). */
export const MAX_TIMELINE_SAMPLES = 20_000;

/** Thins `[t, bytes]` samples to at most `max`, keeping the largest of each bucket. */
export { thinSamples };

interface TimelineLike {
  readonly calls: readonly number[];
  readonly bytes: readonly number[];
  readonly markers: readonly { call: number; bytes: number; kind: string }[];
}

function toTimeline(tl: TimelineLike, budgetBytes: number): MemoryTimeline {
  const samples: [number, number][] = tl.calls.map((c, i) => [c, tl.bytes[i]!]);
  const markers: MemoryMarker[] = [];
  for (const m of tl.markers) {
    if (m.kind === "oom") continue;
    markers.push({ t: m.call, kind: m.kind as MemoryMarker["kind"], bytes: m.bytes });
    if (markers.length >= MAX_TIMELINE_SAMPLES) break;
  }
  return {
    budgetBytes,
    unit: "call",
    samples: thinSamples(samples, MAX_TIMELINE_SAMPLES),
    markers,
  };
}

const ms = (ns: number) => ns / 1e6;

function statsOf(s: import("@libra/runtime").RuntimeStats): Record<string, number> {
  return {
    calls: s.calls,
    evictions: s.evictions,
    drops: s.drops,
    dropBytes: s.dropBytes,
    eagerDrops: s.eagerDrops,
    swapOuts: s.swapOuts,
    swapOutBytes: s.swapOutBytes,
    swapIns: s.swapIns,
    swapInBytes: s.swapInBytes,
    remats: s.remats,
    rematBytes: s.rematBytes,
    recomputeMs: ms(s.recomputeNs),
    swapStallMs: ms(s.swapStallNs),
    bookkeepingMs: ms(s.bookkeepingNs),
    policyMs: ms(s.policyNs),
    dispatchMs: ms(s.dispatchNs),
    collections: s.collections,
    kernelMs: ms(s.kernelNs),
    addedKernelMs: ms(s.addedKernelNs),
    copies: s.copies,
  };
}

async function costModelFor(
  name: string,
  device: "cpu" | "cuda",
): Promise<import("@libra/cost").CostModel> {
  const cost = await loadCost();
  // analytic (deterministic), profiled (the warm-up's times, frozen) or measured (live)
  return cost.liveCostModel(name, device);
}

/**
 * Trains `spec` in this thread through `runTraining` of `@libra/train/run-training` (the
 * core of `libra run`; dynamic policies and planners alike): warm-up, the steps without
 * a budget, then under the budget with the memory timeline and the last step's trace.
 */
export async function executeTrain(spec: TrainSpec, ctx: ExecuteContext): Promise<RunResult> {
  const training = await loadTraining(); // it checks the names and says which exist
  const costModel = await costModelFor(spec.costModel, spec.device);
  const total = spec.steps * 2;
  const budgetPhase = (p: string) => p === "plan" || p === "budget";
  let measuredSteps = 0;
  const r = training.runTraining({
    model: spec.model,
    preset: spec.preset,
    config: spec.config,
    policy: spec.policy,
    ...(spec.budgetBytes !== null
      ? { budgetBytes: spec.budgetBytes }
      : { budgetRatio: spec.budgetRatio ?? 1 }),
    steps: spec.steps,
    device: spec.device,
    seed: spec.seed,
    costModel,
    timeline: true,
    recordLastStep: true,
    allowInfeasible: true,
    overheadLimit: spec.overheadLimit ?? DEFAULT_OVERHEAD_LIMIT,
    signal: ctx.signal,
    onPhase: (phase, message) =>
      ctx.progress({ phase, done: budgetPhase(phase) ? spec.steps : 0, total, message }),
    onStep: (s) => {
      if (s.phase === "warm-up") return;
      // The two copies' measured steps alternate: count both.
      const budget = s.phase === "budget";
      ctx.progress({
        phase: s.phase,
        done: ++measuredSteps,
        total,
        message: `${budget ? "under the budget" : "without a budget"}: step ${
          s.step + 1
        }/${spec.steps}, loss ${s.loss.toFixed(4)}`,
        ...(budget ? { memoryBytes: s.peakBytes } : {}),
      });
    },
  });
  const feasible = r.outOfBudget === undefined;
  // out of memory, or thrashing (recomputation past the thrash limit): the runtime says which
  const reason: InfeasibleReason | null = r.outOfBudget ? r.outOfBudget.reason : null;
  const budgetRatio = spec.budgetRatio ?? r.budgetBytes / r.baselinePeakBytes;
  // The median of the interleaved pairs' ratios (`@libra/train`'s measuring method).
  const m = r.measurement;
  const overhead = feasible && m ? m.wall.median : null;
  const measured = m
    ? {
      overheadLow: m.wall.low,
      overheadHigh: m.wall.high,
      overheadConfidence: m.wall.confidence,
      cpuOverhead: m.cpu.median,
      cpuOverheadLow: m.cpu.low,
      cpuOverheadHigh: m.cpu.high,
      accountedOverhead: m.accounted.overhead,
      measuredPairs: m.pairs,
    }
    : {};
  const plan = r.plan
    ? {
      planSteps: r.plan.steps,
      planApplied: r.plan.applied,
      planSkipped: r.plan.skipped,
      planMismatchedSteps: r.plan.mismatchedSteps,
    }
    : {};
  return {
    feasible,
    budgetBytes: r.budgetBytes,
    budgetRatio,
    baselinePeakBytes: r.baselinePeakBytes,
    peakBytes: r.stats.peakBytes,
    overhead,
    stats: {
      ...statsOf(r.stats),
      baselineMs: r.baselineTimeMs,
      budgetMs: r.timeMs,
      baselineStepMs: median(r.baselineStepTimesMs),
      budgetStepMs: median(r.stepTimesMs),
      steps: spec.steps,
      warmupSteps: r.warmupSteps,
      ...measured,
      ...plan,
    },
    memory: r.timeline ? toTimeline(r.timeline, r.budgetBytes) : null,
    loss: r.losses.map((l, i) => ({ step: i, loss: l, baseline: r.baselineLosses[i] ?? null })),
    points: [{ policy: spec.policy, ratio: budgetRatio, feasible, overhead, reason }],
    trace: feasible ? r.trace ?? null : null,
    note: r.outOfBudget ? r.outOfBudget.message : null,
    reason,
  };
}

/** Replays the uploaded trace under each policy and ratio in this thread. */
export async function executeSimulation(
  spec: SimulateSpec,
  ctx: ExecuteContext,
): Promise<RunResult> {
  if (ctx.trace === undefined) throw new Error("simulation run without its uploaded trace");
  const rt = await loadRuntime();
  const evict = await loadEvict();
  // planners (libra, chen-sqrt) plan each ratio and replay the plan (@libra/train/simulate-plan)
  const plans = spec.policies.some((p) => evict.isPlannerName(p)) ? await loadSimulatePlan() : null;
  const simulate = (policy: string): typeof rt.simulateTrace =>
    evict.isPlannerName(policy) ? plans!.plannerSimulation(policy) : rt.simulateTrace;
  const trace = rt.parseTrace(ctx.trace, spec.name);
  const points: CurvePoint[] = [];
  const stats: Record<string, number> = {};
  let baselinePeak = 0;
  const total = spec.policies.length * spec.ratios.length;
  for (const [i, policy] of spec.policies.entries()) {
    if (ctx.signal.aborted) throw new Error("canceled");
    const report = simulate(policy)(trace, {
      policy,
      ratios: spec.ratios,
      overheadLimit: spec.overheadLimit ?? DEFAULT_OVERHEAD_LIMIT,
      onProgress: (done, _n, row) =>
        ctx.progress({
          phase: "simulate",
          done: i * spec.ratios.length + done,
          total,
          message: `${policy} at ratio ${row.ratio}: ${
            row.feasible
              ? `overhead ${row.overhead!.toFixed(3)}`
              : `infeasible (${row.reason ?? "out of memory"})`
          }`,
        }),
    });
    baselinePeak = report.baseline.peakBytes;
    stats.baselineComputeMs = ms(report.baseline.computeNs);
    for (const r of report.results) {
      points.push({
        policy,
        ratio: r.ratio,
        feasible: r.feasible,
        overhead: r.overhead,
        reason: r.feasible ? null : r.reason ?? null,
      });
      stats[`evictions[${policy}@${r.ratio}]`] = r.evictions;
    }
  }
  stats.calls = trace.events.filter((e) => e.kind === "call").length;
  // the memory timeline of the first policy at its smallest feasible ratio
  const first = spec.policies[0]!;
  const feasible = points.filter((p) => p.policy === first && p.feasible).map((p) => p.ratio);
  let memory: MemoryTimeline | null = null;
  let budgetBytes: number | null = null;
  if (feasible.length) {
    const ratio = Math.min(...feasible);
    budgetBytes = Math.floor(ratio * baselinePeak);
    const replay = rt.replayTrace(trace, {
      budgetBytes,
      timeline: true,
      ...(evict.isPlannerName(first)
        ? plannedReplay(rt, evict, (await loadTraining()).fallbackFor, trace, first, budgetBytes)
        : { policy: first }),
    });
    memory = toTimeline(replay.timeline, budgetBytes);
  }
  // with no feasible ratio at all, the reason at the largest (the most generous) ratio
  const anyFeasible = points.some((p) => p.feasible);
  const largest = points.reduce<CurvePoint | null>((a, p) => a && a.ratio >= p.ratio ? a : p, null);
  return {
    reason: anyFeasible ? null : largest?.reason ?? null,
    feasible: anyFeasible,
    budgetBytes,
    budgetRatio: null,
    baselinePeakBytes: baselinePeak,
    peakBytes: null,
    overhead: null,
    stats,
    memory,
    loss: [],
    points,
    trace: null,
    note: memory
      ? `The memory timeline shows ${first} at its smallest feasible ratio (${
        Math.min(...feasible)
      }).`
      : null,
  };
}

/** Replay options that run `planner`'s plan for `budgetBytes` (as `simulatePlanner` does). */
function plannedReplay(
  rt: RuntimeMod,
  evict: EvictMod,
  fallbackFor: (planner: string) => string,
  trace: import("@libra/lineage/trace").Trace,
  planner: string,
  budgetBytes: number,
): { policy: import("@libra/evict").EvictionPolicy; hostLimitBytes: number } {
  const made = evict.createPlanner(planner);
  // A planner whose plans swap plans with host memory as a second tier.
  const hostLimitBytes = evict.plannerNeeds(made).swaps ? Infinity : 0;
  const fallback = fallbackFor(planner);
  const ctx = rt.plannerContext(trace, { hostLimitBytes, fallback });
  const plan = made.plan(trace, budgetBytes, ctx);
  return {
    policy: evict.planPolicy(plan, evict.createPolicy(fallback)),
    hostLimitBytes: evict.planHostLimit(plan, hostLimitBytes),
  };
}

/** Executes a run in the calling thread (blocks it while training). */
export function executeInThisThread(spec: RunSpec, ctx: ExecuteContext): Promise<RunResult> {
  return spec.kind === "simulate" ? executeSimulation(spec, ctx) : executeTrain(spec, ctx);
}

/** Options of {@link realExecutor}. */
export interface RealExecutorOptions {
  /**
   * Where runs execute: `process` (default), each in its own Deno process with its own
   * memory limits, so that a run that exhausts memory takes only itself down; `none`, in
   * the calling thread (tests).
   */
  isolation?: "process" | "none";
  /** Start one process now and load the packages in it, so the next run starts at once. */
  prewarm?: boolean;
  /**
   * Most memory a run's process may use (resident set: V8 heap plus the tensors' native
   * buffers), checked every 100 ms; beyond it the process is killed and the run fails
   * saying so. Default 8 GiB, or `LIBRA_RUN_MEMORY_BYTES`.
   */
  memoryLimitBytes?: number;
  /** V8 heap limit of a run's process, MiB (default min(4096, memoryLimitBytes / 2 MiB)). */
  heapLimitMiB?: number;
}

/** Loads every package a run needs (a process does this ahead of its run). */
export async function warmUp(): Promise<void> {
  await Promise.all([
    loadRuntime(),
    loadNn(),
    loadTraining(),
    loadNative(),
    loadEvict(),
    loadCost(),
  ]);
}

/** The real executor, with {@link RealExecutor.close} to end its idle process. */
export interface RealExecutor extends RunExecutor {
  /** Ends the prewarmed idle process (running ones end with their runs). */
  close(): void;
  /** The memory limit of a run's process, bytes (null when runs execute in this thread). */
  readonly memoryLimitBytes: number | null;
}

type ChildMessage =
  | { type: "progress"; event: Parameters<ExecuteContext["progress"]>[0] }
  | { type: "result"; result: RunResult }
  | { type: "error"; message: string };

/** The resident set of process `pid` in bytes, or null where /proc is not available. */
export function residentBytes(pid: number): number | null {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const m = status.match(/^VmRSS:\s+(\d+)\s+kB/m);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

const MIB = 1 << 20;

/**
 * Creates the real executor. Each run executes in its own Deno process (never in the
 * API's process): the process has a V8 heap limit, and its resident memory, native
 * tensor buffers included, is checked against `memoryLimitBytes`; canceling a run kills
 * its process. One process is kept loaded ahead of the next run.
 */
export function realExecutor(opts: RealExecutorOptions = {}): RealExecutor {
  if (opts.isolation === "none") {
    return { name: "real", execute: executeInThisThread, close() {}, memoryLimitBytes: null };
  }
  const envLimit = Number(Deno.env.get("LIBRA_RUN_MEMORY_BYTES") ?? NaN);
  const limit = opts.memoryLimitBytes ??
    (Number.isSafeInteger(envLimit) && envLimit > 0 ? envLimit : 8 * 1024 * MIB);
  const heapMiB = opts.heapLimitMiB ?? Math.max(256, Math.min(4096, Math.floor(limit / 2 / MIB)));
  const entry = new URL("./_executor_process.ts", import.meta.url).pathname;
  let closed = false;
  const spawn = () =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        "--no-prompt",
        "--allow-read",
        "--allow-env",
        "--allow-ffi",
        "--allow-sys",
        `--v8-flags=--max-old-space-size=${heapMiB}`,
        entry,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  let warm: Deno.ChildProcess | null = opts.prewarm ? spawn() : null;
  const take = () => {
    const p = warm ?? spawn();
    warm = null;
    return p;
  };
  return {
    name: "real (process)",
    memoryLimitBytes: limit,
    close() {
      closed = true;
      if (warm) {
        const w = warm;
        warm = null;
        try {
          w.kill("SIGKILL");
        } catch { /* already gone */ }
        w.stdin.close().catch(() => {});
        w.status.then(() => {}, () => {});
        w.stdout.cancel().catch(() => {});
        w.stderr.cancel().catch(() => {});
      }
    },
    async execute(spec, ctx) {
      if (ctx.signal.aborted) throw new Error("canceled before the run started");
      const child = take();
      const replace = () => {
        if (opts.prewarm && !closed && warm === null) warm = spawn();
      };
      let failure: string | null = null;
      const kill = (why: string) => {
        failure ??= why;
        try {
          child.kill("SIGKILL");
        } catch { /* already gone */ }
      };
      const onAbort = () => kill("canceled: the run's process was stopped");
      ctx.signal.addEventListener("abort", onAbort);
      let peak = 0;
      const watch = setInterval(() => {
        const rss = residentBytes(child.pid);
        if (rss === null) return;
        peak = Math.max(peak, rss);
        if (rss > limit) {
          kill(
            `the run's process used ${(rss / MIB).toFixed(0)} MiB of memory, above its limit of ${
              (limit / MIB).toFixed(0)
            } MiB (LIBRA_RUN_MEMORY_BYTES); it was stopped. Use a smaller preset, overrides or steps.`,
          );
        }
      }, 100);
      const stderr = new Response(child.stderr).text().catch(() => "");
      let outcome: ChildMessage | null = null;
      const job = new TextEncoder().encode(JSON.stringify({ spec, trace: ctx.trace }));
      const w = child.stdin.getWriter();
      const written = w.write(job).then(() => w.close()).catch(() => {});
      try {
        let buf = "";
        for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
          buf += chunk;
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line.startsWith("\x1elibra ")) continue;
            const m = JSON.parse(line.slice(7)) as ChildMessage;
            if (m.type === "progress") ctx.progress(m.event);
            else outcome = m;
          }
        }
        await written;
        const status = await child.status;
        const err = await stderr;
        if (failure !== null) throw new Error(failure);
        if (outcome?.type === "result") return outcome.result;
        if (outcome?.type === "error") throw new Error(outcome.message);
        const oom = /out of memory|heap limit/i.test(err);
        throw new Error(
          `the run's process ended without a result (${
            status.signal ? `signal ${status.signal}` : `exit code ${status.code}`
          }${oom ? `; its V8 heap limit is ${heapMiB} MiB` : ""})${
            err.trim() ? `: ${err.trim().split("\n").slice(-5).join(" | ")}` : ""
          }`,
        );
      } finally {
        clearInterval(watch);
        ctx.signal.removeEventListener("abort", onAbort);
        kill("done");
        await child.status.catch(() => {});
        replace();
      }
    },
  };
}

/** Whether the real executor can run in this build, and a tiny model it can train. */
export type ExecutorProbe = { ok: true; detail: string; tinyModel: string } | {
  ok: false;
  detail: string;
};

/** Checks that the packages the real executor needs load, and the native library with them. */
export async function probeRealExecutor(): Promise<ExecutorProbe> {
  try {
    const [nn, native] = await Promise.all([loadNn(), loadNative(), loadRuntime()]);
    native.cpuBackend();
    return {
      ok: true,
      detail: "@libra/runtime, @libra/nn and the native cpu backend",
      tinyModel: nn.MODEL_NAMES.includes("mlp") ? "mlp" : nn.MODEL_NAMES[0]!,
    };
  } catch (e) {
    return { ok: false, detail: e instanceof Error ? e.message : String(e) };
  }
}

/** Model and policy names the real packages know (for the dashboard's forms), or null. */
export async function realCatalog(): Promise<{ models: string[]; policies: string[] } | null> {
  try {
    const [nn, evict] = await Promise.all([loadNn(), loadEvict()]);
    const planners = (evict as { PLANNER_NAMES?: readonly string[] }).PLANNER_NAMES ?? [];
    return {
      models: [...nn.MODEL_NAMES],
      policies: [
        ...evict.POLICY_NAMES,
        ...evict.POLICY_NAMES.map((p) => `${p}+swap`),
        ...planners,
      ],
    };
  } catch {
    return null;
  }
}
