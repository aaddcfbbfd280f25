/**
 * Named sweeps: models x presets x policies x budget ratios x repeats of training
 * runs, launched together and followed as one unit (progress by status), and the
 * unit Compare filters by. Also the filtered comparison (by sweep, steps, cost model,
 * device and date) with each cell's spread over its repeats.
 *
 * @module
 */

import { medianInterval } from "@libra/train/overhead-stats";
import { Hono } from "hono";
import { z } from "zod";
import type { TrainSpec } from "./run_executor.ts";
import { COST_MODELS, MODELS, presetsOf, TRAIN_POLICIES, unknownName } from "./catalog.ts";
import {
  DEFAULT_OVERHEAD_LIMIT,
  DEFAULT_RUN_STEPS,
  type InfeasibleReason,
  Name,
  OverheadLimit,
  PolicyName,
  type RunStatus,
  text,
} from "./schemas.ts";
import { badRequest, validate } from "./validate.ts";
import { newId, RunRefusedError, type Store } from "./store.ts";
import { commonReason, RowReader } from "./store_rows.ts";

/** What a sweep runs. */
export interface SweepInput {
  /** Display name. */
  name: string;
  /** Models of the zoo. */
  models: string[];
  /** Presets (each model with each). */
  presets: string[];
  /** Policies and planners. */
  policies: string[];
  /** Budget ratios, (0, 1]. */
  ratios: number[];
  /** Runs per cell (their spread shows as an interval). */
  repeats: number;
  /** Training steps per run. */
  steps: number;
  /** Device. */
  device: "cpu" | "cuda";
  /** Cost model. */
  costModel: string;
  /** Seed of every run (repeats measure timing noise on the same computation). */
  seed: number;
  /** Thrash limit X of every run (> 1, default 2.0). */
  overheadLimit: number;
}

/** Most runs one sweep may queue. */
export const MAX_SWEEP_RUNS = 500;

const list = <T extends z.ZodType>(item: T, max: number) =>
  z.array(item).min(1, "give at least one").max(max, `at most ${max}`);

/** Validates a sweep (`POST /api/sweeps`). */
export const SweepInput: z.ZodType<SweepInput> = z.object({
  name: text(100).pipe(z.string().trim().min(1, "must not be empty")),
  models: list(Name, 10),
  presets: list(Name, 5).default(["tiny"]),
  policies: list(PolicyName, 16),
  ratios: list(z.number().gt(0, "ratios must be > 0").lte(1, "ratios must be <= 1"), 20),
  repeats: z.number().int("must be an integer").min(1, "must be >= 1").max(10, "must be <= 10")
    .default(1),
  steps: z.number().int("must be an integer").min(1, "must be >= 1").max(10_000, "must be <= 10000")
    .default(DEFAULT_RUN_STEPS),
  device: z.enum(["cpu", "cuda"]).default("cpu"),
  costModel: Name.default("analytic"),
  seed: z.number().int().min(0).max(2 ** 31 - 1).default(0),
  overheadLimit: OverheadLimit.default(DEFAULT_OVERHEAD_LIMIT),
}).strict().superRefine((v, ctx) => {
  // the names the packages implement, as for a configuration (catalog.ts)
  const bad = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: "custom", path, message });
  v.models.forEach((m, i) => {
    if (!MODELS.includes(m)) bad(["models", i], unknownName("model", m, MODELS));
    else {
      v.presets.forEach((p, j) => {
        const presets = presetsOf(m);
        if (!presets.includes(p)) bad(["presets", j], unknownName(`preset of ${m}`, p, presets));
      });
    }
  });
  v.policies.forEach((p, i) => {
    if (!TRAIN_POLICIES.includes(p)) bad(["policies", i], unknownName("policy", p, TRAIN_POLICIES));
  });
  if (!COST_MODELS.includes(v.costModel)) {
    bad(["costModel"], unknownName("cost model", v.costModel, COST_MODELS));
  }
  const n = sweepSize(v);
  if (n > MAX_SWEEP_RUNS) {
    ctx.addIssue({
      code: "custom",
      path: ["repeats"],
      message:
        `${v.models.length} models x ${v.presets.length} presets x ${v.policies.length} policies x ${v.ratios.length} ratios x ${v.repeats} repeats = ${n} runs; at most ${MAX_SWEEP_RUNS}`,
    });
  }
});

/** Runs a sweep queues. */
export function sweepSize(
  v: Pick<SweepInput, "models" | "presets" | "policies" | "ratios" | "repeats">,
): number {
  return v.models.length * v.presets.length * v.policies.length * v.ratios.length * v.repeats;
}

/** A stored sweep with its progress. */
export interface Sweep {
  /** Identifier (`swp_...`). */
  id: string;
  /** Name. */
  name: string;
  /** What it runs. */
  spec: SweepInput;
  /** Creation time, ms since the epoch. */
  createdAt: number;
  /** Its runs by state, and in all. */
  progress: { total: number; ended: number } & Record<RunStatus, number>;
}

