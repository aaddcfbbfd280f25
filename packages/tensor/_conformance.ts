/**
 * The shared conformance suite of the {@link Backend} contract. Every backend
 * implementation calls {@link backendConformance} from its own test file:
 *
 * ```ts ignore
 * import { backendConformance } from "../tensor/_conformance.ts";
 * backendConformance("cpu", () => cpuBackend());
 * ```
 *
 * Backends with `hasData = false` (meta) skip the checks that read data back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Backend, KernelError } from "./backend.ts";
import type { KernelName } from "./kernels.ts";

/** Options of {@link backendConformance}. */
export interface ConformanceOptions {
  /** Called after each test with the backend (e.g. to close a native handle). */
  teardown?: (backend: Backend) => void;
  /** Passed to every `Deno.test` (e.g. `ignore` when a device is missing). */
  ignore?: boolean;
}

function f32bytes(values: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(values).buffer);
}

function asF32(bytes: Uint8Array): Float32Array {
  const copy = bytes.slice();
  return new Float32Array(copy.buffer, 0, Math.floor(copy.byteLength / 4));
}

/**
 * Registers `Deno.test` cases checking the {@link Backend} contract on the
 * backend that `makeBackend` returns (a fresh one per test).
 */
export function backendConformance(
  name: string,
  makeBackend: () => Backend,
  options: ConformanceOptions = {},
): void {
  const test = (what: string, fn: (b: Backend) => void, needsData = false) => {
    Deno.test({
      name: `${name}: ${what}`,
      ignore: options.ignore ?? false,
      fn() {
        const b = makeBackend();
        try {
          if (needsData && !b.hasData) return;
          fn(b);
        } finally {
          options.teardown?.(b);
        }
      },
    });
  };

  test("alloc(0) returns a distinct zero-byte buffer", (b) => {
    const a = b.alloc(0), c = b.alloc(0);
    assert.equal(a.bytes, 0);
    assert.notEqual(a.id, c.id);
    b.free(a);
    b.free(c);
  });

  test("alloc returns buffers with the requested size and unique ids", (b) => {
    const bufs = [4, 12, 1, 1000].map((n) => b.alloc(n));
    assert.deepEqual(bufs.map((x) => x.bytes), [4, 12, 1, 1000]);
    assert.equal(new Set(bufs.map((x) => x.id)).size, 4);
    for (const x of bufs) b.free(x);
  });

  test("write/read round trip, with offsets and partial reads", (b) => {
    const buf = b.alloc(16);
    b.write(buf, f32bytes([1, 2, 3, 4]));
    assert.deepEqual([...asF32(b.read(buf))], [1, 2, 3, 4]);
    b.write(buf, new Float32Array([9, 8]), 8);
    assert.deepEqual([...asF32(b.read(buf))], [1, 2, 9, 8]);
    assert.deepEqual([...asF32(b.read(buf, 8))], [1, 2]);
    const ints = b.alloc(8);
    b.write(ints, new Int32Array([-7, 2 ** 31 - 1]));
    const back = b.read(ints).slice();
    assert.deepEqual([...new Int32Array(back.buffer)], [-7, 2 ** 31 - 1]);
    b.free(buf);
    b.free(ints);
  }, true);

  test("write past the end throws", (b) => {
    const buf = b.alloc(8);
    assert.throws(() => b.write(buf, new Float32Array(3)));
    assert.throws(() => b.write(buf, new Float32Array(2), 4));
    b.free(buf);
  });

  test("free twice throws, and a freed buffer cannot be used", (b) => {
    const buf = b.alloc(8);
    const out = b.alloc(8);
    b.free(buf);
    assert.throws(() => b.free(buf), /freed/);
    assert.throws(() => b.write(buf, new Float32Array(2)), /freed/);
    assert.throws(() => b.run("relu", [buf], [out], [2]), /freed/);
    b.free(out);
  });

  test("a foreign buffer is rejected", (b) => {
    const fake = { bytes: 8, id: 123456 };
    const out = b.alloc(8);
    assert.throws(() => b.free(fake));
    assert.throws(() => b.run("relu", [fake], [out], [2]));
    b.free(out);
  });

  test("run validation errors are KernelErrors naming the kernel", (b) => {
    const x = b.alloc(16), y = b.alloc(16), small = b.alloc(8);
    const expectKernelError = (fn: () => void, kernel: string, re: RegExp) => {
      assert.throws(fn, (e: unknown) => {
        assert.ok(e instanceof KernelError, `expected KernelError, got ${e}`);
        assert.equal(e.kernel, kernel);
        assert.match(e.message, re);
        return true;
      });
    };
    expectKernelError(
      () => b.run("no_such_kernel" as unknown as KernelName, [x], [y], [4]),
      "no_such_kernel",
      /unknown/,
    );
    expectKernelError(() => b.run("relu", [x], [y], [4, 1]), "relu", /params/);
    expectKernelError(() => b.run("relu", [x, x], [y], [4]), "relu", /input buffers/);
    expectKernelError(() => b.run("relu", [x], [], [4]), "relu", /output buffers/);
    expectKernelError(() => b.run("relu", [small], [y], [4]), "relu", /input 0 has 8 bytes/);
    expectKernelError(() => b.run("relu", [x], [small], [4]), "relu", /output 0 has 8 bytes/);
    expectKernelError(() => b.run("relu", [x], [x], [4]), "relu", /also an input/);
    expectKernelError(
      () => b.run("matmul", [x, x], [y], [1, 2, 2, 2, 2, 0, 0, 0]),
      "matmul",
      /transA/,
    );
    for (const buf of [x, y, small]) b.free(buf);
  });

  test("run computes into outputs distinct from inputs", (b) => {
    const x = b.alloc(16), y = b.alloc(16);
    b.write(x, new Float32Array([-1, 2, -3, 4]));
    b.run("relu", [x], [y], [4]);
    assert.deepEqual([...asF32(b.read(y))], [0, 2, 0, 4]);
    assert.deepEqual([...asF32(b.read(x))], [-1, 2, -3, 4]);
    b.free(x);
    b.free(y);
  }, true);

  test("memory() counts used and peak bytes; resetPeak lowers the peak", (b) => {
    const base = b.memory().usedBytes;
    const a = b.alloc(100);
    const c = b.alloc(28);
    assert.equal(b.memory().usedBytes, base + 128);
    assert.ok(b.memory().peakBytes >= base + 128);
    b.free(a);
    assert.equal(b.memory().usedBytes, base + 28);
    assert.ok(b.memory().peakBytes >= base + 128);
    b.resetPeak();
    assert.equal(b.memory().peakBytes, base + 28);
    b.free(c);
    assert.equal(b.memory().usedBytes, base);
    assert.equal(b.memory().peakBytes, base + 28);
    assert.ok(b.memory().totalBytes > 0);
  });

  test("allocHost/copy round trip device -> host -> device", (b) => {
    const src = b.alloc(12), dst = b.alloc(12);
    b.write(src, new Float32Array([1.5, -2, 3.25]));
    const host = b.allocHost(12);
    b.copy(src, host);
    assert.deepEqual([...asF32(host.data.subarray(0, 12))], [1.5, -2, 3.25]);
    b.copy(host, dst);
    assert.deepEqual([...asF32(b.read(dst))], [1.5, -2, 3.25]);
    b.freeHost(host);
    b.free(src);
    b.free(dst);
  }, true);

  test("copyAsync round trip completes after wait()", (b) => {
    const src = b.alloc(8), dst = b.alloc(8);
    b.write(src, new Float32Array([7, 8]));
    const host = b.allocHost(8);
    const t1 = b.copyAsync(src, host);
    t1.wait();
    assert.equal(t1.done, true);
    const t2 = b.copyAsync(host, dst);
    t2.wait();
    assert.equal(t2.done, true);
    b.sync();
    assert.deepEqual([...asF32(b.read(dst))], [7, 8]);
    b.freeHost(host);
    b.free(src);
    b.free(dst);
  }, true);

  test("copy accepts size-checked buffers only", (b) => {
    const dev = b.alloc(16);
    const host = b.allocHost(8);
    assert.throws(() => b.copy(dev, host));
    b.freeHost(host);
    b.free(dev);
  });

  test("read on a backend without data throws, with data returns a copy", (b) => {
    const buf = b.alloc(8);
    if (!b.hasData) {
      assert.throws(() => b.read(buf));
    } else {
      b.write(buf, new Float32Array([1, 2]));
      const r = b.read(buf);
      r[0] = 0xff;
      assert.deepEqual([...asF32(b.read(buf))], [1, 2]);
    }
    b.free(buf);
  });
}
