/** `libra serve` as a process: prints its URL, answers, keeps the token, stops on SIGINT. */
import assert from "node:assert/strict";

const MAIN = new URL("../main.ts", import.meta.url).pathname;

Deno.test({
  name: "libra serve --port 0 serves the API and dashboard and shuts down on SIGINT",
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "libra-serve-" });
    const env = { ...Deno.env.toObject() };
    delete env.LIBRA_API_TOKEN;
    delete env.LIBRA_DATABASE_URL;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", MAIN, "serve", "--port", "0", "--data-dir", dir, "--no-worker"],
        ...["--allowed-host", "lab.example"],
      ],
      env,
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    try {
      while (!/serving the lab on (http:\S+)/.test(out)) {
        const { value, done } = await reader.read();
        if (done) break;
        out += value;
      }
      const url = out.match(/serving the lab on (http:\S+)/)?.[1];
      assert.ok(url, out);
      const token = (await Deno.readTextFile(`${dir}/api-token`)).trim();
      assert.ok(out.includes(token), "the generated token is printed once");
      const health = await (await fetch(`${url}/api/health`)).json();
      assert.equal(health.database, "sqlite");
      const page = await fetch(`${url}/runs`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<h1>Runs<\/h1>/);
      const denied = await fetch(`${url}/api/configurations`, { method: "POST", body: "{}" });
      assert.equal(denied.status, 401);
      await denied.body?.cancel();
      // fetch sets Host itself: ask over a plain connection
      const status = async (host: string) => {
        const conn = await Deno.connect({ port: Number(new URL(url).port) });
        await conn.write(
          new TextEncoder().encode(`GET /api/health HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
        );
        const buf = new Uint8Array(256);
        const n = await conn.read(buf);
        conn.close();
        return new TextDecoder().decode(buf.subarray(0, n ?? 0)).split(" ")[1];
      };
      assert.equal(await status("lab.example"), "200", "an --allowed-host is served");
      assert.equal(await status("evil.example:80"), "421", "another host is not");
      child.kill("SIGINT");
      assert.equal((await child.status).code, 0);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* ended */ }
      await reader.cancel().catch(() => {});
      await child.stderr.cancel().catch(() => {});
    }
  },
});

Deno.test("libra serve rejects a bad port with the value", async () => {
  const { parsePort } = await import("./serve.ts");
  assert.equal(parsePort(undefined, 8000), 8000);
  assert.equal(parsePort("0", 8000), 0);
  assert.throws(() => parsePort("70000", 8000), /0\.\.65535, got "70000"/);
  assert.throws(() => parsePort("x", 8000), /got "x"/);
});
