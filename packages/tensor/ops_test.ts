/**
 * Forward ops against independent plain-JS oracles written with explicit
 * multi-indices (a different formulation from the reference kernels), on the
 * reference backend and, when built, the native cpu backend.
 */
import assert from "node:assert/strict";
import type { Backend } from "./backend.ts";
import { KernelError } from "./backend.ts";
import { philoxElement, philoxUniform } from "./kernels.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import { assertClose, randomValues } from "./_test_helpers.ts";
import * as T from "./mod.ts";
import type { Tensor } from "./tensor.ts";

// ---------------------------------------------------------------- oracle helpers

class Nd {
  constructor(readonly shape: number[], readonly data: number[]) {}
  static of(t: Tensor): Nd {
    return new Nd([...t.shape], t.toArray());
  }
  strides(): number[] {
    const s: number[] = [];
    let acc = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      s[i] = acc;
      acc *= this.shape[i]!;
    }
    return s;
  }
  at(idx: number[]): number {
    const s = this.strides();
    return this.data[idx.reduce((o, v, i) => o + v * s[i]!, 0)]!;
  }
}

function* indices(shape: number[]): Generator<number[]> {
  const n = shape.reduce((a, b) => a * b, 1);
  for (let f = 0; f < n; f++) {
    const idx: number[] = [];
    let r = f;
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d] = r % shape[d]!;
      r = Math.floor(r / shape[d]!);
    }
    yield idx;
  }
}

function bcastAt(a: Nd, outIdx: number[]): number {
  const off = outIdx.length - a.shape.length;
  return a.at(a.shape.map((d, i) => (d === 1 ? 0 : outIdx[off + i]!)));
}

function oracleBinary(a: Nd, b: Nd, f: (x: number, y: number) => number): number[] {
  const n = Math.max(a.shape.length, b.shape.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(Math.max(a.shape[a.shape.length - n + i] ?? 1, b.shape[b.shape.length - n + i] ?? 1));
  }
  return [...indices(out)].map((idx) => f(bcastAt(a, idx), bcastAt(b, idx)));
}

/** erf by Simpson integration of 2/sqrt(pi) e^{-t^2} (independent of the backend's series). */
function erfSimpson(x: number): number {
  const n = 2000;
  const h = x / n;
  let s = 1 + Math.exp(-x * x);
  for (let i = 1; i < n; i++) s += (i % 2 ? 4 : 2) * Math.exp(-((i * h) ** 2));
  return (2 / Math.sqrt(Math.PI)) * (h / 3) * s;
}

function data(shape: number[], seed: number, lo = -1, hi = 1): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return T.tensor(new Float32Array(randomValues(n, seed, lo, hi)), shape);
}

// ---------------------------------------------------------------- per-backend forward suite

async function nativeBackend(): Promise<Backend | string> {
  try {
    const mod = await import("@libra/native");
    return mod.cpuBackend();
  } catch (e) {
    return (e as Error).message.split("\n")[0]!;
  }
}

const backends: [string, Backend, number][] = [["reference", new ReferenceBackend(), 1e-5]];
const native = await nativeBackend();
if (typeof native === "string") {
  console.log(`ops_test: skipping native cpu forward checks: ${native}`);
} else backends.push(["native cpu", native, 1e-4]);

