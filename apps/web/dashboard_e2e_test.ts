/**
 * End-to-end tests of the dashboard for real experiments, in headless Chromium: the
 * memory chart of long runs, Compare, statistics, the phone layout, exports, forms and
 * live progress. Each test stores the runs it needs directly in the server's store
 * (no worker), so it checks what the pages show against numbers it knows. Screenshots
 * go to a temporary folder (printed). Skips, saying why, when Chromium is not installed.
 */
import assert from "node:assert/strict";
import { executeInThisThread, type RunExecutor, thinSamples } from "@libra/api";
import { fakeExecutor } from "../api/_fake_executor.ts";
import { syntheticTimeline } from "./components/_synthetic_timeline.ts";
import {
  CHROMIUM,
  configuration,
  HAVE_CHROMIUM,
  type Page,
  result,
  startE2E,
  storeRun,
} from "./_e2e_harness.ts";

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

e2e(
  "Compare: ratio axis to the right, plain ticks, apart infeasible marks, hover, click-through, overlay and permalinks",
  async () => {
    const h = await startE2E();
    try {
      // a number is a feasible overhead; a string, the reason the run was infeasible
      const curve = (policy: string, f: (r: number) => number | string) =>
        [1, 0.8, 0.6, 0.5, 0.4, 0.3].map((ratio) => ({
          kind: "live" as const,
          model: "mlp",
          preset: "tiny",
          policy,
          ratio,
          feasible: typeof f(ratio) === "number",
          overhead: typeof f(ratio) === "number" ? f(ratio) : null,
          ...(typeof f(ratio) === "string" ? { reason: f(ratio) } : {}),
        }));
      const OOM = "out of memory";
      const up = await fetch(`${h.server.url}/api/bench`, {
        method: "POST",
        headers: { Authorization: `Bearer ${h.server.token}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          suite: "e2e",
          results: [
            ...curve("dtr", (r) => 1 + (1 - r) / 3),
            ...curve("lru", (r) => (r >= 0.6 ? 1 + (1 - r) : r === 0.5 ? "thrashing" : OOM)),
            ...curve("random", (r) => (r >= 0.6 ? 1.5 : r === 0.5 ? "thrashing" : OOM)),
            ...curve("msps", (r) => (r === 1 ? 0.5 : r >= 0.5 ? 1 + (1 - r) / 2 : OOM)),
            // a slow but feasible point is a point, not a thrashing mark (the reason decides)
            ...curve("dtr-eq", (r) => (r === 0.3 ? 14 : 1 + (1 - r) / 4)),
          ],
        }),
      });
      assert.equal(up.status, 201);
      const { runIds } = await up.json();
      const dtrAt03 = runIds[5]; // dtr's sixth point: ratio 0.3
      const losses = (k: number) =>
        [0, 1, 2].map((s) => ({ step: s, loss: 2 / (s + k), baseline: null }));
      const memory = (peak: number) => ({
        budgetBytes: peak,
        unit: "call",
        samples: [[0, 0], [10, peak * 0.9], [20, peak * 0.5]] as [number, number][],
        markers: [],
      });
      const a = await storeRun(
        h.server.lab.store,
        result({ memory: memory(500_000), loss: losses(1) }),
        { steps: 3 },
      );
      const b = await storeRun(
        h.server.lab.store,
        result({
          budgetRatio: 0.7,
          budgetBytes: 700_000,
          memory: memory(700_000),
          loss: losses(2),
          points: [{ policy: "dtr-eq", ratio: 0.7, feasible: true, overhead: 1.1 }],
        }),
        { steps: 3, budgetRatio: 0.7 },
      );

      const page = await h.page();
      await page.goto(`${h.server.url}/compare?model=mlp/tiny`);
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const chart = "[data-chart=overhead] svg";
      const ticks = await page.$$eval(
        `${chart} g[aria-label='x-axis tick label'] text`,
        (ts: SVGGraphicsElement[]) =>
          ts.map((t) => [t.textContent, t.getBoundingClientRect().x, getComputedStyle(t).fontSize]),
      );
      const x = (label: string) => ticks.find((t: string[]) => t[0] === label)?.[1];
      assert.ok(x("0.2") < x("0.8"), `the ratio axis grows to the right: ${JSON.stringify(ticks)}`);
      for (const t of ticks) assert.ok(parseFloat(t[2]) >= 12, `tick text ${t[2]}`);
      const yTicks = await page.$$eval(
        `${chart} g[aria-label='y-axis tick label'] text`,
        (ts: Element[]) => ts.map((t) => t.textContent),
      );
      assert.ok(yTicks.length > 2);
      for (const t of yTicks) assert.match(t, /^[0-9.,]*$/, `plain tick labels: ${yTicks}`);
      assert.ok(yTicks.includes("0.5"), `0.5, not 500m: ${yTicks}`);
      // lru and random both thrash at 0.5 (their reported reason): two triangles under the
      // axis, same x, each in its policy's row; nothing else is drawn as thrashing
      const tri = await page.$$eval(
        `${chart} g.thrashing a`,
        (as: Element[]) =>
          as.map((a) => {
            const r = a.getBoundingClientRect();
            return [r.x, r.y, a.querySelector("title")!.textContent];
          }),
      );
      assert.equal(tri.length, 2, JSON.stringify(tri));
      assert.ok(Math.abs(tri[0]![0] - tri[1]![0]) < 1, `same ratio: ${JSON.stringify(tri)}`);
      assert.ok(Math.abs(tri[0]![1] - tri[1]![1]) >= 10, `rows apart: ${JSON.stringify(tri)}`);
      assert.deepEqual(tri.map((t: string[]) => t[2]).sort(), [
        "lru at ratio 0.5: infeasible, thrashing (recomputation passed the thrash limit)",
        "random at ratio 0.5: infeasible, thrashing (recomputation passed the thrash limit)",
      ]);
      // out of memory is a cross, and says so
      assert.ok(
        (await titles(page, `${chart} g.infeasible`)).includes(
          "lru at ratio 0.4: infeasible, out of memory (the step did not fit)",
        ),
      );
      // dtr-eq's overhead of 14 at 0.3 is a feasible point (log scale), not a thrashing mark
      assert.ok(
        (await titles(page, `${chart} g.point`)).some((t) =>
          t.startsWith("dtr-eq at ratio 0.3: overhead 14.000")
        ),
      );
      // the table and its exports name the reasons
      const cell = (policy: string, ratio: string) =>
        page.$eval(
          `table.matrix tr:has(td:text-is("${policy}")) td:nth-child(${
            [1, 0.8, 0.6, 0.5, 0.4, 0.3].reverse().map(String).indexOf(ratio) + 2
          })`,
          (td: Element) => [td.textContent, td.getAttribute("data-value")],
        );
      assert.deepEqual(await cell("lru", "0.5"), ["▲ thrashing", "thrashing"]);
      assert.deepEqual(await cell("lru", "0.4"), ["✗ out of memory", OOM]);
      const exported = await (await fetch(
        `${h.server.url}/compare?model=mlp/tiny&export=overhead-by-ratio&format=json`,
        { headers: { Cookie: `libra_token=${h.server.token}` } },
      )).json();
      const lruRow = exported.find((r: Record<string, unknown>) => r.Policy === "lru");
      assert.deepEqual([lruRow["0.5"], lruRow["0.4"], lruRow["0.6"]], ["thrashing", OOM, 1.4]);
      // infeasible crosses of lru and msps at 0.4 and 0.3: same x, different rows
      const cross = (p: string) =>
        page.$$eval(
          `${chart} g.infeasible a`,
          (as: Element[], p: string) =>
            as.filter((a) => a.querySelector("title")!.textContent!.startsWith(`${p} at`))
              .map((e) => e.getBoundingClientRect()).map((r) => [r.x, r.y]),
          p,
        );
      const [lru, msps] = [await cross("lru"), await cross("msps")];
      assert.equal(lru.length, 2);
      assert.equal(msps.length, 2);
      for (let i = 0; i < 2; i++) {
        assert.ok(Math.abs(lru[i][0] - msps[i][0]) < 1, "same ratio, same x");
        assert.ok(Math.abs(lru[i][1] - msps[i][1]) >= 10, "but rows apart");
      }
      // hover a point: the tip gives its values
      const dot = page.locator(`${chart} g.point a`, {
        has: page.locator("title", { hasText: "dtr at ratio 0.3:" }),
      });
      await dot.scrollIntoViewIfNeeded();
      await dot.hover();
      const tip = await page.waitForSelector(`${chart} g[aria-label=tip]`);
      assert.match(await tip.textContent(), /dtr at ratio 0\.3: overhead 1\.233/);
      await page.screenshot({ path: `${h.shots}/compare-hover.png`, fullPage: true });
      await dot.click();
      await page.waitForURL(new RegExp(`/runs/${dtrAt03}$`));

      // overlay two runs, picked with the checkboxes; the URL is the permalink
      await page.goto(`${h.server.url}/compare?model=mlp/tiny`);
      await page.check(`input[name=run][value=${a.id}]`);
      await page.check(`input[name=run][value=${b.id}]`);
      await page.click("form.overlay-pick button.primary");
      await page.waitForURL(new RegExp(`run=${b.id}`));
      assert.match(page.url(), new RegExp(`run=${a.id}`));
      await page.waitForSelector("[data-chart=overlay-loss] .plot[data-drawn] svg");
      assert.equal(
        await page.locator("[data-chart=overlay-memory] svg g[aria-label=line] path").count(),
        2,
      );
      assert.equal(
        await page.locator("[data-chart=overlay-loss] svg g[aria-label=dot] a").count(),
        6,
      );
      await page.screenshot({ path: `${h.shots}/compare-overlay.png`, fullPage: true });
      await page.locator("[data-chart=overlay-loss] svg g[aria-label=dot] a").first().click();
      await page.waitForURL(/\/runs\/run_/);
      const permalink =
        await (await fetch(`${h.server.url}/compare?model=mlp/tiny&run=${a.id}&run=${b.id}`))
          .text();
      assert.match(permalink, /data-island="RunOverlay"/);
      assert.ok(
        permalink.includes(`checked`) && permalink.includes(a.id) && permalink.includes(b.id),
      );
      assert.deepEqual(h.errors, []);
      console.log(`screenshots in ${h.shots}`);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "statistics: human labels with a glossary, units, nothing measured shown for an infeasible run, no duration on bench runs",
  async () => {
    const h = await startE2E();
    try {
      const { id } = await storeRun(
        h.server.lab.store,
        result({
          feasible: false,
          overhead: null,
          peakBytes: null,
          stats: {
            calls: 1234,
            evictions: 40,
            budgetMs: 0,
            budgetStepMs: null as unknown as number, // NaN travels as null in JSON
            baselineStepMs: 12.5,
            bookkeepingMs: 0,
            swapOutBytes: 3 * 1024 * 1024,
            planMismatchedSteps: 0,
          },
          points: [{ policy: "dtr-eq", ratio: 0.5, feasible: false, overhead: null }],
          note: "out of memory at call 17",
        }),
      );
      const page = await h.page();
      await page.goto(`${h.server.url}/runs/${id}`);
      const row = async (k: string) => [
        await page.textContent(`[data-stat='${k}'] th`),
        await page.textContent(`[data-stat='${k}'] td`),
        await page.getAttribute(`[data-stat='${k}'] th .term`, "title"),
      ];
      assert.deepEqual((await row("budgetMs")).slice(0, 2), [
        "time under the budget",
        "— (did not fit)",
      ]);
      assert.deepEqual((await row("budgetStepMs")).slice(0, 2), [
        "median step under the budget",
        "— (did not fit)",
      ]);
      const base = await row("baselineStepMs");
      assert.deepEqual(base.slice(0, 2), ["median step without a budget", "12.5 ms"]);
      assert.match(base[2], /Median time of one training step without a budget/);
      assert.deepEqual((await row("swapOutBytes")).slice(0, 2), ["bytes swapped out", "3.00 MiB"]);
      assert.deepEqual((await row("calls")).slice(0, 2), ["kernel calls", "1,234"]);
      assert.deepEqual((await row("overhead")).slice(0, 2), ["overhead", "— (did not fit)"]);
      const labels = await page.$$eval(
        "table.stats th",
        (ths: Element[]) => ths.map((t) => t.textContent),
      );
      for (const l of labels) assert.doesNotMatch(l, /[a-z][A-Z]|Ms$/, `no camelCase key: ${l}`);
      // the glossary lists every label with its meaning (readable without hovering, on phones)
      await page.click("details.glossary summary");
      const terms = await page.$$eval(
        "details.glossary dt",
        (d: Element[]) => d.map((x) => x.textContent),
      );
      assert.deepEqual(terms, labels);
      await page.screenshot({ path: `${h.shots}/statistics-infeasible.png`, fullPage: true });

      const up = await fetch(`${h.server.url}/api/bench`, {
        method: "POST",
        headers: { Authorization: `Bearer ${h.server.token}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          results: [{
            kind: "live",
            model: "mlp",
            policy: "dtr",
            ratio: 0.5,
            feasible: true,
            overhead: 1.25,
            bookkeepingMs: 3.25,
            steps: 30,
          }],
        }),
      });
      const { runIds } = await up.json();
      await page.goto(`${h.server.url}/runs/${runIds[0]}`);
      assert.equal(await page.locator("[data-stat=duration]").count(), 0, "no duration 0 ms");
      assert.deepEqual((await row("bookkeepingMs")).slice(0, 2), ["bookkeeping time", "3.25 ms"]);
      assert.deepEqual((await row("overhead")).slice(0, 2), ["overhead", "1.250×"]);
      // a live run's overhead carries its interval from the interleaved measurement
      const live = await storeRun(
        h.server.lab.store,
        result({ stats: { overheadLow: 1.11, overheadHigh: 1.32, overheadConfidence: 0.9375 } }),
      );
      await page.goto(`${h.server.url}/runs/${live.id}`);
      assert.deepEqual((await row("overhead")).slice(0, 2), [
        "overhead",
        "1.200× (1.110–1.320, 94 % confidence)",
      ]);
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

/** WCAG contrast ratio of two `rgb(...)` colours. */
function contrast(a: string, b: string): number {
  const lum = (c: string) => {
    const [r, g, bl] = c.match(/\d+(\.\d+)?/g)!.slice(0, 3).map((x) => {
      const v = Number(x) / 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}

e2e(
  "phone width (390 px): the header spans the page, navigation is legible, tables scroll inside the page",
  async () => {
    const h = await startE2E();
    try {
      const { memory, stats } = syntheticTimeline(30, 1000, 3);
      let id = "";
      for (const policy of ["dtr-eq", "lru", "dtr-local+swap"]) {
        ({ id } = await storeRun(
          h.server.lab.store,
          result({
            memory,
            stats,
            points: [{ policy, ratio: 0.5, feasible: true, overhead: 1.2 }],
          }),
          { policy, steps: 30, name: `a long configuration name for ${policy}` },
        ));
      }
      const page = await h.page({ width: 390, height: 844 });
      for (
        const path of [
          "/runs",
          `/runs/${id}`,
          "/compare?model=mlp/tiny",
          "/configurations",
          "/sweeps",
          "/traces",
        ]
      ) {
        await page.goto(`${h.server.url}${path}`);
        await page.waitForLoadState("load");
        const m = await page.evaluate(() => {
          const header = document.querySelector("header.top")!.getBoundingClientRect();
          const tables = [...document.querySelectorAll("main table")].map((t) => ({
            cls: t.className,
            // the box the table shows in: its scrolling wrapper, when it has one
            right: (t.parentElement!.classList.contains("table-scroll") ? t.parentElement! : t)
              .getBoundingClientRect().right,
            scrolls: t.scrollWidth > t.clientWidth + 1 ||
              (t.parentElement!.classList.contains("table-scroll") &&
                t.parentElement!.scrollWidth > t.parentElement!.clientWidth + 1),
          }));
          const links = [...document.querySelectorAll("header.top nav a, header.top .who a")].map(
            (a) => [getComputedStyle(a).color, a.getBoundingClientRect().right],
          );
          return {
            pageWidth: document.documentElement.scrollWidth,
            header: [header.left, header.width],
            headerBg: getComputedStyle(document.querySelector("header.top")!).backgroundColor,
            tables,
            links,
          };
        });
        assert.ok(m.pageWidth <= 390, `${path}: the page is ${m.pageWidth}px wide at 390`);
        assert.deepEqual(m.header, [0, 390], `${path}: the header spans the page`);
        for (const t of m.tables) {
          assert.ok(t.right <= 391, `${path}: table ${t.cls} inside the page`);
        }
        for (const [color, right] of m.links) {
          assert.ok(contrast(color, m.headerBg) >= 4.5, `${path}: nav contrast ${color}`);
          assert.ok(right <= 390, `${path}: nav link inside the page`);
        }
        if (path === "/runs") {
          assert.ok(m.tables[0].scrolls, "the runs table scrolls sideways within the page");
          await page.screenshot({ path: `${h.shots}/phone-runs.png`, fullPage: true });
        }
        if (path.startsWith("/compare") || path === "/sweeps") {
          await page.screenshot({
            path: `${h.shots}/phone-${path.slice(1, 8)}.png`,
            fullPage: true,
          });
        }
        if (path.startsWith("/runs/")) {
          await page.waitForSelector("[data-chart=memory] .plot[data-drawn] svg");
          const chartRight = await page.$eval(
            "[data-chart=memory] svg",
            (s: Element) => s.getBoundingClientRect().right,
          );
          assert.ok(chartRight <= 390, `the memory chart fits: ${chartRight}`);
          await page.screenshot({ path: `${h.shots}/phone-run.png`, fullPage: true });
        }
      }
      assert.deepEqual(h.errors, []);
      console.log(`screenshots in ${h.shots}`);
    } finally {
      await h.close();
    }
  },
);

/** Clicks a download link and returns the file's text and suggested name. */
async function download(page: Page, selector: string): Promise<[string, string]> {
  const [d] = await Promise.all([page.waitForEvent("download"), page.click(selector)]);
  return [await Deno.readTextFile(await d.path()), d.suggestedFilename()];
}

e2e(
  "export: every table of runs, run statistics and Compare downloads as CSV and JSON with raw values",
  async () => {
    const h = await startE2E();
    try {
      const stats = { calls: 1500, drops: 12, remats: 9, budgetStepMs: 4.75, swapOutBytes: 2048 };
      const runs = [];
      for (const [policy, ratio, overhead] of [["dtr-eq", 0.5, 1.25], ["lru", 0.7, 1.5]] as const) {
        runs.push(
          await storeRun(
            h.server.lab.store,
            result({
              budgetRatio: ratio,
              overhead,
              stats,
              points: [{ policy, ratio, feasible: true, overhead }],
            }),
            { policy, budgetRatio: ratio, name: `cfg, "${policy}"` },
          ),
        );
      }
      const page = await h.page();
      await page.goto(`${h.server.url}/runs`);
      const [csv, name] = await download(page, "[data-export-links=runs] a:text('CSV')");
      assert.equal(name, "runs-runs.csv");
      const lines = csv.trimEnd().split("\r\n");
      assert.equal(lines[0], "Run,Kind,Model,Policy,Budget,Status,Overhead,Created (UTC)");
      assert.equal(lines.length, 3);
      assert.match(lines[1]!, new RegExp(`^${runs[1]!.id},train,mlp/tiny,lru,.*,1\\.5,20`));
      assert.match(lines[2]!, new RegExp(`^${runs[0]!.id},train,mlp/tiny,dtr-eq,.*,1\\.25,20`));

      await page.goto(`${h.server.url}/runs/${runs[0]!.id}`);
      const [json] = await download(page, "[data-export-links=statistics] a:text('JSON')");
      const rows = JSON.parse(json) as { statistic: string; value: number | string | null }[];
      const value = (label: string) => rows.find((r) => r.statistic === label)?.value;
      assert.equal(value("median step under the budget"), 4.75);
      assert.equal(value("bytes swapped out"), 2048);
      assert.equal(value("kernel calls"), 1500);
      assert.equal(value("overhead"), 1.25);

      await page.goto(`${h.server.url}/compare?model=mlp/tiny`);
      const [matrix] = await download(page, "[data-export-links=overhead-by-ratio] a:text('JSON')");
      const api = await (await fetch(`${h.server.url}/api/compare?model=mlp&preset=tiny`)).json();
      const expected = api.policies.map((
        p: { policy: string; points: { ratio: number; overhead: number }[] },
      ) => ({
        Policy: p.policy,
        "0.5": p.points.find((x) => x.ratio === 0.5)?.overhead ?? null,
        "0.7": p.points.find((x) => x.ratio === 0.7)?.overhead ?? null,
      }));
      assert.deepEqual(JSON.parse(matrix), expected);
      const [pick] = await download(page, "[data-export-links=runs] a:text('CSV')");
      assert.match(pick.split("\r\n")[0]!, /^Run,Kind,Policy,Budget ratio,Steps,Overhead,Created/);
      await page.goto(`${h.server.url}/configurations`);
      const [cfgs] = await download(page, "[data-export-links=configurations] a:text('CSV')");
      assert.ok(cfgs.includes(`"cfg, ""lru"""`), `quotes and commas escaped: ${cfgs}`);
      const missing = await fetch(`${h.server.url}/runs?export=nope&format=csv`);
      assert.equal(missing.status, 404);
      assert.match((await missing.json()).error, /this page exports: runs/);
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "forms: names from the server's lists, validation as you type, clone a configuration with edits",
  async () => {
    const h = await startE2E();
    try {
      const { PRESETS } = await import("@libra/nn");
      const page = await h.page();
      await page.goto(`${h.server.url}/configurations`);
      await page.waitForSelector("[data-island=ConfigForm][data-hydrated]");
      const options = (sel: string) =>
        page.$$eval(`${sel} option`, (os: HTMLOptionElement[]) => os.map((o) => o.value));
      const models = await options("select[name=model]");
      assert.deepEqual(models, Object.keys(PRESETS));
      await page.selectOption("select[name=model]", "gpt");
      assert.deepEqual(await options("select[name=preset]"), Object.keys(PRESETS.gpt));
      const { LIVE_COST_MODELS } = await import("@libra/cost");
      assert.deepEqual(await options("select[name=costModel]"), [...LIVE_COST_MODELS]);
      const policies = await options("select[name=policy]");
      assert.ok(policies.includes("libra") && policies.includes("dtr-eq"), String(policies));

      // validation as you type: no submit needed, and the message goes once fixed
      await page.fill("input[name=budgetRatio]", "1.5");
      assert.equal(await page.textContent("[data-field=budgetRatio] .error"), "must be <= 1");
      await page.fill("input[name=budgetRatio]", "0.6");
      assert.equal(await page.locator("[data-field=budgetRatio] .error").count(), 0);
      await page.fill("input[name=steps]", "2.5");
      assert.equal(await page.textContent("[data-field=steps] .error"), "must be an integer");
      assert.equal(
        await page.locator("[data-field=name] .error").count(),
        0,
        "untouched fields stay quiet",
      );
      await page.screenshot({ path: `${h.shots}/form-as-you-type.png`, fullPage: true });

      // clone with edits
      const src = await h.server.lab.store.createConfiguration({
        name: "base",
        model: "mlp",
        preset: "small",
        config: null,
        device: "cpu",
        budgetRatio: 0.5,
        budgetBytes: null,
        policy: "dtr-eq",
        costModel: "analytic",
        steps: 7,
        seed: 3,
        overheadLimit: 3,
      });
      await page.goto(`${h.server.url}/configurations`);
      await page.click(`tr#${src.id} a:text('Clone')`);
      await page.waitForSelector("[data-island=ConfigForm][data-hydrated]");
      assert.equal(await page.getAttribute("[data-clone-of]", "data-clone-of"), src.id);
      assert.equal(await page.inputValue("input[name=name]"), "base (copy)");
      assert.equal(await page.inputValue("select[name=preset]"), "small");
      assert.equal(await page.inputValue("select[name=costModel]"), "analytic");
      await page.selectOption("select[name=policy]", "lru");
      await page.fill("input[name=budgetRatio]", "0.7");
      await page.fill("input[name=name]", "base with lru");
      await page.click("button:text-is('Create')");
      await page.waitForURL(/\/configurations#cfg_/);
      const list = await h.server.lab.store.listConfigurations({ limit: 10, offset: 0 });
      const clone = list.items.find((c) => c.name === "base with lru")!;
      assert.ok(clone, "the clone was created");
      const strip = ({ id: _i, createdAt: _c, updatedAt: _u, ...rest }: typeof clone) => rest;
      assert.deepEqual(strip(clone), {
        ...strip(src),
        name: "base with lru",
        policy: "lru",
        budgetRatio: 0.7,
      });
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "live progress names the phase plainly and estimates the time left, then shows the results",
  async () => {
    const h = await startE2E();
    try {
      const store = h.server.lab.store;
      const cfg = await store.createConfiguration(configuration({ steps: 4 }));
      const run = (await store.createRunFromConfiguration(cfg.id))!;
      await store.claimNextRun("w");
      const startedAt = (await store.getRun(run.id))!.startedAt!;
      await store.heartbeat(run.id, "w", {
        phase: "baseline",
        done: 2,
        total: 8,
        message: "without a budget: step 2/4, loss 1.2000",
      });
      const page = await h.page();
      await page.goto(`${h.server.url}/runs/${run.id}`);
      await page.waitForSelector("[data-island=LiveProgress][data-hydrated] .live");
      assert.equal(
        await page.textContent(".live strong"),
        "Measuring the training steps without a budget",
      );
      const eta = async () => {
        const t = await page.textContent(".live .eta");
        const m = t.match(/^(\d+) of (\d+) done \((\d+)%\) · about (\d+) s left$/);
        assert.ok(m, t);
        return m.slice(1).map(Number);
      };
      let [done, total, pct, left] = await eta();
      assert.deepEqual([done, total, pct], [2, 8, 25]);
      // the pace so far: 2 units in the elapsed time, 6 to go
      const bound = (d: number, n: number) =>
        Math.ceil(((Date.now() - startedAt) * (n - d)) / d / 1000) + 1;
      assert.ok(left >= 1 && left <= bound(2, 8), `${left} s left, at most ${bound(2, 8)}`);
      await page.screenshot({ path: `${h.shots}/live-baseline.png` });

      await store.heartbeat(run.id, "w", {
        phase: "budget",
        done: 6,
        total: 8,
        message: "under the budget: step 2/4, loss 1.1000",
      });
      await page.waitForSelector(".live strong[data-phase=budget]");
      assert.equal(await page.textContent(".live strong"), "Training under the memory budget");
      [done, total, pct, left] = await eta();
      assert.deepEqual([done, total, pct], [6, 8, 75]);
      assert.ok(left >= 1 && left <= bound(6, 8), `${left} s left, at most ${bound(6, 8)}`);
      assert.match(await page.textContent(".live .message"), /under the budget: step 2\/4/);

      await store.completeRun(run.id, "w", result());
      await page.waitForSelector("h1 .status-succeeded");
      assert.equal(await page.locator(".live").count(), 0);
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "traces: an uploaded trace is simulated under libra and chen-sqrt (planned) beside dtr-eq",
  async () => {
    const h = await startE2E({
      executor: { name: "real (this thread)", execute: executeInThisThread },
    });
    try {
      const chain = new URL("../../packages/train/testdata/chain.log", import.meta.url).pathname;
      const page = await h.page();
      await page.goto(`${h.server.url}/traces`);
      await page.setInputFiles("input[name=trace]", chain);
      await page.fill("input[name=policies]", "dtr-eq,libra,chen-sqrt");
      await page.fill("input[name=ratios]", "1,0.6,0.3");
      await page.click("form.upload button.primary");
      await page.waitForURL(/\/runs\/run_/);
      await page.waitForSelector("h1 .status-succeeded, h1 .status-failed", { timeout: 60_000 });
      assert.equal(
        await page.textContent("h1 .badge"),
        "succeeded",
        (await page.locator(".error-box").allTextContents()).join(" "), // does not wait for one
      );
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const rows = await page.$$eval(
        "table.smallest tbody tr",
        (trs: Element[]) =>
          trs.map((r) => [r.getAttribute("data-policy"), r.children[3]!.textContent]),
      );
      assert.deepEqual(rows, [["chen-sqrt", "3"], ["dtr-eq", "3"], ["libra", "3"]]);
      // the planners' numbers are those of simulatePlanner on the same trace
      const text = await Deno.readTextFile(chain);
      const { parseTrace } = await import("@libra/runtime");
      const { simulatePlanner } = await import("@libra/train/simulate-plan");
      const oracle = simulatePlanner(parseTrace(text, "chain"), "libra", { ratios: [1, 0.6, 0.3] });
      const best = oracle.results.filter((r) => r.feasible).sort((a, b) => a.ratio - b.ratio)[0]!;
      assert.equal(
        await page.textContent("table.smallest tr[data-policy=libra] td:nth-child(2)"),
        best.ratio.toFixed(2),
      );
      await page.screenshot({ path: `${h.shots}/trace-planners.png`, fullPage: true });
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);

e2e(
  "sweeps: defined and launched from the dashboard, progress shown, Compare filters by the sweep with intervals over repeats",
  async () => {
    // the fake executor, with repeat r taking (1 + 0.05 (r - 1)) times as long
    const fake = fakeExecutor();
    const executor: RunExecutor = {
      name: "fake with repeats",
      async execute(spec, ctx) {
        const r = await fake.execute(spec, ctx);
        const k = 1 + 0.05 * (((spec as { repeat?: number }).repeat ?? 1) - 1);
        return {
          ...r,
          overhead: r.overhead! * k,
          points: r.points.map((p) => ({ ...p, overhead: p.overhead! * k })),
        };
      },
    };
    const h = await startE2E({ executor });
    try {
      await h.server.lab.store.ingestBench({
        suite: "not in the sweep",
        machine: {},
        results: [0.5, 1].map((ratio) => ({
          kind: "live" as const,
          model: "mlp",
          preset: "tiny",
          policy: "dtr-eq",
          ratio,
          feasible: true,
          overhead: 9,
        })),
      });
      const page = await h.page();
      await page.goto(`${h.server.url}/sweeps`);
      await page.fill("input[name=name]", "two policies");
      for (
        const m of await page.$$eval(
          "input[name=models]:checked",
          (es: HTMLInputElement[]) => es.map((e) => e.value),
        )
      ) {
        await page.uncheck(`input[name=models][value='${m}']`);
      }
      await page.check("input[name=models][value=mlp]");
      await page.fill("input[name=ratios]", "1,0.5");
      await page.fill("input[name=repeats]", "3");
      await page.fill("input[name=steps]", "2");
      await page.click("form.sweep-form button.primary");
      await page.waitForURL(/\/sweeps\/swp_/);
      const id = page.url().split("/").pop()!;
      assert.match(await page.textContent("p.meta"), /= 12 runs of 2 steps/);
      // the page refreshes itself while the sweep runs
      await page.waitForSelector("[data-progress='12/12']", { timeout: 60_000 });
      assert.equal(await page.locator("table[data-export=sweep-runs] tbody tr").count(), 12);
      await page.screenshot({ path: `${h.shots}/sweep.png`, fullPage: true });

      await page.click(".compare-links a:text('mlp/tiny')");
      await page.waitForURL(new RegExp(`/compare\\?model=mlp%2Ftiny&sweep=${id}`));
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const cell = (policy: string, col: number) =>
        page.textContent(`table.matrix tbody tr:has(td:text-is('${policy}')) td:nth-child(${col})`);
      // ratios 0.5 then 1: fake overhead 1.5 and 1, times 1, 1.05, 1.1 over the repeats
      assert.equal(await cell("dtr-eq", 2), "1.575 (1.50–1.65)");
      assert.equal(await cell("lru", 3), "1.050 (1.00–1.10)");
      assert.equal(await page.locator("[data-chart=overhead] g.interval line").count(), 4);
      assert.ok(
        !(await page.textContent("table.matrix")).includes("9.000"),
        "the bench runs are out",
      );
      await page.screenshot({ path: `${h.shots}/compare-sweep.png`, fullPage: true });
      // without the sweep filter the bench runs count again
      await page.selectOption("select[name=sweep]", "");
      await page.click("form.filters button:text('Show')");
      await page.waitForURL(/sweep=&|sweep=$/);
      assert.equal(await cell("dtr-eq", 2), "1.613 (1.50–9.00)");
      assert.deepEqual(h.errors, []);
    } finally {
      await h.close();
    }
  },
);
