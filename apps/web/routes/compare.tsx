/**
 * Page `/compare`: overhead against budget ratio, one line per policy, for a model,
 * filtered by sweep, steps, cost model, device and date (repeats show as intervals);
 * and runs picked from a list, overlaid (memory over time, loss). Every view is a
 * GET form, so its URL is its permalink.
 *
 * @module
 */

import { CompareQuery, type Run, Sweeps, thinSamples } from "@libra/api";
import type { Hono } from "hono";
import type { VNode } from "preact";
import { level, page, type WebContext } from "../components/context.ts";
import { LIVE_COST_MODELS } from "../components/catalog.ts";
import { ExportLinks } from "../components/export.tsx";
import { formatNumber, formatTime, infeasibleLabel } from "../components/format.ts";
import { Layout } from "../components/layout.tsx";
import { OverheadChart } from "../islands/overhead_chart.tsx";
import { type OverlayRun, RunOverlay } from "../islands/run_overlay.tsx";
import { OverheadCell, SmallestTable } from "./runs.tsx";

/** Runs overlaid at most. */
export const MAX_OVERLAY = 8;
/** Memory samples per overlaid run (peaks kept). */
const OVERLAY_SAMPLES = 600;

const key6 = (r: number) => r.toFixed(6);

/** The newest succeeded run behind each (policy, ratio) point of `model/preset`. */
function runsByPoint(runs: Run[], preset: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of runs) {
    if (r.status !== "succeeded" || (preset !== undefined && r.preset !== preset)) continue;
    if (r.kind === "simulate") {
      const spec = r.spec as { policies?: string[]; ratios?: number[] };
      for (const p of spec.policies ?? []) {
        for (const x of spec.ratios ?? []) {
          const k = `${p}@${key6(x)}`;
          if (!out.has(k)) out.set(k, r.id);
        }
      }
    } else if (r.budgetRatio !== null) {
      const k = `${r.policy}@${key6(r.budgetRatio)}`;
      if (!out.has(k)) out.set(k, r.id); // newest first: keep the first seen
    }
  }
  return out;
}

/** A run's label in legends and tables. */
export function runLabel(r: Run): string {
  const ratio = r.budgetRatio !== null ? ` @${formatNumber(r.budgetRatio, 2)}` : "";
  return `${r.policy}${ratio} · ${r.id.slice(-6)}`;
}

