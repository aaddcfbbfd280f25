/**
 * The one schema of the lab database, as versioned migrations applied in order at
 * start. The SQL is portable between SQLite and PostgreSQL (BIGINT for times in ms,
 * DOUBLE PRECISION for ratios, TEXT for JSON). Never edit an applied migration; add one.
 *
 * @module
 */

import type { Db } from "./db.ts";

/** One schema change. */
export interface Migration {
  /** Version; migrations apply in increasing order. */
  version: number;
  /** What it does. */
  name: string;
  /** Statements, run in one transaction. */
  statements: string[];
}

/** All migrations, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "configurations, runs, results, points, bench uploads",
    statements: [
      `CREATE TABLE configurations (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, model TEXT NOT NULL, preset TEXT NOT NULL,
        config TEXT, device TEXT NOT NULL, budget_ratio DOUBLE PRECISION, budget_bytes BIGINT,
        policy TEXT NOT NULL, cost_model TEXT NOT NULL, steps INTEGER NOT NULL,
        seed BIGINT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)`,
      `CREATE INDEX configurations_created ON configurations (created_at, id)`,
      `CREATE TABLE runs (
        id TEXT PRIMARY KEY, kind TEXT NOT NULL, configuration_id TEXT, source_id TEXT,
        spec TEXT NOT NULL, model TEXT NOT NULL, preset TEXT NOT NULL, policy TEXT NOT NULL,
        status TEXT NOT NULL, created_at BIGINT NOT NULL, started_at BIGINT,
        finished_at BIGINT, worker_id TEXT, heartbeat_at BIGINT, progress TEXT, error TEXT,
        feasible INTEGER, budget_ratio DOUBLE PRECISION, budget_bytes BIGINT,
        baseline_peak_bytes BIGINT, peak_bytes BIGINT, overhead DOUBLE PRECISION)`,
      `CREATE INDEX runs_created ON runs (created_at, id)`,
      `CREATE INDEX runs_status ON runs (status, created_at)`,
      `CREATE TABLE run_inputs (run_id TEXT PRIMARY KEY, trace TEXT NOT NULL)`,
      `CREATE TABLE run_results (
        run_id TEXT PRIMARY KEY, stats TEXT NOT NULL, memory TEXT, loss TEXT,
        trace TEXT, note TEXT)`,
      `CREATE TABLE run_points (
        run_id TEXT NOT NULL, model TEXT NOT NULL, preset TEXT NOT NULL, policy TEXT NOT NULL,
        source TEXT NOT NULL, ratio DOUBLE PRECISION NOT NULL, feasible INTEGER NOT NULL,
        overhead DOUBLE PRECISION)`,
      `CREATE INDEX run_points_model ON run_points (model, preset, policy, ratio)`,
      `CREATE INDEX run_points_run ON run_points (run_id)`,
      `CREATE TABLE bench_uploads (
        id TEXT PRIMARY KEY, created_at BIGINT NOT NULL, suite TEXT NOT NULL,
        commit_sha TEXT, machine TEXT NOT NULL, result_count INTEGER NOT NULL)`,
    ],
  },
  {
    // numbered apart from the others' next migrations (2, 3, ...): order is by version
    version: 20,
    name: "sweeps and their runs",
    statements: [
      `CREATE TABLE sweeps (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, created_at BIGINT NOT NULL)`,
      `CREATE INDEX sweeps_created ON sweeps (created_at, id)`,
      `CREATE TABLE sweep_runs (
        sweep_id TEXT NOT NULL, run_id TEXT NOT NULL, PRIMARY KEY (sweep_id, run_id))`,
      `CREATE INDEX sweep_runs_run ON sweep_runs (run_id)`,
    ],
  },
  {
    version: 21,
    name: "thrash limit of configurations; why runs and points were infeasible",
    statements: [
      // null on older rows: the default limit (2.0), and no reason recorded
      `ALTER TABLE configurations ADD COLUMN overhead_limit DOUBLE PRECISION`,
      `ALTER TABLE runs ADD COLUMN infeasible_reason TEXT`,
      `ALTER TABLE run_points ADD COLUMN reason TEXT`,
    ],
  },
];

/** Applies every migration newer than the database's version; returns the versions applied. */
export async function migrate(db: Db): Promise<number[]> {
  await db.run(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
  );
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    const done = await db.transaction(async (tx) => {
      // Two processes starting at once: PostgreSQL serializes on an advisory lock,
      // SQLite on BEGIN IMMEDIATE; the loser sees the version already there.
      if (tx.dialect === "postgres") await tx.all("SELECT pg_advisory_xact_lock(5160)");
      const rows = await tx.all("SELECT version FROM schema_migrations WHERE version = ?", [
        m.version,
      ]);
      if (rows.length > 0) return false;
      for (const s of m.statements) await tx.run(s);
      await tx.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", [
        m.version,
        m.name,
        Date.now(),
      ]);
      return true;
    });
    if (done) applied.push(m.version);
  }
  return applied;
}
