/**
 * safetensors reader and writer at the byte level (no tensors, no backend).
 *
 * The format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
 * unsigned header length `N`, `N` bytes of JSON mapping tensor names to
 * `{ dtype, shape, data_offsets: [begin, end] }` (offsets relative to the data
 * section that follows the header) plus an optional `__metadata__` string map,
 * then the raw little-endian data.
 *
 * Loading converts to the two element types of `@libra/tensor`: `F32`, `F16` and
 * `BF16` become f32; `I32` and `I64` become i32 (an `I64` value outside the i32
 * range is an error naming the tensor and the element). Writing emits `F32` and
 * `I32`, names sorted, the header padded with spaces to a multiple of 8 bytes.
 *
 * @module
 */

/** A host-side tensor: the currency of this module. `data.length` equals the shape's product. */
export interface HostTensor {
  /** Element type after loading. */
  readonly dtype: "f32" | "i32";
  /** Dimensions, outermost first (`[]` for a scalar). */
  readonly shape: readonly number[];
  /** Row-major elements. */
  readonly data: Float32Array | Int32Array;
}

/** Result of {@link parseSafetensors}. */
export interface SafetensorsFile {
  /** Tensors by name, in header order. */
  readonly tensors: Map<string, HostTensor>;
  /** The `__metadata__` string map (empty when absent). */
  readonly metadata: Record<string, string>;
  /** The dtype each tensor was stored as in the file (e.g. `"BF16"`), by name. */
  readonly storedDtypes: Map<string, string>;
}

/** Thrown for any malformed or unsupported safetensors content. */
export class SafetensorsError extends Error {
  /** The tensor the problem concerns, when it concerns one. */
  readonly tensor: string | undefined;
  /** A safetensors error; `tensor` names the tensor concerned, when there is one. */
  constructor(message: string, tensor?: string, options?: ErrorOptions) {
    super(
      tensor === undefined
        ? `safetensors: ${message}`
        : `safetensors: tensor ${show(tensor)}: ${message}`,
      options,
    );
    this.name = "SafetensorsError";
    this.tensor = tensor;
  }
}

/** Bytes per element of every dtype the format defines; only some are loadable. */
const DTYPE_SIZES: Readonly<Record<string, number>> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
};

/** Stored dtypes {@link parseSafetensors} converts. */
export const LOADABLE_DTYPES: readonly string[] = ["F32", "F16", "BF16", "I32", "I64"];

/** Largest header accepted (the reference implementation's limit: 100 MB). */
const MAX_HEADER = 100_000_000;

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f === 0 ? s * Infinity : NaN;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/** A value for a message: JSON, cut to 80 characters (a hostile header can be 100 MB). */
function show(v: unknown): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = Array.isArray(v) ? "an array nested too deeply to show" : "a value too deep to show";
  }
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Parses a safetensors file held in memory.
 *
 * @example
 * ```ts
 * import { parseSafetensors, serializeSafetensors } from "@libra/nn/safetensors";
 * const bytes = serializeSafetensors({ w: { dtype: "f32", shape: [2], data: new Float32Array([1, 2]) } });
 * const t = parseSafetensors(bytes).tensors.get("w")!;
 * if (t.data[1] !== 2) throw new Error("round trip");
 * ```
 */
