/** Hostile input against the API (issue 12): bodies, JSON, names, listings, auth. */
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { flood } from "./_test_helpers.ts";
import { openPostgres } from "./db.ts";
import { threadEstimator } from "./estimate.ts";
import { openLab } from "./lab.ts";

const TOKEN = "sec-write-token";
const auth = { Authorization: `Bearer ${TOKEN}` };
const json = { ...auth, "Content-Type": "application/json" };
const LIMITS = { json: 4096, trace: 8192, bench: 6000 };

const pgUrl = Deno.env.get("LIBRA_TEST_DATABASE_URL");
/** A fresh PostgreSQL database on the test server (dropped when the process ends). */
async function freshPostgres(): Promise<string> {
  const name = `libra_sec_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6)}`;
  const admin = await openPostgres(pgUrl!);
  await admin.run(`CREATE DATABASE ${name}`);
  await admin.close();
  const url = new URL(pgUrl!);
  url.pathname = `/${name}`;
  return url.href;
}
/** The databases the store tests run on: SQLite, and PostgreSQL when a server is given. */
const DATABASES: [string, () => Promise<{ databaseUrl: string } | { dbPath: string }>][] = [
  ["SQLite", () => Promise.resolve({ dbPath: ":memory:" })],
  ...(pgUrl
    ? [["PostgreSQL", async () => ({ databaseUrl: await freshPostgres() })] as [
      string,
      () => Promise<{ databaseUrl: string }>,
    ]]
    : []),
];

async function lab(
  opts: { worker?: boolean; db?: { databaseUrl: string } | { dbPath: string } } = {},
) {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  return await openLab({
    dataDir: dir,
    ...(opts.db ?? { dbPath: ":memory:" }),
    token: TOKEN,
    readToken: null,
    executor: fakeExecutor(),
    worker: opts.worker ?? false,
    workerOptions: { pollMs: 20, heartbeatMs: 50 },
    limits: LIMITS,
    log: () => {},
  });
}

const POST_ROUTES: [string, number][] = [
  ["/configurations", LIMITS.json],
  ["/runs", LIMITS.json],
  ["/runs/run_x/cancel", LIMITS.json],
  ["/configurations/cfg_x/runs", LIMITS.json],
  ["/traces", LIMITS.trace],
  ["/bench", LIMITS.bench],
  ["/health", LIMITS.json],
  ["/no-such-route", LIMITS.json],
];

Deno.test("every API route refuses a chunked body over its limit with 413, reading at most the limit", async () => {
  const l = await lab();
  try {
    for (const [path, limit] of POST_ROUTES) {
      for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
        const body = flood(50 * limit, { chunk: 1024 });
        const res = await l.api.request(path, {
          method,
          headers: json,
          body: body.stream,
          duplex: "half",
        } as RequestInit);
        assert.equal(res.status, 413, `${method} ${path}`);
        assert.match((await res.json()).error, new RegExp(`${limit} bytes`));
        assert.ok(
          body.pulled() <= limit + 2 * 1024,
          `${method} ${path}: read ${body.pulled()} bytes for a limit of ${limit}`,
        );
      }
    }
    // still serving
    assert.equal((await l.api.request("/health")).status, 200);
  } finally {
    await l.close();
  }
});

Deno.test("a Content-Length smaller than the body does not get a body past the limit", async () => {
  const l = await lab();
  try {
    const line = '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n';
    const text = line.repeat(Math.ceil(3 * LIMITS.trace / line.length));
    const res = await l.api.request("/traces", {
      method: "POST",
      headers: { ...auth, "Content-Length": "100" },
      body: text,
    });
    assert.equal(res.status, 413);
    assert.equal((await l.api.request("/traces")).status, 200);
    assert.equal((await (await l.api.request("/traces")).json()).total, 0, "nothing was stored");
    // a declared length over the limit is refused before reading
    const body = flood(10 * LIMITS.json, { chunk: 1024 });
    const declared = await l.api.request("/configurations", {
      method: "POST",
      headers: { ...json, "Content-Length": String(10 * LIMITS.json) },
      body: body.stream,
      duplex: "half",
    } as RequestInit);
    assert.equal(declared.status, 413);
    assert.match((await declared.json()).error, /Content-Length is 40960/);
    assert.ok(body.pulled() <= 1024, `read ${body.pulled()} bytes of a body declared too large`);
  } finally {
    await l.close();
  }
});

