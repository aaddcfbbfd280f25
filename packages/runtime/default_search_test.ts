import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { createPolicy, type EvictionContext, type ScorePolicy } from "@libra/evict";
import { DEFAULT_SEARCH, Runtime, type RuntimeOptions } from "./runtime.ts";
import { dispatchStream, STREAM_VALUE_BYTES } from "./dispatch_stream.ts";

/**
 * The evictions of the dispatch stream with `live` values under 90% of their
 * bytes, and for each search the pool's size and the storages scored.
 */
function stream(live: number, search: RuntimeOptions["search"], calls: number) {
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    timeline: false,
    budget: Math.floor(0.9 * live * STREAM_VALUE_BYTES),
    ...(search === undefined ? {} : { search }),
  });
  rt.engine.recordDecisions = true;
  const policy = rt.engine.policy as ScorePolicy;
  const searches: { pool: number; scored: number }[] = [];
  const choose = policy.choose.bind(policy);
  policy.choose = (ctx: EvictionContext) => {
    const v = choose(ctx);
    searches.push({ pool: ctx.pool.size, scored: policy.scored });
    return v;
  };
  const step = dispatchStream(rt, live);
  for (let i = 0; i < calls; i++) step();
  return { decisions: [...rt.engine.decisions], searches };
}

Deno.test("the runtime's default search scans pools of up to 1024 in full and samples larger ones", () => {
  assert.deepEqual({ ...DEFAULT_SEARCH }, { mode: "sqrt", fullUpTo: 1024 });
  // ~450 evictable: the default decides as the full scan does (sampling would not).
  const small = stream(500, undefined, 3000);
  assert.ok(small.decisions.length > 1000, `${small.decisions.length} evictions`);
  assert.deepEqual(small.decisions, stream(500, { mode: "full" }, 3000).decisions);
  assert.notDeepEqual(small.decisions, stream(500, { mode: "sqrt" }, 3000).decisions);
  // ~1800 evictable: it samples (the full scan decides otherwise), each search scoring at
  // most its sample of ceil(sqrt(N)).
  const large = stream(2000, undefined, 6000);
  assert.ok(large.searches.length > 1000, `${large.searches.length} searches`);
  assert.deepEqual(large.decisions, stream(2000, { mode: "sqrt" }, 6000).decisions);
  assert.notDeepEqual(large.decisions, stream(2000, { mode: "full" }, 6000).decisions);
  for (const { pool, scored } of large.searches) {
    assert.ok(pool > 1024, `pool ${pool}`);
    assert.ok(scored >= 1 && scored <= Math.ceil(Math.sqrt(pool)), `${scored} of ${pool}`);
  }
});

Deno.test("search.fullUpTo must be a non-negative integer or Infinity", () => {
  for (const bad of [-1, 1.5, NaN]) {
    assert.throws(
      () => createPolicy("dtr-eq", { mode: "sqrt", fullUpTo: bad }),
      /search.fullUpTo must be a non-negative integer or Infinity/,
    );
  }
  createPolicy("dtr-eq", { mode: "sqrt", fullUpTo: Infinity });
  createPolicy("dtr-eq", { mode: "sqrt", fullUpTo: 0 });
});
