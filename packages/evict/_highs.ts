/**
 * The HiGHS LP/MIP solver (WebAssembly), loaded once when this module is
 * first imported, and a small LP-format writer.
 *
 * @module
 */

import loadHighsModule from "highs";
import type { LegacyHighs } from "highs";

// The package is CommonJS with an ES-module build; its default export is the loader.
const load = loadHighsModule as unknown as () => Promise<LegacyHighs>;

// Loaded where a planner can run (Deno). A browser bundle that imports the planner names
// through this package never plans, and must not fetch the WebAssembly file.
const loaded: LegacyHighs | undefined = "Deno" in globalThis ? await load() : undefined;

/** The loaded solver (`solve(lpText, options)` is synchronous). */
export function highs(): LegacyHighs {
  if (loaded === undefined) {
    throw new Error(
      "the HiGHS solver is not loaded in this environment (it loads under Deno only)",
    );
  }
  return loaded;
}

/** A linear expression: coefficient per variable name. */
export type Expr = [coef: number, name: string][];

/** Writes `expr` in LP format, a few terms per line. */
export function lpExpr(expr: Expr): string {
  if (expr.length === 0) return "0 x__zero";
  const parts: string[] = [];
  for (let i = 0; i < expr.length; i++) {
    const [c, v] = expr[i]!;
    const s = `${c < 0 ? "-" : i === 0 ? "" : "+"} ${fmt(Math.abs(c))} ${v}`;
    parts.push(i > 0 && i % 8 === 0 ? `\n ${s}` : s);
  }
  return parts.join(" ");
}

function fmt(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`LP coefficient ${x}`);
  return Number.isInteger(x) ? String(x) : x.toPrecision(15);
}

/** A linear program in LP format. */
export class LpModel {
  readonly #rows: string[] = [];
  readonly #binaries = new Set<string>();
  readonly #bounds = new Map<string, [number, number]>();
  objective: Expr = [];
  /** Adds `expr (<=|>=|=) rhs`. */
  row(expr: Expr, sense: "<=" | ">=" | "=", rhs: number): void {
    if (expr.length === 0) return;
    this.#rows.push(` r${this.#rows.length}: ${lpExpr(expr)} ${sense} ${fmt(rhs)}`);
  }
  /** Declares a 0/1 variable (continuous in [0, 1] when relaxed). */
  binary(name: string): void {
    this.#binaries.add(name);
    this.#bounds.set(name, [0, 1]);
  }
  /** LP text; `relax` drops integrality. */
  text(relax = false): string {
    const out = ["Minimize", ` obj: ${lpExpr(this.objective)}`, "Subject To"];
    out.push(...this.#rows);
    out.push("Bounds");
    for (const [v, [lo, hi]] of this.#bounds) out.push(` ${lo} <= ${v} <= ${hi}`);
    if (!relax && this.#binaries.size > 0) {
      out.push("General");
      const names = [...this.#binaries];
      for (let i = 0; i < names.length; i += 16) out.push(" " + names.slice(i, i + 16).join(" "));
    }
    out.push("End");
    return out.join("\n");
  }
}