Deno.test("a multipart trace upload over the trace limit is refused while reading it", async () => {
  const l = await lab();
  try {
    const form = new FormData();
    form.append("trace", new File(["x".repeat(3 * LIMITS.trace)], "big.log"));
    const res = await l.api.request("/traces", { method: "POST", headers: auth, body: form });
    assert.equal(res.status, 413);
  } finally {
    await l.close();
  }
});

const CONFIG = { name: "c", model: "gpt", preset: "tiny", budgetRatio: 0.6, policy: "dtr" };
const BIG = { json: 1 << 20, trace: 8192, bench: 6000 };

async function post(l: Awaited<ReturnType<typeof lab>>, path: string, body: unknown) {
  const res = await l.api.request(path, {
    method: "POST",
    headers: json,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

Deno.test("a deeply nested JSON body is refused with 400 and writes nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    worker: false,
    limits: BIG,
    log: () => {},
  });
  try {
    const n = 400_000;
    const deep = JSON.stringify({ ...CONFIG, config: { a: 0 } })
      .replace('"a":0', `"a":${"[".repeat(n)}${"]".repeat(n)}`);
    const r = await post(l, "/configurations", deep);
    assert.equal(r.status, 400);
    assert.match(r.body.issues[0].reason, /nested deeper than 32/);
    // strings with brackets do not count as nesting
    const ok = await post(l, "/configurations", { ...CONFIG, name: "[[[[".repeat(20) });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    const list = await l.api.request("/configurations");
    assert.equal(list.status, 200);
    assert.equal((await list.json()).total, 1, "only the valid configuration was stored");
    assert.equal((await l.api.request("/runs")).status, 200);
  } finally {
    await l.close();
  }
});

Deno.test("unknown model, preset, policy, cost model and trace policies are refused naming the choices", async () => {
  const l = await lab();
  try {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ model: "nosuch" }, "model", /unknown model "nosuch"; choose one of mlp, resnet, gpt/],
      [
        { preset: "huge" },
        "preset",
        /unknown preset of gpt "huge"; choose one of tiny, small, paper/,
      ],
      [
        { policy: "magic" },
        "policy",
        /unknown policy "magic"; choose one of dtr, .*lru\+swap.*chen-sqrt/,
      ],
      [
        { costModel: "psychic" },
        "costModel",
        /unknown cost model "psychic"; choose one of analytic, profiled, measured/,
      ],
      [{ config: { depth: 3 } }, "config", /depth.*gpt takes: vocabSize, contextLength/],
      [{ config: { nEmbd: "wide" } }, "config.nEmbd", /number/],
      [{ config: { nEmbd: 30, nHead: 4 } }, "config.nEmbd", /divisible by nHead/],
      [{ config: { nLayer: 1e9 } }, "config.nLayer", /<= 256/],
      [{ model: "mlp", config: { hidden: [-1] } }, "config.hidden.0", />= 1/],
    ];
    for (const [patch, field, reason] of cases) {
      const r = await post(l, "/configurations", { ...CONFIG, ...patch });
      assert.equal(r.status, 400, JSON.stringify(patch));
      const issue = r.body.issues.find((i: { field: string }) => i.field === field);
      assert.ok(issue, `${JSON.stringify(patch)}: no issue on ${field}: ${JSON.stringify(r.body)}`);
      assert.match(issue.reason, reason);
    }
    for (const policy of ["dtr", "dtr-eq+swap", "libra", "chen-sqrt"]) {
      const r = await post(l, "/configurations", { ...CONFIG, policy, model: "mlp" });
      assert.equal(r.status, 201, `${policy}: ${JSON.stringify(r.body)}`);
    }
    const t = await l.api.request("/traces?policies=dtr,bogus", {
      method: "POST",
      headers: auth,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    });
    assert.equal(t.status, 400);
    assert.match(
      JSON.stringify(await t.json()),
      /unknown trace policy \\"bogus\\"; choose one of dtr/,
    );
    const planners = await l.api.request("/traces?policies=libra,chen-sqrt,dtr", {
      method: "POST",
      headers: auth,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    });
    assert.equal(planners.status, 201);
    // PATCH validates the merged configuration the same way
    const id = (await post(l, "/configurations", CONFIG)).body.id;
    const p = await l.api.request(`/configurations/${id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ model: "unet" }),
    });
    assert.equal(p.status, 200, "gpt's preset tiny exists for unet");
    const q = await l.api.request(`/configurations/${id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ preset: "resnet50" }),
    });
    assert.equal(q.status, 400);
  } finally {
    await l.close();
  }
});

