import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { Runtime } from "./runtime.ts";

/**
 * The decisions of the step after `warm` identical steps: a forward chain of 3000 values of 64
 * bytes from one input, all held, then read and freed from the last (a backward), under half
 * the step's peak. The pool passes 1024 members, so the default search samples.
 */
function stepAfter(warm: number): { decisions: string[]; sampled: boolean } {
  const n = 3000, bytes = 64;
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    timeline: false,
    budget: Math.floor(0.5 * n * bytes),
  });
  const x = rt.alloc(bytes);
  rt.write(x, new Float32Array(16).fill(1));
  let poolPeak = 0;
  const step = () => {
    const values: DeviceBuffer[] = [];
    let prev = x;
    for (let i = 0; i < n; i++) {
      const y = rt.alloc(bytes);
      rt.run("relu", [prev], [y], [16]);
      values.push(y);
      prev = y;
      poolPeak = Math.max(poolPeak, rt.engine.evictableBytes / bytes);
    }
    for (let i = n - 1; i >= 0; i--) {
      rt.read(values[i]!);
      rt.free(values[i]!);
    }
    rt.endStep();
  };
  for (let i = 0; i < warm; i++) step();
  rt.engine.recordDecisions = true;
  step();
  // Names carried out of a step take its number as a prefix: compare the step's own names.
  return {
    decisions: rt.engine.decisions.map((d) => d.replace(/:s\d+\./, ":")),
    sampled: poolPeak > 1024,
  };
}

Deno.test("a step's eviction choices do not depend on how many steps ran before it (a sampled search's draws restart at each step)", () => {
  const a = stepAfter(1), b = stepAfter(2), c = stepAfter(3);
  assert.ok(a.sampled, "the pool passed 1024 members: the search sampled");
  assert.ok(a.decisions.length > 1000, `${a.decisions.length} decisions`);
  assert.deepEqual(b.decisions, a.decisions);
  assert.deepEqual(c.decisions, a.decisions);
});
