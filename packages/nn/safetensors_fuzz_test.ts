/**
 * Seeded fuzzing of the safetensors reader: random bytes, mutated valid files and
 * hand-built hostile headers. Every input must give a SafetensorsError or a valid
 * result (each tensor's data matches its shape), never another exception or a hang.
 * A failure prints the seed and case to reproduce it.
 */
import { mulberry32 } from "@libra/util/rng";
import assert from "node:assert/strict";
import {
  type HostTensor,
  parseSafetensors,
  SafetensorsError,
  type SafetensorsFile,
  serializeSafetensors,
} from "./safetensors.ts";

/** mulberry32: a small seeded generator, so a failing case can be replayed. */
function rng(seed: number) {
  const next = mulberry32(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return { next, int, pick };
}
type Rng = ReturnType<typeof rng>;

function withHeader(header: string, data: Uint8Array, declared?: bigint): Uint8Array {
  const hb = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + hb.length + data.length);
  new DataView(out.buffer).setBigUint64(0, declared ?? BigInt(hb.length), true);
  out.set(hb, 8);
  out.set(data, 8 + hb.length);
  return out;
}

const NUMBERS = [0, 1, 2, 3, 4, 7, 8, -1, 0.5, 1e300, -0, 2 ** 53, 2 ** 53 + 2, 2 ** 31, NaN];
const DTYPES = ["F32", "F16", "BF16", "I32", "I64", "U8", "BOOL", "F64", "x", "", "toString"];

function value(r: Rng, depth: number): unknown {
  switch (r.int(depth > 3 ? 3 : 7)) {
    case 0:
      return r.pick(NUMBERS);
    case 1:
      return r.pick(["", "a", "F32", "__proto__", "\u0000", "é"]);
    case 2:
      return r.pick([null, true, false]);
    case 3:
      return Array.from({ length: r.int(4) }, () => value(r, depth + 1));
    case 4: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(4); i > 0; i--) {
        o[r.pick(["dtype", "shape", "data_offsets", "k"])] = value(r, depth + 1);
      }
      return o;
    }
    case 5: { // deep nesting, for code that recurses into what it reports
      const n = 1 + r.int(20_000);
      return JSON.parse("[".repeat(n) + "0" + "]".repeat(n));
    }
    default:
      return r.pick(NUMBERS) * r.int(100);
  }
}

function deepArray(n: number): string {
  return "[".repeat(n) + "]".repeat(n);
}

function hostileHeader(r: Rng): string {
  const entries: string[] = [];
  for (let i = r.int(5); i > 0; i--) {
    const name = JSON.stringify(
      r.pick(["w", "b", "__metadata__", "__proto__", "x".repeat(r.int(300))]),
    );
    const dtype = r.int(6) === 0 ? JSON.stringify(value(r, 2)) : JSON.stringify(r.pick(DTYPES));
    const dims = Array.from({ length: r.int(4) }, () => r.pick([0, 1, 2, 3, 4, 2 ** 40, -1, 1.5]));
    const shape = r.int(8) === 0 ? deepArray(1 + r.int(50_000)) : JSON.stringify(dims);
    const a = r.int(40), b = a + r.int(40);
    const offs = r.int(8) === 0
      ? JSON.stringify(value(r, 2))
      : r.int(8) === 0
      ? deepArray(1 + r.int(50_000))
      : JSON.stringify(r.int(6) === 0 ? [b, a] : [a, b]);
    const entry = r.int(10) === 0
      ? deepArray(1 + r.int(50_000))
      : r.int(10) === 0
      ? JSON.stringify(value(r, 1))
      : `{"dtype":${dtype},"shape":${shape},"data_offsets":${offs}}`;
    entries.push(`${name}:${entry}`);
  }
  if (r.int(6) === 0) entries.push(`"__metadata__":${JSON.stringify(value(r, 1))}`);
  if (r.int(15) === 0) return deepArray(1 + r.int(100_000));
  return `{${entries.join(",")}}`;
}

function randomTensors(r: Rng): Record<string, HostTensor> {
  const out: Record<string, HostTensor> = {};
  for (let i = r.int(4); i > 0; i--) {
    const shape = Array.from({ length: r.int(3) }, () => r.int(4));
    const n = shape.reduce((a, b) => a * b, 1);
    out[`t${i}`] = r.int(2)
      ? { dtype: "f32", shape, data: Float32Array.from({ length: n }, () => r.next() - 0.5) }
      : { dtype: "i32", shape, data: Int32Array.from({ length: n }, () => r.int(1000) - 500) };
  }
  return out;
}

