/**
 * `ReferenceBackend`: every kernel of the kernel table in plain TypeScript.
 *
 * This is the independent oracle the native (C, CUDA) kernels are tested
 * against, so the code favours obviously-correct loops over speed: every kernel
 * reads its inputs element by element, computes in double precision and stores
 * the result. Every call is validated with {@link checkKernelCall} first.
 *
 * Two precisions:
 * - `"f32"` (default): buffers are plain bytes; f32 elements are read and
 *   written through `Float32Array` views, so each kernel output is the double
 *   result rounded once to f32 (reductions accumulate in double).
 * - `"f64"`: every 4-byte element slot holds a double instead. Nothing is
 *   rounded, so finite differences of whole computations are accurate to about
 *   1e-10; the gradient tests of `@libra/tensor` use this mode. Writing a
 *   `Float64Array` stores its values exactly; {@link ReferenceBackend.readF64}
 *   reads them back. `read` still returns f32 (or i32) bytes.
 *
 * @module
 */

import {
  type Backend,
  type DeviceBuffer,
  type HostBuffer,
  KernelError,
  type MemoryInfo,
  OutOfMemoryError,
  type Transfer,
} from "../backend.ts";
import {
  checkKernelCall,
  convDims,
  type KernelName,
  philoxElement,
  philoxUniform,
  poolDims,
} from "../kernels.ts";

type FArr = Float32Array | Float64Array;
type IArr = Int32Array | Float64Array;

class RefBuffer implements DeviceBuffer {
  freed = false;
  /** f64 mode only: the slot holds i32 values (so `read` returns i32 bytes). */
  isInt = false;
  constructor(
    readonly id: number,
    readonly bytes: number,
    readonly raw: Uint8Array,
    readonly f: FArr,
    readonly i: IArr,
  ) {}
}

/** Options of {@link ReferenceBackend}. */
export interface ReferenceBackendOptions {
  /** `"f32"` (default) stores f32 like every real backend; `"f64"` keeps doubles (see module doc). */
  precision?: "f32" | "f64";
  /** Capacity in bytes; `alloc` beyond it throws {@link OutOfMemoryError}. Default: unlimited. */
  capacityBytes?: number;
}

const DONE: Transfer = { done: true, wait() {} };

/** Kernels whose output holds i32 values (tracked in f64 mode so `read` can encode them). */
const INT_OUTPUT = new Set<string>(["cast_f32_i32", "argmax_axis", "fill_i32"]);
/** Kernels that copy 4-byte elements of any dtype: output dtype follows input 0. */
const ANY_DTYPE = new Set<string>([
  "copy",
  "expand",
  "permute",
  "slice",
  "slice_backward",
  "concat",
]);

function erf(x: number): number {
  const ax = Math.abs(x);
  let r: number;
  if (ax < 3) {
    // Maclaurin series; terms peak near 3^(2n+1)/n! ~ 1e4, so ~1e-12 relative error.
    let term = ax, sum = ax;
    const x2 = ax * ax;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    // erfc continued fraction (Lentz-free backward evaluation), accurate for x >= 3.
    let f = 0;
    for (let k = 80; k >= 1; k--) f = (k / 2) / (ax + f);
    r = 1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + f);
  }
  return x < 0 ? -r : r;
}

/** `erf` as used by the reference `gelu_erf` kernel (exported for tests). */
export { erf as referenceErf };

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
}

