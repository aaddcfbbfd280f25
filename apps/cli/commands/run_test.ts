import assert from "node:assert/strict";
import { cudaBackend } from "@libra/native";
import { decisionSummary, main } from "./run.ts";

async function capture(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [], err: string[] = [];
  const log = console.log, error = console.error;
  console.log = (m: string) => out.push(m);
  console.error = (m: string) => err.push(m);
  try {
    const code = await main(args);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

const FIELDS = [
  "baselinePeakBytes",
  "budgetBytes",
  "peakBytes",
  "overhead",
  "losses",
  "baselineLosses",
  "stats",
  "measurement",
  "decisions",
];

Deno.test("libra run --json (end to end through main.ts) trains within the budget with bitwise-equal losses", async () => {
  const p = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../main.ts", import.meta.url).pathname,
      "run",
      "--model",
      "mlp",
      "--preset",
      "tiny",
      "--policy",
      "dtr-eq",
      "--budget-ratio",
      "0.9",
      "--steps",
      "3",
      "--json",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(p.stderr);
  assert.equal(p.code, 0, err);
  const r = JSON.parse(new TextDecoder().decode(p.stdout));
  assert.deepEqual(Object.keys(r), FIELDS);
  // the warm-up steps (two, then more until 30000 runtime calls, then two or more under the
  // budget, until 1000 evictions and re-materializations), then three measured ones
  const m = r.measurement;
  assert.ok(m.budgetedWarmupSteps >= 2);
  const free = m.warmupSteps - m.budgetedWarmupSteps;
  assert.ok(free >= 2);
  assert.ok(m.warmupCalls >= 30000 || free === 100, `${m.warmupCalls} warm-up calls`);
  assert.equal(r.losses.length, m.warmupSteps + 3);
  assert.equal(r.measurement.pairs, 3);
  assert.equal(r.measurement.method, "interleaved");
  assert.equal(r.measurement.wall.ratios.length, 3);
  assert.equal(r.measurement.costModel, "analytic");
  assert.ok(r.measurement.cpu.median > 0 && r.measurement.accounted.overhead >= 1);
  assert.equal(r.decisions.count, r.stats.evictions);
  assert.match(r.decisions.digest, /^[0-9a-f]{8}$/);
  assert.deepEqual(r.losses, r.baselineLosses, "bitwise equal (JSON numbers round-trip f64)");
  assert.equal(r.budgetBytes, Math.floor(0.9 * r.baselinePeakBytes));
  assert.ok(r.peakBytes <= r.budgetBytes, `${r.peakBytes} <= ${r.budgetBytes}`);
  assert.ok(r.stats.evictions > 0, "the budget made the runtime evict");
  assert.ok(r.overhead > 0);
  assert.match(err, /warm-up steps per copy/, "progress on stderr");
  assert.match(err, /interleaved/);
  assert.match(err, /step 3\/3: loss/);
});

for (const policy of ["chen-sqrt", "libra"]) {
  Deno.test(`libra run --policy ${policy} plans a recorded step and applies it to every step`, async () => {
    const { code, out, err } = await capture([
      "--model",
      "resnet",
      "--policy",
      policy,
      "--budget-ratio",
      "0.85",
      "--steps",
      "2",
      "--json",
      "--quiet",
    ]);
    assert.equal(code, 0, err);
    const r = JSON.parse(out);
    assert.deepEqual(r.losses, r.baselineLosses);
    assert.ok(r.peakBytes <= r.budgetBytes);
  });
}

Deno.test("libra run rejects bad options with one line and a non-zero exit", async () => {
  const cases: [string[], RegExp, number][] = [
    [["--model", "foo", "--budget-ratio", "0.5"], /unknown model "foo" \(models: mlp/, 2],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--policy", "nope"],
      /unknown policy "nope".*chen-sqrt/,
      2,
    ],
    [
      ["--model", "mlp", "--budget-ratio", "1.5"],
      /--budget-ratio must be a number in \(0, 1\], got "1.5"/,
      2,
    ],
    [["--model", "mlp", "--budget-ratio", "0"], /in \(0, 1\]/, 2],
    [["--model", "mlp"], /--budget-ratio R is required/, 2],
    [["--budget-ratio", "0.5"], /--model M is required/, 2],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--steps", "0"],
      /--steps must be an integer in 1\.\.10000, got "0"/,
      2,
    ],
    // the lab API's cap, and no exponent, fraction or sign
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--steps", "1e12"],
      /in 1\.\.10000, got "1e12"/,
      2,
    ],
    [["--model", "mlp", "--budget-ratio", "0.5", "--steps", "10001"], /got "10001"/, 2],
    [["--model", "mlp", "--budget-ratio", "0.5", "--steps", "2.5"], /got "2\.5"/, 2],
    [["--model", "mlp", "--budget-ratio", "0.5", "--steps=-3"], /got "-3"/, 2],
    [["--model", "mlp", "--budget-ratio", "0.5", "--steps", "0x10"], /got "0x10"/, 2],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--warmup", "0"],
      /--warmup must be an integer in 1\.\.100/,
      2,
    ],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--seed=-1"],
      /--seed must be an integer in 0\.\./,
      2,
    ],
    [["--model", "mlp", "--budget-ratio", "0.5", "--seed", "1.5"], /--seed must be an integer/, 2],
    [
      ["--model", "mlp", "--budget-ratio", " "],
      /--budget-ratio must be a number in \(0, 1\], got " "/,
      2,
    ],
    [["--model", "mlp", "--budget-ratio", "NaN"], /--budget-ratio must be a number/, 2],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--cost-model", "psychic"],
      /--cost-model must be one of analytic, profiled, measured, got "psychic"/,
      2,
    ],
    [
      ["--model", "mlp", "--budget-ratio", "0.5", "--device", "tpu"],
      /--device must be cpu or cuda/,
      2,
    ],
    [["--model", "mlp", "--budget-ratio", "0.5", "--bogus"], /bogus/, 2],
  ];
  for (const [args, re, exit] of cases) {
    const { code, out, err } = await capture(args);
    assert.equal(code, exit, args.join(" "));
    assert.equal(out, "");
    assert.match(err, re);
    assert.equal(err.split("\n").length, 1, "one line");
    assert.match(err, /^libra run: /);
  }
});

