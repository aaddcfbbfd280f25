/**
 * Command-line options of `deno task bench`, parsed with `node:util` parseArgs.
 * Every bad value becomes a {@link UsageError} whose message is one line naming
 * the option, the value and what is accepted; `main.ts` prints it and exits 2.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { MODEL_NAMES } from "@libra/nn/zoo";

/**
 * Policies of the full suite: the dynamic policies and the static planners of
 * ARCHITECTURE.md (planners run on the simulated path; each dynamic policy also has
 * a swap-aware `NAME+swap` variant that can be asked for).
 */
export const DEFAULT_POLICIES: readonly string[] = [
  "dtr",
  "dtr-eq",
  "dtr-local",
  "msps",
  "lru",
  "largest",
  "random",
  "libra",
  "chen-sqrt",
];

/** Model families of the zoo: the `@libra/nn` registry's names. */
export const DEFAULT_MODELS: readonly string[] = [...MODEL_NAMES];

/** Parts of the suite that `--skip` can leave out. */
export const PARTS = ["live", "simulated", "micro", "plots"] as const;
/** A part of the suite. */
export type Part = typeof PARTS[number];

/** Default budget ratios of the full suite: 1.0, 0.9, ..., 0.1. */
export const DEFAULT_RATIOS: readonly number[] = [1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1];
/** Ratios of `--quick`. */
export const QUICK_RATIOS: readonly number[] = [1, 0.9, 0.8, 0.6, 0.4, 0.2];
/** Models of `--quick` (the smallest of the zoo). */
export const QUICK_MODELS: readonly string[] = ["mlp", "gpt"];
/** Policies of `--quick`. */
export const QUICK_POLICIES: readonly string[] = ["dtr-eq", "dtr-local", "lru", "libra"];

/** Where the shared DTR traces live, relative to the repository root. */
export const SHARED_TRACES_DIR = "../shared/traces";

/** Thrown for bad command-line values; the message is one line, fit to print as is. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** A run chosen for a memory-over-time plot: `policy@ratio`. */
export interface TimelineChoice {
  readonly policy: string;
  readonly ratio: number;
}

/** Fully resolved options of one suite run. */
export interface BenchOptions {
  readonly models: readonly string[];
  readonly presets: readonly string[];
  readonly policies: readonly string[];
  readonly ratios: readonly number[];
  readonly device: "cpu" | "cuda";
  /**
   * Cost model of live runs and of replays of recorded steps: `measured` kernel
   * times (the runtime's default) or `analytic` FLOP/byte costs, which make
   * eviction decisions independent of timing noise (reproducible counts).
   */
  readonly costModel: "measured" | "analytic";
  /** Imported traces to simulate (DTR format). */
  readonly traces: readonly string[];
  /** Wall-clock limit of one run (ms); a run past it counts as infeasible (thrashing). */
  readonly timeLimitMs: number;
  /** Measured steps per copy of a live measurement (after 2 warm-up steps). */
  readonly steps: number;
  /** Repeats per experiment. */
  readonly repeat: number;
  readonly out: string;
  readonly quick: boolean;
  /** Lab API base URL to post the results to, or null. */
  readonly upload: string | null;
  readonly seed: number;
  /** Thrash limit of budgeted runs and replays (`--overhead-limit`, default 2.0). */
  readonly overheadLimit?: number;
  /**
   * With `--traces`: `checkmate` frees values inside a stage (Checkmate's own
   * form; its optimum is then a bound from the LP relaxation, minutes more per ratio).
   */
  readonly checkmateFrees?: boolean;
  readonly skip: readonly Part[];
  /** Runs to plot memory over time for; empty = chosen automatically. */
  readonly timelines: readonly TimelineChoice[];
  readonly help: boolean;
  /** Which lists were given on the command line (defaults may be trimmed to what the packages offer). */
  readonly given: {
    readonly models: boolean;
    readonly policies: boolean;
    readonly traces: boolean;
    readonly ratios: boolean;
  };
}

interface OptionDoc {
  readonly name: string;
  readonly arg: string;
  readonly doc: string;
  readonly def: string;
}