function geluTanhGrad(x: number): number {
  const u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
  const t = Math.tanh(u);
  const du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** Offset of flat output index `i` into an input with `strides` over `shape`. */
function stridedOffset(i: number, shape: readonly number[], strides: readonly number[]): number {
  let off = 0;
  for (let d = shape.length - 1; d >= 0; d--) {
    const s = shape[d]!;
    off += (i % s) * strides[d]!;
    i = Math.floor(i / s);
  }
  return off;
}

function prod(xs: readonly number[]): number {
  let r = 1;
  for (const x of xs) r *= x;
  return r;
}

/**
 * The plain-TypeScript reference implementation of every kernel.
 *
 * @example
 * ```ts
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const be = new ReferenceBackend();
 * const x = be.alloc(8), y = be.alloc(8);
 * be.write(x, new Float32Array([-1, 2]));
 * be.run("relu", [x], [y], [2]);
 * const out = new Float32Array(be.read(y).buffer);
 * if (out[0] !== 0 || out[1] !== 2) throw new Error("relu");
 * ```
 */
export class ReferenceBackend implements Backend {
  readonly name: string;
  readonly device = "cpu" as const;
  readonly hasData = true;
  /** `"f32"` or `"f64"` (see the module doc). */
  readonly precision: "f32" | "f64";
  /** Kernel calls run so far. */
  calls = 0;
  #nextId = 1;
  #used = 0;
  #peak = 0;
  readonly #capacity: number;
  readonly #hostF64 = new WeakMap<HostBuffer, Float64Array>();
  readonly #hostInt = new WeakMap<HostBuffer, boolean>();

  constructor(options: ReferenceBackendOptions = {}) {
    this.precision = options.precision ?? "f32";
    this.#capacity = options.capacityBytes ?? Infinity;
    this.name = this.precision === "f64" ? "reference-f64" : "reference";
  }

  alloc(bytes: number): DeviceBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(`reference.alloc: bytes must be a non-negative integer, got ${bytes}`);
    }
    if (this.#used + bytes > this.#capacity) {
      throw new OutOfMemoryError(
        `reference.alloc: ${bytes} bytes requested, ${this.#used} of ${this.#capacity} in use`,
        bytes,
      );
    }
    const n = Math.ceil(bytes / 4);
    let buf: RefBuffer;
    if (this.precision === "f64") {
      const d = new Float64Array(n);
      buf = new RefBuffer(this.#nextId++, bytes, new Uint8Array(0), d, d);
    } else {
      const ab = new ArrayBuffer(n * 4);
      buf = new RefBuffer(
        this.#nextId++,
        bytes,
        new Uint8Array(ab, 0, bytes),
        new Float32Array(ab),
        new Int32Array(ab),
      );
    }
    this.#used += bytes;
    if (this.#used > this.#peak) this.#peak = this.#used;
    return buf;
  }

  free(buf: DeviceBuffer): void {
    const b = this.#own(buf, "free");
    b.freed = true;
    this.#used -= b.bytes;
  }

  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes = 0): void {
    const b = this.#own(buf, "write");
    if (!Number.isInteger(offsetBytes) || offsetBytes < 0) {
      throw new RangeError(
        `reference.write: offset must be a non-negative integer, got ${offsetBytes}`,
      );
    }
    if (this.precision === "f32") {
      if (offsetBytes + data.byteLength > b.bytes) {
        throw new RangeError(
          `reference.write: ${data.byteLength} bytes at offset ${offsetBytes} do not fit a buffer of ${b.bytes}`,
        );
      }
      b.raw.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offsetBytes);
      return;
    }
    // f64 mode: typed arrays are written element by element into 4-byte slots.
    if (offsetBytes % 4 !== 0) {
      throw new RangeError(`reference-f64.write: offset ${offsetBytes} is not a multiple of 4`);
    }
    let values: ArrayLike<number>;
    let isInt = false;
    if (data instanceof Float64Array || data instanceof Float32Array) values = data;
    else if (data instanceof Int32Array) {
      values = data;
      isInt = true;
    } else {
      if (data.byteLength % 4 !== 0) {
        throw new RangeError(
          `reference-f64.write: ${data.byteLength} raw bytes are not whole 4-byte elements`,
        );
      }
      values = new Float32Array(
        data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength),
      );
    }
    const slot = offsetBytes / 4;
    if ((slot + values.length) * 4 > b.bytes) {
      throw new RangeError(
        `reference-f64.write: ${values.length} elements at offset ${offsetBytes} do not fit a buffer of ${b.bytes} bytes`,
      );
    }
    (b.f as Float64Array).set(values, slot);
    b.isInt = isInt;
  }

  read(buf: DeviceBuffer, bytes?: number): Uint8Array {
    const b = this.#own(buf, "read");
    const n = bytes ?? b.bytes;
    if (!Number.isInteger(n) || n < 0 || n > b.bytes) {
      throw new RangeError(`reference.read: cannot read ${n} bytes of a ${b.bytes}-byte buffer`);
    }
    if (this.precision === "f32") return b.raw.slice(0, n);
    const slots = Math.ceil(n / 4);
    const out = b.isInt
      ? new Int32Array(b.f.subarray(0, slots))
      : new Float32Array(b.f.subarray(0, slots));
    return new Uint8Array(out.buffer, 0, n);
  }

  /** The values of a buffer as doubles (exact in f64 mode; widened f32 otherwise). */
  readF64(buf: DeviceBuffer, count?: number): Float64Array {
    const b = this.#own(buf, "readF64");
    const n = count ?? Math.floor(b.bytes / 4);
    return Float64Array.from(b.f.subarray(0, n));
  }

  run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const ins = inputs.map((b) => this.#own(b, kernel));
    const outs = outputs.map((b) => this.#own(b, kernel));
    checkKernelCall(kernel, ins.map((b) => b.bytes), outs.map((b) => b.bytes), params);
    for (const o of outs) {
      if (ins.includes(o)) throw new KernelError(kernel, `output buffer ${o.id} is also an input`);
    }
    this.calls++;
    this.#exec(kernel, ins, outs, params);
    if (this.precision === "f64" && outs.length > 0) {
      const isInt = INT_OUTPUT.has(kernel) || (ANY_DTYPE.has(kernel) && ins[0]!.isInt) ||
        (kernel === "index_select" && ins[0]!.isInt);
      for (const o of outs) o.isInt = isInt;
    }
  }

  memory(): MemoryInfo {
    return { usedBytes: this.#used, peakBytes: this.#peak, totalBytes: this.#capacity };
  }

  resetPeak(): void {
    this.#peak = this.#used;
  }

  sync(): void {}

  allocHost(bytes: number): HostBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(
        `reference.allocHost: bytes must be a non-negative integer, got ${bytes}`,
      );
    }
    return { bytes, data: new Uint8Array(bytes) };
  }

  freeHost(_buf: HostBuffer): void {}

  copy(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): void {
    if (src instanceof RefBuffer) {
      this.#own(src, "copy");
      const host = dst as HostBuffer;
      if (src.bytes > host.bytes) {
        throw new RangeError(
          `reference.copy: source has ${src.bytes} bytes, destination ${host.bytes}`,
        );
      }
      host.data.set(this.read(src));
      if (this.precision === "f64") {
        this.#hostF64.set(host, Float64Array.from(src.f));
        this.#hostInt.set(host, src.isInt);
      }
      return;
    }
    if (!(dst instanceof RefBuffer)) {
      throw new TypeError("reference.copy: one side must be a device buffer of this backend");
    }
    const d = this.#own(dst, "copy");
    const host = src as HostBuffer;
    if (host.bytes > d.bytes) {
      throw new RangeError(
        `reference.copy: source has ${host.bytes} bytes, destination ${d.bytes}`,
      );
    }
    const exact = this.#hostF64.get(host);
    if (this.precision === "f64" && exact) {
      (d.f as Float64Array).set(exact.subarray(0, Math.min(exact.length, d.f.length)));
      d.isInt = this.#hostInt.get(host) ?? false;
    } else this.write(d, host.data.subarray(0, host.bytes));
  }

  copyAsync(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): Transfer {
    this.copy(src as DeviceBuffer, dst as HostBuffer);
    return DONE;
  }

  #own(buf: DeviceBuffer, what: string): RefBuffer {
    if (!(buf instanceof RefBuffer)) {
      throw new TypeError(
        `reference.${what}: buffer ${buf?.id} was not allocated by a reference backend`,
      );
    }
    if (buf.freed) throw new Error(`reference.${what}: buffer ${buf.id} was already freed`);
    return buf;
  }

  // ------------------------------------------------------------------ kernels

  #exec(k: KernelName, ins: RefBuffer[], outs: RefBuffer[], p: readonly number[]): void {
    const x = ins[0]?.f as FArr;
    const y = outs[0]?.f as FArr;
    switch (k) {
      case "add":
      case "sub":
      case "mul":
      case "div":
      case "eq":
      case "ne":
      case "lt":
      case "le":
      case "gt":
      case "ge": {
        const f = BINARY[k]!;
        const nd = p[0]!;
        const shape = p.slice(1, 1 + nd);
        const sa = p.slice(1 + nd, 1 + 2 * nd);
        const sb = p.slice(1 + 2 * nd, 1 + 3 * nd);
        const a = ins[0]!.f, b = ins[1]!.f;
        const n = prod(shape);
        for (let i = 0; i < n; i++) {
          y[i] = f(a[stridedOffset(i, shape, sa)]!, b[stridedOffset(i, shape, sb)]!);
        }
        return;
      }
      case "where": {
        const nd = p[0]!;
        const shape = p.slice(1, 1 + nd);
        const sc = p.slice(1 + nd, 1 + 2 * nd);
        const sa = p.slice(1 + 2 * nd, 1 + 3 * nd);
        const sb = p.slice(1 + 3 * nd, 1 + 4 * nd);
        const c = ins[0]!.f, a = ins[1]!.f, b = ins[2]!.f;
        const n = prod(shape);
        for (let i = 0; i < n; i++) {
          y[i] = c[stridedOffset(i, shape, sc)] !== 0
            ? a[stridedOffset(i, shape, sa)]!
            : b[stridedOffset(i, shape, sb)]!;
        }
        return;
      }
      case "expand": {
        const nd = p[0]!;
        const shape = p.slice(1, 1 + nd);
        const sx = p.slice(1 + nd);
        const xi = ins[0]!.i, yi = outs[0]!.i;
        const n = prod(shape);
        for (let i = 0; i < n; i++) yi[i] = xi[stridedOffset(i, shape, sx)]!;
        return;
      }
      case "sum_to": {
        const nd = p[0]!;
        const xs = p.slice(1, 1 + nd);
        const ys = p.slice(1 + nd);
        const ystr = new Array<number>(nd);
        let s = 1;
        for (let d = nd - 1; d >= 0; d--) {
          ystr[d] = ys[d] === 1 ? 0 : s;
          s *= ys[d]!;
        }
        const acc = new Float64Array(prod(ys));
        const n = prod(xs);
        for (let i = 0; i < n; i++) acc[stridedOffset(i, xs, ystr)]! += x[i]!;
        y.set(acc);
        return;
      }
      case "neg":
      case "exp":
      case "log":
      case "sqrt":
      case "rsqrt":
      case "relu":
      case "gelu_tanh":
      case "gelu_erf":
      case "silu":
      case "sigmoid":
      case "tanh": {
        const f = UNARY[k]!;
        for (let i = 0; i < p[0]!; i++) y[i] = f(x[i]!);
        return;
      }
      case "copy": {
        const xi = ins[0]!.i, yi = outs[0]!.i;
        for (let i = 0; i < p[0]!; i++) yi[i] = xi[i]!;
        return;
      }
      case "cast_f32_i32": {
        const yi = outs[0]!.i;
        for (let i = 0; i < p[0]!; i++) yi[i] = Math.trunc(x[i]!);
        return;
      }
      case "cast_i32_f32": {
        const xi = ins[0]!.i;
        for (let i = 0; i < p[0]!; i++) y[i] = xi[i]!;
        return;
      }
      case "relu_backward":
      case "gelu_tanh_backward":
      case "gelu_erf_backward":
      case "silu_backward":
      case "sigmoid_backward":
      case "tanh_backward": {
        const f = UNARY_GRAD[k]!;
        const gy = ins[1]!.f;
        for (let i = 0; i < p[0]!; i++) y[i] = gy[i]! * f(x[i]!);
        return;
      }
      case "add_scalar":
      case "mul_scalar":
      case "rsub_scalar":
      case "rdiv_scalar":
      case "pow_scalar":
      case "eq_scalar":
      case "ne_scalar":
      case "lt_scalar":
      case "le_scalar":
      case "gt_scalar":
      case "ge_scalar": {
        const f = SCALAR[k]!;
        const s = p[1]!;
        for (let i = 0; i < p[0]!; i++) y[i] = f(x[i]!, s);
        return;
      }
      case "fill":
        y.fill(p[1]!, 0, p[0]!);
        return;
      case "fill_i32": {
        if (!Number.isInteger(p[1]!)) {
          throw new KernelError(k, `value must be an integer, got ${p[1]}`);
        }
        outs[0]!.i.fill(p[1]!, 0, p[0]!);
        return;
      }
      case "add_inplace": {
        const acc = ins[0]!.f, v = ins[1]!.f;
        for (let i = 0; i < p[0]!; i++) acc[i] = acc[i]! + v[i]!;
        return;
      }
      case "sum_axis":
      case "mean_axis":
      case "max_axis":
      case "argmax_axis": {
        const [outer, dim, inner] = p as [number, number, number];
        if ((k === "max_axis" || k === "argmax_axis") && dim === 0 && outer * inner > 0) {
          throw new KernelError(k, `cannot take the maximum over an empty axis (dim = 0)`);
        }
        const yi = outs[0]!.i;
        for (let o = 0; o < outer; o++) {
          for (let j = 0; j < inner; j++) {
            const base = o * dim * inner + j;
            if (k === "sum_axis" || k === "mean_axis") {
              let s = 0;
              for (let d = 0; d < dim; d++) s += x[base + d * inner]!;
              y[o * inner + j] = k === "sum_axis" ? s : s / dim;
            } else {
              let best = x[base]!, arg = 0;
              for (let d = 1; d < dim; d++) {
                const v = x[base + d * inner]!;
                if (!Number.isNaN(best) && (v > best || Number.isNaN(v))) {
                  best = v;
                  arg = d;
                }
              }
              if (k === "max_axis") y[o * inner + j] = best;
              else yi[o * inner + j] = arg;
            }
          }
        }
        return;
      }
      case "max_axis_backward": {
        const [outer, dim, inner] = p as [number, number, number];
        const gy = ins[1]!.f;
        y.fill(0, 0, outer * dim * inner);
        for (let o = 0; o < outer; o++) {
          for (let j = 0; j < inner; j++) {
            const base = o * dim * inner + j;
            let best = x[base]!, arg = 0;
            for (let d = 1; d < dim; d++) {
              const v = x[base + d * inner]!;
              if (!Number.isNaN(best) && (v > best || Number.isNaN(v))) {
                best = v;
                arg = d;
              }
            }
            if (dim > 0) y[base + arg * inner] = gy[o * inner + j]!;
          }
        }
        return;
      }
      case "softmax":
      case "log_softmax": {
        const [rows, cols] = p as [number, number];
        for (let r = 0; r < rows; r++) {
          let m = -Infinity;
          for (let c = 0; c < cols; c++) m = Math.max(m, x[r * cols + c]!);
          let s = 0;
          for (let c = 0; c < cols; c++) s += Math.exp(x[r * cols + c]! - m);
          const ls = Math.log(s);
          for (let c = 0; c < cols; c++) {
            const v = x[r * cols + c]! - m;
            y[r * cols + c] = k === "softmax" ? Math.exp(v) / s : v - ls;
          }
        }
        return;
      }
      case "softmax_backward":
      case "log_softmax_backward": {
        const [rows, cols] = p as [number, number];
        const gy = ins[1]!.f;
        for (let r = 0; r < rows; r++) {
          let s = 0;
          for (let c = 0; c < cols; c++) {
            s += k === "softmax_backward"
              ? gy[r * cols + c]! * x[r * cols + c]!
              : gy[r * cols + c]!;
          }
          for (let c = 0; c < cols; c++) {
            const i = r * cols + c;
            y[i] = k === "softmax_backward" ? x[i]! * (gy[i]! - s) : gy[i]! - Math.exp(x[i]!) * s;
          }
        }
        return;
      }
      case "matmul": {
        const [batch, m, n, kk, ta, tb, sa, sb] = p as number[] as [
          number,
          number,
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        const a = ins[0]!.f, b = ins[1]!.f;
        for (let bi = 0; bi < batch; bi++) {
          for (let i = 0; i < m; i++) {
            for (let j = 0; j < n; j++) {
              let s = 0;
              for (let l = 0; l < kk; l++) {
                const av = ta ? a[bi * sa + l * m + i]! : a[bi * sa + i * kk + l]!;
                const bv = tb ? b[bi * sb + j * kk + l]! : b[bi * sb + l * n + j]!;
                s += av * bv;
              }
              y[bi * m * n + i * n + j] = s;
            }
          }
        }
        return;
      }
      case "permute": {
        const nd = p[0]!;
        const xs = p.slice(1, 1 + nd);
        const perm = p.slice(1 + nd);
        const xstr = new Array<number>(nd);
        let s = 1;
        for (let d = nd - 1; d >= 0; d--) {
          xstr[d] = s;
          s *= xs[d]!;
        }
        const ys = perm.map((q) => xs[q]!);
        const ystr = perm.map((q) => xstr[q]!);
        const xi = ins[0]!.i, yi = outs[0]!.i;
        const n = prod(xs);
        for (let i = 0; i < n; i++) yi[i] = xi[stridedOffset(i, ys, ystr)]!;
        return;
      }
      case "slice":
      case "slice_backward": {
        const nd = p[0]!;
        const xs = p.slice(1, 1 + nd);
        const st = p.slice(1 + nd, 1 + 2 * nd);
        const ys = p.slice(1 + 2 * nd);
        const xstr = new Array<number>(nd);
        let s = 1;
        let base = 0;
        for (let d = nd - 1; d >= 0; d--) {
          xstr[d] = s;
          base += st[d]! * s;
          s *= xs[d]!;
        }
        const n = prod(ys);
        const src = ins[0]!.i, dst = outs[0]!.i;
        if (k === "slice") {
          for (let i = 0; i < n; i++) dst[i] = src[base + stridedOffset(i, ys, xstr)]!;
        } else {
          dst.fill(0, 0, prod(xs));
          for (let i = 0; i < n; i++) dst[base + stridedOffset(i, ys, xstr)] = src[i]!;
        }
        return;
      }
      case "concat": {
        const [nIn, outer, inner] = p as [number, number, number];
        const ds = p.slice(3);
        const total = ds.reduce((u, v) => u + v, 0);
        const dst = outs[0]!.i;
        let at = 0;
        for (let j = 0; j < nIn; j++) {
          const src = ins[j]!.i;
          const d = ds[j]!;
          for (let o = 0; o < outer; o++) {
            for (let q = 0; q < d * inner; q++) {
              dst[o * total * inner + at * inner + q] = src[o * d * inner + q]!;
            }
          }
          at += d;
        }
        return;
      }
      case "index_select":
      case "index_select_backward": {
        const [outer, dim, inner, nIdx] = p as [number, number, number, number];
        const idx = ins[1]!.i;
        for (let j = 0; j < nIdx; j++) {
          const v = idx[j]!;
          if (!Number.isInteger(v) || v < 0 || v >= dim) {
            throw new KernelError(k, `index ${v} at position ${j} is outside [0, ${dim})`);
          }
        }
        if (k === "index_select") {
          const src = ins[0]!.i, dst = outs[0]!.i;
          for (let o = 0; o < outer; o++) {
            for (let j = 0; j < nIdx; j++) {
              for (let q = 0; q < inner; q++) {
                dst[(o * nIdx + j) * inner + q] = src[(o * dim + idx[j]!) * inner + q]!;
              }
            }
          }
        } else {
          y.fill(0, 0, outer * dim * inner);
          for (let o = 0; o < outer; o++) {
            for (let j = 0; j < nIdx; j++) {
              for (let q = 0; q < inner; q++) {
                const t = (o * dim + idx[j]!) * inner + q;
                y[t] = y[t]! + x[(o * nIdx + j) * inner + q]!;
              }
            }
          }
        }
        return;
      }
      case "embedding":
      case "embedding_backward": {
        const [nIds, vocab, dim] = p as [number, number, number];
        const ids = ins[1]!.i;
        for (let j = 0; j < nIds; j++) {
          const v = ids[j]!;
          if (!Number.isInteger(v) || v < 0 || v >= vocab) {
            throw new KernelError(k, `id ${v} at position ${j} is outside [0, ${vocab})`);
          }
        }
        if (k === "embedding") {
          for (let j = 0; j < nIds; j++) {
            for (let q = 0; q < dim; q++) y[j * dim + q] = x[ids[j]! * dim + q]!;
          }
        } else {
          y.fill(0, 0, vocab * dim);
          for (let j = 0; j < nIds; j++) {
            for (let q = 0; q < dim; q++) {
              const t = ids[j]! * dim + q;
              y[t] = y[t]! + x[j * dim + q]!;
            }
          }
        }
        return;
      }
      case "conv2d":
      case "conv2d_backward_input":
      case "conv2d_backward_weight":
        return this.#conv(k, ins, outs, p);
      case "conv2d_backward_bias": {
        const [N, K, L] = p as [number, number, number];
        for (let kk = 0; kk < K; kk++) {
          let s = 0;
          for (let n = 0; n < N; n++) for (let l = 0; l < L; l++) s += x[(n * K + kk) * L + l]!;
          y[kk] = s;
        }
        return;
      }
      case "max_pool2d":
      case "max_pool2d_backward":
      case "avg_pool2d":
      case "avg_pool2d_backward":
        return this.#pool(k, ins, outs, p);
      case "global_avg_pool": {
        const [rows, hw] = p as [number, number];
        for (let r = 0; r < rows; r++) {
          let s = 0;
          for (let j = 0; j < hw; j++) s += x[r * hw + j]!;
          y[r] = s / hw;
        }
        return;
      }
      case "global_avg_pool_backward": {
        const [rows, hw] = p as [number, number];
        for (let r = 0; r < rows; r++) for (let j = 0; j < hw; j++) y[r * hw + j] = x[r]! / hw;
        return;
      }
      case "upsample_nearest2x": {
        const [planes, H, W] = p as [number, number, number];
        for (let q = 0; q < planes; q++) {
          for (let i = 0; i < 2 * H; i++) {
            for (let j = 0; j < 2 * W; j++) {
              y[(q * 2 * H + i) * 2 * W + j] = x[(q * H + (i >> 1)) * W + (j >> 1)]!;
            }
          }
        }
        return;
      }
      case "upsample_nearest2x_backward": {
        const [planes, H, W] = p as [number, number, number];
        for (let q = 0; q < planes; q++) {
          for (let i = 0; i < H; i++) {
            for (let j = 0; j < W; j++) {
              let s = 0;
              for (let di = 0; di < 2; di++) {
                for (let dj = 0; dj < 2; dj++) {
                  s += x[(q * 2 * H + 2 * i + di) * 2 * W + 2 * j + dj]!;
                }
              }
              y[(q * H + i) * W + j] = s;
            }
          }
        }
        return;
      }
      case "batch_norm_stats": {
        const [N, C, HW] = p as [number, number, number];
        const v = outs[1]!.f;
        const cnt = N * HW;
        for (let c = 0; c < C; c++) {
          let s = 0;
          for (let n = 0; n < N; n++) for (let j = 0; j < HW; j++) s += x[(n * C + c) * HW + j]!;
          const mean = s / cnt;
          let q = 0;
          for (let n = 0; n < N; n++) {
            for (let j = 0; j < HW; j++) q += (x[(n * C + c) * HW + j]! - mean) ** 2;
          }
          y[c] = mean;
          v[c] = q / cnt;
        }
        return;
      }
      case "batch_norm_apply": {
        const [N, C, HW, eps] = p as [number, number, number, number];
        const [, mean, vr, gamma, beta] = ins.map((b) => b.f) as FArr[];
        for (let n = 0; n < N; n++) {
          for (let c = 0; c < C; c++) {
            const r = 1 / Math.sqrt(vr![c]! + eps);
            for (let j = 0; j < HW; j++) {
              const i = (n * C + c) * HW + j;
              y[i] = (x[i]! - mean![c]!) * r * gamma![c]! + beta![c]!;
            }
          }
        }
        return;
      }
      case "batch_norm_update_running": {
        const [C, mom, count] = p as [number, number, number];
        const [mean, vr, rm, rv] = ins.map((b) => b.f) as FArr[];
        for (let c = 0; c < C; c++) {
          const unbiased = count > 1 ? vr![c]! * count / (count - 1) : vr![c]!;
          rm![c] = (1 - mom) * rm![c]! + mom * mean![c]!;
          rv![c] = (1 - mom) * rv![c]! + mom * unbiased;
        }
        return;
      }
      case "batch_norm_backward": {
        const [N, C, HW, eps] = p as [number, number, number, number];
        const [, gy, mean, vr, gamma] = ins.map((b) => b.f) as FArr[];
        const ggamma = outs[1]!.f, gbeta = outs[2]!.f;
        const M = N * HW;
        for (let c = 0; c < C; c++) {
          const r = 1 / Math.sqrt(vr![c]! + eps);
          let sg = 0, sgx = 0;
          for (let n = 0; n < N; n++) {
            for (let j = 0; j < HW; j++) {
              const i = (n * C + c) * HW + j;
              sg += gy![i]!;
              sgx += gy![i]! * (x[i]! - mean![c]!) * r;
            }
          }
          gbeta[c] = sg;
          ggamma[c] = sgx;
          for (let n = 0; n < N; n++) {
            for (let j = 0; j < HW; j++) {
              const i = (n * C + c) * HW + j;
              const xh = (x[i]! - mean![c]!) * r;
              y[i] = (gamma![c]! * r / M) * (M * gy![i]! - sg - xh * sgx);
            }
          }
        }
        return;
      }
      case "layer_norm": {
        const [rows, cols, eps] = p as [number, number, number];
        const [, gamma, beta] = ins.map((b) => b.f) as FArr[];
        const meanO = outs[1]!.f, rstdO = outs[2]!.f;
        for (let r = 0; r < rows; r++) {
          let s = 0;
          for (let c = 0; c < cols; c++) s += x[r * cols + c]!;
          const mean = s / cols;
          let q = 0;
          for (let c = 0; c < cols; c++) q += (x[r * cols + c]! - mean) ** 2;
          const rstd = 1 / Math.sqrt(q / cols + eps);
          meanO[r] = mean;
          rstdO[r] = rstd;
          for (let c = 0; c < cols; c++) {
            y[r * cols + c] = (x[r * cols + c]! - mean) * rstd * gamma![c]! + beta![c]!;
          }
        }
        return;
      }
      case "layer_norm_backward": {
        const [rows, cols] = p as [number, number];
        const [, gy, mean, rstd, gamma] = ins.map((b) => b.f) as FArr[];
        const gg = outs[1]!.f, gb = outs[2]!.f;
        const accG = new Float64Array(cols), accB = new Float64Array(cols);
        for (let r = 0; r < rows; r++) {
          const rs = rstd![r]!, mu = mean![r]!;
          let mg = 0, mgx = 0;
          for (let c = 0; c < cols; c++) {
            const i = r * cols + c;
            const xh = (x[i]! - mu) * rs;
            const g = gy![i]! * gamma![c]!;
            mg += g;
            mgx += g * xh;
            accG[c]! += gy![i]! * xh;
            accB[c]! += gy![i]!;
          }
          mg /= cols;
          mgx /= cols;
          for (let c = 0; c < cols; c++) {
            const i = r * cols + c;
            const xh = (x[i]! - mu) * rs;
            y[i] = rs * (gy![i]! * gamma![c]! - mg - xh * mgx);
          }
        }
        gg.set(accG);
        gb.set(accB);
        return;
      }
      case "rms_norm": {
        const [rows, cols, eps] = p as [number, number, number];
        const gamma = ins[1]!.f;
        const rstdO = outs[1]!.f;
        for (let r = 0; r < rows; r++) {
          let q = 0;
          for (let c = 0; c < cols; c++) q += x[r * cols + c]! ** 2;
          const rs = 1 / Math.sqrt(q / cols + eps);
          rstdO[r] = rs;
          for (let c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c]! * rs * gamma[c]!;
        }
        return;
      }
      case "rms_norm_backward": {
        const [rows, cols] = p as [number, number];
        const [, gy, rstd, gamma] = ins.map((b) => b.f) as FArr[];
        const gg = outs[1]!.f;
        const accG = new Float64Array(cols);
        for (let r = 0; r < rows; r++) {
          const rs = rstd![r]!;
          let mgx = 0;
          for (let c = 0; c < cols; c++) {
            const i = r * cols + c;
            mgx += gy![i]! * gamma![c]! * x[i]!;
            accG[c]! += gy![i]! * x[i]! * rs;
          }
          mgx /= cols;
          for (let c = 0; c < cols; c++) {
            const i = r * cols + c;
            y[i] = rs * (gy![i]! * gamma![c]! - x[i]! * rs * rs * mgx);
          }
        }
        gg.set(accG);
        return;
      }
      case "dropout":
      case "dropout_backward": {
        const [n, prob, seed, offset] = p as [number, number, number, number];
        if (prob < 0 || prob > 1) throw new KernelError(k, `p must be in [0, 1], got ${prob}`);
        for (let i = 0; i < n; i++) {
          const keep = prob < 1 && philoxUniform(philoxElement(seed, offset, i)[0]) >= prob;
          y[i] = keep ? x[i]! / (1 - prob) : 0;
        }
        return;
      }
      case "rand_uniform": {
        const [n, seed, offset, low, high] = p as [number, number, number, number, number];
        for (let i = 0; i < n; i++) {
          y[i] = low + (high - low) * philoxUniform(philoxElement(seed, offset, i)[0]);
        }
        return;
      }
      case "rand_normal": {
        const [n, seed, offset, mean, std] = p as [number, number, number, number, number];
        for (let i = 0; i < n; i++) {
          const [w0, w1] = philoxElement(seed, offset, i);
          const u1 = ((w0 >>> 8) + 1) * 2 ** -24;
          const u2 = philoxUniform(w1);
          y[i] = mean + std * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
        }
        return;
      }
      case "cross_entropy":
      case "cross_entropy_backward": {
        const [rows, classes] = p as [number, number];
        const t = ins[1]!.i;
        for (let r = 0; r < rows; r++) {
          const v = t[r]!;
          if (!Number.isInteger(v) || v < 0 || v >= classes) {
            throw new KernelError(k, `target ${v} of row ${r} is outside [0, ${classes})`);
          }
        }
        const gl = k === "cross_entropy_backward" ? ins[2]!.f[0]! : 0;
        let total = 0;
        for (let r = 0; r < rows; r++) {
          let m = -Infinity;
          for (let c = 0; c < classes; c++) m = Math.max(m, x[r * classes + c]!);
          let s = 0;
          for (let c = 0; c < classes; c++) s += Math.exp(x[r * classes + c]! - m);
          if (k === "cross_entropy") total += m + Math.log(s) - x[r * classes + t[r]!]!;
          else {
            for (let c = 0; c < classes; c++) {
              const sm = Math.exp(x[r * classes + c]! - m) / s;
              y[r * classes + c] = (sm - (c === t[r] ? 1 : 0)) * gl / rows;
            }
          }
        }
        if (k === "cross_entropy") y[0] = total / rows;
        return;
      }
      case "mse": {
        const b = ins[1]!.f;
        let s = 0;
        for (let i = 0; i < p[0]!; i++) s += (x[i]! - b[i]!) ** 2;
        y[0] = s / p[0]!;
        return;
      }
      case "mse_backward": {
        const b = ins[1]!.f, gl = ins[2]!.f[0]!;
        for (let i = 0; i < p[0]!; i++) y[i] = 2 * (x[i]! - b[i]!) * gl / p[0]!;
        return;
      }
      case "sgd_update": {
        const [n, lr, mom, damp, wd, nesterov, first] = p as number[] as [
          number,
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        const [param, grad, buf] = ins.map((b) => b.f) as FArr[];
        for (let i = 0; i < n; i++) {
          let g = grad![i]! + wd * param![i]!;
          if (mom !== 0) {
            buf![i] = first ? g : mom * buf![i]! + (1 - damp) * g;
            g = nesterov ? g + mom * buf![i]! : buf![i]!;
          }
          param![i] = param![i]! - lr * g;
        }
        return;
      }
      case "adamw_update": {
        const [n, lr, b1, b2, eps, wd, step] = p as number[] as [
          number,
          number,
          number,
          number,
          number,
          number,
          number,
        ];
        if (!Number.isInteger(step) || step < 1) {
          throw new KernelError(k, `step must be an integer >= 1, got ${step}`);
        }
        const [param, grad, m, v] = ins.map((b) => b.f) as FArr[];
        const bc1 = 1 - b1 ** step, bc2 = 1 - b2 ** step;
        for (let i = 0; i < n; i++) {
          const g = grad![i]!;
          param![i] = param![i]! * (1 - lr * wd);
          m![i] = b1 * m![i]! + (1 - b1) * g;
          v![i] = b2 * v![i]! + (1 - b2) * g * g;
          param![i] = param![i]! - lr * (m![i]! / bc1) / (Math.sqrt(v![i]! / bc2) + eps);
        }
        return;
      }
      default: {
        const never: never = k;
        throw new KernelError(String(never), "not implemented by the reference backend");
      }
    }
  }

  #conv(k: KernelName, ins: RefBuffer[], outs: RefBuffer[], p: readonly number[]): void {
    const d = convDims(k, p);
    const [sh, sw, ph, pw, dh, dw] = p.slice(7, 13) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const { N, C, H, W, K, R, S, OH, OW } = d;
    // Each (n, k, oh, ow, c, r, s) term links x[n, c, ih, iw], w[k, c, r, s] and y[n, k, oh, ow].
    const visit = (f: (xi: number, wi: number, yi: number) => void) => {
      for (let n = 0; n < N; n++) {
        for (let kk = 0; kk < K; kk++) {
          for (let oh = 0; oh < OH; oh++) {
            for (let ow = 0; ow < OW; ow++) {
              const yi = ((n * K + kk) * OH + oh) * OW + ow;
              for (let c = 0; c < C; c++) {
                for (let r = 0; r < R; r++) {
                  const ih = oh * sh - ph + r * dh;
                  if (ih < 0 || ih >= H) continue;
                  for (let s = 0; s < S; s++) {
                    const iw = ow * sw - pw + s * dw;
                    if (iw < 0 || iw >= W) continue;
                    f(((n * C + c) * H + ih) * W + iw, ((kk * C + c) * R + r) * S + s, yi);
                  }
                }
              }
            }
          }
        }
      }
    };
    if (k === "conv2d") {
      const x = ins[0]!.f, w = ins[1]!.f, y = outs[0]!.f;
      const acc = new Float64Array(N * K * OH * OW);
      if (d.hasBias) {
        const b = ins[2]!.f;
        for (let i = 0; i < acc.length; i++) acc[i] = b[Math.floor(i / (OH * OW)) % K]!;
      }
      visit((xi, wi, yi) => {
        acc[yi]! += x[xi]! * w[wi]!;
      });
      y.set(acc);
    } else if (k === "conv2d_backward_input") {
      const gy = ins[0]!.f, w = ins[1]!.f, gx = outs[0]!.f;
      const acc = new Float64Array(N * C * H * W);
      visit((xi, wi, yi) => {
        acc[xi]! += gy[yi]! * w[wi]!;
      });
      gx.set(acc);
    } else {
      const x = ins[0]!.f, gy = ins[1]!.f, gw = outs[0]!.f;
      const acc = new Float64Array(K * C * R * S);
      visit((xi, wi, yi) => {
        acc[wi]! += x[xi]! * gy[yi]!;
      });
      gw.set(acc);
    }
  }

  #pool(k: KernelName, ins: RefBuffer[], outs: RefBuffer[], p: readonly number[]): void {
    const { N, C, H, W, OH, OW } = poolDims(k, p);
    const [kh, kw, sh, sw, ph, pw] = p.slice(4) as [number, number, number, number, number, number];
    const isMax = k === "max_pool2d" || k === "max_pool2d_backward";
    const backward = k.endsWith("_backward");
    const x = ins[0]!.f;
    const gy = backward ? ins[isMax ? 1 : 0]!.f : null;
    const out = outs[0]!.f;
    if (backward) out.fill(0, 0, N * C * H * W);
    for (let q = 0; q < N * C; q++) {
      for (let oh = 0; oh < OH; oh++) {
        for (let ow = 0; ow < OW; ow++) {
          const oi = (q * OH + oh) * OW + ow;
          let best = -Infinity, arg = -1, sum = 0;
          for (let r = 0; r < kh; r++) {
            const ih = oh * sh - ph + r;
            for (let s = 0; s < kw; s++) {
              const iw = ow * sw - pw + s;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const xi = (q * H + ih) * W + iw;
              if (isMax) {
                const v = x[xi]!;
                if (arg < 0 || v > best || (Number.isNaN(v) && !Number.isNaN(best))) {
                  best = v;
                  arg = xi;
                }
              } else if (backward) {
                out[xi] = out[xi]! + gy![oi]! / (kh * kw);
              } else sum += x[xi]!;
            }
          }
          if (!backward) out[oi] = isMax ? best : sum / (kh * kw);
          else if (isMax && arg >= 0) out[arg] = out[arg]! + gy![oi]!;
        }
      }
    }
  }
}

