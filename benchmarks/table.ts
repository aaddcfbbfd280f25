/**
 * The plain-text tables `deno task bench` prints on stdout.
 *
 * @module
 */

import type { BenchReport, MicroJson, SpreadJson } from "./schema.ts";
import { renderTable } from "@libra/util/table";

/** Bytes as a short human string (binary units). */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[u]}`;
}

/** A spread as `median [min-max]`, or just the median when all are equal. */
export function formatSpread(
  s: SpreadJson | null,
  digits: number,
  fmt?: (n: number) => string,
): string {
  if (s === null) return "-";
  const f = fmt ?? ((n: number) => n.toFixed(digits));
  return s.min === s.max ? f(s.median) : `${f(s.median)} [${f(s.min)}-${f(s.max)}]`;
}

/** Lays out rows under a header with right-aligned numeric columns (`@libra/util`). */
export { renderTable };

function microRow(m: MicroJson): string[] {
  const v = (x: number | null) => (x === null ? "-" : x >= 100 ? x.toFixed(0) : x.toPrecision(3));
  return [
    m.name,
    v(m.subjectValue),
    v(m.referenceValue),
    m.unit,
    m.ratio === null ? "skipped" : `${m.ratio.toFixed(3)}x`,
    m.note,
  ];
}

/**
 * Budget-free live steps shorter than this (ms) measure mostly the runtime's
 * own cost per kernel call and timer noise, not what a budget costs a model.
 */
export const SHORT_STEP_MS = 50;

/** Live workloads whose budget-free steps take under {@link SHORT_STEP_MS}: [id, ms a step]. */
function shortStepWorkloads(report: BenchReport): [string, number][] {
  const short: [string, number][] = [];
  for (const w of report.workloads) {
    if (w.kind !== "live" || w.baselineTimeMs === null || !w.steps) continue;
    // baselineTimeMs spans the `steps` budget-free steps of a measurement
    const ms = w.baselineTimeMs.median / w.steps;
    if (ms < SHORT_STEP_MS) short.push([w.id, ms]);
  }
  return short;
}

/**
 * The note under the workloads for live ones whose budget-free steps take
 * under {@link SHORT_STEP_MS} (the `tiny` presets), or null when none do.
 */
export function shortStepNote(report: BenchReport): string | null {
  const short = shortStepWorkloads(report).map(([id, ms]) => `${id} ${ms.toFixed(1)} ms`);
  if (short.length === 0) return null;
  return `note: live steps under ${SHORT_STEP_MS} ms a step (${short.join(", ")}): their ` +
    "overheads are mostly the runtime's own cost per kernel call (about 1 us warm, several us " +
    "after a kernel has flushed the caches) against kernels of a few us, and timer noise; " +
    "gpt and lstm small (`--models gpt,lstm --presets small`, 50-100 ms a step on 2 cores) " +
    "measure what a budget costs a model.";
}

/** Everything printed on stdout for a report. */
export function renderReport(report: BenchReport): string {
  const out: string[] = [];
  const e = report.environment;
  out.push(
    `libra bench (${
      report.options.quick ? "quick" : "full"
    }) on ${e.cpuModel} x${e.cpus}, device ${e.device.kind} (${e.device.name}), ` +
      `commit ${
        e.commit ? e.commit.sha.slice(0, 10) + (e.commit.dirty ? "+dirty" : "") : "unknown"
      }, seed ${e.seed}`,
  );
  if (report.workloads.length > 0) {
    out.push("", "Workloads (budget ratio = budget / peak of the budget-free run):");
    out.push(renderTable(
      ["workload", "kind", "peak", "calls", "baseline"],
      report.workloads.map((w) => [
        w.id,
        w.kind,
        formatBytes(w.baselinePeakBytes),
        w.calls === null ? "-" : String(w.calls),
        w.baselineTimeMs
          ? `${formatSpread(w.baselineTimeMs, 1)} ms / ${w.steps} steps`
          : w.computeMs !== null
          ? `${w.computeMs.toFixed(1)} ms compute`
          : "-",
      ]),
      [false, false, true, true, false],
    ));
    const note = shortStepNote(report);
    if (note !== null) out.push(note);
  }
  if (report.results.length > 0) {
    out.push("", "Results (median [min-max] over repeats):");
    out.push(renderTable(
      [
        "workload",
        "policy",
        "ratio",
        "budget",
        "ok",
        "overhead",
        "evictions/step",
        "remats/step",
        "swap/step",
        "bookkeeping ms/step",
        "peak",
      ],
      report.results.map((r) => [
        r.workload,
        r.policy,
        r.ratio.toFixed(2),
        formatBytes(r.budgetBytes),
        r.feasible
          ? "yes"
          : r.feasibleRepeats > 0
          ? `${r.feasibleRepeats}/${r.repeats}`
          : r.reason === "thrashing"
          ? "thrash"
          : r.reason === "time limit" || r.error?.startsWith("time limit")
          ? "time"
          : r.reason === "failed"
          ? "failed"
          : "no",
        formatSpread(r.overhead, 3),
        formatSpread(r.evictions, 0),
        formatSpread(r.remats, 0),
        formatSpread(r.swapBytes, 0, formatBytes),
        formatSpread(r.bookkeepingMs, 2),
        formatSpread(r.peakBytes, 0, formatBytes),
      ]),
      [false, false, true, true, false, true, true, true, true, true, true],
    ));
  }
  if (report.summary.policies.length > 0) {
    out.push("", "Smallest feasible ratio per workload and policy (overhead at that ratio):");
    out.push(renderTable(
      ["workload", "policy", "smallest feasible", "overhead there", "note"],
      report.summary.policies.map((s) => {
        const at = s.curve.find((c) => c.ratio === s.smallestFeasibleRatio);
        return [
          s.workload,
          s.policy,
          s.smallestFeasibleRatio === null ? "none" : s.smallestFeasibleRatio.toFixed(2),
          at?.overhead == null ? "-" : at.overhead.toFixed(3),
          s.nonMonotone ? "infeasible at a larger ratio" : "",
        ];
      }),
      [false, false, true, true, false],
    ));
  }
  if (report.summary.best.length > 0) {
    out.push("", "Best policy per workload and ratio (lowest median overhead among feasible):");
    const byWorkload = new Map<string, string[]>();
    for (const b of report.summary.best) {
      const cells = byWorkload.get(b.workload) ?? [];
      cells.push(
        `${b.ratio.toFixed(2)}: ${
          b.policy === null ? "none" : `${b.policy} (${b.overhead!.toFixed(3)})`
        }`,
      );
      byWorkload.set(b.workload, cells);
    }
    const short = new Set(shortStepWorkloads(report).map(([id]) => id));
    for (const [w, cells] of byWorkload) {
      out.push(
        `  ${w}${short.has(w) ? " (short steps: see the note above)" : ""}: ${cells.join(", ")}`,
      );
    }
  }
  if (report.micro.length > 0) {
    out.push("", "Micro-benchmarks (subject vs reference, from this run):");
    out.push(
      renderTable(
        ["benchmark", "subject", "reference", "unit", "ratio", "note"],
        report.micro.map(microRow),
        [false, true, true, false, true, false],
      ),
    );
  }
  if (report.skipped.length > 0) {
    out.push("", "Skipped:");
    for (const s of report.skipped) out.push(`  ${s.what}: ${s.reason}`);
  }
  return out.join("\n");
}
