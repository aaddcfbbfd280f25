import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { Trace, TraceEvent } from "@libra/lineage/trace";
import { Runtime } from "./runtime.ts";
import { replayTrace, simulateTrace } from "./simulator.ts";
import { formatTrace, parseTrace } from "./trace.ts";

// x (constant, 1 KiB) -> a -> b -> c (1 KiB each, 100 ns a call); the program reads a on the
// host after the last call (READ_A), then releases a, b and c (END).
const LINES = [
  `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"x"}`,
  `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["a"],"TIME":"100"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"a"}`,
  `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"}`,
  `{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["b"],"TIME":"100"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"b"}`,
  `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"b"}`,
  `{"ARGS":["b"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["c"],"TIME":"100"}`,
  `{"INSTRUCTION":"MEMORY","MEMORY":"1024","NAME":"c"}`,
  `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"c"}`,
];
const READ_A = `{"INSTRUCTION":"READ","NAME":"a"}`;
const END = ["a", "b", "c"].map((n) => `{"INSTRUCTION":"RELEASE","NAME":"${n}"}`);

Deno.test("parseTrace() reads READ lines, formatTrace() writes them back", () => {
  const t = parseTrace([...LINES, READ_A].join("\n"), "read.log");
  assert.deepEqual(t.events.at(-1), { kind: "read", name: "a", line: 12 });
  const again = parseTrace(formatTrace(t), "again.log");
  assert.deepEqual(
    again.events.map(({ line: _, ...e }) => e),
    t.events.map(({ line: _, ...e }) => e),
  );
});

Deno.test("parseTrace() refuses a READ of an undefined or released name, naming the line", () => {
  assert.throws(
    () => parseTrace([...LINES, `{"INSTRUCTION":"READ","NAME":"zz"}`].join("\n"), "r.log"),
    /r\.log:12: READ: undefined name "zz"/,
  );
  assert.throws(
    () =>
      parseTrace([...LINES, `{"INSTRUCTION":"RELEASE","NAME":"a"}`, READ_A].join("\n"), "r.log"),
    /r\.log:13: READ of "a": its tensor has no reference left/,
  );
  assert.throws(
    () => parseTrace([...LINES, `{"INSTRUCTION":"READ"}`].join("\n"), "r.log"),
    /r\.log:12: READ: field NAME must be a string/,
  );
});

Deno.test("A recording Runtime records each host read of a value as a READ of its name", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), record: true, timeline: false });
  const x = rt.alloc(16), y = rt.alloc(16);
  rt.write(x, new Float32Array([1, -2, 3, -4]));
  rt.run("relu", [x], [y], [4]);
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], [1, 0, 3, 0]);
  const events = rt.trace().events;
  const call = events.find((e) => e.kind === "call") as Extract<TraceEvent, { kind: "call" }>;
  assert.deepEqual(events.at(-1), { kind: "read", name: call.results[0]!.name, line: 0 });
  // A runtime that does not record pays nothing for reads.
  const plain = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const z = plain.alloc(16);
  plain.write(z, new Float32Array(4));
  plain.read(z);
  assert.throws(() => plain.trace(), /startRecording/);
});

/** Replays of `trace` at 3 KiB (0.75 of the peak): x pinned, so a, b and c cannot all stay. */
function replays(trace: Trace) {
  const budgetBytes = 3 * 1024;
  return {
    full: replayTrace(trace, { budgetBytes, policy: "lru" }),
    fast: simulateTrace(trace, { policy: "lru", ratios: [budgetBytes / (4 * 1024)] }).results[0]!,
  };
}

Deno.test("Replays bring back a value the program reads on the host: both replayers recompute it", () => {
  const read = parseTrace([...LINES, READ_A, ...END].join("\n"), "read.log");
  const without = parseTrace([...LINES, ...END].join("\n"), "plain.log");
  // Without the read, lru evicts a (least recently used) for c and nothing comes back.
  const base = replays(without);
  assert.equal(base.full.stats.recomputeNs, 0);
  assert.ok(base.fast.feasible);
  assert.equal(base.fast.overhead, 1);
  // With it, a is recomputed from x (100 ns on 300 ns of compute), in both replayers.
  const r = replays(read);
  assert.ok(r.full.feasible);
  assert.equal(r.full.stats.recomputeNs, 100);
  assert.equal(r.full.overhead, 400 / 300);
  assert.ok(r.fast.feasible);
  assert.equal(r.fast.overhead, 400 / 300);
});
