import assert from "node:assert/strict";
import { plannerContext } from "@libra/runtime";
import { plannerConformance } from "./_conformance.ts";
import { chainTrace } from "./_planner_testing.ts";
import { ChenSqrtPlanner } from "./chen_sqrt_planner.ts";

const KiB = 1024;

plannerConformance(
  "chen-sqrt (chain of 9)",
  () => new ChenSqrtPlanner(),
  chainTrace(9),
  plannerContext(chainTrace(9)),
  [0.9, 0.7, 0.6],
);

// chainTrace(9): forward calls 0..8 make h0..h8; backward call 9 + j reads
// h(8-j), so h_i's last forward use is call i + 1 and its backward use 17 - i.
Deno.test("ChenSqrtPlanner.plan() keeps sqrt(N) checkpoints and recomputes segment-wise", () => {
  const t = chainTrace(9);
  const plan = new ChenSqrtPlanner().plan(t, 8 * KiB);
  // 3 segments [0..2] [3..5] [6..8]: checkpoints h2, h5, h8; the rest is
  // dropped after its last forward use and recomputed, one segment at a time,
  // before the segment's first backward use (h7: 10, h4: 13, h1: 16).
  assert.deepEqual(plan.stats, {
    forwardCalls: 9,
    segments: 3,
    checkpoints: 3,
    recomputes: 6,
    unusedDrops: 0,
  });
  assert.deepEqual(plan.steps, [
    { kind: "evict", call: 1, tensor: "h0", action: "drop" },
    { kind: "evict", call: 2, tensor: "h1", action: "drop" },
    { kind: "evict", call: 4, tensor: "h3", action: "drop" },
    { kind: "evict", call: 5, tensor: "h4", action: "drop" },
    { kind: "evict", call: 7, tensor: "h6", action: "drop" },
    { kind: "evict", call: 8, tensor: "h7", action: "drop" },
    { kind: "restore", call: 10, tensor: "h6" },
    { kind: "restore", call: 10, tensor: "h7" },
    { kind: "restore", call: 13, tensor: "h3" },
    { kind: "restore", call: 13, tensor: "h4" },
    { kind: "restore", call: 16, tensor: "h0" },
    { kind: "restore", call: 16, tensor: "h1" },
  ]);
  const ctx = plannerContext(t);
  assert.equal(ctx.baselinePeakBytes, 11 * KiB, "x, h0..h8, g8");
  const r = ctx.replay(plan, Infinity);
  // before call 10: x, h2, h5, g8 and the recomputed h6, h7, then g7: 7 KiB
  assert.equal(r.peakBytes, 7 * KiB);
  // each dropped tensor is recomputed once: 6 x 100 ns over 18 x 100 ns
  assert.equal(r.overhead, (1800 + 600) / 1800);
});

Deno.test("ChenSqrtPlanner honours an explicit segment count and rejects a bad one", () => {
  const one = new ChenSqrtPlanner({ segments: 1 }).plan(chainTrace(9), 1);
  assert.equal(one.stats.checkpoints, 1, "one segment: only its end, h8, is kept");
  assert.equal(one.stats.recomputes, 8);
  assert.throws(() => new ChenSqrtPlanner({ segments: 0 }), /segments must be an integer >= 1/);
});

Deno.test("ChenSqrtPlanner.plan() without a backward pass only drops values held past their last use", () => {
  // The forward half of chainTrace(4): h0..h3 stay referenced until the end,
  // h0 is last read by call 1, h1 by call 2; h2 by the last call (nothing to gain).
  const t = { events: chainTrace(4).events.filter((e) => e.kind !== "call" || !e.backward) };
  const plan = new ChenSqrtPlanner().plan(t, 1024);
  assert.deepEqual(plan.steps, [
    { kind: "evict", call: 1, tensor: "h0", action: "drop" },
    { kind: "evict", call: 2, tensor: "h1", action: "drop" },
  ]);
  assert.equal(plan.stats.unusedDrops, 2);
  assert.equal(plan.stats.recomputes, 0);
});
