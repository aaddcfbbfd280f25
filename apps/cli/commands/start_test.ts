/**
 * `libra start` as a subprocess on a temporary data folder: `--no-serve --quick` runs
 * the demo sweep through the lab and exits; the runs are in the database, finished,
 * with results that keep the budget; then `start` serves the dashboard on a free port,
 * where the API answers and the runs show up.
 */
import assert from "node:assert/strict";
import { openStore, probeRealExecutor, type Run, type RunResults } from "@libra/api";
import { type DemoRow, formatTable } from "./start.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const probe = await probeRealExecutor();
const skip = probe.ok ? "" : ` (skipped: ${probe.detail})`;

// The subprocess must use the temporary folder, whatever the caller's environment says.
function env(): Record<string, string> {
  const e = Deno.env.toObject();
  for (const k of Object.keys(e)) if (k.startsWith("LIBRA_")) delete e[k];
  return e;
}

function start(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "start", ...args],
    clearEnv: true,
    env: env(),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Checks every run of the demo against what the budget rules say. */
/** `measured`: the steps measured per copy (the losses hold the warm-up's first). */
function checkRun(run: Run, res: RunResults, measured: number): void {
  const what = `${run.model} ${run.policy} @ ${run.budgetRatio}`;
  assert.equal(run.status, "succeeded", `${what}: ${run.error}`);
  assert.equal(run.kind, "train");
  assert.ok(run.startedAt !== null && run.finishedAt !== null && run.finishedAt >= run.startedAt);
  const ratio = run.budgetRatio!;
  // A budget equal to the budget-free peak always fits.
  if (ratio === 1) assert.equal(run.feasible, true, `${what}: ${res.note}`);
  if (!run.feasible) {
    assert.ok(res.note && /budget/i.test(res.note), `${what}: infeasible without a reason`);
    return;
  }
  const base = run.baselinePeakBytes!, budget = run.budgetBytes!, peak = run.peakBytes!;
  assert.ok(base > 0);
  assert.ok(
    Math.abs(budget - ratio * base) <= 1,
    `${what}: budget ${budget} != ${ratio} x ${base}`,
  );
  assert.ok(peak <= budget, `${what}: peak ${peak} > budget ${budget}`);
  assert.ok(run.overhead !== null && run.overhead > 0);
  // The memory timeline is recorded under the budget and never crosses it.
  const samples = res.memory?.samples ?? [];
  assert.ok(samples.length > 0, `${what}: no memory timeline`);
  assert.equal(res.memory!.budgetBytes, budget);
  assert.ok(Math.max(...samples.map((s) => s[1])) <= budget, `${what}: timeline above budget`);
  // Re-materialization is exact: the budgeted losses are the budget-free ones, bitwise.
  const warmup = res.stats.warmupSteps!;
  assert.ok(warmup >= 2, `${what}: ${warmup} warm-up steps`);
  const steps = warmup + measured;
  assert.equal(res.loss.length, steps, `${what}: ${res.loss.length} losses for ${steps} steps`);
  for (const l of res.loss) {
    assert.ok(Number.isFinite(l.loss));
    assert.equal(l.loss, l.baseline, `${what}: step ${l.step} loss differs from the baseline`);
  }
  assert.deepEqual(res.points, [{
    policy: run.policy,
    ratio,
    feasible: true,
    overhead: run.overhead,
    reason: null,
  }]);
}

