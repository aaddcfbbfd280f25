/**
 * `libra sweep`: defines and launches a named sweep (models x presets x policies x
 * ratios x repeats) on a lab server through its API, follows its progress, and
 * prints where to see and compare the results.
 *
 * @module
 */

import { parseArgs } from "node:util";

/** One-line description for `--help`. */
export const summary = "launch a named sweep on the lab server and follow its progress";

const HELP =
  `Usage: deno task libra sweep --name NAME --models M,.. --policies P,.. --ratios R,.. [options]
       deno task libra sweep --status SWEEP_ID [--wait]
       deno task libra sweep --list

Queues one training run per model x preset x policy x budget ratio x repeat on the
lab server (deno task libra serve), as one named sweep that the dashboard's Compare
page filters by; repeats show there as intervals.

Options:
  --url URL          the lab server (default LIBRA_API_URL or http://127.0.0.1:8000)
  --name NAME        the sweep's name
  --models LIST      comma-separated models of the zoo
  --presets LIST     presets, each model with each (default tiny)
  --policies LIST    policies and planners
  --ratios LIST      budget ratios in (0, 1]
  --repeats N        runs per cell (default 1)
  --steps N          training steps per run (default 3)
  --device D         cpu (default) or cuda
  --cost-model M     measured (default) or analytic
  --seed N           seed of every run (default 0)
  --overhead-limit X thrash limit of every run (> 1, default 2.0): a run stops,
                     infeasible for the reason "thrashing", once recomputation passes
                     (X-1) x its compute
  --wait             follow the progress until every run has ended
  --json             print the sweep as JSON
The write token is LIBRA_API_TOKEN, or else the server's .libra/api-token.`;

/** What the command needs from the outside (tests replace it). */
export interface SweepDeps {
  fetch?: typeof fetch;
  stdout?: (line: string) => void;
  stderr?: (line: string) => void;
  /** Waits between progress polls. */
  sleep?: (ms: number) => Promise<void>;
  /** The write token (default: LIBRA_API_TOKEN, else .libra/api-token). */
  token?: () => Promise<string>;
}

interface SweepJson {
  id: string;
  name: string;
  spec: { models: string[]; presets: string[] };
  progress: Record<string, number> & { total: number; ended: number };
}

async function defaultToken(): Promise<string> {
  const env = Deno.env.get("LIBRA_API_TOKEN");
  if (env) return env.trim();
  try {
    const saved = (await Deno.readTextFile(".libra/api-token")).split("\n")[0]!.trim();
    if (saved) return saved;
  } catch { /* missing */ }
  throw new Error(
    "no API token: set LIBRA_API_TOKEN or run from the server's folder (.libra/api-token)",
  );
}

const list = (s: string | undefined) =>
  s === undefined ? undefined : s.split(",").map((x) => x.trim()).filter((x) => x);

function progressLine(s: SweepJson): string {
  const p = s.progress;
  const extra = ["running", "failed", "canceled"].filter((k) => p[k]).map((k) => `${p[k]} ${k}`);
  return `${s.id} ${s.name}: ${p.ended}/${p.total} ended${
    extra.length ? ` (${extra.join(", ")})` : ""
  }`;
}

