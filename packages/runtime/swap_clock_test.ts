import assert from "node:assert/strict";
import { AnalyticCostModel } from "@libra/cost";
import { createPolicy } from "@libra/evict";
import type { CallNode, StorageNode, TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { Engine, type Executor } from "./engine.ts";
import { MetaExecutor } from "./simulator.ts";

/** The meta executor, but its swaps report a measured time, as a live one's synchronous copies do. */
class TimedSwaps implements Executor {
  readonly #meta = new MetaExecutor();
  measuredNs = 0;
  constructor(readonly time: () => number) {}
  allocate(s: StorageNode): void {
    this.#meta.allocate(s);
  }
  release(s: StorageNode): void {
    this.#meta.release(s);
  }
  execute(call: CallNode): undefined {
    return this.#meta.execute(call);
  }
  swapOut(s: StorageNode): number {
    this.#meta.swapOut(s);
    return this.#took();
  }
  swapIn(s: StorageNode): number {
    this.#meta.swapIn(s);
    return this.#took();
  }
  copy(): undefined {
    return undefined;
  }
  #took(): number {
    const t = this.time();
    this.measuredNs += t;
    return t;
  }
}

/**
 * A forward chain of 48 values of 1 KiB, each costing 1 ms, all kept, under a budget of 12 of
 * them with host memory for every one (a swap-aware `dtr-eq` swaps most of them out: a copy
 * costs less than a recomputation), then every value read back from the last to the first.
 */
function run(executor: Executor, overheadLimit = Infinity) {
  const cost = new AnalyticCostModel();
  const e = new Engine({
    budgetBytes: 12 * 1024 + 64,
    policy: createPolicy("dtr-eq+swap"),
    costModel: cost,
    executor,
    hostLimitBytes: Infinity,
    gc: false,
    overheadLimit,
  });
  e.recordDecisions = true;
  const x = e.leaf(64, "x", { pinned: true });
  const values: TensorNode[] = [];
  let prev = x;
  for (let i = 0; i < 48; i++) {
    prev = e.compute("f", [], [prev], [{ bytes: 1024, name: `v${i}` }], 1e6)[0]!;
    values.push(prev);
  }
  for (let i = values.length - 1; i >= 0; i--) e.materialize(values[i]!);
  return { decisions: [...e.decisions], clock: e.clock, stats: e.stats, cost };
}

Deno.test("a swap's measured time is counted as its stall but moves the clock by the cost model's price (the same decisions whatever the copies took)", () => {
  const modeled = run(new MetaExecutor());
  const swaps = modeled.stats.swapOuts;
  assert.ok(swaps > 10 && modeled.stats.swapIns > 10, `${swaps} swap-outs`);
  for (const seed of [1, 2, 3]) {
    const rng = mulberry32(seed);
    // Some copies too short for the clock to see (0 ns) among long ones.
    const timed = new TimedSwaps(() => rng() < 0.3 ? 0 : 1e3 + 1e7 * rng());
    const r = run(timed);
    // The clock (which the policies' staleness reads) and so every choice: as without timings.
    assert.deepEqual(r.decisions, modeled.decisions);
    assert.equal(r.clock, modeled.clock);
    // The stall: what the copies took, measured.
    assert.ok(Math.abs(r.stats.swapStallNs - timed.measuredNs) < 1e-6 * timed.measuredNs);
    assert.notEqual(r.stats.swapStallNs, modeled.stats.swapStallNs);
  }
});

Deno.test("the thrash limit counts a swap as the cost model prices it, not as long as the copy took (whether a run stops is decided as its evictions are)", () => {
  // Within the limit as priced: the copies cost little beside the 1 ms calls.
  const modeled = run(new MetaExecutor(), 2);
  assert.ok(modeled.stats.swapIns > 10);
  // Copies measured at a second each (a collection or another process inside the copy):
  // measured, the stalls pass the limit many times over.
  const timed = new TimedSwaps(() => 1e9);
  const r = run(timed, 2);
  assert.deepEqual(r.decisions, modeled.decisions);
  assert.ok(r.stats.swapStallNs > 2 * r.stats.computeNs, `${r.stats.swapStallNs} ns of stalls`);
});
