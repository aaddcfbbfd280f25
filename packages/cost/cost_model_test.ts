import assert from "node:assert/strict";
import { costModelConformance } from "./_conformance.ts";
import {
  AnalyticCostModel,
  Clock,
  DEVICE_PEAKS,
  FrozenProfileCostModel,
  liveCostModel,
  MeasuredCostModel,
  ProfiledCostModel,
  SwapCost,
} from "./cost_model.ts";

costModelConformance("measured", () => new MeasuredCostModel());
costModelConformance("analytic", () => new AnalyticCostModel());
costModelConformance("analytic(h100)", () => new AnalyticCostModel(DEVICE_PEAKS.h100!));
costModelConformance(
  "profiled",
  () => new ProfiledCostModel([{ op: "relu", timeNs: 7 }, { op: "matmul", timeNs: 9 }]),
);

Deno.test("MeasuredCostModel returns the measured time, else the fallback", () => {
  const m = new MeasuredCostModel({ fallbackNs: 3 });
  assert.equal(m.callCost({ op: "relu", params: [4], totalBytes: 16 }, 1234), 1234);
  assert.equal(m.callCost({ op: "relu", params: [4], totalBytes: 16 }), 3);
});

Deno.test("AnalyticCostModel is the roofline of the kernel table's flops and bytes", () => {
  const m = new AnalyticCostModel({ flopsPerS: 1e12, memBytesPerS: 1e11, launchNs: 100 });
  // matmul 1x(64x32)@(32x16): 2*64*16*32 = 65536 flops -> 65.5 ns; bytes (64*32 + 32*16 + 64*16)*4 = 14336 -> 143.36 ns
  assert.equal(
    m.callCost({ op: "matmul", params: [1, 64, 16, 32, 0, 0, 0, 0], totalBytes: 4096 }),
    Math.round(100 + 143.36),
  );
  // An operator outside the kernel table (a trace name) costs launch + its output bytes.
  assert.equal(m.callCost({ op: "cudnn_convolution", params: [], totalBytes: 1e6 }), 100 + 1e4);
});

Deno.test("ProfiledCostModel uses the call at the same index, else the op's median", () => {
  const m = new ProfiledCostModel([
    { op: "a", timeNs: 10 },
    { op: "b", timeNs: 50 },
    { op: "a", timeNs: 30 },
    { op: "a", timeNs: 20 },
  ], { fallbackNs: 1 });
  assert.equal(m.callCost({ op: "a", params: [], index: 2, totalBytes: 0 }), 30);
  assert.equal(
    m.callCost({ op: "a", params: [], index: 1, totalBytes: 0 }),
    20,
    "op mismatch: median of 10, 20, 30",
  );
  assert.equal(m.callCost({ op: "z", params: [], totalBytes: 0 }), 1);
});

Deno.test("SwapCost is latency plus bytes over bandwidth, and rejects bad settings", () => {
  const s = new SwapCost({ bandwidthBytesPerS: 2e9, latencyNs: 500 });
  assert.equal(s.swapCost(2e9), 500 + 1e9);
  assert.throws(() => new SwapCost({ bandwidthBytesPerS: 0 }), /bandwidth must be > 0/);
});

Deno.test("Clock advances by cost and ignores negative steps", () => {
  const c = new Clock();
  assert.equal(c.now, 1);
  c.advance(10);
  c.advance(-5);
  assert.equal(c.now, 11);
});

costModelConformance("profiled (frozen warm-up)", () => {
  const m = new FrozenProfileCostModel();
  m.callCost({ op: "relu", params: [1024], totalBytes: 4096, index: 0 }, 100);
  m.freeze();
  return m;
});

Deno.test("FrozenProfileCostModel: records the fastest time per index, then ignores measurements", () => {
  const m = new FrozenProfileCostModel({ fallbackNs: 2 });
  const relu = { op: "relu", params: [4], totalBytes: 16, index: 0 };
  const mm = { op: "matmul", params: [1, 2, 2, 2, 0, 0, 0, 0], totalBytes: 16, index: 1 };
  // while recording, the measured time is the cost
  assert.equal(m.callCost(relu, 500), 500);
  assert.equal(m.callCost(mm, 3000), 3000);
  assert.equal(m.callCost(relu, 400), 400);
  assert.equal(m.callCost(mm, 9000), 9000);
  assert.equal(m.recordedCalls, 2);
  assert.equal(m.frozen, false);
  m.freeze();
  assert.equal(m.frozen, true);
  // frozen: the fastest recorded time per index, whatever is measured now
  assert.equal(m.callCost(relu, 1), 400);
  assert.equal(m.callCost(relu, 1e9), 400);
  assert.equal(m.callCost(mm, 1), 3000);
  // another op at a recorded index: that op's median; an unknown op: the fallback
  assert.equal(m.callCost({ ...mm, index: 0 }), 3000);
  assert.equal(m.callCost({ op: "gelu", params: [], totalBytes: 4, index: 7 }, 123), 2);
});

Deno.test("FrozenProfileCostModel: an op change at an index restarts that index's profile", () => {
  const m = new FrozenProfileCostModel();
  m.callCost({ op: "relu", params: [], totalBytes: 4, index: 3 }, 100);
  m.callCost({ op: "add", params: [], totalBytes: 4, index: 3 }, 700);
  m.freeze();
  assert.equal(m.callCost({ op: "add", params: [], totalBytes: 4, index: 3 }), 700);
  assert.equal(m.callCost({ op: "relu", params: [], totalBytes: 4, index: 3 }, 5), 1);
});

Deno.test("liveCostModel: names the three live models and rejects others with the choices", () => {
  assert.ok(liveCostModel("analytic") instanceof AnalyticCostModel);
  assert.equal((liveCostModel("analytic", "cuda") as AnalyticCostModel).peaks, DEVICE_PEAKS.h100);
  assert.ok(liveCostModel("profiled") instanceof FrozenProfileCostModel);
  assert.ok(liveCostModel("measured") instanceof MeasuredCostModel);
  assert.throws(
    () => liveCostModel("magic"),
    /unknown cost model "magic".*analytic, profiled, measured/,
  );
});