/** Runs `libra sweep` with injectable I/O; resolves to the exit code. */
export async function sweepMain(args: string[], deps: SweepDeps = {}): Promise<number> {
  const out = deps.stdout ?? ((l: string) => console.log(l));
  const err = deps.stderr ?? ((l: string) => console.error(l));
  const fetchFn = deps.fetch ?? fetch;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let v;
  try {
    ({ values: v } = parseArgs({
      args,
      options: {
        url: { type: "string" },
        name: { type: "string" },
        models: { type: "string" },
        presets: { type: "string" },
        policies: { type: "string" },
        ratios: { type: "string" },
        repeats: { type: "string" },
        steps: { type: "string" },
        "overhead-limit": { type: "string" },
        device: { type: "string" },
        "cost-model": { type: "string" },
        seed: { type: "string" },
        status: { type: "string" },
        list: { type: "boolean" },
        wait: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (e) {
    err(`libra sweep: ${(e as Error).message} (see --help)`);
    return 2;
  }
  if (v.help) {
    out(HELP);
    return 0;
  }
  const base = (v.url ?? Deno.env.get("LIBRA_API_URL") ?? "http://127.0.0.1:8000").replace(
    /\/+$/,
    "",
  );
  const call = async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = {};
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      headers.Authorization = `Bearer ${await (deps.token ?? defaultToken)()}`;
    }
    let res: Response;
    try {
      res = await fetchFn(`${base}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (e) {
      throw new Error(
        `cannot reach ${base} (${(e as Error).message.split("\n")[0]}); is it running?`,
      );
    }
    const text = await res.text();
    let json: unknown = text;
    try {
      json = JSON.parse(text);
    } catch { /* keep the text */ }
    return { status: res.status, json };
  };
  const links = (s: SweepJson) => [
    `${base}/sweeps/${s.id}`,
    ...s.spec.models.flatMap((m) =>
      s.spec.presets.map((p) =>
        `${base}/compare?model=${encodeURIComponent(`${m}/${p}`)}&sweep=${s.id}`
      )
    ),
  ];
  try {
    if (v.list) {
      const r = await call("GET", "/api/sweeps");
      if (r.status !== 200) {
        throw new Error(`GET /api/sweeps answered ${r.status}: ${JSON.stringify(r.json)}`);
      }
      for (const s of (r.json as { items: SweepJson[] }).items) out(progressLine(s));
      return 0;
    }
    let sweep: SweepJson;
    if (v.status) {
      const r = await call("GET", `/api/sweeps/${encodeURIComponent(v.status)}`);
      if (r.status !== 200) {
        err(`libra sweep: ${(r.json as { error?: string }).error ?? `answer ${r.status}`}`);
        return r.status === 404 ? 2 : 1;
      }
      sweep = r.json as SweepJson;
    } else {
      const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));
      const body = Object.fromEntries(
        Object.entries({
          name: v.name,
          models: list(v.models),
          presets: list(v.presets),
          policies: list(v.policies),
          ratios: list(v.ratios)?.map(Number),
          repeats: num(v.repeats),
          steps: num(v.steps),
          device: v.device,
          costModel: v["cost-model"],
          seed: num(v.seed),
          overheadLimit: num(v["overhead-limit"]),
        }).filter(([, x]) => x !== undefined),
      );
      const r = await call("POST", "/api/sweeps", body);
      if (r.status === 400) {
        const issues = (r.json as { issues?: { field: string; reason: string }[] }).issues ?? [];
        err(
          `libra sweep: the server refused the sweep:\n${
            issues.map((i) =>
              `  --${
                i.field.replace(/\..*/, "").replace("costModel", "cost-model").replace(
                  "overheadLimit",
                  "overhead-limit",
                )
              }: ${i.reason}`
            )
              .join("\n")
          }`,
        );
        return 2;
      }
      if (r.status !== 201) {
        err(`libra sweep: POST /api/sweeps answered ${r.status}: ${JSON.stringify(r.json)}`);
        return 1;
      }
      sweep = r.json as SweepJson;
      out(`Queued sweep ${sweep.id} (${sweep.name}): ${sweep.progress.total} runs.`);
    }
    let last = "";
    while (true) {
      const line = progressLine(sweep);
      if (line !== last && !v.json) out(line);
      last = line;
      if (!v.wait || sweep.progress.ended >= sweep.progress.total) break;
      await sleep(1000);
      const r = await call("GET", `/api/sweeps/${sweep.id}`);
      if (r.status !== 200) throw new Error(`GET /api/sweeps/${sweep.id} answered ${r.status}`);
      sweep = r.json as SweepJson;
    }
    if (v.json) out(JSON.stringify(sweep, null, 2));
    else {
      out("See it at:");
      for (const l of links(sweep)) out(`  ${l}`);
    }
    const bad = (sweep.progress.failed ?? 0) + (sweep.progress.canceled ?? 0);
    return v.wait && bad > 0 ? 1 : 0;
  } catch (e) {
    err(`libra sweep: ${(e as Error).message}`);
    return 1;
  }
}

/** Runs the command. */
export function main(args: string[]): Promise<number> {
  return sweepMain(args);
}
