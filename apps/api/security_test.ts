/** Hostile input against the API (issue 12): bodies, JSON, names, listings, auth. */
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { flood } from "./_test_helpers.ts";
import { openLab } from "./lab.ts";

const TOKEN = "sec-write-token";
const auth = { Authorization: `Bearer ${TOKEN}` };
const json = { ...auth, "Content-Type": "application/json" };
const LIMITS = { json: 4096, trace: 8192, bench: 6000 };

async function lab(opts: { worker?: boolean } = {}) {
  const dir = await Deno.makeTempDir({ prefix: "libra-sec-test-" });
  return await openLab({
    dataDir: dir,
    dbPath: ":memory:",
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
