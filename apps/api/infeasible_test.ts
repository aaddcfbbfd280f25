/**
 * The thrash limit of a run through the API, and why infeasible runs were infeasible:
 * a configuration carries `overheadLimit` (> 1, default 2) to its executor, and a run
 * stopped for thrashing is reported with the reason `thrashing`, one that did not fit
 * with `out of memory`, in the run, its results, the run list and Compare. The fake
 * executor thrashes where its overhead 1 + (1 - ratio) passes the limit and runs out
 * of memory below the ratio it is given, as the runtime does.
 */
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { openLab } from "./lab.ts";
import type { TrainSpec } from "./run_executor.ts";
import { until } from "./_test_helpers.ts";

const TOKEN = "infeasible-token";
const json = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" };
const BASE = { name: "c", model: "mlp", preset: "tiny", policy: "dtr", steps: 1 };

async function lab() {
  const executor = fakeExecutor({ oomBelow: 0.2 });
  const dir = await Deno.makeTempDir({ prefix: "libra-infeasible-test-" });
  const l = await openLab({
    dataDir: dir,
    token: TOKEN,
    readToken: null,
    executor,
    worker: true,
    workerOptions: { pollMs: 20, heartbeatMs: 50 },
    log: () => {},
  });
  return Object.assign(l, { executor });
}