function mutate(r: Rng, bytes: Uint8Array): Uint8Array {
  const b = bytes.slice();
  switch (r.int(4)) {
    case 0: // flip bytes
      for (let i = 1 + r.int(4); i > 0 && b.length; i--) b[r.int(b.length)] = r.int(256);
      return b;
    case 1: // truncate
      return b.subarray(0, r.int(b.length + 1));
    case 2: { // a random header length
      if (b.length >= 8) {
        new DataView(b.buffer).setBigUint64(
          0,
          BigInt(r.pick([0, 1, 7, b.length, 2 ** 32, 99_999_999, 100_000_001, 2 ** 53])),
          true,
        );
      }
      return b;
    }
    default: { // insert garbage
      const at = r.int(b.length + 1);
      const junk = Uint8Array.from({ length: 1 + r.int(16) }, () => r.int(256));
      const out = new Uint8Array(b.length + junk.length);
      out.set(b.subarray(0, at));
      out.set(junk, at);
      out.set(b.subarray(at), at + junk.length);
      return out;
    }
  }
}

function checkValid(f: SafetensorsFile): void {
  for (const [name, t] of f.tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    assert.equal(
      t.data.length,
      n,
      `tensor ${name}: ${t.data.length} elements for shape ${t.shape}`,
    );
    assert.ok(t.shape.every((d) => Number.isSafeInteger(d) && d >= 0), `tensor ${name} shape`);
    assert.ok(t.dtype === "f32" ? t.data instanceof Float32Array : t.data instanceof Int32Array);
  }
  for (const v of Object.values(f.metadata)) assert.equal(typeof v, "string");
}

/** Parses `bytes`; fails on anything but a SafetensorsError or a valid file. */
function judge(bytes: Uint8Array, where: string): "ok" | "error" {
  const t0 = performance.now();
  let outcome: "ok" | "error";
  try {
    checkValid(parseSafetensors(bytes));
    outcome = "ok";
  } catch (e) {
    if (!(e instanceof SafetensorsError)) {
      throw new Error(`${where}: ${e instanceof Error ? `${e.name}: ${e.message}` : e}`, {
        cause: e,
      });
    }
    assert.ok(e.message.length < 2000, `${where}: a ${e.message.length}-character message`);
    outcome = "error";
  }
  const ms = performance.now() - t0;
  assert.ok(ms < 2000, `${where}: took ${ms.toFixed(0)} ms`);
  return outcome;
}

const SEED = Number(Deno.env.get("LIBRA_FUZZ_SEED") ?? 12);
const CASES = 3000;

Deno.test(`parseSafetensors() fuzz: ${CASES} random inputs give a SafetensorsError or a valid file (seed ${SEED})`, () => {
  const r = rng(SEED);
  const seen = { ok: 0, error: 0 };
  for (let i = 0; i < CASES; i++) {
    const kind = i % 4;
    let bytes: Uint8Array;
    if (kind === 0) bytes = Uint8Array.from({ length: r.int(64) }, () => r.int(256));
    else if (kind === 1) {
      const tensors = randomTensors(r);
      const valid = serializeSafetensors(tensors, r.int(2) ? { format: "pt" } : undefined);
      if (r.int(5) === 0) {
        // unchanged: the round trip is the oracle
        const back = parseSafetensors(valid);
        for (const [name, t] of Object.entries(tensors)) {
          assert.deepEqual([...back.tensors.get(name)!.data], [...t.data], `case ${i}: ${name}`);
        }
        seen.ok++;
        continue;
      }
      bytes = mutate(r, valid);
    } else {
      const data = Uint8Array.from({ length: r.int(96) }, () => r.int(256));
      const header = hostileHeader(r);
      bytes = kind === 2 ? withHeader(header, data) : mutate(r, withHeader(header, data));
    }
    seen[judge(bytes, `seed ${SEED} case ${i}`)]++;
  }
  // the generator reaches both outcomes
  assert.ok(seen.ok > 100 && seen.error > 1000, JSON.stringify(seen));
});

const refusedBriefly = (bytes: Uint8Array) =>
  assert.throws(() => parseSafetensors(bytes), (e: unknown) => {
    assert.ok(e instanceof SafetensorsError, String(e));
    assert.ok(e.message.length < 300, `a ${e.message.length}-character message`);
    return true;
  });

Deno.test("parseSafetensors() reports a huge or deeply nested header field in a short message", () => {
  for (const depth of [5_000, 200_000]) {
    for (const field of ["shape", "data_offsets", "dtype"]) {
      const entry: Record<string, string> = {
        dtype: '"F32"',
        shape: "[1]",
        data_offsets: "[0,4]",
        [field]: deepArray(depth),
      };
      const header = `{"w":{${Object.entries(entry).map(([k, v]) => `"${k}":${v}`).join(",")}}}`;
      refusedBriefly(withHeader(header, new Uint8Array(4)));
    }
    refusedBriefly(withHeader(deepArray(depth), new Uint8Array()));
    refusedBriefly(withHeader(`{"__metadata__":{"k":${deepArray(depth)}}}`, new Uint8Array()));
  }
  refusedBriefly(
    withHeader(`{${JSON.stringify("n".repeat(1e6))}:{"dtype":"F32"}}`, new Uint8Array()),
  );
  refusedBriefly(withHeader(`{"w":{"dtype":"toString"}}`, new Uint8Array()));
});
