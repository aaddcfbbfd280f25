/**
 * The lab API as a Hono app, testable without a server through `app.request(...)`.
 * See README.md in this folder for the routes.
 *
 * @module
 */

import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { streamSSE } from "hono/streaming";
import { z } from "zod";
import { access, type AuthConfig, bearer } from "./auth.ts";
import { boundBody, jsonDepth, MAX_JSON_DEPTH } from "./body.ts";
import { KnownConfigurationInput, unknownTracePolicies } from "./catalog.ts";
import {
  BenchUpload,
  CompareQuery,
  ConfigurationPatch,
  DEFAULT_RATIOS,
  DEFAULT_SIM_POLICIES,
  type FieldError,
  fieldErrors,
  Page,
  RunCreate,
  RunFilter,
  TraceUploadQuery,
} from "./schemas.ts";
import { type Run, RunRefusedError, type Store } from "./store.ts";
import { sweepRoutes } from "./sweeps.ts";

/** Body size limits in bytes. */
export interface BodyLimits {
  /** JSON bodies (default 1 MiB). */
  json: number;
  /** Trace uploads (default 64 MiB). */
  trace: number;
  /** Bench uploads (default 16 MiB). */
  bench: number;
  /** The dashboard's forms (default 64 KiB). */
  form: number;
}

/** The default body limits. */
export const DEFAULT_LIMITS: Readonly<BodyLimits> = {
  json: 1 << 20,
  trace: 64 << 20,
  bench: 16 << 20,
  form: 64 << 10,
};

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

/** A 400 answer listing the field errors. */
export function badRequest(c: Context, errors: FieldError[]): Response {
  return c.json({ error: "invalid request", issues: errors }, 400);
}

type Parsed<T> = { ok: true; value: T } | { ok: false; response: Response };

async function jsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<Parsed<z.output<S>>> {
  let raw: unknown;
  try {
    const text = await c.req.text();
    if (jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
      return {
        ok: false,
        response: badRequest(c, [{
          field: "body",
          reason: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
        }]),
      };
    }
    raw = JSON.parse(text);
  } catch (e) {
    return {
      ok: false,
      response: badRequest(c, [{
        field: "body",
        reason: `not valid JSON (${e instanceof Error ? e.message : e}); send application/json`,
      }]),
    };
  }
  const r = schema.safeParse(raw);
  return r.success
    ? { ok: true, value: r.data }
    : { ok: false, response: badRequest(c, fieldErrors(r.error)) };
}

function query<S extends z.ZodType>(c: Context, schema: S): Parsed<z.output<S>> {
  const r = schema.safeParse(c.req.query());
  return r.success
    ? { ok: true, value: r.data }
    : { ok: false, response: badRequest(c, fieldErrors(r.error, "query.")) };
}

const notFound = (c: Context, what: string, id: string) =>
  c.json({ error: `${what} ${JSON.stringify(id)} not found` }, 404);

/**
 * Checks that `text` looks like a DTR-format trace: one JSON object with an
 * `INSTRUCTION` string per non-empty line. The runtime's importer checks the rest.
 */
export function checkTraceText(text: string): FieldError | null {
  const lines = text.split("\n");
  let seen = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      return {
        field: "trace",
        reason: `line ${i + 1}: not JSON (${JSON.stringify(line.slice(0, 60))})`,
      };
    }
    if (
      typeof v !== "object" || v === null ||
      typeof (v as Record<string, unknown>).INSTRUCTION !== "string"
    ) {
      return { field: "trace", reason: `line ${i + 1}: no "INSTRUCTION" field` };
    }
    seen++;
  }
  return seen === 0 ? { field: "trace", reason: "the trace is empty" } : null;
}

/** The public view of a run: the stored fields plus links to its sub-resources. */
export function runView(r: Run): Run & { links: Record<string, string> } {
  const base = `/api/runs/${r.id}`;
  return {
    ...r,
    links: {
      self: base,
      results: `${base}/results`,
      memory: `${base}/memory`,
      loss: `${base}/loss`,
      trace: `${base}/trace`,
      events: `${base}/events`,
    },
  };
}

