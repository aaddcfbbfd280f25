/**
 * The Libra lab API: configurations, runs and their results, trace simulations,
 * comparisons and bench uploads, on SQLite (default) or PostgreSQL, with workers that
 * execute queued runs. Routes and the bench upload schema are documented in README.md.
 *
 * @example Test a route without a server
 * ```ts
 * import { openLab } from "@libra/api";
 * const lab = await openLab({ dbPath: ":memory:", token: "t", worker: false, log: () => {} });
 * const res = await lab.api.request("/health");
 * console.log(res.status); // 200
 * await lab.close();
 * ```
 *
 * @module
 */

export * from "./app.ts";
export * from "./auth.ts";
export * from "./body.ts";
export * from "./catalog.ts";
export * from "./db.ts";
export * from "./estimate.ts";
export * from "./executor.ts";
export * from "./lab.ts";
export * from "./migrations.ts";
export * from "./run_executor.ts";
export * from "./schemas.ts";
export * from "./store.ts";
export * from "./sweeps.ts";
export * from "./trace_upload.ts";
export * from "./validate.ts";
export * from "./worker.ts";
