/**
 * The store's runs: queuing (from a configuration, or a trace simulation), listing,
 * and the lifecycle workers drive (claim, heartbeat, complete, fail, cancel, reap,
 * delete).
 *
 * @module
 */

import type { SqlValue } from "./db.ts";
import type { RunFilter } from "./schemas.ts";
import type { ProgressEvent, RunResult, RunSpec, SimulateSpec } from "./run_executor.ts";
import { ConfigurationStore } from "./store_configurations.ts";
import {
  checkResult,
  newId,
  type Paged,
  paged,
  readBack,
  type Run,
  RUN_COLUMNS,
  type RunKind,
  toRun,
  trainSpecOf,
} from "./store_rows.ts";

/** Configurations and runs (results and comparisons come on top: store_results.ts). */
export class RunStore extends ConfigurationStore {
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
          budget_bytes = ?, baseline_peak_bytes = ?, peak_bytes = ?, overhead = ?,
          infeasible_reason = ?
         WHERE id = ? AND worker_id = ? AND status = 'running'`,
        [
          Date.now(),
          result.feasible ? 1 : 0,
          result.budgetRatio,
          result.budgetBytes,
          result.baselinePeakBytes,
          result.peakBytes,
          result.overhead,
          result.feasible ? null : result.reason ?? null,
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
          `INSERT INTO run_points (run_id, model, preset, policy, source, ratio, feasible, overhead,
            reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            id,
            String(run.model),
            String(run.preset),
            p.policy,
            source,
            p.ratio,
            p.feasible ? 1 : 0,
            p.overhead,
            p.feasible ? null : p.reason ?? null,
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
}
