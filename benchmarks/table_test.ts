import assert from "node:assert/strict";
import type { BenchReport, WorkloadJson } from "./schema.ts";
import { renderReport, SHORT_STEP_MS, shortStepNote } from "./table.ts";

function workload(id: string, kind: "live" | "simulated", totalMs: number | null): WorkloadJson {
  return {
    id,
    kind,
    source: kind === "live" ? "model" : "imported",
    model: "gpt",
    preset: "tiny",
    trace: null,
    baselinePeakBytes: 1024,
    baselineTimeMs: totalMs === null ? null : { median: totalMs, min: totalMs, max: totalMs },
    computeMs: kind === "live" ? null : 5,
    calls: null,
    steps: kind === "live" ? 5 : null,
  };
}

function report(workloads: WorkloadJson[]): BenchReport {
  return {
    options: { quick: true },
    environment: {
      cpuModel: "test cpu",
      cpus: 2,
      device: { kind: "cpu", name: "cpu" },
      commit: null,
      seed: 0,
    },
    workloads,
    results: [],
    summary: {
      policies: [],
      best: workloads.map((w) => ({ workload: w.id, ratio: 1, policy: "dtr-eq", overhead: 1.5 })),
    },
    micro: [],
    skipped: [],
  } as unknown as BenchReport;
}

Deno.test("the bench table notes live workloads whose steps are too short to measure a budget's cost", () => {
  // 5 steps: 10 ms in all is 2 ms a step; 400 ms is 80 ms a step
  const r = report([
    workload("live:gpt/tiny", "live", 10),
    workload("live:gpt/small", "live", 400),
    workload("trace:unet-6", "simulated", null),
  ]);
  const note = shortStepNote(r)!;
  assert.match(note, /live:gpt\/tiny 2\.0 ms/);
  assert.doesNotMatch(note, /gpt\/small|unet/);
  const text = renderReport(r);
  assert.ok(text.includes(note), "printed under the workloads");
  assert.match(
    text,
    /live:gpt\/tiny \(short steps: see the note above\): 1\.00: dtr-eq \(1\.500\)/,
  );
  assert.match(text, /live:gpt\/small: 1\.00/);
  // at the threshold a step is long enough
  assert.equal(shortStepNote(report([workload("live:a", "live", 5 * SHORT_STEP_MS)])), null);
});
