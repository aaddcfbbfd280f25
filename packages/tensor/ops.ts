/**
 * The op table: every differentiable tensor op, its forward (which validates
 * shapes and dtypes, allocates the output and runs kernels through the
 * backend) next to its gradient rule. Autodiff is data: `OPS.<name>` is
 * `{ name, forward, backward }`, and a recorded graph node points at the entry.
 *
 * Every op is also exported as a function (`add(a, b)`) and, for the common
 * ones, as a {@link Tensor} method (`a.add(b)`). Binary ops follow numpy
 * broadcasting and accept a number on either side. Errors name the op and the
 * shapes involved, e.g. `matmul: inner dimensions differ: [2,3] @ [4,5]`.
 *
 * @module
 */

import type { Backend, DType } from "./backend.ts";
import type { KernelName } from "./kernels.ts";
import { convOutSize, MAX_DIMS, poolDims } from "./kernels.ts";
import { type GradNode, type GradRule, isGradEnabled } from "./autograd.ts";
import { empty, full, savedView, Tensor, type TensorLike, view } from "./tensor.ts";
import { nextRandom } from "./random.ts";
import {
  broadcastShapes,
  broadcastStrides,
  checkShape,
  fmt,
  normAxis,
  numel,
  sameShape,
} from "./_shape.ts";

// ------------------------------------------------------------------ plumbing

function run(
  kernel: KernelName,
  ins: readonly Tensor[],
  outs: readonly Tensor[],
  p: number[],
): void {
  const be = (outs[0] ?? ins[0])!.backend;
  const ib = new Array(ins.length);
  for (let i = 0; i < ins.length; i++) ib[i] = ins[i]!.storage.buffer;
  const ob = new Array(outs.length);
  for (let i = 0; i < outs.length; i++) ob[i] = outs[i]!.storage.buffer;
  be.run(kernel, ib, ob, p);
}

function desc(t: Tensor): string {
  return `${fmt(t.shape)} ${t.dtype}`;
}

/** Checks that inputs are live, f32 (unless allowed) and on one backend. */
function check(op: string, ts: readonly Tensor[], dtypes: "f32" | "any" = "f32"): Backend {
  const be = ts[0]!.backend;
  for (const t of ts) {
    if (!(t instanceof Tensor)) throw new TypeError(`${op}: expected a Tensor, got ${t}`);
    t.assertLive(op);
    if (dtypes === "f32" && t.dtype !== "f32") {
      throw new TypeError(
        `${op}: expected f32 tensors, got ${ts.map(desc).join(" and ")} (cast with .cast("f32"))`,
      );
    }
    if (t.backend !== be) {
      throw new Error(
        `${op}: tensors live on different backends (${be.name} and ${t.backend.name}); move them to one backend first`,
      );
    }
  }
  return be;
}

function checkRank(op: string, shape: readonly number[]): void {
  if (shape.length > MAX_DIMS) {
    throw new RangeError(`${op}: shape ${fmt(shape)} has more than ${MAX_DIMS} dimensions`);
  }
}

/** Records a graph node on `out` when grad mode is on and an input requires grad. */
function record(
  rule: GradRule,
  out: Tensor,
  inputs: readonly Tensor[],
  saved: readonly Tensor[],
  attrs: unknown,
): Tensor {
  if (!isGradEnabled()) return out;
  let any = false;
  for (let i = 0; i < inputs.length; i++) if (inputs[i]!.requiresGrad) any = true;
  if (!any) return out;
  const parents = new Array<GradNode | Tensor | null>(inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    const t = inputs[i]!;
    const p = t.node ?? (t.requiresGrad ? t : null);
    if (p !== null && p !== t) (p as GradNode).refs++;
    parents[i] = p;
  }
  const keep = new Array<Tensor>(saved.length);
  for (let i = 0; i < saved.length; i++) keep[i] = savedView(saved[i]!);
  out.node = {
    op: rule,
    inputs: parents,
    saved: keep,
    attrs,
    shape: out.shape,
    refs: 1,
    released: false,
  };
  return out;
}

function scalarTensor(like: Tensor, v: number): Tensor {
  return full([], v, { backend: like.backend });
}

/** Sums a broadcast gradient back to `shape` (a new handle either way). */
function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(g.shape, shape)) return view(g, g.shape);
  const nd = g.shape.length;
  const padded = new Array<number>(nd).fill(1);
  for (let i = 0; i < shape.length; i++) padded[nd - shape.length + i] = shape[i]!;
  const y = empty(g.backend, shape, "f32");
  run("sum_to", [g], [y], [nd, ...g.shape, ...padded]);
  return y;
}

/** Materializes `x` broadcast to `shape` (no recording). */
function expandRaw(x: Tensor, shape: readonly number[]): Tensor {
  const y = empty(x.backend, shape, x.dtype);
  run("expand", [x], [y], [shape.length, ...shape, ...broadcastStrides(x.shape, shape)]);
  return y;
}

function attrsOf<T>(node: GradNode): T {
  return node.attrs as T;
}

// ------------------------------------------------------------------ elementwise builders

type BinaryKernel = "add" | "sub" | "mul" | "div" | "eq" | "ne" | "lt" | "le" | "gt" | "ge";

function binaryRaw(op: string, kernel: BinaryKernel, a: Tensor, b: Tensor): Tensor {
  const be = check(op, [a, b]);
  if (sameShape(a.shape, b.shape)) {
    const y = empty(be, a.shape, "f32");
    run(kernel, [a, b], [y], [1, y.size, 1, 1]);
    return y;
  }
  const out = broadcastShapes(op, a.shape, b.shape);
  checkRank(op, out);
  const y = empty(be, out, "f32");
  run(kernel, [a, b], [y], [
    out.length,
    ...out,
    ...broadcastStrides(a.shape, out),
    ...broadcastStrides(b.shape, out),
  ]);
  return y;
}

interface BinAttrs {
  a: readonly number[];
  b: readonly number[];
}

