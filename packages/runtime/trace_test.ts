import assert from "node:assert/strict";
import { formatTrace, parseTrace, readTrace, TraceError } from "./trace.ts";
import { replayTrace, simulateTrace } from "./simulator.ts";

const TRACES = new URL("../../../shared/traces/", import.meta.url);
async function shared(name: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(new URL(name, TRACES));
  } catch {
    return null;
  }
}
const resnet = await shared("resnet32-56.log");
const unet = await shared("unet-6.log");
const SKIP = "../shared/traces/ is absent (the shared DTR traces live outside the repository)";

Deno.test({
  name:
    "parseTrace() imports resnet32-56.log: 286 calls, budget-free peak and compute of the issue",
  ignore: resnet === null,
  fn() {
    const t = parseTrace(resnet!, "resnet32-56.log");
    assert.equal(t.events.filter((e) => e.kind === "call").length, 286);
    const r = replayTrace(t);
    assert.equal(r.stats.peakBytes, 10061179152);
    assert.equal(r.stats.computeNs, 291905487);
    assert.equal(r.overhead, 1);
    assert.equal(r.metaPeakBytes, r.stats.peakBytes, "the meta backend saw the same peak");
  },
});
if (resnet === null) console.warn(`trace_test: skipping shared-trace tests: ${SKIP}`);

const gan = await shared("unroll_gan-512.log");

/** The published h_DTR^eq figures (README of the shared traces), ratios 0.9 down to 0.2; null = OOM. */
const PUBLISHED: [string, string | null, number, (number | null)[]][] = [
  ["resnet32-56.log", resnet, 10061179152, [
    1.013,
    1.025,
    1.046,
    1.074,
    1.107,
    1.140,
    1.179,
    1.332,
  ]],
  ["unet-6.log", unet, 8415764640, [1.033, 1.058, 1.085, 1.149, 1.159, null, null, null]],
  ["unroll_gan-512.log", gan, 252677418, [1.011, 1.024, 1.044, 1.058, 1.069, 1.080, 1.111, null]],
];
const RATIOS = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2];

for (const [name, text, peak, published] of PUBLISHED) {
  Deno.test({
    name: `simulateTrace(dtr-eq) on ${name} lands on the published peak, overheads and frontier`,
    ignore: text === null,
    fn() {
      const t = parseTrace(text!, name);
      const rep = simulateTrace(t, { policy: "dtr-eq", ratios: RATIOS });
      assert.equal(rep.baseline.peakBytes, peak);
      for (const [i, want] of published.entries()) {
        const row = rep.results[i]!;
        const ratio = RATIOS[i]!;
        if (want === null) {
          assert.equal(row.feasible, false, `${name} at ${ratio} is infeasible (published OOM)`);
          assert.ok(row.reason === "out of memory" || row.reason === "thrashing");
        } else {
          assert.ok(row.feasible, `${name} at ${ratio} is feasible (published ${want})`);
          // Within 1% and, in fact, equal to the published figure's 3 decimals.
          assert.ok(
            Math.abs(row.overhead! - want) < 0.01 * want,
            `${name} at ${ratio}: ${row.overhead} vs ${want}`,
          );
          assert.equal(row.overhead!.toFixed(3), want.toFixed(3), `${name} at ${ratio}`);
          assert.ok(row.peakBytes <= row.budgetBytes);
        }
      }
    },
  });
}

Deno.test({
  name: "unroll_gan-512 at 0.2 thrashes: stopped once recomputation passes the budget-free compute",
  ignore: gan === null,
  fn() {
    const t = parseTrace(gan!, "unroll_gan-512.log");
    const budgetBytes = Math.floor(0.2 * 252677418);
    const r = replayTrace(t, { budgetBytes, leafRelease: "keep-pinned" });
    assert.equal(r.feasible, false);
    assert.equal(r.reason, "thrashing");
    assert.match(r.error!.message, /^thrashing: recomputation \d+ ns plus stalls 0 ns passed 1 x/);
    // Stopped by the first recomputation that took it past the budget-free compute.
    let longest = 0;
    for (const e of t.events) {
      if (e.kind === "call" || e.kind === "mutate") longest = Math.max(longest, e.timeNs);
    }
    assert.ok(r.stats.recomputeNs > 125451477);
    assert.ok(r.stats.recomputeNs <= 125451477 + longest);
  },
});

