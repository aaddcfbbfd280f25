/** Shape helpers shared by the tensor ops (private). @module */

/** Formats a shape the way error messages show it: `[2,3]`. */
export function fmt(shape: readonly number[]): string {
  return `[${shape.join(",")}]`;
}

/** Number of elements of a shape. */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i]!;
  return n;
}

/** Validates a user-given shape (non-negative integers). */
export function checkShape(op: string, shape: readonly number[]): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(`${op}: shape ${fmt(shape)} must hold non-negative integers`);
    }
  }
}

/** numpy broadcasting of two shapes; throws naming the op and both shapes. */
export function broadcastShapes(
  op: string,
  a: readonly number[],
  b: readonly number[],
): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new RangeError(`${op}: shapes ${fmt(a)} and ${fmt(b)} cannot be broadcast together`);
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Strides (in elements) reading a contiguous `shape` as if broadcast to `out` (0 where broadcast). */
export function broadcastStrides(shape: readonly number[], out: readonly number[]): number[] {
  const s = new Array<number>(out.length).fill(0);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    const j = out.length - shape.length + i;
    s[j] = shape[i] === 1 && out[j] !== 1 ? 0 : acc;
    acc *= shape[i]!;
  }
  return s;
}

/** Same shapes? */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Normalizes a possibly negative axis for a tensor of rank `ndim`. */
export function normAxis(op: string, axis: number, ndim: number, shape: readonly number[]): number {
  const a = axis < 0 ? axis + ndim : axis;
  if (!Number.isInteger(axis) || a < 0 || a >= ndim) {
    throw new RangeError(`${op}: axis ${axis} is out of range for shape ${fmt(shape)}`);
  }
  return a;
}
