/**
 * `deno task bench`: the benchmark suite. Sweeps budget ratios and eviction
 * policies over live training steps and simulated replays, then writes a table
 * on stdout, `OUT/results.json` (validated against `schema.ts`),
 * `OUT/schema.json` and SVG plots, runs the side-by-side micro-benchmarks, and
 * optionally uploads the results. `--help` lists the options.
 *
 * @module
 */

import {
  type BenchOptions,
  helpText,
  parseOptions,
  SHARED_TRACES_DIR,
  UsageError,
} from "./options.ts";
import type { Engine, RunSettings } from "./engine.ts";
import { Progress, type ProgressSink, stderrSink } from "./progress.ts";
import { runSuite } from "./runner.ts";
import {
  type BenchReport,
  type MicroJson,
  reportJsonSchema,
  SCHEMA_ID,
  validateReport,
} from "./schema.ts";
import { environment } from "./environment.ts";
import { renderReport } from "./table.ts";
import { memoryPlot, overheadPlot, slug } from "./plots.ts";
import {
  checkUploadAccess,
  resolveToken,
  resultLinks,
  toUploadBody,
  uploadReport,
  type UploadToken,
} from "./upload.ts";

/** Everything `main` can be given instead of the real thing (tests use this). */
export interface MainDeps {
  /** Creates the engine; defaults to the one built on the @libra packages. */
  engine?: (options: BenchOptions) => Promise<Engine>;
  /** Runs the micro-benchmarks; defaults to `micro_suite.ts`. */
  micro?: (options: BenchOptions, engine: Engine) => Promise<MicroJson[]>;
  /** Where progress goes. */
  progress?: ProgressSink;
  /** Where the stdout text goes. */
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** Trace defaults when --traces is absent. */
  traceDefaults?: () => string[];
  /** `--upload`: how to reach the API and where the token comes from (tests). */
  upload?: { fetch?: typeof fetch; token?: () => Promise<UploadToken> };
}

/**
 * Checks names against what the engine offers. A name given on the command
 * line that the engine lacks is a usage error (exit 2); a default name it lacks
 * is dropped and reported in `skipped`.
 */
export function resolveNames(
  options: BenchOptions,
  engine: Engine,
): { options: BenchOptions; skipped: { what: string; reason: string }[] } {
  const skipped: { what: string; reason: string }[] = [];
  const pick = (
    what: "policies" | "models",
    wanted: readonly string[],
    offered: readonly string[],
  ) => {
    if (offered.length === 0) return [...wanted];
    const missing = wanted.filter((x) => !offered.includes(x));
    if (missing.length > 0 && options.given[what]) {
      const noun = what === "policies" ? "policy" : "model";
      throw new UsageError(
        `--${what}: unknown ${noun} "${missing[0]}" (available: ${offered.join(", ")})`,
      );
    }
    for (const m of missing) {
      skipped.push({
        what: `${what === "policies" ? "policy" : "model"} ${m}`,
        reason: "not offered by the installed packages",
      });
    }
    return wanted.filter((x) => offered.includes(x));
  };
  const policies = pick("policies", options.policies, engine.policies());
  const models = pick("models", options.models, engine.models());
  if (!options.skip.includes("live") || !options.skip.includes("simulated")) {
    for (const m of models) {
      const known = engine.presets(m);
      const bad = options.presets.find((p) => known.length > 0 && !known.includes(p));
      if (bad !== undefined) {
        throw new UsageError(
          `--presets: model "${m}" has no preset "${bad}" (presets: ${known.join(", ")})`,
        );
      }
    }
  }
  return { options: { ...options, policies, models }, skipped };
}