Deno.test({
  name: "parseTrace() imports unet-6.log with its in-place MUTATEs and replays it",
  ignore: unet === null,
  fn() {
    const t = parseTrace(unet!, "unet-6.log");
    assert.equal(t.events.filter((e) => e.kind === "call").length, 210);
    assert.equal(t.events.filter((e) => e.kind === "mutate").length, 37);
    const r = replayTrace(t);
    assert.equal(r.stats.peakBytes, 8415764640);
    const half = replayTrace(t, { budgetBytes: Math.floor(0.5 * 8415764640), timeline: true });
    assert.ok(half.feasible);
    assert.ok(half.stats.peakBytes <= Math.floor(0.5 * 8415764640));
    for (const b of half.timeline.bytes) assert.ok(b <= 0.5 * 8415764640);
  },
});

Deno.test({
  name: "formatTrace() round-trips the shared traces",
  ignore: unet === null || resnet === null,
  fn() {
    for (const text of [resnet!, unet!]) {
      const t = parseTrace(text);
      const back = parseTrace(formatTrace(t));
      const strip = (x: typeof t) => x.events.map(({ line: _l, ...rest }) => rest);
      assert.deepEqual(strip(back), strip(t));
    }
  },
});

const C = (n: string, m: number) => [
  `{"INSTRUCTION":"CONSTANT","NAME":"${n}"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"${m}","NAME":"${n}"}`,
];

function fails(lines: string[], line: number, re: RegExp) {
  assert.throws(
    () => parseTrace(lines.join("\n"), "t.log"),
    (e: unknown) => {
      assert.ok(e instanceof TraceError, String(e));
      assert.equal(e.line, line, e.message);
      assert.match(e.message, new RegExp(`^t\\.log:${line}: `));
      assert.match(e.message, re);
      return true;
    },
  );
}

Deno.test("parseTrace() rejects malformed traces with the line and the reason", () => {
  fails([...C("x", 4), `{"INSTRUCTION":"CALL",`], 3, /invalid JSON/);
  fails([...C("x", 4), `{"INSTRUCTION":"FROB","NAME":"x"}`], 3, /unknown instruction "FROB"/);
  fails([`{"NAME":"x"}`], 1, /unknown instruction undefined/);
  fails(
    [...C("x", 4), `{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["z"],"TIME":"1"}`],
    3,
    /CALL: undefined name "y"/,
  );
  fails(
    [`{"INSTRUCTION":"CONSTANT","NAME":"x"}`, `{"INSTRUCTION":"RELEASE","NAME":"x"}`],
    2,
    /missing MEMORY line for "x" after CONSTANT \(line 1\); found RELEASE/,
  );
  fails([`{"INSTRUCTION":"CONSTANT","NAME":"x"}`], 1, /missing MEMORY line for "x".*end of file/);
  fails(
    [
      ...C("x", 4),
      `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["z"],"TIME":"1"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"z"}`,
      `{"INSTRUCTION":"RELEASE","NAME":"x"}`,
    ],
    5,
    /missing ALIAS line for "z" after CALL f \(line 3\)/,
  );
  fails(
    [
      ...C("x", 4),
      `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["z"],"TIME":"1"}`,
      `{"INSTRUCTION":"ALIAS","ALIAS":"-1","NAME":"z"}`,
    ],
    4,
    /missing MEMORY line for "z"/,
  );
  fails(
    [...C("x", 4), `{"DST":"y","INSTRUCTION":"COPY","SRC":"q"}`],
    3,
    /COPY: undefined name "q"/,
  );
  fails(
    [`{"INSTRUCTION":"CONSTANT","NAME":"x"}`, `{"INSTRUCTION":"MEMORY","MEMORY":"4.5","NAME":"x"}`],
    2,
    /MEMORY must be an integer/,
  );
  fails(
    [...C("x", 4), `{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"x"}`],
    3,
    /does not follow a CONSTANT or CALL/,
  );
  fails(
    [...C("x", 4), `{"ARGS":["x"],"INSTRUCTION":"MUTATE","MUTATE":[3],"NAME":"add_","TIME":"1"}`],
    3,
    /argument indices below 1/,
  );
});

