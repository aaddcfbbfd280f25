/** Pages `/runs` (list with filters, newest first) and `/runs/:id` (detail). @module */

import { type Run, RUN_STATUSES, RunFilter, type RunResults } from "@libra/api";
import type { Hono } from "hono";
import type { VNode } from "preact";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import { formatBytes, formatNumber, formatTime, infeasibleLabel } from "../components/format.ts";
import { ExportLinks } from "../components/export.tsx";
import { entryFor, formatStat } from "../components/glossary.ts";
import { Layout, StatusBadge } from "../components/layout.tsx";
import { type MemoryView, memoryView } from "../components/memory_view.ts";
import { LiveProgress } from "../islands/live_progress.tsx";
import { LossChart } from "../islands/loss_chart.tsx";
import { MemoryChart } from "../islands/memory_chart.tsx";
import { OverheadChart } from "../islands/overhead_chart.tsx";

/** Links and a form to zoom the memory chart into one step (they work without JavaScript). */
function StepNav(p: { runId: string; view: MemoryView }): VNode | null {
  const { view } = p;
  if (view.steps === null || view.binUnit !== "step") return null;
  if (view.mode === "events" && view.zoom === null) return null;
  const at = view.zoom ? view.zoom.step + 1 : null;
  const link = (s: number) => `/runs/${p.runId}?step=${s}#memory`;
  return (
    <form class="step-nav" method="get" action={`/runs/${p.runId}#memory`}>
      {at !== null && at > 1 && <a href={link(at - 1)} rel="prev">← step {at - 1}</a>}
      <label>
        step{" "}
        <input
          type="number"
          name="step"
          min={1}
          max={view.steps}
          value={at ?? ""}
          placeholder={`1–${view.steps}`}
        />
      </label>
      <button type="submit" class="small">Zoom in</button>
      {at !== null && at < view.steps && <a href={link(at + 1)} rel="next">step {at + 1} →</a>}
      {at !== null && <a href={`/runs/${p.runId}#memory`}>all steps</a>}
    </form>
  );
}

function budgetText(r: Run): string {
  if (r.kind === "simulate") return "sweep";
  const parts = [];
  if (r.budgetRatio !== null) parts.push(`${formatNumber(r.budgetRatio, 2)}×`);
  if (r.budgetBytes !== null) parts.push(formatBytes(r.budgetBytes));
  return parts.join(" · ") || "—";
}

/** The badge of an infeasible run: `infeasible: <reason>` (or just `infeasible`). */
export function InfeasibleBadge(p: { reason: string | null }): VNode {
  return (
    <span
      class={`badge warn${p.reason === "thrashing" ? " thrashing" : ""}`}
      data-reason={p.reason ?? ""}
    >
      {p.reason ? `infeasible: ${p.reason}` : "infeasible"}
    </span>
  );
}

/** A run's overhead cell: the number, or why there is none (the reason, also exported). */
export function OverheadCell(p: { run: Run }): VNode {
  const r = p.run;
  if (r.feasible === false) {
    const label = infeasibleLabel(r.reason);
    return <td class="num infeasible" data-value={label}>{label}</td>;
  }
  return <td class="num" data-value={r.overhead ?? ""}>{formatNumber(r.overhead)}</td>;
}

