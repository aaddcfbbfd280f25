/**
 * `libra worker`: claims queued runs from the lab database and executes them, so
 * several processes (or machines sharing one PostgreSQL) share the queue.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { openStore, realExecutor, redact, RunWorker } from "@libra/api";

/** One-line description for `--help`. */
export const summary =
  "execute queued runs from the lab database (more workers = more runs at once)";

const HELP = `Usage: deno task libra worker [--db FILE | --database-url URL] [--once]

Claims queued runs (atomically: a run goes to one worker) and executes them with
@libra/runtime. While it holds a run it sends heartbeats; a run whose worker falls
silent for --stale-ms is marked failed with the reason by any other worker or server.

Options:
  --data-dir DIR      folder of the default SQLite file (default .libra)
  --db FILE           SQLite file (default DIR/libra.db)
  --database-url URL  PostgreSQL instead of SQLite (default $LIBRA_DATABASE_URL)
  --id NAME           worker name shown on its runs (default host:pid:random)
  --once              exit when the queue is empty instead of waiting for runs
  --poll-ms N         idle polling interval (default 1000)
  --heartbeat-ms N    heartbeat interval (default 2000)
  --stale-ms N        silence after which another worker's run is failed (default 30000)`;

function int(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    throw new Error(`--${name} must be an integer >= ${min}, got "${v}"`);
  }
  return n;
}

/** Runs the worker until SIGINT/SIGTERM (or, with --once, until the queue is empty). */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      "data-dir": { type: "string", default: ".libra" },
      db: { type: "string" },
      "database-url": { type: "string" },
      id: { type: "string" },
      once: { type: "boolean", default: false },
      "poll-ms": { type: "string", default: "1000" },
      "heartbeat-ms": { type: "string", default: "2000" },
      "stale-ms": { type: "string", default: "30000" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const url = values["database-url"] ?? Deno.env.get("LIBRA_DATABASE_URL");
  const path = values.db ?? `${values["data-dir"]}/libra.db`;
  // a worker joins an existing lab: it never creates a database (or folders) of its own
  const store = await openStore(url ? { url } : { path, create: false });
  // the real executor trains dynamic policies and static planners (libra, chen-sqrt) alike
  const executor = realExecutor({ prewarm: true });
  const log = (line: string) => console.log(`libra: ${line}`);
  const worker = new RunWorker({
    store,
    executor,
    log,
    ...(values.id ? { id: values.id } : {}),
    pollMs: int("poll-ms", values["poll-ms"], 10),
    heartbeatMs: int("heartbeat-ms", values["heartbeat-ms"], 10),
    staleMs: int("stale-ms", values["stale-ms"], 100),
  });
  log(`worker ${worker.id} on ${url ? `PostgreSQL ${redact(url)}` : `SQLite ${path}`}`);
  try {
    if (values.once) {
      let n = 0;
      while (await worker.runOnce()) n++;
      log(`worker ${worker.id}: queue empty after ${n} run(s)`);
      return 0;
    }
    worker.start();
    const sig = await new Promise<string>((resolve) => {
      for (const s of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(s, () => resolve(s));
    });
    log(`worker ${worker.id}: ${sig}: stopping`);
    await worker.stop(`worker ${worker.id} received ${sig}`);
    return 0;
  } finally {
    executor.close();
    await store.close();
  }
}
