/**
 * Row decoding and the shapes shared by the store's modules: a run and a page as the
 * API returns them, identifiers, and the per-row reader that turns a stored value that
 * is not what its column holds into null plus a `corrupt` note instead of failing a
 * listing.
 *
 * @module
 */

import type { Row } from "./db.ts";
import {
  type Configuration,
  DEFAULT_OVERHEAD_LIMIT,
  INFEASIBLE_REASONS,
  type InfeasibleReason,
  type RunStatus,
} from "./schemas.ts";
import type { ProgressEvent, RunResult, RunSpec, TrainSpec } from "./run_executor.ts";

/** Kinds of run. */
export type RunKind = "train" | "simulate" | "bench";

/** A run as stored. */
export interface Run {
  /** Identifier (`run_...`). */
  id: string;
  /** What produced it. */
  kind: RunKind;
  /** The configuration it was launched from, if it still exists. */
  configurationId: string | null;
  /** The bench upload it came from, for bench runs. */
  sourceId: string | null;
  /** What was executed (a snapshot taken at launch), or the bench measurement. */
  spec: RunSpec | Record<string, unknown>;
  /** Model (or trace name for simulations). */
  model: string;
  /** Preset (`trace` for simulations). */
  preset: string;
  /** Policy (comma-separated list for simulations). */
  policy: string;
  /** State. */
  status: RunStatus;
  /** Times in ms since the epoch. */
  createdAt: number;
  /** When a worker claimed it. */
  startedAt: number | null;
  /** When it ended. */
  finishedAt: number | null;
  /** Worker that claimed it. */
  workerId: string | null;
  /** Last heartbeat of that worker for this run. */
  heartbeatAt: number | null;
  /** Latest progress. */
  progress: ProgressEvent | null;
  /** Why it failed. */
  error: string | null;
  /** Whether it completed under its budget (null until it ends). */
  feasible: boolean | null;
  /** Budget ratio. */
  budgetRatio: number | null;
  /** Budget in bytes. */
  budgetBytes: number | null;
  /** Budget-free peak. */
  baselinePeakBytes: number | null;
  /** Peak under the budget. */
  peakBytes: number | null;
  /** Overhead. */
  overhead: number | null;
  /** Why it was infeasible (`out of memory`, `thrashing`); null when feasible or not recorded. */
  reason: InfeasibleReason | null;
  /** Set when stored values of this row could not be read (they are null above): why. */
  corrupt?: string;
}

/** One page of a list. */
export interface Paged<T> {
  /** The items. */
  items: T[];
  /** Items matching the filters, in all pages. */
  total: number;
  /** Page size used. */
  limit: number;
  /** Offset used. */
  offset: number;
  /** Offset of the next page, or null on the last. */
  nextOffset: number | null;
}

