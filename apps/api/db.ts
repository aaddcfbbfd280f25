/**
 * A tiny SQL driver layer over two databases: SQLite through `node:sqlite` (the
 * default, one file) and PostgreSQL through the `postgres` npm client. Statements are
 * written once with `?` placeholders and always take their values as parameters.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** A value bound to a `?` placeholder (a bigint stores an integer beyond 2^53 exactly). */
export type SqlValue = string | number | bigint | null;
/** A result row. */
export type Row = Record<string, unknown>;

/** What the store needs from a database. */
export interface Db {
  /** `sqlite` or `postgres`: the few statements that differ look at it. */
  readonly dialect: "sqlite" | "postgres";
  /** Runs a statement and returns its rows (with `RETURNING`, the changed rows). */
  all(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
  /** Runs a statement; resolves to the number of changed rows. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
  /** Runs `fn` in one transaction: all of it commits, or none of it. */
  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T>;
  /** Closes the connection(s). */
  close(): Promise<void>;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE = -MAX_SAFE;

/** Serializes access to the single SQLite connection so that transactions do not interleave. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();
  lock<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.then(() => {}, () => {});
    return result;
  }
}

/** Opens (creating if needed) a SQLite database file; `:memory:` for a throw-away one. */
export function openSqlite(path: string): Db {
  const db = new DatabaseSync(path);
  // WAL lets worker processes read while the server writes; FULL makes every
  // acknowledged commit durable before the answer goes out.
  db.exec("PRAGMA busy_timeout = 10000");
  if (path !== ":memory:") db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const mutex = new Mutex();
  // Integers are read as bigints, so that one value beyond 2^53 cannot fail a whole
  // statement ("too large to be represented as a JavaScript number"); the safe ones
  // become numbers again and the rest stay bigints for the store to judge per row.
  const direct = (sql: string, params: readonly SqlValue[]): Row[] => {
    const stmt = db.prepare(sql);
    stmt.setReadBigInts(true);
    const rows = stmt.all(...params) as Row[];
    for (const row of rows) {
      for (const k in row) {
        const v = row[k];
        if (typeof v === "bigint" && v >= MIN_SAFE && v <= MAX_SAFE) row[k] = Number(v);
      }
    }
    return rows;
  };
  const changes = (sql: string, params: readonly SqlValue[]): number =>
    Number(db.prepare(sql).run(...params).changes);
  const inTx: Db = {
    dialect: "sqlite",
    all: (sql, params = []) => Promise.resolve(direct(sql, params)),
    run: (sql, params = []) => Promise.resolve(changes(sql, params)),
    transaction: (fn) => fn(inTx),
    close: () => Promise.resolve(),
  };
  let closed = false;
  return {
    dialect: "sqlite",
    all: (sql, params = []) => mutex.lock(() => Promise.resolve(direct(sql, params))),
    run: (sql, params = []) => mutex.lock(() => Promise.resolve(changes(sql, params))),
    transaction: (fn) =>
      mutex.lock(async () => {
        db.exec("BEGIN IMMEDIATE");
        try {
          const result = await fn(inTx);
          db.exec("COMMIT");
          return result;
        } catch (e) {
          db.exec("ROLLBACK");
          throw e;
        }
      }),
    close: () =>
      mutex.lock(() => {
        if (!closed) db.close();
        closed = true;
        return Promise.resolve();
      }),
  };
}

/** `?` placeholders to PostgreSQL's `$1, $2, ...` (our SQL has no `?` inside literals). */
export function toDollarParams(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

// BIGINT parameters travel as decimal text, which PostgreSQL converts exactly.
const pgParams = (params: readonly SqlValue[]): (string | number | null)[] =>
  params.map((p) => typeof p === "bigint" ? p.toString() : p);

interface PgLike {
  unsafe(query: string, params?: (string | number | null)[]): Promise<Row[] & { count: number }>;
}
interface PgClient extends PgLike {
  begin<T>(fn: (tx: PgLike) => Promise<T>): Promise<T>;
  end(opts?: { timeout?: number }): Promise<void>;
}

/** Connects to PostgreSQL at `url` (`postgres://user:pass@host:port/db`). */
export async function openPostgres(url: string): Promise<Db> {
  const { default: postgres } = await import("postgres");
  const sql = postgres(url, {
    max: 8,
    onnotice: () => {},
    connect_timeout: 10,
  }) as unknown as PgClient;
  const wrap = (c: PgLike, top: boolean): Db => {
    const self: Db = {
      dialect: "postgres",
      all: async (q, params = []) => [...await c.unsafe(toDollarParams(q), pgParams(params))],
      run: async (q, params = []) => (await c.unsafe(toDollarParams(q), pgParams(params))).count,
      transaction: (fn) => top ? sql.begin((tx) => fn(wrap(tx, false))) : fn(self),
      close: () => top ? sql.end({ timeout: 5 }) : Promise.resolve(),
    };
    return self;
  };
  const db = wrap(sql, true);
  try {
    await db.all("SELECT 1");
  } catch (e) {
    await sql.end({ timeout: 1 }).catch(() => {});
    throw new Error(
      `cannot connect to PostgreSQL at ${redact(url)}: ${
        e instanceof Error ? e.message : e
      } (check LIBRA_DATABASE_URL and that the server is running)`,
      { cause: e },
    );
  }
  return db;
}

/** The URL with its password hidden, for messages. */
export function redact(url: string): string {
  return url.replace(/(\/\/[^:/@]+:)[^@]*@/, "$1***@");
}