function PickTable(p: { runs: Run[]; picked: Set<string> }): VNode {
  return (
    <div class="table-scroll">
      <table class="runs pick" data-export="runs">
        <thead>
          <tr>
            <th data-no-export>Overlay</th>
            <th>Run</th>
            <th>Kind</th>
            <th>Policy</th>
            <th class="num">Budget ratio</th>
            <th class="num">Steps</th>
            <th class="num">Overhead</th>
            <th>Created (UTC)</th>
          </tr>
        </thead>
        <tbody>
          {p.runs.map((r) => {
            const steps = (r.spec as { steps?: number }).steps;
            return (
              <tr data-run={r.id}>
                <td data-no-export>
                  <input
                    type="checkbox"
                    name="run"
                    value={r.id}
                    checked={p.picked.has(r.id)}
                    aria-label={`overlay ${r.id}`}
                  />
                </td>
                <td>
                  <a href={`/runs/${r.id}`}>{r.id}</a>
                </td>
                <td>{r.kind}</td>
                <td>{r.policy}</td>
                <td class="num">{formatNumber(r.budgetRatio, 2)}</td>
                <td class="num">{typeof steps === "number" ? steps : "—"}</td>
                <OverheadCell run={r} />
                <td>{formatTime(r.createdAt)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** The comparison filters of the query (dates as YYYY-MM-DD, UTC); bad ones are named. */
export function filters(
  q: Record<string, string>,
): { value: CompareFilterValues; errors: string[] } {
  const value: CompareFilterValues = {};
  const errors: string[] = [];
  if (q.sweep) value.sweep = q.sweep;
  if (q.steps) {
    const n = Number(q.steps);
    if (Number.isInteger(n) && n > 0) value.steps = n;
    else errors.push(`steps=${JSON.stringify(q.steps)} is not a positive integer`);
  }
  if (q.costModel) value.costModel = q.costModel;
  if (q.device) value.device = q.device;
  for (const k of ["from", "to"] as const) {
    if (!q[k]) continue;
    const t = Date.parse(`${q[k]}T00:00:00Z`);
    if (Number.isNaN(t)) errors.push(`${k}=${JSON.stringify(q[k])} is not a date (YYYY-MM-DD)`);
    else value[k] = k === "to" ? t + 86_400_000 : t; // "to" includes that day
  }
  return { value, errors };
}

/** Filters beyond model, preset and source. */
export interface CompareFilterValues {
  sweep?: string;
  steps?: number;
  costModel?: string;
  device?: string;
  from?: number;
  to?: number;
}

/** Registers the page. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  const sweeps = new Sweeps(store);
  app.get("/compare", async (c) => {
    const models = await store.comparableModels();
    const key = c.req.query("model") ?? (models[0] ? `${models[0].model}/${models[0].preset}` : "");
    const [model, preset] = key.split("/");
    const source = c.req.query("source") || undefined;
    const q = CompareQuery.safeParse({ model, preset, source });
    const f = filters(c.req.query());
    const sweepList = await sweeps.list();
    const cmp = q.success ? { policies: await sweeps.compare({ ...q.data, ...f.value }) } : null;
    const inSweep = f.value.sweep ? new Set(await sweeps.runIds(f.value.sweep)) : null;
    const candidates = q.success
      ? (await store.listRuns({ model: q.data.model, limit: 200, offset: 0 })).items.filter((r) =>
        !inSweep || inSweep.has(r.id)
      )
      : [];
    const byPoint = runsByPoint(candidates, q.success ? q.data.preset : undefined);
    const policies = (cmp?.policies ?? []).map((p) => ({
      policy: p.policy,
      points: p.points.map((x) => {
        const id = byPoint.get(`${p.policy}@${key6(x.ratio)}`);
        return { ...x, href: id ? `/runs/${id}` : null };
      }),
    }));
    const ratios = [...new Set(policies.flatMap((p) => p.points.map((x) => x.ratio)))].sort((
      a,
      b,
    ) => a - b);

    // runs to overlay: ?run=a&run=b (the checkboxes), kept in the URL
    const pickedIds = [...new Set(c.req.queries("run") ?? [])].slice(0, MAX_OVERLAY);
    const picked = (await Promise.all(pickedIds.map((id) => store.getRun(id)))).filter((
      r,
    ): r is Run => r !== null);
    const overlay: OverlayRun[] = await Promise.all(picked.map(async (r) => {
      const res = await store.getResults(r.id);
      return {
        id: r.id,
        label: runLabel(r),
        budgetBytes: r.budgetBytes,
        samples: res?.memory ? thinSamples(res.memory.samples, OVERLAY_SAMPLES) : [],
        loss: (res?.loss ?? []).map((l) => ({ step: l.step, loss: l.loss })),
      };
    }));
    const pickable = candidates.filter((r) =>
      r.status === "succeeded" && r.kind !== "simulate" &&
      (!q.success || q.data.preset === undefined || r.preset === q.data.preset)
    ).slice(0, 50);
    const permalink = new URL(c.req.url);
    return page(
      c,
      <Layout title="Compare" active="compare" canWrite={level(c, ctx) === "write"}>
        <h1>Compare policies</h1>
        <form class="filters" method="get" action="/compare">
          <label>
            model{" "}
            <select name="model">
              {models.map((m) => (
                <option
                  value={`${m.model}/${m.preset}`}
                  selected={`${m.model}/${m.preset}` === key}
                >
                  {m.model}/{m.preset} ({m.points} points)
                </option>
              ))}
            </select>
          </label>
          <label>
            source{" "}
            <select name="source">
              <option value="">live and simulated</option>
              <option value="live" selected={source === "live"}>live runs</option>
              <option value="simulated" selected={source === "simulated"}>simulated</option>
            </select>
          </label>
          <label>
            sweep{" "}
            <select name="sweep">
              <option value="">any</option>
              {sweepList.map((s) => (
                <option value={s.id} selected={f.value.sweep === s.id}>{s.name} ({s.id})</option>
              ))}
            </select>
          </label>
          <label>
            steps{" "}
            <input
              name="steps"
              inputMode="numeric"
              size={4}
              value={f.value.steps === undefined ? "" : String(f.value.steps)}
              placeholder="any"
            />
          </label>
          <label>
            cost model{" "}
            <select name="costModel">
              <option value="">any</option>
              {LIVE_COST_MODELS.map((m) => (
                <option value={m} selected={f.value.costModel === m}>{m}</option>
              ))}
            </select>
          </label>
          <label>
            device{" "}
            <select name="device">
              <option value="">any</option>
              {["cpu", "cuda", "meta"].map((d) => (
                <option value={d} selected={f.value.device === d}>{d}</option>
              ))}
            </select>
          </label>
          <label>
            from <input type="date" name="from" value={c.req.query("from") ?? ""} />
          </label>
          <label>
            to <input type="date" name="to" value={c.req.query("to") ?? ""} />
          </label>
          <button type="submit">Show</button>
          <a class="permalink" href={permalink.pathname + permalink.search}>permalink</a>
          {f.errors.length > 0 && (
            <span class="error" role="alert">ignored: {f.errors.join("; ")}</span>
          )}
        </form>
        {policies.length === 0
          ? <p class="empty">No finished runs to compare yet{key ? ` for ${key}` : ""}.</p>
          : (
            <>
              <OverheadChart
                policies={policies}
                caption={`${key}${
                  f.value.sweep ? ` in sweep ${f.value.sweep}` : ""
                }: median overhead per policy and budget ratio (log scale when a policy thrashes); vertical bars: the confidence interval of the median over the repeats (order statistics, as for the live measurements; [lowest, highest] when there are few). Hover a point for its values, click it to open its newest run; under the axis, one row per policy, the infeasible ratios: × out of memory (the step did not fit), ▲ thrashing (stopped at its thrash limit).`}
              />
              <h2>Smallest feasible ratio</h2>
              <SmallestTable policies={policies} />
              <ExportLinks url={c.req.url} name="smallest-feasible" />
              <h2>Overhead by ratio</h2>
              <div class="table-scroll">
                <table class="matrix" data-export="overhead-by-ratio">
                  <thead>
                    <tr>
                      <th>Policy</th>
                      {ratios.map((r) => (
                        <th key={r} class="num" data-column={String(r)}>{formatNumber(r, 2)}</th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {policies.map((p) => (
                      <tr>
                        <td>{p.policy}</td>
                        {ratios.map((r) => {
                          const x = p.points.find((y) => y.ratio === r);
                          return (
                            <td
                              class={x && !x.feasible ? "num infeasible" : "num"}
                              data-value={!x
                                ? ""
                                : x.feasible
                                ? x.overhead ?? ""
                                : infeasibleLabel(x.reason)}
                              title={x && !x.feasible ? infeasibleLabel(x.reason) : undefined}
                            >
                              {!x
                                ? ""
                                : x.feasible
                                ? `${formatNumber(x.overhead)}${
                                  x.n > 1 && x.low !== x.high
                                    ? ` (${formatNumber(x.low, 2)}–${formatNumber(x.high, 2)})`
                                    : ""
                                }`
                                : x.reason === "thrashing"
                                ? "▲ thrashing"
                                : x.reason === "out of memory"
                                ? "✗ out of memory"
                                : "✗"}
                            </td>
                          );
                        })}
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <ExportLinks url={c.req.url} name="overhead-by-ratio" />
            </>
          )}
        <h2 id="overlay">Overlay runs</h2>
        {overlay.length > 0 && <RunOverlay runs={overlay} />}
        {pickable.length === 0
          ? <p class="empty">No finished runs of {key || "this model"} to overlay.</p>
          : (
            <form class="overlay-pick" method="get" action="/compare#overlay">
              <input type="hidden" name="model" value={key} />
              {source && <input type="hidden" name="source" value={source} />}
              {f.value.sweep && <input type="hidden" name="sweep" value={f.value.sweep} />}
              <p class="muted">
                Pick up to {MAX_OVERLAY} runs and overlay their memory over time and loss.
              </p>
              <PickTable runs={pickable} picked={new Set(pickedIds)} />
              <ExportLinks url={c.req.url} name="runs" />
              <div class="actions">
                <button type="submit" class="primary">Overlay the picked runs</button>
              </div>
            </form>
          )}
      </Layout>,
    );
  });
}
