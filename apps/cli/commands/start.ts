/**
 * `libra start` (`deno task start`): the main job. Runs a short demo sweep, a tiny
 * GPT and a tiny ResNet under a few budget ratios with a few policies on the cpu
 * backend, through the lab itself: each experiment is a configuration created
 * through the lab API, launched as a run, and executed by the lab's worker with the
 * real executor, exactly as a run launched from the dashboard. Progress goes to
 * stderr; the results table to stdout. Then it serves the API and the dashboard
 * (as `libra serve` does), where the demo runs show up with their memory timelines,
 * loss curves and the compare page.
 *
 * The lab's real executor trains every run, dynamic policies (`dtr-eq`, `lru`, ...)
 * and static planners (`libra`, `chen-sqrt`) alike, through `runTraining`
 * (`@libra/train`, the core of `libra run`) in a worker thread, so the
 * server keeps answering and the progress display keeps moving while a run computes.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type Lab, openLab, realExecutor, redact, type Run, type RunResults } from "@libra/api";
import { type ServerHandle, startServer } from "@libra/web";
import { parsePort } from "./serve.ts";
import { DEFAULT_WARMUP_CALLS } from "@libra/train/run-training";
import { renderTable } from "@libra/util/table";
import { StatusLine, stderrSink } from "@libra/util/progress";

/** One-line description for `--help`. */
export const summary = "run a short demo sweep into the lab, then serve the dashboard";

/** What the demo sweeps. */
export interface DemoPlan {
  /** Model families of `@libra/nn`. */
  models: string[];
  /** Preset of every model. */
  preset: string;
  /** Budget ratios, each in (0, 1]. */
  ratios: number[];
  /** Policies or planners. */
  policies: string[];
  /** Measured steps per run and copy (after the warm-up; 6 or more give a 95% interval). */
  steps: number;
  /** Seed of models and data. */
  seed: number;
}

/**
 * The default sweep: 2 models x 3 ratios x 2 policies = 12 runs of the `small`
 * presets, whose steps take 50 ms or more on a 2-core machine (the
 * `tiny` ones take a few ms: timer resolution and scheduling noise would be the
 * numbers); 21 measured pairs each, half what `libra run` measures by
 * default, so that the sweep ends within 3 minutes on 2 cores (with 6, lstm
 * small at ratio 1.0 measured 1.35-1.6 with intervals as wide as 0.8-1.8,
 * where longer runs measure 1.05-1.15).
 */
export const DEFAULT_DEMO: Readonly<DemoPlan> = {
  models: ["gpt", "lstm"],
  preset: "small",
  ratios: [1, 0.7, 0.5],
  policies: ["dtr-eq", "libra"],
  steps: 21,
  seed: 0,
};

/** The `--quick` sweep: 1 model x 2 ratios x 2 policies = 4 runs. */
export const QUICK_DEMO: Readonly<DemoPlan> = {
  models: ["lstm"],
  preset: "small",
  ratios: [1, 0.5],
  policies: ["dtr-eq", "libra"],
  steps: 6,
  seed: 0,
};

const HELP = `Usage: deno task start [options]      (= deno task libra start)

Runs a short demo sweep (the ${DEFAULT_DEMO.preset} presets of ${
  DEFAULT_DEMO.models.join(" and ")
} under budget
ratios ${DEFAULT_DEMO.ratios.join(", ")} with ${
  DEFAULT_DEMO.policies.join(", ")
}, on the cpu backend) as real runs of the lab,
with progress on stderr, prints a results table, then serves the API and the
dashboard on http://localhost:8000 like \`libra serve\`. Every start runs a fresh
sweep (new runs next to the earlier ones); --skip-demo serves at once.

Options:
  --no-serve          run the demo, print the table and exit (0 unless a run failed)
  --skip-demo         serve without running the demo
  --quick             a smaller sweep: ${QUICK_DEMO.models.join(",")}, ratios ${
  QUICK_DEMO.ratios.join(" and ")
}, ${QUICK_DEMO.policies.join(" and ")}
  --models A,B        models to sweep (default ${DEFAULT_DEMO.models.join(",")})
  --ratios R,S        budget ratios in (0, 1] (default ${DEFAULT_DEMO.ratios.join(",")})
  --policies P,Q      policies or planners (default ${DEFAULT_DEMO.policies.join(",")})
  --preset NAME       preset of every model (default ${DEFAULT_DEMO.preset})
  --steps N           measured steps per run and copy, after the warm-up (2 steps or more,
                      until the runtime has run ${DEFAULT_WARMUP_CALLS} calls)
                      (default ${DEFAULT_DEMO.steps}; 6 or more give a 95% interval)
  --port N            port (default $LIBRA_PORT or 8000; 0 picks a free one)
  --host H            interface (default 127.0.0.1; 0.0.0.0 serves the network)
  --data-dir DIR      folder for the SQLite file and the generated token (default .libra)
  --db FILE           SQLite file (default DIR/libra.db)
  --database-url URL  PostgreSQL instead of SQLite (default $LIBRA_DATABASE_URL)

Each run trains a budget-free and a budgeted copy of the model, their steps
interleaved; the table shows the median of the paired step-time ratios with its
95% interval (and the overhead the runtime accounts for), decisions priced by
the analytic cost model, so a rerun makes the same evictions.
An experiment whose budget is too small is shown as "infeasible", not an error.
Environment: LIBRA_PORT, LIBRA_API_TOKEN, LIBRA_API_READ_TOKEN, LIBRA_DATABASE_URL.`;

