/**
 * The one trace-upload service behind `POST /api/traces` and the dashboard's
 * multipart `POST /traces`: it reads the body (bounded: at most `limit` bytes, counted
 * as they arrive), takes the options from the URL query (the API) or from the form's
 * fields (the dashboard), checks them and the trace, and queues the simulation.
 *
 * @module
 */

import { readBounded } from "./body.ts";
import { unknownTracePolicies } from "./catalog.ts";
import {
  DEFAULT_OVERHEAD_LIMIT,
  DEFAULT_RATIOS,
  DEFAULT_SIM_POLICIES,
  type FieldError,
  fieldErrors,
  TraceUploadQuery,
} from "./schemas.ts";
import type { Run, Store } from "./store.ts";

/**
 * Checks that `text` looks like a DTR-format trace: one JSON object with an
 * `INSTRUCTION` string per non-empty line. The runtime's importer checks the rest.
 */
export function checkTraceText(text: string): FieldError | null {
  const lines = text.split("\n");
  let seen = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      return {
        field: "trace",
        reason: `line ${i + 1}: not JSON (${JSON.stringify(line.slice(0, 60))})`,
      };
    }
    if (
      typeof v !== "object" || v === null ||
      typeof (v as Record<string, unknown>).INSTRUCTION !== "string"
    ) {
      return { field: "trace", reason: `line ${i + 1}: no "INSTRUCTION" field` };
    }
    seen++;
  }
  return seen === 0 ? { field: "trace", reason: "the trace is empty" } : null;
}

/** The name a trace is shown under when none is given: from its file name. */
export function traceNameOf(fileName: string | undefined): string {
  return (fileName ?? "trace").replace(/\.[a-z]+$/i, "").toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 60) || "trace";
}

/** The option fields of an upload (`name`, `policies`, `ratios`, `overheadLimit`), as text. */
export const TRACE_OPTION_FIELDS: readonly string[] = [
  "name",
  "policies",
  "ratios",
  "overheadLimit",
];

/** How {@linkcode acceptTraceUpload} reads an upload. */
export interface TraceUploadOptions {
  /** Most bytes the body may have (the trace limit). */
  limit: number;
  /**
   * Where the options are: `query`, the URL's query string (the API; the body is the
   * trace, or a multipart form with a file field `trace`); `form`, the multipart
   * form's fields beside the file (the dashboard; a multipart body is required).
   */
  optionsFrom: "query" | "form";
}

/** What an upload came to: the queued simulation, or why it was refused. */
export type TraceUploadOutcome =
  | { ok: true; run: Run }
  | { ok: false; issues: FieldError[]; fileName: string | null };

/**
 * Reads and checks a trace upload from `req` and queues its simulation in `store`.
 * Throws `BodyTooLargeError` (nothing read past the limit) when the body is larger
 * than `opts.limit`. Option fields are named `query.<field>` when they come from the
 * query, `<field>` when they come from the form; problems of the trace, `trace`.
 */
export async function acceptTraceUpload(
  store: Store,
  req: Request,
  opts: TraceUploadOptions,
): Promise<TraceUploadOutcome> {
  const bytes = await readBounded(req, opts.limit);
  const type = req.headers.get("content-type") ?? "";
  const multipart = /^multipart\/form-data/i.test(type);
  let form: FormData | null = null;
  if (multipart) {
    try {
      form = await new Response(bytes, { headers: { "content-type": type } }).formData();
    } catch (e) {
      const reason = `not a readable multipart form (${e instanceof Error ? e.message : e})`;
      return { ok: false, issues: [{ field: "body", reason }], fileName: null };
    }
  }
  const fields: Record<string, string> = {};
  const prefix = opts.optionsFrom === "query" ? "query." : "";
  if (opts.optionsFrom === "query") {
    for (const [k, v] of new URL(req.url).searchParams) if (!(k in fields)) fields[k] = v;
  } else {
    for (const k of TRACE_OPTION_FIELDS) {
      const v = form?.get(k);
      if (typeof v === "string" && v.trim()) fields[k] = v.trim();
    }
  }
  const q = TraceUploadQuery.safeParse(fields);
  const file = form?.get("trace");
  const fileName = file instanceof File ? file.name : null;
  if (!q.success) return { ok: false, issues: fieldErrors(q.error, prefix), fileName };
  const unknown = unknownTracePolicies(q.data.policies ?? []).map((e) => ({
    ...e,
    field: prefix + e.field.replace(/^query\./, ""),
  }));
  if (unknown.length) return { ok: false, issues: unknown, fileName };
  let text: string;
  if (form !== null || opts.optionsFrom === "form") {
    if (!(file instanceof File) || file.size === 0) {
      const reason = "choose a trace file (attach it as the file field 'trace')";
      return { ok: false, issues: [{ field: "trace", reason }], fileName };
    }
    text = await file.text();
  } else text = new TextDecoder().decode(bytes);
  const bad = checkTraceText(text);
  if (bad) return { ok: false, issues: [bad], fileName };
  const run = await store.createSimulation({
    kind: "simulate",
    name: q.data.name ?? traceNameOf(fileName ?? undefined),
    policies: q.data.policies ?? [...DEFAULT_SIM_POLICIES],
    ratios: q.data.ratios ?? [...DEFAULT_RATIOS],
    overheadLimit: q.data.overheadLimit ?? DEFAULT_OVERHEAD_LIMIT,
  }, text);
  return { ok: true, run };
}
