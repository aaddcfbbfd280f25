/** Hostile input against the dashboard and the whole server (issue 12). */
import assert from "node:assert/strict";
import { openLab } from "@libra/api";
import { fakeExecutor } from "../api/_fake_executor.ts";
import { flood, tinyMlpConfiguration } from "../api/_test_helpers.ts";
import { createWebApp, LoginLimiter, startServer } from "./main.ts";

const TOKEN = "web-sec-token";
const COOKIE = { Cookie: `libra_token=${TOKEN}` };
const LIMITS = { json: 4096, trace: 8192, bench: 6000, form: 2048 };

async function setup() {
  const dir = await Deno.makeTempDir({ prefix: "libra-web-sec-" });
  const lab = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    readToken: null,
    executor: fakeExecutor(),
    worker: false,
    limits: LIMITS,
    log: () => {},
  });
  return { lab, app: createWebApp(lab) };
}

Deno.test("every page route refuses a chunked body over its limit with 413, reading at most the limit", async () => {
  const { lab, app } = await setup();
  try {
    const routes: [string, number][] = [
      ["/login", LIMITS.form],
      ["/logout", LIMITS.form],
      ["/configurations", LIMITS.form],
      ["/runs/run_x/cancel", LIMITS.form],
      ["/traces", LIMITS.trace],
      ["/nowhere", LIMITS.form],
      ["/api/configurations", LIMITS.json],
      ["/api/traces", LIMITS.trace],
    ];
    for (const [path, limit] of routes) {
      const body = flood(100 * limit, { chunk: 512 });
      const res = await app.request(path, {
        method: "POST",
        headers: {
          ...COOKIE,
          Authorization: `Bearer ${TOKEN}`,
          "Content-Type": "application/x-www-form-urlencoded",
        },
        body: body.stream,
        duplex: "half",
      } as RequestInit);
      assert.equal(res.status, 413, path);
      assert.match(await res.text(), new RegExp(`limit is ${limit} bytes`), path);
      assert.ok(body.pulled() <= limit + 1024, `${path}: read ${body.pulled()} for ${limit}`);
    }
    // a lying Content-Length on the login form
    const res = await app.request("/login", {
      method: "POST",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        "Content-Length": "10",
      },
      body: `token=${"x".repeat(10 * LIMITS.form)}`,
    });
    assert.equal(res.status, 413);
    // the dashboard's multipart trace upload is bounded at the trace limit
    const big = new FormData();
    big.append("trace", new File(['{"INSTRUCTION":"CONSTANT","NAME":"x"}\n'.repeat(700)], "a.log"));
    const up = await app.request("/traces", { method: "POST", headers: COOKIE, body: big });
    assert.equal(up.status, 413);
    assert.equal((await lab.store.listRuns({ limit: 5, offset: 0 })).total, 0);
  } finally {
    await lab.close();
  }
});

