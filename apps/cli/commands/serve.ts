/**
 * `libra serve`: serves the lab API and dashboard, with an in-process worker that
 * executes queued runs.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { realExecutor, redact } from "@libra/api";
import { startServer } from "@libra/web";

/** One-line description for `--help`. */
export const summary = "serve the lab API and dashboard (http://localhost:8000)";

const HELP = `Usage: deno task libra serve [--port N] [--host H] [--db FILE | --database-url URL]

Serves the lab API under /api and the dashboard, and executes queued runs in an
in-process worker (start more with \`deno task libra worker\` on the same database).

Options:
  --port N            port (default $LIBRA_PORT or 8000; 0 picks a free one)
  --host H            interface (default 127.0.0.1; 0.0.0.0 serves the network)
  --data-dir DIR      folder for the SQLite file and the generated token (default .libra)
  --db FILE           SQLite file (default DIR/libra.db)
  --database-url URL  PostgreSQL instead of SQLite (default $LIBRA_DATABASE_URL)
  --no-worker         do not execute runs in this process
  --allowed-host H    also answer requests for host name H (repeatable; default
                      localhost, 127.0.0.1, [::1] and the --host name; '*' for any)
  --max-run-bytes N   refuse runs whose estimated memory exceeds N bytes (default
                      $LIBRA_MAX_RUN_BYTES or 4 GiB)

Environment: LIBRA_API_TOKEN (write token; generated and saved under DIR if unset),
LIBRA_API_READ_TOKEN (makes reads need a token), LIBRA_DATABASE_URL, LIBRA_ALLOWED_HOSTS
(comma-separated), LIBRA_MAX_RUN_BYTES, LIBRA_RUN_MEMORY_BYTES (memory limit of a run's
process, default 8 GiB).`;

/** Parses the options shared by `serve` and `worker`. */
export function parsePort(v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    throw new Error(`--port must be an integer in 0..65535, got "${v}"`);
  }
  return n;
}

/** Runs the server until SIGINT or SIGTERM. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: "string" },
      host: { type: "string", default: "127.0.0.1" },
      "data-dir": { type: "string", default: ".libra" },
      db: { type: "string" },
      "database-url": { type: "string" },
      "no-worker": { type: "boolean", default: false },
      "allowed-host": { type: "string", multiple: true },
      "max-run-bytes": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const port = parsePort(values.port ?? Deno.env.get("LIBRA_PORT"), 8000);
  let maxRunBytes: number | undefined;
  if (values["max-run-bytes"] !== undefined) {
    maxRunBytes = Number(values["max-run-bytes"]);
    if (!Number.isSafeInteger(maxRunBytes) || maxRunBytes <= 0) {
      throw new Error(
        `--max-run-bytes must be a positive integer, got "${values["max-run-bytes"]}"`,
      );
    }
  }
  const url = values["database-url"] ?? Deno.env.get("LIBRA_DATABASE_URL");
  // the real executor (one thread loading the packages now): dynamic policies and planners
  const executor = realExecutor({ prewarm: !values["no-worker"] });
  const closeExecutors = () => executor.close();
  let server;
  try {
    server = await startServer({
      executor,
      port,
      hostname: values.host,
      dataDir: values["data-dir"],
      ...(values.db ? { dbPath: values.db } : {}),
      ...(url ? { databaseUrl: url } : {}),
      worker: !values["no-worker"],
      ...(values["allowed-host"]?.length
        ? { allowedHosts: ["localhost", "127.0.0.1", "[::1]", ...values["allowed-host"]] }
        : {}),
      ...(maxRunBytes !== undefined ? { maxRunBytes } : {}),
    });
  } catch (e) {
    closeExecutors();
    if (e instanceof Deno.errors.AddrInUse) {
      throw new Error(
        `port ${port} on ${values.host} is already in use; pass --port N or set LIBRA_PORT (0 picks a free port)`,
        { cause: e },
      );
    }
    throw e;
  }
  const db = url
    ? `PostgreSQL ${redact(url)}`
    : `SQLite ${values.db ?? `${values["data-dir"]}/libra.db`}`;
  console.log(`libra: serving the lab on ${server.url} (API under ${server.url}/api; ${db})`);
  console.log(
    server.lab.worker
      ? `libra: executing runs in this process (worker ${server.lab.worker.id})`
      : "libra: not executing runs here; start `deno task libra worker`",
  );
  const stopped = new Promise<string>((resolve) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(sig, () => resolve(sig));
    }
  });
  const sig = await stopped;
  console.log(`libra: ${sig}: shutting down`);
  await server.close();
  closeExecutors();
  return 0;
}
