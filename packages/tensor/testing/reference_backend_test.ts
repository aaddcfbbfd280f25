import assert from "node:assert/strict";
import { KernelError } from "../backend.ts";
import { philox4x32 } from "../kernels.ts";
import { ReferenceBackend, referenceErf } from "./reference_backend.ts";

Deno.test("referenceErf matches published values to 1e-13", () => {
  // Abramowitz & Stegun table 7.1 / high-precision values.
  const known: [number, number][] = [
    [0, 0],
    [0.1, 0.1124629160182849],
    [0.5, 0.5204998778130465],
    [1, 0.8427007929497149],
    [2, 0.9953222650189527],
    [3, 0.9999779095030014],
    [3.5, 0.9999992569016276],
    [-1.5, -0.9661051464753108],
  ];
  for (const [x, e] of known) assert.ok(Math.abs(referenceErf(x) - e) < 1e-13, `erf(${x})`);
});

Deno.test("Philox reference reproduces the Random123 known-answer vectors", () => {
  assert.deepEqual(philox4x32([0, 0, 0, 0], [0, 0]), [
    0x6627e8d5,
    0xe169c58d,
    0xbc57ac4c,
    0x9b00dbd8,
  ]);
  assert.deepEqual(
    philox4x32([0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], [0xffffffff, 0xffffffff]),
    [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
  );
});

function f32(be: ReferenceBackend, values: number[]) {
  const b = be.alloc(values.length * 4);
  be.write(b, new Float32Array(values));
  return b;
}
function read(be: ReferenceBackend, b: ReturnType<ReferenceBackend["alloc"]>): number[] {
  return Array.from(new Float32Array(be.read(b).slice().buffer));
}

Deno.test("hand-computed kernels: conv2d, max_pool2d_backward ties, sum_to, concat", () => {
  const be = new ReferenceBackend();
  // 1x1x3x3 input, 1x1x2x2 kernel of ones, stride 1: sums of 2x2 windows.
  const x = f32(be, [1, 2, 3, 4, 5, 6, 7, 8, 9]), w = f32(be, [1, 1, 1, 1]), y = be.alloc(16);
  be.run("conv2d", [x, w], [y], [1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 0]);
  assert.deepEqual(read(be, y), [12, 16, 24, 28]);
  // ties route to the first maximum; overlapping windows accumulate.
  const t = f32(be, [1, 1, 1, 1]), gy = f32(be, [5]), gx = be.alloc(16);
  be.run("max_pool2d_backward", [t, gy], [gx], [1, 1, 2, 2, 2, 2, 1, 1, 0, 0]);
  assert.deepEqual(read(be, gx), [5, 0, 0, 0]);
  const s = f32(be, [1, 2, 3, 4, 5, 6]), st = be.alloc(12);
  be.run("sum_to", [s], [st], [2, 2, 3, 1, 3]);
  assert.deepEqual(read(be, st), [5, 7, 9]);
  const a = f32(be, [1, 2]), b = f32(be, [3, 4, 5, 6]), c = be.alloc(24);
  be.run("concat", [a, b], [c], [2, 2, 1, 1, 2]);
  assert.deepEqual(read(be, c), [1, 3, 4, 2, 5, 6]);
});

Deno.test("kernels that take indices fail naming the bad index", () => {
  const be = new ReferenceBackend();
  const w = f32(be, [1, 2, 3, 4]), ids = be.alloc(4), y = be.alloc(8);
  be.write(ids, new Int32Array([2]));
  assert.throws(() => be.run("embedding", [w, ids], [y], [1, 2, 2]), (e: unknown) => {
    assert.ok(e instanceof KernelError);
    assert.match(e.message, /embedding: id 2 at position 0 is outside \[0, 2\)/);
    return true;
  });
});

Deno.test("f64 precision keeps doubles; read still returns f32/i32 bytes", () => {
  const be = new ReferenceBackend({ precision: "f64" });
  const x = be.alloc(8), y = be.alloc(8);
  be.write(x, Float64Array.of(1 + 1e-12, 2));
  be.run("mul_scalar", [x], [y], [2, 3]);
  assert.equal(be.readF64(y)[0], 3 * (1 + 1e-12));
  assert.deepEqual(read(be, y), [3, 6]);
  const i = be.alloc(8), o = be.alloc(8);
  be.write(i, new Int32Array([7, -1]));
  be.run("copy", [i], [o], [2]);
  assert.deepEqual(Array.from(new Int32Array(be.read(o).slice().buffer)), [7, -1]);
  const h = be.allocHost(8);
  be.copy(x, h);
  const z = be.alloc(8);
  be.copy(h, z);
  assert.equal(be.readF64(z)[0], 1 + 1e-12, "swap round trip keeps doubles");
});
