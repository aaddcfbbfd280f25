import assert from "node:assert/strict";
import { costModelConformance } from "./_conformance.ts";
import {
  AnalyticCostModel,
  Clock,
  DEVICE_PEAKS,
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
