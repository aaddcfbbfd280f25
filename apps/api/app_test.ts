import assert from "node:assert/strict";
import { FAKE_PEAK, fakeExecutor } from "./_fake_executor.ts";
import { openLab } from "./lab.ts";
import { MIGRATIONS } from "./migrations.ts";
import type { RunExecutor } from "./run_executor.ts";
import { until } from "./_test_helpers.ts";

const TOKEN = "test-write-token";
const auth = { Authorization: `Bearer ${TOKEN}` };
const json = { ...auth, "Content-Type": "application/json" };

async function lab(
  opts: { executor?: RunExecutor; worker?: boolean; readToken?: string; dir?: string } = {},
) {
  const dir = opts.dir ?? await Deno.makeTempDir({ prefix: "libra-api-test-" });
  const l = await openLab({
    dataDir: dir,
    token: TOKEN,
    readToken: opts.readToken ?? null,
    executor: opts.executor ?? fakeExecutor(),
    worker: opts.worker ?? false,
    workerOptions: { pollMs: 20, heartbeatMs: 50 },
    limits: { json: 4096, trace: 8192 },
    log: () => {},
  });
  return Object.assign(l, { dir });
}

const CONFIG = {
  name: "gpt tiny at 60%",
  model: "gpt",
  preset: "tiny",
  budgetRatio: 0.6,
  policy: "dtr-eq",
  steps: 3,
  seed: 1,
};

Deno.test("POST /api/configurations validates every field and names it in the 400", async () => {
  const l = await lab();
  try {
    const cases: [unknown, string, RegExp][] = [
      [{ ...CONFIG, budgetRatio: 1.5 }, "budgetRatio", /<= 1/],
      [{ ...CONFIG, budgetRatio: null }, "budgetRatio", /give a budget/],
      [{ ...CONFIG, budgetBytes: 1000 }, "budgetRatio", /not both/],
      [{ ...CONFIG, steps: 0 }, "steps", />= 1/],
      [{ ...CONFIG, steps: 2.5 }, "steps", /integer/],
      [{ ...CONFIG, model: "GPT!" }, "model", /lower-case/],
      [{ ...CONFIG, name: "" }, "name", /empty/],
      [{ ...CONFIG, device: "tpu" }, "device", /cpu|cuda/],
      [{ ...CONFIG, extra: 1 }, "body", /extra/],
      [{ ...CONFIG, policy: undefined }, "policy", /.+/],
    ];
    for (const [body, field, reason] of cases) {
      const res = await l.api.request("/configurations", {
        method: "POST",
        headers: json,
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 400, JSON.stringify(body));
      const out = await res.json();
      const issue = out.issues.find((i: { field: string }) => i.field === field);
      assert.ok(issue, `expected an issue on ${field}, got ${JSON.stringify(out.issues)}`);
      assert.match(issue.reason, reason);
    }
    const bad = await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: "{not json",
    });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).issues[0].field, "body");
    const q = await l.api.request("/runs?limit=0&status=done");
    assert.equal(q.status, 400);
    const fields = (await q.json()).issues.map((i: { field: string }) => i.field).sort();
    assert.deepEqual(fields, ["query.limit", "query.status"]);
  } finally {
    await l.close();
  }
});

Deno.test("writes need the bearer token; reads are open unless a read token is set", async () => {
  const l = await lab();
  try {
    const body = JSON.stringify(CONFIG);
    const none = await l.api.request("/configurations", { method: "POST", body });
    assert.equal(none.status, 401);
    assert.match((await none.json()).error, /Authorization: Bearer/);
    const wrong = await l.api.request("/configurations", {
      method: "POST",
      body,
      headers: { Authorization: "Bearer nope", "Content-Type": "application/json" },
    });
    assert.equal(wrong.status, 401);
    const cookie = await l.api.request("/configurations", {
      method: "POST",
      body,
      headers: { Cookie: `libra_token=${TOKEN}`, "Content-Type": "application/json" },
    });
    assert.equal(cookie.status, 401, "a cookie alone must not authorize API writes");
    assert.equal((await l.api.request("/configurations")).status, 200);
    const ok = await l.api.request("/configurations", { method: "POST", body, headers: json });
    assert.equal(ok.status, 201);
  } finally {
    await l.close();
  }
  const r = await lab({ readToken: "reader" });
  try {
    assert.equal((await r.api.request("/runs")).status, 401);
    assert.equal(
      (await r.api.request("/runs", { headers: { Authorization: "Bearer reader" } })).status,
      200,
    );
    assert.equal((await r.api.request("/runs", { headers: auth })).status, 200);
    assert.equal((await r.api.request("/health")).status, 200, "health stays open");
    const w = await r.api.request("/configurations", {
      method: "POST",
      body: JSON.stringify(CONFIG),
      headers: { Authorization: "Bearer reader", "Content-Type": "application/json" },
    });
    assert.equal(w.status, 401);
    assert.match((await w.json()).error, /cannot write/);
  } finally {
    await r.close();
  }
});

