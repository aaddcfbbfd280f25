/**
 * End-to-end: the server on a free port with a temporary database, driven by headless
 * Chromium through playwright-core. Creates a configuration through the form, launches
 * a run of a tiny model, waits for it to finish, checks the run page (statistics,
 * memory chart, loss chart) and the compare page, and saves screenshots in a temporary
 * folder (printed). Skips, saying why, when Chromium is not installed.
 */
import assert from "node:assert/strict";
import { probeRealExecutor } from "@libra/api";
import { fakeExecutor } from "../api/_fake_executor.ts";
import { startServer } from "./main.ts";

const CHROMIUM = Deno.env.get("LIBRA_CHROMIUM") ?? "/usr/bin/chromium";
const haveChromium = await Deno.stat(CHROMIUM).then(() => true, () => false);
const TOKEN = "e2e-write-token";

/** A chain x -> a -> b -> c -> y of 100-byte tensors (used when the shared traces are absent). */
function chainTrace(): string {
  const lines = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}`,
  ];
  let prev = "x";
  for (const n of ["a", "b", "c", "y"]) {
    lines.push(
      `{"ARGS":["${prev}"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["${n}"],"TIME":"10"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"${n}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${n}"}`,
    );
    if (prev !== "x") lines.push(`{"INSTRUCTION":"RELEASE","NAME":"${prev}"}`);
    prev = n;
  }
  return lines.join("\n");
}

Deno.test({
  name: haveChromium
    ? "dashboard e2e: form -> run -> memory chart -> compare, in headless Chromium"
    : `dashboard e2e (skipped: no Chromium at ${CHROMIUM}; set LIBRA_CHROMIUM)`,
  ignore: !haveChromium,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const { chromium } = await import("playwright-core");
    const dir = await Deno.makeTempDir({ prefix: "libra-e2e-" });
    const shots = `${dir}/screenshots`;
    await Deno.mkdir(shots);
    // The product path (real executor) when the runtime and model zoo are in this build.
    const probe = await probeRealExecutor();
    const executor = probe.ok ? undefined : fakeExecutor({ stepMs: 150 });
    console.log(
      probe.ok
        ? `e2e: using the real executor (${probe.detail})`
        : `e2e: real executor unavailable (${probe.detail}); using the fake executor`,
    );
    const model = probe.ok ? probe.tinyModel : "mlp";
    const t0 = performance.now();
    const lap = (what: string) =>
      console.log(`e2e: ${what} at ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const server = await startServer({
      port: 0,
      dataDir: dir,
      token: TOKEN,
      readToken: null,
      log: () => {},
      workerOptions: { pollMs: 100, heartbeatMs: 500 },
      ...(executor ? { executor } : {}),
    });
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    });
    const errors: string[] = [];
    lap("server and browser started");
    try {
      // comparison data for a second and third policy, as `deno task bench --upload` posts it
      const bench = await fetch(`${server.url}/api/bench`, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          suite: "e2e",
          results: [0.9, 0.7, 0.5, 0.3].flatMap((ratio) => [
            {
              kind: "live",
              model,
              preset: "tiny",
              policy: "lru",
              ratio,
              feasible: ratio >= 0.5,
              overhead: ratio >= 0.5 ? 1 + (1 - ratio) : null,
            },
            {
              kind: "live",
              model,
              preset: "tiny",
              policy: "dtr",
              ratio,
              feasible: true,
              overhead: 1 + (1 - ratio) / 3,
            },
          ]),
        }),
      });
      assert.equal(bench.status, 201, await bench.clone().text());

      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.on("pageerror", (e) => errors.push(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") errors.push(m.text());
      });

      // not logged in: the form is disabled and says how to log in
      await page.goto(`${server.url}/configurations`);
      assert.match(await page.textContent(".config-form .notice") ?? "", /Log in/);
      await page.click(".config-form .notice a");
      await page.fill("input[name=token]", "wrong");
      await page.click("button.primary");
      assert.match(await page.textContent("[role=alert]") ?? "", /not valid/);
      await page.fill("input[name=token]", TOKEN);
      await page.click("button.primary");
      await page.waitForURL(/\/configurations$/);
      await page.waitForSelector("[data-island=ConfigForm][data-hydrated]");
      errors.length = 0; // the refused login above answered 400 on purpose

      // client-side validation with the API's schema
      await page.fill("input[name=name]", "e2e tiny run");
      await page.selectOption("select[name=model]", model);
      await page.fill("input[name=budgetRatio]", "1.5");
      await page.click("button.primary");
      const msg = await page.waitForSelector("[data-field=budgetRatio] .error");
      assert.equal(await msg.textContent(), "must be <= 1");
      await page.screenshot({ path: `${shots}/0-form-validation.png`, fullPage: true });
      assert.match(page.url(), /\/configurations$/, "an invalid form is not submitted");
      await page.fill("input[name=budgetRatio]", "0.9");
      await page.fill("input[name=steps]", "3");
      await page.screenshot({ path: `${shots}/1-configuration-form.png`, fullPage: true });
      await page.click("button.primary"); // create and launch
      await page.waitForURL(/\/runs\/run_/);
      const runId = page.url().split("/").pop()!;
      lap(`run ${runId} launched`);

      // live progress: the page rendered while the run was queued or running; only the
      // island's event stream can turn it into the finished page (it reloads on "end")
      const first = await page.textContent("h1 .badge");
      if (first === "queued" || first === "running") {
        await page.waitForSelector("[data-island=LiveProgress][data-hydrated] .live");
      } else {
        console.log(`e2e: the run had already ended (${first}) when its page rendered`);
      }
      await page.waitForSelector("h1 .status-succeeded, h1 .status-failed", { timeout: 120_000 });
      const status = await page.textContent("h1 .badge");
      assert.equal(
        status,
        "succeeded",
        (await page.locator(".error-box").allTextContents()).join(" "), // does not wait for one
      );
      lap("run finished");
      await page.waitForSelector("[data-chart=memory] .plot[data-drawn] svg");
      await page.waitForSelector("[data-chart=loss] .plot[data-drawn] svg");
      const caption = await page.textContent("[data-chart=memory] figcaption") ?? "";
      const api = await (await fetch(`${server.url}/api/runs/${runId}`)).json();
      const [unit, scale] = api.budgetBytes >= 2 ** 20 ? ["MiB", 2 ** 20] : ["KiB", 1024];
      assert.ok(
        caption.includes(`budget ${(api.budgetBytes / scale).toFixed(2)} ${unit}`),
        `caption names the run's budget ${api.budgetBytes}: ${caption}`,
      );
      const ratio = await page.textContent("[data-stat='budget ratio'] td");
      assert.equal(ratio, "0.900");
      const overhead = parseFloat(await page.textContent("[data-stat=overhead] td") ?? "");
      assert.ok(overhead > 0, `overhead shown: ${overhead}`);
      // the budget line is drawn at the budget: a red dashed rule inside the chart
      assert.equal(
        await page.locator("[data-chart=memory] svg g[aria-label=rule][stroke='#d62728'] line")
          .count(),
        1,
      );
      await page.screenshot({ path: `${shots}/2-run-detail.png`, fullPage: true });

      // the runs list, newest first
      await page.goto(`${server.url}/runs`);
      assert.equal(await page.getAttribute("table.runs tbody tr:first-child", "data-run"), runId);
      await page.screenshot({ path: `${shots}/3-runs.png`, fullPage: true });

      // compare: one line per policy, smallest feasible ratio per policy
      await page.goto(`${server.url}/compare?model=${model}/tiny`);
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const smallest = Object.fromEntries(
        await page.$$eval(
          "table.smallest tbody tr",
          (rows) => rows.map((r) => [r.getAttribute("data-policy"), r.children[1]!.textContent]),
        ),
      );
      assert.deepEqual(smallest, { "dtr": "0.30", "dtr-eq": "0.90", "lru": "0.50" });
      await page.screenshot({ path: `${shots}/4-compare.png`, fullPage: true });

      // traces: upload a DTR-format trace through the form; its simulation shows curves
      const shared = new URL("../../../shared/traces/resnet32-56.log", import.meta.url).pathname;
      const tracePath = await Deno.stat(shared).then(() => shared, async () => {
        const p = `${dir}/chain.log`;
        await Deno.writeTextFile(p, chainTrace());
        return p;
      });
      await page.goto(`${server.url}/traces`);
      await page.setInputFiles("input[name=trace]", tracePath);
      await page.fill("input[name=policies]", "dtr-eq,lru");
      await page.fill("input[name=ratios]", "1,0.8,0.6,0.4,0.2,0.1");
      await page.click("form.upload button.primary");
      await page.waitForURL(/\/runs\/run_/);
      await page.waitForSelector("h1 .status-succeeded, h1 .status-failed", { timeout: 120_000 });
      assert.equal(await page.textContent("h1 .badge"), "succeeded");
      await page.waitForSelector("[data-chart=overhead] .plot[data-drawn] svg");
      const policies = await page.$$eval(
        "table.smallest tbody tr",
        (rows) => rows.map((r) => r.getAttribute("data-policy")),
      );
      assert.deepEqual(policies, ["dtr-eq", "lru"]);
      lap("trace simulated");
      await page.screenshot({ path: `${shots}/5-trace-simulation.png`, fullPage: true });

      // without JavaScript the pages still render on the server
      const html = await (await fetch(`${server.url}/runs/${runId}`)).text();
      assert.match(html, /data-stat="overhead"/);
      assert.deepEqual(errors, [], "no errors in the browser console");
      console.log(`e2e: screenshots in ${shots}`);
    } finally {
      await browser.close();
      await server.close();
    }
  },
});