export function parseSafetensors(bytes: Uint8Array): SafetensorsFile {
  if (bytes.length < 8) {
    throw new SafetensorsError(
      `file is ${bytes.length} bytes, shorter than the 8-byte header length; the file is truncated or not safetensors`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(MAX_HEADER)) {
    throw new SafetensorsError(
      `header length ${headerLen} exceeds the ${MAX_HEADER}-byte limit; the file is corrupt or not safetensors`,
    );
  }
  const n = Number(headerLen);
  if (8 + n > bytes.length) {
    throw new SafetensorsError(
      `header length ${n} runs past the end of the ${bytes.length}-byte file; the file is truncated`,
    );
  }
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    throw new SafetensorsError(
      `header is not valid UTF-8 JSON: ${(e as Error).message}`,
      undefined,
      {
        cause: e,
      },
    );
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new SafetensorsError(`header must be a JSON object, got ${show(header)}`);
  }
  const data = bytes.subarray(8 + n);
  const metadata: Record<string, string> = {};
  const entries: { name: string; dtype: string; shape: number[]; begin: number; end: number }[] =
    [];
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
        throw new SafetensorsError(`__metadata__ must be an object of strings`);
      }
      for (const [k, v] of Object.entries(raw)) {
        if (typeof v !== "string") {
          throw new SafetensorsError(
            `__metadata__[${show(k)}] must be a string, got ${show(v)}`,
          );
        }
        metadata[k] = v;
      }
      continue;
    }
    if (typeof raw !== "object" || raw === null) {
      throw new SafetensorsError(
        `header entry must be an object, got ${show(raw)}`,
        name,
      );
    }
    const { dtype, shape, data_offsets: offs } = raw as Record<string, unknown>;
    if (typeof dtype !== "string") {
      throw new SafetensorsError(`"dtype" must be a string, got ${show(dtype)}`, name);
    }
    if (!Object.hasOwn(DTYPE_SIZES, dtype)) {
      throw new SafetensorsError(
        `unknown dtype ${show(dtype)} (the format defines ${Object.keys(DTYPE_SIZES).join(", ")})`,
        name,
      );
    }
    if (!LOADABLE_DTYPES.includes(dtype)) {
      throw new SafetensorsError(
        `dtype ${dtype} is not supported (loadable: ${
          LOADABLE_DTYPES.join(", ")
        }); convert the tensor before saving`,
        name,
      );
    }
    if (!Array.isArray(shape) || !shape.every(isCount)) {
      throw new SafetensorsError(
        `"shape" must be an array of non-negative integers, got ${show(shape)}`,
        name,
      );
    }
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every(isCount) || offs[0]! > offs[1]!) {
      throw new SafetensorsError(
        `"data_offsets" must be [begin, end] with 0 <= begin <= end, got ${show(offs)}`,
        name,
      );
    }
    const [begin, end] = offs as [number, number];
    if (end > data.length) {
      throw new SafetensorsError(
        `data_offsets [${begin}, ${end}] run past the ${data.length}-byte data section; the file is truncated or the offsets are wrong`,
        name,
      );
    }
    const elems = (shape as number[]).reduce((a, b) => a * b, 1);
    const need = elems * DTYPE_SIZES[dtype]!;
    if (end - begin !== need) {
      throw new SafetensorsError(
        `shape ${
          show(shape)
        } of ${dtype} needs ${need} bytes but data_offsets [${begin}, ${end}] hold ${end - begin}`,
        name,
      );
    }
    entries.push({ name, dtype, shape: shape as number[], begin, end });
  }
  const byStart = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  for (let i = 1; i < byStart.length; i++) {
    const prev = byStart[i - 1]!;
    const cur = byStart[i]!;
    if (cur.begin < prev.end && cur.end > cur.begin && prev.end > prev.begin) {
      throw new SafetensorsError(
        `data_offsets [${cur.begin}, ${cur.end}] overlap those of ${
          show(prev.name)
        } [${prev.begin}, ${prev.end}]`,
        cur.name,
      );
    }
  }
  const tensors = new Map<string, HostTensor>();
  const storedDtypes = new Map<string, string>();
  for (const e of entries) {
    tensors.set(e.name, convert(e.name, e.dtype, e.shape, data.subarray(e.begin, e.end)));
    storedDtypes.set(e.name, e.dtype);
  }
  return { tensors, metadata, storedDtypes };
}

