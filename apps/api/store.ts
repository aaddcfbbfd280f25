/**
 * The lab's storage: configurations, runs, their results and comparison points, on
 * SQLite or PostgreSQL behind one class. Every statement is parameterized; every
 * multi-row write is one transaction, so what a call acknowledged survives a restart.
 *
 * @module
 */

import { type Db, openPostgres, openSqlite, type Row, type SqlValue } from "./db.ts";
import { migrate } from "./migrations.ts";
import { median } from "@libra/util/stats";
import type {
  BenchUpload,
  Configuration,
  ConfigurationInput,
  RunFilter,
  RunStatus,
} from "./schemas.ts";
import type {
  CurvePoint,
  MemoryTimeline,
  ProgressEvent,
  RunResult,
  RunSpec,
  SimulateSpec,
  TrainSpec,
} from "./run_executor.ts";

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
  /** Set when stored values of this row could not be read (they are null above): why. */
  corrupt?: string;
}

/** Stored results of a finished run. */
export interface RunResults {
  /** Counters and timings. */
  stats: Record<string, number>;
  /** Memory timeline. */
  memory: MemoryTimeline | null;
  /** Loss curve. */
  loss: RunResult["loss"];
  /** Comparison points. */
  points: CurvePoint[];
  /** Why an infeasible run stopped. */
  note: string | null;
  /** Whether a trace can be downloaded. */
  hasTrace: boolean;
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

/** Overhead-versus-ratio curves per policy for one model. */
export interface Comparison {
  /** Model. */
  model: string;
  /** Preset filter, when one was given. */
  preset: string | null;
  /** One entry per policy, sorted by name. */
  policies: {
    policy: string;
    /** Points sorted by decreasing ratio; overhead is the median of feasible measurements. */
    points: { ratio: number; feasible: boolean; overhead: number | null; n: number }[];
    /** Smallest ratio at which a measurement completed, or null if none did. */
    smallestFeasibleRatio: number | null;
  }[];
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
class RowReader {
  readonly problems: string[] = [];
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

function toConfiguration(r: Row): Configuration {
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
    createdAt: x.int("created_at") ?? 0,
    updatedAt: x.int("updated_at") ?? 0,
  };
  return x.problem ? { ...c, corrupt: x.problem } : c;
}

function toRun(r: Row): Run {
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
  };
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
function readBack<T extends { id: string; corrupt?: string }>(v: T): T {
  if (v.corrupt) throw new RangeError(`${v.id}: ${v.corrupt}; nothing was stored`);
  return v;
}

const RUN_COLUMNS =
  "id, kind, configuration_id, source_id, spec, model, preset, policy, status, created_at, " +
  "started_at, finished_at, worker_id, heartbeat_at, progress, error, feasible, budget_ratio, " +
  "budget_bytes, baseline_peak_bytes, peak_bytes, overhead";

/** Where to keep the data. */
export interface StoreOptions {
  /** PostgreSQL URL; when set, `path` is ignored. */
  url?: string | undefined;
  /** SQLite file (default `.libra/libra.db`); `:memory:` for a throw-away database. */
  path?: string | undefined;
  /**
   * Create the SQLite file and its folder when missing (default true). A worker passes
   * false: it joins an existing lab and never makes a new one.
   */
  create?: boolean;
}

/** Opens the store and applies pending migrations. */
export async function openStore(opts: StoreOptions = {}): Promise<Store> {
  let db: Db;
  if (opts.url) {
    db = await openPostgres(opts.url);
  } else {
    const path = opts.path ?? ".libra/libra.db";
    if (path !== ":memory:" && opts.create === false) {
      try {
        if (!(await Deno.stat(path)).isFile) throw new Error(`${path} is not a file`);
      } catch (e) {
        throw new Error(
          `no lab database at ${path} (${
            e instanceof Deno.errors.NotFound ? "no such file" : e instanceof Error ? e.message : e
          }); start the server first (deno task libra serve) or pass the --db it uses`,
          { cause: e },
        );
      }
    } else if (path !== ":memory:") {
      const dir = path.replace(/[^/]*$/, "");
      if (dir) await Deno.mkdir(dir, { recursive: true });
    }
    db = openSqlite(path);
  }
  try {
    await migrate(db);
  } catch (e) {
    await db.close();
    throw e;
  }
  return new Store(db);
}

/** Thrown by {@linkcode Store.createRunFromConfiguration} when its admission check refuses a run. */
export class RunRefusedError extends Error {
  /** Creates the error. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "RunRefusedError";
  }
}

/** Configurations, runs and results. */
export class Store {
  /** The database (exposed for tests and migrations). */
  readonly db: Db;
  /**
   * Checked before a training run is queued, by every caller (the API and the
   * dashboard alike); throws {@linkcode RunRefusedError} to refuse it. The lab sets it
   * to the memory estimate.
   */
  admit: ((spec: TrainSpec) => Promise<void>) | null = null;

