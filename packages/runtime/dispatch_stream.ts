/**
 * The call stream the dispatch benchmarks time (`runtime_bench.ts` under
 * `deno bench`, and `deno task bench`'s micro-benchmarks): kernel calls whose
 * kernels cost little, so that what is measured is what a call costs around
 * its kernel, on a backend or on a {@link Runtime} over it, side by side.
 *
 * @example
 * ```ts
 * import { dispatchStream } from "@libra/runtime/dispatch-stream";
 * import { Runtime } from "@libra/runtime";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const step = dispatchStream(new Runtime({ backend: new ReferenceBackend() }), 8);
 * for (let i = 0; i < 100; i++) step();
 * ```
 *
 * @module
 */

import type { Backend, DeviceBuffer } from "@libra/tensor/backend";
import type { EvictionPolicy } from "@libra/evict";
import { Runtime } from "./runtime.ts";

/**
 * Evicts the oldest evictable storage (the runtime's pool iterates oldest
 * first): a choice that costs nothing, so a {@link dispatchStream} through a
 * runtime with it measures what the runtime does around a policy (eviction,
 * lineage, pool, collection), not a policy's search. Under a budget the
 * stream exceeds, it evicts on every call: the value it frees is always one
 * it evicted already.
 *
 * @example
 * ```ts
 * import { dispatchStream, OLDEST_FIRST, STREAM_VALUE_BYTES } from "@libra/runtime/dispatch-stream";
 * import { Runtime } from "@libra/runtime";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const rt = new Runtime({
 *   backend: new ReferenceBackend(),
 *   budget: 90 * STREAM_VALUE_BYTES,
 *   policy: OLDEST_FIRST,
 * });
 * const step = dispatchStream(rt, 100);
 * for (let i = 0; i < 200; i++) step();
 * if (rt.stats.evictions < 200) throw new Error(`${rt.stats.evictions} evictions`);
 * ```
 */
export const OLDEST_FIRST: EvictionPolicy = Object.freeze(
  {
    name: "oldest-first",
    needs: Object.freeze({}),
    choose(ctx) {
      for (const s of ctx.pool) return [{ storage: s, action: "drop" as const }];
      return [];
    },
  } satisfies EvictionPolicy,
);

/** Bytes of one value of a {@link dispatchStream} (16 floats). */
export const STREAM_VALUE_BYTES = 64;

/**
 * A training-like stream of calls on `b`, made with `live` values live and
 * returned as the function that makes the next call: each call allocates its
 * output, computes relu of the previous value (16 floats) and frees the value
 * `live` calls older, as a forward pass frees activations; every 64 calls it
 * restarts from the input, like the next step, and on a {@link Runtime} the
 * step ends every 4096 calls (`endStep`).
 */
export function dispatchStream(b: Backend, live: number): () => void {
  if (!Number.isInteger(live) || live < 1) {
    throw new RangeError(`dispatchStream: live must be a positive integer, got ${live}`);
  }
  const n = STREAM_VALUE_BYTES / 4;
  const x = b.alloc(STREAM_VALUE_BYTES);
  b.write(x, new Float32Array(n).fill(1));
  const ring: DeviceBuffer[] = [];
  let prev = x, i = 0;
  const rt = b instanceof Runtime ? b : null;
  const step = () => {
    if (i % 64 === 0) prev = x;
    const y = b.alloc(STREAM_VALUE_BYTES);
    b.run("relu", [prev], [y], [n]);
    if (ring.length === live) b.free(ring[i % live]!);
    ring[i % live] = prev = y;
    i++;
    if (rt !== null && (i & 4095) === 0) rt.endStep();
  };
  for (let k = 0; k < live; k++) step();
  return step;
}
