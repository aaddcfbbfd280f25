/** `libra sweep` against a lab server (the API app, reached through a fetch function). */
import assert from "node:assert/strict";
import { openLab } from "@libra/api";
import { fakeExecutor } from "../../api/_fake_executor.ts";
import { sweepMain } from "./sweep.ts";

async function lab(worker: boolean) {
  const l = await openLab({
    dbPath: ":memory:",
    token: "t",
    worker,
    executor: fakeExecutor(),
    workerOptions: { pollMs: 20, heartbeatMs: 100 },
    log: () => {},
  });
  const fetchFn = ((input: string | URL | Request, init?: RequestInit) => {
    const u = new URL(String(input));
    assert.ok(u.pathname.startsWith("/api/"), u.pathname);
    return Promise.resolve(l.api.request(u.pathname.slice(4) + u.search, init));
  }) as typeof fetch;
  return { lab: l, fetchFn };
}

Deno.test("libra sweep queues the sweep, follows it to the end and prints where to compare it", async () => {
  const { lab: l, fetchFn } = await lab(true);
  try {
    const lines: string[] = [];
    const code = await sweepMain(
      [
        "--url",
        "http://lab.test/",
        "--name",
        "cli sweep",
        "--models",
        "mlp",
        "--policies",
        "dtr-eq,lru",
        "--ratios",
        "1,0.5",
        "--repeats",
        "2",
        "--steps",
        "2",
        "--wait",
      ],
      {
        fetch: fetchFn,
        stdout: (s) => lines.push(s),
        stderr: (s) => lines.push(`ERR ${s}`),
        sleep: (ms) => new Promise((r) => setTimeout(r, ms / 20)),
        token: () => Promise.resolve("t"),
      },
    );
    assert.equal(code, 0, lines.join("\n"));
    const id = lines[0]!.match(/^Queued sweep (swp_\S+) \(cli sweep\): 8 runs\.$/)?.[1];
    assert.ok(id, lines[0]);
    assert.match(lines.at(-4)!, new RegExp(`^${id} cli sweep: 8/8 ended$`));
    assert.deepEqual(lines.slice(-3), [
      "See it at:",
      `  http://lab.test/sweeps/${id}`,
      `  http://lab.test/compare?model=mlp%2Ftiny&sweep=${id}`,
    ]);
    const runs = await l.store.listRuns({ limit: 50, offset: 0 });
    assert.equal(runs.total, 8);
    assert.ok(runs.items.every((r) => r.status === "succeeded"));
  } finally {
    await l.close();
  }
});

Deno.test("libra sweep explains a refused sweep per option, and an unknown sweep id", async () => {
  const { lab: l, fetchFn } = await lab(false);
  try {
    const err: string[] = [];
    const deps = {
      fetch: fetchFn,
      stdout: () => {},
      stderr: (s: string) => err.push(s),
      token: () => Promise.resolve("t"),
    };
    const code = await sweepMain(
      [
        "--url",
        "http://lab.test",
        "--name",
        "x",
        "--models",
        "mlp",
        "--policies",
        "lru",
        "--ratios",
        "0.5,1.5",
        "--cost-model",
        "BAD",
      ],
      deps,
    );
    assert.equal(code, 2);
    assert.match(err.join("\n"), /--ratios: ratios must be <= 1/);
    assert.match(err.join("\n"), /--cost-model: lower-case letters/);
    assert.equal((await l.store.listRuns({ limit: 5, offset: 0 })).total, 0);
    assert.equal(await sweepMain(["--url", "http://lab.test", "--status", "swp_nope"], deps), 2);
    assert.match(err.at(-1)!, /sweep "swp_nope" not found/);
  } finally {
    await l.close();
  }
});
