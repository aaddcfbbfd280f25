/**
 * The API's structure: the route index comes from the app's own route table, the zod
 * validator middleware answers in one format on every route (sweeps included), and the
 * trace-upload service refuses what it should before anything is stored.
 */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { z } from "zod";
import { fakeExecutor } from "./_fake_executor.ts";
import { routeIndex } from "./app.ts";
import { BodyTooLargeError } from "./body.ts";
import { openLab } from "./lab.ts";
import { acceptTraceUpload } from "./trace_upload.ts";
import { validate } from "./validate.ts";

const TOKEN = "routes-token";
const auth = { Authorization: `Bearer ${TOKEN}` };

async function lab() {
  const dir = await Deno.makeTempDir({ prefix: "libra-routes-test-" });
  return await openLab({
    dataDir: dir,
    token: TOKEN,
    readToken: null,
    executor: fakeExecutor(),
    worker: false,
    limits: { json: 4096, trace: 8192 },
    log: () => {},
  });
}

const TRACE = '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n';

Deno.test("GET /api lists every route the sub-apps registered, and only those", async () => {
  const l = await lab();
  try {
    const { routes } = await (await l.api.request("/")).json() as { routes: string[] };
    // what the README's route table documents
    for (
      const line of [
        "GET /api/health",
        "GET|POST /api/configurations",
        "GET|PUT|PATCH|DELETE /api/configurations/:id",
        "POST /api/configurations/:id/runs",
        "GET|POST /api/runs",
        "GET|DELETE /api/runs/:id",
        "POST /api/runs/:id/cancel",
        "GET /api/runs/:id/results",
        "GET /api/runs/:id/events (server-sent events)",
        "GET|POST /api/traces",
        "DELETE /api/traces/:id",
        "GET /api/compare?model=M[&preset=P][&source=live|simulated]",
        "GET /api/compare/models",
        "GET|POST /api/sweeps",
        "GET /api/sweeps/:id",
        "POST /api/bench",
        "GET /api/bench/schema",
      ]
    ) assert.ok(routes.includes(line), `${line} in ${JSON.stringify(routes)}`);
    assert.equal(new Set(routes).size, routes.length, "one line per path");
    // every listed method answers on its path (never the "no route" 404)
    for (const line of routes) {
      const [methods, rawPath] = line.split(" ") as [string, string];
      const path = rawPath.replace(/\?.*$/, "").replace(/^\/api/, "").replaceAll(":id", "x1") ||
        "/";
      for (const method of methods.split("|")) {
        const res = await l.api.request(path, { method, headers: auth });
        const body = await res.text();
        assert.doesNotMatch(body, /no route/, `${method} ${path}: ${res.status} ${body}`);
      }
    }
    // a path that is not in the table gets the JSON 404 that points at the index
    const none = await l.api.request("/runs/x1/nothing", { headers: auth });
    assert.equal(none.status, 404);
    assert.match((await none.json()).error, /no route GET \/runs\/x1\/nothing; see GET \/api/);
  } finally {
    await l.close();
  }
});

Deno.test("routeIndex reads a Hono app's table: methods merged per path, middleware left out", () => {
  const sub = new Hono();
  sub.get("/", (c) => c.text(""));
  sub.post("/", (c) => c.text(""));
  sub.get("/:id", (c) => c.text(""));
  const app = new Hono();
  app.use("*", (_c, next) => next());
  app.get("/", (c) => c.text(""));
  app.route("/things", sub);
  assert.deepEqual(routeIndex(app, "/x"), ["GET /x", "GET|POST /x/things", "GET /x/things/:id"]);
});

Deno.test("the validator middleware: one 400 format for bodies and queries, sweeps included", async () => {
  const l = await lab();
  try {
    const post = (path: string, body: string) =>
      l.api.request(path, {
        method: "POST",
        headers: { ...auth, "Content-Type": "application/json" },
        body,
      });
    const deep = "[".repeat(40) + "]".repeat(40);
    for (const path of ["/configurations", "/runs", "/sweeps", "/bench"]) {
      const broken = await post(path, "{oops");
      assert.equal(broken.status, 400, path);
      const b = await broken.json();
      assert.equal(b.error, "invalid request");
      assert.equal(b.issues.length, 1);
      assert.equal(b.issues[0].field, "body");
      assert.match(b.issues[0].reason, /^not valid JSON \(.*\); send application\/json$/, path);
      const tooDeep = await post(path, deep);
      assert.equal(tooDeep.status, 400, path);
      assert.deepEqual((await tooDeep.json()).issues, [
        { field: "body", reason: "JSON nested deeper than 32 levels" },
      ]);
    }
    const sweep = await post("/sweeps", JSON.stringify({ name: "s", models: ["mlp"] }));
    assert.equal(sweep.status, 400);
    assert.deepEqual(
      (await sweep.json()).issues.map((i: { field: string }) => i.field).sort(),
      ["policies", "ratios"],
    );
    const q = await l.api.request("/runs?limit=0&status=nope", { headers: auth });
    assert.equal(q.status, 400);
    assert.deepEqual(
      (await q.json()).issues.map((i: { field: string }) => i.field).sort(),
      ["query.limit", "query.status"],
    );
  } finally {
    await l.close();
  }
});

