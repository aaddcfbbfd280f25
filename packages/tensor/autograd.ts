/**
 * Reverse-mode automatic differentiation.
 *
 * Every differentiable op of {@link ./ops.ts} is one entry of the op table: a
 * forward function and, next to it, its gradient rule. When any input requires
 * a gradient, the forward records a {@link GradNode} `{op, inputs, saved}` on
 * its output. `backward()` walks the nodes in reverse topological order, calls
 * each rule once with the node's incoming gradient, releases the node's saved
 * tensors right after that call, and frees every intermediate gradient as soon
 * as it has been consumed. Gradients of leaves accumulate into `leaf.grad`
 * (a tensor owned by the leaf: scopes never free it; `leaf.dispose()` does).
 *
 * Lifetimes are deterministic: a node holds its saved tensors until it is used
 * by `backward()` or until nothing can reach it any more (its output tensor is
 * disposed and no later node depends on it), whichever comes first.
 *
 * Testing: every gradient rule is checked against central finite differences
 * computed in float64. The checks run the same ops on a `ReferenceBackend` in
 * `"f64"` precision (its kernels keep doubles), so the loss `sum(op(x) * r)`
 * is evaluated without f32 rounding and `h = 1e-6` differences are accurate
 * to about 1e-9; the f32 backends (reference, native cpu) are then compared
 * with those checked gradients (`autograd_test.ts`, `_test_helpers.ts`).
 *
 * @module
 */

import type { Tensor } from "./tensor.ts";

/** A gradient rule: from the output gradient to one gradient per input (null = none needed). */
export interface GradRule {
  /** Op name, for error messages and lineage. */
  readonly name: string;
  /**
   * Computes input gradients. `gy` is borrowed (the engine frees it); the
   * returned tensors are owned by the engine. `node.inputs[i] === null` means
   * input `i` needs no gradient, and the rule may return null for it.
   */
  backward(gy: Tensor, node: GradNode): readonly (Tensor | null)[];
}

/** One recorded op application: the lineage of a tensor that requires a gradient. */
export interface GradNode {
  /** The rule of the op that produced the output. */
  readonly op: GradRule;
  /** Per input: its node, the leaf tensor itself (a leaf requiring grad), or null. */
  readonly inputs: readonly (GradNode | Tensor | null)[];
  /** Tensors saved for the gradient rule (internal handles, untracked by scopes). */
  saved: Tensor[];
  /** Op-specific non-tensor data (shapes, axes, params). */
  readonly attrs: unknown;
  /** Shape of the output this node produced. */
  readonly shape: readonly number[];
  /** Output handles and child nodes that still reference this node. */
  refs: number;
  /** True once `backward` used (and freed) the saved tensors. */
  released: boolean;
}

let gradDisabled = 0;

/** True unless inside {@link noGrad}. */
export function isGradEnabled(): boolean {
  return gradDisabled === 0;
}

/**
 * Runs `fn` without recording gradients (no nodes, nothing saved).
 *
 * @example
 * ```ts
 * import { noGrad, tensor, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * const w = tensor([1, 2], [2], { requiresGrad: true });
 * const y = noGrad(() => w.mul(3));
 * if (y.requiresGrad) throw new Error("recorded under noGrad");
 * ```
 */
export function noGrad<T>(fn: () => T): T {
  gradDisabled++;
  try {
    return fn();
  } finally {
    gradDisabled--;
  }
}

/** Disposes a node's saved tensors once, and unlinks parents whose count drops to zero. */
export function releaseNode(node: GradNode): void {
  const stack: GradNode[] = [node];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (--n.refs > 0) continue;
    for (const t of n.saved) t.dispose();
    n.saved = [];
    for (const p of n.inputs) {
      if (p !== null && !isTensor(p)) stack.push(p);
    }
  }
}

/** Distinguishes a leaf parent (a Tensor) from a node parent. */
export function isTensor(p: GradNode | Tensor): p is Tensor {
  return !("op" in p && "inputs" in p && "saved" in p);
}

/** Nodes reachable from `root`, in reverse topological order (consumers first). */
function topoOrder(root: GradNode): GradNode[] {
  const post: GradNode[] = [];
  const seen = new Set<GradNode>([root]);
  const stack: [GradNode, number][] = [[root, 0]];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const [n, i] = top;
    if (i < n.inputs.length) {
      top[1] = i + 1;
      const p = n.inputs[i]!;
      if (p !== null && !isTensor(p) && !seen.has(p)) {
        seen.add(p);
        stack.push([p, 0]);
      }
    } else {
      stack.pop();
      post.push(n);
    }
  }
  return post.reverse();
}

