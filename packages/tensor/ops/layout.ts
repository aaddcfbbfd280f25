/**
 * The layout ops (kernels of `native/cpu/layout.c`): each forward next to its
 * gradient rule, and the public functions that call them.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, type Tensor, view } from "../tensor.ts";
import { fmt, normAxis, numel } from "../_shape.ts";
import { attrsOf, check, checkRank, desc, record, run } from "./_core.ts";

// ------------------------------------------------------------------ layout helpers

export function permuteRaw(x: Tensor, perm: readonly number[]): Tensor {
  const y = empty(x.backend, perm.map((p) => x.shape[p]!), x.dtype);
  run("permute", [x], [y], [x.ndim, ...x.shape, ...perm]);
  return y;
}

export function sliceRaw(x: Tensor, starts: readonly number[], sizes: readonly number[]): Tensor {
  const y = empty(x.backend, sizes, x.dtype);
  run("slice", [x], [y], [x.ndim, ...x.shape, ...starts, ...sizes]);
  return y;
}

/** The layout ops: forward and gradient rule of each, by name. */
export const LAYOUT_OPS = {
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
} as const;

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
  return LAYOUT_OPS.permute.forward(x, perm);
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
  return LAYOUT_OPS.permute.forward(x, perm);
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
  return LAYOUT_OPS.reshape.forward(x, out);
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
  return LAYOUT_OPS.slice.forward(x, st, sz);
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
  return LAYOUT_OPS.concat.forward(tensors, axis);
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
  return LAYOUT_OPS.index_select.forward(x, axis, index);
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
  return LAYOUT_OPS.embedding.forward(weight, ids);
}