/** Runs the suite with `args`; resolves to the exit status. */
export async function main(args: readonly string[], deps: MainDeps = {}): Promise<number> {
  const stdout = deps.stdout ?? ((t: string) => console.log(t));
  const stderr = deps.stderr ?? ((t: string) => console.error(t));
  let options: BenchOptions;
  let engine: Engine;
  let nameSkips: { what: string; reason: string }[] = [];
  try {
    options = deps.traceDefaults ? parseOptions(args, deps.traceDefaults) : parseOptions(args);
    if (options.help) {
      stdout(helpText());
      return 0;
    }
    engine = deps.engine
      ? await deps.engine(options)
      : await (await import("./_libra_engine.ts")).createLibraEngine(options);
    const resolved = resolveNames(options, engine);
    options = resolved.options;
    nameSkips = resolved.skipped;
    if (
      !options.given.traces && options.traces.length === 0 && !options.skip.includes("simulated")
    ) {
      nameSkips.push({
        what: "imported traces",
        reason: `no ${SHARED_TRACES_DIR}/*.log found (give trace files with --traces)`,
      });
    }
  } catch (e) {
    if (e instanceof UsageError) {
      stderr(`bench: ${e.message}`);
      return 2;
    }
    throw e;
  }

  // --upload: check the token against the API before spending time on the suite
  let upload: UploadToken | null = null;
  const uploadFetch = deps.upload?.fetch ?? fetch;
  if (options.upload !== null) {
    try {
      upload = await (deps.upload?.token ?? (() => resolveToken()))();
      await checkUploadAccess(options.upload, upload.token, uploadFetch);
      stdout(`Upload: ${options.upload} accepts the token (from ${upload.source}).`);
    } catch (e) {
      stderr(`bench: ${(e as Error).message}; nothing was run`);
      return 2;
    }
  }

  const started = Date.now();
  const t0 = performance.now();
  const progress = new Progress(0, deps.progress ?? stderrSink());
  // The micro-benchmarks first, on a fresh heap: after the suite (live steps and replays
  // that leave a large heap behind) their rows moved by microseconds from run to run, as
  // the collections of what the suite left landed in one side's rounds or the other's
  // (the oldest-first row read 2136 and -834 ns added in two runs, 375-603 alone).
  let micro: MicroJson[] = [];
  if (!options.skip.includes("micro")) {
    progress.start("micro-benchmarks");
    const run = deps.micro ?? (await import("./micro_suite.ts")).runMicro;
    micro = await run(options, engine);
  }
  const suite = await runSuite(options, engine, progress);
  progress.finish();

  const settings: RunSettings = {
    seed: options.seed,
    steps: options.steps,
    device: options.device,
    costModel: options.costModel,
    timeLimitMs: options.timeLimitMs,
    timeline: false,
  };
  const report: BenchReport = {
    schema: SCHEMA_ID,
    createdAt: new Date(started).toISOString(),
    durationMs: performance.now() - t0,
    args: [...args],
    options: {
      models: [...options.models],
      presets: [...options.presets],
      policies: [...options.policies],
      ratios: [...options.ratios],
      device: options.device,
      costModel: options.costModel,
      timeLimitMs: options.timeLimitMs,
      traces: [...options.traces],
      steps: options.steps,
      repeat: options.repeat,
      quick: options.quick,
      seed: options.seed,
      skip: [...options.skip],
    },
    environment: await environment(engine.device(settings), options.seed),
    workloads: suite.workloads,
    results: suite.results,
    summary: suite.summary,
    timelines: suite.timelines,
    micro,
    skipped: [...nameSkips, ...suite.skipped],
  };
  validateReport(report);

  await Deno.mkdir(options.out, { recursive: true });
  const files = [`${options.out}/results.json`, `${options.out}/schema.json`];
  await Deno.writeTextFile(files[0]!, JSON.stringify(report, null, 2) + "\n");
  await Deno.writeTextFile(files[1]!, JSON.stringify(reportJsonSchema(), null, 2) + "\n");
  if (!options.skip.includes("plots")) files.push(...await writePlots(report, options.out));

  stdout(renderReport(report));
  stdout(
    `\nWrote ${files.length} files to ${options.out}/: ${
      files.map((f) => f.slice(options.out.length + 1)).join(", ")
    }`,
  );

  if (options.given.traces && options.traces.length > 0 && !options.skip.includes("simulated")) {
    const written = await compareTraces(options, stdout);
    if (written.length > 0) stdout(`Wrote ${written.join(", ")}`);
  }

  let status = 0;
  if (suite.failures.length > 0) {
    stderr(`bench: ${suite.failures.length} run(s) failed:\n  ${suite.failures.join("\n  ")}`);
    status = 1;
  }
  if (options.upload !== null) {
    try {
      const r = await uploadReport(options.upload, report, upload!.token, uploadFetch);
      const id = (r.body as { uploadId?: string }).uploadId ?? "?";
      stdout(
        `Uploaded ${report.results.length} results to ${options.upload} (upload ${id}). See them at:\n  ${
          resultLinks(options.upload, toUploadBody(report)).join("\n  ")
        }`,
      );
    } catch (e) {
      stderr(`bench: ${(e as Error).message}`);
      status = 1;
    }
  }
  return status;
}

/**
 * With `--traces`: the planners against the published heuristics on each
 * trace, device memory only and with host memory (`trace_compare.ts`), as
 * tables on stdout and overhead plots in `OUT/compare_*.svg`; returns the paths.
 */
export async function compareTraces(
  options: BenchOptions,
  stdout: (text: string) => void,
): Promise<string[]> {
  const { compareTrace, compareSummaries, COMPARE_RATIOS, renderCompare } = await import(
    "./trace_compare.ts"
  );
  const { readTrace } = await import("@libra/runtime");
  const { traceLabel } = await import("./runner.ts");
  const ratios = options.given.ratios ? options.ratios : COMPARE_RATIOS;
  const files: string[] = [];
  stdout("\nPlanners against the published heuristics (overhead = 1 + extra compute):");
  for (const path of options.traces) {
    const trace = await readTrace(path);
    for (const mode of ["device", "host"] as const) {
      const t = compareTrace(traceLabel(path), trace, mode, {
        ratios,
        checkmateFrees: options.checkmateFrees ?? false,
      });
      stdout("\n" + renderCompare(t));
      if (!options.skip.includes("plots")) {
        const f = `${options.out}/compare_${slug(`${t.trace}_${mode}`)}.svg`;
        await Deno.writeTextFile(f, overheadPlot(`${t.trace} (${mode})`, compareSummaries(t)));
        files.push(f);
      }
    }
  }
  return files;
}

/** Writes the overhead plot of every workload and the memory plot of every timeline; returns the paths. */
export async function writePlots(report: BenchReport, out: string): Promise<string[]> {
  const files: string[] = [];
  for (const w of report.workloads) {
    if (!report.summary.policies.some((s) => s.workload === w.id)) continue;
    const path = `${out}/overhead_${slug(w.id)}.svg`;
    await Deno.writeTextFile(path, overheadPlot(w.id, report.summary.policies));
    files.push(path);
  }
  for (const t of report.timelines) {
    const peak = report.workloads.find((w) => w.id === t.workload)?.baselinePeakBytes;
    const path = `${out}/memory_${slug(t.workload)}_${slug(t.policy)}_${t.ratio}.svg`;
    await Deno.writeTextFile(path, memoryPlot(t, peak));
    files.push(path);
  }
  return files;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
