/** Page `/compare`: overhead against budget ratio, one line per policy, for a model. @module */

import { CompareQuery } from "@libra/api";
import type { Hono } from "hono";
import { level, page, type WebContext } from "../components/context.ts";
import { formatNumber } from "../components/format.ts";
import { Layout } from "../components/layout.tsx";
import { OverheadChart } from "../islands/overhead_chart.tsx";
import { SmallestTable } from "./runs.tsx";

/** Registers the page. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  app.get("/compare", async (c) => {
    const models = await store.comparableModels();
    const key = c.req.query("model") ?? (models[0] ? `${models[0].model}/${models[0].preset}` : "");
    const [model, preset] = key.split("/");
    const source = c.req.query("source") || undefined;
    const q = CompareQuery.safeParse({ model, preset, source });
    const cmp = q.success ? await store.compare(q.data) : null;
    const ratios = cmp
      ? [...new Set(cmp.policies.flatMap((p) => p.points.map((x) => x.ratio)))].sort((a, b) =>
        b - a
      )
      : [];
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
          <button type="submit">Show</button>
        </form>
        {!cmp || cmp.policies.length === 0
          ? <p class="empty">No finished runs to compare yet{key ? ` for ${key}` : ""}.</p>
          : (
            <>
              <OverheadChart
                policies={cmp.policies}
                caption={`${key}: median overhead per policy and budget ratio; × marks ratios where the step did not fit`}
              />
              <h2>Smallest feasible ratio</h2>
              <SmallestTable policies={cmp.policies} />
              <h2>Overhead by ratio</h2>
              <table class="matrix">
                <thead>
                  <tr>
                    <th>Policy</th>
                    {ratios.map((r) => <th key={r} class="num">{formatNumber(r, 2)}</th>)}
                  </tr>
                </thead>
                <tbody>
                  {cmp.policies.map((p) => (
                    <tr>
                      <td>{p.policy}</td>
                      {ratios.map((r) => {
                        const x = p.points.find((y) => y.ratio === r);
                        return (
                          <td class={x && !x.feasible ? "num infeasible" : "num"}>
                            {!x ? "" : x.feasible ? formatNumber(x.overhead) : "✗"}
                          </td>
                        );
                      })}
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
      </Layout>,
    );
  });
}
