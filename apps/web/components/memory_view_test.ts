/** The memory chart's aggregation against counts made independently, event by event. */
import assert from "node:assert/strict";
import { MAX_DOTS, memoryCaption, memoryView } from "./memory_view.ts";
import { syntheticTimeline } from "./_synthetic_timeline.ts";

Deno.test("a 400-step, 60k-call run is aggregated per step with every event counted", () => {
  const { memory, stats } = syntheticTimeline(400, 150);
  assert.ok(memory.markers.length > MAX_DOTS);
  const v = memoryView(memory, stats);
  assert.equal(v.mode, "bins");
  assert.equal(v.binUnit, "step");
  assert.equal(v.bins.length, 400);
  // oracle: count each step's events by scanning the markers with the step's call range
  for (const s of [0, 1, 199, 399]) {
    const inStep = memory.markers.filter((m) => Math.floor(m.t / 150) === s);
    const ev = inStep.filter((m) => m.kind === "drop" || m.kind === "swap-out").length;
    assert.equal(v.bins[s]!.evictions, ev, `step ${s} evictions`);
    assert.equal(v.bins[s]!.remats, inStep.length - ev, `step ${s} remats`);
    const bytes = memory.samples.filter(([t]) => Math.floor(t / 150) === s).map(([, b]) => b);
    assert.equal(v.bins[s]!.min, Math.min(...bytes));
    assert.equal(v.bins[s]!.max, Math.max(...bytes));
  }
  const sum = (k: "evictions" | "remats") => v.bins.reduce((a, b) => a + b[k], 0);
  assert.equal(sum("evictions"), stats.drops + stats.swapOuts);
  assert.equal(sum("remats"), stats.remats + stats.swapIns);
  const caption = memoryCaption(v, "KiB", 1024);
  assert.match(caption, /all 400 steps \(60,000 calls\)/);
  assert.ok(
    caption.includes(`all ${(stats.drops + stats.swapOuts).toLocaleString("en-US")} evictions`),
    caption,
  );
  assert.doesNotMatch(caption, /not recorded/);
});

Deno.test("zooming into a step draws each of its events and only those", () => {
  const { memory, stats } = syntheticTimeline(30, 1000, 7);
  const all = memoryView(memory, stats);
  assert.equal(all.mode, "bins");
  const v = memoryView(memory, stats, { step: 12 });
  assert.equal(v.mode, "events");
  assert.deepEqual(v.zoom, { step: 12, from: 12_000, to: 13_000 });
  const expected = memory.markers.filter((m) => m.t >= 12_000 && m.t < 13_000);
  assert.equal(v.markers.length, expected.length);
  assert.deepEqual(v.markers.map((m) => m.t), expected.map((m) => m.t));
  assert.equal(v.shown.evictions + v.shown.remats, expected.length);
  assert.equal(v.shown.evictions, all.bins[12]!.evictions);
  assert.ok(v.samples.every(([t]) => t >= 12_000 && t < 13_000));
  assert.match(memoryCaption(v, "KiB", 1024), /step 13 of 30 \(calls 12,000–12,999\)/);
  // out-of-range steps are clamped to the last one rather than showing nothing
  assert.equal(memoryView(memory, stats, { step: 99 }).zoom!.step, 29);
});

Deno.test("a timeline that kept fewer events than the run made says so", () => {
  const { memory, stats } = syntheticTimeline(3, 100, 3);
  const kept = { ...memory, markers: memory.markers.slice(0, 5) };
  const v = memoryView(kept, stats);
  assert.equal(v.mode, "events");
  assert.equal(v.markers.length, 5);
  const caption = memoryCaption(v, "KiB", 1024);
  const total = stats.drops + stats.swapOuts;
  assert.match(caption, new RegExp(`The run made ${total} evictions`));
  assert.match(caption, /not recorded/);
});

Deno.test("without steps (a trace replay) the chart bins equal windows", () => {
  const { memory } = syntheticTimeline(1, 50_000, 5);
  const v = memoryView(memory, { calls: 50_000 });
  assert.equal(v.mode, "bins");
  assert.equal(v.binUnit, "window");
  assert.equal(v.bins.length, 100);
  assert.equal(v.bins.reduce((a, b) => a + b.evictions + b.remats, 0), memory.markers.length);
  assert.equal(v.bins[0]!.from, 0);
  assert.equal(v.bins.at(-1)!.to, 50_000);
});

Deno.test("a timeline shorter than its steps is not cut into steps", () => {
  const { memory } = syntheticTimeline(1, 14, 2);
  const v = memoryView(memory, { calls: 14, steps: 30 });
  assert.equal(v.mode, "events");
  assert.equal(v.binUnit, "window");
  assert.doesNotMatch(memoryCaption(v, "KiB", 1024), /30 steps/);
});
