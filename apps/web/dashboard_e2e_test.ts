/**
 * End-to-end tests of the dashboard for real experiments, in headless Chromium: the
 * memory chart of long runs, Compare, statistics, the phone layout, exports, forms and
 * live progress. Each test stores the runs it needs directly in the server's store
 * (no worker), so it checks what the pages show against numbers it knows. Screenshots
 * go to a temporary folder (printed). Skips, saying why, when Chromium is not installed.
 */
import assert from "node:assert/strict";
import { thinSamples } from "@libra/api";
import { syntheticTimeline } from "./components/_synthetic_timeline.ts";
import { CHROMIUM, HAVE_CHROMIUM, type Page, result, startE2E, storeRun } from "./_e2e_harness.ts";

const e2e = (name: string, fn: (t: Deno.TestContext) => Promise<void>) =>
  Deno.test({
    name: HAVE_CHROMIUM ? `e2e: ${name}` : `e2e: ${name} (skipped: no Chromium at ${CHROMIUM})`,
    ignore: !HAVE_CHROMIUM,
    sanitizeResources: false,
    sanitizeOps: false,
    fn,
  });

/** The `<title>` texts of the marks of a chart part. */
function titles(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(`${selector} title`, (ts: Element[]) => ts.map((t) => t.textContent ?? ""));
}

e2e(
  "the memory chart of a 400-step, 60k-call run counts every event per step and zooms into a step",
  async () => {
    const h = await startE2E();
    try {
      const { memory, stats } = syntheticTimeline(400, 150);
      const stored = { ...memory, samples: thinSamples(memory.samples, 20_000) };
      const { id } = await storeRun(
        h.server.lab.store,
        result({ memory: stored, stats: { ...stats, evictions: stats.drops + stats.swapOuts } }),
        { steps: 400 },
      );
      const evictions = stats.drops + stats.swapOuts;
      const remats = stats.remats + stats.swapIns;
      const page = await h.page();
      await page.goto(`${h.server.url}/runs/${id}`);
      await page.waitForSelector("[data-chart=memory] .plot[data-drawn] svg");
      const caption = await page.textContent("[data-chart=memory] figcaption");
      assert.match(caption, /all 400 steps \(60,000 calls\)/);
      assert.ok(
        caption.includes(
          `all ${evictions.toLocaleString("en-US")} evictions and ${
            remats.toLocaleString("en-US")
          } re-materializations`,
        ),
        caption,
      );
      assert.match(caption, /20,000 samples of 60,000 calls/);
      // the bars as drawn: one title per step and kind; the per-step counts add up to the run's
      const barTitles = [...new Set(await titles(page, "[data-chart=memory] [data-part=events]"))];
      assert.equal(barTitles.length, 400);
      let sumE = 0, sumR = 0;
      for (const t of barTitles) {
        const m = t.match(/^step (\d+): (\d+) evictions, (\d+) re-materializations$/)!;
        assert.ok(m, t);
        sumE += Number(m[2]);
        sumR += Number(m[3]);
      }
      assert.deepEqual([sumE, sumR], [evictions, remats]);
      // chart text at least 12 px
      const tickSize = await page.$eval(
        "[data-chart=memory] [data-part=band] g[aria-label='x-axis tick label'] text",
        (t: Element) => parseFloat(getComputedStyle(t).fontSize),
      );
      assert.ok(tickSize >= 12, `tick labels are ${tickSize}px`);
      await page.screenshot({ path: `${h.shots}/memory-400-steps.png`, fullPage: true });

      // click step 200's bar: the page zooms into it and draws each of its events
      const box = await page.evaluate(() => {
        const rect = [...document.querySelectorAll("[data-part=events] rect")].find((r) =>
          r.querySelector("title")?.textContent?.startsWith("step 200:")
        )!;
        rect.scrollIntoView({ block: "center" });
        const b = rect.getBoundingClientRect();
        return { x: b.x + b.width / 2, y: b.y + Math.max(1, b.height / 2) };
      });
      await page.mouse.click(box.x, box.y);
      await page.waitForURL(/[?&]step=200/);
      await page.waitForSelector("[data-chart=memory] .plot[data-drawn] svg");
      const inStep = memory.markers.filter((m) => m.t >= 199 * 150 && m.t < 200 * 150);
      assert.ok(inStep.length > 0);
      assert.equal(
        await page.locator("[data-chart=memory] svg g[aria-label=dot] circle").count(),
        inStep.length,
      );
      assert.match(
        await page.textContent("[data-chart=memory] figcaption"),
        /step 200 of 400 \(calls 29,850–29,999\)/,
      );
      await page.screenshot({ path: `${h.shots}/memory-step-200.png`, fullPage: true });
      // the permalink works without JavaScript too: the next step, rendered on the server
      await page.click(".step-nav a[rel=next]");
      await page.waitForURL(/[?&]step=201/);
      const html = await (await fetch(`${h.server.url}/runs/${id}?step=201`)).text();
      const dots = html.slice(html.indexOf('data-chart="memory"')).match(/<circle/g)?.length ?? 0;
      assert.equal(dots, memory.markers.filter((m) => m.t >= 200 * 150 && m.t < 201 * 150).length);
      assert.deepEqual(h.errors, []);
      console.log(`screenshots in ${h.shots}`);
    } finally {
      await h.close();
    }
  },
);