Deno.test("a generated token is saved under the data dir and reused on restart", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-token-" });
  const lines: string[] = [];
  const opts = { dataDir: dir, worker: false, executor: fakeExecutor(), readToken: null };
  const saved = Deno.env.get("LIBRA_API_TOKEN");
  Deno.env.delete("LIBRA_API_TOKEN");
  try {
    const a = await openLab({ ...opts, log: (l) => lines.push(l) });
    await a.close();
    const b = await openLab({ ...opts, log: (l) => lines.push(l) });
    await b.close();
    assert.equal(a.auth.writeToken, b.auth.writeToken);
    assert.match(a.auth.writeToken, /^[0-9a-f]{48}$/);
    assert.equal(lines.filter((l) => l.includes(a.auth.writeToken)).length, 1, "printed once");
    assert.equal((await Deno.readTextFile(`${dir}/api-token`)).trim(), a.auth.writeToken);
    assert.equal((await Deno.stat(`${dir}/api-token`)).mode! & 0o777, 0o600);
  } finally {
    if (saved !== undefined) Deno.env.set("LIBRA_API_TOKEN", saved);
  }
});

Deno.test("configuration CRUD and pagination, newest first", async () => {
  const l = await lab();
  try {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await l.api.request("/configurations", {
        method: "POST",
        headers: json,
        body: JSON.stringify({ ...CONFIG, name: `c${i}` }),
      });
      assert.equal(res.status, 201);
      const c = await res.json();
      assert.equal(res.headers.get("location"), `/api/configurations/${c.id}`);
      assert.equal(c.costModel, "analytic", "defaults applied");
      assert.equal(c.device, "cpu");
      ids.push(c.id);
    }
    const names: string[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const page: { total: number; items: { name: string }[]; nextOffset: number | null } =
        await (await l.api.request(`/configurations?limit=3&offset=${offset}`)).json();
      assert.equal(page.total, 7);
      assert.ok(page.items.length <= 3);
      names.push(...page.items.map((c: { name: string }) => c.name));
      offset = page.nextOffset;
    }
    assert.deepEqual(names, ["c6", "c5", "c4", "c3", "c2", "c1", "c0"]);

    const id = ids[0]!;
    const patched = await l.api.request(`/configurations/${id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ budgetRatio: null, budgetBytes: 123456, steps: 5 }),
    });
    assert.equal(patched.status, 200);
    const p = await patched.json();
    assert.deepEqual([p.budgetRatio, p.budgetBytes, p.steps, p.name], [null, 123456, 5, "c0"]);
    const badPatch = await l.api.request(`/configurations/${id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ budgetRatio: 0.5 }),
    });
    assert.equal(badPatch.status, 400, "merged result has two budgets");
    const put = await l.api.request(`/configurations/${id}`, {
      method: "PUT",
      headers: json,
      body: JSON.stringify({ ...CONFIG, name: "replaced" }),
    });
    assert.equal((await put.json()).name, "replaced");
    assert.equal(
      (await l.api.request(`/configurations/${id}`, { method: "DELETE", headers: auth })).status,
      204,
    );
    assert.equal((await l.api.request(`/configurations/${id}`)).status, 404);
    assert.equal(
      (await l.api.request(`/configurations/${id}`, { method: "DELETE", headers: auth })).status,
      404,
    );
  } finally {
    await l.close();
  }
});

Deno.test("body size limits answer 413", async () => {
  const l = await lab();
  try {
    const res = await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ ...CONFIG, name: "x".repeat(5000) }),
    });
    assert.equal(res.status, 413);
    assert.match((await res.json()).error, /4096 bytes/);
  } finally {
    await l.close();
  }
});