/** Creates the API app; mount it at `/api`. */
export function createApi(opts: ApiOptions): Hono {
  const { store, auth } = opts;
  const limits: BodyLimits = { ...DEFAULT_LIMITS, ...opts.limits };
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

  app.get("/", (c) =>
    c.json({
      name: "libra lab API",
      routes: [
        "GET /api/health",
        "GET|POST /api/configurations",
        "GET|PUT|PATCH|DELETE /api/configurations/:id",
        "POST /api/configurations/:id/runs",
        "GET|POST /api/runs",
        "GET|DELETE /api/runs/:id",
        "POST /api/runs/:id/cancel",
        "GET /api/runs/:id/results",
        "GET /api/runs/:id/memory",
        "GET /api/runs/:id/loss",
        "GET /api/runs/:id/trace",
        "GET /api/runs/:id/events (server-sent events)",
        "GET|POST /api/traces",
        "DELETE /api/traces/:id",
        "GET /api/compare?model=M[&preset=P][&source=live|simulated]",
        "GET /api/compare/models",
        "GET|POST /api/sweeps",
        "GET /api/sweeps/:id",
        "POST /api/bench",
        "GET /api/bench/schema",
      ],
    }));

  app.get("/health", async (c) => {
    try {
      await store.db.all("SELECT 1");
      return c.json({ status: "ok", database: store.db.dialect, time: new Date().toISOString() });
    } catch (e) {
      return c.json({ status: "error", error: e instanceof Error ? e.message : String(e) }, 503);
    }
  });

  // --- configurations ---------------------------------------------------------
  app.get("/configurations", async (c) => {
    const q = query(c, Page);
    if (!q.ok) return q.response;
    return c.json(await store.listConfigurations(q.value));
  });
  app.post("/configurations", async (c) => {
    const b = await jsonBody(c, KnownConfigurationInput);
    if (!b.ok) return b.response;
    const created = await store.createConfiguration(b.value);
    return c.json(created, 201, { Location: `/api/configurations/${created.id}` });
  });
  app.get("/configurations/:id", async (c) => {
    const cfg = await store.getConfiguration(c.req.param("id"));
    return cfg ? c.json(cfg) : notFound(c, "configuration", c.req.param("id"));
  });
  app.put("/configurations/:id", async (c) => {
    const b = await jsonBody(c, KnownConfigurationInput);
    if (!b.ok) return b.response;
    const cfg = await store.updateConfiguration(c.req.param("id"), b.value);
    return cfg ? c.json(cfg) : notFound(c, "configuration", c.req.param("id"));
  });
  app.patch("/configurations/:id", async (c) => {
    const b = await jsonBody(c, ConfigurationPatch);
    if (!b.ok) return b.response;
    const id = c.req.param("id");
    const old = await store.getConfiguration(id);
    if (!old) return notFound(c, "configuration", id);
    const { id: _i, createdAt: _c, updatedAt: _u, corrupt: _x, ...fields } = old;
    const merged = KnownConfigurationInput.safeParse({ ...fields, ...b.value });
    if (!merged.success) return badRequest(c, fieldErrors(merged.error));
    const cfg = await store.updateConfiguration(id, merged.data);
    return cfg ? c.json(cfg) : notFound(c, "configuration", id);
  });
  app.delete("/configurations/:id", async (c) => {
    const ok = await store.deleteConfiguration(c.req.param("id"));
    return ok ? c.body(null, 204) : notFound(c, "configuration", c.req.param("id"));
  });
  const launch = async (c: Context, configurationId: string) => {
    let run;
    try {
      run = await store.createRunFromConfiguration(configurationId);
    } catch (e) {
      if (!(e instanceof RunRefusedError)) throw e;
      return badRequest(c, [{ field: "configuration", reason: e.message }]);
    }
    if (!run) return notFound(c, "configuration", configurationId);
    opts.onQueued?.();
    return c.json(runView(run), 201, { Location: `/api/runs/${run.id}` });
  };
  app.post("/configurations/:id/runs", (c) => launch(c, c.req.param("id")));

  // --- runs -------------------------------------------------------------------
  app.get("/runs", async (c) => {
    const q = query(c, RunFilter);
    if (!q.ok) return q.response;
    const page = await store.listRuns(q.value);
    return c.json({ ...page, items: page.items.map(runView) });
  });
  app.post("/runs", async (c) => {
    const b = await jsonBody(c, RunCreate);
    if (!b.ok) return b.response;
    return launch(c, b.value.configurationId);
  });
  app.get("/runs/:id", async (c) => {
    const run = await store.getRun(c.req.param("id"));
    return run ? c.json(runView(run)) : notFound(c, "run", c.req.param("id"));
  });
  const deleteRun = (what: string, kind?: "simulate") => async (c: Context) => {
    const id = c.req.param("id")!;
    const r = await store.deleteRun(id, kind);
    if (r === "not-found") return notFound(c, what, id);
    if (r === "active") {
      return c.json({
        error:
          `${what} ${id} is still queued or running; cancel it first (POST /api/runs/${id}/cancel)`,
      }, 409);
    }
    return c.body(null, 204);
  };
  app.delete("/runs/:id", deleteRun("run"));
  app.post("/runs/:id/cancel", async (c) => {
    const id = c.req.param("id");
    const run = await store.getRun(id);
    if (!run) return notFound(c, "run", id);
    if (!(await store.cancelRun(id))) {
      return c.json({ error: `run ${id} already ended (${run.status}); nothing to cancel` }, 409);
    }
    return c.json(runView((await store.getRun(id))!));
  });
  const withResults = async (c: Context) => {
    const id = c.req.param("id")!;
    const run = await store.getRun(id);
    if (!run) return { response: notFound(c, "run", id) } as const;
    const results = await store.getResults(id);
    if (!results) {
      return {
        response: c.json({
          error: `run ${id} has no results yet (status ${run.status}${
            run.error ? `: ${run.error}` : ""
          })`,
          status: run.status,
        }, 409),
      } as const;
    }
    return { run, results } as const;
  };
  app.get("/runs/:id/results", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    const { run, results } = r;
    return c.json({
      id: run.id,
      status: run.status,
      feasible: run.feasible,
      overhead: run.overhead,
      budgetRatio: run.budgetRatio,
      budgetBytes: run.budgetBytes,
      baselinePeakBytes: run.baselinePeakBytes,
      peakBytes: run.peakBytes,
      stats: results.stats,
      points: results.points,
      note: results.note,
      hasTrace: results.hasTrace,
    });
  });
  app.get("/runs/:id/memory", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    if (!r.results.memory) {
      return c.json({ error: `run ${r.run.id} recorded no memory timeline` }, 404);
    }
    return c.json(r.results.memory);
  });
  app.get("/runs/:id/loss", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    return c.json({ id: r.run.id, loss: r.results.loss });
  });
  app.get("/runs/:id/trace", async (c) => {
    const id = c.req.param("id");
    if (!(await store.getRun(id))) return notFound(c, "run", id);
    const trace = await store.getTrace(id);
    if (trace === null) return c.json({ error: `run ${id} has no trace` }, 404);
    return c.body(trace, 200, {
      "Content-Type": "application/x-ndjson; charset=utf-8",
      "Content-Disposition": `attachment; filename="${id}.trace.log"`,
    });
  });
  app.get("/runs/:id/events", async (c) => {
    const id = c.req.param("id");
    const first = await store.getRun(id);
    if (!first) return notFound(c, "run", id);
    const pollMs = opts.eventPollMs ?? 250;
    return streamSSE(c, async (stream) => {
      let last = "";
      let n = 0;
      let closed = false;
      stream.onAbort(() => {
        closed = true;
      });
      while (!closed && !opts.signal?.aborted) {
        const run = await store.getRun(id);
        if (!run) break;
        const state = JSON.stringify([run.status, run.progress]);
        if (state !== last) {
          last = state;
          await stream.writeSSE({
            event: "progress",
            id: String(n++),
            data: JSON.stringify({ status: run.status, progress: run.progress, error: run.error }),
          });
        }
        if (!["queued", "running"].includes(run.status)) {
          await stream.writeSSE({ event: "end", data: JSON.stringify(runView(run)) });
          break;
        }
        await stream.sleep(pollMs);
      }
    });
  });

  // --- traces -----------------------------------------------------------------
  app.get("/traces", async (c) => {
    const q = query(c, Page);
    if (!q.ok) return q.response;
    const page = await store.listRuns({ ...q.value, kind: "simulate" });
    return c.json({ ...page, items: page.items.map(runView) });
  });
  app.delete("/traces/:id", deleteRun("trace simulation", "simulate"));
  app.post("/traces", async (c) => {
    const q = query(c, TraceUploadQuery);
    if (!q.ok) return q.response;
    const unknown = unknownTracePolicies(q.value.policies ?? []);
    if (unknown.length) return badRequest(c, unknown);
    let text: string;
    let fileName: string | undefined;
    const type = c.req.header("content-type") ?? "";
    if (type.startsWith("multipart/form-data")) {
      const form = await c.req.parseBody();
      const f = form.trace;
      if (!(f instanceof File)) {
        return badRequest(c, [{
          field: "trace",
          reason: "attach the trace as a file field 'trace'",
        }]);
      }
      text = await f.text();
      fileName = f.name;
    } else {
      text = await c.req.text();
    }
    const bad = checkTraceText(text);
    if (bad) return badRequest(c, [bad]);
    const base = (fileName ?? "trace").replace(/\.[a-z]+$/i, "").toLowerCase()
      .replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 60) || "trace";
    const run = await store.createSimulation({
      kind: "simulate",
      name: q.value.name ?? base,
      policies: q.value.policies ?? [...DEFAULT_SIM_POLICIES],
      ratios: q.value.ratios ?? [...DEFAULT_RATIOS],
    }, text);
    opts.onQueued?.();
    return c.json(runView(run), 201, { Location: `/api/runs/${run.id}` });
  });

  sweepRoutes(app, store, opts.onQueued); // named sweeps (sweeps.ts)

  // --- comparison ---------------------------------------------------------------
  app.get("/compare/models", async (c) => c.json({ models: await store.comparableModels() }));
  app.get("/compare", async (c) => {
    const q = query(c, CompareQuery);
    if (!q.ok) return q.response;
    return c.json(await store.compare(q.value));
  });

  // --- bench ingestion --------------------------------------------------------------
  app.get("/bench/schema", (c) => c.json(z.toJSONSchema(BenchUpload, { io: "input" })));
  app.post("/bench", async (c) => {
    const b = await jsonBody(c, BenchUpload);
    if (!b.ok) return b.response;
    const { uploadId, runIds } = await store.ingestBench(b.value);
    return c.json({ uploadId, runs: runIds.length, runIds }, 201);
  });

  return app;
}
