/**
 * Plain-text tables for terminals and logs.
 *
 * @module
 */

/**
 * Lays out rows under a header and a dashed rule, columns two spaces apart;
 * `alignRight[i]` right-aligns column `i` (numbers). Trailing blanks are trimmed.
 *
 * @example
 * ```ts
 * import { renderTable } from "@libra/util/table";
 * const t = renderTable(["model", "ms"], [["gpt", "12.5"], ["resnet", "3.0"]], [false, true]);
 * if (t.split("\n")[2] !== "gpt     12.5") throw new Error("example: layout");
 * ```
 */
export function renderTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  alignRight: readonly boolean[] = [],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (alignRight[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}
