/**
 * `libra run`: trains a model of the zoo under a memory budget and compares it
 * with a budget-free run of the same steps (see `@libra/train`).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { PLANNER_NAMES, POLICY_NAMES } from "@libra/evict";
import { MODEL_NAMES } from "@libra/nn";
import { runTraining, type RunTrainingResult } from "@libra/train/run-training";

/** One-line description for `--help`. */
export const summary = "train a model under a memory budget and compare with no budget";

const HELP =
  `Usage: deno task libra run --model M --budget-ratio R [--preset tiny] [--policy P] [--steps N]
                           [--device cpu|cuda] [--seed S] [--json] [--quiet]

Trains a model of @libra/nn (SGD with momentum, synthetic data) under the
re-materialization runtime: first without a budget (its peak sets the budget
and its wall time the baseline), then under budget = R x that peak. Losses are
bitwise the same; overhead = wall time under the budget / budget-free wall time.

Options:
  --model M          ${MODEL_NAMES.join(", ")} (required)
  --preset NAME      model preset; default tiny
  --policy P         ${POLICY_NAMES.join(", ")} (append +swap for swap-aware),
                     or a planner: ${PLANNER_NAMES.join(", ")}; default dtr-eq
  --budget-ratio R   budget as a fraction of the budget-free peak, in (0, 1] (required)
  --steps N          training steps; default 3
  --device D         cpu (default) or cuda
  --seed S           seed of the model, data and policy; default 0
  --overhead-limit X thrash limit (default 2.0): the budgeted run stops, infeasible for
                     the reason "thrashing", once recomputation passes (X-1) x its compute
  --json             print { baselinePeakBytes, budgetBytes, peakBytes, overhead, losses,
                     baselineLosses, stats } as one JSON object
  --quiet            no progress on stderr`;

/** The object printed with `--json` (exactly the fields of issue 4). */
export function toJson(r: RunTrainingResult): Record<string, unknown> {
  return {
    baselinePeakBytes: r.baselinePeakBytes,
    budgetBytes: r.budgetBytes,
    peakBytes: r.peakBytes,
    overhead: r.overhead,
    losses: r.losses,
    baselineLosses: r.baselineLosses,
    stats: r.stats,
  };
}

function formatText(r: RunTrainingResult, policy: string): string {
  const s = r.stats;
  const same = r.losses.length === r.baselineLosses.length &&
    r.losses.every((l, i) => Object.is(l, r.baselineLosses[i]));
  const lines = [
    `policy ${policy}: budget ${r.budgetBytes} bytes of a ${r.baselinePeakBytes}-byte budget-free peak`,
    `peak ${r.peakBytes} bytes; overhead ${r.overhead.toFixed(3)} (${r.timeMs.toFixed(1)} ms vs ${
      r.baselineTimeMs.toFixed(1)
    } ms)`,
    `evictions ${s.evictions} (drops ${s.drops}, swaps ${s.swapOuts}), re-materializations ${s.remats}, bookkeeping ${
      (s.bookkeepingNs / 1e6).toFixed(2)
    } ms`,
    `losses ${r.losses.map((l) => l.toFixed(6)).join(" ")} (${
      same ? "bitwise equal to" : "DIFFERENT from"
    } the budget-free run)`,
  ];
  if (r.plan) {
    lines.push(
      `plan: ${r.plan.steps} steps, ${r.plan.applied} applied, ${r.plan.skipped} skipped live`,
    );
    if (r.plan.stats !== undefined) lines.push(`plan statistics: ${JSON.stringify(r.plan.stats)}`);
  }
  return lines.join("\n");
}

/** Runs the command; returns the exit code. */
export function main(args: string[]): number {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        model: { type: "string" },
        preset: { type: "string", default: "tiny" },
        policy: { type: "string", default: "dtr-eq" },
        "budget-ratio": { type: "string" },
        steps: { type: "string", default: "3" },
        device: { type: "string", default: "cpu" },
        seed: { type: "string", default: "0" },
        "overhead-limit": { type: "string", default: "2" },
        json: { type: "boolean", default: false },
        quiet: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (e) {
    console.error(`libra run: ${(e as Error).message} (see --help)`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const fail = (msg: string, code = 2) => {
    console.error(`libra run: ${msg}`);
    return code;
  };
  if (!values.model) return fail("--model M is required (see --help)");
  if (values["budget-ratio"] === undefined) {
    return fail("--budget-ratio R is required (see --help)");
  }
  const ratio = Number(values["budget-ratio"]);
  if (!(ratio > 0 && ratio <= 1)) {
    return fail(`--budget-ratio must be a number in (0, 1], got "${values["budget-ratio"]}"`);
  }
  const steps = Number(values.steps);
  if (!Number.isInteger(steps) || steps < 1) {
    return fail(`--steps must be an integer >= 1, got "${values.steps}"`);
  }
  const seed = Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) {
    return fail(`--seed must be a non-negative integer, got "${values.seed}"`);
  }
  if (values.device !== "cpu" && values.device !== "cuda") {
    return fail(`--device must be cpu or cuda, got "${values.device}"`);
  }
  const limitText = values["overhead-limit"].trim();
  const overheadLimit = /^inf(inity)?$/i.test(limitText) ? Infinity : Number(limitText);
  if (limitText === "" || !(overheadLimit >= 1)) {
    return fail(`--overhead-limit must be a number >= 1 or inf, got "${values["overhead-limit"]}"`);
  }
  const enc = new TextEncoder();
  try {
    const r = runTraining({
      overheadLimit,
      model: values.model,
      preset: values.preset,
      policy: values.policy,
      budgetRatio: ratio,
      steps,
      device: values.device,
      seed,
      ...(values.quiet
        ? {}
        : { onProgress: (m: string) => Deno.stderr.writeSync(enc.encode(`libra run: ${m}\n`)) }),
    });
    console.log(values.json ? JSON.stringify(toJson(r)) : formatText(r, values.policy));
    return 0;
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
    return fail(msg, e instanceof RangeError ? 2 : 1);
  }
}
