/**
 * The store's behaviour, run against SQLite and, when LIBRA_TEST_DATABASE_URL names a
 * PostgreSQL server where the user may create databases, against PostgreSQL too
 * (each run of this file uses a fresh database that it drops at the end).
 */
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { openPostgres } from "./db.ts";
import { migrate, MIGRATIONS } from "./migrations.ts";
import type { RunResult } from "./run_executor.ts";
import type { ConfigurationInput } from "./schemas.ts";
import { openStore, type Store } from "./store.ts";
import { RunWorker } from "./worker.ts";

const CONFIG: ConfigurationInput = {
  name: "c",
  model: "gpt",
  preset: "tiny",
  config: { layers: 2 },
  device: "cpu",
  budgetRatio: 0.5,
  budgetBytes: null,
  policy: "dtr",
  costModel: "measured",
  steps: 2,
  seed: 7,
  overheadLimit: 2.5,
};

const RESULT: RunResult = {
  feasible: true,
  budgetBytes: 5_000_000_000, // beyond 32 bits on purpose
  budgetRatio: 0.5,
  baselinePeakBytes: 10_000_000_000,
  peakBytes: 4_999_999_999,
  overhead: 1.25,
  stats: { evictions: 3 },
  memory: { budgetBytes: 5_000_000_000, unit: "call", samples: [[0, 1], [1, 2]], markers: [] },
  loss: [{ step: 0, loss: 2.5, baseline: 2.5 }],
  points: [{ policy: "dtr", ratio: 0.5, feasible: true, overhead: 1.25 }],
  trace: "{}\n",
  note: null,
  reason: null,
};

type Open = () => Promise<Store>;

