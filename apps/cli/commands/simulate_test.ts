import assert from "node:assert/strict";
import { main } from "./simulate.ts";

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

/** A constant x and the chain x -> t0 -> .. -> t5 (100 bytes, 10 ns each), as DTR log lines. */
function forwardChain(): string[] {
  const L = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}`,
  ];
  let prev = "x";
  for (let i = 0; i < 6; i++) {
    L.push(
      `{"ARGS":["${prev}"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["t${i}"],"TIME":"10"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"t${i}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"t${i}"}`,
    );
    prev = `t${i}`;
  }
  return L;
}

async function chainFile(): Promise<string> {
  const L = forwardChain();
  for (let i = 0; i < 5; i++) L.push(`{"INSTRUCTION":"RELEASE","NAME":"t${i}"}`);
  const f = await Deno.makeTempFile({ suffix: ".log" });
  await Deno.writeTextFile(f, L.join("\n"));
  return f;
}

Deno.test("simulate --json prints exactly the object of issue 4", async () => {
  const f = await chainFile();
  try {
    const { code, out } = await capture([
      "--trace",
      f,
      "--policy",
      "dtr-eq",
      "--ratios",
      "1,0.5,0.1",
      "--json",
    ]);
    assert.equal(code, 0);
    const j = JSON.parse(out);
    assert.deepEqual(Object.keys(j), ["baseline", "results"]);
    assert.deepEqual(j.baseline, { peakBytes: 700, computeNs: 60 });
    assert.equal(j.results.length, 3);
    for (const r of j.results) {
      assert.deepEqual(Object.keys(r), [
        "ratio",
        "budgetBytes",
        "feasible",
        "reason",
        "overhead",
        "evictions",
        "remats",
        "bookkeepingMs",
      ]);
    }
    assert.deepEqual(j.results.map((r: { feasible: boolean }) => r.feasible), [true, true, false]);
    assert.equal(j.results[1].budgetBytes, 350);
    assert.equal(j.results[2].overhead, null);
    assert.deepEqual(j.results.map((r: { reason: string | null }) => r.reason), [
      null,
      null,
      "out of memory",
    ]);
  } finally {
    await Deno.remove(f);
  }
});

Deno.test("simulate prints a table by default", async () => {
  const f = await chainFile();
  try {
    const { code, out } = await capture(["--trace", f, "--ratios", "0.5"]);
    assert.equal(code, 0);
    assert.match(out, /budget-free peak 700 bytes/);
    assert.match(out, /ratio\s+budget GB\s+feasible\s+overhead/);
    assert.match(out, /0\.50\s+0\.000\s+yes/);
  } finally {
    await Deno.remove(f);
  }
});

