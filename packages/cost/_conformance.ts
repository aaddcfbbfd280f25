/**
 * The conformance suite every {@link CostModel} passes. Call it from the
 * implementation's test file.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { CostModel } from "./cost_model.ts";

/** Registers `Deno.test`s checking the `CostModel` contract for `make()`. */
export function costModelConformance(name: string, make: () => CostModel): void {
  Deno.test(`${name}: callCost is finite, non-negative and deterministic`, () => {
    const m = make();
    const calls = [
      { op: "relu", params: [1024], totalBytes: 4096, index: 0 },
      { op: "matmul", params: [1, 64, 32, 16, 0, 0], totalBytes: 2048, index: 1 },
      { op: "cudnn_convolution", params: [], totalBytes: 1 << 20, index: 2 },
    ];
    for (const c of calls) {
      const a = m.callCost(c, 5000), b = m.callCost(c, 5000);
      assert.ok(Number.isFinite(a) && a >= 0, `${c.op}: ${a}`);
      assert.equal(a, b, `${c.op} deterministic`);
    }
  });
  Deno.test(`${name}: swapCost is zero for 0 bytes and grows with bytes`, () => {
    const m = make();
    assert.equal(m.swapCost(0), 0);
    const small = m.swapCost(1 << 10), big = m.swapCost(1 << 30);
    assert.ok(Number.isFinite(small) && small > 0);
    assert.ok(big > small, `swapCost(1 GiB) = ${big} must exceed swapCost(1 KiB) = ${small}`);
  });
  Deno.test(`${name}: has a name`, () => {
    assert.ok(make().name.length > 0);
  });
}
