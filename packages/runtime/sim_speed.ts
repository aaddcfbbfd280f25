/**
 * The simulator's speed benchmark: for each log (the shared DTR logs when
 * `../shared/traces/` is there, and a generated LSTM-like log of ~48k lines,
 * the size of the published LSTM log), the parse time and, per policy, the
 * replay times of the budget-free baseline and at ratios 0.5 and 0.3 with the
 * fast replayer (what `libra simulate` runs), plus the whole-process figure the
 * published simulator was timed on (parse + baseline + replays at 0.5 and 0.3).
 * Times are CPU time of this process (user + system, ms), which a busy machine
 * inflates less than wall time; each figure is the median of `--runs` runs.
 *
 * Run: `deno run -A packages/runtime/sim_speed.ts [--runs 3] [--policies dtr-eq,dtr,...]`
 * (`--help` prints the options).
 *
 * @module
 */

import { cpuUsage } from "node:process";
import { parseArgs } from "node:util";
import { compileTrace, FAST_POLICIES, fastReplay } from "./_sim_core.ts";
import { lstmLikeTrace } from "./_synth_trace.ts";
import { parseTrace } from "./trace.ts";
import { median } from "@libra/util/stats";

const cpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};

/** One row of the benchmark. */
export interface SpeedRow {
  log: string;
  lines: number;
  policy: string;
  parseMs: number;
  baselineMs: number;
  halfMs: number;
  thirdMs: number;
  /** parse + baseline + 0.5 + 0.3. */
  wholeMs: number;
  outcome: string;
}

/** Measures one log under each policy. */
export function measure(
  log: string,
  text: string,
  policies: readonly string[],
  runs: number,
): SpeedRow[] {
  const lines = text.split("\n").filter((l) => l.trim() !== "").length;
  const rows: SpeedRow[] = [];
  for (const policy of policies) {
    const parse: number[] = [], base: number[] = [], half: number[] = [], third: number[] = [];
    let outcome = "";
    for (let k = 0; k < runs; k++) {
      let t0 = cpuMs();
      const trace = parseTrace(text, log);
      const c = compileTrace(trace);
      parse.push(cpuMs() - t0);
      t0 = cpuMs();
      const b = fastReplay(c, { budgetBytes: Infinity, policy, overheadLimit: Infinity });
      base.push(cpuMs() - t0);
      const out: string[] = [];
      for (const [ratio, into] of [[0.5, half], [0.3, third]] as const) {
        t0 = cpuMs();
        const r = fastReplay(c, {
          budgetBytes: Math.floor(ratio * b.peakBytes),
          policy,
          overheadLimit: 2,
        });
        into.push(cpuMs() - t0);
        out.push(r.feasible ? r.overhead.toFixed(3) : r.reason === "thrashing" ? "thrash" : "OOM");
      }
      outcome = out.join("/");
    }
    const row = {
      log,
      lines,
      policy,
      parseMs: median(parse),
      baselineMs: median(base),
      halfMs: median(half),
      thirdMs: median(third),
      wholeMs: 0,
      outcome,
    };
    row.wholeMs = row.parseMs + row.baselineMs + row.halfMs + row.thirdMs;
    rows.push(row);
  }
  return rows;
}

/**
 * The published simulator's whole-process times on the lead's machine (parse +
 * replays at 0.5 and 0.3, h_DTR^eq), ms, by log name.
 */
export const PUBLISHED_MS: Readonly<Record<string, number>> = {
  "resnet32-56.log": 400,
  "lstm-like-48k": 9900,
};

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      runs: { type: "string", default: "3" },
      policies: { type: "string", default: [...FAST_POLICIES].join(",") },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(
      `usage: deno run -A packages/runtime/sim_speed.ts [--runs N] [--policies P,...]

  --runs N        runs per figure, the median is printed (default 3)
  --policies P,.. policies to time (default ${[...FAST_POLICIES].join(",")})

Prints per log (the shared DTR logs in ../shared/traces/ when present, and a generated
LSTM-like log of ~48k lines) and policy: the CPU ms of parsing and compiling, of the
budget-free baseline, of the replays at 0.5 and 0.3 of its peak, their sum, how many
times faster that is than the published simulator's whole-process time where known,
and the overheads at 0.5 and 0.3.`,
    );
    Deno.exit(0);
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) {
    throw new RangeError(`sim_speed: --runs must be a positive integer, not "${values.runs}"`);
  }
  const policies = values.policies.split(",");
  for (const p of policies) {
    if (!FAST_POLICIES.has(p)) {
      throw new RangeError(
        `sim_speed: unknown policy "${p}" (one of ${[...FAST_POLICIES].join(", ")})`,
      );
    }
  }
  const logs: [string, string][] = [];
  for (const name of ["resnet32-56.log", "unet-6.log", "unroll_gan-512.log"]) {
    try {
      logs.push([
        name,
        await Deno.readTextFile(new URL(`../../../shared/traces/${name}`, import.meta.url)),
      ]);
    } catch {
      console.error(`sim_speed: ../shared/traces/${name} is absent; skipping it`);
    }
  }
  logs.push(["lstm-like-48k", lstmLikeTrace({ steps: 148, layers: 3 })]);
  console.log(
    "log                 lines   policy     parse ms  baseline ms  replay 0.5 ms  replay 0.3 ms  whole ms  (vs published)  0.5/0.3",
  );
  for (const [name, text] of logs) {
    for (const r of measure(name, text, policies, runs)) {
      const pub = PUBLISHED_MS[name];
      console.log(
        [
          r.log.padEnd(18),
          String(r.lines).padStart(6),
          r.policy.padEnd(9),
          r.parseMs.toFixed(1).padStart(9),
          r.baselineMs.toFixed(1).padStart(12),
          r.halfMs.toFixed(1).padStart(14),
          r.thirdMs.toFixed(1).padStart(14),
          r.wholeMs.toFixed(1).padStart(9),
          (pub !== undefined ? `${(pub / r.wholeMs).toFixed(1)}x faster` : "").padStart(15),
          r.outcome,
        ].join("  "),
      );
    }
  }
}
