/**
 * Posts a report to the lab API (`--upload URL`), authenticated with the bearer
 * token in `LIBRA_API_TOKEN`, or else the one the server saved in `.libra/api-token`.
 * `bench --upload` checks the token with {@linkcode checkUploadAccess} before it runs
 * the suite, and prints links to the uploaded results ({@linkcode resultLinks}).
 *
 * @module
 */

import type { BenchReport } from "./schema.ts";

/**
 * One measurement as the lab API's `POST /api/bench` takes it (`BenchResult` in
 * `apps/api/schemas.ts`; the API owns that schema, this mirrors it).
 */
export interface UploadMeasurement {
  kind: "live" | "simulated";
  model: string;
  preset: string;
  policy: string;
  ratio: number;
  feasible: boolean;
  overhead: number | null;
  overheadMin?: number | null;
  overheadMax?: number | null;
  /** Why an infeasible result was infeasible (the API knows `out of memory` and `thrashing`). */
  reason?: "out of memory" | "thrashing" | null;
  budgetBytes?: number;
  baselinePeakBytes?: number;
  peakBytes?: number;
  evictions?: number;
  remats?: number;
  swapBytes?: number;
  bookkeepingMs?: number;
  steps?: number;
  repeat?: number;
  seed?: number;
  device?: "cpu" | "cuda" | "meta";
  trace?: string;
  memory?: [number, number][];
}

/** The body of `POST /api/bench` (`BenchUpload` in `apps/api/schemas.ts`). */
export interface BenchUploadBody {
  suite: string;
  createdAt: string;
  commit?: string;
  machine: Record<string, unknown>;
  results: UploadMeasurement[];
}

/** A name the API accepts (lower-case letters, digits, '.', '_', '-'; at most 64 characters). */
export function apiName(s: string): string {
  const n = s.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 64);
  return n === "" ? "unnamed" : n;
}

/** Converts a report into the API's upload body: one result per experiment, medians with min/max. */
export function toUploadBody(report: BenchReport): BenchUploadBody {
  const workloads = new Map(report.workloads.map((w) => [w.id, w]));
  const results: UploadMeasurement[] = report.results.map((r) => {
    const w = workloads.get(r.workload)!;
    const timeline = report.timelines.find((t) =>
      t.workload === r.workload && t.policy === r.policy && t.ratio === r.ratio
    );
    const device = w.kind === "simulated"
      ? "meta"
      : report.options.device === "cuda"
      ? "cuda"
      : "cpu";
    return {
      kind: r.kind,
      model: apiName(w.model),
      preset: apiName(w.preset ?? "trace"),
      policy: apiName(r.policy),
      ratio: r.ratio,
      feasible: r.feasible,
      overhead: r.feasible ? r.overhead!.median : null,
      overheadMin: r.overhead?.min ?? null,
      overheadMax: r.overhead?.max ?? null,
      // A run past the time limit was thrashing as far as the lab is concerned.
      reason: r.feasible
        ? null
        : r.reason === "thrashing" || r.reason === "time limit"
        ? "thrashing"
        : r.reason === "out of memory"
        ? "out of memory"
        : null,
      budgetBytes: r.budgetBytes,
      baselinePeakBytes: Math.round(w.baselinePeakBytes),
      peakBytes: Math.round(r.peakBytes.median),
      evictions: Math.round(r.evictions.median),
      remats: Math.round(r.remats.median),
      swapBytes: Math.round(r.swapBytes.median),
      bookkeepingMs: r.bookkeepingMs.median,
      ...(w.steps !== null ? { steps: w.steps } : {}),
      repeat: r.repeats,
      seed: report.options.seed,
      device,
      ...(w.trace !== null ? { trace: w.trace.slice(-200) } : {}),
      ...(timeline
        ? { memory: timeline.points.map((p) => [p.call, p.bytes] as [number, number]) }
        : {}),
    };
  });
  const e = report.environment;
  return {
    suite: report.options.quick ? "quick" : "default",
    createdAt: report.createdAt,
    ...(e.commit ? { commit: e.commit.sha } : {}),
    machine: {
      hostname: e.hostname.slice(0, 200),
      os: e.os.slice(0, 200),
      cpu: `${e.cpuModel} x${e.cpus}`.slice(0, 200),
      ...(e.device.kind === "cuda" ? { gpu: e.device.name.slice(0, 200) } : {}),
      deno: e.deno,
      arch: e.arch,
      memoryBytes: e.memoryBytes,
      dirty: e.commit?.dirty ?? null,
      packages: e.packages,
    },
    results,
  };
}

