import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { Runtime } from "./runtime.ts";

const n = 16, bytes = 4 * n;

function runtime(): { rt: Runtime; x: DeviceBuffer } {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  const x = rt.alloc(bytes);
  rt.write(x, new Float32Array(n).fill(1));
  return { rt, x };
}

/**
 * A chain of `length` values from `x`, each freed once the next is made: the
 * one held needs every value before it (to be recomputed), so the chain is
 * live lineage until its last value is freed, at the end.
 */
function heldChain(rt: Runtime, x: DeviceBuffer, length: number): void {
  let prev = x;
  for (let i = 0; i < length; i++) {
    const y = rt.alloc(bytes);
    rt.run("relu", [prev], [y], [n]);
    if (prev !== x) rt.free(prev);
    prev = y;
  }
  rt.free(prev);
}

/** `chains` chains of 64 values from `x`, each value freed once the next is made; the sizes of the table after each. */
function deadChains(rt: Runtime, x: DeviceBuffer, chains: number): number[] {
  const sizes: number[] = [];
  for (let c = 0; c < chains; c++) {
    heldChain(rt, x, 64);
    sizes.push(rt.lineage.storages.size);
  }
  return sizes;
}

Deno.test("collections that find the lineage still live are not repeated at every pile of releases", () => {
  const { rt, x } = runtime();
  // Steps of one 3000-value chain: its releases would trigger two collections a step
  // (over 1024 releases and half the table) that free nothing, and the step's end one
  // that frees it all.
  const steps = 8;
  for (let s = 0; s < steps; s++) {
    heldChain(rt, x, 3000);
    rt.endStep();
    // the step's end freed the chain: only x is left
    assert.equal(rt.lineage.storages.size, 1, "storages after a step");
  }
  const mid = rt.stats.collections - steps;
  assert.ok(mid >= 1, "the first step's releases triggered a collection");
  assert.ok(mid <= 3, `${mid} collections during the steps (two a step without the wait)`);
});

Deno.test("collections that free dead lineage keep the table bounded without step ends", () => {
  const { rt, x } = runtime();
  const sizes = deadChains(rt, x, 400); // 25600 calls, every chain dead once made
  assert.ok(rt.stats.collections >= 10, `${rt.stats.collections} collections`);
  assert.ok(Math.max(...sizes) < 3000, `the table reached ${Math.max(...sizes)} storages`);
});

Deno.test("a collection that frees dead lineage ends the wait that live lineage started", () => {
  const { rt, x } = runtime();
  // Without step ends: a long live chain (its collections free nothing, the wait grows),
  // then dead chains (the first collection past the wait frees them; the table stays
  // bounded after it as in the test above).
  heldChain(rt, x, 12000);
  const sizes = deadChains(rt, x, 1200); // 76800 calls
  const late = sizes.slice(sizes.length / 2);
  assert.ok(Math.max(...late) < 3000, `the table reached ${Math.max(...late)} storages late`);
});
