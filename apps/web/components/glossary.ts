/**
 * Human names, units and explanations of the statistics runs report, so that pages
 * show "median step time under the budget: 12.3 ms" with a tooltip saying what it
 * means, instead of "budgetStepMs". Keys not listed are split from camelCase and get
 * their unit from their suffix.
 *
 * @module
 */

import { formatBytes, formatNumber } from "./format.ts";

/** How a value is shown. */
export type StatUnit = "count" | "bytes" | "ms" | "ratio" | "times" | "percent";

/** One entry of the glossary. */
export interface GlossaryEntry {
  /** Short label. */
  label: string;
  /** Unit. */
  unit: StatUnit;
  /** What it means (the tooltip). */
  help: string;
  /** Timings of the budgeted phase: not measured when the run did not fit. */
  underBudget?: boolean;
}

/** The glossary, by statistic key. */
export const GLOSSARY: Record<string, GlossaryEntry> = {
  feasible: {
    label: "fits the budget",
    unit: "count",
    help: "Whether every training step completed without exceeding the memory budget.",
  },
  "infeasible because": {
    label: "infeasible because",
    unit: "count",
    help:
      "Why the budget was infeasible: out of memory (a step did not fit) or thrashing (recomputation and stalls passed the thrash limit).",
  },
  "thrash limit": {
    label: "thrash limit",
    unit: "times",
    help:
      "The overhead X at which the budgeted run stops, infeasible for thrashing: once recomputation plus stalls pass (X - 1) times its budget-free compute.",
  },
  overhead: {
    label: "overhead",
    unit: "times",
    help:
      "Median step time under the budget divided by the median step time without a budget (1.0 = no slowdown).",
  },
  "budget ratio": {
    label: "budget ratio",
    unit: "ratio",
    help: "The memory budget as a fraction of the peak memory of the same step without a budget.",
  },
  budget: { label: "budget", unit: "bytes", help: "The memory budget in bytes." },
  "budget-free peak": {
    label: "peak without a budget",
    unit: "bytes",
    help: "Peak memory of one training step run without any budget.",
  },
  "peak under budget": {
    label: "peak under the budget",
    unit: "bytes",
    help: "Peak memory reached while training under the budget (at most the budget).",
  },
  duration: {
    label: "wall time",
    unit: "ms",
    help: "From the moment a worker started the run to its end, all phases included.",
  },
  calls: {
    label: "kernel calls",
    unit: "count",
    help: "Operations executed under the budget, re-materializations included.",
  },
  evictions: {
    label: "evictions",
    unit: "count",
    help: "Tensors removed from memory to stay under the budget (drops and swap-outs).",
  },
  drops: {
    label: "drops",
    unit: "count",
    help: "Evictions that freed a tensor, to be recomputed if needed again.",
  },
  dropBytes: { label: "bytes dropped", unit: "bytes", help: "Bytes freed by drops." },
  eagerDrops: {
    label: "eager drops",
    unit: "count",
    help: "Tensors freed as soon as they were no longer needed, before any memory pressure.",
  },
  swapOuts: {
    label: "swap-outs",
    unit: "count",
    help: "Evictions that copied a tensor to host memory.",
  },
  swapOutBytes: { label: "bytes swapped out", unit: "bytes", help: "Bytes copied to host." },
  swapIns: {
    label: "swap-ins",
    unit: "count",
    help: "Swapped-out tensors copied back when needed.",
  },
  swapInBytes: { label: "bytes swapped in", unit: "bytes", help: "Bytes copied back from host." },
  swapBytes: { label: "bytes swapped", unit: "bytes", help: "Bytes moved to and from host." },
  remats: {
    label: "re-materializations",
    unit: "count",
    help: "Dropped tensors recomputed because an operation needed them again.",
  },
  rematBytes: { label: "bytes recomputed", unit: "bytes", help: "Bytes of recomputed tensors." },
  recomputeMs: {
    label: "recompute time",
    unit: "ms",
    help: "Time spent recomputing dropped tensors.",
    underBudget: true,
  },
  swapStallMs: {
    label: "swap stall time",
    unit: "ms",
    help: "Time operations waited for swaps to finish.",
    underBudget: true,
  },
  bookkeepingMs: {
    label: "bookkeeping time",
    unit: "ms",
    help:
      "Time spent choosing what to evict and keeping the cost estimates up to date (sampled: about one search in sixteen timed, each counted for the searches it stands for).",
    underBudget: true,
  },
  dispatchMs: {
    label: "dispatch time",
    unit: "ms",
    help:
      "The runtime's own time in kernel calls beyond the bookkeeping: argument checks, lineage, pool upkeep and re-materialization (sampled: one call in sixteen timed).",
    underBudget: true,
  },
  policyMs: {
    label: "policy time",
    unit: "ms",
    help:
      "Time the eviction policy spent choosing victims (sampled: about one search in sixteen timed).",
    underBudget: true,
  },
  kernelMs: {
    label: "kernel time",
    unit: "ms",
    help: "Time spent in the operations themselves.",
    underBudget: true,
  },
  addedKernelMs: {
    label: "added kernel time",
    unit: "ms",
    help:
      "Of the kernel time, the kernels the runtime added: recomputations and copies of weights before in-place updates.",
    underBudget: true,
  },
  collections: {
    label: "lineage collections",
    unit: "count",
    help:
      "Passes that free the lineage nothing can need again (at each step's end, and when releases pile up); each walks every value the runtime tracks.",
    underBudget: true,
  },
  copies: {
    label: "copy-on-write copies",
    unit: "count",
    help:
      "Weights copied before an in-place update because values computed from the old weights may still be recomputed (none at a budget of at least the budget-free peak).",
    underBudget: true,
  },
  baselineMs: {
    label: "time without a budget",
    unit: "ms",
    help: "Total time of the measured steps without a budget.",
  },
  budgetMs: {
    label: "time under the budget",
    unit: "ms",
    help: "Total time of the measured steps under the budget.",
    underBudget: true,
  },
  baselineStepMs: {
    label: "median step without a budget",
    unit: "ms",
    help: "Median time of one training step without a budget.",
  },
  budgetStepMs: {
    label: "median step under the budget",
    unit: "ms",
    help: "Median time of one training step under the budget.",
    underBudget: true,
  },
  baselineComputeMs: {
    label: "compute time of the trace",
    unit: "ms",
    help: "Sum of the operation times the trace records (the replay's time without a budget).",
  },
  steps: { label: "training steps", unit: "count", help: "Steps measured under the budget." },
  repeat: {
    label: "repeats",
    unit: "count",
    help: "How often the bench repeated the measurement.",
  },
  overheadMin: {
    label: "lowest overhead",
    unit: "times",
    help: "Smallest overhead over the bench's repeats.",
  },
  overheadMax: {
    label: "highest overhead",
    unit: "times",
    help: "Largest overhead over the bench's repeats.",
  },
  overheadLow: {
    label: "overhead, interval low",
    unit: "times",
    help:
      "Lower end of the confidence interval of the overhead's median over the interleaved pairs of steps.",
  },
  overheadHigh: {
    label: "overhead, interval high",
    unit: "times",
    help:
      "Upper end of the confidence interval of the overhead's median over the interleaved pairs of steps.",
  },
  overheadConfidence: {
    label: "interval confidence",
    unit: "percent",
    help: "How often an interval made this way holds the true median (its coverage).",
  },
  cpuOverhead: {
    label: "CPU-time overhead",
    unit: "times",
    help: "The same ratio measured in process CPU time instead of wall time.",
  },
  cpuOverheadLow: {
    label: "CPU-time overhead, interval low",
    unit: "times",
    help: "Lower end of the CPU-time overhead's confidence interval.",
  },
  cpuOverheadHigh: {
    label: "CPU-time overhead, interval high",
    unit: "times",
    help: "Upper end of the CPU-time overhead's confidence interval.",
  },
  accountedOverhead: {
    label: "accounted overhead",
    unit: "times",
    help:
      "The overhead the runtime accounts for itself: per measured pair, (kernel + recompute + swap stall + bookkeeping + dispatch time) / kernel time without a budget, and the median over the pairs (as the measured overhead is a median).",
  },
  measuredPairs: {
    label: "measured pairs",
    unit: "count",
    help: "Pairs of steps, one without and one under the budget, measured alternately.",
  },
  warmupSteps: {
    label: "warm-up steps",
    unit: "count",
    help:
      "Steps run before measuring (first allocations, kernel set-up, and enough runtime calls for JavaScript to compile its hot paths; the last two under the budget, so that its paths compile too), not counted.",
  },
  planSteps: {
    label: "planned steps",
    unit: "count",
    help: "Actions in the planner's schedule for one training step.",
  },
  planApplied: {
    label: "plan actions applied",
    unit: "count",
    help: "Scheduled actions the runtime carried out.",
  },
  planSkipped: {
    label: "plan actions skipped",
    unit: "count",
    help: "Scheduled actions that did not apply (their tensor was not there).",
  },
  planMismatchedSteps: {
    label: "steps off the plan",
    unit: "count",
    help: "Training steps whose operations differed from the recorded trace the plan was made for.",
  },
};

