/**
 * Recurrent ops: a whole LSTM layer over a sequence as one recorded op, whose
 * forward and backward run one kernel a time step (`lstm_step`,
 * `lstm_step_backward`, each with its step's product with the recurrent weight)
 * in a loop. One op for the layer, rather than the
 * steps as ops, lets the backward collect the input projection's gradient in
 * one concatenation and the recurrent weight's in one matmul over all steps,
 * where per-step ops add a gradient of the whole sequence's shape for every
 * step (quadratic in the steps) and a weight gradient per step. Every kernel
 * still runs on the backend as its own call, so a re-materializing runtime
 * sees (and may evict) each step's values.
 *
 * @module
 */

import type { GradNode } from "../autograd.ts";
import { empty, full, type Tensor, view } from "../tensor.ts";
import { fmt } from "../_shape.ts";
import { attrsOf, check, record, run } from "./_core.ts";
import { sliceRaw } from "./layout.ts";
import { mm } from "./matmul.ts";

interface LstmLayerAttrs {
  B: number;
  T: number;
  H: number;
}

/** `parts` (each `[B, C]`) side by side along a new middle axis: `[B, parts.length, C]`. */
function stackSteps(parts: readonly Tensor[], B: number, C: number): Tensor {
  const y = empty(parts[0]!.backend, [B, parts.length, C], "f32");
  run("concat", parts, [y], [parts.length, B, C, ...parts.map(() => 1)]);
  return y;
}

/** The recurrent ops: forward and gradient rule of each, by name. */
export const RNN_OPS = {
  lstm_layer: {
    name: "lstm_layer",
    forward(xw: Tensor, whh: Tensor): Tensor {
      const be = check("lstmLayer", [xw, whh]);
      if (xw.ndim !== 3 || xw.shape[2]! % 4 !== 0) {
        throw new RangeError(
          `lstmLayer: xw must be [batch, steps, 4 hidden] (the gates' input projections), got ${
            fmt(xw.shape)
          }`,
        );
      }
      const [B, T, G] = xw.shape as [number, number, number];
      const H = G / 4;
      if (whh.ndim !== 2 || whh.shape[0] !== G || whh.shape[1] !== H) {
        throw new RangeError(
          `lstmLayer: whh must be [${G}, ${H}] for xw ${fmt(xw.shape)}, got ${fmt(whh.shape)}`,
        );
      }
      const attrs: LstmLayerAttrs = { B, T, H };
      if (T === 0) return record(this, empty(be, [B, 0, H], "f32"), [xw, whh], [whh], attrs);
      const gates: Tensor[] = [], states: Tensor[] = [full([B, 2 * H], 0, { backend: be })];
      const hs: Tensor[] = [];
      try {
        for (let t = 0; t < T; t++) {
          // one kernel a step: the gates from xw's step t plus h W_hh^T (h = 0 before the
          // first), the cell, and h apart for the next step's product
          const g = empty(be, [B, G], "f32");
          const s = empty(be, [B, 2 * H], "f32");
          const h = empty(be, [B, H], "f32");
          gates.push(g);
          states.push(s);
          hs.push(h);
          const ins = t === 0 ? [xw, states[t]!] : [xw, states[t]!, hs[t - 1]!, whh];
          run("lstm_step", ins, [s, h, g], [B, T, H, t, t === 0 ? 0 : 1]);
        }
        const y = stackSteps(hs, B, H);
        return record(this, y, [xw, whh], [whh, ...gates, ...states, y], attrs);
      } finally {
        for (const t of [...gates, ...states, ...hs]) t.dispose();
      }
    },
    backward(gy: Tensor, node: GradNode): (Tensor | null)[] {
      const { B, T, H } = attrsOf<LstmLayerAttrs>(node);
      const G = 4 * H;
      const whh = node.saved[0]!;
      if (T === 0) {
        return [empty(gy.backend, [B, 0, G], "f32"), full([G, H], 0, { backend: gy.backend })];
      }
      const gates = node.saved.slice(1, 1 + T);
      const states = node.saved.slice(1 + T, 2 + 2 * T);
      const y = node.saved[2 + 2 * T]!;
      const dgs: Tensor[] = new Array(T);
      // the next state's gradient (its c half; the h half is the cell's, 0) and h's through
      // the next step's gates
      let gnext = full([B, 2 * H], 0, { backend: gy.backend });
      let dh: Tensor | null = null;
      try {
        for (let t = T - 1; t >= 0; t--) {
          // one kernel a step: the cell's gradient (reading gy's step t) and, before the first
          // step, h's through this step's gates (ggates W_hh)
          const dg = empty(gy.backend, [B, G], "f32");
          const gprev = empty(gy.backend, [B, 2 * H], "f32");
          const dhPrev = t > 0 ? empty(gy.backend, [B, H], "f32") : null;
          const ins = [gates[t]!, states[t]!, states[t + 1]!, gnext, gy, whh];
          if (dh !== null) ins.push(dh);
          run("lstm_step_backward", ins, dhPrev ? [dg, gprev, dhPrev] : [dg, gprev], [B, T, H, t]);
          gnext.dispose();
          dh?.dispose();
          dh = dhPrev;
          gnext = gprev;
          // done with this step's saved values (states[t] is the step before's next state):
          // released now, not with the node after the whole layer, as steps as ops would be
          gates[t]!.dispose();
          states[t + 1]!.dispose();
          dgs[t] = dg;
        }
        const dxw = stackSteps(dgs, B, G);
        for (let t = 0; t < T; t++) dgs[t]!.dispose();
        let dwhh: Tensor | null = null;
        if (node.inputs[1]) {
          // sum over t of dg_t^T h_{t-1} (h_{-1} = 0): one matmul over all steps, with the
          // hidden states shifted one step later
          const hPrev = sliceRaw(y, [0, 0, 0], [B, T - 1, H]);
          const shifted = empty(gy.backend, [B, T, H], "f32");
          run("slice_backward", [hPrev], [shifted], [3, B, T, H, 0, 1, 0, B, T - 1, H]);
          hPrev.dispose();
          const a = view(dxw, [B * T, G]), b = view(shifted, [B * T, H]);
          dwhh = mm("lstmLayer", a, b, true, false);
          for (const x of [a, b, shifted]) x.dispose();
        }
        if (!node.inputs[0]) dxw.dispose();
        return [node.inputs[0] ? dxw : null, dwhh];
      } finally {
        gnext.dispose();
        dh?.dispose();
        for (const d of dgs) d?.dispose();
      }
    },
  },
} as const;

/**
 * A one-layer LSTM over a sequence, zero initial state, gates in PyTorch's
 * order i, f, g, o: `xw` `[batch, steps, 4 hidden]` holds each step's input
 * projection with both biases (`x W_ih^T + b_ih + b_hh`), `whh`
 * `[4 hidden, hidden]` the recurrent weight. Returns every step's hidden state,
 * `[batch, steps, hidden]` (as `torch.nn.LSTM`'s output). One recorded op whose
 * forward and backward run the steps' kernels (see the module doc).
 *
 * @example
 * ```ts
 * import { lstmLayer, tensor, zeros, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * setDefaultBackend(new ReferenceBackend());
 * // gates all 0 and no recurrence: c stays 0, so every h is 0
 * const h = lstmLayer(zeros([1, 3, 4]), zeros([4, 1]));
 * if (h.shape.join() !== "1,3,1" || h.toArray().some((v) => v !== 0)) throw new Error("example: unexpected result");
 * ```
 */
export function lstmLayer(xw: Tensor, whh: Tensor): Tensor {
  return RNN_OPS.lstm_layer.forward(xw, whh);
}