  /** Wraps a migrated database; use {@linkcode openStore}. */
  constructor(db: Db) {
    this.db = db;
  }

  /** Closes the database. */
  close(): Promise<void> {
    return this.db.close();
  }

  // --- configurations -------------------------------------------------------

  /**
   * Stores a new configuration. The row is read back inside the transaction, so a
   * configuration that cannot be read back is never committed.
   */
  createConfiguration(input: ConfigurationInput): Promise<Configuration> {
    const now = Date.now();
    const c: Configuration = { ...input, id: newId("cfg"), createdAt: now, updatedAt: now };
    return this.db.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO configurations (id, name, model, preset, config, device, budget_ratio,
          budget_bytes, policy, cost_model, steps, seed, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          c.id,
          c.name,
          c.model,
          c.preset,
          c.config === null ? null : JSON.stringify(c.config),
          c.device,
          c.budgetRatio,
          c.budgetBytes,
          c.policy,
          c.costModel,
          c.steps,
          c.seed,
          c.createdAt,
          c.updatedAt,
        ],
      );
      const rows = await tx.all("SELECT * FROM configurations WHERE id = ?", [c.id]);
      return readBack(toConfiguration(rows[0]!));
    });
  }

  /** One configuration, or null. */
  async getConfiguration(id: string): Promise<Configuration | null> {
    const rows = await this.db.all("SELECT * FROM configurations WHERE id = ?", [id]);
    return rows[0] ? toConfiguration(rows[0]) : null;
  }

  /** Replaces a configuration's fields; null if it does not exist. */
  updateConfiguration(id: string, input: ConfigurationInput): Promise<Configuration | null> {
    const now = Date.now();
    return this.db.transaction(async (tx) => {
      const n = await tx.run(
        `UPDATE configurations SET name = ?, model = ?, preset = ?, config = ?, device = ?,
        budget_ratio = ?, budget_bytes = ?, policy = ?, cost_model = ?, steps = ?, seed = ?,
        updated_at = ? WHERE id = ?`,
        [
          input.name,
          input.model,
          input.preset,
          input.config === null ? null : JSON.stringify(input.config),
          input.device,
          input.budgetRatio,
          input.budgetBytes,
          input.policy,
          input.costModel,
          input.steps,
          input.seed,
          now,
          id,
        ],
      );
      if (n === 0) return null;
      const rows = await tx.all("SELECT * FROM configurations WHERE id = ?", [id]);
      return readBack(toConfiguration(rows[0]!));
    });
  }