Deno.test("run lifecycle: queued, claimed by the in-process worker, results stored", async () => {
  const executor = fakeExecutor({ stepMs: 5 });
  const l = await lab({ executor, worker: true });
  try {
    const cfg = await (await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: JSON.stringify(CONFIG),
    })).json();
    const created = await l.api.request("/runs", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ configurationId: cfg.id }),
    });
    assert.equal(created.status, 201);
    const run = await created.json();
    assert.ok(["queued", "running"].includes(run.status));
    assert.equal((await l.api.request(`/runs/${run.id}/results`)).status, 409);

    // the event stream reports progress and ends when the run does
    const sse = await (await l.api.request(`/runs/${run.id}/events`)).text();
    assert.match(sse, /event: end/);
    const done = await (await l.api.request(`/runs/${run.id}`)).json();
    assert.equal(done.status, "succeeded", done.error);
    assert.equal(done.overhead, 1.4); // fake: 1 + (1 - 0.6)
    assert.equal(done.budgetBytes, 0.6 * FAKE_PEAK);
    assert.deepEqual(executor.calls[0], {
      kind: "train",
      model: "gpt",
      preset: "tiny",
      config: null,
      device: "cpu",
      budgetRatio: 0.6,
      budgetBytes: null,
      policy: "dtr-eq",
      costModel: "analytic",
      steps: 3,
      seed: 1,
      overheadLimit: 2,
    });
    const results = await (await l.api.request(`/runs/${run.id}/results`)).json();
    assert.deepEqual(results.stats, { evictions: 6, remats: 3 });
    const loss = await (await l.api.request(`/runs/${run.id}/loss`)).json();
    assert.deepEqual(loss.loss.map((p: { loss: number }) => p.loss), [2 / 2, 2 / 3, 2 / 4]);
    const mem = await (await l.api.request(`/runs/${run.id}/memory`)).json();
    assert.equal(mem.budgetBytes, 600000);
    assert.equal(mem.markers[0].kind, "evict");
    const trace = await l.api.request(`/runs/${run.id}/trace`);
    assert.equal(trace.status, 200);
    assert.match(trace.headers.get("content-disposition")!, /attachment/);
    assert.match(await trace.text(), /ANNOTATE/);
    const cmp = await (await l.api.request("/compare?model=gpt")).json();
    assert.deepEqual(cmp.policies, [{
      policy: "dtr-eq",
      points: [{ ratio: 0.6, feasible: true, overhead: 1.4, reason: null, n: 1 }],
      smallestFeasibleRatio: 0.6,
    }]);
  } finally {
    await l.close();
  }
});

Deno.test("a failing execution marks the run failed with the executor's reason", async () => {
  const l = await lab({ executor: fakeExecutor({ failPolicy: "lru" }), worker: true });
  try {
    const cfg = await (await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ ...CONFIG, policy: "lru" }),
    })).json();
    const run = await (await l.api.request(`/configurations/${cfg.id}/runs`, {
      method: "POST",
      headers: auth,
    })).json();
    const done = await until(async () => {
      const r = await (await l.api.request(`/runs/${run.id}`)).json();
      return r.status === "failed" && r;
    });
    assert.equal(done.error, "fake failure for policy lru");
    const res = await l.api.request(`/runs/${run.id}/results`);
    assert.equal(res.status, 409);
    assert.match((await res.json()).error, /fake failure/);
  } finally {
    await l.close();
  }
});

Deno.test("run list filters by model, policy and status, newest first", async () => {
  const l = await lab();
  try {
    for (const [model, policy] of [["gpt", "dtr"], ["resnet", "dtr"], ["gpt", "lru"]]) {
      const cfg = await (await l.api.request("/configurations", {
        method: "POST",
        headers: json,
        body: JSON.stringify({ ...CONFIG, model, policy }),
      })).json();
      await l.api.request("/runs", {
        method: "POST",
        headers: json,
        body: JSON.stringify({ configurationId: cfg.id }),
      });
    }
    const list = async (q: string) =>
      (await (await l.api.request(`/runs?${q}`)).json()).items.map((
        r: { model: string; policy: string },
      ) => `${r.model}/${r.policy}`);
    assert.deepEqual(await list(""), ["gpt/lru", "resnet/dtr", "gpt/dtr"]);
    assert.deepEqual(await list("model=gpt"), ["gpt/lru", "gpt/dtr"]);
    assert.deepEqual(await list("policy=dtr"), ["resnet/dtr", "gpt/dtr"]);
    assert.deepEqual(await list("status=queued&model=resnet"), ["resnet/dtr"]);
    assert.deepEqual(await list("status=succeeded"), []);
    const missing = await l.api.request("/runs", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ configurationId: "cfg_nope" }),
    });
    assert.equal(missing.status, 404);
    assert.match((await missing.json()).error, /cfg_nope/);
  } finally {
    await l.close();
  }
});