for (const [dbName, db] of DATABASES) {
  Deno.test(`${"names with control characters are refused (NUL would fail on PostgreSQL)"} (${dbName})`, async () => {
    const l = await lab({ db: await db() });
    try {
      for (const name of ["a\u0000b", "line\nbreak", "esc\u001b[31m", "del\u007f"]) {
        const r = await post(l, "/configurations", { ...CONFIG, name });
        assert.equal(r.status, 400, JSON.stringify(name));
        assert.equal(r.body.issues[0].field, "name");
        assert.match(r.body.issues[0].reason, /control characters/);
      }
      const bench = await post(l, "/bench", {
        suite: "s\u0000",
        results: [{
          kind: "live",
          model: "m",
          policy: "p",
          ratio: 1,
          feasible: false,
          overhead: null,
        }],
      });
      assert.equal(bench.status, 400);
      assert.equal(bench.body.issues[0].field, "suite");
      const nul = [
        '{"INSTRUCTION":"CONSTANT","NAME":"x\u0000"}',
        '{"INSTRUCTION":"CONSTANT"}\u0000',
      ];
      for (const trace of nul) {
        const t = await l.api.request("/traces", { method: "POST", headers: auth, body: trace });
        assert.equal(t.status, 400, JSON.stringify(trace));
      }
      assert.equal((await (await l.api.request("/configurations")).json()).total, 0);
      assert.equal((await (await l.api.request("/traces")).json()).total, 0);
    } finally {
      await l.close();
    }
  });
}

for (const [dbName, db] of DATABASES) {
  Deno.test(`${"one stored value beyond 2^53 does not break a listing; the row says what is wrong"} (${dbName})`, async () => {
    const l = await lab({ db: await db() });
    try {
      const a = await post(l, "/configurations", CONFIG);
      const run = await post(l, `/configurations/${a.body.id}/runs`, {});
      const sim = await l.api.request("/traces", {
        method: "POST",
        headers: auth,
        body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
      });
      const simId = (await sim.json()).id;
      // values as an older version stored them (a peak above 2^53 from a hostile trace)
      await l.store.db.run("UPDATE runs SET peak_bytes = ?, baseline_peak_bytes = ? WHERE id = ?", [
        2n ** 60n + 1n,
        2n ** 53n + 1n,
        simId,
      ]);
      await l.store.db.run("UPDATE runs SET spec = ? WHERE id = ?", ["{not json", run.body.id]);
      for (const path of ["/runs", "/traces", `/runs/${simId}`]) {
        const res = await l.api.request(path);
        assert.equal(res.status, 200, path);
      }
      const items = (await (await l.api.request("/runs")).json()).items;
      const bad = items.find((r: { id: string }) => r.id === simId);
      assert.equal(bad.peakBytes, null);
      assert.match(bad.corrupt, /peak_bytes = 1152921504606846977 is not a safe integer/);
      assert.match(bad.corrupt, /baseline_peak_bytes = 9007199254740993/);
      const badSpec = items.find((r: { id: string }) => r.id === run.body.id);
      assert.match(badSpec.corrupt, /spec is not valid JSON/);
    } finally {
      await l.close();
    }
  });
}