/** Hooks the engine needs from the tensor module (set there, to keep imports one-way). */
export interface EngineHooks {
  /** `a + b` (gradient accumulation). */
  add(a: Tensor, b: Tensor): Tensor;
  /** A tensor of ones shaped like `t` (the seed gradient of a scalar loss). */
  onesLike(t: Tensor): Tensor;
  /** A new handle on `t`'s storage. */
  alias(t: Tensor): Tensor;
  /** Replaces a leaf's gradient, disposing the old one. */
  setGrad(leaf: Tensor, g: Tensor | null): void;
  /** Runs `fn` with scope tracking off. */
  untracked<T>(fn: () => T): T;
  /** Runs a gradient rule in a private scope: temporaries it does not return are disposed. */
  owned(fn: () => readonly (Tensor | null)[]): readonly (Tensor | null)[];
}

let hooks: EngineHooks | null = null;

/** Installs the engine hooks (called once by the tensor module). */
export function installEngineHooks(h: EngineHooks): void {
  hooks = h;
}

function fmtShape(s: readonly number[]): string {
  return `[${s.join(",")}]`;
}

/**
 * Back-propagates from `root`. Without `grad`, `root` must hold one element and
 * its gradient is 1. Use {@link Tensor.backward} rather than calling this.
 */
export function backward(root: Tensor, grad?: Tensor): void {
  const h = hooks!;
  if (root.disposed) throw new Error(`backward: the tensor ${fmtShape(root.shape)} was disposed`);
  if (!root.requiresGrad) {
    throw new Error(
      `backward: tensor ${
        fmtShape(root.shape)
      } does not require grad (no input had requiresGrad, or it was computed under noGrad)`,
    );
  }
  if (grad === undefined && root.size !== 1) {
    throw new Error(
      `backward: a gradient is needed for a non-scalar tensor ${
        fmtShape(root.shape)
      } (pass backward(grad) or reduce it to one element first)`,
    );
  }
  if (grad !== undefined && !sameShape(grad.shape, root.shape)) {
    throw new Error(
      `backward: gradient shape ${fmtShape(grad.shape)} differs from tensor shape ${
        fmtShape(root.shape)
      }`,
    );
  }
  noGrad(() =>
    h.untracked(() => {
      const seed = grad === undefined ? h.onesLike(root) : h.alias(grad);
      const node = root.node;
      if (node === null) {
        accumulateLeaf(h, root, seed);
        return;
      }
      if (node.released) {
        seed.dispose();
        throw new Error(
          `backward: the graph of ${node.op.name} was already used by an earlier backward() (its saved tensors are freed); recompute the forward pass`,
        );
      }
      const pending = new Map<GradNode, Tensor>([[node, seed]]);
      for (const n of topoOrder(node)) {
        const gy = pending.get(n);
        if (gy === undefined) continue;
        pending.delete(n);
        if (n.released) {
          gy.dispose();
          for (const t of pending.values()) t.dispose();
          throw new Error(
            `backward: the graph of ${n.op.name} was already used by an earlier backward(); recompute the forward pass`,
          );
        }
        let grads: readonly (Tensor | null)[];
        try {
          grads = h.owned(() => n.op.backward(gy, n));
        } finally {
          gy.dispose();
          for (const t of n.saved) t.dispose();
          n.saved = [];
          n.released = true;
        }
        for (let i = 0; i < n.inputs.length; i++) {
          const p = n.inputs[i]!;
          const g = grads[i] ?? null;
          if (g === null) continue;
          if (p === null) {
            g.dispose();
            continue;
          }
          const want = isTensor(p) ? p.shape : p.shape;
          if (!sameShape(g.shape, want)) {
            g.dispose();
            throw new Error(
              `backward: gradient rule of ${n.op.name} returned shape ${
                fmtShape(g.shape)
              } for input ${i} of shape ${fmtShape(want)} (bug in the op table)`,
            );
          }
          if (isTensor(p)) accumulateLeaf(h, p, g);
          else {
            const prev = pending.get(p);
            if (prev === undefined) pending.set(p, g);
            else {
              pending.set(p, h.add(prev, g));
              prev.dispose();
              g.dispose();
            }
          }
        }
      }
      for (const t of pending.values()) t.dispose();
    })
  );
}

function accumulateLeaf(h: EngineHooks, leaf: Tensor, g: Tensor): void {
  if (leaf.disposed) {
    g.dispose();
    return;
  }
  const prev = leaf.grad;
  if (prev === null) h.setGrad(leaf, g);
  else {
    h.setGrad(leaf, h.add(prev, g));
    g.dispose();
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
