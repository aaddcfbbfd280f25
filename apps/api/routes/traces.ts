/** Sub-app `/traces`: upload a trace (queues its simulation), list, delete. @module */

import { Hono } from "hono";
import { BodyTooLargeError, tooLarge } from "../body.ts";
import { Page } from "../schemas.ts";
import { acceptTraceUpload } from "../trace_upload.ts";
import { badRequest, validate } from "../validate.ts";
import { deleteRunHandler } from "./runs.ts";
import { type ApiDeps, runView } from "./shared.ts";

/** The traces sub-app (mount at `/traces`). */
export function tracesApp(deps: ApiDeps): Hono {
  const { store } = deps;
  const app = new Hono();
  app.get("/", validate("query", Page), async (c) => {
    const page = await store.listRuns({ ...c.req.valid("query"), kind: "simulate" });
    return c.json({ ...page, items: page.items.map(runView) });
  });
  app.delete("/:id", deleteRunHandler(deps, "trace simulation", "simulate"));
  app.post("/", async (c) => {
    let r;
    try {
      r = await acceptTraceUpload(store, c.req.raw, {
        limit: deps.limits.trace,
        optionsFrom: "query",
      });
    } catch (e) {
      if (e instanceof BodyTooLargeError) return tooLarge(c, e);
      throw e;
    }
    if (!r.ok) return badRequest(c, r.issues);
    deps.onQueued?.();
    return c.json(runView(r.run), 201, { Location: `/api/runs/${r.run.id}` });
  });
  return app;
}