function suite(label: string, open: Open, ignore = false): void {
  const t = (name: string, fn: (s: Store) => Promise<void>) =>
    Deno.test({
      name: `Store (${label}): ${name}`,
      ignore,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: async () => {
        const s = await open();
        try {
          await fn(s);
        } finally {
          await s.close();
        }
      },
    });

  t("configurations round-trip, including JSON config and nulls", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    assert.deepEqual(await s.getConfiguration(c.id), c);
    const u = await s.updateConfiguration(c.id, { ...CONFIG, budgetRatio: null, budgetBytes: 3e9 });
    assert.equal(u!.budgetBytes, 3e9);
    assert.equal(u!.budgetRatio, null);
    assert.equal(await s.updateConfiguration("cfg_missing", CONFIG), null);
    assert.equal(await s.deleteConfiguration(c.id), true);
    assert.equal(await s.getConfiguration(c.id), null);
  });

  t("migrations are applied once; re-running applies nothing", async (s) => {
    assert.deepEqual(await migrate(s.db), []);
    const rows = await s.db.all("SELECT version FROM schema_migrations ORDER BY version");
    assert.deepEqual(rows.map((r) => Number(r.version)), MIGRATIONS.map((m) => m.version));
  });

  t("claimNextRun gives each queued run to exactly one worker, oldest first", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await s.createRunFromConfiguration(c.id))!.id);
    const claims = await Promise.all(
      Array.from({ length: 16 }, (_, i) => s.claimNextRun(`w${i % 4}`)),
    );
    const got = claims.filter((r) => r !== null).map((r) => r!.id);
    assert.equal(got.length, 12);
    assert.equal(new Set(got).size, 12, "no run claimed twice");
    assert.deepEqual([...got].sort(), [...ids].sort());
    const first = await s.getRun(ids[0]!);
    assert.equal(first!.status, "running");
    assert.ok(first!.workerId!.startsWith("w"));
    assert.equal(await s.claimNextRun("w9"), null);
  });

  t("complete stores results with 64-bit byte counts; only the holder may complete", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    const run = (await s.createRunFromConfiguration(c.id))!;
    assert.equal((await s.claimNextRun("a"))!.id, run.id);
    assert.equal(await s.completeRun(run.id, "b", RESULT), false);
    assert.equal(await s.completeRun(run.id, "a", RESULT), true);
    const r = (await s.getRun(run.id))!;
    assert.equal(r.status, "succeeded");
    assert.equal(r.baselinePeakBytes, 10_000_000_000);
    assert.equal(r.peakBytes, 4_999_999_999);
    assert.equal(r.feasible, true);
    const res = (await s.getResults(run.id))!;
    assert.deepEqual(res.memory, RESULT.memory);
    assert.deepEqual(res.loss, RESULT.loss);
    assert.equal(res.hasTrace, true);
    assert.equal(await s.getTrace(run.id), "{}\n");
    const cmp = await s.compare({ model: "gpt" });
    assert.equal(cmp.policies[0]!.smallestFeasibleRatio, 0.5);
  });

  t("a worker that stops sending heartbeats has its run marked failed with why", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    const run = (await s.createRunFromConfiguration(c.id))!;
    // the "dead" worker claims the run and never beats again
    assert.equal((await s.claimNextRun("dead-worker"))!.id, run.id);
    await s.db.run("UPDATE runs SET heartbeat_at = ? WHERE id = ?", [Date.now() - 60_000, run.id]);
    const survivor = new RunWorker({ store: s, executor: fakeExecutor(), staleMs: 30_000 });
    assert.equal(await survivor.runOnce(), false, "nothing else queued");
    const r = (await s.getRun(run.id))!;
    assert.equal(r.status, "failed");
    assert.match(r.error!, /worker dead-worker stopped sending heartbeats/);
    assert.match(r.error!, /6\d\.\d s ago/);
    assert.equal(await s.heartbeat(run.id, "dead-worker"), false, "the dead worker lost it");
    assert.equal(await s.completeRun(run.id, "dead-worker", RESULT), false);
  });

  t("a live worker's heartbeats keep its run from being reaped", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    await s.createRunFromConfiguration(c.id);
    const run = (await s.claimNextRun("alive"))!;
    // the claim's heartbeat is older than the window below, the next one much younger
    // (wide margins: a loaded machine takes tens of ms per PostgreSQL round trip)
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(
      await s.heartbeat(run.id, "alive", {
        phase: "train",
        done: 1,
        total: 2,
        message: "step 1/2",
      }),
      true,
    );
    assert.deepEqual(await s.reapStaleRuns(500), []);
    assert.equal((await s.getRun(run.id))!.progress!.message, "step 1/2");
  });

  t("cancel stops a running run: the worker's next heartbeat aborts it", async (s) => {
    const c = await s.createConfiguration({ ...CONFIG, steps: 1000 });
    const run = (await s.createRunFromConfiguration(c.id))!;
    const w = new RunWorker({
      store: s,
      executor: fakeExecutor({ stepMs: 5 }),
      heartbeatMs: 20,
      pollMs: 10,
    });
    w.start();
    for (let i = 0; i < 200 && (await s.getRun(run.id))!.status !== "running"; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(await s.cancelRun(run.id), true);
    await new Promise((r) => setTimeout(r, 150));
    await w.stop();
    const r = (await s.getRun(run.id))!;
    assert.equal(r.status, "canceled");
    assert.equal(await s.getResults(run.id), null);
    assert.equal(await s.cancelRun(run.id), false, "already ended");
  });

  t("bench ingestion is one transaction: all results or none", async (s) => {
    const ok = await s.ingestBench({
      suite: "q",
      machine: {},
      results: [{
        kind: "simulated",
        model: "m",
        preset: "trace",
        policy: "dtr",
        ratio: 0.5,
        feasible: true,
        overhead: 1.1,
        budgetBytes: 6_000_000_000,
      }],
    });
    assert.equal(ok.runIds.length, 1);
    assert.equal((await s.getRun(ok.runIds[0]!))!.budgetBytes, 6_000_000_000);
    const before = (await s.listRuns({ limit: 50, offset: 0 })).total;
    await assert.rejects(s.ingestBench({
      suite: "q",
      machine: {},
      results: [
        {
          kind: "live",
          model: "m",
          preset: "t",
          policy: "a",
          ratio: 0.5,
          feasible: false,
          overhead: null,
        },
        // a NaN ratio violates NOT NULL in both databases: the whole upload must roll back
        {
          kind: "live",
          model: "m",
          preset: "t",
          policy: "a",
          ratio: null as unknown as number,
          feasible: false,
          overhead: null,
        },
      ],
    }));
    assert.equal((await s.listRuns({ limit: 50, offset: 0 })).total, before);
  });

  t("listRuns pages without overlap and filters by simulated policies", async (s) => {
    const c = await s.createConfiguration(CONFIG);
    for (let i = 0; i < 5; i++) await s.createRunFromConfiguration(c.id);
    await s.createSimulation({
      kind: "simulate",
      name: "net",
      policies: ["lru", "dtr"],
      ratios: [0.5],
    }, "{}");
    const a = await s.listRuns({ limit: 4, offset: 0 });
    const b = await s.listRuns({ limit: 4, offset: 4 });
    assert.equal(a.total, 6);
    assert.equal(a.nextOffset, 4);
    assert.equal(b.nextOffset, null);
    const ids = [...a.items, ...b.items].map((r) => r.id);
    assert.equal(new Set(ids).size, 6);
    assert.equal(a.items[0]!.kind, "simulate", "newest first");
    const lru = await s.listRuns({ limit: 10, offset: 0, policy: "lru" });
    assert.deepEqual(lru.items.map((r) => r.model), ["net"]);
  });
}

suite("SQLite", () => openStore({ path: ":memory:" }));

const pgUrl = Deno.env.get("LIBRA_TEST_DATABASE_URL");
if (pgUrl) {
  const dbName = `libra_test_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6)}`;
  const admin = await openPostgres(pgUrl);
  await admin.run(`CREATE DATABASE ${dbName}`);
  await admin.close();
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  let n = 0;
  suite("PostgreSQL", async () => {
    const s = await openStore({ url: url.href });
    // each test starts from empty tables
    if (n++ > 0) {
      for (
        const t of [
          "runs",
          "run_inputs",
          "run_results",
          "run_points",
          "configurations",
          "bench_uploads",
        ]
      ) {
        await s.db.run(`DELETE FROM ${t}`);
      }
    }
    return s;
  });
  Deno.test({
    name: "Store (PostgreSQL): drop the test database",
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const a = await openPostgres(pgUrl);
      await a.run(`DROP DATABASE ${dbName} WITH (FORCE)`);
      await a.close();
    },
  });
} else {
  suite(
    "PostgreSQL, skipped: set LIBRA_TEST_DATABASE_URL to a server where the user may create databases",
    () => Promise.reject(new Error("unreachable")),
    true,
  );
}
