/**
 * The lab dashboard and API server, built the way Fresh builds apps: pages rendered
 * on the server with Preact (`routes/`), shared pieces in `components/`, interactive
 * islands in `islands/` hydrated in the browser from one bundle that `deno bundle`
 * builds (`build.ts`), and files under `static/`.
 *
 * @example Start on a free port with a throw-away database
 * ```ts ignore
 * import { startServer } from "@libra/web";
 * const server = await startServer({ port: 0, dbPath: ":memory:", token: "secret" });
 * console.log(server.url);
 * await server.close();
 * ```
 *
 * @module
 */

import { boundBody, type Lab, type LabOptions, openLab, realCatalog } from "@libra/api";
import { MODELS, TRAIN_POLICIES } from "@libra/api/catalog";
import { Hono } from "hono";
import { serveStatic } from "hono/deno";
import { fileURLToPath } from "node:url";
import { parseHTML } from "linkedom";
import { ensureBundle } from "./build.ts";
import { type Catalog, level, type WebContext } from "./components/context.ts";
import { tableExport } from "./components/export.tsx";
import { setServerDocument } from "./components/plot_figure.tsx";
import * as compare from "./routes/compare.tsx";
import * as configurations from "./routes/configurations.tsx";
import * as login from "./routes/login.tsx";
import * as runs from "./routes/runs.tsx";
import * as sweeps from "./routes/sweeps.tsx";
import * as traces from "./routes/traces.tsx";
import { allowedHosts, DEFAULT_ALLOWED_HOSTS, sameOrigin, securityHeaders } from "./security.ts";

export type { Catalog, WebContext } from "./components/context.ts";
export * from "./security.ts";
export { buildIslands, ensureBundle } from "./build.ts";

/** Names the forms suggest unless the executor knows better (models: the `@libra/nn` registry). */
export const DEFAULT_CATALOG: Catalog = { models: [...MODELS], policies: [...TRAIN_POLICIES] };

const ROUTES = [runs, compare, configurations, sweeps, traces, login];
const STATIC = new URL("static/", import.meta.url);
const TYPES: Record<string, string> = {
  css: "text/css; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  map: "application/json",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon",
};

/** The browser-facing defences of {@linkcode createWebApp}. */
export interface WebSecurityOptions {
  /** Host names served (default: localhost, 127.0.0.1, [::1]; `*` serves any). */
  allowedHosts?: readonly string[];
}

/** The whole app: the API under `/api` and the dashboard pages. */
export function createWebApp(
  lab: Lab,
  catalog: Catalog = DEFAULT_CATALOG,
  security: WebSecurityOptions = {},
): Hono {
  const ctx: WebContext = { lab, catalog };
  setServerDocument(() =>
    parseHTML("<!DOCTYPE html><html><body></body></html>").document as unknown as Document
  );
  const app = new Hono();
  app.use("*", allowedHosts(security.allowedHosts ?? DEFAULT_ALLOWED_HOSTS));
  app.use("*", securityHeaders);
  // The pages' forms (and /login, /logout) accept same-origin posts only; the API's
  // writes need a bearer token, which a browser never adds by itself.
  app.use("*", (c, next) => /^\/api(\/|$)/.test(c.req.path) ? next() : sameOrigin(c, next));
  // Bodies of the pages are read as a stream up to their limit before any handler (the API
  // bounds its own): forms at the form limit, the trace upload at the trace limit.
  const pageBodies = boundBody(
    (c) => c.req.method === "POST" && c.req.path === "/traces" ? lab.limits.trace : lab.limits.form,
    (c, e) => c.text(`${e.message} for ${c.req.method} ${c.req.path}`, 413),
  );
  app.use("*", (c, next) => /^\/api(\/|$)/.test(c.req.path) ? next() : pageBodies(c, next));
  app.route("/api", lab.api);
  // files under static/ (Hono's serveStatic for Deno: streamed, no path outside the folder)
  app.get(
    "/static/*",
    serveStatic({
      root: fileURLToPath(STATIC),
      rewriteRequestPath: (p) => p.slice("/static".length),
      mimes: TYPES,
      onFound: (_path, c) => {
        c.header("Cache-Control", "no-cache");
      },
    }),
    (c) => c.text("not found", 404),
  );
  app.use("*", async (c, next) => {
    const p = c.req.path;
    if (p.startsWith("/api") || p.startsWith("/static/") || p === "/login") return next();
    if (level(c, ctx) === "none") return c.redirect(`/login?next=${encodeURIComponent(p)}`, 303);
    await next();
  });
  app.use("*", tableExport()); // ?export=<table>&format=csv|json on any page
  app.get("/", (c) => c.redirect("/runs"));
  for (const r of ROUTES) r.register(app, ctx);
  // a mounted app's own notFound is not consulted by Hono: answer unknown API routes in JSON here
  app.notFound((c) =>
    c.req.path === "/api" || c.req.path.startsWith("/api/")
      ? c.json(
        { error: `no route ${c.req.method} ${c.req.path}; see GET /api for the routes` },
        404,
      )
      : c.text(`no page at ${c.req.path}`, 404)
  );
  return app;
}