Deno.test({
  name: `libra start --no-serve runs the demo into the lab; start then serves it${skip}`,
  ignore: !probe.ok,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "libra-start-" });
    try {
      await t.step("--no-serve --quick: 6 finished runs that keep their budgets", async () => {
        // 1% of the peak (about 19 KiB for the tiny GPT) cannot hold the logits
        // (8 x 16 x 32 floats = 16 KiB) together with their gradient: infeasible.
        const out = await start([
          "--no-serve",
          "--quick",
          "--models",
          "gpt",
          "--preset",
          "tiny",
          "--steps",
          "2",
          "--ratios",
          "1,0.5,0.01",
          "--data-dir",
          dir,
        ])
          .output();
        const stdout = new TextDecoder().decode(out.stdout);
        const stderr = new TextDecoder().decode(out.stderr);
        assert.equal(out.code, 0, stdout + stderr);
        // progress on stderr (plain lines: not a terminal), the table on stdout
        assert.match(stderr, /demo sweep of 6 runs/);
        assert.match(stderr, /\[6\/6\] gpt \S+ @ \d\.\d\d: .*elapsed/);
        assert.match(stderr, /ETA/);
        assert.match(stdout, /model\s+policy\s+ratio\s+result/);
        assert.match(stdout, /demo of 6 runs finished in \d+\.\d s/);

        const store = await openStore({ path: `${dir}/libra.db` });
        try {
          const runs = (await store.listRuns({ limit: 50, offset: 0 })).items;
          assert.equal(runs.length, 6);
          assert.deepEqual(
            runs.map((r) => `${r.policy}@${r.budgetRatio}`).sort(),
            ["dtr-eq@0.01", "dtr-eq@0.5", "dtr-eq@1", "libra@0.01", "libra@0.5", "libra@1"],
          );
          for (const run of runs) {
            const res = await store.getResults(run.id);
            assert.ok(res, `run ${run.id} has no results`);
            // warm-up steps (two or more) and two measured ones, both copies
            checkRun(run, res, 2);
            if (run.feasible) {
              const st = res.stats;
              assert.ok(st.overheadLow! <= run.overhead! && run.overhead! <= st.overheadHigh!);
              assert.equal(st.measuredPairs, 2);
              assert.ok(st.accountedOverhead! >= 1);
            }
            if (run.budgetRatio === 0.01) assert.equal(run.feasible, false, run.id);
            // each run is a row of the table, with its outcome
            const row = stdout.split("\n").find((l) => l.includes(run.id));
            assert.ok(row, `run ${run.id} missing from the table`);
            assert.match(row, run.feasible ? / ok / : / infeasible /);
          }
          const cmp = await store.compare({ model: "gpt" });
          assert.deepEqual(cmp.policies.map((p) => p.policy), ["dtr-eq", "libra"]);
          for (const p of cmp.policies) {
            assert.deepEqual(p.points.map((x) => x.ratio), [1, 0.5, 0.01]);
            assert.equal(p.points[2]!.feasible, false);
          }
        } finally {
          await store.close();
        }
      });

      await t.step("start --port 0: demo, then the URL answers with the runs", async () => {
        const child = start([
          "--port",
          "0",
          "--quick",
          "--models",
          "gpt",
          "--preset",
          "tiny",
          "--steps",
          "2",
          "--policies",
          "libra",
          "--ratios",
          "0.6",
          "--data-dir",
          dir,
        ]);
        const stderr = new Response(child.stderr).text();
        const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let stdout = "";
        let url: string | null = null;
        const deadline = Date.now() + 90_000;
        try {
          while (url === null && Date.now() < deadline) {
            const { value, done } = await reader.read();
            if (done) break;
            stdout += value;
            url = /dashboard on (http:\/\/\S+)\/runs/.exec(stdout)?.[1] ?? null;
          }
          assert.ok(url, `no dashboard URL printed:\n${stdout}`);
          assert.match(stdout, /demo of 1 runs finished/);
          const health = await fetch(`${url}/api/health`);
          assert.equal(health.status, 200);
          assert.equal((await health.json()).status, "ok");
          const runs = await (await fetch(`${url}/api/runs?limit=50`)).json();
          assert.equal(runs.total, 7, JSON.stringify(runs));
          const mine = runs.items.find((r: { budgetRatio: number }) => r.budgetRatio === 0.6);
          assert.ok(mine, "the served lab lacks the new run");
          assert.equal(mine.status, "succeeded");
          const page = await fetch(`${url}/runs/${mine.id}`);
          assert.equal(page.status, 200);
          assert.ok((await page.text()).includes(mine.id));
          const mem = await (await fetch(`${url}/api/runs/${mine.id}/memory`)).json();
          assert.ok(mem.samples.length > 0);
        } finally {
          child.kill("SIGTERM");
          while (!(await reader.read()).done) { /* drain */ }
          const status = await child.status;
          await stderr;
          assert.equal(status.code, 0, stdout);
        }
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("formatTable() shows feasible and infeasible runs", () => {
  const row = (ratio: number, feasible: boolean): DemoRow => ({
    model: "gpt",
    policy: "libra",
    ratio,
    runId: `run_${ratio}`,
    status: "succeeded",
    feasible,
    overhead: feasible ? 1.25 : null,
    overheadLow: feasible ? 1.125 : null,
    overheadHigh: feasible ? 1.5 : null,
    accountedOverhead: feasible ? 1.2 : null,
    peakBytes: feasible ? 2048 : null,
    budgetBytes: 4096 * ratio,
    evictions: 3,
    remats: 2,
    note: feasible ? null : "out of budget",
    seconds: 1,
  });
  const table = formatTable([row(1, true), row(0.25, false)]);
  assert.match(table, /overhead\s+95% interval\s+accounted/);
  assert.match(
    table,
    /gpt\s+libra\s+1\.00\s+ok\s+1\.250x\s+1\.125-1\.500\s+1\.200x\s+2\s+4\s+3\s+2\s+run_1/,
  );
  assert.match(
    table,
    /gpt\s+libra\s+0\.25\s+infeasible\s+-\s+-\s+-\s+-\s+1\s+3\s+2\s+run_0\.25/,
  );
  assert.match(table, /gpt libra: 1\.00/);
  assert.match(table, /why infeasible:\n {2}gpt libra @ 0\.25: out of budget$/);
});
