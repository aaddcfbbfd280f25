/**
 * Expands the options into workloads and experiments, runs them through an
 * {@link Engine}, and aggregates repeats into the report's results, summaries
 * and memory timelines.
 *
 * @module
 */

import type { BenchOptions, TimelineChoice } from "./options.ts";
import type { Engine, Outcome, PreparedModel, PreparedTrace, RunSettings } from "./engine.ts";
import type {
  BestJson,
  MeasurementJson,
  PolicySummaryJson,
  ResultJson,
  TimelineJson,
  WorkloadJson,
} from "./schema.ts";
import { bestPolicies, budgetBytes, downsample, policySummaries, spread } from "./stats.ts";
import type { Progress } from "./progress.ts";

/** A workload before it runs. */
export interface WorkloadPlan {
  readonly id: string;
  readonly kind: "live" | "simulated";
  readonly source: "model" | "recorded" | "imported";
  readonly model: string;
  readonly preset: string | null;
  readonly trace: string | null;
}

/** One experiment: a workload under one policy at one budget ratio. */
export interface ExperimentPlan {
  readonly workload: WorkloadPlan;
  readonly policy: string;
  readonly ratio: number;
}

/** File name without folders and without a `.log` extension. */
export function traceLabel(path: string): string {
  const base = path.split(/[\\/]/).pop() ?? path;
  return base.replace(/\.log$/, "");
}

/**
 * Workloads of a suite run: per model and preset a live workload and a
 * recorded-then-simulated one, then one per imported trace. Parts listed in
 * `options.skip` are left out.
 */
export function planWorkloads(
  options: Pick<BenchOptions, "models" | "presets" | "traces" | "skip">,
): WorkloadPlan[] {
  const live = !options.skip.includes("live");
  const sim = !options.skip.includes("simulated");
  const out: WorkloadPlan[] = [];
  for (const model of options.models) {
    for (const preset of options.presets) {
      if (live) {
        out.push({
          id: `live:${model}/${preset}`,
          kind: "live",
          source: "model",
          model,
          preset,
          trace: null,
        });
      }
      if (sim) {
        out.push({
          id: `sim:${model}/${preset}`,
          kind: "simulated",
          source: "recorded",
          model,
          preset,
          trace: null,
        });
      }
    }
  }
  if (sim) {
    const seen = new Set<string>();
    for (const trace of options.traces) {
      let label = traceLabel(trace);
      for (let i = 2; seen.has(label); i++) label = `${traceLabel(trace)}-${i}`;
      seen.add(label);
      out.push({
        id: `trace:${label}`,
        kind: "simulated",
        source: "imported",
        model: label,
        preset: null,
        trace,
      });
    }
  }
  return out;
}

/** Every (workload, policy, ratio), policies in the given order, ratios descending. */
export function expandPlan(
  workloads: readonly WorkloadPlan[],
  policies: readonly string[],
  ratios: readonly number[],
): ExperimentPlan[] {
  const rs = [...ratios].sort((a, b) => b - a);
  const out: ExperimentPlan[] = [];
  for (const workload of workloads) {
    for (const policy of policies) for (const ratio of rs) out.push({ workload, policy, ratio });
  }
  return out;
}

/** Aggregates the repeats of one experiment. */
export function aggregate(
  exp: ExperimentPlan,
  budget: number,
  measurements: readonly MeasurementJson[],
): ResultJson {
  if (measurements.length === 0) {
    throw new RangeError(
      `aggregate: no measurements for ${exp.workload.id} ${exp.policy}@${exp.ratio}`,
    );
  }
  const feasible = measurements.filter((m) => m.feasible);
  return {
    workload: exp.workload.id,
    kind: exp.workload.kind,
    policy: exp.policy,
    ratio: exp.ratio,
    budgetBytes: budget,
    feasible: feasible.length === measurements.length,
    feasibleRepeats: feasible.length,
    repeats: measurements.length,
    overhead: feasible.length > 0 ? spread(feasible.map((m) => m.overhead!)) : null,
    evictions: spread(measurements.map((m) => m.evictions)),
    remats: spread(measurements.map((m) => m.remats)),
    swapBytes: spread(measurements.map((m) => m.swapBytes)),
    bookkeepingMs: spread(measurements.map((m) => m.bookkeepingMs)),
    peakBytes: spread(measurements.map((m) => m.peakBytes)),
    error: measurements.find((m) => m.error !== null)?.error ?? null,
    reason: measurements.find((m) => !m.feasible)?.reason ?? null,
    measurements: [...measurements],
  };
}

