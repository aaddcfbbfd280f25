import assert from "node:assert/strict";
import {
  createPolicy,
  type EvictablePool,
  type EvictionContext,
  type EvictionPolicy,
  SLOT_BYTES,
  SLOT_COMPUTE,
  SLOT_LAST_ACCESS,
  SLOT_STRIDE,
} from "@libra/evict";
import { StorageNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Pool } from "./_pool.ts";
import { Runtime } from "./runtime.ts";
import { trainSteppedMlp } from "./_mlp_testing.ts";

/** The first position whose copied fields differ from its member's own, or -1. */
function staleAt(pool: EvictablePool): number {
  const slots = pool.slots!;
  for (let i = 0; i < pool.size; i++) {
    const s = pool.at(i), o = i * SLOT_STRIDE;
    if (
      !Object.is(slots[o + SLOT_LAST_ACCESS], s.lastAccess) ||
      !Object.is(slots[o + SLOT_COMPUTE], s.compute) || slots[o + SLOT_BYTES] !== s.bytes
    ) return i;
  }
  return -1;
}

Deno.test("a deferred Pool, laid out at any point, holds what an eager one holds, in the same order", () => {
  for (const layOutAt of [0, 1, 500, 7_000, 19_999]) {
    const rng = mulberry32(11 + layOutAt);
    const nodes: StorageNode[] = [];
    const twins: StorageNode[] = []; // the eager pool's copies of the same storages
    for (let i = 0; i < 200; i++) {
      const bytes = 1 + Math.floor(rng() * 1000);
      nodes.push(new StorageNode(i, bytes));
      twins.push(new StorageNode(i, bytes));
    }
    const eager = new Pool(), deferred = new Pool(true);
    for (let step = 0; step < 20_000; step++) {
      if (step === layOutAt) {
        deferred.layOut(nodes);
        assert.equal(deferred.deferred, false);
      }
      const i = Math.floor(rng() * nodes.length), r = rng();
      if (r < 0.5) {
        eager.add(twins[i]!);
        deferred.add(nodes[i]!);
      } else if (r < 0.95) {
        eager.remove(twins[i]!);
        deferred.remove(nodes[i]!);
      } else {
        eager.touch(twins[i]!, step);
        deferred.touch(nodes[i]!, step);
      }
      assert.equal(deferred.size, eager.size);
      assert.equal(deferred.bytes, eager.bytes);
      if (step % 211 === 0 || step === 19_999) {
        for (let j = 0; j < nodes.length; j++) {
          assert.equal(nodes[j]!.poolIndex !== -1, twins[j]!.poolIndex >= 0, `membership of ${j}`);
        }
        if (!deferred.deferred) {
          assert.deepEqual([...deferred].map((s) => s.id), [...eager].map((s) => s.id));
          assert.equal(staleAt(deferred), -1);
        }
      }
    }
  }
  // Read before it is laid out, or laid out from storages missing a member: errors.
  const p = new Pool(true);
  const s = new StorageNode(0, 8);
  p.add(s);
  assert.throws(() => [...p], /deferred pool is iterated before layOut/);
  assert.throws(() => p.layOut([]), /1 members marked, 0 found/);
});

Deno.test("Pool keeps insertion order (and its positions in it), positions, bytes and the copied fields under random churn", () => {
  const rng = mulberry32(7);
  const nodes: StorageNode[] = [];
  for (let i = 0; i < 300; i++) {
    const s = new StorageNode(i, 1 + Math.floor(rng() * 1000));
    s.compute = Math.floor(rng() * 50) / 4;
    s.lastAccess = rng() < 0.1 ? -Infinity : Math.floor(rng() * 100);
    nodes.push(s);
  }
  const pool = new Pool();
  const order: StorageNode[] = []; // the oracle: members in insertion order
  for (let step = 0; step < 20_000; step++) {
    const s = nodes[Math.floor(rng() * nodes.length)]!;
    const r = rng();
    if (r < 0.45) {
      pool.add(s);
      if (!order.includes(s)) order.push(s);
    } else if (r < 0.9) {
      pool.remove(s);
      const j = order.indexOf(s);
      if (j >= 0) order.splice(j, 1);
    } else {
      pool.touch(s, step);
      s.compute += 1;
      pool.sync(s);
    }
    if (step % 97 === 0 || step > 19_900) {
      assert.deepEqual([...pool], order);
      assert.equal(pool.size, order.length);
      const at = pool.order(new Int32Array(pool.size));
      assert.deepEqual([...at].map((i) => pool.at(i)), order, "order(): positions by age");
      for (let i = 0; i < pool.size; i++) assert.equal(pool.at(i).poolIndex, i);
      assert.equal(pool.bytes, order.reduce((a, x) => a + x.bytes, 0));
      assert.equal(staleAt(pool), -1);
      assert.equal(pool.stale(), null);
    }
  }
  for (const s of nodes) if (!order.includes(s)) assert.equal(s.poolIndex, -1);
  // A field written past the pool is found.
  const m = pool.at(0);
  m.lastAccess += 1;
  assert.equal(pool.stale(), m);
});

/** `inner`, checking at every choice that the pool's copies equal the storages' own fields. */
function checking(inner: EvictionPolicy): EvictionPolicy & { checks: number } {
  const p = {
    name: inner.name,
    needs: inner.needs ?? {},
    checks: 0,
    choose(ctx: EvictionContext) {
      assert.ok(ctx.pool.slots !== undefined, "the runtime's pool keeps slots");
      const at = staleAt(ctx.pool);
      assert.equal(at, -1, `position ${at}: copied fields differ from the storage's`);
      p.checks++;
      return inner.choose(ctx);
    },
  };
  return p;
}

const free = (() => {
  const rt = new Runtime({ backend: new ReferenceBackend() });
  train(rt);
  return rt.stats.peakBytes;
})();

/** SGD steps of an MLP with dropout (in-place updates, step ends): the losses. */
function train(rt: Runtime): number[] {
  return trainSteppedMlp(rt).losses;
}

for (const policy of ["dtr-eq", "dtr-local", "lru"]) {
  for (const mode of ["sqrt", "full"] as const) {
    Deno.test(`the live pool's copied fields are current at every choice: ${policy}, ${mode}`, () => {
      const p = checking(createPolicy(policy, { mode }));
      const rt = new Runtime({
        backend: new ReferenceBackend(),
        budget: Math.floor(free * 0.6),
        policy: p,
        timeline: false,
      });
      train(rt);
      assert.ok(p.checks > 10, `the budget forced choices (${p.checks})`);
    });
  }
}