for (const [label, be, tol] of backends) {
  const close = (t: Tensor, expected: number[], what: string, shape?: number[]) => {
    if (shape) assert.deepEqual([...t.shape], shape, `${what}: shape`);
    assertClose(t.toArray(), expected, tol, tol, `${label} ${what}`);
  };
  const check = (name: string, fn: () => void) =>
    Deno.test(`${name} (${label})`, () => {
      T.setDefaultBackend(be);
      const before = be.memory().usedBytes;
      T.tidy(fn);
      assert.equal(be.memory().usedBytes, before, "tidy frees everything the test created");
    });

  check("binary ops broadcast like numpy", () => {
    const cases: [number[], number[]][] = [
      [[2, 3], [2, 3]],
      [[2, 3], [3]],
      [[4, 1], [3]],
      [[2, 1, 3], [4, 1]],
      [[], [2, 2]],
      [[1], [5]],
    ];
    cases.forEach(([sa, sb], k) => {
      const a = data(sa, 10 + k), b = data(sb, 20 + k, 0.5, 2);
      const A = Nd.of(a), B = Nd.of(b);
      close(T.add(a, b), oracleBinary(A, B, (x, y) => x + y), `add ${sa} ${sb}`);
      close(T.sub(a, b), oracleBinary(A, B, (x, y) => x - y), `sub ${sa} ${sb}`);
      close(T.mul(a, b), oracleBinary(A, B, (x, y) => x * y), `mul ${sa} ${sb}`);
      close(T.div(a, b), oracleBinary(A, B, (x, y) => x / y), `div ${sa} ${sb}`);
      close(b.add(a), oracleBinary(B, A, (x, y) => x + y), `add reversed ${sa} ${sb}`);
    });
  });

  check("comparisons give f32 masks, with scalars on either side", () => {
    const a = T.tensor([1, 2, 3, 4]), b = T.tensor([4, 2, 1, 4]);
    close(T.eq(a, b), [0, 1, 0, 1], "eq");
    close(T.ne(a, b), [1, 0, 1, 0], "ne");
    close(T.lt(a, b), [1, 0, 0, 0], "lt");
    close(T.le(a, b), [1, 1, 0, 1], "le");
    close(T.gt(a, b), [0, 0, 1, 0], "gt");
    close(T.ge(a, b), [0, 1, 1, 1], "ge");
    close(T.gt(a, 2), [0, 0, 1, 1], "gt scalar");
    close(T.gt(2, a), [1, 0, 0, 0], "scalar gt");
    close(T.le(3, a), [0, 0, 1, 1], "scalar le");
    assert.equal(T.lt(a, 2).dtype, "f32");
    assert.equal(T.lt(a, 2).requiresGrad, false);
  });

  check("scalar ops and unary functions", () => {
    const x = data([7], 3, -2, 2), p = data([7], 4, 0.5, 2);
    const X = x.toArray(), P = p.toArray();
    close(T.add(x, 1.5), X.map((v) => v + 1.5), "add scalar");
    close(T.sub(x, 1.5), X.map((v) => v - 1.5), "sub scalar");
    close(T.sub(1.5, x), X.map((v) => 1.5 - v), "rsub scalar");
    close(T.mul(x, -2), X.map((v) => -2 * v), "mul scalar");
    close(T.div(x, 4), X.map((v) => v / 4), "div scalar");
    close(T.div(3, p), P.map((v) => 3 / v), "rdiv scalar");
    close(T.pow(p, 2.5), P.map((v) => v ** 2.5), "pow");
    close(T.neg(x), X.map((v) => -v), "neg");
    close(T.exp(x), X.map(Math.exp), "exp");
    close(T.log(p), P.map(Math.log), "log");
    close(T.sqrt(p), P.map(Math.sqrt), "sqrt");
    close(T.rsqrt(p), P.map((v) => 1 / Math.sqrt(v)), "rsqrt");
    close(T.relu(x), X.map((v) => Math.max(v, 0)), "relu");
    close(T.sigmoid(x), X.map((v) => 1 / (1 + Math.exp(-v))), "sigmoid");
    close(T.tanh(x), X.map(Math.tanh), "tanh");
    close(T.silu(x), X.map((v) => v / (1 + Math.exp(-v))), "silu");
    close(T.gelu(x), X.map((v) => 0.5 * v * (1 + erfSimpson(v / Math.SQRT2))), "gelu erf");
    const c = Math.sqrt(2 / Math.PI);
    close(
      T.gelu(x, "tanh"),
      X.map((v) => 0.5 * v * (1 + Math.tanh(c * (v + 0.044715 * v ** 3)))),
      "gelu tanh",
    );
  });

  check("where broadcasts condition and both branches", () => {
    const cond = T.tensor([[1], [0]]);
    const a = T.tensor([1, 2, 3]), b = T.tensor([[10], [20]]);
    close(T.where(cond, a, b), [1, 2, 3, 20, 20, 20], "where", [2, 3]);
    close(T.where(cond, 5, b), [5, 20], "where scalar branch", [2, 1]);
  });

  check("sum/mean/max/argmax over an axis (keepdim) or everything", () => {
    const x = data([2, 3, 4], 5);
    const X = Nd.of(x);
    for (const axis of [0, 1, 2, -1]) {
      const a = (axis + 3) % 3;
      const outShape = X.shape.filter((_, i) => i !== a);
      const sums: number[] = [], maxs: number[] = [], args: number[] = [];
      for (const idx of indices(outShape)) {
        const vals: number[] = [];
        for (let j = 0; j < X.shape[a]!; j++) {
          const full = [...idx];
          full.splice(a, 0, j);
          vals.push(X.at(full));
        }
        sums.push(vals.reduce((u, v) => u + v, 0));
        maxs.push(Math.max(...vals));
        args.push(vals.indexOf(Math.max(...vals)));
      }
      close(T.sum(x, axis), sums, `sum ${axis}`, outShape);
      close(T.mean(x, axis), sums.map((s) => s / X.shape[a]!), `mean ${axis}`, outShape);
      close(T.max(x, axis), maxs, `max ${axis}`, outShape);
      const am = T.argmax(x, axis);
      assert.equal(am.dtype, "i32");
      assert.deepEqual(am.toArray(), args);
      const kept = X.shape.map((d, i) => (i === a ? 1 : d));
      close(T.sum(x, axis, true), sums, `sum keepdim ${axis}`, kept);
    }
    const all = X.data.reduce((u, v) => u + v, 0);
    close(T.sum(x), [all], "sum all", []);
    close(T.mean(x), [all / 24], "mean all", []);
    close(T.max(x), [Math.max(...X.data)], "max all", []);
    assert.equal(T.argmax(x).item(), X.data.indexOf(Math.max(...X.data)));
    close(T.sum(x, undefined, true), [all], "sum all keepdim", [1, 1, 1]);
  });

  check("softmax and logSoftmax over the last axis", () => {
    const x = data([3, 5], 6, -4, 4);
    const X = Nd.of(x);
    const sm: number[] = [], lsm: number[] = [];
    for (let r = 0; r < 3; r++) {
      const row = X.data.slice(r * 5, r * 5 + 5);
      const z = row.reduce((u, v) => u + Math.exp(v), 0);
      for (const v of row) {
        sm.push(Math.exp(v) / z);
        lsm.push(v - Math.log(z));
      }
    }
    close(T.softmax(x), sm, "softmax");
    close(T.logSoftmax(x), lsm, "logSoftmax");
    close(T.softmax(T.tensor([1000, 1000])), [0.5, 0.5], "softmax is max-subtracted");
  });

  check("matmul: batched, broadcast batch dims, transposes, vectors", () => {
    const mmOracle = (a: Nd, b: Nd, ta: boolean, tb: boolean) => {
      const ra = a.shape.length, rb = b.shape.length;
      const m = ta ? a.shape[ra - 1]! : a.shape[ra - 2]!;
      const k = ta ? a.shape[ra - 2]! : a.shape[ra - 1]!;
      const n = tb ? b.shape[rb - 2]! : b.shape[rb - 1]!;
      const batchA = new Nd(a.shape.slice(0, -2), []), batchB = new Nd(b.shape.slice(0, -2), []);
      const nb = Math.max(batchA.shape.length, batchB.shape.length);
      const bs: number[] = [];
      for (let i = 0; i < nb; i++) {
        bs.push(
          Math.max(
            batchA.shape[batchA.shape.length - nb + i] ?? 1,
            batchB.shape[batchB.shape.length - nb + i] ?? 1,
          ),
        );
      }
      const out: number[] = [];
      for (const bi of indices(bs)) {
        const ia = batchA.shape.map((d, i) => (d === 1 ? 0 : bi[nb - batchA.shape.length + i]!));
        const ib = batchB.shape.map((d, i) => (d === 1 ? 0 : bi[nb - batchB.shape.length + i]!));
        for (let i = 0; i < m; i++) {
          for (let j = 0; j < n; j++) {
            let s = 0;
            for (let l = 0; l < k; l++) {
              s += a.at([...ia, ...(ta ? [l, i] : [i, l])]) *
                b.at([...ib, ...(tb ? [j, l] : [l, j])]);
            }
            out.push(s);
          }
        }
      }
      return { out, shape: [...bs, m, n] };
    };
    const cases: [number[], number[], boolean, boolean][] = [
      [[3, 4], [4, 5], false, false],
      [[4, 3], [4, 5], true, false],
      [[3, 4], [5, 4], false, true],
      [[4, 3], [5, 4], true, true],
      [[2, 3, 4], [2, 4, 2], false, false],
      [[2, 3, 4], [4, 2], false, false],
      [[3, 4], [2, 4, 2], false, false],
      [[2, 1, 3, 4], [3, 4, 2], false, false],
      [[2, 1, 4, 3], [1, 3, 2, 4], true, true],
      [[3, 0], [0, 2], false, false],
    ];
    cases.forEach(([sa, sb, ta, tb], i) => {
      const a = data(sa, 30 + i), b = data(sb, 40 + i);
      const o = mmOracle(Nd.of(a), Nd.of(b), ta, tb);
      close(
        T.matmul(a, b, { transA: ta, transB: tb }),
        o.out,
        `matmul ${sa} ${sb} ${ta} ${tb}`,
        o.shape,
      );
    });
    const v = T.tensor([1, 2]), m = T.tensor([[1, 2, 3], [4, 5, 6]]);
    close(T.matmul(v, m), [9, 12, 15], "vector @ matrix", [3]);
    close(T.matmul(m, T.tensor([1, 0, -1])), [-2, -2], "matrix @ vector", [2]);
    close(T.matmul(v, v), [5], "vector @ vector", []);
  });

  check("layout: permute, transpose, reshape views, slice, narrow, concat", () => {
    const x = data([2, 3, 4], 7);
    const X = Nd.of(x);
    const p = T.permute(x, [2, 0, 1]);
    close(p, [...indices([4, 2, 3])].map(([i, j, k]) => X.at([j!, k!, i!])), "permute", [4, 2, 3]);
    close(
      T.transpose(x, 0, 2),
      [...indices([4, 3, 2])].map(([i, j, k]) => X.at([k!, j!, i!])),
      "transpose",
      [4, 3, 2],
    );
    const r = T.reshape(x, [4, -1]);
    assert.deepEqual(r.shape, [4, 6]);
    assert.equal(r.storage, x.storage, "reshape shares storage");
    assert.deepEqual(T.flatten(x, 1).shape, [2, 12]);
    assert.deepEqual(T.unsqueeze(x, -1).shape, [2, 3, 4, 1]);
    assert.deepEqual(T.squeeze(T.reshape(x, [1, 2, 1, 12])).shape, [2, 12]);
    assert.deepEqual(T.squeeze(x, 0).shape, [2, 3, 4], "squeeze of a non-1 axis is a no-op");
    const s = T.slice(x, [1, -2, 1], [1, 2, 2]);
    close(s, [...indices([1, 2, 2])].map(([i, j, k]) => X.at([i! + 1, j! + 1, k! + 1])), "slice", [
      1,
      2,
      2,
    ]);
    close(
      T.narrow(x, 2, 3, 1),
      [...indices([2, 3, 1])].map(([i, j]) => X.at([i!, j!, 3])),
      "narrow",
      [2, 3, 1],
    );
    const y = data([2, 1, 4], 8);
    const Y = Nd.of(y);
    const c = T.concat([x, y, x], 1);
    const expect = [...indices([2, 7, 4])].map(([i, j, k]) =>
      j! < 3 ? X.at([i!, j!, k!]) : j === 3 ? Y.at([i!, 0, k!]) : X.at([i!, j! - 4, k!])
    );
    close(c, expect, "concat", [2, 7, 4]);
    const ints = T.tensor([1, 2, 3, 4], [2, 2], { dtype: "i32" });
    assert.deepEqual(T.transpose(ints).toArray(), [1, 3, 2, 4], "permute keeps i32 data");
    assert.equal(T.concat([ints, ints]).dtype, "i32");
  });

  check("indexSelect, embedding (i32 indices)", () => {
    const x = data([2, 4, 3], 9);
    const X = Nd.of(x);
    const idx = T.tensor([3, 0, 3], [3], { dtype: "i32" });
    const sel = T.indexSelect(x, 1, idx);
    close(
      sel,
      [...indices([2, 3, 3])].map(([i, j, k]) => X.at([i!, [3, 0, 3][j!]!, k!])),
      "indexSelect",
      [2, 3, 3],
    );
    const w = data([5, 3], 10);
    const W = Nd.of(w);
    const ids = T.tensor([[4, 1], [0, 4]], undefined, { dtype: "i32" });
    const e = T.embedding(w, ids);
    const flat = [4, 1, 0, 4];
    close(
      e,
      [...indices([2, 2, 3])].map(([i, j, k]) => W.at([flat[i! * 2 + j!]!, k!])),
      "embedding",
      [2, 2, 3],
    );
    assert.throws(() => T.embedding(w, T.tensor([5], [1], { dtype: "i32" })), KernelError);
  });

  check("conv2d with stride, padding, dilation and bias", () => {
    const convOracle = (
      x: Nd,
      w: Nd,
      b: number[] | null,
      s: number[],
      p: number[],
      d: number[],
    ) => {
      const [N, C, H, W] = x.shape as [number, number, number, number];
      const [K, , R, S] = w.shape as [number, number, number, number];
      const OH = Math.floor((H + 2 * p[0]! - d[0]! * (R - 1) - 1) / s[0]!) + 1;
      const OW = Math.floor((W + 2 * p[1]! - d[1]! * (S - 1) - 1) / s[1]!) + 1;
      const out: number[] = [];
      for (const [n, k, oh, ow] of indices([N, K, OH, OW])) {
        let acc = b ? b[k!]! : 0;
        for (const [c, r, q] of indices([C, R, S])) {
          const ih = oh! * s[0]! - p[0]! + r! * d[0]!, iw = ow! * s[1]! - p[1]! + q! * d[1]!;
          if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
            acc += x.at([n!, c!, ih, iw]) * w.at([k!, c!, r!, q!]);
          }
        }
        out.push(acc);
      }
      return { out, shape: [N, K, OH, OW] };
    };
    const x = data([2, 3, 7, 6], 11), w = data([4, 3, 3, 2], 12), b = data([4], 13);
    for (
      const [s, p, d] of [[[1, 1], [0, 0], [1, 1]], [[2, 1], [1, 2], [1, 1]], [[1, 2], [2, 1], [
        2,
        2,
      ]]]
    ) {
      const o = convOracle(Nd.of(x), Nd.of(w), b.toArray(), s!, p!, d!);
      const y = T.conv2d(x, w, b, {
        stride: s as [number, number],
        padding: p as [number, number],
        dilation: d as [number, number],
      });
      close(y, o.out, `conv2d s${s} p${p} d${d}`, o.shape);
    }
    const o = convOracle(Nd.of(x), Nd.of(w), null, [1, 1], [1, 1], [1, 1]);
    close(T.conv2d(x, w, null, { padding: 1 }), o.out, "conv2d without bias", o.shape);
  });

  check("pooling, global average pooling, nearest upsampling", () => {
    const x = data([2, 2, 5, 6], 14);
    const X = Nd.of(x);
    const pool = (k: number, s: number, p: number, kind: "max" | "avg") => {
      const OH = Math.floor((5 + 2 * p - k) / s) + 1, OW = Math.floor((6 + 2 * p - k) / s) + 1;
      const out: number[] = [];
      for (const [n, c, oh, ow] of indices([2, 2, OH, OW])) {
        const vals: number[] = [];
        for (const [r, q] of indices([k, k])) {
          const ih = oh! * s - p + r!, iw = ow! * s - p + q!;
          if (ih >= 0 && ih < 5 && iw >= 0 && iw < 6) vals.push(X.at([n!, c!, ih, iw]));
          else if (kind === "avg") vals.push(0);
        }
        out.push(kind === "max" ? Math.max(...vals) : vals.reduce((u, v) => u + v, 0) / (k * k));
      }
      return { out, shape: [2, 2, OH, OW] };
    };
    for (const [k, s, p] of [[2, 2, 0], [3, 2, 1], [3, 1, 1]] as const) {
      const m = pool(k, s, p, "max"), a = pool(k, s, p, "avg");
      close(
        T.maxPool2d(x, { kernelSize: k, stride: s, padding: p }),
        m.out,
        `maxPool k${k} s${s} p${p}`,
        m.shape,
      );
      close(
        T.avgPool2d(x, { kernelSize: k, stride: s, padding: p }),
        a.out,
        `avgPool k${k} s${s} p${p}`,
        a.shape,
      );
    }
    const g = [...indices([2, 2])].map(([n, c]) => {
      let s = 0;
      for (const [h, w] of indices([5, 6])) s += X.at([n!, c!, h!, w!]);
      return s / 30;
    });
    close(T.globalAvgPool(x), g, "globalAvgPool", [2, 2]);
    const u = [...indices([2, 2, 10, 12])].map(([n, c, h, w]) => X.at([n!, c!, h! >> 1, w! >> 1]));
    close(T.upsampleNearest2x(x), u, "upsampleNearest2x", [2, 2, 10, 12]);
  });

  check("batchNorm, layerNorm, rmsNorm", () => {
    const x = data([3, 2, 4], 15, -2, 2);
    const X = Nd.of(x);
    const gamma = data([2], 16, 0.5, 1.5), beta = data([2], 17);
    const G = gamma.toArray(), B = beta.toArray();
    const bn: number[] = new Array(24);
    for (let c = 0; c < 2; c++) {
      const vals = [...indices([3, 4])].map(([n, j]) => X.at([n!, c, j!]));
      const m = vals.reduce((u, v) => u + v, 0) / 12;
      const v = vals.reduce((u, w) => u + (w - m) ** 2, 0) / 12;
      for (const [n, j] of indices([3, 4])) {
        bn[n! * 8 + c * 4 + j!] = (X.at([n!, c, j!]) - m) / Math.sqrt(v + 1e-5) * G[c]! + B[c]!;
      }
    }
    close(T.batchNorm(x, gamma, beta), bn, "batchNorm training");
    const rm = T.tensor([0.5, -0.5]), rv = T.tensor([2, 0.5]);
    const ev = [...indices([3, 2, 4])].map(([, c, j], i) =>
      (X.data[i]! - [0.5, -0.5][c!]!) / Math.sqrt([2, 0.5][c!]! + 1e-5) * G[c!]! + B[c!]! + 0 * j!
    );
    close(
      T.batchNorm(x, gamma, beta, { training: false, runningMean: rm, runningVar: rv }),
      ev,
      "batchNorm eval",
    );
    const g4 = data([4], 18, 0.5, 1.5), b4 = data([4], 19);
    const G4 = g4.toArray(), B4 = b4.toArray();
    const ln: number[] = [], rms: number[] = [];
    for (let r = 0; r < 6; r++) {
      const row = X.data.slice(r * 4, r * 4 + 4);
      const m = row.reduce((u, v) => u + v, 0) / 4;
      const v = row.reduce((u, w) => u + (w - m) ** 2, 0) / 4;
      const ms = row.reduce((u, w) => u + w * w, 0) / 4;
      row.forEach((w, c) => {
        ln.push((w - m) / Math.sqrt(v + 1e-5) * G4[c]! + B4[c]!);
        rms.push(w / Math.sqrt(ms + 1e-6) * G4[c]!);
      });
    }
    close(T.layerNorm(x, g4, b4), ln, "layerNorm");
    close(T.rmsNorm(x, g4), rms, "rmsNorm");
  });

  check("dropout keeps elements whose Philox uniform is >= p, scaled by 1/(1-p)", () => {
    T.manualSeed(5);
    const x = data([50], 20);
    const X = x.toArray();
    const { seed, offset } = T.randomState();
    const y = T.dropout(x, 0.3);
    const expect = X.map((v, i) =>
      philoxUniform(philoxElement(seed, offset, i)[0]) >= 0.3 ? v / 0.7 : 0
    );
    close(y, expect, "dropout");
    assert.equal(T.randomState().offset, offset + 50, "dropout advances the generator by its size");
    close(T.dropout(x, 1), new Array(50).fill(0), "dropout p = 1");
  });

  check("crossEntropy and mse", () => {
    const logits = data([4, 5], 21, -3, 3);
    const L = logits.toArray();
    const tg = [4, 0, 2, 2];
    const targets = T.tensor(tg, [4], { dtype: "i32" });
    let ce = 0;
    for (let r = 0; r < 4; r++) {
      const row = L.slice(r * 5, r * 5 + 5);
      ce += Math.log(row.reduce((u, v) => u + Math.exp(v), 0)) - row[tg[r]!]!;
    }
    close(T.crossEntropy(logits, targets), [ce / 4], "crossEntropy", []);
    const a = data([3, 2], 22), b = data([3, 2], 23);
    const A = a.toArray(), B = b.toArray();
    close(T.mse(a, b), [A.reduce((u, v, i) => u + (v - B[i]!) ** 2, 0) / 6], "mse", []);
  });

  check("creation: tensor, zeros, ones, full, arange, fromTypedArray, cast", () => {
    assert.deepEqual(T.tensor([[1, 2], [3, 4]]).shape, [2, 2]);
    assert.deepEqual(T.tensor(5).shape, []);
    assert.equal(T.tensor(5).item(), 5);
    assert.deepEqual(T.zeros([2, 2]).toArray(), [0, 0, 0, 0]);
    assert.deepEqual(T.ones([3]).toArray(), [1, 1, 1]);
    assert.deepEqual(T.full([2], -7, { dtype: "i32" }).toArray(), [-7, -7]);
    assert.equal(T.full([2], -7, { dtype: "i32" }).dtype, "i32");
    assert.deepEqual(T.arange(5).toArray(), [0, 1, 2, 3, 4]);
    assert.deepEqual(T.arange(2, -2, -1.5).toArray(), [2, 0.5, -1]);
    assert.deepEqual(T.arange(3, undefined, 1, { dtype: "i32" }).toArray(), [0, 1, 2]);
    const ti = T.fromTypedArray(new Int32Array([3, -4]), [2]);
    assert.equal(ti.dtype, "i32");
    assert.ok(ti.toTypedArray() instanceof Int32Array);
    assert.deepEqual(T.cast(T.tensor([1.7, -1.7, 2]), "i32").toArray(), [1, -1, 2]);
    assert.deepEqual(T.cast(ti, "f32").toArray(), [3, -4]);
    assert.deepEqual(T.zeros([0, 3]).toArray(), []);
    assert.deepEqual(T.add(T.zeros([0, 3]), T.ones([3])).shape, [0, 3]);
    assert.deepEqual(T.zerosLike(ti).dtype, "i32");
    assert.deepEqual(T.onesLike(T.zeros([2])).toArray(), [1, 1]);
  });
}

