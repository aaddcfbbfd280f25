/** The dashboard's pages and forms through `app.request`, without JavaScript. */
import assert from "node:assert/strict";
import { openLab } from "@libra/api";
import { fakeExecutor } from "../api/_fake_executor.ts";
import { createWebApp } from "./main.ts";

const TOKEN = "web-token";
const COOKIE = { Cookie: `libra_token=${TOKEN}` };

async function setup(readToken: string | null = null) {
  const dir = await Deno.makeTempDir({ prefix: "libra-web-test-" });
  const lab = await openLab({
    dataDir: dir,
    token: TOKEN,
    readToken,
    executor: fakeExecutor(),
    worker: false,
    log: () => {},
  });
  return { lab, app: createWebApp(lab) };
}

function form(fields: Record<string, string>, headers: Record<string, string> = COOKIE) {
  return { method: "POST", headers, body: new URLSearchParams(fields) };
}

const VALID = {
  name: "form config",
  model: "gpt",
  preset: "tiny",
  device: "cpu",
  budgetRatio: "0.5",
  budgetBytes: "",
  policy: "dtr",
  costModel: "measured",
  steps: "2",
  seed: "0",
};

Deno.test("login sets an HttpOnly SameSite=Strict cookie only for a valid token", async () => {
  const { lab, app } = await setup();
  try {
    const bad = await app.request("/login", form({ token: "nope", next: "/traces" }, {}));
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /not valid/);
    const ok = await app.request("/login", form({ token: TOKEN, next: "/traces" }, {}));
    assert.equal(ok.status, 303);
    assert.equal(ok.headers.get("location"), "/traces");
    const cookie = ok.headers.get("set-cookie")!;
    assert.match(cookie, new RegExp(`libra_token=${TOKEN}`));
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    const offsite = await app.request("/login", form({ token: TOKEN, next: "//evil.example" }, {}));
    assert.equal(offsite.headers.get("location"), "/runs", "no open redirect");
  } finally {
    await lab.close();
  }
});

Deno.test("the configuration form validates on the server and launches a run", async () => {
  const { lab, app } = await setup();
  try {
    const anon = await app.request("/configurations", form(VALID, {}));
    assert.equal(anon.status, 303);
    assert.match(anon.headers.get("location")!, /^\/login/);

    const invalid = await app.request(
      "/configurations",
      form({ ...VALID, name: "", budgetRatio: "2", steps: "x" }),
    );
    assert.equal(invalid.status, 400);
    const html = await invalid.text();
    for (
      const [field, reason] of [["name", "must not be empty"], ["budgetRatio", "must be &lt;= 1"]]
    ) {
      assert.match(
        html,
        new RegExp(`data-field="${field}"[^]*?<span class="error" role="alert">${reason}</span>`),
      );
    }
    assert.match(html, /value="2"/, "the form keeps what was typed");
    assert.equal((await lab.store.listConfigurations({ limit: 10, offset: 0 })).total, 0);

    const evil = await app.request(
      "/configurations",
      form(VALID, { ...COOKIE, Origin: "http://evil.example" }),
    );
    assert.equal(evil.status, 403, "a cross-site post is refused");
    assert.equal((await lab.store.listConfigurations({ limit: 10, offset: 0 })).total, 0);

    const ok = await app.request("/configurations", form({ ...VALID, launch: "1" }));
    assert.equal(ok.status, 303);
    const runId = ok.headers.get("location")!.split("/").pop()!;
    const run = (await lab.store.getRun(runId))!;
    assert.equal(run.status, "queued");
    assert.deepEqual([run.model, run.policy, run.budgetRatio], ["gpt", "dtr", 0.5]);
    const page = await (await app.request("/configurations", { headers: COOKIE })).text();
    assert.match(page, /data-config="form config"/);
  } finally {
    await lab.close();
  }
});