Deno.test("validate() hands the handler the parsed value (defaults applied)", async () => {
  const app = new Hono().post(
    "/",
    validate("json", z.object({ n: z.number(), k: z.number().default(3) })),
    (c) => c.json(c.req.valid("json")),
  ).get("/", validate("query", z.object({ m: z.coerce.number() })), (c) => {
    return c.json(c.req.valid("query"));
  });
  const ok = await app.request("/", { method: "POST", body: '{"n":2}' });
  assert.deepEqual(await ok.json(), { n: 2, k: 3 });
  assert.deepEqual(await (await app.request("/?m=7")).json(), { m: 7 });
  const bad = await app.request("/?m=x");
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).issues[0].field, "query.m");
});

Deno.test("the trace-upload service: options from the query or the form, bounded body, nothing stored on refusal", async () => {
  const l = await lab();
  try {
    const req = (url: string, body: BodyInit, headers: Record<string, string> = {}) =>
      new Request(url, { method: "POST", body, headers });
    // the API's form: options in the query, the body is the trace
    const q = await acceptTraceUpload(
      l.store,
      req("http://x/traces?name=net&policies=lru&ratios=1,0.5&overheadLimit=1.5", TRACE),
      { limit: 8192, optionsFrom: "query" },
    );
    assert.ok(q.ok);
    assert.deepEqual(q.run.spec, {
      kind: "simulate",
      name: "net",
      policies: ["lru"],
      ratios: [1, 0.5],
      overheadLimit: 1.5,
    });
    // the dashboard's: the same options as form fields beside the file
    const form = new FormData();
    form.append("trace", new File([TRACE], "Other Net.log"));
    form.append("policies", " lru ");
    form.append("ratios", "1,0.5");
    form.append("overheadLimit", "3");
    const f = await acceptTraceUpload(l.store, req("http://x/traces", form), {
      limit: 8192,
      optionsFrom: "form",
    });
    assert.ok(f.ok);
    assert.deepEqual(f.run.spec, {
      kind: "simulate",
      name: "other-net",
      policies: ["lru"],
      ratios: [1, 0.5],
      overheadLimit: 3,
    });
    assert.equal(await l.store.getTrace(f.run.id), TRACE);
    // refusals name the field the way each caller names it
    const badQ = await acceptTraceUpload(
      l.store,
      req("http://x/t?ratios=2&overheadLimit=1", TRACE),
      {
        limit: 8192,
        optionsFrom: "query",
      },
    );
    assert.ok(!badQ.ok);
    assert.deepEqual(badQ.issues.map((i) => i.field), ["query.ratios.0", "query.overheadLimit"]);
    const badForm = new FormData();
    badForm.append("trace", new File([TRACE], "t.log"));
    badForm.append("policies", "bogus");
    const badF = await acceptTraceUpload(l.store, req("http://x/traces", badForm), {
      limit: 8192,
      optionsFrom: "form",
    });
    assert.ok(!badF.ok);
    assert.equal(badF.issues[0]!.field, "policies.0");
    assert.match(badF.issues[0]!.reason, /unknown trace policy "bogus"/);
    // the dashboard's form needs a file: a plain body is not taken for the trace
    const plain = await acceptTraceUpload(l.store, req("http://x/traces", TRACE), {
      limit: 8192,
      optionsFrom: "form",
    });
    assert.ok(!plain.ok);
    assert.equal(plain.issues[0]!.field, "trace");
    // over the limit: BodyTooLargeError, whatever the caller
    await assert.rejects(
      acceptTraceUpload(l.store, req("http://x/traces", TRACE.repeat(300)), {
        limit: 8192,
        optionsFrom: "query",
      }),
      BodyTooLargeError,
    );
    assert.equal(
      (await l.store.listRuns({ limit: 10, offset: 0 })).total,
      2,
      "only the two accepted",
    );
  } finally {
    await l.close();
  }
});
