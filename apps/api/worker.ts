/**
 * Workers claim queued runs from the store and execute them with a
 * {@linkcode RunExecutor}. The server runs one in-process by default; `deno task libra
 * worker` runs more as separate processes on the same database. A worker sends
 * heartbeats while it holds a run; any worker or server marks failed the runs whose
 * worker went silent, with the reason, so no run stays `running` forever.
 *
 * @module
 */

import type { ProgressEvent, RunExecutor, RunSpec } from "./run_executor.ts";
import type { Run, Store } from "./store.ts";

/** Worker settings. */
export interface WorkerOptions {
  /** Where runs are queued. */
  store: Store;
  /** What executes them. */
  executor: RunExecutor;
  /** Identifier shown on claimed runs (default: host, pid and a random suffix). */
  id?: string;
  /** Idle polling interval in ms (default 500). */
  pollMs?: number;
  /** Heartbeat interval in ms (default 2000). */
  heartbeatMs?: number;
  /** Silence after which another worker's run is marked failed, in ms (default 30000). */
  staleMs?: number;
  /** Log lines (default: nothing). */
  log?: (line: string) => void;
}

function defaultId(): string {
  let host = "host";
  try {
    host = Deno.hostname();
  } catch { /* no --allow-sys */ }
  return `${host}:${Deno.pid}:${crypto.randomUUID().slice(0, 8)}`;
}

/** Claims and executes runs until stopped. */
export class RunWorker {
  /** This worker's identifier. */
  readonly id: string;
  readonly #o: Required<Omit<WorkerOptions, "id">>;
  #stop = new AbortController();
  #loop: Promise<void> | null = null;
  #current: { run: Run; abort: AbortController } | null = null;
  #wake: (() => void) | null = null;

  /** Creates a worker; call {@linkcode RunWorker.start}. */
  constructor(opts: WorkerOptions) {
    this.id = opts.id ?? defaultId();
    this.#o = {
      store: opts.store,
      executor: opts.executor,
      pollMs: opts.pollMs ?? 500,
      heartbeatMs: opts.heartbeatMs ?? 2000,
      staleMs: opts.staleMs ?? 30_000,
      log: opts.log ?? (() => {}),
    };
  }

  /** Starts the claim loop. */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Wakes an idle worker now (a run was just queued). */
  poke(): void {
    this.#wake?.();
  }

  /**
   * Stops the loop. A run in progress is aborted and marked failed with `reason`.
   */
  async stop(reason = "the worker was stopped"): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    const cur = this.#current;
    if (cur) {
      cur.abort.abort();
      await this.#o.store.failRun(cur.run.id, `${reason} while the run was executing`, this.id)
        .catch(() => {});
    }
    await this.#loop;
  }

  /** Claims and executes at most one run; resolves to whether there was one. */
  async runOnce(): Promise<boolean> {
    const { store } = this.#o;
    for (const id of await store.reapStaleRuns(this.#o.staleMs)) {
      this.#o.log(`worker ${this.id}: marked run ${id} failed (its worker went silent)`);
    }
    const run = await store.claimNextRun(this.id);
    if (!run) return false;
    await this.#execute(run);
    return true;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      let worked = false;
      try {
        worked = await this.runOnce();
      } catch (e) {
        if (this.#stop.signal.aborted) break;
        this.#o.log(`worker ${this.id}: ${e instanceof Error ? e.message : e}`);
      }
      if (!worked && !this.#stop.signal.aborted) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.#o.pollMs);
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = null;
      }
    }
  }

  async #execute(run: Run): Promise<void> {
    const { store, executor, log } = this.#o;
    const abort = new AbortController();
    this.#current = { run, abort };
    log(`worker ${this.id}: running ${run.id} (${run.kind} ${run.model} ${run.policy})`);
    let latest: ProgressEvent | undefined;
    let sent: ProgressEvent | undefined;
    let beating = Promise.resolve();
    const beat = () => {
      const p = latest !== sent ? latest : undefined;
      sent = latest;
      beating = beating.then(async () => {
        const mine = await store.heartbeat(run.id, this.id, p).catch(() => true);
        if (!mine && !abort.signal.aborted) {
          log(`worker ${this.id}: run ${run.id} was canceled or taken away; stopping it`);
          abort.abort();
        }
      });
    };
    const timer = setInterval(beat, this.#o.heartbeatMs);
    let lastFlush = 0;
    try {
      const trace = run.kind === "simulate" ? await store.getRunInput(run.id) : null;
      const result = await executor.execute(run.spec as RunSpec, {
        signal: abort.signal,
        progress: (e) => {
          latest = e;
          const now = Date.now();
          if (now - lastFlush > 200) {
            lastFlush = now;
            beat();
          }
        },
        ...(trace === null ? {} : { trace }),
      });
      clearInterval(timer);
      await beating;
      if (abort.signal.aborted) return;
      if (await store.completeRun(run.id, this.id, result)) {
        log(`worker ${this.id}: ${run.id} succeeded`);
      } else {
        log(
          `worker ${this.id}: ${run.id} ended, but it had been canceled or reaped; result dropped`,
        );
      }
    } catch (e) {
      clearInterval(timer);
      await beating.catch(() => {});
      const reason = e instanceof Error ? e.message : String(e);
      await store.failRun(run.id, reason, this.id).catch(() => {});
      log(`worker ${this.id}: ${run.id} failed: ${reason}`);
    } finally {
      this.#current = null;
    }
  }
}
