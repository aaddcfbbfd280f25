import assert from "node:assert/strict";
import {
  DEFAULT_POLICIES,
  DEFAULT_RATIOS,
  helpText,
  parseOptions,
  parseRatios,
  QUICK_RATIOS,
  UsageError,
} from "./options.ts";

const noTraces = () => [];

Deno.test("parseOptions() defaults match the help text", () => {
  const o = parseOptions([], noTraces);
  assert.deepEqual(o.policies, DEFAULT_POLICIES);
  assert.deepEqual(o.ratios, DEFAULT_RATIOS);
  assert.equal(o.device, "cpu");
  assert.equal(o.costModel, "analytic");
  assert.equal(o.timeLimitMs, 60_000);
  assert.equal(parseOptions(["--time-limit", "2.5"], noTraces).timeLimitMs, 2500);
  assert.equal(o.steps, 6);
  assert.equal(o.repeat, 3);
  assert.equal(o.out, "bench-out");
  assert.equal(o.seed, 42);
  assert.equal(o.upload, null);
  const help = helpText();
  for (
    const name of [
      "models",
      "presets",
      "policies",
      "ratios",
      "device",
      "cost-model",
      "time-limit",
      "traces",
      "steps",
      "repeat",
      "out",
      "quick",
      "upload",
      "seed",
      "skip",
      "timelines",
      "help",
    ]
  ) {
    assert.match(help, new RegExp(`--${name}\\b`), `--help lists --${name}`);
  }
  assert.match(help, /\[default: 42\]/);
  assert.match(help, /\[default: bench-out\]/);
});

Deno.test("parseOptions() --quick shrinks the suite", () => {
  const o = parseOptions(["--quick"], noTraces);
  assert.equal(o.quick, true);
  assert.deepEqual(o.ratios, QUICK_RATIOS);
  assert.equal(o.steps, 5);
  assert.ok(o.policies.length < DEFAULT_POLICIES.length);
});

Deno.test("parseOptions() reads lists, numbers and several trace files", () => {
  const dir = Deno.makeTempDirSync();
  const a = `${dir}/a.log`, b = `${dir}/b.log`;
  Deno.writeTextFileSync(a, "");
  Deno.writeTextFileSync(b, "");
  const o = parseOptions([
    "--models",
    "mlp,gpt",
    "--policies=dtr",
    "--steps",
    "5",
    "--repeat",
    "1",
    "--traces",
    a,
    b,
    "--seed",
    "7",
    "--device",
    "cuda",
  ], noTraces);
  assert.deepEqual(o.models, ["mlp", "gpt"]);
  assert.deepEqual(o.policies, ["dtr"]);
  assert.deepEqual(o.traces, [a, b]);
  assert.equal(o.steps, 5);
  assert.equal(o.repeat, 1);
  assert.equal(o.seed, 7);
  assert.equal(o.device, "cuda");
  assert.deepEqual(parseOptions(["--traces", "none", "--models", "none"], noTraces).traces, []);
  assert.deepEqual(parseOptions(["--models", "none"], noTraces).models, []);
  Deno.removeSync(dir, { recursive: true });
});

Deno.test("parseRatios() accepts lists and ranges, sorted descending without duplicates", () => {
  assert.deepEqual(parseRatios("0.5,1,0.5"), [1, 0.5]);
  assert.deepEqual(parseRatios("1:0.5:0.1"), [1, 0.9, 0.8, 0.7, 0.6, 0.5]);
  assert.deepEqual(parseRatios("0.2:0.4:0.1,1"), [1, 0.4, 0.3, 0.2]);
});

Deno.test("parseOptions() rejects bad values with one line naming option and value", () => {
  const bad: [string[], RegExp][] = [
    [["--ratios", "0"], /--ratios: .*\(0, 1\], got "0"/],
    [["--ratios", "1.5"], /--ratios: .*got "1.5"/],
    [["--ratios", "a"], /--ratios: .*got "a"/],
    [["--ratios", "1,,0.5"], /--ratios: empty item/],
    [["--ratios", "1:0.5"], /FROM:TO:STEP/],
    [["--time-limit", "0"], /--time-limit: expected a positive number of seconds, got "0"/],
    [["--cost-model", "guess"], /--cost-model: expected measured or analytic, got "guess"/],
    [["--device", "tpu"], /--device: expected cpu or cuda, got "tpu"/],
    [["--steps", "0"], /--steps: expected an integer from 1/],
    [["--repeat", "2.5"], /--repeat: .*"2.5"/],
    [["--seed=-1"], /--seed: .*"-1"/],
    [["--seed", "x1"], /--seed: .*"x1"/],
    [["--upload", "not a url"], /--upload: "not a url" is not a URL/],
    [["--upload", "ftp://x"], /--upload: expected an http/],
    [["--skip", "everything"], /--skip: unknown part "everything"/],
    [["--timelines", "dtr"], /--timelines: expected POLICY@RATIO/],
    [["--policies", "DTR!"], /--policies: "DTR!" is not a policy name/],
    [["--traces", "/nonexistent/x.log"], /--traces: cannot read "\/nonexistent\/x.log"/],
    [["--bogus"], /bogus.*see --help/],
    [["stray"], /unexpected argument "stray"/],
  ];
  for (const [args, re] of bad) {
    assert.throws(() => parseOptions(args, noTraces), (e: unknown) => {
      assert.ok(e instanceof UsageError, `${args.join(" ")}: UsageError`);
      assert.match(e.message, re, args.join(" "));
      assert.ok(!e.message.includes("\n"), "one line");
      return true;
    });
  }
});

Deno.test("--overhead-limit sets the thrash limit (default 2; inf: none) and refuses bad values", () => {
  const none = () => [];
  assert.equal(parseOptions([], none).overheadLimit, 2);
  assert.equal(parseOptions(["--overhead-limit", "1.5"], none).overheadLimit, 1.5);
  assert.equal(parseOptions(["--overhead-limit", "inf"], none).overheadLimit, Infinity);
  assert.equal(parseOptions([], none).checkmateFrees, false);
  assert.equal(parseOptions(["--checkmate-frees"], none).checkmateFrees, true);
  assert.throws(() => parseOptions(["--overhead-limit", "0.9"], none), /expected a number >= 1/);
});
