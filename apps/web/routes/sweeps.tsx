/**
 * Pages `/sweeps` (define and launch a named sweep: models x presets x policies x
 * ratios x repeats; the list with progress) and `/sweeps/:id` (its progress, its
 * runs, links to Compare filtered by it).
 *
 * @module
 */

import { InfeasibleBadge, OverheadCell } from "./runs.tsx";
import {
  DEFAULT_RUN_STEPS,
  type Run,
  RunRefusedError,
  type Sweep,
  SweepInput,
  Sweeps,
  sweepSize,
} from "@libra/api";
import type { Context, Hono } from "hono";
import type { VNode } from "preact";
import { LIVE_COST_MODELS, zooPresets } from "../components/catalog.ts";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import { ExportLinks } from "../components/export.tsx";
import { formatNumber, formatTime } from "../components/format.ts";
import { Layout, StatusBadge } from "../components/layout.tsx";

type Values = Record<string, string | string[]>;

const DEFAULTS: Values = {
  name: "",
  models: ["mlp"],
  presets: ["tiny"],
  policies: ["dtr-eq", "lru"],
  ratios: "1,0.8,0.6,0.5,0.4",
  repeats: "3",
  steps: String(DEFAULT_RUN_STEPS),
  device: "cpu",
  costModel: "analytic",
  seed: "0",
};

const arr = (v: string | string[] | undefined) => (Array.isArray(v) ? v : v ? [v] : []);
const str = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] ?? "" : v ?? "");

/** The form's fields as the API's sweep input (numbers parsed; bad text kept for the message). */
export function sweepFromForm(v: Values): unknown {
  const num = (s: string) => (s.trim() === "" ? undefined : Number(s));
  return {
    name: str(v.name),
    models: arr(v.models),
    presets: arr(v.presets),
    policies: arr(v.policies),
    ratios: str(v.ratios).split(",").map((x) => x.trim()).filter((x) => x).map(Number),
    repeats: num(str(v.repeats)),
    steps: num(str(v.steps)),
    device: str(v.device) || "cpu",
    costModel: str(v.costModel) || "analytic",
    seed: num(str(v.seed)),
  };
}

function Progress(p: { s: Sweep }): VNode {
  const pr = p.s.progress;
  return (
    <span class="sweep-progress" data-progress={`${pr.ended}/${pr.total}`}>
      <progress max={pr.total || 1} value={pr.ended}></progress> {pr.ended}/{pr.total} ended
      {pr.running ? ` · ${pr.running} running` : ""}
      {pr.failed ? ` · ${pr.failed} failed` : ""}
      {pr.canceled ? ` · ${pr.canceled} canceled` : ""}
    </span>
  );
}

function Checks(p: { name: string; options: string[]; checked: string[] }): VNode {
  return (
    <span class="checks">
      {p.options.map((o) => (
        <label key={o}>
          <input type="checkbox" name={p.name} value={o} checked={p.checked.includes(o)} /> {o}
        </label>
      ))}
    </span>
  );
}