function toMeasurement(o: Outcome): MeasurementJson {
  return {
    feasible: o.feasible,
    overhead: o.feasible ? o.overhead : null,
    evictions: o.evictions,
    remats: o.remats,
    swapBytes: o.swapBytes,
    bookkeepingMs: o.bookkeepingMs,
    peakBytes: o.peakBytes,
    timeMs: o.timeMs,
    baselineTimeMs: o.baselineTimeMs,
    ...(o.overheadLow !== undefined
      ? {
        overheadLow: o.overheadLow,
        overheadHigh: o.overheadHigh ?? null,
        cpuOverhead: o.cpuOverhead ?? null,
        accountedOverhead: o.accountedOverhead ?? null,
      }
      : {}),
    error: o.error,
    reason: o.feasible ? null : o.reason ?? "out of memory",
  };
}

function failed(e: unknown): MeasurementJson {
  return {
    feasible: false,
    overhead: null,
    evictions: 0,
    remats: 0,
    swapBytes: 0,
    bookkeepingMs: 0,
    peakBytes: 0,
    timeMs: null,
    baselineTimeMs: null,
    error: `failed: ${oneLine(e)}`,
    reason: "failed",
  };
}

/** The first line of an error's message. */
export function oneLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
}

/**
 * Which runs get a memory-over-time plot: the explicit choices, or else, per
 * workload, the first policy at its smallest feasible ratio and at the
 * feasible ratio nearest 0.5.
 */
export function chooseTimelines(
  results: readonly Pick<ResultJson, "workload" | "policy" | "ratio" | "feasible">[],
  workloads: readonly string[],
  policies: readonly string[],
  explicit: readonly TimelineChoice[],
): { workload: string; policy: string; ratio: number }[] {
  const out: { workload: string; policy: string; ratio: number }[] = [];
  for (const w of workloads) {
    if (explicit.length > 0) {
      for (const c of explicit) {
        if (results.some((r) => r.workload === w && r.policy === c.policy && r.ratio === c.ratio)) {
          out.push({ workload: w, ...c });
        }
      }
      continue;
    }
    const policy = policies[0];
    if (policy === undefined) continue;
    const feasible = results.filter((r) => r.workload === w && r.policy === policy && r.feasible)
      .map((r) => r.ratio);
    if (feasible.length === 0) continue;
    const smallest = Math.min(...feasible);
    const mid = feasible.reduce((a, b) => Math.abs(b - 0.5) < Math.abs(a - 0.5) ? b : a);
    for (const ratio of new Set([smallest, mid])) out.push({ workload: w, policy, ratio });
  }
  return out;
}

/** What {@link runSuite} produces (the report minus environment and metadata). */
export interface SuiteResult {
  workloads: WorkloadJson[];
  results: ResultJson[];
  summary: { policies: PolicySummaryJson[]; best: BestJson[] };
  timelines: TimelineJson[];
  skipped: { what: string; reason: string }[];
  /** Runs that threw (not infeasibility: errors), as `workload policy@ratio: message`. */
  failures: string[];
}

type Prepared =
  | { kind: "trace"; trace: PreparedTrace }
  | { kind: "model"; model: PreparedModel; baseline: number[] };