let counter = 0;
/** A sortable identifier: prefix, time in base 36, a counter and randomness. */
export function newId(prefix: string): string {
  const t = Date.now().toString(36).padStart(9, "0");
  const c = (counter++ % 1296).toString(36).padStart(2, "0");
  const r = crypto.getRandomValues(new Uint8Array(4));
  return `${prefix}_${t}${c}${[...r].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/**
 * Reads stored values one row at a time: a value that is not what its column should
 * hold (an integer beyond 2^53, text that is not JSON) becomes null and is described in
 * `problems`, so that one bad row never fails a listing.
 */
export class RowReader {
  /** What could not be read so far. */
  readonly problems: string[] = [];
  /** Reads `row`. */
  constructor(readonly row: Row) {}
  /** An integer column: a safe integer, or null (and a problem) when it is not one. */
  int(col: string): number | null {
    const v = this.row[col];
    if (v === null || v === undefined) return null;
    const n = typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
    if (typeof n === "number" && Number.isSafeInteger(n)) return n;
    this.problems.push(`${col} = ${String(v)} is not a safe integer (beyond 2^53)`);
    return null;
  }
  /** A floating-point column: a finite number, or null (and a problem). */
  real(col: string): number | null {
    const v = this.row[col];
    if (v === null || v === undefined) return null;
    const n = typeof v === "bigint" ? Number(v) : Number(v);
    if (Number.isFinite(n)) return n;
    this.problems.push(`${col} = ${String(v)} is not a finite number`);
    return null;
  }
  /** A JSON column: the parsed value, or null (and a problem). */
  json<T>(col: string): T | null {
    const v = this.row[col];
    if (typeof v !== "string") return null;
    try {
      return JSON.parse(v) as T;
    } catch (e) {
      this.problems.push(`${col} is not valid JSON (${e instanceof Error ? e.message : e})`);
      return null;
    }
  }
  /** An infeasibility reason column: one of the reasons, or null (and a problem). */
  reason(col: string): InfeasibleReason | null {
    const v = this.text(col);
    if (v === null) return null;
    if ((INFEASIBLE_REASONS as readonly string[]).includes(v)) return v as InfeasibleReason;
    this.problems.push(
      `${col} = ${JSON.stringify(v)} is not a reason (${INFEASIBLE_REASONS.join(", ")})`,
    );
    return null;
  }
  /** A text column, or null. */
  text(col: string): string | null {
    const v = this.row[col];
    return v === null || v === undefined ? null : String(v);
  }
  /** What could not be read, or null. */
  get problem(): string | null {
    return this.problems.length
      ? `stored values could not be read: ${this.problems.join("; ")}`
      : null;
  }
}

/** A configuration row as the API returns it (unreadable values null, with `corrupt`). */
export function toConfiguration(r: Row): Configuration {
  const x = new RowReader(r);
  const c: Configuration = {
    id: String(r.id),
    name: String(r.name),
    model: String(r.model),
    preset: String(r.preset),
    config: x.json<Record<string, unknown>>("config"),
    device: r.device as "cpu" | "cuda",
    budgetRatio: x.real("budget_ratio"),
    budgetBytes: x.int("budget_bytes"),
    policy: String(r.policy),
    costModel: String(r.cost_model),
    steps: x.int("steps") ?? 0,
    seed: x.int("seed") ?? 0,
    overheadLimit: x.real("overhead_limit") ?? DEFAULT_OVERHEAD_LIMIT,
    createdAt: x.int("created_at") ?? 0,
    updatedAt: x.int("updated_at") ?? 0,
  };
  return x.problem ? { ...c, corrupt: x.problem } : c;
}

/** A run row as the API returns it (unreadable values null, with `corrupt`). */
export function toRun(r: Row): Run {
  const x = new RowReader(r);
  const run: Run = {
    id: String(r.id),
    kind: r.kind as RunKind,
    configurationId: x.text("configuration_id"),
    sourceId: x.text("source_id"),
    spec: x.json<RunSpec>("spec") ?? {},
    model: String(r.model),
    preset: String(r.preset),
    policy: String(r.policy),
    status: r.status as RunStatus,
    createdAt: x.int("created_at") ?? 0,
    startedAt: x.int("started_at"),
    finishedAt: x.int("finished_at"),
    workerId: x.text("worker_id"),
    heartbeatAt: x.int("heartbeat_at"),
    progress: x.json<ProgressEvent>("progress"),
    error: x.text("error"),
    feasible: r.feasible === null ? null : Number(r.feasible) === 1,
    budgetRatio: x.real("budget_ratio"),
    budgetBytes: x.int("budget_bytes"),
    baselinePeakBytes: x.int("baseline_peak_bytes"),
    peakBytes: x.int("peak_bytes"),
    overhead: x.real("overhead"),
    reason: x.reason("infeasible_reason"),
  };
  return x.problem ? { ...run, corrupt: x.problem } : run;
}

/** What a training run of configuration `c` executes. */
export function trainSpecOf(c: Configuration): TrainSpec {
  return {
    kind: "train",
    model: c.model,
    preset: c.preset,
    config: c.config,
    device: c.device,
    budgetRatio: c.budgetRatio,
    budgetBytes: c.budgetBytes,
    policy: c.policy,
    costModel: c.costModel,
    steps: c.steps,
    seed: c.seed,
    overheadLimit: c.overheadLimit,
  };
}

/**
 * The reason of a cell of measurements that were all infeasible: the most frequent
 * reported reason (`thrashing` on a tie), or null when none was reported.
 */
export function commonReason(
  reasons: readonly (InfeasibleReason | null)[],
): InfeasibleReason | null {
  let oom = 0, thrash = 0;
  for (const r of reasons) {
    if (r === "out of memory") oom++;
    else if (r === "thrashing") thrash++;
  }
  return oom + thrash === 0 ? null : thrash >= oom ? "thrashing" : "out of memory";
}

/** Checks the numbers of a run's result against what the columns hold. */
export function checkResult(r: RunResult): void {
  const bad: string[] = [];
  const bytes = (name: string, v: number | null) => {
    if (v !== null && !(Number.isSafeInteger(v) && v >= 0)) {
      bad.push(`${name} = ${v} is not a byte count (a safe integer >= 0, at most 2^53 - 1)`);
    }
  };
  const real = (name: string, v: number | null) => {
    if (v !== null && !Number.isFinite(v)) bad.push(`${name} = ${v} is not a finite number`);
  };
  bytes("budgetBytes", r.budgetBytes);
  bytes("baselinePeakBytes", r.baselinePeakBytes);
  bytes("peakBytes", r.peakBytes);
  real("budgetRatio", r.budgetRatio);
  real("overhead", r.overhead);
  for (const [i, p] of r.points.entries()) {
    real(`points[${i}].ratio`, p.ratio);
    real(`points[${i}].overhead`, p.overhead);
  }
  for (const [k, v] of Object.entries(r.stats)) real(`stats.${k}`, v);
  if (bad.length) {
    throw new RangeError(`the run's result cannot be stored: ${bad.slice(0, 5).join("; ")}`);
  }
}

/** Throws (rolling the transaction back) when a row just written cannot be read back. */
export function readBack<T extends { id: string; corrupt?: string }>(v: T): T {
  if (v.corrupt) throw new RangeError(`${v.id}: ${v.corrupt}; nothing was stored`);
  return v;
}

/** The columns of a run, in the order `INSERT INTO runs (${RUN_COLUMNS})` takes them. */
export const RUN_COLUMNS: string =
  "id, kind, configuration_id, source_id, spec, model, preset, policy, status, created_at, " +
  "started_at, finished_at, worker_id, heartbeat_at, progress, error, feasible, budget_ratio, " +
  "budget_bytes, baseline_peak_bytes, peak_bytes, overhead, infeasible_reason";

/** A page of `items` out of `total`. */
export function paged<T>(
  items: T[],
  total: number,
  page: { limit: number; offset: number },
): Paged<T> {
  return {
    items,
    total,
    limit: page.limit,
    offset: page.offset,
    nextOffset: page.offset + items.length < total ? page.offset + items.length : null,
  };
}