/** `budgetStepMs` -> `budget step`; `evictions[dtr@0.5]` -> `evictions, dtr at ratio 0.5`. */
export function humanize(key: string): string {
  const m = key.match(/^(\w+)\[([^@\]]+)@([^\]]+)\]$/);
  if (m) return `${entryFor(m[1]!).label}, ${m[2]} at ratio ${m[3]}`;
  return key.replace(/(Ms|Bytes)$/, "").replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
}

/** The entry of `key`, or one made from its name. */
export function entryFor(key: string): GlossaryEntry {
  const known = GLOSSARY[key];
  if (known) return known;
  const m = key.match(/^(\w+)\[([^@\]]+)@([^\]]+)\]$/);
  if (m) {
    const base = entryFor(m[1]!);
    return { ...base, label: humanize(key), help: `${base.help} (${m[2]} at ratio ${m[3]})` };
  }
  const unit: StatUnit = /Bytes$|bytes/.test(key) ? "bytes" : /Ms$/.test(key) ? "ms" : "count";
  return { label: humanize(key), unit, help: `${humanize(key)} (as the run reported it)` };
}

/** A value in its unit; `null`/NaN as a dash. */
export function formatStat(v: number | null | undefined, unit: StatUnit): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  switch (unit) {
    case "bytes":
      return formatBytes(v);
    case "ms":
      return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${formatNumber(v, v < 10 ? 2 : 1)} ms`;
    case "ratio":
      return formatNumber(v, 3);
    case "times":
      return `${formatNumber(v, 3)}×`;
    case "percent":
      return `${formatNumber(100 * v, 1)} %`;
    default:
      return Number.isInteger(v) ? v.toLocaleString("en-US") : formatNumber(v);
  }
}