// ---------------------------------------------------------------- errors

T.setDefaultBackend(new ReferenceBackend());

Deno.test("errors name the op and the shapes", () => {
  T.tidy(() => {
    const a = T.zeros([2, 3]), b = T.zeros([4, 5]);
    assert.throws(() => T.matmul(a, b), {
      message: "matmul: inner dimensions differ: [2,3] @ [4,5] (3 vs 4)",
    });
    assert.throws(() => T.add(a, T.zeros([2])), {
      message: "add: shapes [2,3] and [2] cannot be broadcast together",
    });
    assert.throws(
      () => T.matmul(T.zeros([2, 2, 3]), T.zeros([3, 3, 2])),
      /matmul: shapes \[2\] and \[3\] cannot be broadcast/,
    );
    assert.throws(
      () => T.reshape(a, [4, 2]),
      /reshape: cannot reshape \[2,3\] \(6 elements\) to \[4,2\]/,
    );
    assert.throws(() => T.sum(a, 2), /sum: axis 2 is out of range for shape \[2,3\]/);
    assert.throws(
      () => T.concat([a, b], 0),
      /concat: shapes differ outside axis 0: \[2,3\] f32, \[4,5\] f32/,
    );
    assert.throws(
      () => T.conv2d(T.zeros([1, 3, 5, 5]), T.zeros([2, 2, 3, 3])),
      /conv2d: input channels differ: x \[1,3,5,5\] has 3, weight \[2,2,3,3\] expects 2/,
    );
    assert.throws(
      () => T.conv2d(T.zeros([1, 1, 2, 2]), T.zeros([1, 1, 3, 3])),
      /conv2d: input \[1,1,2,2\]/,
    );
    assert.throws(
      () => T.maxPool2d(T.zeros([2, 2]), { kernelSize: 2 }),
      /maxPool2d: expected an \[N,C,H,W\] input, got \[2,2\]/,
    );
    assert.throws(
      () => T.slice(a, [0, 2], [2, 2]),
      /slice: start 2 size 2 is out of range for dim 1 of \[2,3\]/,
    );
    assert.throws(() => T.permute(a, [0, 0]), /permute: \[0,0\] is not a permutation/);
    assert.throws(
      () => T.layerNorm(a, T.ones([2]), T.zeros([3])),
      /layerNorm: gamma must be \[3\] for input \[2,3\], got \[2\]/,
    );
    assert.throws(() => T.mse(a, T.zeros([3, 2])), /mse: shapes differ: \[2,3\] and \[3,2\]/);
    assert.throws(() => T.broadcastTo(a, [3, 3]), /broadcastTo/);
    assert.throws(() => T.dropout(a, 1.5), /dropout: p must be in \[0, 1\], got 1.5/);
    assert.throws(() => T.tensor([1, 2, 3], [2, 2]), /tensor: 3 values do not fill shape \[2,2\]/);
    assert.throws(() => T.tensor([[1, 2], [3]]), /ragged/);
  });
});