Deno.test("a result with a byte count beyond 2^53 fails its run and is not stored", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const base = fakeExecutor();
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: {
      name: "huge",
      async execute(spec, ctx) {
        const r = await base.execute(spec, ctx);
        return { ...r, peakBytes: 2 ** 60, baselinePeakBytes: 2 ** 53 + 2 };
      },
    },
    worker: true,
    workerOptions: { pollMs: 20, heartbeatMs: 50 },
    log: () => {},
  });
  try {
    const res = await l.api.request("/traces", {
      method: "POST",
      headers: auth,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    });
    const id = (await res.json()).id;
    let run;
    for (let i = 0; i < 250; i++) {
      run = await (await l.api.request(`/runs/${id}`)).json();
      if (run.status !== "queued" && run.status !== "running") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(run.status, "failed");
    assert.match(run.error, /peakBytes = 1152921504606847000 is not a byte count/);
    assert.equal((await l.api.request(`/runs/${id}/results`)).status, 409);
    assert.equal((await l.api.request("/runs")).status, 200);
  } finally {
    await l.close();
  }
});

for (const [dbName, db] of DATABASES) {
  Deno.test(`${"DELETE removes an ended run or trace with its results; it needs the write token"} (${dbName})`, async () => {
    const l = await lab({ worker: true, db: await db() });
    try {
      const cfg = await post(l, "/configurations", CONFIG);
      const run = (await post(l, `/configurations/${cfg.body.id}/runs`, {})).body;
      const sim = await (await l.api.request("/traces", {
        method: "POST",
        headers: auth,
        body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
      })).json();
      for (let i = 0; i < 250; i++) {
        const [a, b] = await Promise.all(
          [run.id, sim.id].map(async (id) => (await (await l.api.request(`/runs/${id}`)).json())),
        );
        if (a.status === "succeeded" && b.status === "succeeded") break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const del = (path: string, headers: Record<string, string> = auth) =>
        l.api.request(path, { method: "DELETE", headers });
      assert.equal((await del(`/runs/${run.id}`, {})).status, 401);
      assert.equal((await del(`/runs/${run.id}`, { Cookie: `libra_token=${TOKEN}` })).status, 401);
      assert.equal((await del(`/traces/${run.id}`)).status, 404, "a training run is not a trace");
      assert.equal((await del(`/runs/${run.id}`)).status, 204);
      assert.equal((await l.api.request(`/runs/${run.id}`)).status, 404);
      assert.equal((await del(`/runs/${run.id}`)).status, 404);
      assert.equal((await del(`/traces/${sim.id}`)).status, 204);
      assert.equal((await l.api.request(`/runs/${sim.id}/trace`)).status, 404);
      const left = await l.store.db.all(
        "SELECT (SELECT COUNT(*) FROM run_points) AS p, (SELECT COUNT(*) FROM run_results) AS r, (SELECT COUNT(*) FROM run_inputs) AS i",
      );
      assert.deepEqual([left[0]!.p, left[0]!.r, left[0]!.i].map(Number), [0, 0, 0]);
      // a queued run must be canceled first
      await l.worker!.stop();
      const queued = (await post(l, `/configurations/${cfg.body.id}/runs`, {})).body;
      const busy = await del(`/runs/${queued.id}`);
      assert.equal(busy.status, 409);
      assert.match((await busy.json()).error, /cancel it first/);
    } finally {
      await l.close();
    }
  });
}

Deno.test("a run whose estimated memory is above the limit is refused before it is queued", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const est = threadEstimator();
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    estimator: est.estimate,
    maxRunBytes: 2 ** 30,
    worker: false,
    log: () => {},
  });
  try {
    const huge = await post(l, "/configurations", {
      ...CONFIG,
      model: "mlp",
      config: { hidden: [16384, 16384] },
    });
    assert.equal(huge.status, 201);
    const r = await post(l, `/configurations/${huge.body.id}/runs`, {});
    assert.equal(r.status, 400);
    assert.equal(r.body.issues[0].field, "configuration");
    assert.match(
      r.body.issues[0].reason,
      /would need about 4\.0 GiB \(estimated on the meta backend.*limit of 1\.0 GiB per run/,
    );
    const r2 = await post(l, "/runs", { configurationId: huge.body.id });
    assert.equal(r2.status, 400);
    assert.equal((await (await l.api.request("/runs")).json()).total, 0, "nothing was queued");
    const tiny = await post(l, "/configurations", { ...CONFIG, model: "mlp" });
    assert.equal((await post(l, `/configurations/${tiny.body.id}/runs`, {})).status, 201);
  } finally {
    await l.close();
    est.close();
  }
});

