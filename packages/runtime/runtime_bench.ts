/**
 * Benchmarks: the runtime's dispatch cost side by side with raw backend calls
 * (the native cpu backend, each group's baseline; the targets: at most 1 us
 * added per call at an unlimited budget, 2 us with 10k live storages while
 * evicting; the evicting group also runs a policy whose choice costs nothing,
 * to tell the runtime's own work from DTR's sampled search); bookkeeping per
 * kernel call with 1k and 10k live storages (a
 * no-op executor isolates the runtime's own work); `dtr-eq`'s full scan over
 * the runtime's pool (slots, bounds, kept floors) beside the plain scan that
 * scores every member; and simulator throughput on the shared DTR traces
 * (calls per second = calls per replay / time).
 */

import { AnalyticCostModel } from "@libra/cost";
import { createPolicy, type EvictionContext } from "@libra/evict";
import { arrayPool } from "@libra/evict/conformance";
import { type CallNode, Lineage, type StorageNode, type TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { Pool } from "./_pool.ts";
import { Engine, type Executor } from "./engine.ts";
import { parseTrace, type Trace } from "./trace.ts";
import { replayTrace } from "./simulator.ts";
import { Runtime, type RuntimeOptions } from "./runtime.ts";
import { dispatchStream, OLDEST_FIRST, STREAM_VALUE_BYTES } from "./dispatch_stream.ts";
import type { Backend } from "@libra/tensor/backend";

/**
 * `make()`'s function, made on the first call: each benchmark builds its state
 * when it starts (the warm-up absorbs that call), so that none runs beside the
 * live lineage of benchmarks that have not started yet (10k live storages
 * made up front cost the others' garbage collections: 2.9 against 2.1 us per
 * call at an unlimited budget).
 */
function lazily(make: () => () => void): () => void {
  let f: (() => void) | null = null;
  return () => (f ??= make())();
}

let native: Backend | null = null;
try {
  const { cpuBackend } = await import("@libra/native");
  native = cpuBackend({ threads: 1 });
} catch (e) {
  console.warn(`runtime_bench: no native cpu backend (${(e as Error).message}); skipping dispatch`);
}
if (native !== null) {
  const b = native;
  for (const live of [64, 10_000]) {
    const evicting = live > 64;
    const group = `dispatch${live}`;
    // Fixed counts, so that both sides of a group average the same number of calls past
    // the same warm-up: the garbage collections and the VM's stalls of a few ms that land
    // in a run otherwise move a short run's average by a microsecond.
    const n = evicting ? 200_000 : 1_000_000;
    // The evicting paths (search, drop, re-materialization, pool) reach the optimizing compiler
    // only after tens of thousands of calls: timed in a plain loop of 200k calls in a process of
    // its own, the dtr-eq stream read 4.7-5.1 us a call after a warm-up of 20k calls (n / 10),
    // 2.9-3.2 after 200k or 600k, and 2.8 after 20k when the 64-live streams had run first and
    // warmed the code they share (as they do here only when no filter leaves them out).
    const warmup = evicting ? n : n / 10;
    Deno.bench({
      name: `raw cpu backend: alloc + relu + free, ${live} live buffers`,
      group,
      baseline: true,
      n,
      warmup,
      fn: lazily(() => dispatchStream(b, live)),
    });
    // The same stream through a runtime made with `options`, beside the raw one.
    const runtimeRow = (name: string, options: Omit<RuntimeOptions, "backend">) =>
      Deno.bench({
        name,
        group,
        n,
        warmup,
        fn: lazily(() =>
          dispatchStream(new Runtime({ backend: b, timeline: false, ...options }), live)
        ),
      });
    if (!evicting) {
      runtimeRow(`runtime: the same, unlimited budget`, {});
      continue;
    }
    // 90% of the values fit: each call needs a value's room, which the value it frees gives
    // back only when the policy had left that one resident (the oldest-first policy evicts
    // on every call, dtr-eq on ~43% of them).
    const budget = Math.floor(0.9 * live * STREAM_VALUE_BYTES);
    runtimeRow(`runtime: the same, 90% budget (dtr-eq, sqrt sampling), evicting on ~43% of calls`, {
      budget,
      search: { mode: "sqrt" },
    });
    runtimeRow(
      `runtime: the same, 90% budget, the oldest storage evicted (a choice costing nothing), every call`,
      { budget, policy: OLDEST_FIRST },
    );
  }
}

const nullExecutor: Executor = {
  allocate(_s: StorageNode) {},
  release(_s: StorageNode) {},
  execute(_c: CallNode) {
    return undefined;
  },
  swapOut: () => undefined,
  swapIn: () => undefined,
  copy: () => undefined,
};

/**
 * N live storages in a ring; each call reads the previous output and a pinned
 * weight, replaces the oldest live storage (released, hence evicted eagerly)
 * and every 64 calls restarts from a leaf, like the forward pass of a new
 * step, so lineage stays bounded as in training.
 */
function bookkeeping(live: number, budgeted: boolean) {
  const cost = new AnalyticCostModel();
  const engine = new Engine({
    budgetBytes: budgeted ? live * 1024 * 0.9 : Infinity,
    policy: createPolicy("dtr-eq", { mode: "sqrt" }),
    costModel: cost,
    executor: nullExecutor,
    timeline: false,
  });
  const w = engine.leaf(1024, "w", { pinned: true });
  const x = engine.leaf(1024, "x", { pinned: true });
  const ring: TensorNode[] = [];
  let prev = x;
  for (let i = 0; i < live; i++) {
    prev = engine.compute("f", [], [i % 64 === 0 ? x : prev, w], [{ bytes: 1024 }], 1000)[0]!;
    ring.push(prev);
  }
  let i = 0;
  return () => {
    const [t] = engine.compute("f", [], [i % 64 === 0 ? x : prev, w], [{ bytes: 1024 }], 1000);
    const slot = i % live;
    engine.release(ring[slot]!);
    ring[slot] = prev = t!;
    i++;
  };
}

for (const n of [1_000, 10_000]) {
  Deno.bench({
    name: `bookkeeping per call, ${n} live storages, no eviction`,
    group: `book${n}`,
    baseline: true,
    fn: lazily(() => bookkeeping(n, false)),
  });
  Deno.bench({
    name: `bookkeeping per call, ${n} live storages, 90% budget (dtr-eq, sqrt sampling)`,
    group: `book${n}`,
    fn: lazily(() => bookkeeping(n, true)),
  });
}

/**
 * A search of `dtr-eq`'s full scan over `members` resident storages of a
 * graph like a recurrent step's (chains from a few leaves, every third value
 * evicted into classes), the same search each call: in the runtime's pool
 * (`slotted`: slots, insertion order, kept floors), or in a pool that gives
 * only its members (every member's neighbourhood scored).
 */
function fullScan(members: number, slotted: boolean): () => void {
  const rng = mulberry32(5);
  const g = new Lineage();
  const leaves: TensorNode[] = [];
  for (let i = 0; i < 8; i++) {
    const x = g.addLeaf(1024, `x${i}`);
    x.storage.residency = "resident";
    leaves.push(x);
  }
  const resident: StorageNode[] = [];
  let prev = leaves[0]!;
  for (let i = 0; resident.length < members; i++) {
    if (i % 48 === 0) prev = leaves[i % leaves.length]!;
    const [t] = g.addCall("f", [], [prev, leaves[(i + 3) % leaves.length]!], [{
      bytes: 1024 * (1 + Math.floor(rng() * 4)),
    }], 1 + Math.floor(rng() * 100)) as [TensorNode];
    t.storage.residency = "resident";
    t.storage.lastAccess = i;
    if (i % 3 === 2) {
      t.storage.residency = "evicted";
      g.joinEvictedClass(t.storage);
    } else resident.push(t.storage);
    prev = t;
  }
  const pool = new Pool();
  for (const s of resident) pool.add(s);
  const ctx: EvictionContext = {
    clock: 2 * members,
    // The plain pool: the members in insertion order, nothing more.
    pool: slotted ? pool : arrayPool([...pool]),
    lineage: g,
    costModel: new AnalyticCostModel(),
    bytesNeeded: 1024,
    canDrop: (s) => s.droppable,
    canSwap: () => false,
    onlyDroppable: true,
  };
  const policy = createPolicy("dtr-eq");
  return () => {
    if (policy.choose(ctx).length !== 1) throw new Error("fullScan: no victim");
  };
}

Deno.bench({
  name: "dtr-eq full scan, 800-member pool: every member scored (plain pool)",
  group: "fullscan",
  baseline: true,
  fn: lazily(() => fullScan(800, false)),
});
Deno.bench({
  name: "dtr-eq full scan, 800-member pool: slots, bounds and kept floors (runtime pool)",
  group: "fullscan",
  fn: lazily(() => fullScan(800, true)),
});

async function shared(name: string): Promise<Trace | null> {
  try {
    return parseTrace(
      await Deno.readTextFile(new URL(`../../../shared/traces/${name}`, import.meta.url)),
      name,
    );
  } catch {
    console.warn(`runtime_bench: ../shared/traces/${name} is absent; skipping its simulator bench`);
    return null;
  }
}

for (const name of ["resnet32-56.log", "unet-6.log"]) {
  const trace = await shared(name);
  if (trace === null) continue;
  const calls = trace.events.filter((e) => e.kind === "call" || e.kind === "mutate").length;
  // The budget-free replay that finds the peak runs when the first of these starts, not at
  // load: a lineage built at load and kept through its minor collections taught V8 that
  // the lineage's lists survive, and V8 then made them in the old generation (allocation-site
  // pretenuring), the dispatch stream's too: in 3 loads of 4 each of its values was promoted,
  // the heap grew to 400 MB between full collections of 40-60 ms, and the unlimited row read
  // 2.2-2.6 us a call where it reads 0.9-1.0 with the replay deferred (0.67 raw).
  let peak = -1;
  const peakOf = () => peak < 0 ? (peak = replayTrace(trace).stats.peakBytes) : peak;
  for (const ratio of [1, 0.5]) {
    Deno.bench({
      name: `simulate ${name} dtr-eq ratio ${ratio} (${calls} calls per replay)`,
      group: "simulator",
      fn: lazily(() => {
        const budgetBytes = Math.floor(ratio * peakOf());
        return () => {
          replayTrace(trace, { budgetBytes, policy: "dtr-eq" });
        };
      }),
    });
  }
}
