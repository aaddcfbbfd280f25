/**
 * How much memory a training run would take, estimated before it is queued: one
 * training step of the configured model on the meta backend (shapes and sizes, no
 * data) gives the budget-free peak of its tensors; the synthetic data's host tables
 * are added. The API refuses runs above its limit, so that a configuration such as
 * `{"hidden": [16384, 16384]}` is answered with a clear error instead of filling the
 * machine. {@linkcode threadEstimator} runs the estimate in a worker thread with a
 * time limit so that the server keeps answering meanwhile.
 *
 * @module
 */

import type { TrainSpec } from "./run_executor.ts";
import { RunRefusedError } from "./store.ts";

/** The estimate of one run. */
export interface RunEstimate {
  /** Budget-free peak of the step's tensors (parameters, gradients, optimizer state, activations). */
  tensorBytes: number;
  /** Host memory of the synthetic data (class templates and one batch). */
  dataBytes: number;
  /** The sum: what a run needs at least. */
  totalBytes: number;
}

/** Estimates a run's memory. */
export type Estimator = (spec: TrainSpec) => Promise<RunEstimate>;

type HostTensor = import("@libra/nn/safetensors").HostTensor;

/**
 * Estimates `spec` on the meta backend in the calling thread (~0.1-1 s for the paper
 * presets): two training steps, the peak of the second (steady state) included.
 */
export async function estimateInThisThread(spec: TrainSpec): Promise<RunEstimate> {
  const [{ MetaBackend, withBackend, manualSeed }, { Runtime }, zoo, { SGD, trainStep }] =
    await Promise.all([
      import("@libra/tensor"),
      import("@libra/runtime"),
      import("@libra/nn/zoo"),
      import("@libra/nn"),
    ]);
  const name = spec.model as import("@libra/nn/zoo").ModelName;
  const preset = zoo.getPreset(name, spec.preset);
  const config = { ...preset.config, ...spec.config } as Record<string, number | unknown>;
  const input = preset.input;
  // The data source's templates grow with the classes; a one-sample source with two
  // classes has the same batch shapes, and its tables are counted analytically below.
  const small = { ...config };
  for (const k of ["numClasses", "outFeatures", "vocabSize"]) {
    if (typeof small[k] === "number" && spec.model !== "unet") small[k] = 2;
  }
  const sample = zoo.createData(name, small as never, { ...input, batchSize: 1, seed: 0 })
    .next();
  const widen = (t: HostTensor): HostTensor => {
    const per = t.data.length;
    const shape = [input.batchSize, ...t.shape.slice(1)];
    const data = t.dtype === "f32"
      ? new Float32Array(per * input.batchSize)
      : new Int32Array(per * input.batchSize);
    return { dtype: t.dtype, shape, data };
  };
  const batch = { x: widen(sample.x), targets: widen(sample.targets) };
  const rt = new Runtime({ backend: new MetaBackend(), timeline: false });
  const tensorBytes = withBackend(rt, () => {
    manualSeed(spec.seed);
    const model = zoo.createModel(name, config as never, { backend: rt });
    const optimizer = new SGD(model.parameters(), { lr: 0.01, momentum: 0.9 });
    model.train();
    // two steps: the second (steady state) holds the optimizer's state from the first
    for (let i = 0; i < 2; i++) {
      trainStep({ model, batch, optimizer, backend: rt });
      rt.endStep();
    }
    return rt.stats.peakBytes;
  });
  const per = sample.x.data.length;
  const classes = Number(config.numClasses ?? config.outFeatures ?? 0);
  const templates = spec.model === "resnet" || spec.model === "mlp" ? classes * per * 4 : 0;
  const dataBytes = templates + (batch.x.data.byteLength + batch.targets.data.byteLength);
  return { tensorBytes, dataBytes, totalBytes: tensorBytes + dataBytes };
}

/** Options of {@linkcode threadEstimator}. */
export interface ThreadEstimatorOptions {
  /** Longest an estimate may take, ms (default 30000); beyond it the estimate fails. */
  timeoutMs?: number;
}

/** An estimator in a worker thread, with {@linkcode ThreadEstimator.close}. */
export interface ThreadEstimator {
  /** Estimates one run (one at a time; calls queue). */
  estimate: Estimator;
  /** Ends the thread. */
  close(): void;
}

/** Runs estimates in one worker thread, one at a time, each within a time limit. */
export function threadEstimator(opts: ThreadEstimatorOptions = {}): ThreadEstimator {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let worker: Worker | null = null;
  let tail: Promise<unknown> = Promise.resolve();
  let closed = false;
  const one = (spec: TrainSpec) =>
    new Promise<RunEstimate>((resolve, reject) => {
      if (closed) return reject(new Error("the estimator was closed"));
      const w = worker ??= new Worker(new URL("./_estimate_thread.js", import.meta.url), {
        type: "module",
      });
      const timer = setTimeout(() => {
        w.terminate();
        worker = null;
        reject(new Error(`estimating the run's memory took longer than ${timeoutMs} ms`));
      }, timeoutMs);
      w.onmessage = (e: MessageEvent) => {
        clearTimeout(timer);
        const m = e.data as { ok: true; estimate: RunEstimate } | { ok: false; message: string };
        if (m.ok) resolve(m.estimate);
        else reject(new Error(m.message));
      };
      w.onerror = (e) => {
        e.preventDefault();
        clearTimeout(timer);
        w.terminate();
        worker = null;
        reject(new Error(`the estimator thread crashed: ${e.message}`));
      };
      w.postMessage(spec);
    });
  return {
    estimate(spec) {
      const p = tail.then(() => one(spec));
      tail = p.catch(() => {});
      return p;
    },
    close() {
      closed = true;
      worker?.terminate();
      worker = null;
    },
  };
}

/** Default of the most memory a run may need by the estimate: 4 GiB. */
export const DEFAULT_MAX_RUN_BYTES = 4 * 2 ** 30;

/**
 * An admission check for `Store.admit`: refuses (with `RunRefusedError`) a run
 * whose estimate is above `maxRunBytes`, or that cannot be set up at all.
 */
export function admitByEstimate(
  estimate: Estimator,
  maxRunBytes: number,
): (spec: TrainSpec) => Promise<void> {
  return async (spec) => {
    let need: RunEstimate;
    try {
      need = await estimate(spec);
    } catch (e) {
      throw new RunRefusedError(`the run cannot be set up: ${e instanceof Error ? e.message : e}`, {
        cause: e,
      });
    }
    if (need.totalBytes > maxRunBytes) {
      throw new RunRefusedError(
        `the run would need about ${formatBytes(need.totalBytes)} (estimated on the meta ` +
          `backend: ${formatBytes(need.tensorBytes)} of tensors, ${
            formatBytes(need.dataBytes)
          } of data), above this server's limit of ${
            formatBytes(maxRunBytes)
          } per run (LIBRA_MAX_RUN_BYTES); choose a smaller preset or smaller overrides`,
      );
    }
  };
}

/** `1.5 GiB` */
export function formatBytes(n: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}
