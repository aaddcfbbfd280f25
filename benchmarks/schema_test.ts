import assert from "node:assert/strict";
import { runMainOnTestEngine } from "./_test_engine.ts";
import { type BenchReport, reportJsonSchema, SCHEMA_ID, validateReport } from "./schema.ts";

async function sampleReport(): Promise<BenchReport> {
  const r = await runMainOnTestEngine([
    "--models",
    "mlp",
    "--policies",
    "dtr-eq,lru",
    "--ratios",
    "1,0.3",
    "--repeat",
    "2",
    "--skip",
    "plots",
  ]);
  try {
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(Deno.readTextFileSync(`${r.dir}/results.json`));
  } finally {
    Deno.removeSync(r.dir, { recursive: true });
  }
}

Deno.test("validateReport() accepts a report written by main() and keeps every field", async () => {
  const report = await sampleReport();
  assert.equal(report.schema, SCHEMA_ID);
  assert.deepEqual(validateReport(report), report);
  const m = report.results[0]!.measurements[0]!;
  assert.deepEqual(Object.keys(m).sort(), [
    "baselineTimeMs",
    "bookkeepingMs",
    "error",
    "evictions",
    "feasible",
    "overhead",
    "peakBytes",
    "reason",
    "remats",
    "swapBytes",
    "timeMs",
  ]);
  assert.ok(report.environment.deno.length > 0);
  assert.ok(report.environment.packages["@libra/tensor"], "package versions recorded");
});

Deno.test("validateReport() rejects inconsistent reports, naming the field", async () => {
  const good = await sampleReport();
  const cases: [string, (r: BenchReport) => void, RegExp][] = [
    ["wrong schema id", (r) => ((r as { schema: string }).schema = "libra-bench/0"), /schema:/],
    ["ratio above 1", (r) => (r.results[0]!.ratio = 1.5), /results\.0\.ratio/],
    [
      "feasible measurement without overhead",
      (r) => (r.results[0]!.measurements[0]!.overhead = null),
      /results\.0\.measurements\.0: overhead must be a number exactly when/,
    ],
    ["repeat count mismatch", (r) => r.results[0]!.measurements.pop(), /one entry per repeat/],
    [
      "unknown reason",
      (r) => ((r.results[0]!.measurements[0]! as { reason: string }).reason = "bored"),
      /results\.0\.measurements\.0\.reason/,
    ],
    [
      "spread out of order",
      (r) => (r.results[0]!.evictions = { median: 5, min: 6, max: 7 }),
      /min <= median <= max/,
    ],
    [
      "unknown workload",
      (r) => (r.results[0]!.workload = "live:nope/tiny"),
      /results\.0\.workload: result names workload "live:nope\/tiny"/,
    ],
    [
      "missing environment field",
      (r) => delete (r.environment as Partial<BenchReport["environment"]>).commit,
      /environment\.commit/,
    ],
    ["negative evictions", (r) => (r.results[0]!.measurements[0]!.evictions = -1), /evictions/],
  ];
  for (const [what, mutate, re] of cases) {
    const r = structuredClone(good);
    mutate(r);
    assert.throws(() => validateReport(r), re, what);
  }
});

Deno.test("reportJsonSchema() exports the required top-level fields", () => {
  const s = reportJsonSchema() as { required: string[]; properties: Record<string, unknown> };
  for (
    const k of [
      "schema",
      "environment",
      "workloads",
      "results",
      "summary",
      "timelines",
      "micro",
      "skipped",
    ]
  ) {
    assert.ok(s.required.includes(k), `${k} is required`);
  }
});
