/**
 * The lab API as a Hono app, testable without a server through `app.request(...)`.
 * One sub-app per resource (`routes/`: configurations, runs, traces, compare, bench,
 * health; sweeps in sweeps.ts) mounted with `app.route`, behind the authentication
 * and body-limit middleware; requests are validated by the zod validator middleware of
 * validate.ts. `GET /` lists the routes from the app's own route table. See README.md
 * in this folder for the routes.
 *
 * @module
 */

import { Hono } from "hono";
import type { MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { access, type AuthConfig, bearer } from "./auth.ts";
import { type BodyLimits, boundBody, DEFAULT_LIMITS } from "./body.ts";
import { configurationsApp } from "./routes/configurations.ts";
import { benchApp, compareApp, healthApp } from "./routes/misc.ts";
import { runsApp } from "./routes/runs.ts";
import type { ApiDeps } from "./routes/shared.ts";
import { tracesApp } from "./routes/traces.ts";
import type { Store } from "./store.ts";
import { sweepsApp } from "./sweeps.ts";

export { type BodyLimits, DEFAULT_LIMITS } from "./body.ts";
export { runView } from "./routes/shared.ts";
export { badRequest } from "./validate.ts";
export { checkTraceText } from "./trace_upload.ts";

/** What the API needs. */
export interface ApiOptions {
  /** Storage. */
  store: Store;
  /** Tokens. */
  auth: AuthConfig;
  /** Called after a run is queued (wakes the in-process worker). */
  onQueued?: () => void;
  /** Body limits. */
  limits?: Partial<BodyLimits>;
  /** Interval at which the event stream polls a run, ms (default 250). */
  eventPollMs?: number;
  /** Ends open event streams when aborted (server shutdown). */
  signal?: AbortSignal;
}

/** Cookie that carries a token for browsers (set by the dashboard's login page). */
export const TOKEN_COOKIE = "libra_token";

/** What the route index adds to a route's line (query parameters, the kind of answer). */
const ROUTE_NOTES: Readonly<Record<string, string>> = {
  "/runs/:id/events": " (server-sent events)",
  "/compare": "?model=M[&preset=P][&source=live|simulated]",
};

/**
 * The route index of `app` from its route table (`app.routes`, middleware left out):
 * one line `METHODS /api<path>` per path, in the order the routes were added.
 */
export function routeIndex(app: Hono, prefix = "/api"): string[] {
  const byPath = new Map<string, string[]>();
  for (const r of app.routes) {
    if (r.method === "ALL") continue; // middleware
    const methods = byPath.get(r.path) ?? [];
    if (!methods.includes(r.method)) methods.push(r.method);
    byPath.set(r.path, methods);
  }
  return [...byPath].map(([path, methods]) =>
    `${methods.join("|")} ${path === "/" ? prefix : prefix + path}${ROUTE_NOTES[path] ?? ""}`
  );
}

/** Creates the API app; mount it at `/api`. */
export function createApi(opts: ApiOptions): Hono {
  const { store, auth } = opts;
  const limits: BodyLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const deps: ApiDeps = {
    store,
    limits,
    onQueued: opts.onQueued,
    eventPollMs: opts.eventPollMs ?? 250,
    signal: opts.signal,
  };
  const app = new Hono();

  app.onError((e, c) => {
    console.error(`libra api: ${c.req.method} ${c.req.path}: ${e.stack ?? e}`);
    return c.json({ error: `internal error: ${e.message}` }, 500);
  });
  app.notFound((c) =>
    c.json({ error: `no route ${c.req.method} ${c.req.path}; see GET /api for the routes` }, 404)
  );

  const authenticate: MiddlewareHandler = async (c, next) => {
    const token = bearer(c.req.header("authorization")) ?? getCookie(c, TOKEN_COOKIE) ?? null;
    const fromCookie = bearer(c.req.header("authorization")) === null && token !== null;
    const level = access(auth, token);
    const write = !["GET", "HEAD", "OPTIONS"].includes(c.req.method);
    // Cookies authorize reads only: a write from a browser goes through the dashboard's forms.
    if (write && (level !== "write" || fromCookie)) {
      c.header("WWW-Authenticate", 'Bearer realm="libra"');
      return c.json({
        error: token === null || fromCookie
          ? "writes need a bearer token: send 'Authorization: Bearer <LIBRA_API_TOKEN>'"
          : "this token cannot write; use the write token (LIBRA_API_TOKEN)",
      }, 401);
    }
    if (level === "none") {
      c.header("WWW-Authenticate", 'Bearer realm="libra"');
      return c.json({
        error: "reads need a token on this server: send 'Authorization: Bearer <token>'",
      }, 401);
    }
    await next();
  };
  // Only the health route itself is public (mounted at /api, or the app on its own).
  app.use("*", (c, next) => {
    if (c.req.method === "GET" && /^(\/api)?\/health$/.test(c.req.path)) return next();
    return authenticate(c, next);
  });
  // Every body is read as a stream up to its route's limit before a handler sees it.
  app.use(
    "*",
    boundBody((c) => {
      const p = c.req.path;
      return /\/traces$/.test(p) ? limits.trace : /\/bench$/.test(p) ? limits.bench : limits.json;
    }),
  );

  app.get("/", (c) => c.json({ name: "libra lab API", routes: routeIndex(app) }));
  app.route("/health", healthApp(deps));
  app.route("/configurations", configurationsApp(deps));
  app.route("/runs", runsApp(deps));
  app.route("/traces", tracesApp(deps));
  app.route("/compare", compareApp(deps));
  app.route("/sweeps", sweepsApp(store, opts.onQueued));
  app.route("/bench", benchApp(deps));
  return app;
}