/**
 * One cell of a filtered comparison: the median overhead of its runs with the
 * order-statistics confidence interval of that median (`medianInterval` of
 * `@libra/train/overhead-stats`, the method of the live measurements; with few runs,
 * [lowest, highest] and the coverage it has).
 */
export interface ComparePoint {
  /** Budget ratio. */
  ratio: number;
  /** Whether some run fitted. */
  feasible: boolean;
  /** Median overhead of the feasible runs. */
  overhead: number | null;
  /** Why the cell was infeasible (the most frequent reason of its runs); null when feasible. */
  reason: InfeasibleReason | null;
  /** The interval of the median (at least 95 % coverage when there are enough runs). */
  low: number | null;
  high: number | null;
  /** Its coverage. */
  confidence: number | null;
  /** Feasible runs behind the median. */
  n: number;
  /** Runs in the cell (feasible or not). */
  runs: number;
}

/** Filters of a comparison beyond model and preset. */
export interface CompareFilter {
  model: string;
  preset?: string | undefined;
  sweep?: string | undefined;
  steps?: number | undefined;
  costModel?: string | undefined;
  device?: string | undefined;
  /** Runs created at or after (ms). */
  from?: number | undefined;
  /** Runs created before (ms). */
  to?: number | undefined;
  source?: "live" | "simulated" | undefined;
}

const STATUSES: RunStatus[] = ["queued", "running", "succeeded", "failed", "canceled"];

/** Sweeps in the store: create (queues the runs), read with progress, list, compare. */
export class Sweeps {
  /** Wraps `store` (its database holds the `sweeps` and `sweep_runs` tables). */
  constructor(readonly store: Store) {}

  /**
   * Stores the sweep and queues its runs in one transaction, after the store's
   * admission check (the lab's memory estimate) passed for each model and preset;
   * throws `RunRefusedError` (naming the model and preset) when it did not.
   */
  async create(input: SweepInput): Promise<Sweep> {
    for (const model of input.models) {
      for (const preset of input.presets) {
        await this.store.admit?.({
          kind: "train",
          model,
          preset,
          config: null,
          device: input.device,
          budgetRatio: 1,
          budgetBytes: null,
          policy: input.policies[0]!,
          costModel: input.costModel,
          steps: input.steps,
          seed: input.seed,
          overheadLimit: input.overheadLimit,
        }).catch((e) => {
          if (!(e instanceof RunRefusedError)) throw e;
          throw new RunRefusedError(`${model} ${preset}: ${e.message}`, { cause: e });
        });
      }
    }
    const id = newId("swp");
    const now = Date.now();
    await this.store.db.transaction(async (tx) => {
      await tx.run("INSERT INTO sweeps (id, name, spec, created_at) VALUES (?, ?, ?, ?)", [
        id,
        input.name,
        JSON.stringify(input),
        now,
      ]);
      let i = 0;
      for (const model of input.models) {
        for (const preset of input.presets) {
          for (const policy of input.policies) {
            for (const ratio of input.ratios) {
              for (let r = 0; r < input.repeats; r++) {
                const spec: TrainSpec & { sweep: string; repeat: number } = {
                  kind: "train",
                  model,
                  preset,
                  config: null,
                  device: input.device,
                  budgetRatio: ratio,
                  budgetBytes: null,
                  policy,
                  costModel: input.costModel,
                  steps: input.steps,
                  seed: input.seed,
                  overheadLimit: input.overheadLimit,
                  sweep: id,
                  repeat: r + 1,
                };
                const runId = newId("run");
                await tx.run(
                  `INSERT INTO runs (id, kind, configuration_id, spec, model, preset, policy, status,
                    created_at, budget_ratio, budget_bytes)
                   VALUES (?, 'train', NULL, ?, ?, ?, ?, 'queued', ?, ?, NULL)`,
                  [runId, JSON.stringify(spec), model, preset, policy, now + i++, ratio],
                );
                await tx.run("INSERT INTO sweep_runs (sweep_id, run_id) VALUES (?, ?)", [
                  id,
                  runId,
                ]);
              }
            }
          }
        }
      }
    });
    return (await this.get(id))!;
  }

  /** One sweep with its progress, or null. */
  async get(id: string): Promise<Sweep | null> {
    const rows = await this.store.db.all(
      "SELECT id, name, spec, created_at FROM sweeps WHERE id = ?",
      [id],
    );
    return rows[0] ? await this.#withProgress(rows[0]) : null;
  }