Deno.test("libra run reports an infeasible budget as the out-of-budget error", async () => {
  const { code, out, err } = await capture([
    "--model",
    "mlp",
    "--budget-ratio",
    "0.05",
    "--steps",
    "1",
    "--quiet",
  ]);
  assert.equal(code, 1);
  assert.equal(out, "");
  // 5% of mlp tiny's peak is less than its parameters: what is in use exceeds the budget
  // before the step asks for anything, and the message says so (not "0 bytes needed").
  const m =
    /^libra run: out of budget: (\d+) bytes in use exceed the budget of (\d+) .*; the (\d+) bytes that cannot be evicted alone exceed the budget;/
      .exec(err);
  assert.ok(m, err);
  assert.ok(Number(m[1]) > Number(m[2]), err);
  assert.ok(Number(m[3]) > Number(m[2]) && Number(m[3]) <= Number(m[1]), err);
  assert.equal(err.split("\n").length, 1);
});

let cuda = false;
try {
  cudaBackend();
  cuda = true;
} catch {
  cuda = false;
}
Deno.test({
  name: "libra run --device cuda says the GPU path is unavailable on a machine without one",
  ignore: cuda,
  async fn() {
    const { code, err } = await capture([
      "--model",
      "mlp",
      "--budget-ratio",
      "0.9",
      "--device",
      "cuda",
      "--quiet",
    ]);
    assert.equal(code, 1);
    assert.match(err, /^libra run: the cuda backend is unavailable: .*\(use --device cpu\)$/);
  },
});

Deno.test("decisionSummary() digests the decision list in order", () => {
  const a = decisionSummary(["drop:c1.0", "swap:c2.0"]);
  assert.equal(a.count, 2);
  assert.deepEqual(decisionSummary(["drop:c1.0", "swap:c2.0"]), a);
  assert.notEqual(decisionSummary(["swap:c2.0", "drop:c1.0"]).digest, a.digest);
  assert.notEqual(decisionSummary(["drop:c1.0swap:c2.0"]).digest, a.digest);
  // FNV-1a of the empty list is the offset basis
  assert.deepEqual(decisionSummary([]), { count: 0, digest: "811c9dc5" });
});
