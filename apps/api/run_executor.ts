/**
 * The contract between the API's workers and whatever executes an experiment. The
 * API and the worker depend only on this interface; `executor.ts` holds the real
 * implementation on top of `@libra/runtime` and `@libra/nn`.
 *
 * @module
 */

import type { ConfigurationInput, InfeasibleReason } from "./schemas.ts";

/** Train a model for a few steps under a memory budget with a policy: a configuration without its name. */
export interface TrainSpec extends Omit<ConfigurationInput, "name" | "overheadLimit"> {
  /** Discriminant. */
  kind: "train";
  /** Thrash limit X of the budgeted run (absent in older runs: 2.0). */
  overheadLimit?: number;
}

/** Replay an uploaded DTR-format trace under several policies and ratios. */
export interface SimulateSpec {
  /** Discriminant. */
  kind: "simulate";
  /** Name the trace is shown under. */
  name: string;
  /** Policies to compare. */
  policies: string[];
  /** Budget ratios to sweep. */
  ratios: number[];
  /** Thrash limit X of the replays (absent in older runs: 2.0). */
  overheadLimit?: number;
}

/** What a run executes. */
export type RunSpec = TrainSpec | SimulateSpec;

/** A progress report while a run executes. */
export interface ProgressEvent {
  /** Phase (`baseline`, `train`, `simulate`, ...). */
  phase: string;
  /** Units done in this phase. */
  done: number;
  /** Units in this phase. */
  total: number;
  /** One human-readable line. */
  message: string;
  /** Device memory in use now, when known. */
  memoryBytes?: number;
}

/** An event on the memory timeline. */
export interface MemoryMarker {
  /** Position on the timeline (same unit as the samples' first element). */
  t: number;
  /** What happened. */
  kind: "evict" | "drop" | "swap-out" | "swap-in" | "remat";
  /** Bytes in use right after it. */
  bytes: number;
}

/** Memory over time of one run. */
export interface MemoryTimeline {
  /** The budget in bytes (drawn as a line). */
  budgetBytes: number;
  /** What `t` counts (`call` index or `ms`). */
  unit: string;
  /** `[t, bytes in use]`, in order of t. */
  samples: [number, number][];
  /** Evictions and re-materializations. */
  markers: MemoryMarker[];
}

/** One point of an overhead-versus-ratio curve. */
export interface CurvePoint {
  /** Policy. */
  policy: string;
  /** Budget ratio. */
  ratio: number;
  /** Whether the step completed at that budget. */
  feasible: boolean;
  /** Overhead (>= 1 in the simulator), null when infeasible. */
  overhead: number | null;
  /** Why it was infeasible, when it was (absent or null: not reported). */
  reason?: InfeasibleReason | null;
}

/** What an executed run produced. */
export interface RunResult {
  /** Whether the run completed under its budget. */
  feasible: boolean;
  /** Budget in bytes. */
  budgetBytes: number | null;
  /** Budget ratio (budget / budget-free peak). */
  budgetRatio: number | null;
  /** Peak of a budget-free run of the same step. */
  baselinePeakBytes: number | null;
  /** Peak reached under the budget. */
  peakBytes: number | null;
  /** Time under the budget over time without it; null when infeasible. */
  overhead: number | null;
  /** Named counters and timings (evictions, remats, swapBytes, bookkeepingMs, ...). */
  stats: Record<string, number>;
  /** Memory over time, when recorded. */
  memory: MemoryTimeline | null;
  /** Loss per step (and the budget-free losses, for comparison). */
  loss: { step: number; loss: number; baseline: number | null }[];
  /** Overhead-versus-ratio points this run contributes to comparisons. */
  points: CurvePoint[];
  /** The recorded trace (DTR format), when one was recorded. */
  trace: string | null;
  /** Why an infeasible run stopped, when it did. */
  note: string | null;
  /**
   * Why it was infeasible: `out of memory` or `thrashing` (null when feasible). For a
   * simulation with no feasible ratio, the reason at its largest ratio.
   */
  reason: InfeasibleReason | null;
}

/** Context given to an execution. */
export interface ExecuteContext {
  /** Aborted when the run is canceled or the worker stops. */
  signal: AbortSignal;
  /** Called with progress; cheap to call often (the worker throttles). */
  progress(event: ProgressEvent): void;
  /** For `simulate` runs: the uploaded trace text. */
  trace?: string;
}

/** Executes runs. */
export interface RunExecutor {
  /** Name shown in logs (`real`, `fake`, ...). */
  readonly name: string;
  /** Executes `spec`; rejects with an Error whose message says why the run failed. */
  execute(spec: RunSpec, ctx: ExecuteContext): Promise<RunResult>;
}