const DOCS: readonly OptionDoc[] = [
  {
    name: "models",
    arg: "LIST",
    doc: "models of @libra/nn to train live (none: no live runs)",
    def: `${DEFAULT_MODELS.join(",")} (quick: ${QUICK_MODELS.join(",")})`,
  },
  { name: "presets", arg: "LIST", doc: "model presets", def: "tiny" },
  {
    name: "policies",
    arg: "LIST",
    doc: "eviction policies and planners of @libra/evict (NAME+swap: swap-aware variant)",
    def: `${DEFAULT_POLICIES.join(",")} (quick: ${QUICK_POLICIES.join(",")})`,
  },
  {
    name: "ratios",
    arg: "LIST",
    doc: "budget ratios in (0, 1]; items may be ranges FROM:TO:STEP",
    def: `${DEFAULT_RATIOS.join(",")} (quick: ${QUICK_RATIOS.join(",")})`,
  },
  { name: "device", arg: "cpu|cuda", doc: "backend of the live runs", def: "cpu" },
  {
    name: "cost-model",
    arg: "measured|analytic",
    doc:
      "costs live runs and replays of recorded steps decide with; measured kernel times vary run to run, so only analytic gives reproducible eviction counts",
    def: "analytic",
  },
  {
    name: "traces",
    arg: "FILE...",
    doc: "DTR-format traces to simulate (none: no imported traces)",
    def: `${SHARED_TRACES_DIR}/*.log when present`,
  },
  {
    name: "time-limit",
    arg: "SECONDS",
    doc: 'limit of one run; a run past it is reported infeasible ("time limit"), as thrashing',
    def: "60 (quick: 20)",
  },
  {
    name: "steps",
    arg: "N",
    doc:
      "measured steps per copy of a live measurement (after 2 warm-up steps, once the suite has warmed the process up; budget-free and budgeted steps interleaved; 6 give a 95% interval)",
    def: "6 (quick: 5)",
  },
  {
    name: "repeat",
    arg: "N",
    doc: "repeats per experiment (median, min and max are reported)",
    def: "3",
  },
  {
    name: "out",
    arg: "DIR",
    doc: "folder for results.json, schema.json and the SVG plots",
    def: "bench-out",
  },
  {
    name: "quick",
    arg: "",
    doc: "smoke suite that finishes in under 3 minutes on 2 CPU cores",
    def: "off",
  },
  {
    name: "upload",
    arg: "URL",
    doc: "post the results to the lab API at URL (token: LIBRA_API_TOKEN)",
    def: "off",
  },
  { name: "seed", arg: "N", doc: "seed of models, data and the random policy", def: "42" },
  {
    name: "overhead-limit",
    arg: "X",
    doc: "thrash limit: a run past overhead X stops, infeasible (thrashing); inf: none",
    def: "2",
  },
  {
    name: "checkmate-frees",
    arg: "",
    doc:
      "with --traces: checkmate frees values inside a stage (its optimum row is the LP bound of that form; a few minutes more per ratio)",
    def: "off",
  },
  { name: "skip", arg: "LIST", doc: `parts to leave out: ${PARTS.join(",")}`, def: "none" },
  {
    name: "timelines",
    arg: "LIST",
    doc: "runs to plot memory over time for, as POLICY@RATIO",
    def: "first policy at its smallest feasible ratio and at 0.5 or the nearest ratio",
  },
  { name: "help", arg: "", doc: "show this help", def: "" },
];

/** The `--help` text: every option with its default. */
export function helpText(): string {
  const left = DOCS.map((d) => `  --${d.name}${d.arg ? " " + d.arg : ""}`);
  const width = Math.max(...left.map((l) => l.length));
  const lines = DOCS.map((d, i) =>
    `${left[i]!.padEnd(width)}  ${d.doc}${d.def ? ` [default: ${d.def}]` : ""}`
  );
  return [
    "deno task bench [options]: sweeps memory budgets and eviction policies on real models",
    "(live training steps) and on recorded or imported traces (simulated), and reports overhead,",
    "feasibility, evictions, re-materializations, swap bytes, bookkeeping time and peak memory.",
    "",
    "Options:",
    ...lines,
    "",
    "Outputs: a table on stdout, OUT/results.json (schema in OUT/schema.json), OUT/*.svg plots.",
    "Exit status: 0 done, 1 a run failed, 2 bad options.",
  ].join("\n");
}

function list(option: string, value: string): string[] {
  const items = value.split(",").map((s) => s.trim());
  if (items.some((s) => s === "")) {
    throw new UsageError(`--${option}: empty item in "${value}" (give a comma-separated list)`);
  }
  return items;
}

function positiveInt(option: string, value: string, max: number): number {
  if (!/^[0-9]+$/.test(value) || Number(value) < 1 || Number(value) > max) {
    throw new UsageError(`--${option}: expected an integer from 1 to ${max}, got "${value}"`);
  }
  return Number(value);
}