const BINARY: Record<string, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  eq: (a, b) => (a === b ? 1 : 0),
  ne: (a, b) => (a !== b ? 1 : 0),
  lt: (a, b) => (a < b ? 1 : 0),
  le: (a, b) => (a <= b ? 1 : 0),
  gt: (a, b) => (a > b ? 1 : 0),
  ge: (a, b) => (a >= b ? 1 : 0),
};

const UNARY: Record<string, (x: number) => number> = {
  neg: (x) => -x,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  relu: (x) => (x > 0 ? x : 0),
  gelu_tanh: geluTanh,
  gelu_erf: (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)),
  silu: (x) => x * sigmoid(x),
  sigmoid,
  tanh: Math.tanh,
};

/** d y / d x as a function of the saved tensor (x, or y for sigmoid/tanh). */
const UNARY_GRAD: Record<string, (v: number) => number> = {
  relu_backward: (x) => (x > 0 ? 1 : 0),
  gelu_tanh_backward: geluTanhGrad,
  gelu_erf_backward: (x) =>
    0.5 * (1 + erf(x / Math.SQRT2)) + x * Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI),
  silu_backward: (x) => {
    const s = sigmoid(x);
    return s * (1 + x * (1 - s));
  },
  sigmoid_backward: (y) => y * (1 - y),
  tanh_backward: (y) => 1 - y * y,
};

const SCALAR: Record<string, (x: number, s: number) => number> = {
  add_scalar: (x, s) => x + s,
  mul_scalar: (x, s) => x * s,
  rsub_scalar: (x, s) => s - x,
  rdiv_scalar: (x, s) => s / x,
  pow_scalar: (x, s) => Math.pow(x, s),
  eq_scalar: (x, s) => (x === s ? 1 : 0),
  ne_scalar: (x, s) => (x !== s ? 1 : 0),
  lt_scalar: (x, s) => (x < s ? 1 : 0),
  le_scalar: (x, s) => (x <= s ? 1 : 0),
  gt_scalar: (x, s) => (x > s ? 1 : 0),
  ge_scalar: (x, s) => (x >= s ? 1 : 0),
};
