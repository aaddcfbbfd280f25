/**
 * CSV and JSON export of the tables the pages show. A table marked
 * `data-export="name"` can be downloaded from its page's URL with
 * `?export=name&format=csv|json` (the same filters, so the same rows): the server
 * renders the page and converts that table. Cells give their raw value in
 * `data-value` where the page formats it (`1.200×` exports as `1.2`).
 *
 * @module
 */

import type { MiddlewareHandler } from "hono";
import { parseHTML } from "linkedom";
import type { VNode } from "preact";

/** One exported table. */
export interface ExportedTable {
  /** Column names. */
  columns: string[];
  /** Rows, one value per column (numbers where the cell's raw value is one). */
  rows: (string | number | null)[][];
}

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

function cellValue(cell: Element): string | number | null {
  const raw = cell.getAttribute("data-value");
  const text = raw ?? (cell.textContent ?? "").trim();
  if (raw !== null) {
    if (raw === "") return null;
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw;
  }
  return text;
}

/** Reads `table[data-export=name]` from a page's HTML, or null when the page has none. */
export function readTable(html: string, name: string): ExportedTable | null {
  const { document } = parseHTML(html);
  const table = document.querySelector(`table[data-export="${name}"]`);
  if (!table) return null;
  const head = [...table.querySelectorAll("thead th")].map((th) =>
    (th.getAttribute("data-column") ?? th.textContent ?? "").trim()
  );
  const columns = head.length
    ? head
    : (table.getAttribute("data-columns") ?? "").split(",").filter((c) => c);
  const rows = [...table.querySelectorAll("tbody tr")].map((tr) =>
    [...tr.children].filter((c) => !c.hasAttribute("data-no-export")).map(cellValue)
  );
  const kept = head.length
    ? [...table.querySelectorAll("thead th")].map((th, i) => [th, i] as const).filter(([th]) =>
      !th.hasAttribute("data-no-export")
    ).map(([, i]) => columns[i]!)
    : columns;
  return { columns: kept, rows };
}

/** Names of the exportable tables in a page's HTML. */
export function tableNames(html: string): string[] {
  return [...html.matchAll(/data-export="([^"]+)"/g)].map((m) => m[1]!);
}

function csvField(v: string | number | null): string {
  if (v === null) return "";
  const s = String(v);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** The table as CSV (RFC 4180, CRLF line ends, a header row). */
export function toCsv(t: ExportedTable): string {
  return [t.columns, ...t.rows].map((r) => r.map(csvField).join(",")).join("\r\n") + "\r\n";
}

/** The table as JSON objects keyed by column name. */
export function toJson(t: ExportedTable): Record<string, string | number | null>[] {
  return t.rows.map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i] ?? null])));
}

/** Middleware: answers `?export=name&format=csv|json` with that table of the page. */
export function tableExport(): MiddlewareHandler {
  return async (c, next) => {
    const name = c.req.query("export");
    if (name === undefined || c.req.method !== "GET" || c.req.path.startsWith("/api")) {
      return next();
    }
    const format = c.req.query("format") ?? "csv";
    if (!NAME.test(name) || (format !== "csv" && format !== "json")) {
      return c.json({
        error: `export=${JSON.stringify(name)}&format=${
          JSON.stringify(format)
        }: name a table (lower-case letters, digits, '-') and format csv or json`,
      }, 400);
    }
    await next();
    if (c.res.status !== 200 || !(c.res.headers.get("content-type") ?? "").includes("text/html")) {
      return;
    }
    const html = await c.res.text();
    const t = readTable(html, name);
    if (!t) {
      c.res = c.json({
        error: `no table "${name}" on ${c.req.path}; this page exports: ${
          tableNames(html).join(", ") || "none"
        }`,
      }, 404);
      return;
    }
    const file = `${c.req.path.replace(/^\/+|\/+$/g, "").replace(/[^a-z0-9_-]+/gi, "-")}-${name}`;
    c.res = new Response(
      format === "csv" ? toCsv(t) : JSON.stringify(toJson(t), null, 2) + "\n",
      {
        headers: {
          "Content-Type": format === "csv" ? "text/csv; charset=utf-8" : "application/json",
          "Content-Disposition": `attachment; filename="${file}.${format}"`,
        },
      },
    );
  };
}

/** Download links for the table `name` of the page at `url` (same filters). */
export function ExportLinks(p: { url: string; name: string }): VNode {
  const link = (format: string) => {
    const u = new URL(p.url);
    u.searchParams.set("export", p.name);
    u.searchParams.set("format", format);
    u.hash = "";
    return u.pathname + u.search;
  };
  return (
    <p class="export" data-export-links={p.name}>
      Export this table: <a href={link("csv")} download>CSV</a> ·{" "}
      <a href={link("json")} download>JSON</a>
    </p>
  );
}
