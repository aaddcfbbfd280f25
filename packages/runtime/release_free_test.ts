/**
 * A release frees at once what no one can need again: the last value of a
 * forward chain, released, takes with it the evicted values of the chain it
 * was computed from, without a collection, while what a held value may be
 * recomputed from stays and recomputes right. Oracles: the lineage table
 * (which storages exist), and values computed by hand (each link doubles).
 */

import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { DeviceBuffer } from "@libra/tensor/backend";
import type { StorageNode } from "@libra/lineage";
import type { EvictionPolicy } from "@libra/evict";
import { Runtime } from "./runtime.ts";
import { OLDEST_FIRST } from "./dispatch_stream.ts";

const X = [1, -2, 3, 0.5];

/** `x` and a chain of `n` values, each its predecessor doubled (`add` of it with itself). */
function chain(rt: Runtime, n: number): { x: DeviceBuffer; vs: DeviceBuffer[] } {
  const x = rt.alloc(16);
  rt.write(x, new Float32Array(X));
  const vs: DeviceBuffer[] = [];
  let prev = x;
  for (let i = 0; i < n; i++) {
    const y = rt.alloc(16);
    rt.run("add", [prev, prev], [y], [1, 4, 1, 1]);
    vs.push(y);
    prev = y;
  }
  return { x, vs };
}

/** Which of `bufs` the lineage still has (by index). */
function present(rt: Runtime, bufs: DeviceBuffer[]): number[] {
  const out: number[] = [];
  bufs.forEach((b, i) => {
    if (rt.lineage.storages.has((b as unknown as StorageNode).id)) out.push(i);
  });
  return out;
}

Deno.test("releasing a chain's last value frees its evicted predecessors at once, and keeps what a held value needs", () => {
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false, budget: 1 << 20 });
  const { x, vs } = chain(rt, 10);
  for (let i = 0; i < 10; i++) if (i !== 5) rt.free(vs[i]!);
  assert.equal(rt.stats.collections, 0, "no collection ran");
  // v6..v9 die with v9; v0..v4 stay (evicted): v5 is held and computed from them.
  assert.deepEqual(present(rt, vs), [0, 1, 2, 3, 4, 5]);
  // v5, evicted, comes back from x through v0..v4: 2^6 x.
  const v5 = vs[5]! as unknown as StorageNode;
  rt.engine.evict(v5, "drop", "policy");
  assert.equal(v5.residency, "evicted");
  const got = new Float32Array(rt.read(vs[5]!).slice().buffer);
  assert.deepEqual([...got], X.map((v) => 64 * v));
  rt.free(vs[5]!);
  assert.deepEqual(present(rt, vs).includes(5), false, "v5 freed on release");
  rt.endStep();
  assert.deepEqual(present(rt, vs), [], "the collection frees the re-materialized rest");
  assert.deepEqual(present(rt, [x]), [0], "x is held");
});

Deno.test("under a plan's hooks a release leaves the chain to the collection (a plan may name it)", () => {
  const policy: EvictionPolicy = { ...OLDEST_FIRST, hooks: { afterCall: () => {} } };
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    timeline: false,
    budget: 1 << 20,
    policy,
  });
  const { vs } = chain(rt, 6);
  for (const v of vs) rt.free(v);
  assert.equal(rt.stats.collections, 0);
  assert.deepEqual(present(rt, vs), [0, 1, 2, 3, 4, 5], "dropped, kept for the collection");
  rt.endStep();
  assert.deepEqual(present(rt, vs), []);
});
