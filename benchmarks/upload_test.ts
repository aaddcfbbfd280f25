import assert from "node:assert/strict";
import { runMainOnTestEngine } from "./_test_engine.ts";
import type { BenchReport } from "./schema.ts";
import { apiName, resolveToken, toUploadBody, uploadReport, uploadUrl } from "./upload.ts";
// The API owns the ingestion schema; checking against it (not a copy) catches drift.
import { BenchUpload } from "../apps/api/schemas.ts";
import { openLab } from "../apps/api/lab.ts";
import { createWebApp } from "../apps/web/main.ts";

async function sampleReport(): Promise<BenchReport> {
  const r = await runMainOnTestEngine([
    "--models",
    "mlp",
    "--policies",
    "dtr-eq,lru",
    "--ratios",
    "1,0.3",
    "--repeat",
    "2",
  ]);
  try {
    return JSON.parse(Deno.readTextFileSync(`${r.dir}/results.json`));
  } finally {
    Deno.removeSync(r.dir, { recursive: true });
  }
}

Deno.test("toUploadBody() produces what the lab API's BenchUpload schema accepts", async () => {
  const report = await sampleReport();
  const body = toUploadBody(report);
  const parsed = BenchUpload.safeParse(body);
  assert.ok(parsed.success, JSON.stringify(parsed.error?.issues.slice(0, 3)));
  assert.equal(body.results.length, report.results.length);
  const lru03 = body.results.find((r) =>
    r.kind === "live" && r.policy === "lru" && r.ratio === 0.3
  )!;
  assert.equal(lru03.feasible, false); // the test engine's lru needs ratio >= 0.4
  assert.equal(lru03.overhead, null);
  assert.equal(lru03.reason, "out of memory");
  assert.ok(body.results.every((r) => r.feasible === (r.reason === null)));
  // The lab knows two reasons: a run stopped by the time limit was thrashing; a failure has none.
  const i = report.results.findIndex((r) => !r.feasible);
  for (
    const [kind, sent] of [
      ["thrashing", "thrashing"],
      ["time limit", "thrashing"],
      ["failed", null],
    ] as const
  ) {
    const results = report.results.map((r, j) => j === i ? { ...r, reason: kind } : r);
    assert.equal(toUploadBody({ ...report, results }).results[i]!.reason, sent, kind);
  }
  const withMemory = body.results.filter((r) => r.memory !== undefined);
  assert.equal(withMemory.length, report.timelines.length, "each timeline rides on its result");
  assert.equal(apiName("ResNet 32/56.log"), "resnet-32-56.log");
});

Deno.test("uploadReport() posts to /api/bench with the token; the API stores every result as a run", async () => {
  const report = await sampleReport();
  const lab = await openLab({ dbPath: ":memory:", token: "secret", worker: false, log: () => {} });
  try {
    // Route the client's fetch into the Hono app (mounted at /api in the server).
    const fetchFn = ((input: string | URL | Request, init?: RequestInit) => {
      const u = new URL(String(input));
      assert.ok(u.pathname.startsWith("/api/"));
      return lab.api.request(u.pathname.slice(4) + u.search, init);
    }) as typeof fetch;
    await assert.rejects(uploadReport("http://lab.test", report, "wrong", fetchFn), /answered 401/);

    const res = await uploadReport("http://lab.test/", report, "secret", fetchFn);
    assert.equal(res.status, 201);
    assert.equal((res.body as { runs: number }).runs, report.results.length);
    const cmp = await (await lab.api.request("/compare?model=mlp&preset=tiny")).json();
    const policies = cmp.policies.map((p: { policy: string }) => p.policy).sort();
    assert.deepEqual(policies, ["dtr-eq", "lru"]);
  } finally {
    await lab.close();
  }
  assert.equal(uploadUrl("http://x:8000"), "http://x:8000/api/bench");
  assert.equal(uploadUrl("http://x:8000/lab/"), "http://x:8000/lab/api/bench");
});