function binaryEntry(
  name: BinaryKernel,
  grads: (gy: Tensor, node: GradNode) => [Tensor | null, Tensor | null],
) {
  return {
    name,
    forward(a: Tensor, b: Tensor): Tensor {
      const y = binaryRaw(name, name, a, b);
      const save = name === "mul" || name === "div" ? [a, b] : [];
      return record(this, y, [a, b], save, { a: a.shape, b: b.shape } satisfies BinAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { a, b } = attrsOf<BinAttrs>(node);
      const [ga, gb] = grads(gy, node);
      return [
        ga && node.inputs[0] ? sumTo(ga, a) : null,
        gb && node.inputs[1] ? sumTo(gb, b) : null,
      ];
    },
  };
}

type UnaryKernel =
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "relu"
  | "gelu_tanh"
  | "gelu_erf"
  | "silu"
  | "sigmoid"
  | "tanh";

function unaryEntry(
  name: UnaryKernel,
  save: "x" | "y" | null,
  grad: (gy: Tensor, saved: Tensor | undefined) => Tensor,
) {
  return {
    name,
    forward(x: Tensor): Tensor {
      const be = check(name.startsWith("gelu") ? "gelu" : name, [x]);
      const y = empty(be, x.shape, "f32");
      run(name, [x], [y], [x.size]);
      return record(this, y, [x], save === "x" ? [x] : save === "y" ? [y] : [], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      return [grad(gy, node.saved[0])];
    },
  };
}

/** A unary op whose gradient is the `<kernel>_backward(saved, gy)` kernel. */
function kernelGrad(kernel: KernelName) {
  return (gy: Tensor, saved: Tensor | undefined): Tensor => {
    const gx = empty(gy.backend, gy.shape, "f32");
    run(kernel, [saved!, gy], [gx], [gy.size]);
    return gx;
  };
}

type ScalarKernel = "add_scalar" | "mul_scalar" | "rsub_scalar" | "rdiv_scalar" | "pow_scalar";

function scalarRaw(op: string, kernel: KernelName, x: Tensor, s: number): Tensor {
  const be = check(op, [x]);
  if (typeof s !== "number") throw new TypeError(`${op}: expected a number, got ${s}`);
  const y = empty(be, x.shape, "f32");
  run(kernel, [x], [y], [x.size, s]);
  return y;
}

function scalarEntry(
  name: ScalarKernel,
  label: string,
  save: boolean,
  grad: (gy: Tensor, s: number, x: Tensor | undefined) => Tensor,
) {
  return {
    name,
    forward(x: Tensor, s: number, opName: string = label): Tensor {
      const y = scalarRaw(opName, name, x, s);
      return record(this, y, [x], save ? [x] : [], s);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      return [grad(gy, node.attrs as number, node.saved[0])];
    },
  };
}

// ------------------------------------------------------------------ reductions

interface ReduceAttrs {
  outer: number;
  dim: number;
  inner: number;
  xShape: readonly number[];
  keptShape: readonly number[];
}

function reduceDims(op: string, x: Tensor, axis: number | undefined, keepdim: boolean) {
  const s = x.shape;
  if (axis === undefined) {
    const keptShape = s.map(() => 1);
    return {
      outer: 1,
      dim: x.size,
      inner: 1,
      outShape: keepdim ? keptShape : [],
      keptShape,
    };
  }
  const a = normAxis(op, axis, s.length, s);
  let outer = 1, inner = 1;
  for (let i = 0; i < a; i++) outer *= s[i]!;
  for (let i = a + 1; i < s.length; i++) inner *= s[i]!;
  const keptShape = s.map((d, i) => (i === a ? 1 : d));
  const outShape = keepdim ? keptShape : s.filter((_, i) => i !== a);
  return { outer, dim: s[a]!, inner, outShape, keptShape };
}

function reduceEntry(name: "sum" | "mean" | "max", kernel: KernelName) {
  return {
    name,
    forward(x: Tensor, axis?: number, keepdim = false): Tensor {
      const be = check(name, [x]);
      const d = reduceDims(name, x, axis, keepdim);
      if (name === "max" && d.dim === 0) {
        throw new RangeError(`max: cannot reduce an empty axis of shape ${fmt(x.shape)}`);
      }
      const y = empty(be, d.outShape, "f32");
      run(kernel, [x], [y], [d.outer, d.dim, d.inner]);
      const attrs: ReduceAttrs = {
        outer: d.outer,
        dim: d.dim,
        inner: d.inner,
        xShape: x.shape,
        keptShape: d.keptShape,
      };
      return record(this, y, [x], name === "max" ? [x] : [], attrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const a = attrsOf<ReduceAttrs>(node);
      if (name === "max") {
        const gx = empty(gy.backend, a.xShape, "f32");
        run("max_axis_backward", [node.saved[0]!, gy], [gx], [a.outer, a.dim, a.inner]);
        return [gx];
      }
      let g = view(gy, a.keptShape);
      if (name === "mean") g = scalarRaw("mean", "mul_scalar", g, 1 / a.dim);
      return [expandRaw(g, a.xShape)];
    },
  };
}

// ------------------------------------------------------------------ matmul core

/** Batched matmul with broadcast batch dims, no recording. */
function mm(op: string, a: Tensor, b: Tensor, ta: boolean, tb: boolean): Tensor {
  const be = check(op, [a, b]);
  if (a.ndim < 2 || b.ndim < 2) {
    throw new RangeError(
      `${op}: operands need at least 2 dimensions, got ${fmt(a.shape)} and ${fmt(b.shape)}`,
    );
  }
  const ra = a.shape[a.ndim - 2]!, ca = a.shape[a.ndim - 1]!;
  const rb = b.shape[b.ndim - 2]!, cb = b.shape[b.ndim - 1]!;
  const m = ta ? ca : ra, k = ta ? ra : ca;
  const kb = tb ? cb : rb, n = tb ? rb : cb;
  if (k !== kb) {
    const sa = ta ? `${fmt(a.shape)}^T` : fmt(a.shape);
    const sb = tb ? `${fmt(b.shape)}^T` : fmt(b.shape);
    throw new RangeError(`${op}: inner dimensions differ: ${sa} @ ${sb} (${k} vs ${kb})`);
  }
  const ba = a.shape.slice(0, -2), bb = b.shape.slice(0, -2);
  const batchShape = sameShape(ba, bb) ? ba : broadcastShapes(op, ba, bb);
  const outShape = [...batchShape, m, n];
  checkRank(op, outShape);
  const batch = numel(batchShape);
  let A = a, B = b;
  let sa = m * k, sb = k * n;
  if (numel(ba) === 1) sa = 0;
  else if (!sameShape(ba, batchShape)) {
    A = expandRaw(a, [...batchShape, ra, ca]);
  }
  if (numel(bb) === 1) sb = 0;
  else if (!sameShape(bb, batchShape)) {
    B = expandRaw(b, [...batchShape, rb, cb]);
  }
  const y = empty(be, outShape, "f32");
  try {
    run("matmul", [A, B], [y], [batch, m, n, k, ta ? 1 : 0, tb ? 1 : 0, sa, sb]);
  } finally {
    if (A !== a) A.dispose();
    if (B !== b) B.dispose();
  }
  return y;
}

// ------------------------------------------------------------------ layout helpers

function permuteRaw(x: Tensor, perm: readonly number[]): Tensor {
  const y = empty(x.backend, perm.map((p) => x.shape[p]!), x.dtype);
  run("permute", [x], [y], [x.ndim, ...x.shape, ...perm]);
  return y;
}

function sliceRaw(x: Tensor, starts: readonly number[], sizes: readonly number[]): Tensor {
  const y = empty(x.backend, sizes, x.dtype);
  run("slice", [x], [y], [x.ndim, ...x.shape, ...starts, ...sizes]);
  return y;
}

function pair(op: string, name: string, v: number | readonly number[] | undefined, dflt: number) {
  const p = v === undefined ? [dflt, dflt] : typeof v === "number" ? [v, v] : v;
  if (p.length !== 2 || !p.every((x) => Number.isInteger(x) && x >= 0)) {
    throw new RangeError(`${op}: ${name} must be a non-negative integer or a pair, got ${v}`);
  }
  return p as [number, number];
}

function need4d(op: string, x: Tensor): [number, number, number, number] {
  if (x.ndim !== 4) throw new RangeError(`${op}: expected an [N,C,H,W] input, got ${fmt(x.shape)}`);
  return x.shape as unknown as [number, number, number, number];
}

// ------------------------------------------------------------------ the table

interface ConvAttrs {
  params: number[];
  hasBias: boolean;
}
interface PoolAttrs {
  params: number[];
  xShape: readonly number[];
}
interface NormAttrs {
  params: number[];
}

/**
 * The op table: forward and gradient rule of every differentiable op, together.
 * Entries are called through the exported functions.
 */
const OPS = {
  add: binaryEntry("add", (gy) => [gy, gy]),
  sub: binaryEntry("sub", (gy, n) => [gy, n.inputs[1] ? neg(gy) : null]),
  mul: binaryEntry("mul", (gy, n) => [
    n.inputs[0] ? mul(gy, n.saved[1]!) : null,
    n.inputs[1] ? mul(gy, n.saved[0]!) : null,
  ]),
  div: binaryEntry("div", (gy, n) => {
    const [a, b] = n.saved as [Tensor, Tensor];
    return [
      n.inputs[0] ? div(gy, b) : null,
      n.inputs[1] ? neg(div(mul(gy, a), mul(b, b))) : null,
    ];
  }),
  neg: unaryEntry("neg", null, (gy) => neg(gy)),
  exp: unaryEntry("exp", "y", (gy, y) => mul(gy, y!)),
  log: unaryEntry("log", "x", (gy, x) => div(gy, x!)),
  sqrt: unaryEntry("sqrt", "y", (gy, y) => mul(div(gy, y!), 0.5)),
  rsqrt: unaryEntry("rsqrt", "y", (gy, y) => mul(mul(gy, pow(y!, 3)), -0.5)),
  relu: unaryEntry("relu", "x", kernelGrad("relu_backward")),
  gelu_tanh: unaryEntry("gelu_tanh", "x", kernelGrad("gelu_tanh_backward")),
  gelu_erf: unaryEntry("gelu_erf", "x", kernelGrad("gelu_erf_backward")),
  silu: unaryEntry("silu", "x", kernelGrad("silu_backward")),
  sigmoid: unaryEntry("sigmoid", "y", kernelGrad("sigmoid_backward")),
  tanh: unaryEntry("tanh", "y", kernelGrad("tanh_backward")),

  add_scalar: scalarEntry("add_scalar", "add", false, (gy) => view(gy, gy.shape)),
  mul_scalar: scalarEntry("mul_scalar", "mul", false, (gy, s) => mul(gy, s)),
  rsub_scalar: scalarEntry("rsub_scalar", "sub", false, (gy) => neg(gy)),
  rdiv_scalar: scalarEntry(
    "rdiv_scalar",
    "div",
    true,
    (gy, s, x) => mul(div(gy, mul(x!, x!)), -s),
  ),
  pow_scalar: scalarEntry("pow_scalar", "pow", true, (gy, s, x) => mul(gy, mul(pow(x!, s - 1), s))),

  where: {
    name: "where",
    forward(cond: Tensor, a: Tensor, b: Tensor): Tensor {
      const be = check("where", [cond, a, b]);
      const out = broadcastShapes("where", broadcastShapes("where", cond.shape, a.shape), b.shape);
      checkRank("where", out);
      const y = empty(be, out, "f32");
      run("where", [cond, a, b], [y], [
        out.length,
        ...out,
        ...broadcastStrides(cond.shape, out),
        ...broadcastStrides(a.shape, out),
        ...broadcastStrides(b.shape, out),
      ]);
      return record(this, y, [cond, a, b], [cond], { a: a.shape, b: b.shape });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { a, b } = attrsOf<BinAttrs>(node);
      const cond = node.saved[0]!;
      const zero = scalarTensor(gy, 0);
      return [
        null,
        node.inputs[1] ? sumTo(where(cond, gy, zero), a) : null,
        node.inputs[2] ? sumTo(where(cond, zero, gy), b) : null,
      ];
    },
  },

  broadcast_to: {
    name: "broadcast_to",
    forward(x: Tensor, shape: readonly number[]): Tensor {
      check("broadcastTo", [x], "any");
      checkShape("broadcastTo", shape);
      checkRank("broadcastTo", shape);
      const out = broadcastShapes("broadcastTo", x.shape, shape);
      if (!sameShape(out, shape)) {
        throw new RangeError(`broadcastTo: cannot broadcast ${fmt(x.shape)} to ${fmt(shape)}`);
      }
      return record(this, expandRaw(x, [...shape]), [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      return [sumTo(gy, node.attrs as number[])];
    },
  },

  sum: reduceEntry("sum", "sum_axis"),
  mean: reduceEntry("mean", "mean_axis"),
  max: reduceEntry("max", "max_axis"),

  softmax: {
    name: "softmax",
    forward(x: Tensor): Tensor {
      const be = check("softmax", [x]);
      if (x.ndim < 1) throw new RangeError(`softmax: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      const y = empty(be, x.shape, "f32");
      run("softmax", [x], [y], [cols === 0 ? 0 : x.size / cols, cols]);
      return record(this, y, [x], [y], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const cols = gy.shape[gy.ndim - 1]!;
      const gx = empty(gy.backend, gy.shape, "f32");
      run("softmax_backward", [node.saved[0]!, gy], [gx], [cols === 0 ? 0 : gy.size / cols, cols]);
      return [gx];
    },
  },
  log_softmax: {
    name: "log_softmax",
    forward(x: Tensor): Tensor {
      const be = check("logSoftmax", [x]);
      if (x.ndim < 1) throw new RangeError(`logSoftmax: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      const y = empty(be, x.shape, "f32");
      run("log_softmax", [x], [y], [cols === 0 ? 0 : x.size / cols, cols]);
      return record(this, y, [x], [y], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const cols = gy.shape[gy.ndim - 1]!;
      const gx = empty(gy.backend, gy.shape, "f32");
      run("log_softmax_backward", [node.saved[0]!, gy], [gx], [
        cols === 0 ? 0 : gy.size / cols,
        cols,
      ]);
      return [gx];
    },
  },

  matmul: {
    name: "matmul",
    forward(a: Tensor, b: Tensor, ta: boolean, tb: boolean): Tensor {
      const y = mm("matmul", a, b, ta, tb);
      return record(this, y, [a, b], [a, b], { ta, tb });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { ta, tb } = attrsOf<{ ta: boolean; tb: boolean }>(node);
      const [a, b] = node.saved as [Tensor, Tensor];
      let ga: Tensor | null = null, gb: Tensor | null = null;
      if (node.inputs[0]) {
        ga = ta ? mm("matmul", b, gy, tb, true) : mm("matmul", gy, b, false, !tb);
        ga = sumTo(ga, a.shape);
      }
      if (node.inputs[1]) {
        gb = tb ? mm("matmul", gy, a, true, ta) : mm("matmul", a, gy, !ta, false);
        gb = sumTo(gb, b.shape);
      }
      return [ga, gb];
    },
  },

  permute: {
    name: "permute",
    forward(x: Tensor, perm: readonly number[]): Tensor {
      check("permute", [x], "any");
      const nd = x.ndim;
      const p = perm.map((d) => (d < 0 ? d + nd : d));
      if (p.length !== nd || [...p].sort((u, v) => u - v).some((v, i) => v !== i)) {
        throw new RangeError(
          `permute: [${perm.join(",")}] is not a permutation of the ${nd} dimensions of ${
            fmt(x.shape)
          }`,
        );
      }
      checkRank("permute", x.shape);
      return record(this, permuteRaw(x, p), [x], [], p);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const p = node.attrs as number[];
      const inv = new Array<number>(p.length);
      for (let i = 0; i < p.length; i++) inv[p[i]!] = i;
      return [permuteRaw(gy, inv)];
    },
  },

  reshape: {
    name: "reshape",
    forward(x: Tensor, shape: readonly number[]): Tensor {
      return record(this, view(x, shape), [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      return [view(gy, node.attrs as number[])];
    },
  },

  slice: {
    name: "slice",
    forward(x: Tensor, starts: readonly number[], sizes: readonly number[]): Tensor {
      checkRank("slice", x.shape);
      return record(this, sliceRaw(x, starts, sizes), [x], [], { starts, sizes, xShape: x.shape });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { starts, sizes, xShape } = attrsOf<
        { starts: number[]; sizes: number[]; xShape: number[] }
      >(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("slice_backward", [gy], [gx], [xShape.length, ...xShape, ...starts, ...sizes]);
      return [gx];
    },
  },

  concat: {
    name: "concat",
    forward(xs: readonly Tensor[], axis: number): Tensor {
      if (xs.length === 0) throw new RangeError("concat: needs at least one tensor");
      const be = check("concat", xs, "any");
      const first = xs[0]!;
      const a = normAxis("concat", axis, first.ndim, first.shape);
      for (const t of xs) {
        const ok = t.dtype === first.dtype && t.ndim === first.ndim &&
          t.shape.every((d, i) => i === a || d === first.shape[i]);
        if (!ok) {
          throw new RangeError(
            `concat: shapes differ outside axis ${axis}: ${xs.map(desc).join(", ")}`,
          );
        }
      }
      let outer = 1, inner = 1;
      for (let i = 0; i < a; i++) outer *= first.shape[i]!;
      for (let i = a + 1; i < first.ndim; i++) inner *= first.shape[i]!;
      const ds = xs.map((t) => t.shape[a]!);
      const total = ds.reduce((u, v) => u + v, 0);
      const out = first.shape.map((d, i) => (i === a ? total : d));
      const y = empty(be, out, first.dtype);
      run("concat", xs, [y], [xs.length, outer, inner, ...ds]);
      return record(this, y, xs, [], { outer, inner, ds, shapes: xs.map((t) => t.shape) });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { outer, inner, ds, shapes } = attrsOf<
        { outer: number; inner: number; ds: number[]; shapes: number[][] }
      >(node);
      const total = ds.reduce((u, v) => u + v, 0);
      const out: (Tensor | null)[] = [];
      let at = 0;
      for (let j = 0; j < ds.length; j++) {
        if (node.inputs[j]) {
          const g = empty(gy.backend, shapes[j]!, "f32");
          run("slice", [gy], [g], [3, outer, total, inner, 0, at, 0, outer, ds[j]!, inner]);
          out.push(g);
        } else out.push(null);
        at += ds[j]!;
      }
      return out;
    },
  },

  index_select: {
    name: "index_select",
    forward(x: Tensor, axis: number, index: Tensor): Tensor {
      const be = check("indexSelect", [x, index], "any");
      if (index.dtype !== "i32" || index.ndim !== 1) {
        throw new TypeError(`indexSelect: index must be a 1-D i32 tensor, got ${desc(index)}`);
      }
      const a = normAxis("indexSelect", axis, x.ndim, x.shape);
      let outer = 1, inner = 1;
      for (let i = 0; i < a; i++) outer *= x.shape[i]!;
      for (let i = a + 1; i < x.ndim; i++) inner *= x.shape[i]!;
      const out = x.shape.map((d, i) => (i === a ? index.size : d));
      const y = empty(be, out, x.dtype);
      const p = [outer, x.shape[a]!, inner, index.size];
      run("index_select", [x, index], [y], p);
      return record(this, y, [x, index], [index], { p, xShape: x.shape });
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { p, xShape } = attrsOf<{ p: number[]; xShape: number[] }>(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("index_select_backward", [gy, node.saved[0]!], [gx], p);
      return [gx, null];
    },
  },

  embedding: {
    name: "embedding",
    forward(weight: Tensor, ids: Tensor): Tensor {
      const be = check("embedding", [weight, ids], "any");
      if (weight.dtype !== "f32" || weight.ndim !== 2) {
        throw new TypeError(`embedding: weight must be a 2-D f32 tensor, got ${desc(weight)}`);
      }
      if (ids.dtype !== "i32") {
        throw new TypeError(`embedding: ids must be i32, got ${desc(ids)}`);
      }
      const [vocab, dim] = weight.shape as [number, number];
      const y = empty(be, [...ids.shape, dim], "f32");
      const p = [ids.size, vocab, dim];
      run("embedding", [weight, ids], [y], p);
      return record(this, y, [weight, ids], [ids], p);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const p = node.attrs as number[];
      const gw = empty(gy.backend, [p[1]!, p[2]!], "f32");
      run("embedding_backward", [gy, node.saved[0]!], [gw], p);
      return [gw, null];
    },
  },

  conv2d: {
    name: "conv2d",
    forward(x: Tensor, w: Tensor, bias: Tensor | null, opts: Conv2dOptions): Tensor {
      const be = check("conv2d", bias ? [x, w, bias] : [x, w]);
      const [N, C, H, W] = need4d("conv2d", x);
      if (w.ndim !== 4) {
        throw new RangeError(`conv2d: weight must be [K,C,R,S], got ${fmt(w.shape)}`);
      }
      const [K, Cw, R, S] = w.shape as [number, number, number, number];
      if (Cw !== C) {
        throw new RangeError(
          `conv2d: input channels differ: x ${fmt(x.shape)} has ${C}, weight ${
            fmt(w.shape)
          } expects ${Cw}`,
        );
      }
      if (bias && (bias.ndim !== 1 || bias.shape[0] !== K)) {
        throw new RangeError(`conv2d: bias must be [${K}], got ${fmt(bias.shape)}`);
      }
      const [sh, sw] = pair("conv2d", "stride", opts.stride, 1);
      const [ph, pw] = pair("conv2d", "padding", opts.padding, 0);
      const [dh, dw] = pair("conv2d", "dilation", opts.dilation, 1);
      if (sh < 1 || sw < 1 || dh < 1 || dw < 1) {
        throw new RangeError(`conv2d: stride and dilation must be >= 1`);
      }
      const OH = convOutSize(H, R, sh, ph, dh), OW = convOutSize(W, S, sw, pw, dw);
      if (OH < 1 || OW < 1) {
        throw new RangeError(
          `conv2d: input ${fmt(x.shape)} (padding ${ph}x${pw}) is smaller than the dilated kernel ${
            fmt(w.shape)
          }`,
        );
      }
      const params = [N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, bias ? 1 : 0];
      const y = empty(be, [N, K, OH, OW], "f32");
      run("conv2d", bias ? [x, w, bias] : [x, w], [y], params);
      const ins = bias ? [x, w, bias] : [x, w];
      return record(this, y, ins, [x, w], { params, hasBias: bias !== null } satisfies ConvAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<ConvAttrs>(node);
      const p = params.slice(0, 13).concat(0);
      const [x, w] = node.saved as [Tensor, Tensor];
      let gx: Tensor | null = null, gw: Tensor | null = null, gb: Tensor | null = null;
      if (node.inputs[0]) {
        gx = empty(gy.backend, x.shape, "f32");
        run("conv2d_backward_input", [gy, w], [gx], p);
      }
      if (node.inputs[1]) {
        gw = empty(gy.backend, w.shape, "f32");
        run("conv2d_backward_weight", [x, gy], [gw], p);
      }
      if (node.inputs.length > 2 && node.inputs[2]) {
        const [N, K, OH, OW] = gy.shape as [number, number, number, number];
        gb = empty(gy.backend, [K], "f32");
        run("conv2d_backward_bias", [gy], [gb], [N, K, OH * OW]);
      }
      return [gx, gw, gb];
    },
  },

  max_pool2d: {
    name: "max_pool2d",
    forward(x: Tensor, opts: Pool2dOptions): Tensor {
      const { y, params } = poolForward("maxPool2d", "max_pool2d", x, opts);
      return record(this, y, [x], [x], { params, xShape: x.shape } satisfies PoolAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params, xShape } = attrsOf<PoolAttrs>(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("max_pool2d_backward", [node.saved[0]!, gy], [gx], params);
      return [gx];
    },
  },
  avg_pool2d: {
    name: "avg_pool2d",
    forward(x: Tensor, opts: Pool2dOptions): Tensor {
      const { y, params } = poolForward("avgPool2d", "avg_pool2d", x, opts);
      return record(this, y, [x], [], { params, xShape: x.shape } satisfies PoolAttrs);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params, xShape } = attrsOf<PoolAttrs>(node);
      const gx = empty(gy.backend, xShape, "f32");
      run("avg_pool2d_backward", [gy], [gx], params);
      return [gx];
    },
  },
  global_avg_pool: {
    name: "global_avg_pool",
    forward(x: Tensor): Tensor {
      const be = check("globalAvgPool", [x]);
      const [N, C, H, W] = need4d("globalAvgPool", x);
      const y = empty(be, [N, C], "f32");
      run("global_avg_pool", [x], [y], [N * C, H * W]);
      return record(this, y, [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const xs = node.attrs as [number, number, number, number];
      const gx = empty(gy.backend, xs, "f32");
      run("global_avg_pool_backward", [gy], [gx], [xs[0] * xs[1], xs[2] * xs[3]]);
      return [gx];
    },
  },
  upsample_nearest2x: {
    name: "upsample_nearest2x",
    forward(x: Tensor): Tensor {
      const be = check("upsampleNearest2x", [x]);
      const [N, C, H, W] = need4d("upsampleNearest2x", x);
      const y = empty(be, [N, C, 2 * H, 2 * W], "f32");
      run("upsample_nearest2x", [x], [y], [N * C, H, W]);
      return record(this, y, [x], [], x.shape);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const xs = node.attrs as [number, number, number, number];
      const gx = empty(gy.backend, xs, "f32");
      run("upsample_nearest2x_backward", [gy], [gx], [xs[0] * xs[1], xs[2], xs[3]]);
      return [gx];
    },
  },

  batch_norm: {
    name: "batch_norm",
    forward(x: Tensor, gamma: Tensor, beta: Tensor, opts: BatchNormOptions): Tensor {
      const rm = opts.runningMean ?? null, rv = opts.runningVar ?? null;
      const all = [x, gamma, beta];
      if (rm) all.push(rm);
      if (rv) all.push(rv);
      const be = check("batchNorm", all);
      if (x.ndim < 2) {
        throw new RangeError(`batchNorm: expected [N,C,...] input, got ${fmt(x.shape)}`);
      }
      const N = x.shape[0]!, C = x.shape[1]!, HW = x.size / Math.max(1, N * C) || 0;
      for (
        const [nm, t] of [["gamma", gamma], ["beta", beta], ["runningMean", rm], [
          "runningVar",
          rv,
        ]] as const
      ) {
        if (t && (t.ndim !== 1 || t.shape[0] !== C)) {
          throw new RangeError(
            `batchNorm: ${nm} must be [${C}] for input ${fmt(x.shape)}, got ${fmt(t.shape)}`,
          );
        }
      }
      const eps = opts.eps ?? 1e-5;
      const training = opts.training ?? true;
      const p = [N, C, HW, eps];
      const y = empty(be, x.shape, "f32");
      if (!training) {
        if (!rm || !rv) {
          throw new Error(
            "batchNorm: eval mode (training: false) needs runningMean and runningVar",
          );
        }
        run("batch_norm_apply", [x, rm, rv, gamma, beta], [y], p);
        return record(this, y, [x, gamma, beta], [x, rm, rv, gamma], { p, training });
      }
      const mean = empty(be, [C], "f32"), vr = empty(be, [C], "f32");
      try {
        run("batch_norm_stats", [x], [mean, vr], [N, C, HW]);
        run("batch_norm_apply", [x, mean, vr, gamma, beta], [y], p);
        if (rm && rv) {
          run("batch_norm_update_running", [mean, vr, rm, rv], [], [
            C,
            opts.momentum ?? 0.1,
            N * HW,
          ]);
        }
        return record(this, y, [x, gamma, beta], [x, mean, vr, gamma], { p, training });
      } finally {
        mean.dispose();
        vr.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { p, training } = attrsOf<{ p: number[]; training: boolean }>(node);
      const [x, mean, vr, gamma] = node.saved as [Tensor, Tensor, Tensor, Tensor];
      const [N, C, HW, eps] = p as [number, number, number, number];
      if (training) {
        const gx = empty(gy.backend, x.shape, "f32");
        const gg = empty(gy.backend, [C], "f32"), gb = empty(gy.backend, [C], "f32");
        run("batch_norm_backward", [x, gy, mean, vr, gamma], [gx, gg, gb], p);
        return [gx, gg, gb];
      }
      // Eval mode is a per-channel affine map of x: compose the gradient from simple ops.
      const g3 = view(gy, [N, C, HW]);
      const rstd = rsqrt(add(vr, eps));
      const scale = view(mul(gamma, rstd), [1, C, 1]);
      const gx = node.inputs[0] ? view(mul(g3, scale), x.shape) : null;
      let gg: Tensor | null = null;
      if (node.inputs[1]) {
        const xhat = mul(sub(view(x, [N, C, HW]), view(mean, [1, C, 1])), view(rstd, [1, C, 1]));
        gg = sum(sum(mul(g3, xhat), 2), 0);
      }
      const gb = node.inputs[2] ? sum(sum(g3, 2), 0) : null;
      return [gx, gg, gb];
    },
  },

  layer_norm: {
    name: "layer_norm",
    forward(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): Tensor {
      const be = check("layerNorm", [x, gamma, beta]);
      if (x.ndim < 1) throw new RangeError(`layerNorm: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      for (const [nm, t] of [["gamma", gamma], ["beta", beta]] as const) {
        if (t.ndim !== 1 || t.shape[0] !== cols) {
          throw new RangeError(
            `layerNorm: ${nm} must be [${cols}] for input ${fmt(x.shape)}, got ${fmt(t.shape)}`,
          );
        }
      }
      const rows = cols === 0 ? 0 : x.size / cols;
      const y = empty(be, x.shape, "f32");
      const mean = empty(be, [rows], "f32"), rstd = empty(be, [rows], "f32");
      try {
        run("layer_norm", [x, gamma, beta], [y, mean, rstd], [rows, cols, eps]);
        return record(
          this,
          y,
          [x, gamma, beta],
          [x, mean, rstd, gamma],
          {
            params: [rows, cols],
          } satisfies NormAttrs,
        );
      } finally {
        mean.dispose();
        rstd.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<NormAttrs>(node);
      const [x, mean, rstd, gamma] = node.saved as [Tensor, Tensor, Tensor, Tensor];
      const gx = empty(gy.backend, x.shape, "f32");
      const gg = empty(gy.backend, gamma.shape, "f32"), gb = empty(gy.backend, gamma.shape, "f32");
      run("layer_norm_backward", [x, gy, mean, rstd, gamma], [gx, gg, gb], params);
      return [gx, gg, gb];
    },
  },

  rms_norm: {
    name: "rms_norm",
    forward(x: Tensor, gamma: Tensor, eps: number): Tensor {
      const be = check("rmsNorm", [x, gamma]);
      if (x.ndim < 1) throw new RangeError(`rmsNorm: needs at least 1 dimension, got []`);
      const cols = x.shape[x.ndim - 1]!;
      if (gamma.ndim !== 1 || gamma.shape[0] !== cols) {
        throw new RangeError(
          `rmsNorm: gamma must be [${cols}] for input ${fmt(x.shape)}, got ${fmt(gamma.shape)}`,
        );
      }
      const rows = cols === 0 ? 0 : x.size / cols;
      const y = empty(be, x.shape, "f32");
      const rstd = empty(be, [rows], "f32");
      try {
        run("rms_norm", [x, gamma], [y, rstd], [rows, cols, eps]);
        return record(
          this,
          y,
          [x, gamma],
          [x, rstd, gamma],
          {
            params: [rows, cols],
          } satisfies NormAttrs,
        );
      } finally {
        rstd.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { params } = attrsOf<NormAttrs>(node);
      const [x, rstd, gamma] = node.saved as [Tensor, Tensor, Tensor];
      const gx = empty(gy.backend, x.shape, "f32");
      const gg = empty(gy.backend, gamma.shape, "f32");
      run("rms_norm_backward", [x, gy, rstd, gamma], [gx, gg], params);
      return [gx, gg];
    },
  },

  dropout: {
    name: "dropout",
    forward(x: Tensor, p: number): Tensor {
      const be = check("dropout", [x]);
      const [seed, offset] = nextRandom(x.size);
      const params = [x.size, p, seed, offset];
      const y = empty(be, x.shape, "f32");
      run("dropout", [x], [y], params);
      return record(this, y, [x], [], params);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const gx = empty(gy.backend, gy.shape, "f32");
      run("dropout_backward", [gy], [gx], node.attrs as number[]);
      return [gx];
    },
  },

  cross_entropy: {
    name: "cross_entropy",
    forward(logits: Tensor, targets: Tensor): Tensor {
      const be = check("crossEntropy", [logits, targets], "any");
      if (logits.dtype !== "f32" || targets.dtype !== "i32") {
        throw new TypeError(
          `crossEntropy: expected f32 logits and i32 class indices, got ${desc(logits)} and ${
            desc(targets)
          }`,
        );
      }
      const lead = logits.shape.slice(0, -1);
      if (logits.ndim < 1 || !sameShape(lead, targets.shape)) {
        throw new RangeError(
          `crossEntropy: logits ${fmt(logits.shape)} need targets of shape ${fmt(lead)}, got ${
            fmt(targets.shape)
          }`,
        );
      }
      const classes = logits.shape[logits.ndim - 1]!;
      const p = [targets.size, classes];
      const y = empty(be, [], "f32");
      run("cross_entropy", [logits, targets], [y], p);
      return record(this, y, [logits, targets], [logits, targets], p);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [logits, targets] = node.saved as [Tensor, Tensor];
      const g = empty(gy.backend, logits.shape, "f32");
      run("cross_entropy_backward", [logits, targets, gy], [g], node.attrs as number[]);
      return [g, null];
    },
  },

  mse: {
    name: "mse",
    forward(a: Tensor, b: Tensor): Tensor {
      const be = check("mse", [a, b]);
      if (!sameShape(a.shape, b.shape)) {
        throw new RangeError(`mse: shapes differ: ${fmt(a.shape)} and ${fmt(b.shape)}`);
      }
      const y = empty(be, [], "f32");
      run("mse", [a, b], [y], [a.size]);
      return record(this, y, [a, b], [a, b], null);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [a, b] = node.saved as [Tensor, Tensor];
      const ga = empty(gy.backend, a.shape, "f32");
      run("mse_backward", [a, b, gy], [ga], [a.size]);
      return [view(ga, ga.shape), node.inputs[1] ? neg(ga) : null];
    },
  },

  clone: {
    name: "clone",
    forward(x: Tensor): Tensor {
      const be = check("clone", [x], "any");
      const y = empty(be, x.shape, x.dtype);
      run("copy", [x], [y], [x.size]);
      return record(this, y, [x], [], null);
    },
    backward(gy: Tensor): (Tensor | null)[] {
      return [view(gy, gy.shape)];
    },
  },
} as const;

/**
 * The op table as data: every differentiable op's gradient rule by name (the
 * `op` of recorded graph nodes points at these entries).
 */
export const OP_TABLE: Readonly<Record<string, GradRule>> = OPS;

// ------------------------------------------------------------------ public functions

function pool2dParams(op: string, x: Tensor, opts: Pool2dOptions): number[] {
  const [N, C, H, W] = need4d(op, x);
  const [kh, kw] = pair(op, "kernelSize", opts.kernelSize, 1);
  const [sh, sw] = pair(op, "stride", opts.stride ?? opts.kernelSize, 1);
  const [ph, pw] = pair(op, "padding", opts.padding, 0);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1) {
    throw new RangeError(`${op}: kernelSize and stride must be >= 1`);
  }
  if (2 * ph > kh || 2 * pw > kw) {
    throw new RangeError(`${op}: padding ${ph}x${pw} must be at most half the window ${kh}x${kw}`);
  }
  if (convOutSize(H, kh, sh, ph) < 1 || convOutSize(W, kw, sw, pw) < 1) {
    throw new RangeError(`${op}: input ${fmt(x.shape)} is smaller than the window ${kh}x${kw}`);
  }
  return [N, C, H, W, kh, kw, sh, sw, ph, pw];
}

function poolForward(op: string, kernel: KernelName, x: Tensor, opts: Pool2dOptions) {
  const be = check(op, [x]);
  const params = pool2dParams(op, x, opts);
  const { N, C, OH, OW } = poolDims(op, params);
  const y = empty(be, [N, C, OH, OW], "f32");
  run(kernel, [x], [y], params);
  return { y, params };
}

function scalarOrTensor(like: Tensor, v: TensorLike): [Tensor, boolean] {
  return v instanceof Tensor ? [v, false] : [scalarTensor(like, v), true];
}

/**
 * `a + b` with broadcasting; either side may be a number.
 *
 * @example
 * ```ts
 * import { add, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = add(tensor([[1], [2]]), tensor([10, 20, 30]));
 * if (!(y.shape.join() === "2,3" && y.toArray().join() === "11,21,31,12,22,32")) throw new Error("example: unexpected result");
 * ```
 */
export function add(a: TensorLike, b: TensorLike): Tensor {
  if (typeof b === "number") return OPS.add_scalar.forward(a as Tensor, b);
  if (typeof a === "number") return OPS.add_scalar.forward(b, a);
  return OPS.add.forward(a, b);
}

/**
 * `a - b` with broadcasting; either side may be a number.
 *
 * @example
 * ```ts
 * import { sub, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(sub(tensor([5, 7]), 2).toArray().join() === "3,5")) throw new Error("example: unexpected result");
 * if (!(sub(10, tensor([1, 2])).toArray().join() === "9,8")) throw new Error("example: unexpected result");
 * ```
 */
export function sub(a: TensorLike, b: TensorLike): Tensor {
  if (typeof b === "number") return OPS.add_scalar.forward(a as Tensor, -b, "sub");
  if (typeof a === "number") return OPS.rsub_scalar.forward(b, a);
  return OPS.sub.forward(a, b);
}

/**
 * `a * b` with broadcasting; either side may be a number.
 *
 * @example
 * ```ts
 * import { mul, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(mul(tensor([[1], [2]]), tensor([3, 4])).toArray().join() === "3,4,6,8")) throw new Error("example: unexpected result");
 * ```
 */
export function mul(a: TensorLike, b: TensorLike): Tensor {
  if (typeof b === "number") return OPS.mul_scalar.forward(a as Tensor, b);
  if (typeof a === "number") return OPS.mul_scalar.forward(b, a);
  return OPS.mul.forward(a, b);
}

/**
 * `a / b` with broadcasting; either side may be a number (`x / s` multiplies by `1 / s`).
 *
 * @example
 * ```ts
 * import { div, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(div(tensor([3, 6]), tensor([3])).toArray().join() === "1,2")) throw new Error("example: unexpected result");
 * if (!(div(1, tensor([4])).item() === 0.25)) throw new Error("example: unexpected result");
 * ```
 */
export function div(a: TensorLike, b: TensorLike): Tensor {
  if (typeof b === "number") return OPS.mul_scalar.forward(a as Tensor, 1 / b, "div");
  if (typeof a === "number") return OPS.rdiv_scalar.forward(b, a);
  return OPS.div.forward(a, b);
}

/**
 * `x ^ exponent` for a number exponent (C `powf` semantics).
 *
 * @example
 * ```ts
 * import { pow, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(pow(tensor([2, 3]), 2).toArray().join() === "4,9")) throw new Error("example: unexpected result");
 * ```
 */
export function pow(x: Tensor, exponent: number): Tensor {
  return OPS.pow_scalar.forward(x, exponent);
}

/**
 * `-x`.
 *
 * @example
 * ```ts
 * import { neg, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(neg(tensor([1, -2])).toArray().join() === "-1,2")) throw new Error("example: unexpected result");
 * ```
 */
export function neg(x: Tensor): Tensor {
  return OPS.neg.forward(x);
}
/**
 * `e^x`.
 *
 * @example
 * ```ts
 * import { exp, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(exp(tensor([0])).item() === 1)) throw new Error("example: unexpected result");
 * ```
 */
export function exp(x: Tensor): Tensor {
  return OPS.exp.forward(x);
}
/**
 * Natural logarithm.
 *
 * @example
 * ```ts
 * import { log, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(log(tensor([1])).item() === 0)) throw new Error("example: unexpected result");
 * ```
 */
export function log(x: Tensor): Tensor {
  return OPS.log.forward(x);
}
/**
 * Square root.
 *
 * @example
 * ```ts
 * import { sqrt, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(sqrt(tensor([9])).item() === 3)) throw new Error("example: unexpected result");
 * ```
 */
export function sqrt(x: Tensor): Tensor {
  return OPS.sqrt.forward(x);
}
/**
 * `1 / sqrt(x)`.
 *
 * @example
 * ```ts
 * import { rsqrt, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(rsqrt(tensor([4])).item() === 0.5)) throw new Error("example: unexpected result");
 * ```
 */
export function rsqrt(x: Tensor): Tensor {
  return OPS.rsqrt.forward(x);
}
/**
 * `max(x, 0)`.
 *
 * @example
 * ```ts
 * import { relu, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(relu(tensor([-1, 2])).toArray().join() === "0,2")) throw new Error("example: unexpected result");
 * ```
 */
export function relu(x: Tensor): Tensor {
  return OPS.relu.forward(x);
}
/**
 * GELU: exact (`"none"`, erf form, the default as in PyTorch) or the `"tanh"` approximation.
 *
 * @example
 * ```ts
 * import { gelu, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([-1, 0, 1]);
 * if (!(Math.abs(gelu(x).toArray()[2]! - 0.8413447) < 1e-6)) throw new Error("example: unexpected result");
 * if (!(Math.abs(gelu(x, "tanh").toArray()[2]! - 0.8411920) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function gelu(x: Tensor, approximate: "none" | "tanh" = "none"): Tensor {
  return approximate === "tanh" ? OPS.gelu_tanh.forward(x) : OPS.gelu_erf.forward(x);
}
/**
 * `x * sigmoid(x)`.
 *
 * @example
 * ```ts
 * import { silu, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(silu(tensor([0])).item() === 0)) throw new Error("example: unexpected result");
 * ```
 */
export function silu(x: Tensor): Tensor {
  return OPS.silu.forward(x);
}
/**
 * `1 / (1 + e^-x)`.
 *
 * @example
 * ```ts
 * import { sigmoid, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(sigmoid(tensor([0])).item() === 0.5)) throw new Error("example: unexpected result");
 * ```
 */
export function sigmoid(x: Tensor): Tensor {
  return OPS.sigmoid.forward(x);
}
/**
 * Hyperbolic tangent.
 *
 * @example
 * ```ts
 * import { tanh, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(tanh(tensor([0])).item() === 0)) throw new Error("example: unexpected result");
 * ```
 */
export function tanh(x: Tensor): Tensor {
  return OPS.tanh.forward(x);
}

function compare(
  op: "eq" | "ne" | "lt" | "le" | "gt" | "ge",
  flipped: "eq" | "ne" | "lt" | "le" | "gt" | "ge",
  a: TensorLike,
  b: TensorLike,
): Tensor {
  if (typeof a === "number" && typeof b === "number") {
    throw new TypeError(`${op}: at least one operand must be a tensor`);
  }
  if (typeof b === "number") return scalarRaw(op, `${op}_scalar`, a as Tensor, b);
  if (typeof a === "number") return scalarRaw(op, `${flipped}_scalar`, b, a);
  return binaryRaw(op, op, a, b);
}

/**
 * Element-wise comparisons give f32 masks (1 where true, 0 elsewhere); they
 * never require grad.
 *
 * @example
 * ```ts
 * import { gt, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(gt(tensor([1, 5, 3]), 2).toArray().join() === "0,1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function gt(a: TensorLike, b: TensorLike): Tensor {
  return compare("gt", "lt", a, b);
}
/**
 * `a == b` mask.
 *
 * @example
 * ```ts
 * import { eq, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(eq(tensor([1, 2]), 2).toArray().join() === "0,1")) throw new Error("example: unexpected result");
 * ```
 */
export function eq(a: TensorLike, b: TensorLike): Tensor {
  return compare("eq", "eq", a, b);
}
/**
 * `a != b` mask.
 *
 * @example
 * ```ts
 * import { ne, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(ne(tensor([1, 2]), 2).toArray().join() === "1,0")) throw new Error("example: unexpected result");
 * ```
 */
export function ne(a: TensorLike, b: TensorLike): Tensor {
  return compare("ne", "ne", a, b);
}
/**
 * `a < b` mask.
 *
 * @example
 * ```ts
 * import { lt, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(lt(tensor([1, 2]), tensor([2, 2])).toArray().join() === "1,0")) throw new Error("example: unexpected result");
 * ```
 */
export function lt(a: TensorLike, b: TensorLike): Tensor {
  return compare("lt", "gt", a, b);
}
/**
 * `a <= b` mask.
 *
 * @example
 * ```ts
 * import { le, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(le(tensor([1, 2]), 2).toArray().join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function le(a: TensorLike, b: TensorLike): Tensor {
  return compare("le", "ge", a, b);
}
/**
 * `a >= b` mask.
 *
 * @example
 * ```ts
 * import { ge, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(ge(tensor([1, 2]), 2).toArray().join() === "0,1")) throw new Error("example: unexpected result");
 * ```
 */
export function ge(a: TensorLike, b: TensorLike): Tensor {
  return compare("ge", "le", a, b);
}

/**
 * `cond != 0 ? a : b`, broadcasting all three; `a` and `b` may be numbers.
 *
 * @example
 * ```ts
 * import { where, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = where(tensor([1, 0, 1]), tensor([1, 2, 3]), -1);
 * if (!(y.toArray().join() === "1,-1,3")) throw new Error("example: unexpected result");
 * ```
 */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  check("where", [cond]);
  const [ta, da] = scalarOrTensor(cond, a);
  const [tb, db] = scalarOrTensor(cond, b);
  try {
    return OPS.where.forward(cond, ta, tb);
  } finally {
    if (da) ta.dispose();
    if (db) tb.dispose();
  }
}

/**
 * Broadcasts `x` to `shape` (a copy), numpy rules. Gradient sums back.
 *
 * @example
 * ```ts
 * import { broadcastTo, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(broadcastTo(tensor([1, 2]), [2, 2]).toArray().join() === "1,2,1,2")) throw new Error("example: unexpected result");
 * ```
 */
export function broadcastTo(x: Tensor, shape: readonly number[]): Tensor {
  return OPS.broadcast_to.forward(x, shape);
}

/**
 * Sum over `axis` (negative counts from the end), or over everything when
 * `axis` is undefined; `keepdim` keeps the reduced axis with size 1.
 *
 * @example
 * ```ts
 * import { sum, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1, 2, 3], [4, 5, 6]]);
 * if (!(sum(x, 1).toArray().join() === "6,15")) throw new Error("example: unexpected result");
 * if (!(sum(x, 0, true).shape.join() === "1,3")) throw new Error("example: unexpected result");
 * if (!(sum(x).item() === 21)) throw new Error("example: unexpected result");
 * ```
 */
export function sum(x: Tensor, axis?: number, keepdim = false): Tensor {
  return OPS.sum.forward(x, axis, keepdim);
}
/**
 * Mean over `axis` or everything (see {@link sum}).
 *
 * @example
 * ```ts
 * import { mean, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(mean(tensor([[1, 2], [3, 4]]), 0).toArray().join() === "2,3")) throw new Error("example: unexpected result");
 * ```
 */
export function mean(x: Tensor, axis?: number, keepdim = false): Tensor {
  return OPS.mean.forward(x, axis, keepdim);
}
/**
 * Maximum over `axis` or everything (see {@link sum}); the gradient goes to the first maximum.
 *
 * @example
 * ```ts
 * import { max, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(max(tensor([[1, 5], [3, 4]]), 1).toArray().join() === "5,4")) throw new Error("example: unexpected result");
 * ```
 */
export function max(x: Tensor, axis?: number, keepdim = false): Tensor {
  return OPS.max.forward(x, axis, keepdim);
}

/**
 * Index (i32) of the first maximum over `axis`, or of the flattened tensor. Not differentiable.
 *
 * @example
 * ```ts
 * import { argmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const i = argmax(tensor([[1, 5], [3, 4]]), 1);
 * if (!(i.dtype === "i32" && i.toArray().join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function argmax(x: Tensor, axis?: number, keepdim = false): Tensor {
  const be = check("argmax", [x]);
  const d = reduceDims("argmax", x, axis, keepdim);
  if (d.dim === 0) throw new RangeError(`argmax: cannot reduce an empty axis of ${fmt(x.shape)}`);
  const y = empty(be, d.outShape, "i32");
  run("argmax_axis", [x], [y], [d.outer, d.dim, d.inner]);
  return y;
}

/**
 * Softmax over the last axis.
 *
 * @example
 * ```ts
 * import { softmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(softmax(tensor([[0, 0]])).toArray().join() === "0.5,0.5")) throw new Error("example: unexpected result");
 * ```
 */
export function softmax(x: Tensor): Tensor {
  return OPS.softmax.forward(x);
}
/**
 * Log-softmax over the last axis.
 *
 * @example
 * ```ts
 * import { logSoftmax, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(Math.abs(logSoftmax(tensor([0, 0])).toArray()[0]! + Math.LN2) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function logSoftmax(x: Tensor): Tensor {
  return OPS.log_softmax.forward(x);
}

/** Options of {@link matmul}. */
export interface MatmulOptions {
  /** Use the transpose of `a`'s last two dims. */
  transA?: boolean;
  /** Use the transpose of `b`'s last two dims. */
  transB?: boolean;
}

/**
 * Matrix product with numpy semantics: batched over leading dims (broadcast),
 * 1-D operands promoted and the added dim removed; `transA`/`transB` read an
 * operand transposed without copying it.
 *
 * @example
 * ```ts
 * import { matmul, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const a = tensor([[1, 2], [3, 4]]), b = tensor([[5], [6]]);
 * if (!(matmul(a, b).toArray().join() === "17,39")) throw new Error("example: unexpected result");
 * if (!(matmul(a, a, { transB: true }).toArray().join() === "5,11,11,25")) throw new Error("example: unexpected result");
 * ```
 */
export function matmul(a: Tensor, b: Tensor, options: MatmulOptions = {}): Tensor {
  const ta = options.transA ?? false, tb = options.transB ?? false;
  check("matmul", [a, b]);
  if (a.ndim === 0 || b.ndim === 0) {
    throw new RangeError(
      `matmul: operands must have at least 1 dimension, got ${fmt(a.shape)} @ ${fmt(b.shape)}`,
    );
  }
  if (a.ndim === 1 || b.ndim === 1) {
    if ((a.ndim === 1 && ta) || (b.ndim === 1 && tb)) {
      throw new RangeError(`matmul: transA/transB apply to operands with at least 2 dimensions`);
    }
    const a2 = a.ndim === 1 ? reshape(a, [1, a.shape[0]!]) : a;
    const b2 = b.ndim === 1 ? reshape(b, [b.shape[0]!, 1]) : b;
    const y = OPS.matmul.forward(a2, b2, ta, tb);
    let shape = y.shape;
    if (a.ndim === 1) shape = [...shape.slice(0, -2), shape[shape.length - 1]!];
    if (b.ndim === 1) shape = shape.slice(0, -1);
    const r = reshape(y, shape);
    if (a2 !== a) a2.dispose();
    if (b2 !== b) b2.dispose();
    y.dispose();
    return r;
  }
  return OPS.matmul.forward(a, b, ta, tb);
}

/**
 * Reorders dimensions (a copy): `y.shape[i] = x.shape[perm[i]]`.
 *
 * @example
 * ```ts
 * import { permute, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(permute(zeros([2, 3, 4]), [2, 0, 1]).shape.join() === "4,2,3")) throw new Error("example: unexpected result");
 * ```
 */
export function permute(x: Tensor, perm: readonly number[]): Tensor {
  return OPS.permute.forward(x, perm);
}

/**
 * Swaps two dimensions (default: the last two).
 *
 * @example
 * ```ts
 * import { transpose, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(transpose(tensor([[1, 2], [3, 4]])).toArray().join() === "1,3,2,4")) throw new Error("example: unexpected result");
 * ```
 */
export function transpose(x: Tensor, dim0 = -2, dim1 = -1): Tensor {
  check("transpose", [x], "any");
  const a = normAxis("transpose", dim0, x.ndim, x.shape);
  const b = normAxis("transpose", dim1, x.ndim, x.shape);
  const perm = x.shape.map((_, i) => i);
  perm[a] = b;
  perm[b] = a;
  return OPS.permute.forward(x, perm);
}

/**
 * A view with another shape of the same size (shares storage); one entry may be -1.
 *
 * @example
 * ```ts
 * import { reshape, arange, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = arange(6);
 * const y = reshape(x, [2, -1]);
 * if (!(y.shape.join() === "2,3" && y.storage === x.storage)) throw new Error("example: unexpected result");
 * ```
 */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  check("reshape", [x], "any");
  let inferAt = -1, known = 1;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (d === -1) {
      if (inferAt >= 0) throw new RangeError(`reshape: only one -1 allowed in ${fmt(shape)}`);
      inferAt = i;
    } else if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(`reshape: bad dimension ${d} in ${fmt(shape)}`);
    } else known *= d;
  }
  const out = [...shape];
  if (inferAt >= 0) {
    if (known === 0 || x.size % known !== 0) {
      throw new RangeError(
        `reshape: cannot reshape ${fmt(x.shape)} (${x.size} elements) to ${fmt(shape)}`,
      );
    }
    out[inferAt] = x.size / known;
  }
  if (numel(out) !== x.size) {
    throw new RangeError(
      `reshape: cannot reshape ${fmt(x.shape)} (${x.size} elements) to ${fmt(shape)}`,
    );
  }
  return OPS.reshape.forward(x, out);
}

/**
 * Flattens dims `startDim..endDim` into one (a view).
 *
 * @example
 * ```ts
 * import { flatten, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(flatten(zeros([2, 3, 4]), 1).shape.join() === "2,12")) throw new Error("example: unexpected result");
 * ```
 */
export function flatten(x: Tensor, startDim = 0, endDim = -1): Tensor {
  if (x.ndim === 0) return reshape(x, [1]);
  const s = normAxis("flatten", startDim, x.ndim, x.shape);
  const e = normAxis("flatten", endDim, x.ndim, x.shape);
  if (e < s) throw new RangeError(`flatten: endDim ${endDim} comes before startDim ${startDim}`);
  const mid = x.shape.slice(s, e + 1).reduce((u, v) => u * v, 1);
  return reshape(x, [...x.shape.slice(0, s), mid, ...x.shape.slice(e + 1)]);
}

/**
 * Removes size-1 dims (all, or the given one if it has size 1), as a view.
 *
 * @example
 * ```ts
 * import { squeeze, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(squeeze(zeros([1, 3, 1])).shape.join() === "3")) throw new Error("example: unexpected result");
 * ```
 */
export function squeeze(x: Tensor, axis?: number): Tensor {
  if (axis === undefined) return reshape(x, x.shape.filter((d) => d !== 1));
  const a = normAxis("squeeze", axis, x.ndim, x.shape);
  return reshape(x, x.shape[a] === 1 ? x.shape.filter((_, i) => i !== a) : x.shape);
}

/**
 * Inserts a size-1 dim at `axis` (in `[-ndim-1, ndim]`), as a view.
 *
 * @example
 * ```ts
 * import { unsqueeze, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(unsqueeze(zeros([3]), 0).shape.join() === "1,3")) throw new Error("example: unexpected result");
 * ```
 */
export function unsqueeze(x: Tensor, axis: number): Tensor {
  const a = normAxis("unsqueeze", axis, x.ndim + 1, x.shape);
  const s = [...x.shape];
  s.splice(a, 0, 1);
  return reshape(x, s);
}

/**
 * A copy of the box starting at `starts` with `sizes` (missing or -1 sizes run
 * to the end; negative starts count from the end).
 *
 * @example
 * ```ts
 * import { slice, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1, 2, 3], [4, 5, 6]]);
 * if (!(slice(x, [0, 1], [2, 2]).toArray().join() === "2,3,5,6")) throw new Error("example: unexpected result");
 * ```
 */
export function slice(x: Tensor, starts: readonly number[], sizes?: readonly number[]): Tensor {
  check("slice", [x], "any");
  if (starts.length > x.ndim || (sizes && sizes.length > x.ndim)) {
    throw new RangeError(`slice: more starts/sizes than the ${x.ndim} dims of ${fmt(x.shape)}`);
  }
  const st: number[] = [], sz: number[] = [];
  for (let i = 0; i < x.ndim; i++) {
    const d = x.shape[i]!;
    let s = starts[i] ?? 0;
    if (s < 0) s += d;
    const n = sizes?.[i] ?? -1;
    const size = n === -1 ? d - s : n;
    if (!Number.isInteger(s) || !Number.isInteger(size) || s < 0 || size < 0 || s + size > d) {
      throw new RangeError(
        `slice: start ${starts[i] ?? 0} size ${n} is out of range for dim ${i} of ${fmt(x.shape)}`,
      );
    }
    st.push(s);
    sz.push(size);
  }
  return OPS.slice.forward(x, st, sz);
}

/**
 * `length` entries of dim `dim` starting at `start` (a copy).
 *
 * @example
 * ```ts
 * import { narrow, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(narrow(tensor([1, 2, 3, 4]), 0, 1, 2).toArray().join() === "2,3")) throw new Error("example: unexpected result");
 * ```
 */
export function narrow(x: Tensor, dim: number, start: number, length: number): Tensor {
  check("narrow", [x], "any");
  const a = normAxis("narrow", dim, x.ndim, x.shape);
  const starts = x.shape.map((_, i) => (i === a ? start : 0));
  const sizes = x.shape.map((d, i) => (i === a ? length : d));
  return slice(x, starts, sizes);
}

/**
 * Concatenates tensors along `axis` (all other dims equal).
 *
 * @example
 * ```ts
 * import { concat, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = concat([tensor([[1], [2]]), tensor([[3, 4], [5, 6]])], 1);
 * if (!(y.toArray().join() === "1,3,4,2,5,6")) throw new Error("example: unexpected result");
 * ```
 */
export function concat(tensors: readonly Tensor[], axis = 0): Tensor {
  return OPS.concat.forward(tensors, axis);
}

/**
 * Picks entries of `axis` by a 1-D i32 `index` (gradient: scatter-add).
 *
 * @example
 * ```ts
 * import { indexSelect, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1, 2], [3, 4], [5, 6]]);
 * const rows = indexSelect(x, 0, tensor([2, 0], [2], { dtype: "i32" }));
 * if (!(rows.toArray().join() === "5,6,1,2")) throw new Error("example: unexpected result");
 * ```
 */
export function indexSelect(x: Tensor, axis: number, index: Tensor): Tensor {
  return OPS.index_select.forward(x, axis, index);
}

/**
 * Rows of `weight [vocab, dim]` picked by i32 `ids` of any shape: `[...ids.shape, dim]`.
 *
 * @example
 * ```ts
 * import { embedding, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = tensor([[0, 0], [1, 1], [2, 2]]);
 * const y = embedding(w, tensor([2, 0], [2], { dtype: "i32" }));
 * if (!(y.toArray().join() === "2,2,0,0")) throw new Error("example: unexpected result");
 * ```
 */
export function embedding(weight: Tensor, ids: Tensor): Tensor {
  return OPS.embedding.forward(weight, ids);
}

/** Options of {@link conv2d}: each a number or an `[h, w]` pair. */
export interface Conv2dOptions {
  /** Default 1. */
  stride?: number | readonly [number, number];
  /** Zero padding, default 0. */
  padding?: number | readonly [number, number];
  /** Default 1. */
  dilation?: number | readonly [number, number];
}

/**
 * 2-D convolution (cross-correlation, NCHW) of `x [N,C,H,W]` with `w [K,C,R,S]`
 * plus an optional `bias [K]`.
 *
 * @example
 * ```ts
 * import { conv2d, ones, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = conv2d(ones([1, 1, 4, 4]), ones([2, 1, 3, 3]), null, { padding: 1 });
 * if (!(y.shape.join() === "1,2,4,4" && y.toArray()[5] === 9)) throw new Error("example: unexpected result");
 * ```
 */
export function conv2d(
  x: Tensor,
  w: Tensor,
  bias: Tensor | null = null,
  options: Conv2dOptions = {},
): Tensor {
  return OPS.conv2d.forward(x, w, bias, options);
}

/** Options of the 2-D pooling ops; each a number or an `[h, w]` pair. */
export interface Pool2dOptions {
  /** Window size. */
  kernelSize: number | readonly [number, number];
  /** Default: the window size. */
  stride?: number | readonly [number, number];
  /** Default 0 (at most half the window). */
  padding?: number | readonly [number, number];
}

/**
 * Max pooling over `[N,C,H,W]` (padding counts as -inf).
 *
 * @example
 * ```ts
 * import { maxPool2d, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(maxPool2d(x, { kernelSize: 2 }).item() === 4)) throw new Error("example: unexpected result");
 * ```
 */
export function maxPool2d(x: Tensor, options: Pool2dOptions): Tensor {
  return OPS.max_pool2d.forward(x, options);
}
/**
 * Average pooling over `[N,C,H,W]` (zero padding counted).
 *
 * @example
 * ```ts
 * import { avgPool2d, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(avgPool2d(x, { kernelSize: 2 }).item() === 2.5)) throw new Error("example: unexpected result");
 * ```
 */
export function avgPool2d(x: Tensor, options: Pool2dOptions): Tensor {
  return OPS.avg_pool2d.forward(x, options);
}
/**
 * Mean over H and W: `[N,C,H,W]` to `[N,C]`.
 *
 * @example
 * ```ts
 * import { globalAvgPool, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2, 3, 4], [1, 1, 2, 2]);
 * if (!(globalAvgPool(x).shape.join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function globalAvgPool(x: Tensor): Tensor {
  return OPS.global_avg_pool.forward(x);
}
/**
 * Nearest-neighbour upsampling by 2: `[N,C,H,W]` to `[N,C,2H,2W]`.
 *
 * @example
 * ```ts
 * import { upsampleNearest2x, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = upsampleNearest2x(tensor([1, 2], [1, 1, 1, 2]));
 * if (!(y.toArray().join() === "1,1,2,2,1,1,2,2")) throw new Error("example: unexpected result");
 * ```
 */
export function upsampleNearest2x(x: Tensor): Tensor {
  return OPS.upsample_nearest2x.forward(x);
}

/** Options of {@link batchNorm}. */
export interface BatchNormOptions {
  /** Running mean `[C]`, updated in place in training mode. */
  runningMean?: Tensor | null;
  /** Running (unbiased) variance `[C]`, updated in place in training mode. */
  runningVar?: Tensor | null;
  /** Batch statistics and running-stat update (default true); false uses the running stats. */
  training?: boolean;
  /** Running-stat momentum (default 0.1, PyTorch convention). */
  momentum?: number;
  /** Default 1e-5. */
  eps?: number;
}

/**
 * Batch normalization over `[N, C, ...]` with per-channel `gamma` and `beta`.
 *
 * @example
 * ```ts
 * import { batchNorm, ones, zeros, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([[1], [3]]); // N=2, C=1
 * const rm = zeros([1]), rv = ones([1]);
 * const y = batchNorm(x, ones([1]), zeros([1]), { runningMean: rm, runningVar: rv, eps: 0 });
 * if (!(y.toArray().join() === "-1,1")) throw new Error("example: unexpected result");
 * if (!(Math.abs(rm.item() - 0.2) < 1e-6)) throw new Error("example: unexpected result"); // 0.9 * 0 + 0.1 * 2
 * ```
 */
export function batchNorm(
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  options: BatchNormOptions = {},
): Tensor {
  return OPS.batch_norm.forward(x, gamma, beta, options);
}

/**
 * Layer normalization over the last axis with `gamma`, `beta` of that size.
 *
 * @example
 * ```ts
 * import { layerNorm, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = layerNorm(tensor([[1, 3]]), tensor([1, 1]), tensor([0, 0]), 0);
 * if (!(y.toArray().join() === "-1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): Tensor {
  return OPS.layer_norm.forward(x, gamma, beta, eps);
}

/**
 * RMS normalization over the last axis with `gamma` of that size.
 *
 * @example
 * ```ts
 * import { rmsNorm, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = rmsNorm(tensor([[3, 4]]), tensor([1, 1]), 0);
 * if (!(Math.abs(y.toArray()[1]! - 4 / Math.sqrt(12.5)) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function rmsNorm(x: Tensor, gamma: Tensor, eps = 1e-6): Tensor {
  return OPS.rms_norm.forward(x, gamma, eps);
}

/**
 * Inverted dropout with probability `p`, drawing `(seed, offset)` from the
 * global generator (see {@link ./random.ts}); identity when `training` is false
 * or `p` is 0.
 *
 * @example
 * ```ts
 * import { dropout, ones, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const y = dropout(ones([1000]), 0.5);
 * if (!(y.toArray().every((v) => v === 0 || v === 2))) throw new Error("example: unexpected result");
 * if (!(dropout(ones([2]), 0.5, false).toArray().join() === "1,1")) throw new Error("example: unexpected result");
 * ```
 */
export function dropout(x: Tensor, p: number, training = true): Tensor {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`dropout: p must be in [0, 1], got ${p}`);
  if (!training || p === 0) return reshape(x, x.shape);
  return OPS.dropout.forward(x, p);
}

/**
 * Mean cross-entropy of `logits [..., classes]` against i32 class indices
 * `targets [...]`; a scalar.
 *
 * @example
 * ```ts
 * import { crossEntropy, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const loss = crossEntropy(tensor([[0, 0]]), tensor([1], [1], { dtype: "i32" }));
 * if (!(Math.abs(loss.item() - Math.LN2) < 1e-6)) throw new Error("example: unexpected result");
 * ```
 */
export function crossEntropy(logits: Tensor, targets: Tensor): Tensor {
  return OPS.cross_entropy.forward(logits, targets);
}

/**
 * Mean squared error of two same-shape tensors; a scalar.
 *
 * @example
 * ```ts
 * import { mse, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(mse(tensor([1, 2]), tensor([1, 4])).item() === 2)) throw new Error("example: unexpected result");
 * ```
 */
export function mse(a: Tensor, b: Tensor): Tensor {
  return OPS.mse.forward(a, b);
}

/**
 * A copy (any dtype); the gradient passes through.
 *
 * @example
 * ```ts
 * import { clone, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const x = tensor([1, 2]);
 * if (!(clone(x).storage !== x.storage)) throw new Error("example: unexpected result");
 * ```
 */
export function clone(x: Tensor): Tensor {
  return OPS.clone.forward(x);
}

/**
 * Converts dtype (`f32 -> i32` truncates toward zero); not differentiable. Same dtype: a copy.
 *
 * @example
 * ```ts
 * import { cast, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * if (!(cast(tensor([1.9, -1.9]), "i32").toArray().join() === "1,-1")) throw new Error("example: unexpected result");
 * ```
 */
export function cast(x: Tensor, dtype: DType): Tensor {
  check("cast", [x], "any");
  if (x.dtype === dtype) return clone(x);
  const y = empty(x.backend, x.shape, dtype);
  run(dtype === "i32" ? "cast_f32_i32" : "cast_i32_f32", [x], [y], [x.size]);
  return y;
}
