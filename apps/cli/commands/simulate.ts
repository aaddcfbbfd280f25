/**
 * `libra simulate`: replays a DTR-format trace under a policy at several
 * budget ratios on the meta backend and prints the overheads.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { POLICY_NAMES } from "@libra/evict";
import {
  DEFAULT_LINK,
  linkBandwidth,
  readTrace,
  simulateTrace,
  type SimulationReport,
} from "@libra/runtime";
import { checkPolicyName, isPlannerName, PLANNER_NAMES } from "@libra/evict";
import { plannerSimulation } from "@libra/train/simulate-plan";

/** One-line description for `--help`. */
export const summary = "replay a trace under a policy at budget ratios (the simulator)";

const HELP =
  `Usage: deno task libra simulate --trace FILE [--policy P] [--ratios 1,0.9,...] [--search full|sqrt]
                               [--overhead-limit X] [--link L] [--json]
       deno task libra simulate --list

Replays a DTR-format trace (one JSON object per line) under an eviction policy at
each budget ratio (fraction of the budget-free peak) and prints the overhead
(compute + recompute + swap stall) / compute.

Options:
  --trace FILE    the trace to replay (required)
  --policy P      ${POLICY_NAMES.join(", ")} (append +swap for swap-aware),
                  or a planner: ${PLANNER_NAMES.join(", ")}; default dtr-eq
  --ratios LIST   comma-separated ratios in (0, 1]; default 1,0.9,0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1
  --search MODE   candidate search: full (default) or sqrt
  --no-eager      do not evict unreferenced storages eagerly
  --overhead-limit X
                  thrash limit (default 2.0, as in the published DTR evaluation): a
                  replay whose recomputation plus stalls pass (X-1) x the budget-free
                  compute stops, infeasible for the reason "thrashing"; inf turns it off
  --link L        swaps run on their own copy stream over this link, overlapping
                  compute: pcie4 (25 GB/s), pcie5 (55, default), nvlink-c2c (450) or
                  a bandwidth in GB/s; compute waits only for a copy it needs
  --list          print every policy and planner name, one a line, and exit
  --json          print one JSON object instead of a table

Exit status: 0 done, 1 the trace is malformed or unreadable, 2 bad options or a
trace without any CALL or MUTATE (empty or header-only).`;

/** The JSON object printed with `--json` (exactly the fields of issue 4). */
export function toJson(report: SimulationReport): unknown {
  return {
    baseline: { peakBytes: report.baseline.peakBytes, computeNs: report.baseline.computeNs },
    results: report.results.map((r) => ({
      ratio: r.ratio,
      budgetBytes: r.budgetBytes,
      feasible: r.feasible,
      reason: r.feasible ? null : (r.reason ?? "out of memory"),
      overhead: r.overhead,
      evictions: r.evictions,
      remats: r.remats,
      bookkeepingMs: Math.round(r.bookkeepingMs * 1000) / 1000,
    })),
  };
}

function formatTable(report: SimulationReport, policy: string): string {
  const gb = (b: number) => (b / 1e9).toFixed(3);
  const lines = [
    `policy ${policy}; budget-free peak ${report.baseline.peakBytes} bytes (${
      gb(report.baseline.peakBytes)
    } GB), compute ${(report.baseline.computeNs / 1e6).toFixed(3)} ms`,
    "",
    "ratio  budget GB  feasible         overhead  evictions  remats  bookkeeping ms",
  ];
  for (const r of report.results) {
    lines.push(
      [
        r.ratio.toFixed(2).padStart(5),
        gb(r.budgetBytes).padStart(9),
        (r.feasible ? "yes" : `no (${r.reason ?? "out of memory"})`).padEnd(15),
        (r.overhead === null ? "-" : r.overhead.toFixed(4)).padStart(8),
        String(r.evictions).padStart(9),
        String(r.remats).padStart(6),
        r.bookkeepingMs.toFixed(2).padStart(14),
      ].join("  "),
    );
  }
  return lines.join("\n");
}

/** Runs the command; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        trace: { type: "string" },
        policy: { type: "string", default: "dtr-eq" },
        ratios: { type: "string", default: "1,0.9,0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1" },
        search: { type: "string", default: "full" },
        "no-eager": { type: "boolean", default: false },
        "overhead-limit": { type: "string", default: "2" },
        list: { type: "boolean", default: false },
        link: { type: "string", default: DEFAULT_LINK },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }));
  } catch (e) {
    console.error(`libra simulate: ${(e as Error).message} (see --help)`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (values.list) {
    for (const n of POLICY_NAMES) console.log(n);
    for (const n of POLICY_NAMES) console.log(`${n}+swap`);
    for (const n of PLANNER_NAMES) console.log(n);
    return 0;
  }
  const limitText = values["overhead-limit"].trim();
  const overheadLimit = /^inf(inity)?$/i.test(limitText) ? Infinity : Number(limitText);
  if (limitText === "" || !(overheadLimit >= 1)) {
    console.error(
      `libra simulate: --overhead-limit must be a number >= 1 or inf, got "${
        values["overhead-limit"]
      }"`,
    );
    return 2;
  }
  if (!values.trace) {
    console.error("libra simulate: --trace FILE is required (see --help)");
    return 2;
  }
  try {
    checkPolicyName(values.policy);
  } catch (e) {
    console.error(`libra simulate: ${(e as Error).message}`);
    return 2;
  }
  const ratios = values.ratios.split(",").map((s) => s.trim()).filter((s) => s !== "").map(Number);
  const bad = ratios.find((r) => !(r > 0 && r <= 1));
  if (ratios.length === 0 || bad !== undefined) {
    console.error(`libra simulate: --ratios must be numbers in (0, 1], got "${values.ratios}"`);
    return 2;
  }
  if (values.search !== "full" && values.search !== "sqrt") {
    console.error(`libra simulate: --search must be full or sqrt, got "${values.search}"`);
    return 2;
  }
  try {
    linkBandwidth(values.link);
  } catch (e) {
    console.error(`libra simulate: --link: ${(e as Error).message}`);
    return 2;
  }
  try {
    const trace = await readTrace(values.trace);
    if (!trace.events.some((e) => e.kind === "call" || e.kind === "mutate")) {
      console.error(
        `libra simulate: ${values.trace} has no CALL or MUTATE to replay (the trace is empty or header-only)`,
      );
      return 2;
    }
    const progress = Deno.stderr.isTerminal() || Deno.env.get("LIBRA_PROGRESS") === "1";
    const enc = new TextEncoder();
    const simulate = isPlannerName(values.policy)
      ? plannerSimulation(values.policy)
      : simulateTrace;
    const report = simulate(trace, {
      policy: values.policy,
      ratios,
      search: { mode: values.search },
      eagerEviction: !values["no-eager"],
      overheadLimit,
      link: values.link,
      onProgress: (done, total, row) => {
        if (progress) {
          Deno.stderr.writeSync(
            enc.encode(
              `\rsimulate ${values.policy}: ${done}/${total} ratio ${row.ratio} ${
                row.feasible
                  ? `overhead ${row.overhead!.toFixed(4)}`
                  : `infeasible (${row.reason ?? "out of memory"})`
              }${done === total ? "\n" : ""}`,
            ),
          );
        }
      },
    });
    console.log(values.json ? JSON.stringify(toJson(report)) : formatTable(report, values.policy));
    return 0;
  } catch (e) {
    console.error(`libra simulate: ${(e as Error).message}`);
    return 1;
  }
}