// ---------------------------------------------------------------------------------
// The demo sweep

/** One experiment of the demo and how it ended. */
export interface DemoRow {
  /** Model. */
  model: string;
  /** Policy or planner. */
  policy: string;
  /** Budget ratio. */
  ratio: number;
  /** The run in the lab. */
  runId: string;
  /** Final run state. */
  status: Run["status"];
  /** Whether the steps completed under the budget (null if the run failed). */
  feasible: boolean | null;
  /** Overhead: median of the paired step-time ratios (budgeted / budget-free). */
  overhead: number | null;
  /** Its 95% interval (null when unknown). */
  overheadLow: number | null;
  overheadHigh: number | null;
  /** The overhead the runtime accounts for from its counters. */
  accountedOverhead: number | null;
  /** Peak under the budget, bytes. */
  peakBytes: number | null;
  /** The budget, bytes. */
  budgetBytes: number | null;
  /** Evictions and re-materializations under the budget. */
  evictions: number | null;
  /** Re-materializations (recomputes and swap-ins). */
  remats: number | null;
  /** Why it failed or was infeasible. */
  note: string | null;
  /** Seconds from claim to end. */
  seconds: number | null;
}

/** Receives the demo's progress. */
export interface DemoProgress {
  /** Called every tick with the latest state. */
  update(s: {
    done: number;
    total: number;
    current: { label: string; message: string } | null;
    elapsedMs: number;
    etaMs: number | null;
  }): void;
  /** Called once per experiment that ended. */
  ended(row: DemoRow, done: number, total: number, elapsedMs: number, etaMs: number | null): void;
  /** Called at the end. */
  finish(): void;
}

const label = (model: string, policy: string, ratio: number) =>
  `${model} ${policy} @ ${ratio.toFixed(2)}`;

