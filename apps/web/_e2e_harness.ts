/**
 * Shared pieces of the dashboard's end-to-end tests: a server on a free port with a
 * temporary database and no worker (tests store the runs they need directly), headless
 * Chromium through playwright-core, and helpers that store finished runs.
 *
 * @module
 */

import type { Configuration, ConfigurationInput, RunExecutor, RunResult, Store } from "@libra/api";
import { type ServerHandle, startServer } from "./main.ts";
import { tinyMlpConfiguration } from "../api/_test_helpers.ts";

/** Where Chromium is (`LIBRA_CHROMIUM` overrides). */
export const CHROMIUM: string = Deno.env.get("LIBRA_CHROMIUM") ?? "/usr/bin/chromium";
/** Whether the tests can run. */
export const HAVE_CHROMIUM: boolean = await Deno.stat(CHROMIUM).then(() => true, () => false);
/** The write token of the test server. */
export const TOKEN = "e2e-write-token";

// deno-lint-ignore no-explicit-any
type Browser = any;
// deno-lint-ignore no-explicit-any
export type Page = any;

/** A started server, a browser, and a folder for screenshots. */
export interface E2E {
  server: ServerHandle;
  browser: Browser;
  shots: string;
  /** A new page, logged in (write cookie) unless `login` is false; collects console errors. */
  page(opts?: { width?: number; height?: number; login?: boolean }): Promise<Page>;
  /** Errors the pages reported. */
  errors: string[];
  close(): Promise<void>;
}

/** Starts the server and Chromium; without `executor`, no worker runs (tests store results). */
export async function startE2E(opts: { executor?: RunExecutor } = {}): Promise<E2E> {
  const { chromium } = await import("playwright-core");
  const dir = await Deno.makeTempDir({ prefix: "libra-e2e-" });
  const shots = `${dir}/screenshots`;
  await Deno.mkdir(shots);
  const server = await startServer({
    port: 0,
    dataDir: dir,
    token: TOKEN,
    readToken: null,
    log: () => {},
    ...(opts.executor
      ? { executor: opts.executor, workerOptions: { pollMs: 100, heartbeatMs: 500 } }
      : {
        worker: false,
        executor: { name: "none", execute: () => Promise.reject(new Error("no executor in e2e")) },
      }),
  });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  const errors: string[] = [];
  return {
    server,
    browser,
    shots,
    errors,
    async page(opts = {}) {
      const ctx = await browser.newContext({
        viewport: { width: opts.width ?? 1280, height: opts.height ?? 900 },
      });
      if (opts.login ?? true) {
        const u = new URL(server.url);
        await ctx.addCookies([{
          name: "libra_token",
          value: TOKEN,
          domain: u.hostname,
          path: "/",
          httpOnly: true,
          sameSite: "Strict",
        }]);
      }
      const page = await ctx.newPage();
      page.on("pageerror", (e: unknown) => errors.push(String(e)));
      page.on("console", (m: { type(): string; text(): string }) => {
        if (m.type() === "error") errors.push(m.text());
      });
      return page;
    },
    async close() {
      await browser.close();
      await server.close();
    },
  };
}

/** The API tests' tiny MLP configuration, named `e2e`, under dtr-eq for 3 steps, with `over` applied. */
export function configuration(over: Partial<ConfigurationInput> = {}): ConfigurationInput {
  return { ...tinyMlpConfiguration("e2e"), policy: "dtr-eq", steps: 3, ...over };
}

/** Stores a configuration and a finished run of it with `result`; returns the run id. */
export async function storeRun(
  store: Store,
  result: RunResult,
  over: Partial<ConfigurationInput> = {},
): Promise<{ id: string; configuration: Configuration }> {
  const cfg = await store.createConfiguration(configuration(over));
  const run = (await store.createRunFromConfiguration(cfg.id))!;
  const claimed = await store.claimNextRun("e2e-worker");
  if (claimed?.id !== run.id) throw new Error(`claimed ${claimed?.id}, expected ${run.id}`);
  if (!(await store.completeRun(run.id, "e2e-worker", result))) {
    throw new Error(`could not complete ${run.id}`);
  }
  return { id: run.id, configuration: cfg };
}

/** A result with defaults (a feasible run at ratio 0.5 of a 1 MB peak). */
export function result(over: Partial<RunResult> = {}): RunResult {
  return {
    feasible: true,
    budgetBytes: 500_000,
    budgetRatio: 0.5,
    baselinePeakBytes: 1_000_000,
    peakBytes: 480_000,
    overhead: 1.2,
    stats: {},
    memory: null,
    loss: [],
    points: [{ policy: "dtr-eq", ratio: 0.5, feasible: true, overhead: 1.2 }],
    trace: null,
    note: null,
    reason: null,
    ...over,
  };
}