  /** Deletes a configuration (its runs keep their snapshot); false if it did not exist. */
  deleteConfiguration(id: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.run("UPDATE runs SET configuration_id = NULL WHERE configuration_id = ?", [id]);
      return (await tx.run("DELETE FROM configurations WHERE id = ?", [id])) > 0;
    });
  }

  /** Configurations, newest first. */
  async listConfigurations(
    page: { limit: number; offset: number },
  ): Promise<Paged<Configuration>> {
    const [count] = await this.db.all("SELECT COUNT(*) AS n FROM configurations");
    const total = Number(count?.n ?? 0);
    const rows = await this.db.all(
      "SELECT * FROM configurations ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
      [page.limit, page.offset],
    );
    return paged(rows.map(toConfiguration), total, page);
  }

  // --- runs -----------------------------------------------------------------

  /** Queues a training run from a configuration (a snapshot of it); null if it does not exist. */
  async createRunFromConfiguration(configurationId: string): Promise<Run | null> {
    const c = await this.getConfiguration(configurationId);
    if (!c) return null;
    const spec = trainSpecOf(c);
    await this.admit?.(spec);
    return this.#insertRun({
      kind: "train",
      configurationId: c.id,
      spec,
      model: c.model,
      preset: c.preset,
      policy: c.policy,
      budgetRatio: c.budgetRatio,
      budgetBytes: c.budgetBytes,
    });
  }

  /** Queues a simulation of an uploaded trace. */
  createSimulation(spec: SimulateSpec, trace: string): Promise<Run> {
    return this.#insertRun({
      kind: "simulate",
      configurationId: null,
      spec,
      model: spec.name,
      preset: "trace",
      policy: spec.policies.join(","),
      budgetRatio: null,
      budgetBytes: null,
    }, trace);
  }

  async #insertRun(
    r: {
      kind: RunKind;
      configurationId: string | null;
      spec: RunSpec;
      model: string;
      preset: string;
      policy: string;
      budgetRatio: number | null;
      budgetBytes: number | null;
    },
    trace?: string,
  ): Promise<Run> {
    const id = newId("run");
    return await this.db.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO runs (id, kind, configuration_id, spec, model, preset, policy, status,
          created_at, budget_ratio, budget_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)`,
        [
          id,
          r.kind,
          r.configurationId,
          JSON.stringify(r.spec),
          r.model,
          r.preset,
          r.policy,
          Date.now(),
          r.budgetRatio,
          r.budgetBytes,
        ],
      );
      if (trace !== undefined) {
        await tx.run("INSERT INTO run_inputs (run_id, trace) VALUES (?, ?)", [id, trace]);
      }
      // read back before committing: a run that cannot be listed is never stored
      const rows = await tx.all(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`, [id]);
      return readBack(toRun(rows[0]!));
    });
  }

  /** Stores a bench upload; each measurement becomes a finished run. Returns the run ids. */
  ingestBench(upload: BenchUpload): Promise<{ uploadId: string; runIds: string[] }> {
    const uploadId = newId("bench");
    const created = upload.createdAt ? Date.parse(upload.createdAt) : Date.now();
    return this.db.transaction(async (tx) => {
      await tx.run(
        `INSERT INTO bench_uploads (id, created_at, suite, commit_sha, machine, result_count)
         VALUES (?, ?, ?, ?, ?, ?)`,
        [
          uploadId,
          created,
          upload.suite,
          upload.commit ?? null,
          JSON.stringify(upload.machine),
          upload.results.length,
        ],
      );
      const runIds: string[] = [];
      for (const r of upload.results) {
        const id = newId("run");
        runIds.push(id);
        const { losses, memory, ...measurement } = r;
        const spec = { ...measurement, suite: upload.suite, commit: upload.commit ?? null };
        await tx.run(
          `INSERT INTO runs (${RUN_COLUMNS}) VALUES
           (?, 'bench', NULL, ?, ?, ?, ?, ?, 'succeeded', ?, ?, ?, NULL, NULL, NULL, NULL, ?, ?, ?,
            ?, ?, ?)`,
          [
            id,
            uploadId,
            JSON.stringify(spec),
            r.model,
            r.preset,
            r.policy,
            created,
            created,
            created,
            r.feasible ? 1 : 0,
            r.ratio,
            r.budgetBytes ?? null,
            r.baselinePeakBytes ?? null,
            r.peakBytes ?? null,
            r.overhead,
          ],
        );
        const stats: Record<string, number> = {};
        for (
          const k of [
            "evictions",
            "remats",
            "swapBytes",
            "bookkeepingMs",
            "overheadMin",
            "overheadMax",
            "steps",
            "repeat",
          ] as const
        ) {
          const v = r[k];
          if (typeof v === "number") stats[k] = v;
        }
        const mem: MemoryTimeline | null = memory
          ? { budgetBytes: r.budgetBytes ?? 0, unit: "call", samples: memory, markers: [] }
          : null;
        const loss = (losses ?? []).map((l, i) => ({ step: i, loss: l, baseline: null }));
        await tx.run(
          "INSERT INTO run_results (run_id, stats, memory, loss, trace, note) VALUES (?, ?, ?, ?, NULL, NULL)",
          [id, JSON.stringify(stats), mem && JSON.stringify(mem), JSON.stringify(loss)],
        );
        await tx.run(
          `INSERT INTO run_points (run_id, model, preset, policy, source, ratio, feasible, overhead)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [id, r.model, r.preset, r.policy, r.kind, r.ratio, r.feasible ? 1 : 0, r.overhead],
        );
      }
      return { uploadId, runIds };
    });
  }

  /** One run, or null. */
  async getRun(id: string): Promise<Run | null> {
    const rows = await this.db.all(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`, [id]);
    return rows[0] ? toRun(rows[0]) : null;
  }

  /** Runs matching the filters, newest first. */
  async listRuns(f: RunFilter): Promise<Paged<Run>> {
    const where: string[] = [];
    const params: SqlValue[] = [];
    for (const [col, v] of [["model", f.model], ["status", f.status], ["kind", f.kind]] as const) {
      if (v !== undefined) {
        where.push(`${col} = ?`);
        params.push(v);
      }
    }
    if (f.policy !== undefined) {
      // simulations store their policies as a comma-separated list
      where.push("(policy = ? OR (kind = 'simulate' AND ',' || policy || ',' LIKE ?))");
      params.push(f.policy, `%,${f.policy},%`);
    }
    const w = where.length ? `WHERE ${where.join(" AND ")}` : "";
    const [count] = await this.db.all(`SELECT COUNT(*) AS n FROM runs ${w}`, params);
    const rows = await this.db.all(
      `SELECT ${RUN_COLUMNS} FROM runs ${w} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
      [...params, f.limit, f.offset],
    );
    return paged(rows.map(toRun), Number(count?.n ?? 0), f);
  }

  /** Distinct values seen in runs, for filter menus. */
  async runFacets(): Promise<{ models: string[]; policies: string[] }> {
    const models = await this.db.all("SELECT DISTINCT model FROM runs ORDER BY model");
    const policies = await this.db.all(
      "SELECT DISTINCT policy FROM runs WHERE kind <> 'simulate' ORDER BY policy",
    );
    return {
      models: models.map((r) => String(r.model)),
      policies: policies.map((r) => String(r.policy)),
    };
  }

  /**
   * Atomically moves the oldest queued run to `running` for `workerId`; null when none
   * is queued. Two workers never get the same run.
   */
  async claimNextRun(workerId: string): Promise<Run | null> {
    const now = Date.now();
    const pick = this.db.dialect === "postgres"
      ? "SELECT id FROM runs WHERE status = 'queued' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
      : "SELECT id FROM runs WHERE status = 'queued' ORDER BY created_at, id LIMIT 1";
    const rows = await this.db.all(
      `UPDATE runs SET status = 'running', worker_id = ?, started_at = ?, heartbeat_at = ?
       WHERE id = (${pick}) AND status = 'queued' RETURNING ${RUN_COLUMNS}`,
      [workerId, now, now],
    );
    return rows[0] ? toRun(rows[0]) : null;
  }

  /** The uploaded trace of a simulation run. */
  async getRunInput(id: string): Promise<string | null> {
    const rows = await this.db.all("SELECT trace FROM run_inputs WHERE run_id = ?", [id]);
    return rows[0] ? String(rows[0].trace) : null;
  }

  /**
   * Records a heartbeat (and the latest progress) of `workerId` on a run it holds.
   * Returns false when the run is no longer this worker's running run (canceled, or
   * reaped as stale): the worker should stop it.
   */
  async heartbeat(id: string, workerId: string, progress?: ProgressEvent): Promise<boolean> {
    const n = progress
      ? await this.db.run(
        "UPDATE runs SET heartbeat_at = ?, progress = ? WHERE id = ? AND worker_id = ? AND status = 'running'",
        [Date.now(), JSON.stringify(progress), id, workerId],
      )
      : await this.db.run(
        "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND worker_id = ? AND status = 'running'",
        [Date.now(), id, workerId],
      );
    return n > 0;
  }

  /**
   * Stores the results of a run held by `workerId` and marks it succeeded. Throws a
   * RangeError naming the value, and stores nothing, when a number of the result is not
   * what its column holds (a byte count beyond 2^53, an infinite overhead).
   */
  completeRun(id: string, workerId: string, result: RunResult): Promise<boolean> {
    checkResult(result);
    return this.db.transaction(async (tx) => {
      const n = await tx.run(
        `UPDATE runs SET status = 'succeeded', finished_at = ?, feasible = ?, budget_ratio = ?,
          budget_bytes = ?, baseline_peak_bytes = ?, peak_bytes = ?, overhead = ?
         WHERE id = ? AND worker_id = ? AND status = 'running'`,
        [
          Date.now(),
          result.feasible ? 1 : 0,
          result.budgetRatio,
          result.budgetBytes,
          result.baselinePeakBytes,
          result.peakBytes,
          result.overhead,
          id,
          workerId,
        ],
      );
      if (n === 0) return false;
      await tx.run(
        "INSERT INTO run_results (run_id, stats, memory, loss, trace, note) VALUES (?, ?, ?, ?, ?, ?)",
        [
          id,
          JSON.stringify(result.stats),
          result.memory && JSON.stringify(result.memory),
          JSON.stringify(result.loss),
          result.trace,
          result.note,
        ],
      );
      const run = (await tx.all("SELECT kind, model, preset FROM runs WHERE id = ?", [id]))[0]!;
      const source = run.kind === "simulate" ? "simulated" : "live";
      for (const p of result.points) {
        await tx.run(
          `INSERT INTO run_points (run_id, model, preset, policy, source, ratio, feasible, overhead)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            id,
            String(run.model),
            String(run.preset),
            p.policy,
            source,
            p.ratio,
            p.feasible ? 1 : 0,
            p.overhead,
          ],
        );
      }
      return true;
    });
  }

  /**
   * Deletes a run that has ended, with its inputs, results and comparison points, in
   * one transaction. `kind` restricts it (the trace routes delete simulations only).
   */
  deleteRun(id: string, kind?: RunKind): Promise<"deleted" | "not-found" | "active"> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.all("SELECT kind, status FROM runs WHERE id = ?", [id]);
      const r = rows[0];
      if (!r || (kind !== undefined && r.kind !== kind)) return "not-found";
      if (r.status === "queued" || r.status === "running") return "active";
      for (const t of ["run_points", "run_results", "run_inputs"]) {
        await tx.run(`DELETE FROM ${t} WHERE run_id = ?`, [id]);
      }
      await tx.run("DELETE FROM runs WHERE id = ?", [id]);
      return "deleted";
    });
  }

  /** Marks a run failed with the reason (only if it has not ended already). */
  async failRun(id: string, reason: string, workerId?: string): Promise<boolean> {
    const guard = workerId === undefined ? "" : " AND worker_id = ?";
    const params: SqlValue[] = [Date.now(), reason, id];
    if (workerId !== undefined) params.push(workerId);
    return (await this.db.run(
      `UPDATE runs SET status = 'failed', finished_at = ?, error = ?
       WHERE id = ? AND status IN ('queued', 'running')${guard}`,
      params,
    )) > 0;
  }

  /** Cancels a queued or running run; false if it had already ended. */
  async cancelRun(id: string): Promise<boolean> {
    return (await this.db.run(
      `UPDATE runs SET status = 'canceled', finished_at = ?, error = 'canceled by a user'
       WHERE id = ? AND status IN ('queued', 'running')`,
      [Date.now(), id],
    )) > 0;
  }

  /**
   * Marks failed every running run whose worker has not sent a heartbeat for `staleMs`,
   * with the reason. Returns the ids.
   */
  async reapStaleRuns(staleMs: number): Promise<string[]> {
    const now = Date.now();
    const rows = await this.db.all(
      `SELECT id, worker_id, heartbeat_at FROM runs WHERE status = 'running' AND heartbeat_at < ?`,
      [now - staleMs],
    );
    const reaped: string[] = [];
    for (const r of rows) {
      const last = Number(r.heartbeat_at);
      const reason = `worker ${r.worker_id} stopped sending heartbeats: the last came at ${
        new Date(last).toISOString()
      }, ${((now - last) / 1000).toFixed(1)} s ago (limit ${
        staleMs / 1000
      } s); the worker most likely died. Launch the run again.`;
      const n = await this.db.run(
        `UPDATE runs SET status = 'failed', finished_at = ?, error = ?
         WHERE id = ? AND status = 'running' AND heartbeat_at = ?`,
        [now, reason, String(r.id), last],
      );
      if (n > 0) reaped.push(String(r.id));
    }
    return reaped;
  }

  /** Results of a finished run, or null. */
  async getResults(id: string): Promise<RunResults | null> {
    const rows = await this.db.all(
      "SELECT stats, memory, loss, note, trace IS NOT NULL AS has_trace FROM run_results WHERE run_id = ?",
      [id],
    );
    const r = rows[0];
    if (!r) return null;
    const points = await this.db.all(
      "SELECT policy, ratio, feasible, overhead FROM run_points WHERE run_id = ? ORDER BY policy, ratio DESC",
      [id],
    );
    const x = new RowReader(r);
    return {
      stats: x.json<Record<string, number>>("stats") ?? {},
      memory: x.json<MemoryTimeline>("memory"),
      loss: x.json<RunResult["loss"]>("loss") ?? [],
      note: x.text("note"),
      hasTrace: r.has_trace === true || Number(r.has_trace) === 1,
      points: points.map((p) => {
        const y = new RowReader(p);
        return {
          policy: String(p.policy),
          ratio: y.real("ratio") ?? NaN,
          feasible: Number(p.feasible) === 1,
          overhead: y.real("overhead"),
        };
      }),
    };
  }

  /** The trace of a run: the one recorded, or for simulations the one uploaded. */
  async getTrace(id: string): Promise<string | null> {
    const rec = await this.db.all(
      "SELECT trace FROM run_results WHERE run_id = ? AND trace IS NOT NULL",
      [id],
    );
    if (rec[0]) return String(rec[0].trace);
    return this.getRunInput(id);
  }

  /** Models that have comparison points. */
  async comparableModels(): Promise<{ model: string; preset: string; points: number }[]> {
    const rows = await this.db.all(
      "SELECT model, preset, COUNT(*) AS n FROM run_points GROUP BY model, preset ORDER BY model, preset",
    );
    return rows.map((r) => ({
      model: String(r.model),
      preset: String(r.preset),
      points: Number(r.n),
    }));
  }

  /** Overhead-versus-ratio curves per policy for `model`. */
  async compare(
    q: { model: string; preset?: string | undefined; source?: string | undefined },
  ): Promise<Comparison> {
    const where = ["model = ?"];
    const params: SqlValue[] = [q.model];
    if (q.preset !== undefined) {
      where.push("preset = ?");
      params.push(q.preset);
    }
    if (q.source !== undefined) {
      where.push("source = ?");
      params.push(q.source);
    }
    const rows = await this.db.all(
      `SELECT policy, ratio, feasible, overhead FROM run_points WHERE ${where.join(" AND ")}`,
      params,
    );
    const byPolicy = new Map<string, Map<number, { feasible: boolean; overheads: number[] }>>();
    for (const r of rows) {
      const policy = String(r.policy);
      const ratio = Math.round(Number(r.ratio) * 1e6) / 1e6;
      const cells = byPolicy.get(policy) ?? new Map();
      byPolicy.set(policy, cells);
      const cell = cells.get(ratio) ?? { feasible: false, overheads: [] };
      cells.set(ratio, cell);
      if (Number(r.feasible) === 1) {
        cell.feasible = true;
        if (r.overhead !== null) cell.overheads.push(Number(r.overhead));
      }
    }
    const policies = [...byPolicy.keys()].sort().map((policy) => {
      const points = [...byPolicy.get(policy)!.entries()]
        .sort((a, b) => b[0] - a[0])
        .map(([ratio, c]) => ({
          ratio,
          feasible: c.feasible,
          overhead: c.overheads.length ? median(c.overheads) : null,
          n: c.overheads.length,
        }));
      const feasible = points.filter((p) => p.feasible).map((p) => p.ratio);
      return {
        policy,
        points,
        smallestFeasibleRatio: feasible.length ? Math.min(...feasible) : null,
      };
    });
    return { model: q.model, preset: q.preset ?? null, policies };
  }
}

function paged<T>(items: T[], total: number, page: { limit: number; offset: number }): Paged<T> {
  return {
    items,
    total,
    limit: page.limit,
    offset: page.offset,
    nextOffset: page.offset + items.length < total ? page.offset + items.length : null,
  };
}