Deno.test("parseTrace() skips what precedes START, ignores unknown RELEASEs, marks backward calls", () => {
  const t = parseTrace([
    ...C("early", 4),
    `{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}`,
    ...C("x", 4),
    `{"INSTRUCTION":"RELEASE","NAME":"nobody"}`,
    `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["y"],"TIME":"3"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"y"}`,
    `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
    `{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"relu_backward","RESULT":["g"],"TIME":"3"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"g"}`,
    `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"g"}`,
  ].join("\n"));
  assert.deepEqual(t.events.map((e) => e.kind), ["constant", "call", "call"]);
  assert.deepEqual(t.events.map((e) => (e.kind === "call" ? e.backward : null)), [
    null,
    false,
    true,
  ]);
  assert.throws(
    () =>
      parseTrace(
        [
          `{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}`,
          `{"DST":"y","INSTRUCTION":"COPY","SRC":"early"}`,
        ].join("\n"),
      ),
    /undefined name "early"/,
  );
});

Deno.test("readTrace() names the file it cannot read", async () => {
  await assert.rejects(readTrace("/no/such/trace.log"), /cannot read trace \/no\/such\/trace\.log/);
});

Deno.test("parseTrace() keeps every number and every sum a safe integer, naming the line", () => {
  const big = String(2 ** 52);
  fails(
    [
      ...C("x", 2 ** 52),
      `{"INSTRUCTION":"CONSTANT","NAME":"y"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"${big}","NAME":"y"}`,
    ],
    4,
    /CONSTANT: the bytes allocated so far sum to 9007199254740992, past 2\^53 - 1/,
  );
  fails(
    [
      `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"9007199254740993","NAME":"x"}`,
    ],
    2,
    /MEMORY must be an integer >= 0/,
  );
  fails(
    [
      ...C("x", 4),
      `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"${2 ** 52}"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"y"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
      `{"ARGS":["y"],"INSTRUCTION":"MUTATE","MUTATE":["0"],"NAME":"g_","TIME":"${2 ** 52}"}`,
    ],
    6,
    /MUTATE g_: the TIMEs so far sum to 9007199254740992 ns, past 2\^53 - 1/,
  );
  // a MUTATE allocates a new version of the mutated storage: that counts too
  fails(
    [
      ...C("x", 2 ** 52),
      `{"ARGS":["x"],"INSTRUCTION":"MUTATE","MUTATE":["0"],"NAME":"g_","TIME":"1"}`,
    ],
    3,
    /MUTATE g_: the bytes allocated so far sum to 9007199254740992/,
  );
});

Deno.test("parseTrace() refuses a RELEASE of a tensor without references left", () => {
  fails(
    [...C("x", 4), `{"DST":"y","INSTRUCTION":"COPY","SRC":"x"}`, REL("x"), REL("y"), REL("x")],
    6,
    /RELEASE of "x": its tensor has no reference left/,
  );
  fails(
    [...C("x", 4), ...C("y", 4), REL("y"), `{"DST":"y","INSTRUCTION":"COPY_FROM","SRC":"x"}`],
    6,
    /COPY_FROM into "y": its tensor has no reference left/,
  );
  // Shared references: x, then its copy y, both released once: fine.
  const t = parseTrace(
    [...C("x", 4), `{"DST":"y","INSTRUCTION":"COPY","SRC":"x"}`, REL("x"), REL("y")].join("\n"),
  );
  assert.equal(t.events.length, 4);
});

const REL = (n: string) => `{"INSTRUCTION":"RELEASE","NAME":"${n}"}`;