async function api(lab: Lab, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await lab.api.request(path, {
    method,
    headers: {
      Authorization: `Bearer ${lab.auth.writeToken}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} /api${path} answered ${res.status}: ${text}`);
  return JSON.parse(text);
}

interface ConfigItem {
  id: string;
  name: string;
  model: string;
  preset: string;
  device: string;
  policy: string;
  budgetRatio: number | null;
  steps: number;
  seed: number;
  costModel: string;
}

/**
 * Runs the sweep through `lab`: reuses (or creates) one configuration per experiment
 * through the API, launches a new run of each, and watches the runs until they all
 * end. `signal` cancels the runs not yet ended. Returns one row per experiment.
 */
export async function runDemo(
  lab: Lab,
  plan: DemoPlan,
  progress: DemoProgress,
  signal?: AbortSignal,
): Promise<DemoRow[]> {
  const existing = new Map<string, ConfigItem>();
  for (let offset: number | null = 0; offset !== null;) {
    const page = await api(lab, "GET", `/configurations?limit=200&offset=${offset}`) as {
      items: ConfigItem[];
      nextOffset: number | null;
    };
    for (const c of page.items) if (c.name.startsWith("demo ")) existing.set(c.name, c);
    offset = page.nextOffset;
  }
  const experiments: { model: string; policy: string; ratio: number; runId: string }[] = [];
  for (const model of plan.models) {
    for (const ratio of plan.ratios) {
      for (const policy of plan.policies) {
        const name = `demo ${model}/${plan.preset} ${policy} ${ratio}`;
        const want = {
          name,
          model,
          preset: plan.preset,
          device: "cpu",
          budgetRatio: ratio,
          policy,
          costModel: "analytic",
          steps: plan.steps,
          seed: plan.seed,
        };
        const have = existing.get(name);
        const same = have &&
          (Object.keys(want) as (keyof typeof want)[]).every((k) => have[k] === want[k]);
        const cfg = same ? have : await api(lab, "POST", "/configurations", want) as ConfigItem;
        const run = await api(lab, "POST", `/configurations/${cfg.id}/runs`) as { id: string };
        experiments.push({ model, policy, ratio, runId: run.id });
      }
    }
  }
  const onAbort = async () => {
    for (const e of experiments) await lab.store.cancelRun(e.runId).catch(() => {});
  };
  signal?.addEventListener("abort", onAbort, { once: true });

  const t0 = Date.now();
  const total = experiments.length;
  const rows = new Map<string, DemoRow>();
  let spentMs = 0;
  try {
    while (rows.size < total) {
      let current: { label: string; message: string } | null = null;
      let runningSince: number | null = null;
      for (const e of experiments) {
        if (rows.has(e.runId)) continue;
        const run = await lab.store.getRun(e.runId);
        if (!run) throw new Error(`run ${e.runId} vanished from the database`);
        if (run.status === "running" && current === null) {
          current = {
            label: label(e.model, e.policy, e.ratio),
            message: run.progress?.message ?? "starting",
          };
          runningSince = run.startedAt;
        }
        if (run.status === "queued" || run.status === "running") continue;
        const res = run.status === "succeeded" ? await lab.store.getResults(run.id) : null;
        const row = toRow(e, run, res);
        rows.set(e.runId, row);
        if (row.seconds !== null) spentMs += row.seconds * 1000;
        progress.ended(row, rows.size, total, Date.now() - t0, eta(rows.size, total, spentMs));
      }
      const runningMs = runningSince === null ? 0 : Math.max(0, Date.now() - runningSince);
      const etaMs = rows.size === 0
        ? null
        : Math.max(0, eta(rows.size, total, spentMs)! - Math.min(runningMs, spentMs / rows.size));
      progress.update({ done: rows.size, total, current, elapsedMs: Date.now() - t0, etaMs });
      if (rows.size < total) await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    progress.finish();
  }
  return experiments.map((e) => rows.get(e.runId)!);
}

function eta(done: number, total: number, spentMs: number): number | null {
  return done === 0 ? null : (spentMs / done) * (total - done);
}

function toRow(
  e: { model: string; policy: string; ratio: number; runId: string },
  run: Run,
  res: RunResults | null,
): DemoRow {
  return {
    ...e,
    status: run.status,
    feasible: run.status === "succeeded" ? run.feasible : null,
    overhead: run.overhead,
    overheadLow: res?.stats.overheadLow ?? null,
    overheadHigh: res?.stats.overheadHigh ?? null,
    accountedOverhead: res?.stats.accountedOverhead ?? null,
    peakBytes: run.peakBytes,
    budgetBytes: run.budgetBytes,
    evictions: res?.stats.evictions ?? null,
    remats: res?.stats.remats ?? null,
    note: run.error ?? res?.note ?? null,
    seconds: run.startedAt !== null && run.finishedAt !== null
      ? (run.finishedAt - run.startedAt) / 1000
      : null,
  };
}

// ---------------------------------------------------------------------------------
// Display

const secs = (ms: number) => {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
};

function outcome(r: DemoRow): string {
  if (r.status !== "succeeded") return r.status;
  return r.feasible ? "ok" : "infeasible";
}

/** Progress on stderr: one rewritten status line on a terminal, plain lines otherwise. */
export function stderrProgress(tty: boolean = Deno.stderr.isTerminal()): DemoProgress {
  const line = new StatusLine({ ...stderrSink(), isTerminal: tty });
  let lastCurrent = "";
  return {
    update(s) {
      const eta = s.etaMs === null ? "ETA ?" : `ETA ${secs(s.etaMs)}`;
      const cur = s.current ? `${s.current.label}: ${s.current.message}` : "waiting for the worker";
      if (tty) {
        if (s.done === s.total) return;
        line.show(`[${s.done}/${s.total}] ${secs(s.elapsedMs)} elapsed, ${eta} | ${cur}`);
      } else if (s.current && s.current.label !== lastCurrent) {
        lastCurrent = s.current.label;
        line.print(
          `libra start: [${s.done + 1}/${s.total}] ${s.current.label} (${
            secs(s.elapsedMs)
          } elapsed, ${eta})`,
        );
      }
    },
    ended(r, done, total, elapsedMs, etaMs) {
      line.clear();
      const what = r.status !== "succeeded"
        ? `${r.status}: ${r.note ?? "no reason given"}`
        : r.feasible
        ? `overhead ${r.overhead?.toFixed(3) ?? "?"}x${
          r.overheadLow !== null && r.overheadHigh !== null
            ? ` [${r.overheadLow.toFixed(3)}, ${r.overheadHigh.toFixed(3)}]`
            : ""
        }`
        : "infeasible";
      line.print(
        `libra start: [${done}/${total}] ${label(r.model, r.policy, r.ratio)}: ${what} (${
          r.seconds?.toFixed(1) ?? "?"
        } s; ${secs(elapsedMs)} elapsed${etaMs === null ? "" : `, ETA ${secs(etaMs)}`})`,
      );
    },
    finish() {
      line.clear();
    },
  };
}

const kib = (b: number | null) => (b === null ? "-" : (b / 1024).toFixed(0));

/** The results table (one row per experiment, then the smallest feasible ratios). */
export function formatTable(rows: DemoRow[]): string {
  const head = [
    "model",
    "policy",
    "ratio",
    "result",
    "overhead",
    "95% interval",
    "accounted",
    "peak KiB",
    "budget KiB",
    "evictions",
    "remats",
    "run",
  ];
  const body = rows.map((r) => [
    r.model,
    r.policy,
    r.ratio.toFixed(2),
    outcome(r),
    r.feasible && r.overhead !== null ? `${r.overhead.toFixed(3)}x` : "-",
    r.feasible && r.overheadLow !== null && r.overheadHigh !== null
      ? `${r.overheadLow.toFixed(3)}-${r.overheadHigh.toFixed(3)}`
      : "-",
    r.feasible && r.accountedOverhead !== null ? `${r.accountedOverhead.toFixed(3)}x` : "-",
    kib(r.peakBytes),
    kib(r.budgetBytes),
    r.evictions === null ? "-" : String(r.evictions),
    r.remats === null ? "-" : String(r.remats),
    r.runId,
  ]);
  const right = [2, 4, 5, 6, 7, 8, 9, 10];
  const lines = renderTable(head, body, head.map((_, i) => right.includes(i))).split("\n");
  const smallest = new Map<string, number | null>();
  for (const r of rows) {
    const k = `${r.model} ${r.policy}`;
    const cur = smallest.get(k) ?? null;
    if (r.feasible) smallest.set(k, cur === null ? r.ratio : Math.min(cur, r.ratio));
    else if (!smallest.has(k)) smallest.set(k, null);
  }
  lines.push("", "smallest feasible ratio tried:");
  for (const [k, v] of smallest) lines.push(`  ${k}: ${v === null ? "none" : v.toFixed(2)}`);
  const failed = rows.filter((r) => r.status !== "succeeded");
  for (const r of failed) {
    lines.push(`${label(r.model, r.policy, r.ratio)} ${r.status}: ${r.note ?? "no reason given"}`);
  }
  // Why each budget was infeasible: the runtime's error says where the memory was.
  const infeasible = rows.filter((r) => r.status === "succeeded" && r.feasible === false);
  if (infeasible.length > 0) lines.push("", "why infeasible:");
  for (const r of infeasible) {
    lines.push(`  ${label(r.model, r.policy, r.ratio)}: ${r.note ?? "no reason given"}`);
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------
// The command

function list(v: string | undefined, what: string): string[] | undefined {
  if (v === undefined) return undefined;
  const xs = v.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (xs.length === 0) throw new Error(`--${what} needs at least one name, got "${v}"`);
  return xs;
}

function ratios(v: string | undefined): number[] | undefined {
  const xs = list(v, "ratios");
  return xs?.map((x) => {
    const r = Number(x);
    if (!(r > 0 && r <= 1)) throw new Error(`--ratios: each ratio must be in (0, 1], got "${x}"`);
    return r;
  });
}

/** Runs the demo, then serves until SIGINT or SIGTERM (or exits with `--no-serve`). */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      "no-serve": { type: "boolean", default: false },
      "skip-demo": { type: "boolean", default: false },
      quick: { type: "boolean", default: false },
      models: { type: "string" },
      ratios: { type: "string" },
      policies: { type: "string" },
      steps: { type: "string" },
      preset: { type: "string" },
      port: { type: "string" },
      host: { type: "string", default: "127.0.0.1" },
      "data-dir": { type: "string", default: ".libra" },
      db: { type: "string" },
      "database-url": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (values["no-serve"] && values["skip-demo"]) {
    throw new Error("--no-serve with --skip-demo would do nothing; drop one of them");
  }
  const base = values.quick ? QUICK_DEMO : DEFAULT_DEMO;
  const steps = values.steps === undefined
    ? base.steps
    : /^[0-9]{1,4}$/.test(values.steps)
    ? Number(values.steps)
    : NaN;
  if (!Number.isInteger(steps) || steps < 1 || steps > 100) {
    throw new Error(`--steps must be an integer in 1..100, got "${values.steps}"`);
  }
  const plan: DemoPlan = {
    models: list(values.models, "models") ?? [...base.models],
    preset: values.preset ?? base.preset,
    ratios: ratios(values.ratios) ?? [...base.ratios],
    policies: list(values.policies, "policies") ?? [...base.policies],
    steps,
    seed: base.seed,
  };
  const port = parsePort(values.port ?? Deno.env.get("LIBRA_PORT"), 8000);
  const dbUrl = values["database-url"] ?? Deno.env.get("LIBRA_DATABASE_URL");
  const serve = !values["no-serve"];

  let demoRunning = false;
  const log = (line: string) => {
    // While the demo runs, the progress display stands for the worker's own lines.
    if (demoRunning && line.startsWith("worker ")) return;
    console.log(line);
  };
  const executor = realExecutor({ prewarm: true });
  const labOptions = {
    dataDir: values["data-dir"],
    ...(values.db ? { dbPath: values.db } : {}),
    ...(dbUrl ? { databaseUrl: dbUrl } : {}),
    executor,
    worker: true,
    log,
  };
  let lab: Lab;
  let server: ServerHandle | null = null;
  try {
    if (serve) {
      server = await startServer({ ...labOptions, port, hostname: values.host });
      lab = server.lab;
    } else {
      lab = await openLab(labOptions);
    }
  } catch (e) {
    executor.close();
    if (e instanceof Deno.errors.AddrInUse) {
      throw new Error(
        `port ${port} on ${values.host} is already in use (another \`libra serve\` or \`start\`?); pass --port N or set LIBRA_PORT (0 picks a free port)`,
        { cause: e },
      );
    }
    throw e;
  }
  const stop = new AbortController();
  let resolveStopped: (sig: string) => void = () => {};
  const stopped = new Promise<string>((r) => (resolveStopped = r));
  const handlers = (["SIGINT", "SIGTERM"] as const).map((sig) => {
    const h = () => {
      stop.abort();
      resolveStopped(sig);
    };
    Deno.addSignalListener(sig, h);
    return [sig, h] as const;
  });
  try {
    const where = dbUrl
      ? `PostgreSQL ${redact(dbUrl)}`
      : `SQLite ${values.db ?? `${values["data-dir"]}/libra.db`}`;
    if (server) {
      console.log(
        `libra: serving the lab on ${server.url} (API under ${server.url}/api; ${where})`,
      );
    }
    let code = 0;
    if (!values["skip-demo"]) {
      const n = plan.models.length * plan.ratios.length * plan.policies.length;
      console.error(
        `libra start: demo sweep of ${n} runs (${plan.models.join(", ")} x ratios ${
          plan.ratios.join(", ")
        } x ${
          plan.policies.join(", ")
        }; ${plan.steps} steps each) on the cpu backend, into ${where}`,
      );
      const t0 = performance.now();
      demoRunning = true;
      let rows: DemoRow[];
      try {
        rows = await runDemo(lab, plan, stderrProgress(), stop.signal);
      } finally {
        demoRunning = false;
      }
      if (stop.signal.aborted) {
        console.error("libra start: interrupted; the demo runs not yet ended were canceled");
        return 130;
      }
      console.log(formatTable(rows));
      console.log(
        `libra start: demo of ${rows.length} runs finished in ${
          ((performance.now() - t0) / 1000).toFixed(1)
        } s`,
      );
      if (rows.some((r) => r.status !== "succeeded")) code = 1;
    }
    if (!server) return code;
    console.log(
      `libra: dashboard on ${server.url}/runs (compare policies: ${server.url}/compare); Ctrl-C stops`,
    );
    const sig = await stopped;
    console.log(`libra: ${sig}: shutting down`);
    return 0;
  } finally {
    for (const [sig, h] of handlers) Deno.removeSignalListener(sig, h);
    if (server) await server.close();
    else await lab.close();
    executor.close();
  }
}
