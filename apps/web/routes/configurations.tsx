/** Page `/configurations`: list, create (form with validation) and launch. @module */

import { type Configuration, RunRefusedError } from "@libra/api";
import type { Context, Hono } from "hono";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import {
  type ConfigFormValues,
  EMPTY_FORM,
  parseConfigForm,
} from "../components/config_form_data.ts";
import { formatBytes, formatNumber, formatTime } from "../components/format.ts";
import { Layout } from "../components/layout.tsx";
import { ConfigForm } from "../islands/config_form.tsx";

/** Registers the page. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  const render = async (
    c: Context,
    values: ConfigFormValues,
    errors: Record<string, string>,
    status: 200 | 400,
  ) => {
    const list = await store.listConfigurations({ limit: 100, offset: 0 });
    const write = level(c, ctx) === "write";
    return page(
      c,
      <Layout title="Configurations" active="configurations" canWrite={write}>
        <h1>Configurations</h1>
        <section class="card">
          <h2>New configuration</h2>
          <ConfigForm
            values={values}
            errors={errors}
            models={ctx.catalog.models}
            policies={ctx.catalog.policies}
            canWrite={write}
          />
        </section>
        <section>
          <h2>Saved ({list.total})</h2>
          {list.items.length === 0 ? <p class="empty">None yet.</p> : (
            <table class="configs">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Model</th>
                  <th>Policy</th>
                  <th>Budget</th>
                  <th class="num">Steps</th>
                  <th>Created (UTC)</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                {list.items.map((cfg: Configuration) => (
                  <tr id={cfg.id} data-config={cfg.name}>
                    <td>{cfg.name}</td>
                    <td>{cfg.model}/{cfg.preset} · {cfg.device}</td>
                    <td>{cfg.policy} · {cfg.costModel}</td>
                    <td>
                      {cfg.budgetRatio !== null
                        ? `${formatNumber(cfg.budgetRatio, 2)}×`
                        : formatBytes(cfg.budgetBytes)}
                    </td>
                    <td class="num">{cfg.steps}</td>
                    <td>{formatTime(cfg.createdAt)}</td>
                    <td class="row-actions">
                      <form method="post" action={`/configurations/${cfg.id}/launch`}>
                        <button type="submit" disabled={!write} class="primary small">
                          Launch run
                        </button>
                      </form>
                      <form method="post" action={`/configurations/${cfg.id}/delete`}>
                        <button type="submit" disabled={!write} class="small">Delete</button>
                      </form>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
      </Layout>,
      status,
    );
  };

  app.get("/configurations", (c) => render(c, EMPTY_FORM, {}, 200));

  app.post("/configurations", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/configurations", 303);
    const form = await c.req.parseBody();
    const values: ConfigFormValues = {};
    for (const [k, v] of Object.entries(form)) if (typeof v === "string") values[k] = v;
    const parsed = parseConfigForm(values);
    if (!parsed.ok) {
      const errors = Object.fromEntries(parsed.errors.map((e) => [e.field, e.reason]));
      return render(c, values, errors, 400);
    }
    const cfg = await store.createConfiguration(parsed.value);
    if (values.launch) {
      // the lab refuses runs above its memory limit (saved, not launched)
      const run = await store.createRunFromConfiguration(cfg.id).catch((e) => {
        if (e instanceof RunRefusedError) return e;
        throw e;
      });
      if (run instanceof RunRefusedError) return render(c, values, { body: run.message }, 400);
      ctx.lab.worker?.poke();
      return c.redirect(`/runs/${run!.id}`, 303);
    }
    return c.redirect(`/configurations#${cfg.id}`, 303);
  });

  app.post("/configurations/:id/launch", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/configurations", 303);
    const run = await store.createRunFromConfiguration(c.req.param("id")).catch((e) => {
      if (e instanceof RunRefusedError) return e;
      throw e;
    });
    if (run instanceof RunRefusedError) return render(c, EMPTY_FORM, { body: run.message }, 400);
    if (!run) return c.redirect("/configurations", 303);
    ctx.lab.worker?.poke();
    return c.redirect(`/runs/${run.id}`, 303);
  });

  app.post("/configurations/:id/delete", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/configurations", 303);
    await store.deleteConfiguration(c.req.param("id"));
    return c.redirect("/configurations", 303);
  });
}