function ratio(option: string, text: string): number {
  const r = Number(text);
  if (text.trim() === "" || !Number.isFinite(r) || r <= 0 || r > 1) {
    throw new UsageError(`--${option}: budget ratios must be numbers in (0, 1], got "${text}"`);
  }
  return r;
}

/**
 * Parses a ratio list: `1,0.8,0.5` or ranges `1:0.1:0.1` (from, to, step; both
 * ends included), deduplicated and sorted descending.
 */
export function parseRatios(value: string, option = "ratios"): number[] {
  const out = new Set<number>();
  for (const item of list(option, value)) {
    const parts = item.split(":");
    if (parts.length === 1) {
      out.add(ratio(option, item));
      continue;
    }
    if (parts.length !== 3) {
      throw new UsageError(`--${option}: a range is FROM:TO:STEP, got "${item}"`);
    }
    const [from, to] = [ratio(option, parts[0]!), ratio(option, parts[1]!)];
    const step = Number(parts[2]);
    if (!Number.isFinite(step) || step <= 0) {
      throw new UsageError(`--${option}: range step must be a positive number, got "${parts[2]}"`);
    }
    const n = Math.floor(Math.abs(from - to) / step + 1e-9);
    if (n > 1000) {
      throw new UsageError(`--${option}: range "${item}" has ${n + 1} ratios (at most 1001)`);
    }
    const dir = to < from ? -1 : 1;
    // Rounded to 1e-9 so 1 - 3 * 0.1 prints as 0.7, not 0.7000000000000001.
    for (let i = 0; i <= n; i++) out.add(Math.round((from + dir * i * step) * 1e9) / 1e9);
  }
  return [...out].sort((a, b) => b - a);
}