function RunsTable(p: { runs: Run[] }): VNode {
  return (
    <div class="table-scroll">
      <table class="runs" data-export="runs">
        <thead>
          <tr>
            <th>Run</th>
            <th>Kind</th>
            <th>Model</th>
            <th>Policy</th>
            <th>Budget</th>
            <th>Status</th>
            <th class="num">Overhead</th>
            <th>Created (UTC)</th>
          </tr>
        </thead>
        <tbody>
          {p.runs.map((r) => (
            <tr data-run={r.id}>
              <td>
                <a href={`/runs/${r.id}`}>{r.id}</a>
              </td>
              <td>{r.kind}</td>
              <td>{r.model}/{r.preset}</td>
              <td>{r.policy}</td>
              <td>{budgetText(r)}</td>
              <td>
                <StatusBadge status={r.status} />
                {r.feasible === false && <InfeasibleBadge reason={r.reason} />}
                {r.status === "running" && r.progress && (
                  <span class="muted small">{` ${r.progress.done}/${r.progress.total}`}</span>
                )}
                {r.corrupt && <span class="badge error" title={r.corrupt}>unreadable row</span>}
              </td>
              <OverheadCell run={r} />
              <td data-value={new Date(r.createdAt).toISOString()}>{formatTime(r.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Pager(p: { total: number; limit: number; offset: number; query: URLSearchParams }): VNode {
  const link = (offset: number) => {
    const q = new URLSearchParams(p.query);
    q.set("offset", String(offset));
    return `?${q}`;
  };
  return (
    <nav class="pager">
      {p.offset > 0 ? <a href={link(Math.max(0, p.offset - p.limit))}>← newer</a> : <span />}
      <span class="muted">
        {p.total === 0
          ? "no runs"
          : `${p.offset + 1}–${Math.min(p.total, p.offset + p.limit)} of ${p.total}`}
      </span>
      {p.offset + p.limit < p.total ? <a href={link(p.offset + p.limit)}>older →</a> : <span />}
    </nav>
  );
}

function select(name: string, values: string[], current: string | undefined): VNode {
  return (
    <label>
      {name}{" "}
      <select name={name}>
        <option value="">any</option>
        {values.map((v) => <option key={v} value={v} selected={v === current}>{v}</option>)}
      </select>
    </label>
  );
}

function StatsTable(p: { run: Run; results: RunResults }): VNode {
  const { run, results } = p;
  const infeasible = run.feasible === false;
  const bench = run.kind === "bench";
  // why it was infeasible, as the runtime reported it (older runs: "did not fit")
  const why = run.reason ?? "did not fit";
  const rows: [string, number | string | null][] = [
    ["feasible", run.feasible === null ? "—" : run.feasible ? "yes" : `no (${why})`],
  ];
  if (infeasible) rows.push(["infeasible because", run.reason ?? "not recorded"]);
  rows.push(["overhead", infeasible ? `— (${why})` : run.overhead]);
  const limit = (run.spec as { overheadLimit?: number }).overheadLimit;
  if (!bench) rows.push(["thrash limit", typeof limit === "number" ? limit : 2]);
  const low = results.stats.overheadLow, high = results.stats.overheadHigh;
  const conf = results.stats.overheadConfidence;
  const interval = !infeasible && typeof low === "number" && typeof high === "number"
    ? ` (${formatNumber(low, 3)}–${formatNumber(high, 3)}${
      typeof conf === "number" ? `, ${Math.round(100 * conf)} % confidence` : ""
    })`
    : "";
  rows.push(
    ["budget ratio", run.budgetRatio],
    ["budget", run.budgetBytes],
    ["budget-free peak", run.baselinePeakBytes],
    ["peak under budget", run.peakBytes],
  );
  // bench uploads carry no timing of their own: their runs are stored at upload time
  if (!bench) {
    rows.push([
      "duration",
      run.finishedAt && run.startedAt ? run.finishedAt - run.startedAt : null,
    ]);
  }
  for (const [k, v] of Object.entries(results.stats)) rows.push([k, v]);
  return (
    <>
      <table class="stats" data-export="statistics" data-columns="statistic,value">
        <tbody>
          {rows.map(([k, v]) => {
            const e = entryFor(k);
            const notMeasured = infeasible && e.underBudget && (v === null || v === 0);
            return (
              <tr data-stat={k}>
                <th>
                  <span class="term" title={e.help} tabindex={0}>{e.label}</span>
                </th>
                <td
                  class="num"
                  data-value={typeof v === "string"
                    ? v
                    : typeof v === "number" && !notMeasured
                    ? v
                    : ""}
                >
                  {typeof v === "string"
                    ? v
                    : notMeasured
                    ? `— (${why})`
                    : formatStat(v, e.unit) + (k === "overhead" ? interval : "")}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <details class="glossary">
        <summary>What these mean</summary>
        <dl>
          {rows.map(([k]) => {
            const e = entryFor(k);
            return (
              <>
                <dt>{e.label}</dt>
                <dd>{e.help}</dd>
              </>
            );
          })}
        </dl>
      </details>
    </>
  );
}

/** Registers the run pages. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  app.get("/runs", async (c) => {
    const parsed = RunFilter.safeParse({ ...c.req.query(), limit: c.req.query("limit") ?? "25" });
    const filter = parsed.success ? parsed.data : { limit: 25, offset: 0 };
    const [runs, facets] = await Promise.all([store.listRuns(filter), store.runFacets()]);
    const q = new URLSearchParams();
    for (const k of ["model", "policy", "status", "kind"] as const) {
      const v = filter[k];
      if (v) q.set(k, v);
    }
    const live = runs.items.some((r) => r.status === "queued" || r.status === "running");
    return page(
      c,
      <Layout
        title="Runs"
        active="runs"
        canWrite={level(c, ctx) === "write"}
        refreshWithoutJs={live}
      >
        <h1>Runs</h1>
        <form class="filters" method="get" action="/runs">
          {select("model", facets.models, filter.model)}
          {select("policy", facets.policies, filter.policy)}
          {select("status", [...RUN_STATUSES], filter.status)}
          {select("kind", ["train", "simulate", "bench"], filter.kind)}
          <button type="submit">Filter</button>
          {!parsed.success && <span class="error">ignored invalid filters</span>}
        </form>
        {runs.items.length === 0
          ? (
            <p class="empty">
              No runs yet. <a href="/configurations">Create a configuration</a> and launch one, or
              {" "}
              <a href="/traces">upload a trace</a>.
            </p>
          )
          : (
            <>
              <RunsTable runs={runs.items} />
              <ExportLinks url={c.req.url} name="runs" />
            </>
          )}
        <Pager total={runs.total} limit={runs.limit} offset={runs.offset} query={q} />
      </Layout>,
    );
  });

  app.post("/runs/:id/cancel", async (c) => {
    const id = c.req.param("id");
    if (!writeAllowed(c, ctx)) return c.redirect(`/login?next=/runs/${id}`, 303);
    await store.cancelRun(id);
    return c.redirect(`/runs/${id}`, 303);
  });

  app.get("/runs/:id", async (c) => {
    const id = c.req.param("id");
    const run = await store.getRun(id);
    const write = level(c, ctx) === "write";
    if (!run) {
      return page(
        c,
        <Layout title="Run not found" active="runs" canWrite={write}>
          <h1>Run not found</h1>
          <p>
            There is no run {id}. <a href="/runs">All runs</a>
          </p>
        </Layout>,
        404,
      );
    }
    const results = await store.getResults(id);
    const stepParam = Number(c.req.query("step"));
    const memory = results?.memory
      ? memoryView(results.memory, results.stats, {
        step: Number.isInteger(stepParam) && stepParam >= 1 ? stepParam - 1 : null,
      })
      : null;
    const live = run.status === "queued" || run.status === "running";
    const points = results?.points ?? [];
    const byPolicy = [...new Set(points.map((p) => p.policy))].map((policy) => ({
      policy,
      points: points.filter((p) => p.policy === policy),
    }));
    return page(
      c,
      <Layout title={`Run ${run.id}`} active="runs" canWrite={write} refreshWithoutJs={live}>
        <p class="crumbs">
          <a href="/runs">Runs</a> / {run.id}
        </p>
        <h1>
          {run.kind === "simulate"
            ? `Simulation of ${run.model}`
            : `${run.model}/${run.preset} · ${run.policy}`} <StatusBadge status={run.status} />
        </h1>
        <p class="meta">
          {run.kind} run · created {formatTime(run.createdAt)} UTC
          {run.kind !== "bench" && (
            <span data-overhead-limit>
              {` · thrash limit ${(run.spec as { overheadLimit?: number }).overheadLimit ?? 2}×`}
            </span>
          )}
          {run.workerId && ` · worker ${run.workerId}`}
          {run.configurationId && (
            <>
              {" "}· from configuration{" "}
              <a href={`/configurations#${run.configurationId}`}>{run.configurationId}</a>{" "}
              (<a href={`/configurations?clone=${run.configurationId}#new`}>clone it with edits</a>)
            </>
          )}
        </p>
        {live && (
          <LiveProgress
            runId={run.id}
            status={run.status}
            progress={run.progress}
            elapsedMs={run.startedAt ? Date.now() - run.startedAt : null}
          />
        )}
        {live && write && (
          <form method="post" action={`/runs/${run.id}/cancel`} class="cancel">
            <button type="submit" class="small">Cancel this run</button>
          </form>
        )}
        {run.error && (
          <div class="error-box" role="alert">
            <strong>{run.status === "canceled" ? "Canceled" : "Failed"}:</strong> {run.error}
          </div>
        )}
        {results && (
          <>
            {results.note && <p class="notice">{results.note}</p>}
            {run.kind === "simulate"
              ? (
                <section>
                  <h2>Simulated overhead against budget ratio</h2>
                  <OverheadChart
                    policies={byPolicy}
                    caption={`Replay of ${run.model} under each policy; under the axis, infeasible ratios: × out of memory, ▲ thrashing`}
                  />
                  <SmallestTable policies={byPolicy} />
                  <ExportLinks url={c.req.url} name="smallest-feasible" />
                </section>
              )
              : (
                <div class="two">
                  <section>
                    <h2>Statistics</h2>
                    <StatsTable run={run} results={results} />
                    <ExportLinks url={c.req.url} name="statistics" />
                  </section>
                  <section>
                    <h2>Loss</h2>
                    {results.loss.length
                      ? <LossChart loss={results.loss} />
                      : <p class="muted">No losses recorded.</p>}
                  </section>
                </div>
              )}
            {memory && (
              <section id="memory">
                <h2>Memory over time</h2>
                <MemoryChart view={memory} />
                <StepNav runId={run.id} view={memory} />
              </section>
            )}
            {results.hasTrace || run.kind === "simulate"
              ? (
                <p>
                  <a href={`/api/runs/${run.id}/trace`} download>Download the trace</a>
                </p>
              )
              : null}
          </>
        )}
        <details>
          <summary>Specification</summary>
          <pre>{JSON.stringify(run.spec, null, 2)}</pre>
        </details>
      </Layout>,
    );
  });
}

/** The smallest feasible ratio per policy. */
export function SmallestTable(
  p: {
    policies: {
      policy: string;
      points: { ratio: number; feasible: boolean; overhead: number | null }[];
    }[];
  },
): VNode {
  return (
    <table class="smallest" data-export="smallest-feasible">
      <thead>
        <tr>
          <th>Policy</th>
          <th class="num">Smallest feasible ratio</th>
          <th class="num">Overhead there</th>
          <th class="num">Points</th>
        </tr>
      </thead>
      <tbody>
        {p.policies.map((c) => {
          const feasible = c.points.filter((x) => x.feasible);
          const best = feasible.reduce<(typeof feasible)[number] | null>(
            (a, x) => (a === null || x.ratio < a.ratio ? x : a),
            null,
          );
          return (
            <tr data-policy={c.policy}>
              <td>{c.policy}</td>
              <td class="num" data-value={best?.ratio ?? ""}>
                {best ? formatNumber(best.ratio, 2) : "none"}
              </td>
              <td class="num" data-value={best?.overhead ?? ""}>{formatNumber(best?.overhead)}</td>
              <td class="num">{c.points.length}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
