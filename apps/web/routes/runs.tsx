/** Pages `/runs` (list with filters, newest first) and `/runs/:id` (detail). @module */

import { type Run, RUN_STATUSES, RunFilter, type RunResults, thinSamples } from "@libra/api";
import type { Hono } from "hono";
import type { VNode } from "preact";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import { formatBytes, formatDuration, formatNumber, formatTime } from "../components/format.ts";
import { Layout, StatusBadge } from "../components/layout.tsx";
import { LiveProgress } from "../islands/live_progress.tsx";
import { LossChart } from "../islands/loss_chart.tsx";
import { MemoryChart } from "../islands/memory_chart.tsx";
import { OverheadChart } from "../islands/overhead_chart.tsx";

/** Samples the memory chart draws at most (the stored timeline is thinned further, peaks kept). */
const CHART_SAMPLES = 1500;

function budgetText(r: Run): string {
  if (r.kind === "simulate") return "sweep";
  const parts = [];
  if (r.budgetRatio !== null) parts.push(`${formatNumber(r.budgetRatio, 2)}×`);
  if (r.budgetBytes !== null) parts.push(formatBytes(r.budgetBytes));
  return parts.join(" · ") || "—";
}

function RunsTable(p: { runs: Run[] }): VNode {
  return (
    <table class="runs">
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
              {r.feasible === false && <span class="badge warn">infeasible</span>}
              {r.status === "running" && r.progress && (
                <span class="muted small">{` ${r.progress.done}/${r.progress.total}`}</span>
              )}
              {r.corrupt && <span class="badge error" title={r.corrupt}>unreadable row</span>}
            </td>
            <td class="num">{formatNumber(r.overhead)}</td>
            <td>{formatTime(r.createdAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
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
  const rows: [string, string][] = [
    ["feasible", run.feasible === null ? "—" : run.feasible ? "yes" : "no"],
    ["overhead", formatNumber(run.overhead)],
    ["budget ratio", formatNumber(run.budgetRatio)],
    ["budget", formatBytes(run.budgetBytes)],
    ["budget-free peak", formatBytes(run.baselinePeakBytes)],
    ["peak under budget", formatBytes(run.peakBytes)],
    [
      "duration",
      formatDuration(run.finishedAt && run.startedAt ? run.finishedAt - run.startedAt : null),
    ],
  ];
  for (const [k, v] of Object.entries(results.stats)) {
    rows.push([
      k,
      /bytes/i.test(k)
        ? formatBytes(v)
        : /Ms$/.test(k)
        ? `${formatNumber(v, 2)} ms`
        : Number.isInteger(v)
        ? String(v)
        : formatNumber(v),
    ]);
  }
  return (
    <table class="stats">
      <tbody>
        {rows.map(([k, v]) => (
          <tr data-stat={k}>
            <th>{k}</th>
            <td class="num">{v}</td>
          </tr>
        ))}
      </tbody>
    </table>
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
          : <RunsTable runs={runs.items} />}
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
          {run.workerId && ` · worker ${run.workerId}`}
          {run.configurationId && (
            <>
              {" "}· from configuration{" "}
              <a href={`/configurations#${run.configurationId}`}>{run.configurationId}</a>
            </>
          )}
        </p>
        {live && <LiveProgress runId={run.id} status={run.status} progress={run.progress} />}
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
                    caption={`Replay of ${run.model} under each policy; × marks infeasible ratios`}
                  />
                  <SmallestTable policies={byPolicy} />
                </section>
              )
              : (
                <div class="two">
                  <section>
                    <h2>Statistics</h2>
                    <StatsTable run={run} results={results} />
                  </section>
                  <section>
                    <h2>Loss</h2>
                    {results.loss.length
                      ? <LossChart loss={results.loss} />
                      : <p class="muted">No losses recorded.</p>}
                  </section>
                </div>
              )}
            {results.memory && (
              <section>
                <h2>Memory over time</h2>
                <MemoryChart
                  samples={thinSamples(results.memory.samples, CHART_SAMPLES)}
                  budgetBytes={results.memory.budgetBytes}
                  unit={results.memory.unit}
                  markers={results.memory.markers.slice(0, 3000)}
                />
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
    <table class="smallest">
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
              <td class="num">{best ? formatNumber(best.ratio, 2) : "none"}</td>
              <td class="num">{formatNumber(best?.overhead)}</td>
              <td class="num">{c.points.length}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
