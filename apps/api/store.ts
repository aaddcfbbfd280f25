/**
 * The lab's storage: configurations, runs, their results and comparison points, on
 * SQLite or PostgreSQL behind one class. Every statement is parameterized; every
 * multi-row write is one transaction, so what a call acknowledged survives a restart.
 *
 * @module
 */

import { type Db, openPostgres, openSqlite } from "./db.ts";
import { migrate } from "./migrations.ts";
import { ResultStore } from "./store_results.ts";

export type { Comparison, RunResults } from "./store_results.ts";
export {
  checkResult,
  newId,
  type Paged,
  type Run,
  type RunKind,
  trainSpecOf,
} from "./store_rows.ts";

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

/**
 * Configurations, runs and results: {@linkcode ConfigurationStore}
 * (store_configurations.ts) under {@linkcode RunStore} (store_runs.ts) under
 * {@linkcode ResultStore} (store_results.ts), on one database.
 */
export class Store extends ResultStore {}
