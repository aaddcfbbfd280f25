/**
 * What every op family shares: running a kernel, validating inputs,
 * recording a graph node, and summing broadcast gradients back.
 *
 * @module
 */

import type { Backend } from "../backend.ts";
import { type KernelName, MAX_DIMS } from "../kernels.ts";
import { type GradNode, type GradRule, isGradEnabled } from "../autograd.ts";
import { empty, full, savedView, Tensor, view } from "../tensor.ts";
import { broadcastStrides, fmt, sameShape } from "../_shape.ts";

// ------------------------------------------------------------------ plumbing

export function run(
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

export function desc(t: Tensor): string {
  return `${fmt(t.shape)} ${t.dtype}`;
}

/** Checks that inputs are live, f32 (unless allowed) and on one backend. */
export function check(op: string, ts: readonly Tensor[], dtypes: "f32" | "any" = "f32"): Backend {
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

export function checkRank(op: string, shape: readonly number[]): void {
  if (shape.length > MAX_DIMS) {
    throw new RangeError(`${op}: shape ${fmt(shape)} has more than ${MAX_DIMS} dimensions`);
  }
}

/** Records a graph node on `out` when grad mode is on and an input requires grad. */
export function record(
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

export function scalarTensor(like: Tensor, v: number): Tensor {
  return full([], v, { backend: like.backend });
}

/** Sums a broadcast gradient back to `shape` (a new handle either way). */
export function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(g.shape, shape)) return view(g, g.shape);
  const nd = g.shape.length;
  const padded = new Array<number>(nd).fill(1);
  for (let i = 0; i < shape.length; i++) padded[nd - shape.length + i] = shape[i]!;
  const y = empty(g.backend, shape, "f32");
  run("sum_to", [g], [y], [nd, ...g.shape, ...padded]);
  return y;
}

/** Materializes `x` broadcast to `shape` (no recording). */
export function expandRaw(x: Tensor, shape: readonly number[]): Tensor {
  const y = empty(x.backend, shape, x.dtype);
  run("expand", [x], [y], [shape.length, ...shape, ...broadcastStrides(x.shape, shape)]);
  return y;
}

export function attrsOf<T>(node: GradNode): T {
  return node.attrs as T;
}
