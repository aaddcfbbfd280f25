import assert from "node:assert/strict";
import { costsByFunction, instructionsByFunction, parsePerfMap, perCall } from "./instr_profile.ts";
import { integerOption, policyOption, runWorkload, workloadTarget } from "./_instr_workload.ts";
import { Runtime } from "@libra/runtime";

// A callgrind output as `--dump-instr=yes` writes it, with what the parser must get right: costs
// under several objects, a call's inclusive cost (not a self cost), relative and repeated
// positions, compressed names, and a column after Ir.
const CALLGRIND = `# callgrind format
version: 1
positions: instr line
events: Ir Dr

ob=/usr/lib/libc.so.6
fl=x.c
fn=memcpy
0x100 1 10 2
+4 1 5
ob=???
fn=0x0000000000001000
0x5000 0 7
0x5010 0 3
calls=2 0x6000 0
0x5018 0 999
+8 0 1
* 0 1
0x9000 0 8
ob=/usr/bin/deno
fn=0x0000000000001000
0x2000 0 4
0x3000 0 6
ob=(3) /lib/libra_cpu.so
fn=(7) libra_sample_bounds
0x10 0 20
fn=(8) k_relu
0x20 0 1
fn=(7)
0x11 0 2
totals: 1066
`;

const MAP = `3000 10 Builtin:Foo
5000 20 JS:*'f file:///r/a.ts:1:1
`;

Deno.test("instructionsByFunction: self instructions per symbol, named from the perf map", () => {
  const got = instructionsByFunction(CALLGRIND, parsePerfMap(MAP), "file:///r/");
  // Sums by hand from the fixture above.
  assert.deepEqual(
    Object.fromEntries(got),
    {
      "libc.so.6:memcpy": 15,
      // The call's 999 is inclusive, not f's own; its line moves the position (+8: past f).
      "JS:*'f a.ts:1:1": 10,
      "(JIT code outside the perf map)": 10,
      "deno (unnamed)": 4,
      "Builtin:Foo": 6, // a symbol of the map inside a named object
      "libra_cpu.so:libra_sample_bounds": 22, // a compressed name used again
      "libra_cpu.so:k_relu": 1,
    },
  );
});

Deno.test("costsByFunction: every event's self cost per symbol, in the output's order", () => {
  const { events, costs } = costsByFunction(CALLGRIND, parsePerfMap(MAP), "file:///r/");
  assert.deepEqual(events, ["Ir", "Dr"]);
  // memcpy's first line counts 10 Ir and 2 Dr, its second 5 Ir and no Dr column (0).
  assert.deepEqual(costs.get("libc.so.6:memcpy"), [15, 2]);
  assert.deepEqual(costs.get("JS:*'f a.ts:1:1"), [10, 0]);
  // The same totals as instructionsByFunction's, function by function.
  const ir = instructionsByFunction(CALLGRIND, parsePerfMap(MAP), "file:///r/");
  for (const [k, v] of ir) assert.equal(costs.get(k)![0], v, k);
});

Deno.test("instructionsByFunction: output without instruction addresses is refused", () => {
  assert.throws(
    () => instructionsByFunction(CALLGRIND.replace("positions: instr line", "positions: line"), []),
    /--dump-instr=yes/,
  );
  assert.throws(
    () => instructionsByFunction(CALLGRIND.replace("events: Ir Dr", "events: Dr"), []),
    /no Ir/,
  );
});

Deno.test("perCall: the difference of two runs over the calls between them, largest first", () => {
  const short = new Map([["a", 10], ["b", 5], ["gone", 3]]);
  const long = new Map([["a", 30], ["b", 5], ["c", 4]]);
  assert.deepEqual(perCall(short, long, 2), [
    { name: "a", perCall: 10 },
    { name: "c", perCall: 2 },
    { name: "b", perCall: 0 },
    { name: "gone", perCall: -1.5 },
  ]);
  assert.throws(() => perCall(short, long, 0), /calls must be positive/);
});

Deno.test("instr_profile's workload: each policy runs the stream it names", async () => {
  let cpuBackend;
  try {
    ({ cpuBackend } = await import("@libra/native"));
  } catch (e) {
    console.warn(`skipped: no native cpu library (${(e as Error).message.split("\n")[0]})`);
    return;
  }
  const live = 50, warmup = 20, calls = 30;
  const direct = workloadTarget(cpuBackend({ variant: "portable" }), "direct", live);
  assert.ok(!(direct instanceof Runtime));
  for (const policy of ["unlimited", "oldest-first", "dtr-eq"] as const) {
    const rt = workloadTarget(cpuBackend({ variant: "portable" }), policy, live) as Runtime;
    runWorkload(rt, live, warmup, calls);
    // The stream's set-up makes `live` calls.
    assert.equal(rt.stats.calls, live + warmup + calls, policy);
    if (policy === "unlimited") assert.equal(rt.stats.evictions, 0);
    // Oldest first evicts on every call past the set-up (the budget holds 90% of the values).
    else if (policy === "oldest-first") assert.ok(rt.stats.evictions >= warmup + calls, policy);
    else assert.ok(rt.stats.evictions > 0, policy);
  }
});

Deno.test("instr_profile's options: a bad policy or count is an error naming the tool and the flag", () => {
  assert.equal(policyOption("t", "oldest-first"), "oldest-first");
  assert.throws(() => policyOption("t", "lru"), /^RangeError: t: --policy must be one of dtr-eq, /);
  assert.equal(integerOption("t", "calls", "20", 1), 20);
  assert.equal(integerOption("t", "warmup", "0", 0), 0);
  assert.throws(() => integerOption("t", "warmup", " ", 0), /--warmup must be an integer/);
  for (const bad of ["0", "-3", "2.5", "ten", ""]) {
    assert.throws(
      () => integerOption("t", "calls", bad, 1),
      new RegExp(`^RangeError: t: --calls must be an integer of at least 1, got ${bad}$`),
    );
  }
});
