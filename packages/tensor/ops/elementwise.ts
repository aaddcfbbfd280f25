/**
 * The elementwise ops (kernels of `native/cpu/elementwise.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { DType } from "../backend.ts";
import type { KernelName } from "../kernels.ts";
import type { GradNode } from "../autograd.ts";
import { empty, Tensor, type TensorLike, view } from "../tensor.ts";
import { broadcastShapes, broadcastStrides, checkShape, fmt, sameShape } from "../_shape.ts";
import { attrsOf, check, checkRank, expandRaw, record, run, scalarTensor, sumTo } from "./_core.ts";

// ------------------------------------------------------------------ elementwise builders

export type BinaryKernel = "add" | "sub" | "mul" | "div" | "eq" | "ne" | "lt" | "le" | "gt" | "ge";

export function binaryRaw(op: string, kernel: BinaryKernel, a: Tensor, b: Tensor): Tensor {
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

export interface BinAttrs {
  a: readonly number[];
  b: readonly number[];
}

export function binaryEntry(
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

export type UnaryKernel =
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

export function unaryEntry(
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
export function kernelGrad(kernel: KernelName) {
  return (gy: Tensor, saved: Tensor | undefined): Tensor => {
    const gx = empty(gy.backend, gy.shape, "f32");
    run(kernel, [saved!, gy], [gx], [gy.size]);
    return gx;
  };
}

export type ScalarKernel =
  | "add_scalar"
  | "mul_scalar"
  | "rsub_scalar"
  | "rdiv_scalar"
  | "pow_scalar";

export function scalarRaw(op: string, kernel: KernelName, x: Tensor, s: number): Tensor {
  const be = check(op, [x]);
  if (typeof s !== "number") throw new TypeError(`${op}: expected a number, got ${s}`);
  const y = empty(be, x.shape, "f32");
  run(kernel, [x], [y], [x.size, s]);
  return y;
}

export function scalarEntry(
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

/** The elementwise ops: forward and gradient rule of each, by name. */
export const ELEMENTWISE_OPS = {
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

  lstm_cell: {
    name: "lstm_cell",
    forward(gates: Tensor, state: Tensor): Tensor {
      const be = check("lstmCell", [gates, state]);
      if (state.ndim !== 2 || state.shape[1]! % 2 !== 0) {
        throw new RangeError(
          `lstmCell: state must be [batch, 2 hidden] (h then c), got ${fmt(state.shape)}`,
        );
      }
      const B = state.shape[0]!, H = state.shape[1]! / 2;
      if (gates.ndim !== 2 || gates.shape[0] !== B || gates.shape[1] !== 4 * H) {
        throw new RangeError(
          `lstmCell: gates must be [${B}, ${4 * H}] for state ${fmt(state.shape)}, got ${
            fmt(gates.shape)
          }`,
        );
      }
      const y = empty(be, [B, 2 * H], "f32");
      run("lstm_cell", [gates, state], [y], [B, H]);
      return record(this, y, [gates, state], [gates, state, y], [B, H]);
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const [gates, state, next] = node.saved as [Tensor, Tensor, Tensor];
      const gg = empty(gy.backend, gates.shape, "f32");
      const gs = empty(gy.backend, state.shape, "f32");
      const [B, H] = node.attrs as [number, number];
      run("lstm_cell_backward", [gates, state, next, gy], [gg, gs], [B, H, 0]);
      return [gg, gs];
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

export function scalarOrTensor(like: Tensor, v: TensorLike): [Tensor, boolean] {
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
  if (typeof b === "number") return ELEMENTWISE_OPS.add_scalar.forward(a as Tensor, b);
  if (typeof a === "number") return ELEMENTWISE_OPS.add_scalar.forward(b, a);
  return ELEMENTWISE_OPS.add.forward(a, b);
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
  if (typeof b === "number") return ELEMENTWISE_OPS.add_scalar.forward(a as Tensor, -b, "sub");
  if (typeof a === "number") return ELEMENTWISE_OPS.rsub_scalar.forward(b, a);
  return ELEMENTWISE_OPS.sub.forward(a, b);
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
  if (typeof b === "number") return ELEMENTWISE_OPS.mul_scalar.forward(a as Tensor, b);
  if (typeof a === "number") return ELEMENTWISE_OPS.mul_scalar.forward(b, a);
  return ELEMENTWISE_OPS.mul.forward(a, b);
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
  if (typeof b === "number") return ELEMENTWISE_OPS.mul_scalar.forward(a as Tensor, 1 / b, "div");
  if (typeof a === "number") return ELEMENTWISE_OPS.rdiv_scalar.forward(b, a);
  return ELEMENTWISE_OPS.div.forward(a, b);
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
  return ELEMENTWISE_OPS.pow_scalar.forward(x, exponent);
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
  return ELEMENTWISE_OPS.neg.forward(x);
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
  return ELEMENTWISE_OPS.exp.forward(x);
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
  return ELEMENTWISE_OPS.log.forward(x);
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
  return ELEMENTWISE_OPS.sqrt.forward(x);
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
  return ELEMENTWISE_OPS.rsqrt.forward(x);
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
  return ELEMENTWISE_OPS.relu.forward(x);
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
  return approximate === "tanh"
    ? ELEMENTWISE_OPS.gelu_tanh.forward(x)
    : ELEMENTWISE_OPS.gelu_erf.forward(x);
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
  return ELEMENTWISE_OPS.silu.forward(x);
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
  return ELEMENTWISE_OPS.sigmoid.forward(x);
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
  return ELEMENTWISE_OPS.tanh.forward(x);
}
/**
 * One LSTM time step, fused (the gate activations and the state update in one
 * kernel, as `torch.nn.LSTM` computes them): `gates` `[batch, 4 hidden]` are
 * the pre-activations in PyTorch's order i, f, g, o (`x W_ih^T + b_ih + h
 * W_hh^T + b_hh`); `state` `[batch, 2 hidden]` holds each row's `h` then `c`.
 * Returns the next state in the same layout: `c' = sigmoid(f) c + sigmoid(i)
 * tanh(g)`, `h' = sigmoid(o) tanh(c')`. The previous `h` is not read (it went
 * into `gates`), so its gradient from this op is zero.
 *
 * @example
 * ```ts
 * import { lstmCell, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * // all gates 0: i = f = o = 1/2, g = 0, so c' = c / 2 and h' = tanh(c') / 2
 * const next = lstmCell(tensor([[0, 0, 0, 0]]), tensor([[5, 2]])).toArray();
 * if (next[1] !== 1 || Math.abs(next[0]! - Math.tanh(1) / 2) > 1e-6) throw new Error("example: unexpected result");
 * ```
 */
export function lstmCell(gates: Tensor, state: Tensor): Tensor {
  return ELEMENTWISE_OPS.lstm_cell.forward(gates, state);
}

export function compare(
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
    return ELEMENTWISE_OPS.where.forward(cond, ta, tb);
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
  return ELEMENTWISE_OPS.broadcast_to.forward(x, shape);
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
  return ELEMENTWISE_OPS.clone.forward(x);
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