Deno.test("run pages render results on the server, with island props for the charts", async () => {
  const { lab, app } = await setup();
  try {
    const cfg = await lab.store.createConfiguration({
      name: "c",
      model: "gpt",
      preset: "tiny",
      config: null,
      device: "cpu",
      budgetRatio: 0.5,
      budgetBytes: null,
      policy: "lru",
      costModel: "measured",
      steps: 2,
      seed: 0,
      overheadLimit: 2,
    });
    const a = (await lab.store.createRunFromConfiguration(cfg.id))!;
    const b = (await lab.store.createRunFromConfiguration(cfg.id))!;
    await lab.store.claimNextRun("w");
    const result = await fakeExecutor().execute(a.spec as never, {
      signal: new AbortController().signal,
      progress: () => {},
    });
    await lab.store.completeRun(a.id, "w", result);
    await lab.store.failRun(b.id, "no GPU here");

    const list = await (await app.request("/runs")).text();
    assert.ok(list.indexOf(b.id) < list.indexOf(a.id), "newest first");
    const failed = await (await app.request("/runs?status=failed")).text();
    assert.ok(failed.includes(b.id) && !failed.includes(`data-run="${a.id}"`));

    const detail = await (await app.request(`/runs/${a.id}`)).text();
    assert.match(detail, /data-stat="overhead"[^]*?1\.500/);
    assert.match(detail, /data-island="MemoryChart"/);
    assert.match(detail, /data-island="LossChart"/);
    // charts are drawn on the server too (readable without JavaScript): the budget rule is there
    const memoryFigure = detail.slice(detail.indexOf('data-chart="memory"'));
    const svg = memoryFigure.slice(0, memoryFigure.indexOf("</figcaption>"));
    assert.match(svg, /<svg/);
    const rule = svg.match(/<g [^>]*aria-label="rule"[^>]*>/)?.[0] ?? "";
    assert.match(rule, /stroke="#d62728"/, "the budget line is drawn");
    const props = detail.match(/data-island="MemoryChart" data-props="([^"]*)"/)![1]!;
    const parsed = JSON.parse(props.replaceAll("&quot;", '"'));
    assert.equal(parsed.view.budgetBytes, 500000);
    assert.match(detail, /script type="module" src="\/static\/build\/islands.js"/);

    const bad = await (await app.request(`/runs/${b.id}`)).text();
    assert.match(bad, /class="error-box"[^]*no GPU here/);
    assert.equal((await app.request("/runs/run_missing")).status, 404);
  } finally {
    await lab.close();
  }
});

Deno.test("traces upload through the form queues a simulation; a bad file is explained", async () => {
  const { lab, app } = await setup();
  try {
    const body = new FormData();
    body.append("trace", new File(['{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{oops'], "t.log"));
    const bad = await app.request("/traces", { method: "POST", headers: COOKIE, body });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /t\.log: line 2: not JSON/);
    const good = new FormData();
    good.append("trace", new File(['{"INSTRUCTION":"CONSTANT","NAME":"x"}'], "My Trace.log"));
    good.append("policies", "lru,dtr");
    good.append("ratios", "1,0.5");
    const res = await app.request("/traces", { method: "POST", headers: COOKIE, body: good });
    assert.equal(res.status, 303);
    const run = (await lab.store.getRun(res.headers.get("location")!.split("/").pop()!))!;
    assert.equal(run.model, "my-trace");
    assert.deepEqual(run.spec, {
      kind: "simulate",
      name: "my-trace",
      policies: ["lru", "dtr"],
      ratios: [1, 0.5],
      overheadLimit: 2,
    });
  } finally {
    await lab.close();
  }
});

Deno.test("with a read token, pages need a login; static files stay served and confined", async () => {
  const { lab, app } = await setup("reader");
  try {
    const r = await app.request("/runs");
    assert.equal(r.status, 303);
    assert.equal(r.headers.get("location"), "/login?next=%2Fruns");
    assert.equal(
      (await app.request("/runs", { headers: { Cookie: "libra_token=reader" } })).status,
      200,
    );
    const css = await app.request("/static/style.css");
    assert.equal(css.status, 200);
    assert.match(css.headers.get("content-type")!, /text\/css/);
    assert.equal((await app.request("/static/..%2Fmain.ts")).status, 404);
    const dots = await app.request("/static/../main.ts"); // the URL normalizes to /main.ts
    assert.notEqual(dots.status, 200);
    assert.doesNotMatch(await dots.text(), /startServer/);
  } finally {
    await lab.close();
  }
});

Deno.test("the compare page lists the smallest feasible ratio per policy", async () => {
  const { lab, app } = await setup();
  try {
    const point = (policy: string, ratio: number, overhead: number | null) => ({
      kind: "live" as const,
      model: "resnet",
      preset: "tiny",
      policy,
      ratio,
      feasible: overhead !== null,
      overhead,
    });
    await lab.store.ingestBench({
      suite: "t",
      machine: {},
      results: [
        point("dtr", 0.6, 1.1),
        point("dtr", 0.4, 1.3),
        point("lru", 0.6, 1.5),
        point("lru", 0.4, null),
      ],
    });
    const html = await (await app.request("/compare?model=resnet/tiny")).text();
    assert.match(
      html,
      /data-policy="dtr"><td>dtr<\/td><td class="num" data-value="0.4">0\.40<\/td>/,
    );
    assert.match(
      html,
      /data-policy="lru"><td>lru<\/td><td class="num" data-value="0.6">0\.60<\/td>/,
    );
    assert.match(html, /data-island="OverheadChart"/);
  } finally {
    await lab.close();
  }
});