/** Server options: where to listen, plus everything {@linkcode openLab} takes. */
export interface ServerOptions extends LabOptions {
  /** Port (default 8000; 0 = any free port). */
  port?: number;
  /** Interface (default `127.0.0.1`; `0.0.0.0` to serve the network). */
  hostname?: string;
  /** Build the islands bundle if missing or stale (default true). */
  build?: boolean;
  /** Names the forms suggest. */
  catalog?: Catalog;
  /**
   * Host names served besides the one bound to (default `LIBRA_ALLOWED_HOSTS`, comma-
   * separated, else localhost, 127.0.0.1 and [::1]; `*` serves any).
   */
  allowedHosts?: readonly string[];
}

/** A running server. */
export interface ServerHandle {
  /** Base URL, e.g. `http://127.0.0.1:8000`. */
  url: string;
  /** Port it listens on. */
  port: number;
  /** The lab behind it (store, auth, worker). */
  lab: Lab;
  /** The write token in force. */
  token: string;
  /** Stops listening, stops the in-process worker and closes the database. */
  close(): Promise<void>;
}

/** Starts the API and dashboard. */
export async function startServer(opts: ServerOptions = {}): Promise<ServerHandle> {
  if (opts.build ?? true) await ensureBundle();
  const lab = await openLab(opts);
  const hostname = opts.hostname ?? "127.0.0.1";
  const env = Deno.env.get("LIBRA_ALLOWED_HOSTS")?.split(",").map((h) => h.trim()).filter((h) => h);
  const hosts = [...(opts.allowedHosts ?? (env?.length ? env : DEFAULT_ALLOWED_HOSTS))];
  if (["0.0.0.0", "::"].includes(hostname)) {
    try {
      hosts.push(Deno.hostname()); // serving the network: the machine's own name too
    } catch { /* no --allow-sys */ }
  } else hosts.push(hostname.includes(":") ? `[${hostname}]` : hostname);
  const app = createWebApp(lab, opts.catalog ?? await realCatalog() ?? DEFAULT_CATALOG, {
    allowedHosts: hosts,
  });
  const ac = new AbortController();
  let resolvePort: (p: number) => void;
  const ready = new Promise<number>((r) => (resolvePort = r));
  const server = Deno.serve({
    port: opts.port ?? 8000,
    hostname,
    signal: ac.signal,
    onListen: ({ port }) => resolvePort(port),
  }, app.fetch);
  const port = await ready;
  const shown = hostname === "0.0.0.0" ? "localhost" : hostname;
  return {
    url: `http://${shown}:${port}`,
    port,
    lab,
    token: lab.auth.writeToken,
    async close() {
      lab.beginShutdown();
      ac.abort();
      await server.finished;
      await lab.close();
    },
  };
}
