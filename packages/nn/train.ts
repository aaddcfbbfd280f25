/**
 * `train`: the training loop shared by tests, benchmarks and the CLI.
 *
 * Each step uploads one batch, runs forward, loss and backward inside a
 * `tidy` scope (so every intermediate is freed when the step ends), applies the
 * optimizer and frees the gradients. The only device read is the loss value at
 * the end of the step. Memory in use after step N equals memory after step 1
 * (parameters, buffers and optimizer state only).
 *
 * @module
 */

import { type Backend, fromTypedArray, type Tensor, tidy } from "@libra/tensor";
import type { Batch, DataSource } from "./data.ts";
import { crossEntropyLoss } from "./loss.ts";
import type { Layer } from "./layers.ts";
import type { Optimizer } from "./optim.ts";
import type { LrSchedule } from "./schedule.ts";

/** What {@link train} reports after each step. */
export interface StepInfo {
  /** 0-based step index. */
  readonly step: number;
  /** Loss of this step (before the update). */
  readonly loss: number;
  /** Wall time of the whole step in milliseconds (upload to update, synchronised). */
  readonly ms: number;
  /** Learning rate used. */
  readonly lr: number;
  /** Backend memory in use after the step, in bytes. */
  readonly usedBytes: number;
}

/** Options of {@link train}. */
export interface TrainOptions {
  /** The model (any module with a one-input forward pass). */
  model: Layer;
  /** Batches (see `createData`). */
  data: DataSource;
  /** The optimizer that updates the parameters after each step. */
  optimizer: Optimizer;
  /** Number of steps. */
  steps: number;
  /** Loss from model output and targets (default: {@link crossEntropyLoss}). */
  loss?: (output: Tensor, targets: Tensor) => Tensor;
  /** Learning rate per step (sets `optimizer.lr` before each step). */
  schedule?: LrSchedule;
  /** Backend for the batches (default: that of the model's first parameter). */
  backend?: Backend;
  /** Called after every step. */
  onStep?: (info: StepInfo) => void;
}

/** What {@link train} returns: one entry per step. */
export interface TrainResult {
  /** The loss of every step, in order. */
  readonly losses: number[];
  /** Step times in milliseconds. */
  readonly times: number[];
  /** Backend bytes in use after each step. */
  readonly usedBytes: number[];
}

/**
 * Trains `model` for `steps` steps.
 *
 * @example
 * ```ts
 * import { manualSeed, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * import { AdamW, createData, createModel, train } from "@libra/nn";
 * setDefaultBackend(new ReferenceBackend());
 * manualSeed(0);
 * const model = createModel("mlp", { inFeatures: 4, hidden: [8], outFeatures: 2 });
 * const data = createData("mlp", { inFeatures: 4, hidden: [8], outFeatures: 2 }, { batchSize: 16 });
 * const { losses } = train({ model, data, optimizer: new AdamW(model.parameters(), { lr: 0.05 }), steps: 20 });
 * if (!(losses[19]! < losses[0]!)) throw new Error("loss should fall");
 * ```
 */
export function train(options: TrainOptions): TrainResult {
  const { model, data, optimizer, steps } = options;
  const lossFn = options.loss ?? crossEntropyLoss;
  const params = model.parameters();
  const backend = options.backend ?? params[0]?.backend;
  if (!backend) throw new Error("train: the model has no parameters and no backend was given");
  if (!Number.isInteger(steps) || steps < 0) {
    throw new RangeError(`train: steps must be a non-negative integer, got ${steps}`);
  }
  model.train();
  const result: TrainResult = { losses: [], times: [], usedBytes: [] };
  for (let step = 0; step < steps; step++) {
    if (options.schedule) optimizer.lr = options.schedule(step);
    const batch = data.next();
    const t0 = performance.now();
    const loss = trainStep({ model, batch, optimizer, loss: lossFn, backend });
    const ms = performance.now() - t0;
    const usedBytes = backend.memory().usedBytes;
    result.losses.push(loss);
    result.times.push(ms);
    result.usedBytes.push(usedBytes);
    options.onStep?.({ step, loss, ms, lr: optimizer.lr, usedBytes });
  }
  return result;
}

/** Options of {@link trainStep}. */
export interface TrainStepOptions {
  /** The model to train. */
  model: Layer;
  /** The batch of this step. */
  batch: Batch;
  /** The optimizer that updates the parameters. */
  optimizer: Optimizer;
  /** Default: {@link crossEntropyLoss}. */
  loss?: (output: Tensor, targets: Tensor) => Tensor;
  /** Backend for the batch (default: that of the model's first parameter). */
  backend?: Backend;
}

/**
 * One training step: upload the batch, forward, loss, backward, free the
 * forward pass's intermediates, optimizer update, free the gradients; every
 * intermediate is freed before it returns
 * (after `backend.sync()`). Returns the loss, or NaN on a backend without data
 * (meta). Does not change train/eval mode.
 */
export function trainStep(o: TrainStepOptions): number {
  const { model, batch, optimizer } = o;
  const lossFn = o.loss ?? crossEntropyLoss;
  const backend = o.backend ?? model.parameters()[0]?.backend;
  if (!backend) throw new Error("trainStep: the model has no parameters and no backend was given");
  // The forward pass's intermediates are freed before the update (as PyTorch
  // frees saved tensors in backward): while they live, an in-place update of
  // a parameter they were computed from must first copy it (copy-on-write
  // under a runtime), and they add to the peak.
  const loss = tidy(() => {
    const x = fromTypedArray(batch.x.data, batch.x.shape, { backend });
    const y = fromTypedArray(batch.targets.data, batch.targets.shape, { backend });
    const l = lossFn(model.forward(x), y);
    l.backward();
    return backend.hasData ? l.item() : NaN;
  });
  tidy(() => {
    optimizer.step();
    optimizer.zeroGrad();
  });
  backend.sync();
  return loss;
}