Deno.test("trace upload validates the lines and queues a simulation", async () => {
  const executor = fakeExecutor();
  const l = await lab({ executor, worker: true });
  try {
    const bad = await l.api.request("/traces", {
      method: "POST",
      headers: auth,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}\nnot json\n',
    });
    assert.equal(bad.status, 400);
    assert.deepEqual((await bad.json()).issues, [{
      field: "trace",
      reason: 'line 2: not JSON ("not json")',
    }]);
    const badQ = await l.api.request("/traces?ratios=0.5,2", {
      method: "POST",
      headers: auth,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    });
    assert.equal(badQ.status, 400);
    assert.match(JSON.stringify(await badQ.json()), /query.ratios/);
    const big = await l.api.request("/traces", {
      method: "POST",
      headers: auth,
      body: "x".repeat(9000),
    });
    assert.equal(big.status, 413);

    const form = new FormData();
    const text =
      '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"4"}\n';
    form.append("trace", new File([text], "My Net.log"));
    const res = await l.api.request("/traces?policies=dtr,lru&ratios=1,0.5,0.1", {
      method: "POST",
      headers: auth,
      body: form,
    });
    assert.equal(res.status, 201);
    const run = await res.json();
    assert.equal(run.model, "my-net");
    assert.equal(run.kind, "simulate");
    await until(async () =>
      (await (await l.api.request(`/runs/${run.id}`)).json()).status === "succeeded"
    );
    assert.equal(await (await l.api.request(`/runs/${run.id}/trace`)).text(), text);
    const results = await (await l.api.request(`/runs/${run.id}/results`)).json();
    assert.equal(results.stats.calls, 2, "the executor saw the uploaded trace");
    const cmp = await (await l.api.request("/compare?model=my-net&source=simulated")).json();
    assert.deepEqual(cmp.policies.map((p: { policy: string }) => p.policy), ["dtr", "lru"]);
    assert.deepEqual(cmp.policies[0].points.map((p: { ratio: number }) => p.ratio), [1, 0.5, 0.1]);
    assert.equal(cmp.policies[0].smallestFeasibleRatio, 0.5);
    assert.equal((await (await l.api.request("/traces")).json()).total, 1);
  } finally {
    await l.close();
  }
});

Deno.test("bench uploads are validated and appear as runs and comparison points", async () => {
  const l = await lab();
  try {
    const result = (policy: string, ratio: number, overhead: number | null) => ({
      kind: "live",
      model: "resnet",
      preset: "tiny",
      policy,
      ratio,
      feasible: overhead !== null,
      overhead,
      evictions: 10,
      losses: [2, 1.5],
    });
    const bad = await l.api.request("/bench", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ results: [{ ...result("dtr", 0.5, 1.2), ratio: 0 }] }),
    });
    assert.equal(bad.status, 400);
    assert.deepEqual((await bad.json()).issues.map((i: { field: string }) => i.field), [
      "results.0.ratio",
    ]);
    const noOverhead = await l.api.request("/bench", {
      method: "POST",
      headers: json,
      body: JSON.stringify({ results: [{ ...result("dtr", 0.5, null), feasible: true }] }),
    });
    assert.equal((await noOverhead.json()).issues[0].field, "results.0.overhead");
    const upload = {
      suite: "quick",
      commit: "abc123",
      machine: { hostname: "lab1", cores: 2 },
      results: [
        result("dtr", 0.5, 1.2),
        result("dtr", 0.5, 1.4),
        result("dtr", 0.5, 1.3),
        result("dtr", 0.2, null),
        result("lru", 0.5, 1.9),
        result("lru", 0.3, 2.5),
      ],
    };
    const res = await l.api.request("/bench", {
      method: "POST",
      headers: json,
      body: JSON.stringify(upload),
    });
    assert.equal(res.status, 201);
    assert.equal((await res.json()).runs, 6);
    const runs = await (await l.api.request("/runs?kind=bench&policy=lru")).json();
    assert.equal(runs.total, 2);
    assert.equal(runs.items[0].status, "succeeded");
    const cmp = await (await l.api.request("/compare?model=resnet&preset=tiny")).json();
    assert.deepEqual(cmp.policies, [
      {
        policy: "dtr",
        points: [
          { ratio: 0.5, feasible: true, overhead: 1.3, reason: null, n: 3 }, // median of 1.2, 1.4, 1.3
          { ratio: 0.2, feasible: false, overhead: null, reason: null, n: 0 }, // no reason uploaded
        ],
        smallestFeasibleRatio: 0.5,
      },
      {
        policy: "lru",
        points: [
          { ratio: 0.5, feasible: true, overhead: 1.9, reason: null, n: 1 },
          { ratio: 0.3, feasible: true, overhead: 2.5, reason: null, n: 1 },
        ],
        smallestFeasibleRatio: 0.3,
      },
    ]);
    const loss = await (await l.api.request(`/runs/${runs.items[0].id}/loss`)).json();
    assert.deepEqual(loss.loss.map((p: { loss: number }) => p.loss), [2, 1.5]);
    const schema = await (await l.api.request("/bench/schema")).json();
    assert.ok(schema.properties.results, "JSON schema of the upload is served");
  } finally {
    await l.close();
  }
});