Deno.test("errors name the op and the dtypes", () => {
  T.tidy(() => {
    const f = T.zeros([3]), i = T.zeros([3], { dtype: "i32" });
    assert.throws(() => T.add(f, i), {
      message: 'add: expected f32 tensors, got [3] f32 and [3] i32 (cast with .cast("f32"))',
    });
    assert.throws(() => T.exp(i), /exp: expected f32 tensors, got \[3\] i32/);
    assert.throws(
      () => T.crossEntropy(T.zeros([3, 2]), f),
      /crossEntropy: expected f32 logits and i32 class indices/,
    );
    assert.throws(
      () => T.crossEntropy(T.zeros([3, 2]), T.zeros([2], { dtype: "i32" })),
      /crossEntropy: logits \[3,2\] need targets of shape \[3\], got \[2\]/,
    );
    assert.throws(
      () => T.embedding(T.zeros([4, 2]), f),
      /embedding: ids must be i32, got \[3\] f32/,
    );
    assert.throws(() => T.indexSelect(f, 0, f), /indexSelect: index must be a 1-D i32 tensor/);
    assert.throws(() => T.tensor([1.5], [1], { dtype: "i32" }), /not an i32 integer/);
    assert.throws(
      () => T.crossEntropy(T.zeros([1, 2]), T.tensor([2], [1], { dtype: "i32" })),
      KernelError,
    );
  });
});

Deno.test("ops reject disposed tensors and tensors from another backend", () => {
  const a = T.zeros([2]);
  a.dispose();
  assert.throws(() => T.add(a, 1), /add: tensor \[2\] f32 was already disposed/);
  assert.throws(() => T.sub(a, 1), /sub: tensor \[2\] f32 was already disposed/);
  assert.throws(() => T.div(a, 2), /div: tensor \[2\] f32 was already disposed/);
  const other = T.zeros([2], { backend: new ReferenceBackend() });
  const mine = T.zeros([2]);
  assert.throws(() => T.add(mine, other), /add: tensors live on different backends/);
  other.dispose();
  mine.dispose();
});

Deno.test("OP_TABLE is keyed by each rule's own op name, and a recorded node points at its entry", () => {
  for (const [key, rule] of Object.entries(T.OP_TABLE)) assert.equal(rule.name, key);
  const be = new ReferenceBackend();
  T.withBackend(be, () => {
    const x = T.tensor([1, 2, 3], undefined, { requiresGrad: true });
    const y = T.mul(x, x);
    assert.equal(y.node?.op, T.OP_TABLE.mul);
    const s = T.sum(y);
    assert.equal(s.node?.op, T.OP_TABLE.sum);
  });
});
