import assert from "node:assert/strict";
import { runMainOnTestEngine } from "./_test_engine.ts";
import type { BenchReport } from "./schema.ts";
import { apiName, toUploadBody, uploadReport, uploadUrl } from "./upload.ts";
// The API owns the ingestion schema; checking against it (not a copy) catches drift.
import { BenchUpload } from "../apps/api/schemas.ts";
import { openLab } from "../apps/api/lab.ts";

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
    await assert.rejects(
      uploadReport("http://lab.test", report, undefined, fetchFn),
      /LIBRA_API_TOKEN is not set/,
    );
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