/** Runs every experiment of the plan through `engine`. */
export async function runSuite(
  options: BenchOptions,
  engine: Engine,
  progress: Progress,
): Promise<SuiteResult> {
  const settings: RunSettings = {
    seed: options.seed,
    steps: options.steps,
    device: options.device,
    costModel: options.costModel,
    timeLimitMs: options.timeLimitMs,
    timeline: false,
    overheadLimit: options.overheadLimit ?? 2,
  };
  const skipped: { what: string; reason: string }[] = [];
  const failures: string[] = [];
  let plan = planWorkloads(options);

  const liveWhy = plan.some((w) => w.source !== "imported")
    ? engine.liveUnavailable(settings)
    : null;
  const simWhy = plan.some((w) => w.kind === "simulated") ? engine.simulateUnavailable() : null;
  plan = plan.filter((w) => {
    const why = w.source === "model" || w.source === "recorded" ? liveWhy : null;
    const why2 = w.kind === "simulated" ? simWhy : null;
    if (why ?? why2) {
      skipped.push({ what: w.id, reason: (why ?? why2)! });
      return false;
    }
    return true;
  });
  for (const s of skipped) progress.note(`bench: skipping ${s.what}: ${s.reason}`);

  const unsupported = new Set<string>();
  for (const p of options.policies) {
    const why = plan.some((w) => w.kind === "live") ? engine.liveUnsupported(p) : null;
    if (why) {
      unsupported.add(p);
      skipped.push({ what: `live runs of ${p}`, reason: why });
      progress.note(`bench: skipping live runs of ${p}: ${why}`);
    }
  }
  const experiments = expandPlan(plan, options.policies, options.ratios).filter((e) =>
    !(e.workload.kind === "live" && unsupported.has(e.policy))
  );
  const liveCount = plan.filter((w) => w.kind === "live").length;
  progress.grow(experiments.length * options.repeat + plan.length + liveCount * options.repeat);

  const workloads: WorkloadJson[] = [];
  const results: ResultJson[] = [];
  const prepared = new Map<string, Prepared>();

  for (const w of plan) {
    const units = 1 + (w.kind === "live" ? options.repeat : 0) +
      experiments.filter((e) => e.workload === w).length * options.repeat;
    const before = progress.done;
    progress.start(`${w.id}: preparing`);
    let p: Prepared;
    try {
      if (w.source === "imported") p = { kind: "trace", trace: await engine.importTrace(w.trace!) };
      else if (w.source === "recorded") {
        p = { kind: "trace", trace: await engine.recordTrace(w.model, w.preset!, settings) };
      } else {
        const model = await engine.prepareModel(w.model, w.preset!, settings);
        progress.tick();
        const baseline: number[] = [];
        for (let i = 0; i < options.repeat; i++) {
          progress.start(`${w.id}: budget-free baseline ${i + 1}/${options.repeat}`);
          baseline.push(await engine.baseline(model, settings));
          progress.tick();
        }
        p = { kind: "model", model, baseline };
      }
    } catch (e) {
      const reason = oneLine(e);
      skipped.push({ what: w.id, reason });
      failures.push(`${w.id}: ${reason}`);
      progress.note(`bench: ${w.id} failed to prepare: ${reason}`);
      progress.tick(before + units - progress.done);
      continue;
    }
    if (p.kind === "trace") progress.tick();
    prepared.set(w.id, p);
    workloads.push({
      id: w.id,
      kind: w.kind,
      source: w.source,
      model: w.model,
      preset: w.preset,
      trace: w.trace,
      baselinePeakBytes: p.kind === "trace" ? p.trace.peakBytes : p.model.peakBytes,
      baselineTimeMs: p.kind === "model" ? spread(p.baseline) : null,
      computeMs: p.kind === "trace" ? p.trace.computeNs / 1e6 : null,
      calls: p.kind === "trace" ? p.trace.calls : null,
      steps: p.kind === "model" ? options.steps : null,
    });

    for (const exp of experiments) {
      if (exp.workload !== w) continue;
      const peak = p.kind === "trace" ? p.trace.peakBytes : p.model.peakBytes;
      const budget = budgetBytes(peak, exp.ratio);
      const ms: MeasurementJson[] = [];
      for (let i = 0; i < options.repeat; i++) {
        progress.start(`${w.id} ${exp.policy}@${exp.ratio} (${i + 1}/${options.repeat})`);
        try {
          const o = p.kind === "trace"
            ? await engine.simulate(p.trace, exp.policy, budget, settings)
            : await engine.live(p.model, exp.policy, budget, settings);
          ms.push(toMeasurement(o));
        } catch (e) {
          const m = failed(e);
          ms.push(m);
          failures.push(`${w.id} ${exp.policy}@${exp.ratio}: ${m.error}`);
        }
        progress.tick();
      }
      results.push(aggregate(exp, budget, ms));
    }
  }

  const timelines: TimelineJson[] = [];
  const chosen = options.skip.includes("plots")
    ? []
    : chooseTimelines(results, workloads.map((w) => w.id), options.policies, options.timelines);
  progress.grow(chosen.length);
  for (const c of chosen) {
    const p = prepared.get(c.workload)!;
    const peak = p.kind === "trace" ? p.trace.peakBytes : p.model.peakBytes;
    const budget = budgetBytes(peak, c.ratio);
    progress.start(`${c.workload} ${c.policy}@${c.ratio}: memory timeline`);
    try {
      const s = { ...settings, timeline: true };
      const o = p.kind === "trace"
        ? await engine.simulate(p.trace, c.policy, budget, s)
        : await engine.live(p.model, c.policy, budget, s);
      if (o.timeline) {
        timelines.push({
          ...c,
          budgetBytes: budget,
          points: downsample(o.timeline.points, 2000, (q) => q.bytes).map((q) => ({
            call: q.call,
            bytes: q.bytes,
          })),
          events: o.timeline.events.slice(0, 2000).map((e) => ({ call: e.call, kind: e.kind })),
        });
      } else {
        skipped.push({
          what: `timeline ${c.workload} ${c.policy}@${c.ratio}`,
          reason: "the engine returned no timeline",
        });
      }
    } catch (e) {
      skipped.push({ what: `timeline ${c.workload} ${c.policy}@${c.ratio}`, reason: oneLine(e) });
    }
    progress.tick();
  }

  const curveInput = results.map((r) => ({
    workload: r.workload,
    policy: r.policy,
    ratio: r.ratio,
    feasible: r.feasible,
    overhead: r.overhead?.median ?? null,
  }));
  return {
    workloads,
    results,
    summary: {
      policies: policySummaries(curveInput).map((s) => ({
        ...s,
        curve: s.curve.map((c) => ({ ...c })),
      })),
      best: bestPolicies(curveInput),
    },
    timelines,
    skipped,
    failures,
  };
}
