/**
 * The seam between the suite and the packages it measures. The runner only
 * talks to an {@link Engine}; `_libra_engine.ts` implements it on top of
 * `@libra/runtime`, `@libra/evict`, `@libra/nn` and `@libra/native`, and the
 * tests drive the runner with a small deterministic engine of their own.
 *
 * @module
 */

import type { Backend } from "@libra/tensor/backend";

/** Why an infeasible run stopped (see {@linkcode Outcome.reason}). */
export const INFEASIBLE_KINDS = ["out of memory", "thrashing", "time limit", "failed"] as const;
/** One of {@linkcode INFEASIBLE_KINDS}. */
export type InfeasibleKind = typeof INFEASIBLE_KINDS[number];

/** Memory in use after one kernel call. */
export interface TimelinePoint {
  readonly call: number;
  readonly bytes: number;
}

/** An eviction or re-materialization marker on a timeline. */
export interface TimelineEvent {
  readonly call: number;
  readonly kind: string;
}

/** What one run of one experiment produced. */
export interface Outcome {
  readonly feasible: boolean;
  /** Null when infeasible. Live: the median of the interleaved pairs' step-time ratios. */
  readonly overhead: number | null;
  /** Live: the 95% interval of that median (order statistics of the pairs' ratios). */
  readonly overheadLow?: number;
  readonly overheadHigh?: number;
  /** Live: the same median in process CPU time. */
  readonly cpuOverhead?: number;
  /** Live: what the runtime's counters account for (recompute, bookkeeping, swap stalls). */
  readonly accountedOverhead?: number;
  readonly evictions: number;
  readonly remats: number;
  readonly swapBytes: number;
  readonly bookkeepingMs: number;
  readonly peakBytes: number;
  /** Live runs: wall time under the budget and of the paired budget-free run (ms). */
  readonly timeMs: number | null;
  readonly baselineTimeMs: number | null;
  readonly error: string | null;
  /**
   * Why an infeasible run stopped: the runtime's reason (`out of memory`,
   * `thrashing`: past the thrash limit), `time limit` (past --time-limit) or
   * `failed` (an error); absent when feasible.
   */
  readonly reason?: InfeasibleKind;
  /** Present when the run was asked to record its memory timeline. */
  readonly timeline?: {
    readonly points: readonly TimelinePoint[];
    readonly events: readonly TimelineEvent[];
  };
}

/** A trace ready to be replayed: imported from a file or recorded from a live step. */
export interface PreparedTrace {
  /** Peak bytes of a budget-free replay. */
  readonly peakBytes: number;
  /** Total compute time of its calls, in ns. */
  readonly computeNs: number;
  /** Number of kernel calls. */
  readonly calls: number;
  /** Engine-private data (the parsed trace). */
  readonly handle: unknown;
}

/** A model ready to train live. */
export interface PreparedModel {
  /** Peak bytes of a budget-free run of the steps. */
  readonly peakBytes: number;
  /** Engine-private data. */
  readonly handle: unknown;
}

/** Settings every engine call receives. */
export interface RunSettings {
  readonly seed: number;
  readonly steps: number;
  readonly device: "cpu" | "cuda";
  /** Cost model of live runs and of replays of recorded steps. */
  readonly costModel: "measured" | "analytic";
  /** Wall-clock limit of one budgeted run or replay (ms). */
  readonly timeLimitMs: number;
  /** Record the memory timeline of this run. */
  readonly timeline: boolean;
  /** Thrash limit of budgeted runs and replays (default 2.0): past it, infeasible ("thrashing"). */
  readonly overheadLimit?: number;
}

/** Name and version of the device the live runs use. */
export interface DeviceInfo {
  readonly kind: string;
  readonly name: string;
}

/** What the micro-benchmarks need; each returns a reason string when unavailable. */
export interface MicroDeps {
  /** A fresh backend with data (cpu, or cuda with `--device cuda`). */
  backend(): Backend | string;
  /** A runtime wrapping `backend` with no budget limit. */
  unlimitedRuntime(backend: Backend): Backend | string;
  /**
   * A runtime wrapping `backend` under `budgetBytes`, its victims chosen by
   * `choice`: `"dtr-eq"` from a sample of ceil(sqrt(n)) of its n evictable
   * storages, `"oldest-first"` the oldest evictable storage (a choice costing
   * nothing: `OLDEST_FIRST` of `@libra/runtime/dispatch-stream`).
   */
  evictingRuntime(
    backend: Backend,
    budgetBytes: number,
    choice: EvictingChoice,
  ): EvictingRuntime | string;
}

/** How an {@link MicroDeps.evictingRuntime} chooses its victims. */
export type EvictingChoice = "dtr-eq" | "oldest-first";

/** A runtime under a budget, with what its statistics say of its policy's searches. */
export interface EvictingRuntime {
  /** The runtime, as the backend the stream calls. */
  readonly backend: Backend;
  /** Time in the policy's searches so far, ns (as the runtime counts it: a timed sample, weighted). */
  searchNs(): number;
  /** Kernel calls so far. */
  calls(): number;
}

/** What the suite needs from the packages it measures. */
export interface Engine {
  /** Dependencies of the micro-benchmarks. */
  microDeps(settings: RunSettings): MicroDeps;
  /** Policies the engine can run. */
  policies(): readonly string[];
  /** Models the engine can train live (empty when live runs are unavailable). */
  models(): readonly string[];
  /** Presets of a model (empty when unknown). */
  presets(model: string): readonly string[];
  /** Null when live runs are available, otherwise why not (one line). */
  liveUnavailable(settings: RunSettings): string | null;
  /** Null when live runs can use `policy`, otherwise why not (one line). */
  liveUnsupported(policy: string): string | null;
  /** Null when the simulator is available, otherwise why not. */
  simulateUnavailable(): string | null;
  /** Device of the live runs. */
  device(settings: RunSettings): DeviceInfo;

  /** Imports a trace file (DTR format). */
  importTrace(path: string): Promise<PreparedTrace>;
  /** Records one live training step of a model as a trace. */
  recordTrace(model: string, preset: string, settings: RunSettings): Promise<PreparedTrace>;
  /** Replays a trace under a policy at `budgetBytes` on the meta backend. */
  simulate(
    trace: PreparedTrace,
    policy: string,
    budgetBytes: number,
    settings: RunSettings,
  ): Promise<Outcome>;

  /** Builds a model and measures its budget-free peak over `settings.steps` steps. */
  prepareModel(model: string, preset: string, settings: RunSettings): Promise<PreparedModel>;
  /** Times the budget-free steps alone (ms). */
  baseline(model: PreparedModel, settings: RunSettings): Promise<number>;
  /**
   * Trains `settings.steps` steps under a policy at `budgetBytes`, paired
   * with a budget-free run of the same steps in the same process.
   */
  live(
    model: PreparedModel,
    policy: string,
    budgetBytes: number,
    settings: RunSettings,
  ): Promise<Outcome>;
}
