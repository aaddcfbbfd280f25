/**
 * The HiGHS LP/MIP solver (WebAssembly), loaded once when this module is
 * first imported, and a small LP-format writer.
 *
 * @module
 */

import loadHighsModule from "highs";
import type { Highs } from "highs";

// The package is CommonJS with an ES-module build; its default export is the loader.
const load = loadHighsModule as unknown as () => Promise<Highs>;

// Loaded where a planner can run (Deno). A browser bundle that imports the planner names
// through this package never plans, and must not fetch the WebAssembly file.
const loaded: Highs | undefined = "Deno" in globalThis ? await load() : undefined;

/** The loaded solver (`solve(lpText, options)` is synchronous). */
export function highs(): Highs {
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
    if (expr.length === 0) {
      // 0 <sense> rhs: always true, or a model error (silently dropping it hides infeasibility)
      const holds = sense === "<=" ? 0 <= rhs : sense === ">=" ? 0 >= rhs : rhs === 0;
      if (!holds) throw new Error(`LpModel: an empty row cannot satisfy 0 ${sense} ${rhs}`);
      return;
    }
    this.#rows.push(` r${this.#rows.length}: ${lpExpr(expr)} ${sense} ${fmt(rhs)}`);
  }
  /** Declares a 0/1 variable (continuous in [0, 1] when relaxed). */
  binary(name: string): void {
    this.#binaries.add(name);
    this.#bounds.set(name, [0, 1]);
  }
  /** Fixes a declared 0/1 variable at `value` (0 or 1). */
  fix(name: string, value: 0 | 1): void {
    if (!this.#binaries.has(name)) throw new Error(`LpModel: ${name} is not a 0/1 variable`);
    this.#bounds.set(name, [value, value]);
  }
  /** LP text; `relax` drops integrality. */
  text(relax = false): string {
    const out = ["Minimize", ` obj: ${lpExpr(this.objective)}`, "Subject To"];
    for (const r of this.#rows) out.push(r); // (a spread overflows the stack on large models)
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

/** What {@link solveModel} found. */
export interface ModelSolution {
  /** HiGHS's model status in words: `Optimal`, `Infeasible`, `Time limit reached`, ... */
  readonly status: string;
  /** True when a feasible solution is available (`value` reads it). */
  readonly hasSolution: boolean;
  /** Objective of that solution (NaN without one). */
  readonly objective: number;
  /**
   * Proven lower bound of the objective: the MIP dual bound, or the LP optimum
   * when relaxed and optimal (NaN when nothing was proven).
   */
  readonly bound: number;
  /** Value of a variable in the solution (0 for a name the model does not use). */
  value(name: string): number;
}

const STATUS: Record<number, string> = {
  0: "Not set",
  1: "Load error",
  2: "Model error",
  3: "Presolve error",
  4: "Solve error",
  5: "Postsolve error",
  6: "Empty",
  7: "Optimal",
  8: "Infeasible",
  9: "Primal infeasible or unbounded",
  10: "Unbounded",
  11: "Bound on objective reached",
  12: "Target for objective reached",
  13: "Time limit reached",
  14: "Iteration limit reached",
  15: "Interrupted",
  16: "Solution limit reached",
  17: "Memory limit reached",
  18: "Unknown",
};

/**
 * Solves `m` (as a MIP, or its LP relaxation with `relax`) with HiGHS's
 * persistent API, which reports the MIP dual bound where a time limit stops
 * the search.
 */
export function solveModel(
  m: LpModel,
  options: {
    relax?: boolean;
    timeLimitS?: number;
    mipRelGap?: number;
    /** HiGHS's LP method (`solver` option): `simplex` (default), `ipm` or `pdlp`. */
    method?: "simplex" | "ipm" | "pdlp";
    /** A MIP start: values of some variables (HiGHS completes and checks it). */
    start?: ReadonlyMap<string, number>;
  } = {},
): ModelSolution {
  const relax = options.relax ?? false;
  const model = highs().createModel({ format: "lp", data: m.text(relax) });
  try {
    model.options.set({
      output_flag: false,
      time_limit: options.timeLimitS ?? Infinity,
      ...(relax ? {} : { mip_rel_gap: options.mipRelGap ?? 1e-6 }),
      ...(options.method !== undefined ? { solver: options.method } : {}),
    });
    if (options.start !== undefined && options.start.size > 0) {
      const indices: number[] = [], vals: number[] = [];
      const n = model.getDimensions().numCols;
      for (let i = 0; i < n; i++) {
        const v = options.start.get(model.getColName(i));
        if (v !== undefined) {
          indices.push(i);
          vals.push(v);
        }
      }
      model.setSolution({ indices, values: vals });
    }
    model.run();
    const code = model.getModelStatus();
    const status = STATUS[code] ?? `status ${code}`;
    const info = (name: string): number => {
      try {
        return Number(model.info.get(name));
      } catch {
        return NaN;
      }
    };
    // primal_solution_status 2: a feasible solution is stored
    const hasSolution = info("primal_solution_status") === 2;
    const objective = hasSolution ? info("objective_function_value") : NaN;
    let bound = NaN;
    if (!relax) bound = info("mip_dual_bound");
    else if (code === 7) bound = objective;
    if (code === 7 && !Number.isFinite(bound)) bound = objective;
    const values = new Map<string, number>();
    if (hasSolution) {
      const col = model.getSolution().colValue;
      for (let i = 0; i < col.length; i++) {
        if (col[i] !== 0) values.set(model.getColName(i), col[i]!);
      }
    }
    return {
      status,
      hasSolution,
      objective,
      bound,
      value: (name) => values.get(name) ?? 0,
    };
  } finally {
    model.dispose();
  }
}