Deno.test("only the health route is public; paths ending in /health need the token", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    readToken: "reader",
    executor: fakeExecutor(),
    worker: false,
    log: () => {},
  });
  try {
    assert.equal((await l.api.request("/health")).status, 200);
    for (const path of ["/configurations/health", "/runs/health", "/x/health", "/health/"]) {
      assert.equal((await l.api.request(path)).status, 401, `GET ${path}`);
    }
    for (const method of ["PUT", "PATCH", "DELETE", "POST"]) {
      const res = await l.api.request("/configurations/health", {
        method,
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(CONFIG),
      });
      assert.equal(res.status, 401, `${method} /configurations/health`);
    }
    assert.equal((await l.api.request("/health", { method: "POST" })).status, 401);
  } finally {
    await l.close();
  }
});

Deno.test("a server without a worker still fails the runs of a worker that died", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    worker: false,
    workerOptions: { staleMs: 200 },
    log: () => {},
  });
  try {
    const cfg = await post(l, "/configurations", CONFIG);
    const run = (await post(l, `/configurations/${cfg.body.id}/runs`, {})).body;
    assert.equal((await l.store.claimNextRun("dead-worker"))!.id, run.id);
    let now;
    for (let i = 0; i < 100; i++) {
      now = (await l.store.getRun(run.id))!;
      if (now.status !== "running") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(now!.status, "failed");
    assert.match(now!.error!, /worker dead-worker stopped sending heartbeats/);
  } finally {
    await l.close();
  }
});

Deno.test("schemas.ts stays free of the packages (the dashboard's form bundles it for the browser)", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("./schemas.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout));
  const local = (info.modules as { specifier: string }[]).map((m) => m.specifier)
    .filter((s) => s.startsWith("file:"));
  assert.deepEqual(local.map((s) => s.replace(/^.*\/apps\//, "apps/")), ["apps/api/schemas.ts"]);
});

Deno.test("a sweep is held to the same checks: names, control characters, the memory estimate", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  const l = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    estimator: (spec) => {
      const bytes = spec.preset === "paper" ? 2 ** 40 : 1000;
      return Promise.resolve({ tensorBytes: bytes, dataBytes: 0, totalBytes: bytes });
    },
    maxRunBytes: 2 ** 30,
    worker: false,
    log: () => {},
  });
  try {
    const SWEEP = { name: "s", models: ["mlp"], policies: ["dtr"], ratios: [0.5] };
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ models: ["vgg"] }, "models.0", /unknown model "vgg"; choose one of mlp/],
      [{ presets: ["huge"] }, "presets.0", /unknown preset of mlp "huge"/],
      [{ policies: ["dtr", "magic"] }, "policies.1", /unknown policy "magic"/],
      [{ costModel: "psychic" }, "costModel", /unknown cost model "psychic"/],
      [{ name: "a\u0000b" }, "name", /control characters/],
      [{ presets: ["tiny", "paper"] }, "models", /mlp paper: the run would need about 1\.0 TiB/],
    ];
    for (const [patch, field, reason] of cases) {
      const r = await post(l, "/sweeps", { ...SWEEP, ...patch });
      assert.equal(r.status, 400, JSON.stringify(patch));
      const issue = r.body.issues.find((i: { field: string }) => i.field === field);
      assert.ok(issue, `${JSON.stringify(patch)}: ${JSON.stringify(r.body)}`);
      assert.match(issue.reason, reason);
    }
    assert.equal((await (await l.api.request("/runs")).json()).total, 0, "nothing was queued");
    const ok = await post(l, "/sweeps", { ...SWEEP, policies: ["dtr", "libra", "lru+swap"] });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal((await (await l.api.request("/runs")).json()).total, 3);
  } finally {
    await l.close();
  }
});