function convert(name: string, dtype: string, shape: number[], raw: Uint8Array): HostTensor {
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (dtype) {
    case "F32":
    case "I32": {
      const buf = new ArrayBuffer(raw.length);
      if (LITTLE_ENDIAN) {
        new Uint8Array(buf).set(raw);
      } else {
        const out = new DataView(buf);
        for (let i = 0; i < raw.length; i += 4) out.setUint32(i, dv.getUint32(i, true), true);
      }
      return dtype === "F32"
        ? { dtype: "f32", shape, data: new Float32Array(buf) }
        : { dtype: "i32", shape, data: new Int32Array(buf) };
    }
    case "F16": {
      const out = new Float32Array(raw.length / 2);
      for (let i = 0; i < out.length; i++) out[i] = halfToFloat(dv.getUint16(2 * i, true));
      return { dtype: "f32", shape, data: out };
    }
    case "BF16": {
      const out = new Float32Array(raw.length / 2);
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < out.length; i++) bits[i] = dv.getUint16(2 * i, true) << 16;
      return { dtype: "f32", shape, data: out };
    }
    case "I64": {
      const out = new Int32Array(raw.length / 8);
      for (let i = 0; i < out.length; i++) {
        const v = dv.getBigInt64(8 * i, true);
        if (v < -2147483648n || v > 2147483647n) {
          throw new SafetensorsError(
            `I64 element ${i} = ${v} does not fit in i32 (range -2^31 .. 2^31-1)`,
            name,
          );
        }
        out[i] = Number(v);
      }
      return { dtype: "i32", shape, data: out };
    }
    default:
      throw new SafetensorsError(`dtype ${dtype} is not supported`, name);
  }
}

/**
 * Serializes tensors to safetensors bytes (`F32` / `I32`, names sorted, the data
 * of each tensor contiguous and in name order).
 */
export function serializeSafetensors(
  tensors: Readonly<Record<string, HostTensor>> | ReadonlyMap<string, HostTensor>,
  metadata?: Readonly<Record<string, string>>,
): Uint8Array {
  const map = tensors instanceof Map
    ? tensors as ReadonlyMap<string, HostTensor>
    : new Map(Object.entries(tensors as Record<string, HostTensor>));
  const names = [...map.keys()].sort();
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = { ...metadata };
  let offset = 0;
  for (const name of names) {
    if (name === "__metadata__") {
      throw new SafetensorsError(`"__metadata__" is reserved and cannot name a tensor`);
    }
    const t = map.get(name)!;
    const elems = t.shape.reduce((a, b) => a * b, 1);
    if (!t.shape.every(isCount) || elems !== t.data.length) {
      throw new SafetensorsError(
        `shape [${t.shape.join(", ")}] has ${elems} elements but data has ${t.data.length}`,
        name,
      );
    }
    const expected = t.dtype === "f32" ? Float32Array : Int32Array;
    if (!(t.data instanceof expected)) {
      throw new SafetensorsError(`dtype ${t.dtype} needs a ${expected.name} for data`, name);
    }
    header[name] = {
      dtype: t.dtype === "f32" ? "F32" : "I32",
      shape: [...t.shape],
      data_offsets: [offset, offset + 4 * elems],
    };
    offset += 4 * elems;
  }
  let json = JSON.stringify(header);
  const enc = new TextEncoder();
  let hb = enc.encode(json);
  const pad = (8 - (hb.length % 8)) % 8;
  if (pad) {
    json += " ".repeat(pad);
    hb = enc.encode(json);
  }
  const out = new Uint8Array(8 + hb.length + offset);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  let pos = 8 + hb.length;
  for (const name of names) {
    const t = map.get(name)!;
    const src = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    if (LITTLE_ENDIAN) {
      out.set(src, pos);
    } else {
      const sv = new DataView(src.buffer, src.byteOffset, src.byteLength);
      for (let i = 0; i < src.length; i += 4) dv.setUint32(pos + i, sv.getUint32(i, true), true);
    }
    pos += src.length;
  }
  return out;
}

/** Reads and parses a safetensors file; errors name the path. */
export async function readSafetensors(path: string | URL): Promise<SafetensorsFile> {
  const bytes = await Deno.readFile(path);
  try {
    return parseSafetensors(bytes);
  } catch (e) {
    if (e instanceof SafetensorsError) e.message += ` (file ${String(path)})`;
    throw e;
  }
}

/** Serializes and writes a safetensors file. */
export async function writeSafetensors(
  path: string | URL,
  tensors: Readonly<Record<string, HostTensor>> | ReadonlyMap<string, HostTensor>,
  metadata?: Readonly<Record<string, string>>,
): Promise<void> {
  await Deno.writeFile(path, serializeSafetensors(tensors, metadata));
}
