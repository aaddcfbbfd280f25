import assert from "node:assert/strict";
import type { KernelName } from "@libra/tensor/kernels";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { DISPATCH_SAMPLE, Runtime } from "./runtime.ts";
import { SEARCH_SAMPLE } from "./_eviction.ts";
import { slowOldest, spin } from "./_policy_testing.ts";

/** The reference backend whose kernels each take `ms` milliseconds more. */
class SlowBackend extends ReferenceBackend {
  constructor(readonly ms: number) {
    super();
  }
  override run(
    kernel: KernelName,
    inputs: Parameters<ReferenceBackend["run"]>[1],
    outputs: Parameters<ReferenceBackend["run"]>[2],
    params: readonly number[],
  ): void {
    spin(this.ms);
    super.run(kernel, inputs, outputs, params);
  }
}

/** `calls` relu calls, each into a new buffer, the previous one freed (16 floats). */
function stream(rt: Runtime, calls: number): void {
  const x = rt.alloc(64);
  rt.write(x, new Float32Array(16).fill(1));
  let prev = x;
  for (let i = 0; i < calls; i++) {
    const y = rt.alloc(64);
    rt.run("relu", [prev], [y], [16]);
    if (prev !== x) rt.free(prev);
    prev = y;
  }
}

Deno.test("Runtime times one kernel call in DISPATCH_SAMPLE into dispatchNs", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  stream(rt, DISPATCH_SAMPLE - 1);
  assert.equal(rt.stats.dispatchNs, 0, "no call sampled yet");
  stream(rt, 100 * DISPATCH_SAMPLE);
  assert.ok(rt.stats.dispatchNs > 0, "the sampled calls were timed");
  // The analytic cost model times no kernel: a sample's timing is its own.
  assert.equal(rt.stats.kernelNs, 0);
});

Deno.test("Runtime: a dispatch sample leaves out the kernel's time", () => {
  // Kernels of 2 ms: counted in, 5 samples would put 5 x DISPATCH_SAMPLE x 2 ms into dispatchNs.
  const rt = new Runtime({ backend: new SlowBackend(2), timeline: false });
  stream(rt, 5 * DISPATCH_SAMPLE);
  const perSample = rt.stats.dispatchNs / 5 / DISPATCH_SAMPLE / 1e6;
  assert.ok(perSample > 0);
  assert.ok(perSample < 0.5, `dispatch per sampled call ${perSample} ms of a 2 ms kernel`);
});

Deno.test("Runtime: a dispatch sample leaves out the backend's allocations", () => {
  // Allocations of 2 ms, one a call: every output a size not seen before (no cached buffer
  // serves it), the budget-free copy of a program allocating as often.
  class SlowAlloc extends ReferenceBackend {
    override alloc(bytes: number): DeviceBuffer {
      spin(2);
      return super.alloc(bytes);
    }
  }
  const rt = new Runtime({ backend: new SlowAlloc(), timeline: false });
  for (let i = 1; i <= 5 * DISPATCH_SAMPLE; i++) {
    const y = rt.alloc(4 * i);
    rt.run("fill", [], [y], [i, 1]);
    rt.free(y);
  }
  assert.ok(rt.stats.dispatchNs > 0, "the sampled calls were timed");
  const perSample = rt.stats.dispatchNs / 5 / DISPATCH_SAMPLE / 1e6;
  assert.ok(perSample < 0.5, `dispatch per sampled call ${perSample} ms beside 2 ms allocations`);
});

Deno.test("Runtime: a dispatch sample leaves out the bookkeeping it counted", () => {
  // A policy whose search takes 2 ms, and a budget of two 64-byte values: a call whose
  // output does not fit (every one from the third) searches, and the search is bookkeeping.
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    budget: 3 * 64,
    policy: slowOldest(2),
    timeline: false,
    eagerEviction: false,
  });
  // Each call keeps its input: the chain grows and every call past the budget evicts.
  const x = rt.alloc(64);
  rt.write(x, new Float32Array(16).fill(1));
  let prev = x;
  for (let i = 0; i < 5 * DISPATCH_SAMPLE; i++) {
    const y = rt.alloc(64);
    rt.run("relu", [prev], [y], [16]);
    prev = y;
  }
  const st = rt.stats;
  assert.ok(st.evictions >= 4 * DISPATCH_SAMPLE, `${st.evictions} evictions`);
  // Every search counted (those outside dispatch samples through a sample: all but the
  // last gap's, up to 2 x SEARCH_SAMPLE - 1).
  assert.ok(
    st.bookkeepingNs >= (st.evictions - (2 * SEARCH_SAMPLE - 1)) * 2e6,
    "each search counted as bookkeeping",
  );
  const perSample = st.dispatchNs / 5 / DISPATCH_SAMPLE / 1e6;
  assert.ok(perSample < 0.5, `dispatch per sampled call ${perSample} ms beside 2 ms searches`);
});