/** Path of the API's benchmark ingestion endpoint, relative to the base URL. */
export const UPLOAD_PATH = "api/bench";

/** What the API answered. */
export interface UploadResponse {
  readonly status: number;
  readonly body: unknown;
}

/** The endpoint URL for a base URL given on the command line (with or without a trailing slash). */
export function uploadUrl(base: string): string {
  return new URL(UPLOAD_PATH, base.endsWith("/") ? base : `${base}/`).href;
}

/** Where the lab server keeps the write token it generated (its default data folder). */
export const TOKEN_FILE = ".libra/api-token";

/** A token and where it came from. */
export interface UploadToken {
  /** The bearer token. */
  token: string;
  /** `LIBRA_API_TOKEN` or the file it was read from. */
  source: string;
}

/**
 * The token to upload with: `LIBRA_API_TOKEN` when set, else the first line of
 * `file` (default {@link TOKEN_FILE}). Throws saying where it looked when neither has one.
 */
export async function resolveToken(
  env: string | undefined = Deno.env.get("LIBRA_API_TOKEN"),
  file: string = TOKEN_FILE,
): Promise<UploadToken> {
  if (env) return { token: env.trim(), source: "LIBRA_API_TOKEN" };
  let saved = "";
  try {
    saved = (await Deno.readTextFile(file)).split("\n")[0]!.trim();
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      throw new Error(`upload: cannot read ${file}: ${(e as Error).message}`);
    }
  }
  if (saved) return { token: saved, source: file };
  throw new Error(
    `upload: no API token: LIBRA_API_TOKEN is not set and ${file} has none (the lab server writes its token there on first start; export LIBRA_API_TOKEN or run from the server's folder)`,
  );
}

async function post(
  url: string,
  token: string,
  body: string,
  fetchFn: typeof fetch,
): Promise<{ res: Response; body: unknown }> {
  let res: Response;
  try {
    res = await fetchFn(url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body,
    });
  } catch (e) {
    throw new Error(
      `upload: cannot reach ${url} (${(e as Error).message.split("\n")[0]}); is the API running?`,
    );
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: keep the text for the error message.
  }
  return { res, body: parsed };
}

const detail = (body: unknown) =>
  typeof body === "string" ? body.slice(0, 300) : JSON.stringify(body).slice(0, 300);

/**
 * Checks, before the suite runs, that `base` is a lab API that takes `token` for
 * uploads: it posts an empty upload, which the API refuses for the token (401) or,
 * having accepted the token, for the empty body (400) — so nothing is stored.
 * Throws saying what went wrong.
 */
export async function checkUploadAccess(
  base: string,
  token: string,
  fetchFn: typeof fetch = fetch,
): Promise<void> {
  const url = uploadUrl(base);
  const { res, body } = await post(url, token, JSON.stringify({ results: [] }), fetchFn);
  if (res.status === 400) return; // the token was accepted; the empty upload was not
  if (res.status === 401 || res.status === 403) {
    throw new Error(
      `upload: ${url} refused the token (${res.status}): ${
        detail(body)
      }; use the server's write token`,
    );
  }
  throw new Error(
    `upload: ${url} is not a lab API that takes uploads (an empty upload answered ${res.status} ${res.statusText}: ${
      detail(body)
    })`,
  );
}

/** Links to the uploaded results: the bench runs, and Compare for each uploaded model. */
export function resultLinks(base: string, body: BenchUploadBody): string[] {
  const root = base.endsWith("/") ? base : `${base}/`;
  const models = [...new Set(body.results.map((r) => `${r.model}/${r.preset}`))];
  return [
    new URL("runs?kind=bench", root).href,
    ...models.map((m) => new URL(`compare?model=${encodeURIComponent(m)}&source=live`, root).href),
  ];
}

/**
 * Posts `report` (converted by {@link toUploadBody}). Throws an error naming the URL, the status and the API's
 * message when the API refuses it, or when no token is found ({@link resolveToken}).
 */
export async function uploadReport(
  base: string,
  report: BenchReport,
  token?: string,
  fetchFn: typeof fetch = fetch,
): Promise<UploadResponse> {
  token ??= (await resolveToken()).token;
  const url = uploadUrl(base);
  const { res, body } = await post(url, token, JSON.stringify(toUploadBody(report)), fetchFn);
  if (!res.ok) {
    throw new Error(`upload: ${url} answered ${res.status} ${res.statusText}: ${detail(body)}`);
  }
  return { status: res.status, body };
}
