/**
 * The runtime's bookkeeping leaves nothing for the garbage collector's young
 * generation to keep: after a full collection (which promotes whatever is
 * live at that moment), a training-like loop's lineage dies young again. A
 * long-lived `Set` or `Map` churned on every call broke that: each outgrown
 * hash table pointed at the next, and every minor collection then copied and
 * promoted the storages the dead tables still named, with the graphs behind
 * them (5 to 10 MB per scavenge). The oracle is V8's own heap accounting:
 * what two minor collections leave over the heap after a full one, against
 * what the loop allocated. Needs `--v8-flags=--expose-gc` (as `deno task
 * test` runs); skipped without it.
 */

import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { Runtime } from "./runtime.ts";

const gc = (globalThis as { gc?: (o?: { type: "minor" | "major" }) => void }).gc;

/**
 * Runs `step` (which leaves `rt`'s table empty) `warm` times, collects fully,
 * runs it `steps` times more, collects twice in the young generation only,
 * and checks that the loop allocated megabytes of which well under 1 MB
 * outlived those minor collections.
 */
function checkDiesYoung(rt: Runtime, step: () => void, warm: number, steps: number): void {
  for (let i = 0; i < warm; i++) step();
  const used = () => Deno.memoryUsage().heapUsed;
  gc!();
  gc!();
  const base = used();
  let peak = base;
  for (let i = 0; i < steps; i++) {
    step();
    if (i % 100 === 0 || steps < 100) peak = Math.max(peak, used());
  }
  gc!({ type: "minor" });
  gc!({ type: "minor" });
  const kept = used() - base;
  // The loop's garbage is many MB (the heap grew by `peak - base` at the least
  // between collections); a minor collection keeps well under 1 MB of it.
  assert.ok(peak - base > 2e6, `the loop allocated only ${peak - base} bytes`);
  assert.ok(kept < 1e6, `${kept} bytes outlived two minor collections`);
  assert.equal(rt.lineage.storages.size, 0);
}

Deno.test({
  name: "minor collections free the lineage of finished steps after a full collection",
  ignore: typeof gc !== "function",
  fn() {
    const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
    const n = 16, bytes = 4 * n, data = new Float32Array(n).fill(1);
    // A step: a host write (a leaf), a chain computed from it, everything freed.
    checkDiesYoung(
      rt,
      () => {
        const x = rt.alloc(bytes);
        rt.write(x, data);
        const made: DeviceBuffer[] = [];
        let prev = x;
        for (let i = 0; i < 6; i++) {
          const y = rt.alloc(bytes);
          rt.run("relu", [prev], [y], [n]);
          made.push(y);
          prev = y;
        }
        for (const b of made) rt.free(b);
        rt.free(x);
        rt.endStep();
      },
      500,
      4000,
    );
  },
});

Deno.test({
  name: "minor collections free the lineage of long steps after a full collection",
  ignore: typeof gc !== "function",
  fn() {
    // Steps of 3000 calls, each value freed as soon as it is made: the runtime's list of the
    // values a step named outgrows the table at once and is given up on. Kept to the step's
    // end, or left to die in the old generation, it kept dead lineage alive through minor
    // collections (a full one promotes it).
    const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
    const n = 4, bytes = 4 * n, data = new Float32Array(n).fill(1);
    checkDiesYoung(
      rt,
      () => {
        const x = rt.alloc(bytes);
        rt.write(x, data);
        for (let i = 0; i < 3000; i++) {
          const y = rt.alloc(bytes);
          rt.run("relu", [x], [y], [n]);
          rt.free(y);
        }
        rt.free(x);
        rt.endStep();
      },
      3,
      12,
    );
  },
});