/** Registers the pages. */
export function register(app: Hono, ctx: WebContext): void {
  const sweeps = new Sweeps(ctx.lab.store);
  const render = async (c: Context, values: Values, errors: Record<string, string>) => {
    const write = level(c, ctx) === "write";
    const list = await sweeps.list();
    const presets = [...new Set(Object.values(await zooPresets()).flat())];
    const field = (k: string, label: string, input: VNode, hint?: string) => (
      <div class={errors[k] ? "field invalid" : "field"} data-field={k}>
        <span class="label">{label}</span>
        {input}
        {errors[k]
          ? <span class="error" role="alert">{errors[k]}</span>
          : hint && <span class="hint">{hint}</span>}
      </div>
    );
    const live = list.some((s) => s.progress.ended < s.progress.total);
    return page(
      c,
      <Layout title="Sweeps" active="sweeps" canWrite={write} refresh={live && !errors.name}>
        <h1>Sweeps</h1>
        <section class="card">
          <h2>New sweep</h2>
          <form method="post" action="/sweeps" class="sweep-form">
            <fieldset disabled={!write}>
              {!write && (
                <p class="notice">
                  <a href="/login?next=/sweeps">Log in</a> to launch sweeps.
                </p>
              )}
              {field(
                "name",
                "Name",
                <input
                  name="name"
                  value={str(values.name)}
                  placeholder="policies at half memory"
                />,
              )}
              {field(
                "models",
                "Models",
                <Checks name="models" options={ctx.catalog.models} checked={arr(values.models)} />,
              )}
              {field(
                "presets",
                "Presets",
                <Checks
                  name="presets"
                  options={presets.length ? presets : ["tiny"]}
                  checked={arr(values.presets)}
                />,
                "each model with each preset",
              )}
              {field(
                "policies",
                "Policies",
                <Checks
                  name="policies"
                  options={ctx.catalog.policies}
                  checked={arr(values.policies)}
                />,
              )}
              <div class="grid">
                {field(
                  "ratios",
                  "Budget ratios",
                  <input name="ratios" value={str(values.ratios)} />,
                  "comma-separated, 0 < r ≤ 1",
                )}
                {field(
                  "repeats",
                  "Repeats",
                  <input name="repeats" value={str(values.repeats)} inputMode="numeric" />,
                  "runs per cell; their spread shows in Compare",
                )}
                {field(
                  "steps",
                  "Steps",
                  <input name="steps" value={str(values.steps)} inputMode="numeric" />,
                )}
                {field(
                  "device",
                  "Device",
                  <select name="device">
                    {["cpu", "cuda"].map((d) => (
                      <option value={d} selected={str(values.device) === d}>{d}</option>
                    ))}
                  </select>,
                )}
                {field(
                  "costModel",
                  "Cost model",
                  <select name="costModel">
                    {LIVE_COST_MODELS.map((m) => (
                      <option value={m} selected={str(values.costModel) === m}>{m}</option>
                    ))}
                  </select>,
                )}
                {field("seed", "Seed", <input name="seed" value={str(values.seed)} />)}
              </div>
              {errors.body && <p class="error" role="alert">{errors.body}</p>}
              <div class="actions">
                <button type="submit" class="primary">Launch the sweep</button>
              </div>
            </fieldset>
          </form>
        </section>
        <h2>Sweeps</h2>
        {list.length === 0 ? <p class="empty">None yet.</p> : (
          <>
            <table class="sweeps" data-export="sweeps">
              <thead>
                <tr>
                  <th>Sweep</th>
                  <th>Name</th>
                  <th class="num">Runs</th>
                  <th>Progress</th>
                  <th>Created (UTC)</th>
                </tr>
              </thead>
              <tbody>
                {list.map((s) => (
                  <tr data-sweep={s.id}>
                    <td>
                      <a href={`/sweeps/${s.id}`}>{s.id}</a>
                    </td>
                    <td>{s.name}</td>
                    <td class="num">{s.progress.total}</td>
                    <td data-value={`${s.progress.ended}/${s.progress.total}`}>
                      <Progress s={s} />
                    </td>
                    <td data-value={new Date(s.createdAt).toISOString()}>
                      {formatTime(s.createdAt)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <ExportLinks url={c.req.url} name="sweeps" />
          </>
        )}
      </Layout>,
      Object.keys(errors).length ? 400 : 200,
    );
  };

  app.get("/sweeps", (c) => render(c, DEFAULTS, {}));

  app.post("/sweeps", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/sweeps", 303);
    const form = await c.req.parseBody({ all: true });
    const values: Values = {};
    for (const [k, v] of Object.entries(form)) {
      const xs = (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === "string");
      values[k] = ["models", "presets", "policies"].includes(k) ? xs : xs[0] ?? "";
    }
    const parsed = SweepInput.safeParse(sweepFromForm(values));
    if (!parsed.success) {
      const errors: Record<string, string> = {};
      for (const i of parsed.error.issues) {
        const k = String(i.path[0] ?? "body");
        errors[k] ??= i.message;
      }
      return render(c, values, errors);
    }
    // the lab refuses sweeps whose runs are above its memory limit
    const s = await sweeps.create(parsed.data).catch((e) => {
      if (e instanceof RunRefusedError) return e;
      throw e;
    });
    if (s instanceof RunRefusedError) return render(c, values, { models: s.message });
    ctx.lab.worker?.poke();
    return c.redirect(`/sweeps/${s.id}`, 303);
  });

  app.get("/sweeps/:id", async (c) => {
    const s = await sweeps.get(c.req.param("id"));
    const write = level(c, ctx) === "write";
    if (!s) {
      return page(
        c,
        <Layout title="Sweep not found" active="sweeps" canWrite={write}>
          <h1>Sweep not found</h1>
          <p>
            There is no sweep {c.req.param("id")}. <a href="/sweeps">All sweeps</a>
          </p>
        </Layout>,
        404,
      );
    }
    const ids = await sweeps.runIds(s.id);
    const runs = (await Promise.all(ids.map((id) => ctx.lab.store.getRun(id)))).filter((
      r,
    ): r is Run => r !== null);
    const live = s.progress.ended < s.progress.total;
    const sp = s.spec;
    return page(
      c,
      <Layout title={`Sweep ${s.name}`} active="sweeps" canWrite={write} refresh={live}>
        <p class="crumbs">
          <a href="/sweeps">Sweeps</a> / {s.id}
        </p>
        <h1>{s.name}</h1>
        <p class="meta">
          {sp.models.join(", ")} × presets {sp.presets.join(", ")} × {sp.policies.join(", ")}{" "}
          × ratios {sp.ratios.join(", ")} × {sp.repeats} repeats = {sweepSize(sp)} runs of{" "}
          {sp.steps} steps on {sp.device}, cost model {sp.costModel} · created{" "}
          {formatTime(s.createdAt)} UTC
        </p>
        <p class="live">
          <Progress s={s} />
        </p>
        <p class="compare-links">
          Compare this sweep:{" "}
          {sp.models.flatMap((m) => sp.presets.map((p) => `${m}/${p}`)).map((k, i) => (
            <>
              {i > 0 && " · "}
              <a href={`/compare?model=${encodeURIComponent(k)}&sweep=${s.id}`}>{k}</a>
            </>
          ))}
        </p>
        <div class="table-scroll">
          <table class="runs" data-export="sweep-runs">
            <thead>
              <tr>
                <th>Run</th>
                <th>Model</th>
                <th>Policy</th>
                <th class="num">Budget ratio</th>
                <th class="num">Repeat</th>
                <th>Status</th>
                <th class="num">Overhead</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr data-run={r.id}>
                  <td>
                    <a href={`/runs/${r.id}`}>{r.id}</a>
                  </td>
                  <td>{r.model}/{r.preset}</td>
                  <td>{r.policy}</td>
                  <td class="num" data-value={r.budgetRatio ?? ""}>
                    {formatNumber(r.budgetRatio, 2)}
                  </td>
                  <td class="num">{String((r.spec as { repeat?: number }).repeat ?? "")}</td>
                  <td>
                    <StatusBadge status={r.status} />
                    {r.feasible === false && <InfeasibleBadge reason={r.reason} />}
                  </td>
                  <OverheadCell run={r} />
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <ExportLinks url={c.req.url} name="sweep-runs" />
      </Layout>,
    );
  });
}