  /** Sweeps, newest first. */
  async list(limit = 50): Promise<Sweep[]> {
    const rows = await this.store.db.all(
      "SELECT id, name, spec, created_at FROM sweeps ORDER BY created_at DESC, id DESC LIMIT ?",
      [limit],
    );
    return Promise.all(rows.map((r) => this.#withProgress(r)));
  }

  /** The ids of a sweep's runs, in the order they were queued. */
  async runIds(id: string): Promise<string[]> {
    const rows = await this.store.db.all(
      `SELECT s.run_id FROM sweep_runs s JOIN runs r ON r.id = s.run_id
       WHERE s.sweep_id = ? ORDER BY r.created_at, r.id`,
      [id],
    );
    return rows.map((r) => String(r.run_id));
  }

  async #withProgress(r: Record<string, unknown>): Promise<Sweep> {
    const counts = await this.store.db.all(
      `SELECT r.status AS status, COUNT(*) AS n FROM sweep_runs s JOIN runs r ON r.id = s.run_id
       WHERE s.sweep_id = ? GROUP BY r.status`,
      [String(r.id)],
    );
    const progress = { total: 0, ended: 0 } as Sweep["progress"];
    for (const s of STATUSES) progress[s] = 0;
    for (const c of counts) {
      const n = Number(c.n);
      progress[c.status as RunStatus] = n;
      progress.total += n;
      if (!["queued", "running"].includes(String(c.status))) progress.ended += n;
    }
    return {
      id: String(r.id),
      name: String(r.name),
      spec: JSON.parse(String(r.spec)),
      createdAt: Number(r.created_at),
      progress,
    };
  }

  /**
   * Overhead against ratio per policy for `model`, from the runs that pass the
   * filters (a sweep, steps, cost model, device, dates), with each cell's spread.
   */
  async compare(f: CompareFilter): Promise<{ policy: string; points: ComparePoint[] }[]> {
    const where = ["p.model = ?"];
    const params: (string | number)[] = [f.model];
    if (f.preset !== undefined) (where.push("p.preset = ?"), params.push(f.preset));
    if (f.source !== undefined) (where.push("p.source = ?"), params.push(f.source));
    if (f.from !== undefined) (where.push("r.created_at >= ?"), params.push(f.from));
    if (f.to !== undefined) (where.push("r.created_at < ?"), params.push(f.to));
    if (f.sweep !== undefined) {
      where.push("p.run_id IN (SELECT run_id FROM sweep_runs WHERE sweep_id = ?)");
      params.push(f.sweep);
    }
    const rows = await this.store.db.all(
      `SELECT p.policy AS policy, p.ratio AS ratio, p.feasible AS feasible, p.overhead AS overhead,
        p.reason AS reason, r.spec AS spec FROM run_points p JOIN runs r ON r.id = p.run_id
       WHERE ${where.join(" AND ")}`,
      params,
    );
    type Cell = { ok: number[]; runs: number; reasons: (InfeasibleReason | null)[] };
    const cells = new Map<string, Map<number, Cell>>();
    for (const row of rows) {
      const spec = JSON.parse(String(row.spec)) as Record<string, unknown>;
      if (f.steps !== undefined && spec.steps !== f.steps) continue;
      if (f.costModel !== undefined && (spec.costModel ?? "measured") !== f.costModel) continue;
      if (f.device !== undefined && (spec.device ?? "cpu") !== f.device) continue;
      const policy = String(row.policy);
      const ratio = Math.round(Number(row.ratio) * 1e6) / 1e6;
      const byRatio = cells.get(policy) ?? new Map();
      cells.set(policy, byRatio);
      const c = byRatio.get(ratio) ?? { ok: [], runs: 0, reasons: [] };
      byRatio.set(ratio, c);
      c.runs++;
      if (Number(row.feasible) === 1 && row.overhead !== null) c.ok.push(Number(row.overhead));
      else if (Number(row.feasible) !== 1) c.reasons.push(new RowReader(row).reason("reason"));
    }
    return [...cells.keys()].sort().map((policy) => ({
      policy,
      points: [...cells.get(policy)!.entries()].sort((a, b) => b[0] - a[0]).map(([ratio, c]) => {
        const m = c.ok.length ? medianInterval(c.ok) : null;
        return {
          ratio,
          feasible: c.ok.length > 0,
          overhead: m ? m.median : null,
          reason: c.ok.length > 0 ? null : commonReason(c.reasons),
          low: m ? m.low : null,
          high: m ? m.high : null,
          confidence: m && c.ok.length > 1 ? m.confidence : null,
          n: c.ok.length,
          runs: c.runs,
        };
      }),
    }));
  }
}

/** The sweeps sub-app (mount at `/sweeps`): `POST|GET /`, `GET /:id` (with its run ids). */
export function sweepsApp(store: Store, onQueued?: () => void): Hono {
  const sweeps = new Sweeps(store);
  const app = new Hono();
  app.get("/", async (c) => c.json({ items: await sweeps.list() }));
  app.post("/", validate("json", SweepInput), async (c) => {
    let sweep;
    try {
      sweep = await sweeps.create(c.req.valid("json"));
    } catch (e) {
      if (!(e instanceof RunRefusedError)) throw e;
      return badRequest(c, [{ field: "models", reason: e.message }]);
    }
    onQueued?.();
    return c.json(sweep, 201, { Location: `/api/sweeps/${sweep.id}` });
  });
  app.get("/:id", async (c) => {
    const s = await sweeps.get(c.req.param("id"));
    if (!s) return c.json({ error: `sweep ${JSON.stringify(c.req.param("id"))} not found` }, 404);
    return c.json({ ...s, runIds: await sweeps.runIds(s.id) });
  });
  return app;
}
