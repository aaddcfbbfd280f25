/**
 * The store's results: what finished runs produced (statistics, memory, loss, trace),
 * the comparison points behind Compare, and bench ingestion (each measurement a
 * finished run with its point).
 *
 * @module
 */

import type { SqlValue } from "./db.ts";
import { median } from "@libra/util/stats";
import type { BenchUpload, InfeasibleReason } from "./schemas.ts";
import type { CurvePoint, MemoryTimeline, RunResult } from "./run_executor.ts";
import { commonReason, newId, RowReader, RUN_COLUMNS } from "./store_rows.ts";
import { RunStore } from "./store_runs.ts";

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
    points: {
      ratio: number;
      feasible: boolean;
      overhead: number | null;
      /** Why the cell was infeasible (the most frequent reason of its runs); null when feasible. */
      reason: InfeasibleReason | null;
      n: number;
    }[];
    /** Smallest ratio at which a measurement completed, or null if none did. */
    smallestFeasibleRatio: number | null;
  }[];
}

/** Configurations, runs, and their results and comparisons. */
export class ResultStore extends RunStore {
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
            ?, ?, ?, ?)`,
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
            r.feasible ? null : r.reason ?? null,
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
          `INSERT INTO run_points (run_id, model, preset, policy, source, ratio, feasible, overhead,
            reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            id,
            r.model,
            r.preset,
            r.policy,
            r.kind,
            r.ratio,
            r.feasible ? 1 : 0,
            r.overhead,
            r.feasible ? null : r.reason ?? null,
          ],
        );
      }
      return { uploadId, runIds };
    });
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
      "SELECT policy, ratio, feasible, overhead, reason FROM run_points WHERE run_id = ? ORDER BY policy, ratio DESC",
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
          reason: y.reason("reason"),
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
      `SELECT policy, ratio, feasible, overhead, reason FROM run_points WHERE ${
        where.join(" AND ")
      }`,
      params,
    );
    type Cell = { feasible: boolean; overheads: number[]; reasons: (InfeasibleReason | null)[] };
    const byPolicy = new Map<string, Map<number, Cell>>();
    for (const r of rows) {
      const policy = String(r.policy);
      const ratio = Math.round(Number(r.ratio) * 1e6) / 1e6;
      const cells = byPolicy.get(policy) ?? new Map();
      byPolicy.set(policy, cells);
      const cell = cells.get(ratio) ?? { feasible: false, overheads: [], reasons: [] };
      cells.set(ratio, cell);
      if (Number(r.feasible) === 1) {
        cell.feasible = true;
        if (r.overhead !== null) cell.overheads.push(Number(r.overhead));
      } else cell.reasons.push(new RowReader(r).reason("reason"));
    }
    const policies = [...byPolicy.keys()].sort().map((policy) => {
      const points = [...byPolicy.get(policy)!.entries()]
        .sort((a, b) => b[0] - a[0])
        .map(([ratio, c]) => ({
          ratio,
          feasible: c.feasible,
          overhead: c.overheads.length ? median(c.overheads) : null,
          reason: c.feasible ? null : commonReason(c.reasons),
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
