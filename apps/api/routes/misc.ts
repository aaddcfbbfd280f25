/** Sub-apps `/health`, `/compare` and `/bench`. @module */

import { Hono } from "hono";
import { z } from "zod";
import { BenchUpload, CompareQuery } from "../schemas.ts";
import { validate } from "../validate.ts";
import type { ApiDeps } from "./shared.ts";

/** The health sub-app (mount at `/health`; the one route open without a token). */
export function healthApp(deps: ApiDeps): Hono {
  const app = new Hono();
  app.get("/", async (c) => {
    try {
      await deps.store.db.all("SELECT 1");
      return c.json({
        status: "ok",
        database: deps.store.db.dialect,
        time: new Date().toISOString(),
      });
    } catch (e) {
      return c.json({ status: "error", error: e instanceof Error ? e.message : String(e) }, 503);
    }
  });
  return app;
}

/** The comparison sub-app (mount at `/compare`). */
export function compareApp(deps: ApiDeps): Hono {
  const app = new Hono();
  app.get("/models", async (c) => c.json({ models: await deps.store.comparableModels() }));
  app.get("/", validate("query", CompareQuery), async (c) => {
    return c.json(await deps.store.compare(c.req.valid("query")));
  });
  return app;
}

/** The bench ingestion sub-app (mount at `/bench`). */
export function benchApp(deps: ApiDeps): Hono {
  const app = new Hono();
  app.get("/schema", (c) => c.json(z.toJSONSchema(BenchUpload, { io: "input" })));
  app.post("/", validate("json", BenchUpload), async (c) => {
    const { uploadId, runIds } = await deps.store.ingestBench(c.req.valid("json"));
    return c.json({ uploadId, runs: runIds.length, runIds }, 201);
  });
  return app;
}
