/**
 * A test double of {@linkcode RunExecutor} for API lifecycle tests: it produces a
 * small, deterministic result computed from the spec (so tests can check that the
 * right numbers travel through the store), and can be told to wait or fail.
 *
 * Its overhead at ratio r is 1 + (1 - r) for training (1 + (1 - r) / 2 simulated); as
 * the runtime does, a run whose overhead would pass its thrash limit (`overheadLimit`,
 * default 2) is infeasible for `thrashing`, and one below its memory floor (simulated:
 * ratio 0.2; training: `oomBelow`) for `out of memory`.
 *
 * @module
 */

import type { CurvePoint, RunExecutor, RunResult, RunSpec } from "./run_executor.ts";

/** Options of the fake. */
export interface FakeExecutorOptions {
  /** Waits this long per step (ms), honouring the abort signal. */
  stepMs?: number;
  /** Fails runs whose policy is this name. */
  failPolicy?: string;
  /** Resolves only when this promise does (to hold a run in `running`). */
  gate?: Promise<void>;
  /** A training run below this ratio runs out of memory (default 0: never). */
  oomBelow?: number;
}

/** Peak memory the fake pretends a budget-free step takes. */
export const FAKE_PEAK = 1_000_000;

/** Creates the fake; `calls` lists the specs it executed. */
export function fakeExecutor(opts: FakeExecutorOptions = {}): RunExecutor & { calls: RunSpec[] } {
  const calls: RunSpec[] = [];
  return {
    name: "fake",
    calls,
    async execute(spec, ctx): Promise<RunResult> {
      calls.push(spec);
      if (opts.gate) await opts.gate;
      if (spec.kind === "simulate") {
        const points: CurvePoint[] = [];
        for (const policy of spec.policies) {
          for (const ratio of spec.ratios) {
            const overhead = 1 + (1 - ratio) / 2;
            const reason = ratio < 0.2
              ? "out of memory"
              : overhead > (spec.overheadLimit ?? 2)
              ? "thrashing"
              : null;
            points.push({
              policy,
              ratio,
              feasible: reason === null,
              overhead: reason === null ? overhead : null,
              reason,
            });
          }
        }
        ctx.progress({ phase: "simulate", done: 1, total: 1, message: "simulated" });
        const any = points.some((p) => p.feasible);
        const largest = points.reduce((a, p) => (a.ratio >= p.ratio ? a : p), points[0]!);
        return {
          feasible: any,
          budgetBytes: null,
          budgetRatio: null,
          baselinePeakBytes: FAKE_PEAK,
          peakBytes: FAKE_PEAK,
          overhead: null,
          stats: { calls: (ctx.trace ?? "").split("\n").filter((l) => l.trim()).length },
          memory: null,
          loss: [],
          points,
          trace: null,
          note: null,
          reason: any ? null : largest.reason ?? null,
        };
      }
      if (spec.policy === opts.failPolicy) {
        throw new Error(`fake failure for policy ${spec.policy}`);
      }
      const ratio = spec.budgetRatio ?? (spec.budgetBytes ?? FAKE_PEAK) / FAKE_PEAK;
      const budget = Math.round(ratio * FAKE_PEAK);
      const loss: RunResult["loss"] = [];
      for (let s = 0; s < spec.steps; s++) {
        if (opts.stepMs) {
          await new Promise((r) => setTimeout(r, opts.stepMs));
        }
        if (ctx.signal.aborted) throw new Error("aborted");
        const l = 2 / (s + 1 + spec.seed);
        loss.push({ step: s, loss: l, baseline: l });
        ctx.progress({
          phase: "train",
          done: s + 1,
          total: spec.steps,
          message: `step ${s + 1}/${spec.steps}`,
          memoryBytes: budget,
        });
      }
      const reason = ratio < (opts.oomBelow ?? 0)
        ? "out of memory"
        : 1 + (1 - ratio) > (spec.overheadLimit ?? 2)
        ? "thrashing"
        : null;
      if (reason !== null) {
        return {
          feasible: false,
          budgetBytes: budget,
          budgetRatio: ratio,
          baselinePeakBytes: FAKE_PEAK,
          peakBytes: null,
          overhead: null,
          stats: { evictions: spec.steps },
          memory: null,
          loss,
          points: [{ policy: spec.policy, ratio, feasible: false, overhead: null, reason }],
          trace: null,
          note: reason === "thrashing"
            ? `thrashing: overhead past the limit ${spec.overheadLimit ?? 2}`
            : `out of memory: ${budget} bytes are not enough`,
          reason,
        };
      }
      const overhead = 1 + (1 - ratio);
      return {
        feasible: true,
        budgetBytes: budget,
        budgetRatio: ratio,
        baselinePeakBytes: FAKE_PEAK,
        peakBytes: budget,
        overhead,
        stats: { evictions: spec.steps * 2, remats: spec.steps },
        memory: {
          budgetBytes: budget,
          unit: "call",
          samples: [[0, 0], [1, budget], [2, budget / 2]],
          markers: [{ t: 1, kind: "evict", bytes: budget / 2 }],
        },
        loss,
        points: [{ policy: spec.policy, ratio, feasible: true, overhead }],
        trace: '{"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}\n',
        note: null,
        reason: null,
      };
    },
  };
}
