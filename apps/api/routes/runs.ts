/**
 * Sub-app `/runs`: list, launch, read, delete, cancel, and a run's results, memory
 * timeline, loss, trace and event stream. @module
 */

import { Hono } from "hono";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { RunCreate, RunFilter } from "../schemas.ts";
import type { RunKind } from "../store.ts";
import { validate } from "../validate.ts";
import { launchRun } from "./configurations.ts";
import { type ApiDeps, notFound, runView } from "./shared.ts";

/**
 * A handler that deletes the ended run `:id` (of `kind`, when given), calling it `what`
 * in its answers: 204, 404, or 409 while it is queued or running.
 */
export function deleteRunHandler(
  deps: ApiDeps,
  what: string,
  kind?: RunKind,
): (c: Context) => Promise<Response> {
  return async (c) => {
    const id = c.req.param("id")!;
    const r = await deps.store.deleteRun(id, kind);
    if (r === "not-found") return notFound(c, what, id);
    if (r === "active") {
      return c.json({
        error:
          `${what} ${id} is still queued or running; cancel it first (POST /api/runs/${id}/cancel)`,
      }, 409);
    }
    return c.body(null, 204);
  };
}

/** The runs sub-app (mount at `/runs`). */
export function runsApp(deps: ApiDeps): Hono {
  const { store } = deps;
  const app = new Hono();
  app.get("/", validate("query", RunFilter), async (c) => {
    const page = await store.listRuns(c.req.valid("query"));
    return c.json({ ...page, items: page.items.map(runView) });
  });
  app.post("/", validate("json", RunCreate), (c) => {
    return launchRun(c, deps, c.req.valid("json").configurationId);
  });
  app.get("/:id", async (c) => {
    const run = await store.getRun(c.req.param("id"));
    return run ? c.json(runView(run)) : notFound(c, "run", c.req.param("id"));
  });
  app.delete("/:id", deleteRunHandler(deps, "run"));
  app.post("/:id/cancel", async (c) => {
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
  app.get("/:id/results", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    const { run, results } = r;
    return c.json({
      id: run.id,
      status: run.status,
      feasible: run.feasible,
      reason: run.reason,
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
  app.get("/:id/memory", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    if (!r.results.memory) {
      return c.json({ error: `run ${r.run.id} recorded no memory timeline` }, 404);
    }
    return c.json(r.results.memory);
  });
  app.get("/:id/loss", async (c) => {
    const r = await withResults(c);
    if ("response" in r) return r.response;
    return c.json({ id: r.run.id, loss: r.results.loss });
  });
  app.get("/:id/trace", async (c) => {
    const id = c.req.param("id");
    if (!(await store.getRun(id))) return notFound(c, "run", id);
    const trace = await store.getTrace(id);
    if (trace === null) return c.json({ error: `run ${id} has no trace` }, 404);
    return c.body(trace, 200, {
      "Content-Type": "application/x-ndjson; charset=utf-8",
      "Content-Disposition": `attachment; filename="${id}.trace.log"`,
    });
  });
  app.get("/:id/events", async (c) => {
    const id = c.req.param("id");
    const first = await store.getRun(id);
    if (!first) return notFound(c, "run", id);
    return streamSSE(c, async (stream) => {
      let last = "";
      let n = 0;
      let closed = false;
      stream.onAbort(() => {
        closed = true;
      });
      while (!closed && !deps.signal?.aborted) {
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
        await stream.sleep(deps.eventPollMs);
      }
    });
  });
  return app;
}