Deno.test("the configuration form refuses names that are not in the server's lists", async () => {
  const { lab, app } = await setup();
  try {
    const res = await app.request(
      "/configurations",
      form({ ...VALID, policy: "nonsense", costModel: "telepathic" }),
    );
    assert.equal(res.status, 400);
    const html = await res.text();
    assert.match(
      html,
      /data-field="policy"[^]*?unknown policy &quot;nonsense&quot;; choose one of dtr,/,
    );
    assert.match(html, /data-field="costModel"[^]*?unknown cost model &quot;telepathic&quot;/);
    const preset = await app.request("/configurations", form({ ...VALID, preset: "huge" }));
    assert.equal(preset.status, 400);
    assert.match(await preset.text(), /unknown preset (of|for) gpt &quot;huge&quot;/);
    assert.equal((await lab.store.listConfigurations({ limit: 10, offset: 0 })).total, 0);
  } finally {
    await lab.close();
  }
});

Deno.test("unknown /api/* routes answer JSON 404 through the dashboard server too", async () => {
  const { lab, app } = await setup();
  try {
    for (const [method, path] of [["GET", "/api/nope"], ["POST", "/api/runs/x/nope"]] as const) {
      const res = await app.request(path, {
        method,
        headers: { Authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(res.status, 404);
      assert.match(res.headers.get("content-type")!, /application\/json/);
      assert.deepEqual(await res.json(), {
        error: `no route ${method} ${path}; see GET /api for the routes`,
      });
    }
    const page = await app.request("/nope");
    assert.equal(page.status, 404);
    assert.match(await page.text(), /no page at \/nope/);
  } finally {
    await lab.close();
  }
});

Deno.test("Compare's filters read steps and dates from the query and name the bad ones", async () => {
  const { filters } = await import("./routes/compare.tsx");
  assert.deepEqual(
    filters({
      sweep: "swp_1",
      steps: "30",
      costModel: "analytic",
      device: "cpu",
      from: "2026-11-30",
      to: "2026-12-01",
    }),
    {
      value: {
        sweep: "swp_1",
        steps: 30,
        costModel: "analytic",
        device: "cpu",
        from: Date.UTC(2026, 10, 30),
        to: Date.UTC(2026, 11, 2), // "to" includes its day
      },
      errors: [],
    },
  );
  const bad = filters({ steps: "2.5", from: "yesterday" });
  assert.deepEqual(bad.value, {});
  assert.deepEqual(bad.errors, [
    'steps="2.5" is not a positive integer',
    'from="yesterday" is not a date (YYYY-MM-DD)',
  ]);
});

Deno.test("the simulations table of /traces exports as JSON", async () => {
  const { lab, app } = await setup();
  try {
    const run = await lab.store.createSimulation(
      { kind: "simulate", name: "chain", policies: ["lru", "dtr"], ratios: [1] },
      '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    );
    const res = await app.request("/traces?export=simulations&format=json", { headers: COOKIE });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-disposition")!, /traces-simulations\.json/);
    const rows = await res.json();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].Run, run.id);
    assert.equal(rows[0].Policies, "lru, dtr");
  } finally {
    await lab.close();
  }
});

Deno.test("static files come through serveStatic: types, no-cache, nothing outside static/", async () => {
  const { lab, app } = await setup();
  try {
    const css = await app.request("/static/style.css");
    assert.equal(css.status, 200);
    assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
    assert.equal(css.headers.get("cache-control"), "no-cache");
    assert.equal(
      await css.text(),
      await Deno.readTextFile(new URL("./static/style.css", import.meta.url)),
    );
    const svg = await app.request("/static/favicon.svg");
    assert.equal(svg.headers.get("content-type"), "image/svg+xml");
    await svg.body?.cancel();
    for (const p of ["/static/nope.css", "/static/..%2Fmain.ts", "/static/%2e%2e/main.ts"]) {
      const r = await app.request(p);
      assert.equal(r.status, 404, p);
      assert.doesNotMatch(await r.text(), /startServer/, p);
    }
  } finally {
    await lab.close();
  }
});
