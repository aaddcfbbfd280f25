/** Sub-app `/configurations`: create, read, replace, merge, delete, launch. @module */

import { Hono } from "hono";
import type { Context } from "hono";
import { KnownConfigurationInput } from "../catalog.ts";
import { ConfigurationPatch, fieldErrors, Page } from "../schemas.ts";
import { RunRefusedError } from "../store.ts";
import { badRequest, validate } from "../validate.ts";
import { type ApiDeps, notFound, runView } from "./shared.ts";

/**
 * Queues a training run of configuration `configurationId` (201 with the run), or
 * answers why not: 404 for an unknown configuration, 400 when the admission check
 * (the memory estimate) refuses it.
 */
export async function launchRun(
  c: Context,
  deps: ApiDeps,
  configurationId: string,
): Promise<Response> {
  let run;
  try {
    run = await deps.store.createRunFromConfiguration(configurationId);
  } catch (e) {
    if (!(e instanceof RunRefusedError)) throw e;
    return badRequest(c, [{ field: "configuration", reason: e.message }]);
  }
  if (!run) return notFound(c, "configuration", configurationId);
  deps.onQueued?.();
  return c.json(runView(run), 201, { Location: `/api/runs/${run.id}` });
}

/** The configurations sub-app (mount at `/configurations`). */
export function configurationsApp(deps: ApiDeps): Hono {
  const { store } = deps;
  const app = new Hono();
  app.get("/", validate("query", Page), async (c) => {
    return c.json(await store.listConfigurations(c.req.valid("query")));
  });
  app.post("/", validate("json", KnownConfigurationInput), async (c) => {
    const created = await store.createConfiguration(c.req.valid("json"));
    return c.json(created, 201, { Location: `/api/configurations/${created.id}` });
  });
  app.get("/:id", async (c) => {
    const cfg = await store.getConfiguration(c.req.param("id"));
    return cfg ? c.json(cfg) : notFound(c, "configuration", c.req.param("id"));
  });
  app.put("/:id", validate("json", KnownConfigurationInput), async (c) => {
    const cfg = await store.updateConfiguration(c.req.param("id"), c.req.valid("json"));
    return cfg ? c.json(cfg) : notFound(c, "configuration", c.req.param("id"));
  });
  app.patch("/:id", validate("json", ConfigurationPatch), async (c) => {
    const id = c.req.param("id");
    const old = await store.getConfiguration(id);
    if (!old) return notFound(c, "configuration", id);
    const { id: _i, createdAt: _c, updatedAt: _u, corrupt: _x, ...fields } = old;
    const merged = KnownConfigurationInput.safeParse({ ...fields, ...c.req.valid("json") });
    if (!merged.success) return badRequest(c, fieldErrors(merged.error));
    const cfg = await store.updateConfiguration(id, merged.data);
    return cfg ? c.json(cfg) : notFound(c, "configuration", id);
  });
  app.delete("/:id", async (c) => {
    const ok = await store.deleteConfiguration(c.req.param("id"));
    return ok ? c.body(null, 204) : notFound(c, "configuration", c.req.param("id"));
  });
  app.post("/:id/runs", (c) => launchRun(c, deps, c.req.param("id")));
  return app;
}
