/**
 * End-to-end, in headless Chromium: a run stopped for thrashing shows as thrashing and
 * one that did not fit as out of memory, on every page and in the exports (the run
 * list, the run page, a simulation's chart, the CSV and JSON of the tables), by the
 * reason the run reported; the thrash limit of a run shows on its page, and the forms
 * take one (validated as you type). Skips, saying why, when Chromium is not installed.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  CHROMIUM,
  HAVE_CHROMIUM,
  type Page,
  result,
  startE2E,
  storeRun,
  TOKEN,
} from "./_e2e_harness.ts";

const e2e = (name: string, fn: () => Promise<void>) =>
  Deno.test({
    name: HAVE_CHROMIUM ? `e2e: ${name}` : `e2e: ${name} (skipped: no Chromium at ${CHROMIUM})`,
    ignore: !HAVE_CHROMIUM,
    sanitizeResources: false,
    sanitizeOps: false,
    fn,
  });

const stat = async (page: Page, k: string) =>
  (await page.textContent(`[data-stat='${k}'] td`))?.trim();

e2e("a thrashing run shows as thrashing, an out-of-memory run as out of memory", async () => {
  const h = await startE2E();
  try {
    const store = h.server.lab.store;
    const infeasible = (reason: "thrashing" | "out of memory", ratio: number) =>
      result({
        feasible: false,
        overhead: null,
        peakBytes: null,
        budgetRatio: ratio,
        budgetBytes: ratio * 1_000_000,
        points: [{ policy: "dtr-eq", ratio, feasible: false, overhead: null, reason }],
        note: reason === "thrashing"
          ? "thrashing: recomputation passed the limit"
          : "out of budget",
        reason,
      });
    const thrash = await storeRun(store, infeasible("thrashing", 0.4), {
      budgetRatio: 0.4,
      overheadLimit: 1.5,
    });
    const oom = await storeRun(store, infeasible("out of memory", 0.1), { budgetRatio: 0.1 });
    const fits = await storeRun(store, result());

    const page = await h.page();
    await page.goto(`${h.server.url}/runs`);
    const rowOf = async (id: string) => [
      (await page.textContent(`tr[data-run=${id}] .badge.warn`).catch(() => null))?.trim() ?? null,
      (await page.textContent(`tr[data-run=${id}] td:nth-child(7)`))?.trim(),
    ];
    assert.deepEqual(await rowOf(thrash.id), ["infeasible: thrashing", "thrashing"]);
    assert.deepEqual(await rowOf(oom.id), ["infeasible: out of memory", "out of memory"]);
    assert.equal(await page.locator(`tr[data-run=${fits.id}] .badge.warn`).count(), 0);
    await page.screenshot({ path: `${h.shots}/runs-infeasible.png`, fullPage: true });
    // the exports say the same
    const cookie = { Cookie: `libra_token=${TOKEN}` };
    const rows = await (await fetch(`${h.server.url}/runs?export=runs&format=json`, {
      headers: cookie,
    })).json() as Record<string, unknown>[];
    const overheadOf = (id: string) => rows.find((r) => r.Run === id)!.Overhead;
    assert.deepEqual(
      [overheadOf(thrash.id), overheadOf(oom.id), overheadOf(fits.id)],
      ["thrashing", "out of memory", 1.2],
    );
    const csv = await (await fetch(`${h.server.url}/runs?export=runs&format=csv`, {
      headers: cookie,
    })).text();
    const line = (id: string) => csv.split("\r\n").find((l) => l.startsWith(id))!;
    assert.match(line(thrash.id), /,thrashing,/);
    assert.match(line(oom.id), /,out of memory,/);

    // the run pages: the reason, and the thrash limit the run had
    await page.goto(`${h.server.url}/runs/${thrash.id}`);
    assert.equal(await stat(page, "feasible"), "no (thrashing)");
    assert.equal(await stat(page, "infeasible because"), "thrashing");
    assert.equal(await stat(page, "overhead"), "— (thrashing)");
    assert.equal(await stat(page, "thrash limit"), "1.500×");
    assert.match(await page.textContent("[data-overhead-limit]"), /thrash limit 1\.5×/);
    await page.screenshot({ path: `${h.shots}/run-thrashing.png`, fullPage: true });
    await page.goto(`${h.server.url}/runs/${oom.id}`);
    assert.equal(await stat(page, "feasible"), "no (out of memory)");
    assert.equal(await stat(page, "infeasible because"), "out of memory");
    assert.equal(await stat(page, "thrash limit"), "2.000×");
    const stats = await (await fetch(
      `${h.server.url}/runs/${oom.id}?export=statistics&format=json`,
      { headers: cookie },
    )).json() as { statistic: string; value: unknown }[];
    assert.deepEqual(
      stats.filter((s) => s.statistic === "infeasible because").map((s) => s.value),
      ["out of memory"],
    );
    assert.deepEqual(h.errors, []);
    console.log(`screenshots in ${h.shots}`);
  } finally {
    await h.close();
  }
});

e2e(
  "a simulation's chart marks each infeasible ratio by its reason: ▲ thrashing, × out of memory",
  async () => {
    const h = await startE2E();
    try {
      const store = h.server.lab.store;
      const sim = await store.createSimulation({
        kind: "simulate",
        name: "chain",
        policies: ["dtr-eq", "lru"],
        ratios: [1, 0.6, 0.4, 0.2],
        overheadLimit: 1.3,
      }, '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n');
      const claimed = await store.claimNextRun("w");
      assert.equal(claimed?.id, sim.id);
      const pts = (policy: string) => [
        { policy, ratio: 1, feasible: true, overhead: 1, reason: null },
        { policy, ratio: 0.6, feasible: true, overhead: 1.2, reason: null },
        { policy, ratio: 0.4, feasible: false, overhead: null, reason: "thrashing" as const },
        { policy, ratio: 0.2, feasible: false, overhead: null, reason: "out of memory" as const },
      ];
      assert.ok(
        await store.completeRun(sim.id, "w", {
          ...result({ points: [...pts("dtr-eq"), ...pts("lru")] }),
          budgetRatio: null,
          overhead: null,
        }),
      );
      const page = await h.page();
      await page.goto(`${h.server.url}/runs/${sim.id}`);
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const marks = (cls: string) =>
        page.$$eval(
          `[data-chart=overhead] svg g.${cls} title`,
          (ts: Element[]) => ts.map((t) => t.textContent).sort(),
        );
      assert.deepEqual(await marks("thrashing"), [
        "dtr-eq at ratio 0.4: infeasible, thrashing (recomputation passed the thrash limit)",
        "lru at ratio 0.4: infeasible, thrashing (recomputation passed the thrash limit)",
      ]);
      assert.deepEqual(await marks("infeasible"), [
        "dtr-eq at ratio 0.2: infeasible, out of memory (the step did not fit)",
        "lru at ratio 0.2: infeasible, out of memory (the step did not fit)",
      ]);
      assert.match(await page.textContent("[data-overhead-limit]"), /thrash limit 1\.3×/);
      await page.screenshot({ path: `${h.shots}/simulation-reasons.png`, fullPage: true });
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "the forms take a thrash limit: validated as you type, stored with the configuration and the upload",
  async () => {
    const h = await startE2E();
    try {
      const page = await h.page();
      await page.goto(`${h.server.url}/configurations`);
      await page.waitForSelector("[data-island=ConfigForm][data-hydrated]");
      assert.equal(await page.inputValue("input[name=overheadLimit]"), "2");
      await page.fill("input[name=overheadLimit]", "1");
      assert.equal(await page.textContent("[data-field=overheadLimit] .error"), "must be > 1");
      await page.fill("input[name=overheadLimit]", "1.75");
      assert.equal(await page.locator("[data-field=overheadLimit] .error").count(), 0);
      await page.fill("input[name=name]", "tight");
      await page.fill("input[name=budgetRatio]", "0.5");
      await Promise.all([
        page.waitForURL(/\/configurations/),
        page.click("form.config-form button:not(.primary)"),
      ]);
      const cfgs = await h.server.lab.store.listConfigurations({ limit: 5, offset: 0 });
      assert.deepEqual(cfgs.items.map((c) => [c.name, c.overheadLimit]), [["tight", 1.75]]);
      assert.equal(
        (await page.textContent(`tr#${cfgs.items[0]!.id} td:nth-child(6)`))?.trim(),
        "1.75",
      );

      await page.goto(`${h.server.url}/traces`);
      await page.setInputFiles("input[name=trace]", {
        name: "chain.log",
        mimeType: "text/plain",
        buffer: Buffer.from('{"INSTRUCTION":"CONSTANT","NAME":"x"}\n'),
      });
      await page.fill("input[name=overheadLimit]", "1.25");
      await Promise.all([page.waitForURL(/\/runs\/run_/), page.click("form.upload button")]);
      const id = page.url().split("/").pop()!;
      const run = (await h.server.lab.store.getRun(id))!;
      assert.equal((run.spec as { overheadLimit?: number }).overheadLimit, 1.25);
      assert.match(await page.textContent("[data-overhead-limit]"), /thrash limit 1\.25×/);
      // a bad limit is explained on the page, and nothing is queued
      await page.goto(`${h.server.url}/traces`);
      await page.setInputFiles("input[name=trace]", {
        name: "chain.log",
        mimeType: "text/plain",
        buffer: Buffer.from('{"INSTRUCTION":"CONSTANT","NAME":"x"}\n'),
      });
      await page.fill("input[name=overheadLimit]", "0.5");
      await page.click("form.upload button");
      await page.waitForSelector("form.upload .error");
      assert.match(await page.textContent("form.upload .error"), /overheadLimit: must be > 1/);
      assert.equal((await h.server.lab.store.listRuns({ limit: 9, offset: 0 })).total, 1);
      assert.deepEqual(h.errors.filter((e) => !/400/.test(e)), []);
    } finally {
      await h.close();
    }
  },
);
