/** Named sweeps through the API: validation, queued runs, progress, the comparison of one sweep. */
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { openLab } from "./lab.ts";
import { Sweeps } from "./sweeps.ts";

const AUTH = { Authorization: "Bearer t", "Content-Type": "application/json" };

Deno.test("a sweep queues models x presets x policies x ratios x repeats runs and reports progress", async () => {
  const lab = await openLab({
    dbPath: ":memory:",
    token: "t",
    worker: false,
    executor: fakeExecutor(),
    log: () => {},
  });
  try {
    const body = {
      name: "half memory",
      models: ["mlp", "gpt"],
      policies: ["dtr-eq", "lru"],
      ratios: [0.5, 0.8],
      repeats: 3,
      steps: 4,
    };
    const bad = await lab.api.request("/sweeps", {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ ...body, ratios: [0.5, 1.5], repeats: 0 }),
    });
    assert.equal(bad.status, 400);
    const issues = (await bad.json()).issues.map((i: { field: string }) => i.field).sort();
    assert.deepEqual(issues, ["ratios.1", "repeats"]);
    const unknown = await lab.api.request("/sweeps", {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ ...body, models: ["mlp", "nonesuch"], policies: ["lru", "psychic"] }),
    });
    assert.equal(unknown.status, 400);
    const reasons = (await unknown.json()).issues.map((i: { field: string; reason: string }) =>
      `${i.field}: ${i.reason}`
    );
    assert.ok(
      reasons.some((r: string) => /^models\.1: unknown model "nonesuch"; choose one of /.test(r)),
      reasons,
    );
    assert.ok(
      reasons.some((r: string) => /^policies\.1: unknown policy "psychic"; choose one of /.test(r)),
      reasons,
    );
    const huge = await lab.api.request("/sweeps", {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({
        ...body,
        ratios: Array.from({ length: 20 }, (_, i) => (i + 1) / 20),
        repeats: 10,
      }),
    });
    assert.equal(huge.status, 400);
    assert.match(JSON.stringify(await huge.json()), /= 800 runs; at most 500/);

    const res = await lab.api.request("/sweeps", {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 201, await res.clone().text());
    const sweep = await res.json();
    assert.equal(sweep.progress.total, 2 * 1 * 2 * 2 * 3);
    assert.equal(sweep.progress.queued, 24);
    const detail = await (await lab.api.request(`/sweeps/${sweep.id}`)).json();
    assert.equal(detail.runIds.length, 24);
    // every combination once per repeat, with the sweep's settings
    const runs = await Promise.all(detail.runIds.map((id: string) => lab.store.getRun(id)));
    const combos = new Map<string, number>();
    for (const r of runs) {
      const spec = r!.spec as { steps: number; seed: number; repeat: number };
      assert.equal(spec.steps, 4);
      const k = `${r!.model}/${r!.preset} ${r!.policy} ${r!.budgetRatio}`;
      combos.set(k, (combos.get(k) ?? 0) + 1);
    }
    assert.equal(combos.size, 8);
    assert.ok([...combos.values()].every((n) => n === 3));

    // run five of them (the fake executor), fail one: progress counts them
    const ex = fakeExecutor();
    for (let i = 0; i < 5; i++) {
      const run = (await lab.store.claimNextRun("w"))!;
      const out = await ex.execute(run.spec as never, {
        signal: new AbortController().signal,
        progress: () => {},
      });
      await lab.store.completeRun(run.id, "w", out);
    }
    const sixth = (await lab.store.claimNextRun("w"))!;
    await lab.store.failRun(sixth.id, "boom");
    const now = await (await lab.api.request(`/sweeps/${sweep.id}`)).json();
    assert.deepEqual(
      [now.progress.succeeded, now.progress.failed, now.progress.queued, now.progress.ended],
      [5, 1, 18, 6],
    );
    const list = await (await lab.api.request("/sweeps")).json();
    assert.deepEqual(list.items.map((s: { id: string }) => s.id), [sweep.id]);
    assert.equal((await lab.api.request("/sweeps/swp_nope")).status, 404);
  } finally {
    await lab.close();
  }
});

Deno.test("the comparison of a sweep leaves out other runs and gives each cell's spread", async () => {
  const lab = await openLab({ dbPath: ":memory:", token: "t", worker: false, log: () => {} });
  try {
    const sweeps = new Sweeps(lab.store);
    const s = await sweeps.create({
      name: "s",
      models: ["mlp"],
      presets: ["tiny"],
      policies: ["lru"],
      ratios: [0.5],
      repeats: 3,
      steps: 2,
      device: "cpu",
      costModel: "measured",
      seed: 0,
      overheadLimit: 2,
    });
    const overheads = [1.5, 1.2, 1.9];
    for (const o of overheads) {
      const run = (await lab.store.claimNextRun("w"))!;
      await lab.store.completeRun(run.id, "w", {
        feasible: true,
        budgetBytes: 1,
        budgetRatio: 0.5,
        baselinePeakBytes: 2,
        peakBytes: 1,
        overhead: o,
        stats: {},
        memory: null,
        loss: [],
        points: [{ policy: "lru", ratio: 0.5, feasible: true, overhead: o }],
        trace: null,
        note: null,
        reason: null,
      });
    }
    await lab.store.ingestBench({
      suite: "other",
      machine: {},
      results: [{
        kind: "live",
        model: "mlp",
        preset: "tiny",
        policy: "lru",
        ratio: 0.5,
        feasible: true,
        overhead: 9,
        steps: 2,
      }],
    });
    const cmp = await sweeps.compare({ model: "mlp", sweep: s.id });
    assert.deepEqual(cmp, [{
      policy: "lru",
      points: [{
        ratio: 0.5,
        feasible: true,
        overhead: 1.5,
        low: 1.2,
        high: 1.9,
        confidence: 0.75, // [min, max] of 3 holds the median with probability 1 - 2/8
        reason: null,
        n: 3,
        runs: 3,
      }],
    }]);
    const all = await sweeps.compare({ model: "mlp", steps: 2 });
    assert.equal(all[0]!.points[0]!.n, 4, "without the sweep filter the bench run counts too");
    const cuda = await sweeps.compare({ model: "mlp", device: "cuda" });
    assert.deepEqual(cuda, []);
    const created = (await lab.store.getRun((await sweeps.runIds(s.id))[0]!))!.createdAt;
    assert.equal((await sweeps.compare({ model: "mlp", from: created + 60_000 })).length, 0);
    assert.equal(
      (await sweeps.compare({ model: "mlp", from: created - 60_000, to: created + 60_000 }))[0]!
        .points[0]!.n,
      4,
      "the day's runs, sweep and bench",
    );
  } finally {
    await lab.close();
  }
});