Deno.test("resolveToken(): LIBRA_API_TOKEN first, else the server's .libra/api-token, else a clear error", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/api-token`;
    await assert.rejects(
      resolveToken(undefined, file),
      /no API token: LIBRA_API_TOKEN is not set and .*api-token has none/,
    );
    await Deno.writeTextFile(file, "from-file\n");
    assert.deepEqual(await resolveToken(undefined, file), { token: "from-file", source: file });
    assert.deepEqual(await resolveToken("from-env", file), {
      token: "from-env",
      source: "LIBRA_API_TOKEN",
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A lab behind the web app (the dashboard server), reached through a fetch function. */
async function labFetch() {
  const lab = await openLab({ dbPath: ":memory:", token: "secret", worker: false, log: () => {} });
  const app = createWebApp(lab);
  const posts: string[] = [];
  const fetchFn = ((input: string | URL | Request, init?: RequestInit) => {
    const u = new URL(String(input));
    if (init?.method === "POST") posts.push(u.pathname);
    return Promise.resolve(app.request(u.pathname + u.search, init));
  }) as typeof fetch;
  return { lab, app, fetchFn, posts };
}

Deno.test("bench --upload checks the token before running the suite: a refused token runs nothing", async () => {
  const { lab, fetchFn, posts } = await labFetch();
  try {
    const { main } = await import("./main.ts");
    const { testEngine } = await import("./_test_engine.ts");
    const engine = testEngine();
    const dir = await Deno.makeTempDir();
    let err = "";
    const status = await main(["--out", dir, "--models", "mlp", "--upload", "http://lab.test"], {
      engine: () => Promise.resolve(engine),
      micro: () => Promise.resolve([]),
      stdout: () => {},
      stderr: (s) => (err += s),
      traceDefaults: () => [],
      upload: { fetch: fetchFn, token: () => Promise.resolve({ token: "wrong", source: "test" }) },
    });
    assert.equal(status, 2);
    assert.match(err, /refused the token \(401\).*nothing was run/);
    assert.deepEqual(engine.calls, [], "the suite did not run");
    assert.equal(await Deno.stat(`${dir}/results.json`).then(() => true, () => false), false);
    assert.deepEqual(posts, ["/api/bench"], "only the check was posted");
    const runs = await lab.store.listRuns({ limit: 10, offset: 0 });
    assert.equal(runs.total, 0, "the check stores nothing");
    await Deno.remove(dir, { recursive: true });
  } finally {
    await lab.close();
  }
});

Deno.test("bench --upload with the server's token uploads and prints links that show the results", async () => {
  const { lab, app, fetchFn } = await labFetch();
  try {
    const { main } = await import("./main.ts");
    const { testEngine } = await import("./_test_engine.ts");
    const dir = await Deno.makeTempDir();
    let out = "";
    const status = await main(
      [
        "--out",
        dir,
        "--models",
        "mlp",
        "--policies",
        "dtr-eq",
        "--ratios",
        "1,0.5",
        "--upload",
        "http://lab.test",
      ],
      {
        engine: () => Promise.resolve(testEngine()),
        micro: () => Promise.resolve([]),
        stdout: (s) => (out += s + "\n"),
        stderr: () => {},
        traceDefaults: () => [],
        upload: {
          fetch: fetchFn,
          token: () => Promise.resolve({ token: "secret", source: ".libra/api-token" }),
        },
      },
    );
    assert.equal(status, 0, out);
    assert.match(out, /accepts the token \(from \.libra\/api-token\)/);
    const links = [...out.matchAll(/^ {2}(http:\/\/lab\.test\/\S+)$/gm)].map((m) => m[1]!);
    assert.deepEqual(links, [
      "http://lab.test/runs?kind=bench",
      "http://lab.test/compare?model=mlp%2Ftiny&source=live",
    ]);
    const report = JSON.parse(await Deno.readTextFile(`${dir}/results.json`));
    const stored = await lab.store.listRuns({ kind: "bench", limit: 100, offset: 0 });
    assert.equal(stored.total, report.results.length);
    // the links lead to pages that show them
    const list = await (await app.request(new URL(links[0]!).pathname + "?kind=bench")).text();
    for (const r of stored.items) assert.ok(list.includes(r.id), `${r.id} listed`);
    const u = new URL(links[1]!);
    const cmp = await (await app.request(u.pathname + u.search)).text();
    assert.match(cmp, /data-policy="dtr-eq"/);
    await Deno.remove(dir, { recursive: true });
  } finally {
    await lab.close();
  }
});
