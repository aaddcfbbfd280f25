/**
 * A small MLP with dropout trained by SGD with momentum (in-place updates),
 * built directly on @libra/tensor ops and autograd: the workload of the
 * runtime's exactness and dispatch tests. @module
 */

import {
  type Backend,
  crossEntropy,
  dropout,
  manualSeed,
  matmul,
  normal,
  relu,
  sgdUpdate,
  type Tensor,
  tensor,
  tidy,
  withBackend,
  zeros,
} from "@libra/tensor";

/** The MLP and its run. */
export interface MlpRun {
  /** Seed of weights, batch and dropout. */
  seed: number;
  /** Layer widths, input first. */
  dims: readonly number[];
  /** Batch size. */
  batch: number;
  /** Label of example `i` (in `[0, dims.at(-1))`). */
  label: (i: number) => number;
  /** Dropout probability after each hidden layer. */
  dropout: number;
  /** SGD steps. */
  steps: number;
  /** Read the gradients of each step before the update (the last step's are returned). */
  readGrads?: boolean;
  /** Called after each step's update. */
  afterStep?: () => void;
}

/** What {@link trainMlp} returns. */
export interface MlpResult {
  losses: number[];
  /** The last step's gradients (empty unless `readGrads`). */
  grads: number[][];
  /** The weights after the last step. */
  weights: number[][];
}

/** Trains the MLP of `o` on `backend` (SGD, lr 0.1, momentum 0.9). */
export function trainMlp(backend: Backend, o: MlpRun): MlpResult {
  return withBackend(backend, () => {
    manualSeed(o.seed);
    const dims = o.dims;
    const ws: Tensor[] = [];
    const bufs: Tensor[] = [];
    for (let i = 0; i < dims.length - 1; i++) {
      const w = normal([dims[i]!, dims[i + 1]!], { std: 0.2 });
      w.requiresGrad = true;
      ws.push(w);
      bufs.push(zeros([dims[i]!, dims[i + 1]!]));
    }
    const x = normal([o.batch, dims[0]!]);
    const y = tensor(new Int32Array(Array.from({ length: o.batch }, (_, i) => o.label(i))), [
      o.batch,
    ], { dtype: "i32" });
    const losses: number[] = [];
    let grads: number[][] = [];
    for (let step = 0; step < o.steps; step++) {
      const loss = tidy(() => {
        let h: Tensor = x;
        for (let i = 0; i < ws.length; i++) {
          h = matmul(h, ws[i]!);
          if (i < ws.length - 1) h = dropout(relu(h), o.dropout);
        }
        const l = crossEntropy(h, y);
        l.backward();
        return l;
      });
      losses.push(loss.item());
      loss.dispose();
      if (o.readGrads) grads = ws.map((w) => Array.from(w.grad!.toArray()));
      ws.forEach((w, i) => {
        sgdUpdate(w, w.grad!, bufs[i]!, { lr: 0.1, momentum: 0.9, firstStep: step === 0 });
        w.grad!.dispose();
        w.grad = null;
      });
      o.afterStep?.();
    }
    const weights = ws.map((w) => Array.from(w.toArray()));
    return { losses, grads, weights };
  });
}

/**
 * Three SGD steps of a 16-40-40-40-8 MLP with dropout 0.2 on `rt`, each step
 * ended (`endStep`) after its in-place updates: the runtime tests' workload
 * with step ends. `o` changes the seed, batch or labels (seed 5, batch 64,
 * label `(i * 3) % 8` by default).
 */
export function trainSteppedMlp(
  rt: Backend & { endStep(): void },
  o: Partial<Pick<MlpRun, "seed" | "batch" | "label">> = {},
): MlpResult {
  return trainMlp(rt, {
    seed: o.seed ?? 5,
    dims: [16, 40, 40, 40, 8],
    batch: o.batch ?? 64,
    label: o.label ?? ((i) => (i * 3) % 8),
    dropout: 0.2,
    steps: 3,
    afterStep: () => rt.endStep(),
  });
}