Deno.test("overheadLimit is validated (> 1, default 2), stored, patched and cloned with the configuration", async () => {
  const l = await lab();
  try {
    const post = (body: unknown) =>
      l.api.request("/configurations", {
        method: "POST",
        headers: json,
        body: JSON.stringify(body),
      });
    for (const bad of [1, 0.5, -2, "2", null, 1e7]) {
      const res = await post({ ...BASE, budgetRatio: 0.5, overheadLimit: bad });
      assert.equal(res.status, 400, String(bad));
      assert.deepEqual(
        (await res.json()).issues.map((i: { field: string }) => i.field),
        ["overheadLimit"],
        String(bad),
      );
    }
    const plain = await (await post({ ...BASE, budgetRatio: 0.5 })).json();
    assert.equal(plain.overheadLimit, 2);
    const tight = await (await post({ ...BASE, budgetRatio: 0.5, overheadLimit: 1.25 })).json();
    assert.equal(tight.overheadLimit, 1.25);
    assert.equal(
      (await (await l.api.request(`/configurations/${tight.id}`)).json()).overheadLimit,
      1.25,
    );
    const patched = await l.api.request(`/configurations/${plain.id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ overheadLimit: 3.5 }),
    });
    assert.equal((await patched.json()).overheadLimit, 3.5);
    const badPatch = await l.api.request(`/configurations/${plain.id}`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ overheadLimit: 1 }),
    });
    assert.equal(badPatch.status, 400);
  } finally {
    await l.close();
  }
});

Deno.test("a thrashing run is reported infeasible for thrashing, an OOM run for out of memory", async () => {
  const l = await lab();
  try {
    const launch = async (budgetRatio: number, overheadLimit?: number) => {
      const cfg = await (await l.api.request("/configurations", {
        method: "POST",
        headers: json,
        body: JSON.stringify({
          ...BASE,
          budgetRatio,
          ...(overheadLimit === undefined ? {} : { overheadLimit }),
        }),
      })).json();
      const run = await (await l.api.request("/runs", {
        method: "POST",
        headers: json,
        body: JSON.stringify({ configurationId: cfg.id }),
      })).json();
      return await until(async () => {
        const r = await (await l.api.request(`/runs/${run.id}`)).json();
        return r.status === "succeeded" && r;
      });
    };
    // overhead 1 + (1 - 0.4) = 1.6: past a limit of 1.5, within the default 2
    const thrash = await launch(0.4, 1.5);
    const fits = await launch(0.6);
    const oom = await launch(0.1);
    assert.deepEqual(
      [thrash, fits, oom].map((r) => [r.feasible, r.reason, r.overhead]),
      [[false, "thrashing", null], [true, null, 1.4], [false, "out of memory", null]],
    );
    // the executor was given each run's limit
    assert.deepEqual(
      l.executor.calls.map((s) => (s as TrainSpec).overheadLimit),
      [1.5, 2, 2],
    );
    const results = await (await l.api.request(`/runs/${thrash.id}/results`)).json();
    assert.equal(results.reason, "thrashing");
    assert.deepEqual(results.points, [
      { policy: "dtr", ratio: 0.4, feasible: false, overhead: null, reason: "thrashing" },
    ]);
    assert.equal(
      (await (await l.api.request(`/runs/${oom.id}/results`)).json()).reason,
      "out of memory",
    );
    const list = await (await l.api.request("/runs?model=mlp")).json();
    assert.deepEqual(
      Object.fromEntries(
        list.items.map((r: { id: string; reason: string | null }) => [r.id, r.reason]),
      ),
      { [thrash.id]: "thrashing", [fits.id]: null, [oom.id]: "out of memory" },
    );
    const cmp = await (await l.api.request("/compare?model=mlp")).json();
    assert.deepEqual(
      cmp.policies[0].points.map((
        p: { ratio: number; reason: string | null },
      ) => [p.ratio, p.reason]),
      [
        [0.6, null],
        [0.4, "thrashing"],
        [0.1, "out of memory"],
      ],
    );
  } finally {
    await l.close();
  }
});

Deno.test("a trace simulation replays under the uploaded thrash limit; each ratio says why it failed", async () => {
  const l = await lab();
  try {
    const bad = await l.api.request("/traces?overheadLimit=1", {
      method: "POST",
      headers: json,
      body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
    });
    assert.equal(bad.status, 400);
    assert.deepEqual((await bad.json()).issues.map((i: { field: string }) => i.field), [
      "query.overheadLimit",
    ]);
    // simulated overhead 1 + (1 - r) / 2: past 1.3 below ratio 0.4; no fit below 0.2
    const res = await l.api.request(
      "/traces?name=t&policies=lru&ratios=1,0.5,0.3,0.1&overheadLimit=1.3",
      {
        method: "POST",
        headers: json,
        body: '{"INSTRUCTION":"CONSTANT","NAME":"x"}',
      },
    );
    assert.equal(res.status, 201);
    const run = await res.json();
    assert.equal(run.spec.overheadLimit, 1.3);
    await until(async () =>
      (await (await l.api.request(`/runs/${run.id}`)).json()).status === "succeeded"
    );
    const results = await (await l.api.request(`/runs/${run.id}/results`)).json();
    assert.deepEqual(
      results.points.map((p: { ratio: number; reason: string | null }) => [p.ratio, p.reason]),
      [
        [1, null],
        [0.5, null],
        [0.3, "thrashing"],
        [0.1, "out of memory"],
      ],
    );
    assert.equal(results.reason, null, "some ratio fitted");
  } finally {
    await l.close();
  }
});

Deno.test("bench uploads carry the reason of an infeasible result, and only of one", async () => {
  const l = await lab();
  try {
    const post = (results: unknown[]) =>
      l.api.request("/bench", { method: "POST", headers: json, body: JSON.stringify({ results }) });
    const r = (ratio: number, over: Record<string, unknown>) => ({
      kind: "live",
      model: "gpt",
      policy: "lru",
      ratio,
      ...over,
    });
    const wrong = await post([r(0.5, { feasible: true, overhead: 1.2, reason: "thrashing" })]);
    assert.equal(wrong.status, 400);
    assert.equal((await wrong.json()).issues[0].field, "results.0.reason");
    const unknown = await post([r(0.5, { feasible: false, overhead: null, reason: "tired" })]);
    assert.equal((await unknown.json()).issues[0].field, "results.0.reason");
    const ok = await post([
      r(0.5, { feasible: false, overhead: null, reason: "thrashing" }),
      r(0.3, { feasible: false, overhead: null, reason: "out of memory" }),
      r(0.2, { feasible: false, overhead: null }),
    ]);
    assert.equal(ok.status, 201);
    const { runIds } = await ok.json();
    const reasons = [];
    for (const id of runIds) {
      reasons.push((await (await l.api.request(`/runs/${id}`)).json()).reason);
    }
    assert.deepEqual(reasons, ["thrashing", "out of memory", null]);
  } finally {
    await l.close();
  }
});
