import assert from "node:assert/strict";
import type { Backend, DeviceBuffer } from "@libra/tensor/backend";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { Runtime } from "./runtime.ts";
import { MAX_CACHED_SIZES } from "./_live_executor.ts";

/** `inner` with its `alloc` and `free` calls counted. */
function counted(inner: Backend): { backend: Backend; allocs: () => number; frees: () => number } {
  let allocs = 0, frees = 0;
  const backend = new Proxy(inner, {
    get(target, prop) {
      if (prop === "alloc") return (n: number) => (allocs++, target.alloc(n));
      if (prop === "free") return (b: DeviceBuffer) => (frees++, target.free(b));
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Backend;
  return { backend, allocs: () => allocs, frees: () => frees };
}

/**
 * A forward-pass-like stream: relu of the previous value into a new buffer,
 * the value `live` calls older freed, restarting from the input every 16
 * calls; `check` runs after every call and every free. Returns the buffers
 * and the last value read back, with the value expected.
 */
function stream(rt: Runtime, calls: number, live: number, check: () => void) {
  const input = [-3, 1, -2, 4, 0.5, -1, 2, -8];
  const x = rt.alloc(32);
  rt.write(x, new Float32Array(input));
  const ring: DeviceBuffer[] = [];
  let prev = x;
  for (let i = 0; i < calls; i++) {
    if (i % 16 === 0) prev = x;
    // Every third value is twice as large: the cache keeps buffers of two sizes.
    const big = i % 3 === 0;
    const y = rt.alloc(big ? 64 : 32);
    rt.run("relu", [prev], [y], [8]);
    check();
    if (ring.length === live) rt.free(ring[i % live]!);
    ring[i % live] = prev = y;
    check();
  }
  const last = [...new Float32Array(rt.read(prev).buffer).subarray(0, 8)];
  return { x, ring, last, expected: input.map((v) => (v > 0 ? v : 0)) };
}

Deno.test("Runtime buffer cache: a stream reuses freed buffers and the device never holds more than its values did", () => {
  const inner = new ReferenceBackend();
  const c = counted(inner);
  const rt = new Runtime({ backend: c.backend });
  let mostHeld = 0;
  const { last, expected } = stream(rt, 600, 8, () => {
    // What values hold = what the device holds less what the cache keeps.
    const held = inner.memory().usedBytes - rt.cachedBytes;
    mostHeld = Math.max(mostHeld, held);
    assert.ok(inner.memory().usedBytes <= mostHeld, "the cache holds memory values never needed");
  });
  assert.deepEqual(last, expected);
  assert.ok(rt.cachedBytes > 0, "freed buffers are kept");
  // Without the cache, every call allocates its output: 600 allocations.
  assert.ok(c.allocs() < 30, `${c.allocs()} backend allocations for 600 calls`);
  assert.equal(inner.memory().peakBytes, mostHeld);
});

Deno.test("Runtime buffer cache: under a budget the device holds at most the budget, evicting as before", () => {
  const budget = 6 * 64;
  const inner = new ReferenceBackend();
  const rt = new Runtime({ backend: inner, budget });
  const { last, expected } = stream(rt, 400, 24, () => {
    assert.ok(inner.memory().usedBytes <= budget, `${inner.memory().usedBytes} > ${budget}`);
  });
  assert.deepEqual(last, expected);
  assert.ok(rt.stats.evictions > 0, "the budget made the runtime evict");
  assert.ok(inner.memory().peakBytes <= budget);
});

Deno.test("Runtime buffer cache: a budget set below what was held already bounds the cache", () => {
  const inner = new ReferenceBackend();
  const rt = new Runtime({ backend: inner });
  stream(rt, 200, 24, () => {});
  assert.ok(
    inner.memory().peakBytes > 4 * 64,
    "the unbudgeted stream held more than the budget to come",
  );
  const budget = 4 * 64;
  rt.setBudget(budget);
  const { last, expected } = stream(rt, 200, 24, () => {
    const used = inner.memory().usedBytes;
    // Values may still hold more than the new budget until they are evicted, never the cache.
    assert.ok(rt.cachedBytes === 0 || used <= budget, `${rt.cachedBytes} cached, ${used} used`);
  });
  assert.deepEqual(last, expected);
});

Deno.test("Runtime buffer cache: freeing every value gives all device memory back; releaseCached empties the cache", () => {
  const inner = new ReferenceBackend();
  const rt = new Runtime({ backend: inner });
  const { x, ring } = stream(rt, 100, 8, () => {});
  assert.ok(rt.cachedBytes > 0);
  rt.releaseCached();
  assert.equal(rt.cachedBytes, 0);
  // Nothing but the values' own buffers is left on the device.
  const held = [x, ...ring].reduce((n, b) => n + b.bytes, 0);
  assert.equal(inner.memory().usedBytes, held);
  rt.free(ring.pop()!);
  assert.ok(rt.cachedBytes > 0, "a freed buffer is kept while values hold memory");
  for (const b of ring) rt.free(b);
  rt.free(x);
  assert.equal(rt.cachedBytes, 0);
  assert.equal(inner.memory().usedBytes, 0);
});

Deno.test("Runtime buffer cache: a device its cached buffers fill gives them back and the allocation succeeds", () => {
  const inner = new ReferenceBackend({ capacityBytes: 320 });
  const rt = new Runtime({ backend: inner });
  const x = rt.alloc(64);
  rt.write(x, new Float32Array(16).fill(-1));
  const made = [rt.alloc(64), rt.alloc(64), rt.alloc(64)];
  for (const b of made) rt.run("relu", [x], [b], [16]);
  for (const b of made) rt.free(b);
  assert.equal(rt.cachedBytes, 192);
  rt.releaseCached();
  // Someone else takes most of the device; one freed buffer is cached again (within the
  // runtime's own limit: its values once held 256 bytes).
  const other = inner.alloc(192);
  const a = rt.alloc(64);
  rt.run("relu", [x], [a], [16]);
  rt.free(a);
  assert.equal(rt.cachedBytes, 64);
  assert.equal(inner.memory().usedBytes, 320);
  // A 32-byte value does not fit beside the cached buffer: it goes back, and the value fits.
  const y = rt.alloc(32);
  rt.write(y, new Float32Array(8).fill(2));
  assert.deepEqual([...new Float32Array(rt.read(y).buffer)], new Array(8).fill(2));
  assert.equal(rt.cachedBytes, 0);
  assert.equal(inner.memory().usedBytes, 64 + 192 + 32);
  inner.free(other);
});

Deno.test("Runtime buffer cache: sizes past MAX_CACHED_SIZES start the cache again, so varying sizes keep no entry for good", () => {
  const inner = new ReferenceBackend();
  const rt = new Runtime({ backend: inner });
  const x = rt.alloc(4);
  rt.write(x, new Float32Array([1]));
  // Values of distinct sizes, all held at once (the cache may keep all of them), then freed.
  const made: DeviceBuffer[] = [];
  for (let i = 1; i <= MAX_CACHED_SIZES + 2; i++) {
    const b = rt.alloc(4 * i);
    rt.write(b, new Float32Array(i));
    made.push(b);
  }
  let freed = 0;
  for (let i = 0; i < MAX_CACHED_SIZES; i++) {
    rt.free(made[i]!);
    freed += made[i]!.bytes;
  }
  assert.equal(rt.cachedBytes, freed, "every freed buffer is kept, up to the most sizes");
  // The next new size empties the cache first and is its only entry.
  rt.free(made[MAX_CACHED_SIZES]!);
  assert.equal(rt.cachedBytes, made[MAX_CACHED_SIZES]!.bytes);
  assert.equal(
    inner.memory().usedBytes,
    x.bytes + made[MAX_CACHED_SIZES]!.bytes + made[MAX_CACHED_SIZES + 1]!.bytes,
  );
});

Deno.test("Runtime buffer cache: room for a new size is made by giving back the largest buffers first", () => {
  const inner = new ReferenceBackend();
  const c = counted(inner);
  const rt = new Runtime({ backend: c.backend });
  const value = (bytes: number) => {
    const b = rt.alloc(bytes);
    rt.write(b, new Float32Array(bytes / 4).fill(1));
    return b;
  };
  const keep = value(32); // a value held throughout: the cache is not emptied
  const small = Array.from({ length: 8 }, () => value(32));
  const big = value(256);
  // The device held 32 + 8 x 32 + 256 = 544 bytes at most; the small ones are freed first
  // (their size comes first in the cache).
  for (const b of small) rt.free(b);
  rt.free(big);
  assert.equal(rt.cachedBytes, 512);
  // 288 more bytes: 32 + 288 + 512 exceed 544 by 288; the 256-byte buffer and one small one
  // go back (the small ones first would take all eight and the large one).
  const frees0 = c.frees(), allocs0 = c.allocs();
  const wide = value(288);
  assert.equal(c.allocs() - allocs0, 1);
  assert.equal(c.frees() - frees0, 2, "the largest cached buffer first");
  // The seven small buffers left serve seven small values.
  const again = Array.from({ length: 7 }, () => value(32));
  assert.equal(c.allocs() - allocs0, 1, "no backend allocation for them");
  for (const b of [keep, wide, ...again]) rt.free(b);
});

Deno.test("Runtime host buffer cache: swap-outs reuse the host buffers swap-ins gave back, and hold no more than the swapped values did", () => {
  const inner = new ReferenceBackend();
  let allocHost = 0, freeHost = 0;
  const backend = new Proxy(inner, {
    get(target, prop) {
      if (prop === "allocHost") return (n: number) => (allocHost++, target.allocHost(n));
      if (prop === "freeHost") {
        return (b: Parameters<Backend["freeHost"]>[0]) => (freeHost++, target.freeHost(b));
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Backend;
  // Four values of 8 floats under a budget of two: reading them round robin swaps one in and
  // another out every read.
  const rt = new Runtime({ backend, budget: 64, policy: "lru+swap", hostLimitBytes: Infinity });
  const bufs = [0, 1, 2, 3].map((i) => {
    const b = rt.alloc(32);
    rt.write(b, new Float32Array(8).fill(i));
    return b;
  });
  for (let round = 0; round < 10; round++) {
    for (const [i, b] of bufs.entries()) {
      assert.deepEqual([...new Float32Array(rt.read(b).buffer)], new Array(8).fill(i));
    }
  }
  const swaps = rt.stats.swapOuts;
  assert.ok(swaps >= 30, `${swaps} swap-outs`);
  // Two values are swapped out between reads, three while a read makes room for its value
  // (the swap-out comes before the swap-in): three host buffers serve every swap-out.
  assert.ok(allocHost <= 3, `${allocHost} host allocations for ${swaps} swap-outs`);
  for (const b of bufs) rt.free(b);
  rt.endStep(); // collects the swapped values no handle refers to
  assert.equal(rt.engine.hostUsed, 0);
  assert.ok(freeHost < allocHost, "the cache keeps host buffers");
  rt.releaseCached();
  assert.equal(freeHost, allocHost, "every host buffer given back");
});
