import assert from "node:assert/strict";
import { runMainOnTestEngine } from "./_test_engine.ts";
import { validateReport } from "./schema.ts";

Deno.test("main() writes a validated results.json, schema.json and one SVG per workload and timeline", async () => {
  const r = await runMainOnTestEngine([
    "--models",
    "mlp",
    "--policies",
    "dtr-eq,lru",
    "--ratios",
    "1,0.5,0.3",
    "--repeat",
    "2",
    "--seed",
    "5",
  ]);
  try {
    assert.equal(r.status, 0, r.stderr);
    const report = validateReport(JSON.parse(Deno.readTextFileSync(`${r.dir}/results.json`)));
    assert.equal(report.options.seed, 5);
    assert.equal(report.environment.seed, 5);
    assert.equal(report.environment.device.name, "test device");
    assert.equal(report.results.length, 2 * 2 * 3);
    const schema = JSON.parse(Deno.readTextFileSync(`${r.dir}/schema.json`));
    assert.equal(schema.type, "object");
    assert.ok(schema.properties.results, "schema.json describes results");
    const files = [...Deno.readDirSync(r.dir)].map((e) => e.name).sort();
    assert.deepEqual(files, [
      "memory_live_mlp_tiny_dtr-eq_0.3.svg",
      "memory_live_mlp_tiny_dtr-eq_0.5.svg",
      "memory_sim_mlp_tiny_dtr-eq_0.3.svg",
      "memory_sim_mlp_tiny_dtr-eq_0.5.svg",
      "overhead_live_mlp_tiny.svg",
      "overhead_sim_mlp_tiny.svg",
      "results.json",
      "schema.json",
    ]);
    // The table names every workload and the summaries.
    assert.match(r.stdout, /live:mlp\/tiny\s+lru\s+0\.50/);
    assert.match(r.stdout, /Smallest feasible ratio/);
    assert.match(
      r.stdout,
      /sim:mlp\/tiny: 1\.00: dtr-eq \(1\.000\), 0\.50: dtr-eq \(1\.100\), 0\.30: dtr-eq/,
    );
    // Plain progress lines (stderr is not a terminal here) end with the total.
    assert.match(r.progress, /bench: \[\d+\/\d+ \d+%\]/);
    assert.match(r.progress, /done in/);
  } finally {
    Deno.removeSync(r.dir, { recursive: true });
  }
});

Deno.test("main() exits 2 with one line for bad options and unknown names", async () => {
  for (
    const [args, re] of [
      [
        ["--ratios", "2"],
        /^bench: --ratios: budget ratios must be numbers in \(0, 1\], got "2"\n$/,
      ],
      [
        ["--policies", "nope"],
        /^bench: --policies: unknown policy "nope" \(available: dtr-eq, lru, largest\)\n$/,
      ],
      [
        ["--models", "mlp", "--presets", "huge", "--policies", "lru"],
        /^bench: --presets: model "mlp" has no preset "huge" \(presets: tiny, small\)\n$/,
      ],
      [["--models", "vgg", "--policies", "lru"], /^bench: --models: unknown model "vgg"/],
    ] as const
  ) {
    const r = await runMainOnTestEngine(args);
    Deno.removeSync(r.dir, { recursive: true });
    assert.equal(r.status, 2, args.join(" "));
    assert.match(r.stderr, re);
  }
});

Deno.test("main() --help lists the options and exits 0", async () => {
  const r = await runMainOnTestEngine(["--help"]);
  Deno.removeSync(r.dir, { recursive: true });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /--quick/);
  assert.match(r.stdout, /--upload URL/);
});

Deno.test("main() exits 1 and names the failure when a workload cannot be prepared", async () => {
  const r = await runMainOnTestEngine([
    "--models",
    "broken",
    "--policies",
    "lru",
    "--ratios",
    "1",
    "--repeat",
    "1",
  ], { failingModels: ["broken"] });
  try {
    assert.equal(r.status, 1);
    assert.match(r.stderr, /2 run\(s\) failed:\n {2}live:broken\/tiny: cannot build broken/);
    assert.match(r.stdout, /Skipped:\n(.*\n)* {2}live:broken\/tiny: cannot build broken/);
  } finally {
    Deno.removeSync(r.dir, { recursive: true });
  }
});

Deno.test("main() drops default names the engine lacks and reports them as skipped", async () => {
  const r = await runMainOnTestEngine([
    "--models",
    "mlp",
    "--ratios",
    "1",
    "--repeat",
    "1",
    "--skip",
    "plots,live",
  ]);
  try {
    assert.equal(r.status, 0, r.stderr);
    const report = validateReport(JSON.parse(Deno.readTextFileSync(`${r.dir}/results.json`)));
    assert.deepEqual(report.options.policies, ["dtr-eq", "lru", "largest"]);
    assert.deepEqual(report.skipped.map((s) => s.what), [
      "policy dtr",
      "policy dtr-local",
      "policy msps",
      "policy random",
      "policy libra",
      "policy chen-sqrt",
      "imported traces",
    ]);
  } finally {
    Deno.removeSync(r.dir, { recursive: true });
  }
});

Deno.test("main() runs the micro-benchmarks before the suite (on a heap the suite has not filled)", async () => {
  const { main } = await import("./main.ts");
  const { testEngine } = await import("./_test_engine.ts");
  const engine = testEngine();
  const dir = Deno.makeTempDirSync({ prefix: "libra_bench_test_" });
  let suiteCallsAtMicro = -1;
  try {
    const status = await main(["--out", dir, "--models", "mlp", "--skip", "plots"], {
      engine: () => Promise.resolve(engine),
      micro: () => {
        suiteCallsAtMicro = engine.calls.length;
        return Promise.resolve([]);
      },
      progress: { write: () => {}, isTerminal: false, now: () => 0 },
      stdout: () => {},
      stderr: () => {},
      traceDefaults: () => [],
    });
    assert.equal(status, 0);
    assert.equal(suiteCallsAtMicro, 0, "the suite ran before the micro-benchmarks");
    assert.ok(engine.calls.length > 0, "the suite ran");
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
