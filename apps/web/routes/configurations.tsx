/**
 * Page `/configurations`: list, create (form with validation against the server's
 * lists of models, presets, policies and cost models), clone with edits
 * (`?clone=<id>`), launch.
 *
 * @module
 */

import { type Configuration, RunRefusedError } from "@libra/api";
import type { Context, Hono } from "hono";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import { LIVE_COST_MODELS, zooPresets } from "../components/catalog.ts";
import {
  type ConfigFormValues,
  EMPTY_FORM,
  type FormChoices,
  formValuesOf,
} from "../components/config_form_data.ts";
import { parseConfigFormOnServer } from "../components/config_form_server.ts";
import { ExportLinks } from "../components/export.tsx";
import { formatBytes, formatNumber, formatTime } from "../components/format.ts";
import { Layout } from "../components/layout.tsx";
import { ConfigForm } from "../islands/config_form.tsx";

/** Registers the page. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  const choices = async (): Promise<FormChoices> => ({
    models: ctx.catalog.models,
    presets: await zooPresets(),
    policies: ctx.catalog.policies,
    costModels: [...LIVE_COST_MODELS],
  });
  const render = async (
    c: Context,
    values: ConfigFormValues,
    errors: Record<string, string>,
    status: 200 | 400,
    cloneOf: string | null = null,
  ) => {
    const list = await store.listConfigurations({ limit: 100, offset: 0 });
    const write = level(c, ctx) === "write";
    return page(
      c,
      <Layout title="Configurations" active="configurations" canWrite={write}>
        <h1>Configurations</h1>
        <section class="card" id="new">
          <h2>{cloneOf ? "Clone a configuration" : "New configuration"}</h2>
          <ConfigForm
            values={values}
            errors={errors}
            choices={await choices()}
            cloneOf={cloneOf}
            canWrite={write}
          />
        </section>
        <section>
          <h2>Saved ({list.total})</h2>
          {list.items.length === 0
            ? <p class="empty">None yet.</p>
            : (
              <table class="configs" data-export="configurations">
                <thead>
                  <tr>
                    <th>Name</th>
                    <th>Model</th>
                    <th>Policy</th>
                    <th>Budget</th>
                    <th class="num">Steps</th>
                    <th class="num">Thrash limit</th>
                    <th>Created (UTC)</th>
                    <th data-no-export></th>
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
                      <td class="num" data-value={cfg.overheadLimit}>
                        {formatNumber(cfg.overheadLimit, 2)}
                      </td>
                      <td>{formatTime(cfg.createdAt)}</td>
                      <td class="row-actions" data-no-export>
                        <form method="post" action={`/configurations/${cfg.id}/launch`}>
                          <button type="submit" disabled={!write} class="primary small">
                            Launch run
                          </button>
                        </form>
                        <a class="small button" href={`/configurations?clone=${cfg.id}#new`}>
                          Clone
                        </a>
                        <form method="post" action={`/configurations/${cfg.id}/delete`}>
                          <button type="submit" disabled={!write} class="small">Delete</button>
                        </form>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          {list.items.length > 0 && <ExportLinks url={c.req.url} name="configurations" />}
        </section>
      </Layout>,
      status,
    );
  };

  app.get("/configurations", async (c) => {
    const id = c.req.query("clone");
    const from = id ? await store.getConfiguration(id) : null;
    if (from) return render(c, formValuesOf(from, `${from.name} (copy)`), {}, 200, from.id);
    const values = { ...EMPTY_FORM };
    const { models, policies } = ctx.catalog;
    if (models.length && !models.includes(values.model!)) values.model = models[0]!;
    if (policies.length && !policies.includes(values.policy!)) values.policy = policies[0]!;
    return render(c, values, id ? { body: `no configuration ${id} to clone` } : {}, 200);
  });

  app.post("/configurations", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/configurations", 303);
    const form = await c.req.parseBody();
    const values: ConfigFormValues = {};
    for (const [k, v] of Object.entries(form)) if (typeof v === "string") values[k] = v;
    const parsed = parseConfigFormOnServer(values, await choices());
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
