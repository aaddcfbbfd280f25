/**
 * Opens everything the lab server needs — store (migrated), tokens, API app, and the
 * in-process worker — from one options object, with defaults from the environment.
 *
 * @module
 */

import type { Hono } from "hono";
import { createApi } from "./app.ts";
import { type BodyLimits, DEFAULT_LIMITS } from "./body.ts";
import {
  admitByEstimate,
  DEFAULT_MAX_RUN_BYTES,
  type Estimator,
  threadEstimator,
} from "./estimate.ts";
import { type AuthConfig, loadAuth } from "./auth.ts";
import { realExecutor } from "./executor.ts";
import type { RunExecutor } from "./run_executor.ts";
import { openStore, type Store } from "./store.ts";
import { RunWorker, type WorkerOptions } from "./worker.ts";

/** Where the data lives and how runs execute. */
export interface LabOptions {
  /** Folder for the default SQLite file and the generated token (default `.libra`). */
  dataDir?: string;
  /** SQLite file (default `<dataDir>/libra.db`). */
  dbPath?: string;
  /** PostgreSQL URL (default `LIBRA_DATABASE_URL`); overrides `dbPath`. */
  databaseUrl?: string;
  /** Write token (default `LIBRA_API_TOKEN`, else saved/generated under `dataDir`). */
  token?: string;
  /** Read token (default `LIBRA_API_READ_TOKEN`; unset = open reads). */
  readToken?: string | null;
  /** Executes runs (default: the real executor). */
  executor?: RunExecutor;
  /** Runs an in-process worker (default true). */
  worker?: boolean;
  /** Worker tuning. */
  workerOptions?: Partial<Omit<WorkerOptions, "store" | "executor">>;
  /** Body limits. */
  limits?: Partial<BodyLimits>;
  /**
   * Estimates a training run's memory before queuing it (default: on the meta backend
   * in a thread when the executor is the real one; null: no check).
   */
  estimator?: Estimator | null;
  /** Most memory a run may need by the estimate (default `LIBRA_MAX_RUN_BYTES`, else 4 GiB). */
  maxRunBytes?: number;
  /** Log lines (default console.log). */
  log?: (line: string) => void;
}

/** An opened lab. */
export interface Lab {
  /** Storage. */
  store: Store;
  /** Tokens in force. */
  auth: AuthConfig;
  /** The API app (mount at `/api`). */
  api: Hono;
  /** The executor runs use. */
  executor: RunExecutor;
  /** The in-process worker, if any. */
  worker: RunWorker | null;
  /** Body limits in force (the dashboard bounds its forms and uploads with them). */
  limits: BodyLimits;
  /** Ends open event streams (call before stopping the HTTP server). */
  beginShutdown(): void;
  /** Ends event streams, stops the worker (failing its run, if any) and closes the store. */
  close(): Promise<void>;
}

/** Opens the lab. */
export async function openLab(opts: LabOptions = {}): Promise<Lab> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const dataDir = opts.dataDir ?? ".libra";
  const url = opts.databaseUrl ?? Deno.env.get("LIBRA_DATABASE_URL") ?? undefined;
  const store = await openStore(url ? { url } : { path: opts.dbPath ?? `${dataDir}/libra.db` });
  try {
    const auth = await loadAuth({
      dataDir,
      writeToken: opts.token,
      readToken: opts.readToken,
      announce: log,
    });
    const owned = opts.executor ? null : realExecutor({ prewarm: opts.worker !== false });
    const executor = opts.executor ?? owned!;
    const worker = opts.worker === false
      ? null
      : new RunWorker({ store, executor, log, ...opts.workerOptions });
    const shutdown = new AbortController();
    const envMax = Number(Deno.env.get("LIBRA_MAX_RUN_BYTES") ?? NaN);
    const maxRunBytes = opts.maxRunBytes ??
      (Number.isSafeInteger(envMax) && envMax > 0 ? envMax : DEFAULT_MAX_RUN_BYTES);
    // the real executor (given or default) gets the real estimate unless told otherwise
    const real = !opts.executor || "memoryLimitBytes" in opts.executor;
    const ownedEstimator = opts.estimator === undefined && real ? threadEstimator() : null;
    const estimate = opts.estimator ?? ownedEstimator?.estimate;
    if (estimate) store.admit = admitByEstimate(estimate, maxRunBytes);
    const api = createApi({
      store,
      auth,
      signal: shutdown.signal,
      onQueued: () => worker?.poke(),
      ...(opts.limits ? { limits: opts.limits } : {}),
    });
    worker?.start();
    // Without a worker of its own, the server still fails the runs of workers that died.
    const staleMs = opts.workerOptions?.staleMs ?? 30_000;
    const reaper = worker ? null : setInterval(() => {
      store.reapStaleRuns(staleMs).then(
        (ids) =>
          ids.forEach((id) => log(`libra: marked run ${id} failed (its worker went silent)`)),
        (e) => log(`libra: reaping stale runs: ${e instanceof Error ? e.message : e}`),
      );
    }, Math.min(5000, Math.max(50, staleMs / 4)));
    return {
      store,
      auth,
      api,
      executor,
      worker,
      limits: { ...DEFAULT_LIMITS, ...opts.limits },
      beginShutdown() {
        shutdown.abort();
      },
      async close() {
        shutdown.abort();
        if (reaper !== null) clearInterval(reaper);
        await worker?.stop("the server shut down");
        owned?.close();
        ownedEstimator?.close();
        await store.close();
      },
    };
  } catch (e) {
    await store.close();
    throw e;
  }
}