Deno.test("a real server stays up and small after large chunked and lying bodies on /login", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-web-sec-" });
  const server = await startServer({
    port: 0,
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    readToken: null,
    executor: fakeExecutor(),
    worker: false,
    build: false,
    catalog: { models: ["gpt"], policies: ["dtr"] },
    log: () => {},
  });
  try {
    const before = Deno.memoryUsage().rss;
    for (const path of ["/login", "/api/configurations", "/traces"]) {
      const body = flood(256 << 20, { chunk: 64 << 10 });
      const res = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${TOKEN}`,
          "Content-Type": "application/x-www-form-urlencoded",
        },
        body: body.stream,
        duplex: "half",
      } as RequestInit).catch((e) => e as Error);
      if (res instanceof Response) {
        assert.equal(res.status, 413, path);
        await res.body?.cancel();
      }
      assert.ok(body.pulled() < 128 << 20, `${path}: the client sent ${body.pulled()} bytes`);
    }
    // a Content-Length far below the real size: the rest is not read as this body
    const conn = await Deno.connect({ port: server.port, hostname: "127.0.0.1" });
    const head = `POST /login HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n` +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 5\r\n\r\n";
    await conn.write(new TextEncoder().encode(head + "token" + "=".repeat(1 << 20)));
    const reply = new Uint8Array(4096);
    const n = await conn.read(reply);
    conn.close();
    assert.match(new TextDecoder().decode(reply.subarray(0, n ?? 0)), /^HTTP\/1\.1 \d{3}/);
    const health = await fetch(`${server.url}/api/health`);
    assert.equal(health.status, 200, "the server is still up");
    await health.body?.cancel();
    const grown = Deno.memoryUsage().rss - before;
    assert.ok(grown < 200 << 20, `rss grew by ${(grown / 2 ** 20).toFixed(0)} MiB`);
  } finally {
    await server.close();
  }
});

Deno.test("a row with a value beyond 2^53 renders as an error cell, not a 500", async () => {
  const { lab, app } = await setup();
  try {
    const sim = await lab.store.createSimulation(
      { kind: "simulate", name: "t", policies: ["dtr"], ratios: [1] },
      '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    );
    await lab.store.db.run("UPDATE runs SET peak_bytes = ? WHERE id = ?", [2n ** 60n, sim.id]);
    for (const path of ["/runs", "/traces", `/runs/${sim.id}`]) {
      const res = await app.request(path, { headers: COOKIE });
      assert.equal(res.status, 200, path);
      const html = await res.text();
      if (path === "/runs") assert.match(html, /unreadable row/);
    }
  } finally {
    await lab.close();
  }
});

Deno.test("every response forbids framing and carries the content policy", async () => {
  const { lab, app } = await setup();
  try {
    for (
      const path of ["/login", "/runs", "/api/health", "/api/runs", "/nowhere", "/static/x.css"]
    ) {
      const res = await app.request(path, { headers: COOKIE });
      await res.body?.cancel();
      assert.equal(res.headers.get("x-frame-options"), "DENY", path);
      const csp = res.headers.get("content-security-policy") ?? "";
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
    }
  } finally {
    await lab.close();
  }
});

Deno.test("cross-origin posts to /logout, /login and the forms are refused", async () => {
  const { lab, app } = await setup();
  try {
    const evil = { ...COOKIE, Origin: "http://evil.example" };
    for (const path of ["/logout", "/login", "/configurations", "/traces", "/runs/run_x/cancel"]) {
      const res = await app.request(path, { method: "POST", headers: evil, body: "token=x" });
      assert.equal(res.status, 403, path);
      assert.match(await res.text(), /cross-origin POST .* refused/);
      const site = await app.request(path, {
        method: "POST",
        headers: { ...COOKIE, "Sec-Fetch-Site": "cross-site" },
        body: "token=x",
      });
      assert.equal(site.status, 403, `${path} (Sec-Fetch-Site)`);
    }
    const opaque = await app.request("/logout", {
      method: "POST",
      headers: { ...COOKIE, Origin: "null" },
    });
    assert.equal(opaque.status, 403, "an opaque origin (sandboxed frame) is another origin");
    // the logout of this origin still works, and clears the cookie
    const out = await app.request("/logout", {
      method: "POST",
      headers: { ...COOKIE, Origin: "http://localhost" },
    });
    assert.equal(out.status, 303);
    assert.match(out.headers.get("set-cookie") ?? "", /libra_token=;/);
    const proxied = await app.request("/logout", {
      method: "POST",
      headers: { ...COOKIE, Origin: "https://localhost" },
    });
    assert.equal(proxied.status, 303, "behind a TLS proxy the host decides");
  } finally {
    await lab.close();
  }
});

Deno.test("only the allowed hosts are served (DNS rebinding)", async () => {
  const { lab, app } = await setup();
  try {
    for (const host of ["localhost:8000", "127.0.0.1", "[::1]:80", "LOCALHOST"]) {
      const res = await app.request("/api/health", { headers: { Host: host } });
      assert.equal(res.status, 200, host);
    }
    for (const host of ["evil.example", "localhost.evil.example:8000", "10.0.0.1"]) {
      const res = await app.request("/api/health", { headers: { Host: host } });
      assert.equal(res.status, 421, host);
      assert.match(await res.text(), /is not served here; allowed: localhost/);
    }
    const open = createWebApp(lab, undefined, { allowedHosts: ["lab.example"] });
    assert.equal(
      (await open.request("/api/health", { headers: { Host: "lab.example" } })).status,
      200,
    );
    assert.equal(
      (await open.request("/api/health", { headers: { Host: "localhost" } })).status,
      421,
    );
  } finally {
    await lab.close();
  }
});

Deno.test("failed logins are limited per client: the 11th within 5 minutes gets 429", async () => {
  const { lab, app } = await setup();
  try {
    const login = (token: string) =>
      app.request("/login", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token }),
      });
    for (let i = 0; i < 10; i++) assert.equal((await login(`guess-${i}`)).status, 400);
    const blocked = await login(TOKEN);
    assert.equal(blocked.status, 429, "even the right token waits");
    assert.ok(Number(blocked.headers.get("retry-after")) > 0);
    assert.match(await blocked.text(), /Too many failed attempts/);
  } finally {
    await lab.close();
  }
});

Deno.test("LoginLimiter forgets failures after the window and bounds its memory", () => {
  const l = new LoginLimiter({ maxFailures: 2, windowMs: 1000, maxClients: 3 });
  l.fail("a", 0);
  l.fail("a", 10);
  assert.equal(l.retryAfter("a", 20), 1);
  assert.equal(l.retryAfter("a", 1011), 0);
  for (const c of ["b", "c", "d", "e"]) {
    l.fail(c, 2000);
    l.fail(c, 2000);
  }
  assert.equal(l.retryAfter("b", 2001), 0, "the oldest client was forgotten");
  assert.equal(l.retryAfter("e", 2001), 1);
});

Deno.test("the dashboard's launch is refused above the memory limit too, saying why", async () => {
  const dir = await Deno.makeTempDir({ prefix: "libra-web-sec-" });
  const lab = await openLab({
    dataDir: dir,
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    estimator: () =>
      Promise.resolve({ tensorBytes: 5 * 2 ** 30, dataBytes: 0, totalBytes: 5 * 2 ** 30 }),
    maxRunBytes: 2 ** 30,
    worker: false,
    log: () => {},
  });
  try {
    const app = createWebApp(lab);
    const cfg = await lab.store.createConfiguration(tinyMlpConfiguration("big"));
    const res = await app.request(`/configurations/${cfg.id}/launch`, {
      method: "POST",
      headers: COOKIE,
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /would need about 5\.0 GiB/);
    assert.equal((await lab.store.listRuns({ limit: 5, offset: 0 })).total, 0);
  } finally {
    await lab.close();
  }
});