/** Expands the default trace list: every `*.log` in the shared traces folder, when it exists. */
export function defaultTraces(dir: string = SHARED_TRACES_DIR): string[] {
  try {
    return [...Deno.readDirSync(dir)]
      .filter((e) => e.isFile && e.name.endsWith(".log"))
      .map((e) => `${dir}/${e.name}`)
      .sort();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
}

/**
 * Parses `args` into {@link BenchOptions}. Throws {@link UsageError} on any bad value.
 * `traceDefaults` supplies the traces used when `--traces` is absent (the shared ones).
 */
export function parseOptions(
  args: readonly string[],
  traceDefaults: () => string[] = defaultTraces,
): BenchOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: true,
      options: {
        models: { type: "string" },
        presets: { type: "string" },
        policies: { type: "string" },
        ratios: { type: "string" },
        device: { type: "string" },
        "cost-model": { type: "string" },
        traces: { type: "string", multiple: true },
        steps: { type: "string" },
        "time-limit": { type: "string" },
        repeat: { type: "string" },
        out: { type: "string" },
        quick: { type: "boolean" },
        upload: { type: "string" },
        seed: { type: "string" },
        "overhead-limit": { type: "string" },
        "checkmate-frees": { type: "boolean" },
        skip: { type: "string" },
        timelines: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (e) {
    // parseArgs messages are multi-line for some errors; keep the first line.
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0];
    throw new UsageError(`${msg} (see --help)`);
  }
  const v = parsed.values;
  const quick = v.quick ?? false;

  // `--traces a.log b.log` (what a shell glob expands to): the words after it
  // arrive as positionals; they are accepted only when --traces was given.
  if (parsed.positionals.length > 0 && v.traces === undefined) {
    throw new UsageError(
      `unexpected argument "${parsed.positionals[0]}" (options start with --; see --help)`,
    );
  }
  let traces: string[];
  if (v.traces === undefined) traces = traceDefaults();
  else {
    traces = [...v.traces.flatMap((t) => list("traces", t)), ...parsed.positionals];
    if (traces.length === 1 && traces[0] === "none") traces = [];
    for (const t of traces) {
      if (t === "none") throw new UsageError(`--traces: "none" cannot be combined with files`);
      try {
        if (!Deno.statSync(t).isFile) throw new UsageError(`--traces: "${t}" is not a file`);
      } catch (e) {
        if (e instanceof UsageError) throw e;
        throw new UsageError(
          `--traces: cannot read "${t}" (${(e as Error).message.split("\n")[0]})`,
        );
      }
    }
  }

  let models = v.models === undefined
    ? [...(quick ? QUICK_MODELS : DEFAULT_MODELS)]
    : list("models", v.models);
  if (models.length === 1 && models[0] === "none") models = [];
  const presets = v.presets === undefined ? ["tiny"] : list("presets", v.presets);
  const policies = v.policies === undefined
    ? [...(quick ? QUICK_POLICIES : DEFAULT_POLICIES)]
    : list("policies", v.policies);
  for (const p of policies) {
    if (!/^[a-z][a-z0-9-]*(\+swap)?$/.test(p)) {
      throw new UsageError(
        `--policies: "${p}" is not a policy name (known: ${DEFAULT_POLICIES.join(", ")})`,
      );
    }
  }
  const ratios = v.ratios === undefined
    ? [...(quick ? QUICK_RATIOS : DEFAULT_RATIOS)]
    : parseRatios(v.ratios);

  const device = v.device ?? "cpu";
  if (device !== "cpu" && device !== "cuda") {
    throw new UsageError(`--device: expected cpu or cuda, got "${device}"`);
  }
  const costModel = v["cost-model"] ?? "analytic";
  if (costModel !== "measured" && costModel !== "analytic") {
    throw new UsageError(`--cost-model: expected measured or analytic, got "${costModel}"`);
  }
  const steps = v.steps === undefined ? (quick ? 5 : 6) : positiveInt("steps", v.steps, 10_000);
  let timeLimitMs = quick ? 20_000 : 60_000;
  if (v["time-limit"] !== undefined) {
    const t = Number(v["time-limit"]);
    if (v["time-limit"].trim() === "" || !Number.isFinite(t) || t <= 0) {
      throw new UsageError(
        `--time-limit: expected a positive number of seconds, got "${v["time-limit"]}"`,
      );
    }
    timeLimitMs = t * 1000;
  }
  const repeat = v.repeat === undefined ? 3 : positiveInt("repeat", v.repeat, 1000);
  const out = v.out ?? "bench-out";
  if (out.trim() === "") throw new UsageError(`--out: expected a folder path, got an empty string`);

  let upload: string | null = null;
  if (v.upload !== undefined) {
    let url: URL;
    try {
      url = new URL(v.upload);
    } catch {
      throw new UsageError(`--upload: "${v.upload}" is not a URL (example: http://localhost:8000)`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new UsageError(`--upload: expected an http(s) URL, got "${v.upload}"`);
    }
    upload = v.upload;
  }

  let seed = 42;
  if (v.seed !== undefined) {
    if (!/^[0-9]+$/.test(v.seed) || !Number.isSafeInteger(Number(v.seed))) {
      throw new UsageError(`--seed: expected a non-negative integer, got "${v.seed}"`);
    }
    seed = Number(v.seed);
  }

  let overheadLimit = 2;
  const ol = v["overhead-limit"];
  if (ol !== undefined) {
    overheadLimit = /^inf(inity)?$/i.test(ol.trim()) ? Infinity : Number(ol);
    if (ol.trim() === "" || !(overheadLimit >= 1)) {
      throw new UsageError(`--overhead-limit: expected a number >= 1 or inf, got "${ol}"`);
    }
  }

  const skip: Part[] = [];
  if (v.skip !== undefined) {
    for (const s of list("skip", v.skip)) {
      if (!(PARTS as readonly string[]).includes(s)) {
        throw new UsageError(`--skip: unknown part "${s}" (parts: ${PARTS.join(", ")})`);
      }
      skip.push(s as Part);
    }
  }

  const timelines: TimelineChoice[] = [];
  if (v.timelines !== undefined) {
    for (const t of list("timelines", v.timelines)) {
      const at = t.lastIndexOf("@");
      if (at <= 0) throw new UsageError(`--timelines: expected POLICY@RATIO, got "${t}"`);
      timelines.push({ policy: t.slice(0, at), ratio: ratio("timelines", t.slice(at + 1)) });
    }
  }

  return {
    models,
    presets,
    policies,
    ratios,
    device,
    costModel,
    timeLimitMs,
    traces,
    steps,
    repeat,
    out,
    quick,
    upload,
    seed,
    overheadLimit,
    checkmateFrees: v["checkmate-frees"] ?? false,
    skip,
    timelines,
    help: v.help ?? false,
    given: {
      models: v.models !== undefined,
      policies: v.policies !== undefined,
      traces: v.traces !== undefined,
      ratios: v.ratios !== undefined,
    },
  };
}
