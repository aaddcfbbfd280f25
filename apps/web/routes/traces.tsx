/** Page `/traces`: upload a DTR-format trace, which starts a simulation; list them. @module */

import {
  acceptTraceUpload,
  BodyTooLargeError,
  DEFAULT_RATIOS,
  DEFAULT_SIM_POLICIES,
} from "@libra/api";
import type { Context, Hono } from "hono";
import { level, page, type WebContext, writeAllowed } from "../components/context.ts";
import { formatTime } from "../components/format.ts";
import { ExportLinks } from "../components/export.tsx";
import { Layout, StatusBadge } from "../components/layout.tsx";

/** Registers the page. */
export function register(app: Hono, ctx: WebContext): void {
  const store = ctx.lab.store;
  const render = async (c: Context, error: string | null, status: 200 | 400) => {
    const sims = await store.listRuns({ limit: 50, offset: 0, kind: "simulate" });
    const write = level(c, ctx) === "write";
    return page(
      c,
      <Layout title="Traces" active="traces" canWrite={write}>
        <h1>Traces</h1>
        <section class="card">
          <h2>Upload a trace</h2>
          <p class="muted">
            One training step in the DTR log format (one JSON object per line). The server replays
            it on the meta backend under each policy and budget ratio.
          </p>
          <form method="post" action="/traces" enctype="multipart/form-data" class="upload">
            <fieldset disabled={!write}>
              {!write && (
                <p class="notice">
                  <a href="/login?next=/traces">Log in</a> to upload.
                </p>
              )}
              <label class="field">
                <span class="label">Trace file</span>
                <input type="file" name="trace" required />
              </label>
              <label class="field">
                <span class="label">Name</span>
                <input name="name" placeholder="from the file name" />
              </label>
              <label class="field">
                <span class="label">Policies</span>
                <input name="policies" value={DEFAULT_SIM_POLICIES.join(",")} />
              </label>
              <label class="field">
                <span class="label">Ratios</span>
                <input name="ratios" value={DEFAULT_RATIOS.join(",")} />
              </label>
              <label class="field">
                <span class="label">Thrash limit</span>
                <input name="overheadLimit" value="2" inputMode="decimal" />
                <span class="hint">X &gt; 1: a replay past overhead X stops as thrashing</span>
              </label>
              {error && <p class="error" role="alert">{error}</p>}
              <div class="actions">
                <button type="submit" class="primary">Upload and simulate</button>
              </div>
            </fieldset>
          </form>
        </section>
        <section>
          <h2>Simulations</h2>
          {sims.items.length === 0
            ? <p class="empty">None yet.</p>
            : (
              <table data-export="simulations">
                <thead>
                  <tr>
                    <th>Run</th>
                    <th>Trace</th>
                    <th>Policies</th>
                    <th>Status</th>
                    <th>Created (UTC)</th>
                  </tr>
                </thead>
                <tbody>
                  {sims.items.map((r) => (
                    <tr>
                      <td>
                        <a href={`/runs/${r.id}`}>{r.id}</a>
                      </td>
                      <td>{r.model}</td>
                      <td>{r.policy.replaceAll(",", ", ")}</td>
                      <td>
                        <StatusBadge status={r.status} />
                      </td>
                      <td>{formatTime(r.createdAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          {sims.items.length > 0 && <ExportLinks url={c.req.url} name="simulations" />}
        </section>
      </Layout>,
      status,
    );
  };
  app.get("/traces", (c) => render(c, null, 200));
  app.post("/traces", async (c) => {
    if (!writeAllowed(c, ctx)) return c.redirect("/login?next=/traces", 303);
    // the API's upload service, with the options from the form's fields
    let r;
    try {
      r = await acceptTraceUpload(store, c.req.raw, {
        limit: ctx.lab.limits.trace,
        optionsFrom: "form",
      });
    } catch (e) {
      if (e instanceof BodyTooLargeError) {
        return c.text(`${e.message} for ${c.req.method} ${c.req.path}`, 413);
      }
      throw e;
    }
    if (!r.ok) {
      const why = r.issues.map((e) =>
        e.field === "trace"
          ? `${r.fileName ? `${r.fileName}: ` : ""}${e.reason}`
          : `${e.field}: ${e.reason}`
      );
      return render(c, why.join("; "), 400);
    }
    ctx.lab.worker?.poke();
    return c.redirect(`/runs/${r.run.id}`, 303);
  });
}