Deno.test("simulate reports errors as one line with a non-zero exit", async () => {
  let r = await capture([]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--trace FILE is required/);
  r = await capture(["--trace", "/no/such.log"]);
  assert.equal(r.code, 1);
  assert.match(r.err, /^libra simulate: cannot read trace \/no\/such\.log/);
  r = await capture(["--trace", "x", "--ratios", "0.5,2"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--ratios must be numbers in \(0, 1\]/);
  const bad = await Deno.makeTempFile();
  await Deno.writeTextFile(bad, `{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"NOPE"}\n`);
  r = await capture(["--trace", bad, "--policy", "dtr"]);
  await Deno.remove(bad);
  assert.equal(r.code, 1);
  assert.equal(r.err.split("\n").length, 1);
  assert.match(r.err, /:2: unknown instruction "NOPE"/);
  r = await capture(["--trace", "x", "--bogus"]);
  assert.equal(r.code, 2);
});

Deno.test("libra simulate --policy libra|chen-sqrt prints the planners' rows", async () => {
  const chain = new URL("../../../packages/train/testdata/chain.log", import.meta.url).pathname;
  for (const policy of ["libra", "chen-sqrt"]) {
    const { code, out } = await capture([
      "--trace",
      chain,
      "--policy",
      policy,
      "--ratios",
      "0.8,0.5",
      "--json",
    ]);
    assert.equal(code, 0, policy);
    const r = JSON.parse(out);
    assert.equal(r.results.length, 2);
    for (const row of r.results) assert.ok(!row.feasible || row.overhead >= 1);
  }
});

Deno.test("simulate refuses an unknown policy with exit 2 before reading the trace", async () => {
  // The trace does not exist: a check made after reading it would report that instead (exit 1).
  const missing = `${await Deno.makeTempDir()}/absent.log`;
  const r = await capture(["--trace", missing, "--policy", "libr", "--ratios", "0.5"]);
  assert.equal(r.code, 2);
  assert.equal(r.out, "");
  assert.match(
    r.err,
    /^libra simulate: unknown policy "libr" \(policies: dtr, .*planners: libra, /,
  );
  // Every policy, swap-aware variant and planner passes the check (and fails on the file).
  for (const policy of ["dtr-eq", "lru+swap", "libra", "checkmate"]) {
    const ok = await capture(["--trace", missing, "--policy", policy, "--ratios", "0.5"]);
    assert.equal(ok.code, 1, policy);
    assert.match(ok.err, /cannot read trace/, policy);
  }
});

Deno.test("simulate --list prints every policy and planner, one a line", async () => {
  const { code, out } = await capture(["--list"]);
  assert.equal(code, 0);
  const names = out.split("\n");
  const { POLICY_NAMES, PLANNER_NAMES } = await import("@libra/evict");
  for (const n of [...POLICY_NAMES, ...PLANNER_NAMES]) assert.ok(names.includes(n), n);
  assert.ok(names.includes("dtr-eq+swap"));
  assert.equal(new Set(names).size, names.length);
});

Deno.test("simulate refuses an empty or header-only trace with exit 2", async () => {
  const f = await Deno.makeTempFile({ suffix: ".log" });
  try {
    for (
      const text of [
        "",
        `{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}\n`,
        `{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"x"}\n`,
      ]
    ) {
      await Deno.writeTextFile(f, text);
      const r = await capture(["--trace", f]);
      assert.equal(r.code, 2, JSON.stringify(text));
      assert.match(r.err, /has no CALL or MUTATE to replay \(the trace is empty or header-only\)/);
    }
  } finally {
    await Deno.remove(f);
  }
});

Deno.test("simulate --overhead-limit: thrashing is its own reason in JSON and the table", async () => {
  // A chain x -> t0 .. t5 read back in reverse: at 3/8 of the peak the backward recomputes.
  const L = forwardChain();
  for (let i = 5; i >= 0; i--) {
    L.push(
      `{"ARGS":["t${i}"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["b${i}"],"TIME":"10"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"b${i}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"b${i}"}`,
      `{"INSTRUCTION":"RELEASE","NAME":"b${i}"}`,
      `{"INSTRUCTION":"RELEASE","NAME":"t${i}"}`,
    );
  }
  const f = await Deno.makeTempFile({ suffix: ".log" });
  await Deno.writeTextFile(f, L.join("\n"));
  try {
    const free = JSON.parse(
      (await capture(["--trace", f, "--ratios", "0.375", "--overhead-limit", "inf", "--json"])).out,
    );
    const over = free.results[0].overhead;
    assert.ok(over > 1.2, `recomputes: ${over}`);
    const j = JSON.parse(
      (await capture(["--trace", f, "--ratios", "0.375", "--overhead-limit", "1.2", "--json"])).out,
    );
    assert.equal(j.results[0].feasible, false);
    assert.equal(j.results[0].reason, "thrashing");
    const t = await capture(["--trace", f, "--ratios", "0.375", "--overhead-limit", "1.2"]);
    assert.match(t.out, /0\.38\s+0\.000\s+no \(thrashing\)/);
    const bad = await capture(["--trace", f, "--overhead-limit", "0.5"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--overhead-limit must be a number >= 1 or inf, got "0.5"/);
  } finally {
    await Deno.remove(f);
  }
});
