import assert from "node:assert/strict";
import {
  parseSafetensors,
  readSafetensors,
  SafetensorsError,
  serializeSafetensors,
  writeSafetensors,
} from "./safetensors.ts";

/** Builds a file by hand: u64 LE header length, header text, data bytes. */
function file(header: unknown, data: number[] | Uint8Array = []): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const hb = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + hb.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  out.set(data, 8 + hb.length);
  return out;
}

function throwsNaming(fn: () => unknown, tensor: string | undefined, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof SafetensorsError, `expected SafetensorsError, got ${e}`);
    assert.equal(e.tensor, tensor);
    assert.match(e.message, pattern);
    if (tensor !== undefined) assert.match(e.message, new RegExp(`"${tensor}"`));
    return true;
  });
}

Deno.test("parseSafetensors() reads hand-built F32 and I32 tensors and metadata", () => {
  // 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0; i32 7 = 07 00 00 00, -1 = ff ff ff ff
  const bytes = file(
    {
      __metadata__: { format: "pt" },
      b: { dtype: "I32", shape: [2], data_offsets: [8, 16] },
      a: { dtype: "F32", shape: [2, 1], data_offsets: [0, 8] },
    },
    [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
  );
  const f = parseSafetensors(bytes);
  assert.deepEqual(f.metadata, { format: "pt" });
  assert.deepEqual([...f.tensors.keys()], ["b", "a"]);
  const a = f.tensors.get("a")!;
  assert.equal(a.dtype, "f32");
  assert.deepEqual(a.shape, [2, 1]);
  assert.deepEqual([...a.data], [1, -2]);
  const b = f.tensors.get("b")!;
  assert.equal(b.dtype, "i32");
  assert.deepEqual([...b.data], [7, -1]);
});

Deno.test("parseSafetensors() upcasts F16 and BF16 to f32 exactly", () => {
  // F16: 0x3c00 = 1, 0xc000 = -2, 0x0001 = 2^-24 (subnormal), 0x7c00 = inf, 0x3555 ~= 0.33325195
  // BF16: 0x3f80 = 1, 0x4049 = 3.140625, 0xff80 = -inf
  const bytes = file(
    {
      h: { dtype: "F16", shape: [5], data_offsets: [0, 10] },
      bf: { dtype: "BF16", shape: [3], data_offsets: [10, 16] },
    },
    [
      0x00,
      0x3c,
      0x00,
      0xc0,
      0x01,
      0x00,
      0x00,
      0x7c,
      0x55,
      0x35,
      0x80,
      0x3f,
      0x49,
      0x40,
      0x80,
      0xff,
    ],
  );
  const f = parseSafetensors(bytes);
  assert.deepEqual([...f.tensors.get("h")!.data], [1, -2, 2 ** -24, Infinity, 0.333251953125]);
  assert.deepEqual([...f.tensors.get("bf")!.data], [1, 3.140625, -Infinity]);
  assert.equal(f.storedDtypes.get("bf"), "BF16");
});

Deno.test("parseSafetensors() narrows I64 to i32 and rejects out-of-range values naming the element", () => {
  const ok = new Uint8Array(16);
  const dv = new DataView(ok.buffer);
  dv.setBigInt64(0, -5n, true);
  dv.setBigInt64(8, 2147483647n, true);
  const f = parseSafetensors(
    file({ ids: { dtype: "I64", shape: [2], data_offsets: [0, 16] } }, ok),
  );
  assert.deepEqual([...f.tensors.get("ids")!.data], [-5, 2147483647]);
  dv.setBigInt64(8, 2147483648n, true);
  throwsNaming(
    () => parseSafetensors(file({ ids: { dtype: "I64", shape: [2], data_offsets: [0, 16] } }, ok)),
    "ids",
    /element 1 = 2147483648 does not fit in i32/,
  );
});

Deno.test("parseSafetensors() rejects truncated files", () => {
  throwsNaming(() => parseSafetensors(new Uint8Array(5)), undefined, /shorter than the 8-byte/);
  const full = file({ w: { dtype: "F32", shape: [2], data_offsets: [0, 8] } }, new Uint8Array(8));
  // cut inside the header
  throwsNaming(() => parseSafetensors(full.subarray(0, 20)), undefined, /runs past the end/);
  // cut inside the data
  throwsNaming(
    () => parseSafetensors(full.subarray(0, full.length - 3)),
    "w",
    /run past the 5-byte data section; the file is truncated/,
  );
});

Deno.test("parseSafetensors() rejects bad header JSON and malformed entries", () => {
  throwsNaming(() => parseSafetensors(file("{not json")), undefined, /not valid UTF-8 JSON/);
  throwsNaming(() => parseSafetensors(file("[1, 2]")), undefined, /must be a JSON object/);
  throwsNaming(
    () => parseSafetensors(file({ w: { dtype: "F32", shape: [-1], data_offsets: [0, 0] } })),
    "w",
    /"shape" must be an array of non-negative integers/,
  );
  throwsNaming(
    () =>
      parseSafetensors(
        file({ w: { dtype: "F32", shape: [1], data_offsets: [4, 0] } }, [0, 0, 0, 0]),
      ),
    "w",
    /"data_offsets" must be \[begin, end\]/,
  );
  throwsNaming(
    () => parseSafetensors(file({ __metadata__: { a: 1 } })),
    undefined,
    /__metadata__\["a"\] must be a string/,
  );
});

Deno.test("parseSafetensors() rejects unknown and unsupported dtypes naming the tensor", () => {
  throwsNaming(
    () =>
      parseSafetensors(
        file({ w: { dtype: "F31", shape: [1], data_offsets: [0, 4] } }, [0, 0, 0, 0]),
      ),
    "w",
    /unknown dtype "F31"/,
  );
  throwsNaming(
    () =>
      parseSafetensors(
        file({ w: { dtype: "F64", shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8)),
      ),
    "w",
    /dtype F64 is not supported/,
  );
});

Deno.test("parseSafetensors() rejects shape/byte-count mismatches, overlaps and out-of-range offsets", () => {
  throwsNaming(
    () =>
      parseSafetensors(
        file({ w: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)),
      ),
    "w",
    /shape \[3\] of F32 needs 12 bytes but data_offsets \[0, 8\] hold 8/,
  );
  throwsNaming(
    () =>
      parseSafetensors(
        file(
          {
            a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
            b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
          },
          new Uint8Array(12),
        ),
      ),
    "b",
    /overlap those of "a" \[0, 8\]/,
  );
  throwsNaming(
    () =>
      parseSafetensors(
        file({ w: { dtype: "F32", shape: [1], data_offsets: [100, 104] } }, new Uint8Array(8)),
      ),
    "w",
    /run past the 8-byte data section/,
  );
});

Deno.test("serializeSafetensors() writes the exact layout and round-trips through the parser", () => {
  const bytes = serializeSafetensors(
    {
      z: { dtype: "i32", shape: [3], data: new Int32Array([1, -2, 3]) },
      a: { dtype: "f32", shape: [2, 2], data: new Float32Array([0.5, -1, 2, 1e-30]) },
      s: { dtype: "f32", shape: [], data: new Float32Array([7]) },
      e: { dtype: "f32", shape: [0, 4], data: new Float32Array(0) },
    },
    { source: "test" },
  );
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal(n % 8, 0, "header is padded to 8 bytes");
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  assert.deepEqual(header.a, { dtype: "F32", shape: [2, 2], data_offsets: [0, 16] });
  assert.deepEqual(header.e, { dtype: "F32", shape: [0, 4], data_offsets: [16, 16] });
  assert.deepEqual(header.s, { dtype: "F32", shape: [], data_offsets: [16, 20] });
  assert.deepEqual(header.z, { dtype: "I32", shape: [3], data_offsets: [20, 32] });
  assert.equal(bytes.length, 8 + n + 32);
  // the first f32 of "a" is 0.5 = 00 00 00 3f
  assert.deepEqual([...bytes.subarray(8 + n, 8 + n + 4)], [0, 0, 0, 0x3f]);
  const back = parseSafetensors(bytes);
  assert.deepEqual(back.metadata, { source: "test" });
  assert.deepEqual([...back.tensors.get("a")!.data], [...new Float32Array([0.5, -1, 2, 1e-30])]);
  assert.deepEqual([...back.tensors.get("z")!.data], [1, -2, 3]);
  assert.deepEqual(back.tensors.get("s")!.shape, []);
  assert.equal(back.tensors.get("e")!.data.length, 0);
});

Deno.test("serializeSafetensors() rejects data whose length disagrees with the shape", () => {
  throwsNaming(
    () => serializeSafetensors({ w: { dtype: "f32", shape: [3], data: new Float32Array(2) } }),
    "w",
    /shape \[3\] has 3 elements but data has 2/,
  );
});

Deno.test("readSafetensors()/writeSafetensors() round-trip through a file and name the path on errors", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/w.safetensors`;
    await writeSafetensors(path, {
      w: { dtype: "f32", shape: [2], data: new Float32Array([3, 4]) },
    });
    assert.deepEqual([...(await readSafetensors(path)).tensors.get("w")!.data], [3, 4]);
    await Deno.writeFile(path, new Uint8Array(3));
    await assert.rejects(() => readSafetensors(path), (e: Error) => e.message.includes(path));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