Deno.test("restart persistence: a reopened SQLite file has everything acknowledged", async () => {
  const a = await lab();
  const cfg = await (await a.api.request("/configurations", {
    method: "POST",
    headers: json,
    body: JSON.stringify(CONFIG),
  })).json();
  const run = await (await a.api.request("/runs", {
    method: "POST",
    headers: json,
    body: JSON.stringify({ configurationId: cfg.id }),
  })).json();
  await a.close();
  const b = await lab({ dir: a.dir, worker: true });
  try {
    assert.deepEqual(await (await b.api.request(`/configurations/${cfg.id}`)).json(), cfg);
    const done = await until(async () => {
      const r = await (await b.api.request(`/runs/${run.id}`)).json();
      return r.status === "succeeded" && r;
    });
    assert.equal(done.configurationId, cfg.id);
  } finally {
    await b.close();
  }
  const c = await lab({ dir: a.dir });
  try {
    const r = await (await c.api.request(`/runs/${run.id}/results`)).json();
    assert.equal(r.overhead, 1.4);
    const applied = await c.store.db.all("SELECT version FROM schema_migrations ORDER BY version");
    assert.deepEqual(applied.map((x) => Number(x.version)), MIGRATIONS.map((m) => m.version));
  } finally {
    await c.close();
  }
});

const pgUrl = Deno.env.get("LIBRA_TEST_DATABASE_URL");
Deno.test({
  name: pgUrl
    ? "run lifecycle and restart persistence on PostgreSQL"
    : "run lifecycle on PostgreSQL (skipped: set LIBRA_TEST_DATABASE_URL to a server where the user may create databases)",
  ignore: !pgUrl,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { openPostgres } = await import("./db.ts");
    const name = `libra_app_test_${Date.now().toString(36)}`;
    const admin = await openPostgres(pgUrl!);
    await admin.run(`CREATE DATABASE ${name}`);
    const url = new URL(pgUrl!);
    url.pathname = `/${name}`;
    const dir = await Deno.makeTempDir({ prefix: "libra-api-pg-" });
    const open = (worker: boolean) =>
      openLab({
        dataDir: dir,
        databaseUrl: url.href,
        token: TOKEN,
        readToken: null,
        executor: fakeExecutor(),
        worker,
        workerOptions: { pollMs: 20, heartbeatMs: 50 },
        log: () => {},
      });
    try {
      const a = await open(true);
      let runId: string;
      try {
        assert.equal((await (await a.api.request("/health")).json()).database, "postgres");
        const cfg = await (await a.api.request("/configurations", {
          method: "POST",
          headers: json,
          body: JSON.stringify({ ...CONFIG, budgetRatio: null, budgetBytes: 600_000 }),
        })).json();
        const run = await (await a.api.request(`/configurations/${cfg.id}/runs`, {
          method: "POST",
          headers: auth,
        })).json();
        runId = run.id;
        await until(async () =>
          (await (await a.api.request(`/runs/${run.id}`)).json()).status === "succeeded"
        );
      } finally {
        await a.close();
      }
      const b = await open(false);
      try {
        const r = await (await b.api.request(`/runs/${runId}/results`)).json();
        assert.equal(r.budgetBytes, 600_000);
        assert.equal(r.budgetRatio, 600_000 / FAKE_PEAK);
        assert.equal(r.overhead, 1.4); // fake: 1 + (1 - ratio)
        const loss = await (await b.api.request(`/runs/${runId}/loss`)).json();
        assert.equal(loss.loss.length, 3);
      } finally {
        await b.close();
      }
    } finally {
      await admin.run(`DROP DATABASE ${name} WITH (FORCE)`);
      await admin.close();
    }
  },
});
