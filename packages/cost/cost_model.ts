/**
 * Cost models: what (re)computing a call and swapping bytes cost, in
 * nanoseconds, and the clock that staleness is measured on.
 *
 * @module
 */

import { kernelSizes, kernelSpec } from "@libra/tensor/kernels";

/** The facts about a call a cost model may use. */
export interface CallInfo {
  /** Operator name (kernel-table name in live runs). */
  readonly op: string;
  /** Kernel params. */
  readonly params: readonly number[];
  /** Sequence number of the call in its step (0-based), when known. */
  readonly index?: number;
  /** Bytes of the call's fresh outputs. */
  readonly totalBytes: number;
}

/**
 * The `CostModel` contract (ARCHITECTURE.md): the cost of (re)computing a call and of
 * swapping `bytes`, both in nanoseconds. Costs are finite and non-negative.
 */
export interface CostModel {
  /** Short name, e.g. `"measured"`. */
  readonly name: string;
  /**
   * Cost of the call in ns. `measuredNs` is the time the runtime measured for
   * its first execution (undefined in simulations that have none).
   */
  callCost(call: CallInfo, measuredNs?: number): number;
  /** Cost of copying `bytes` between device and host (one direction), in ns. */
  swapCost(bytes: number): number;
  /**
   * False when {@link callCost} ignores `measuredNs` (at the moment): a live
   * runtime then need not time every kernel call. Absent means true.
   */
  readonly measures?: boolean;
  /**
   * True when {@link callCost} depends on the call's `op`, `params` and
   * `totalBytes` only (not on its `index` nor on a measured time): a caller
   * may keep the cost and reuse it for every call with the same three.
   * Absent means false.
   */
  readonly staticCallCost?: boolean;
}

/** Options of the swap part of a cost model. */
export interface SwapCostOptions {
  /** Host<->device bandwidth in bytes per second. Default 12e9 (PCIe 3 x16 effective). */
  bandwidthBytesPerS?: number;
  /** Fixed latency per copy in ns. Default 10 000. */
  latencyNs?: number;
}

/**
 * Swap cost: `latency + bytes / bandwidth`.
 *
 * @example
 * ```ts
 * import { SwapCost } from "@libra/cost";
 * const s = new SwapCost({ bandwidthBytesPerS: 1e9, latencyNs: 0 });
 * if (s.swapCost(1e9) !== 1e9) throw new Error("1 GB at 1 GB/s is 1 s");
 * ```
 */
export class SwapCost {
  /** Bytes per second. */
  readonly bandwidthBytesPerS: number;
  /** Latency per copy, ns. */
  readonly latencyNs: number;
  /** A swap cost: `latency + bytes / bandwidth` with `options` (defaults 12e9 B/s, 10 000 ns). */
  constructor(options: SwapCostOptions = {}) {
    this.bandwidthBytesPerS = options.bandwidthBytesPerS ?? 12e9;
    this.latencyNs = options.latencyNs ?? 10_000;
    if (!(this.bandwidthBytesPerS > 0)) {
      throw new RangeError(
        `SwapCost: bandwidth must be > 0 bytes/s, got ${this.bandwidthBytesPerS}`,
      );
    }
    if (!(this.latencyNs >= 0)) {
      throw new RangeError(`SwapCost: latency must be >= 0 ns, got ${this.latencyNs}`);
    }
  }
  /** Cost of copying `bytes` one way, in ns. */
  swapCost(bytes: number): number {
    return bytes === 0 ? 0 : this.latencyNs + (bytes / this.bandwidthBytesPerS) * 1e9;
  }

  /**
   * Measures host<->device bandwidth of a backend with `copy` (device->host and
   * back) of `bytes`, and returns a {@link SwapCost} with it.
   */
  static measure(
    backend: {
      alloc(b: number): unknown;
      allocHost(b: number): unknown;
      copy(a: unknown, b: unknown): void;
      free(b: unknown): void;
      freeHost(b: unknown): void;
      sync(): void;
    },
    bytes = 1 << 24,
  ): SwapCost {
    const dev = backend.alloc(bytes), host = backend.allocHost(bytes);
    try {
      backend.copy(dev, host);
      const t0 = performance.now();
      backend.copy(dev, host);
      backend.copy(host, dev);
      backend.sync();
      const ms = Math.max(performance.now() - t0, 1e-3);
      return new SwapCost({ bandwidthBytesPerS: (2 * bytes) / (ms / 1e3), latencyNs: 0 });
    } finally {
      backend.free(dev);
      backend.freeHost(host);
    }
  }
}

/**
 * Measured costs: a call costs what the runtime measured when it first ran it
 * (falling back to `fallbackNs` when nothing was measured).
 */
export class MeasuredCostModel implements CostModel {
  readonly name: string = "measured";
  readonly #swap: SwapCost;
  readonly #fallback: number;
  /** A measured cost model; `fallbackNs` is the cost of a call that was never measured. */
  constructor(options: SwapCostOptions & { fallbackNs?: number } = {}) {
    this.#swap = new SwapCost(options);
    this.#fallback = options.fallbackNs ?? 1;
  }
  callCost(_call: CallInfo, measuredNs?: number): number {
    return measuredNs !== undefined && Number.isFinite(measuredNs) && measuredNs >= 0
      ? measuredNs
      : this.#fallback;
  }
  swapCost(bytes: number): number {
    return this.#swap.swapCost(bytes);
  }
}

function sameParams(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/** Peak numbers of a device, for {@link AnalyticCostModel}. */
export interface DevicePeaks {
  /** Floating-point operations per second. */
  flopsPerS: number;
  /** Device memory bandwidth, bytes per second. */
  memBytesPerS: number;
  /** Fixed launch overhead per kernel in ns. */
  launchNs: number;
}

/** Rough peaks of common devices. */
export const DEVICE_PEAKS: Readonly<Record<string, DevicePeaks>> = {
  cpu: { flopsPerS: 50e9, memBytesPerS: 20e9, launchNs: 1_000 },
  v100: { flopsPerS: 14e12, memBytesPerS: 900e9, launchNs: 5_000 },
  h100: { flopsPerS: 60e12, memBytesPerS: 3.3e12, launchNs: 4_000 },
};

/**
 * Analytic costs (roofline): `launch + max(flops / peakFlops, bytes / bandwidth)`
 * with FLOPs and byte sizes from the kernel table. Deterministic: the same call
 * always costs the same, which makes live runs and simulations comparable.
 * Unknown operators (trace names) cost `launch + bytes / bandwidth`.
 *
 * @example
 * ```ts
 * import { AnalyticCostModel } from "@libra/cost";
 * const m = new AnalyticCostModel({ flopsPerS: 1e9, memBytesPerS: 1e12, launchNs: 0 });
 * const c = m.callCost({ op: "relu", params: [1e6], totalBytes: 4e6 });
 * if (Math.abs(c - 1e6) > 1) throw new Error(`1e6 flops at 1 GFLOP/s is 1 ms, got ${c}`);
 * ```
 */
export class AnalyticCostModel implements CostModel {
  readonly name: string = "analytic";
  readonly measures: boolean = false;
  /** Costs follow from op, params and bytes alone. */
  readonly staticCallCost: boolean = true;
  /** The device peaks used. */
  readonly peaks: DevicePeaks;
  readonly #swap: SwapCost;
  /** Costs by op, then by a hash of the params (entries compared number by number). */
  readonly #cache = new Map<string, Map<number, { params: number[]; ns: number }[]>>();
  #cached = 0;
  /** An analytic cost model for a device with `peaks` (default: the cpu figures) and a swap link. */
  constructor(peaks: DevicePeaks = DEVICE_PEAKS.cpu!, swap: SwapCostOptions = {}) {
    this.peaks = peaks;
    this.#swap = new SwapCost(swap);
  }
  callCost(call: CallInfo): number {
    // A string key (op + joined params) cost more than the rest of a small call's dispatch.
    const ps = call.params;
    let h = ps.length;
    for (let i = 0; i < ps.length; i++) h = (Math.imul(h, 31) + (ps[i]! | 0)) | 0;
    let byOp = this.#cache.get(call.op);
    if (byOp === undefined) this.#cache.set(call.op, byOp = new Map());
    const bucket = byOp.get(h);
    if (bucket !== undefined) {
      for (const e of bucket) if (sameParams(e.params, ps)) return e.ns;
    }
    const r = this.#price(call);
    if (this.#cached < 100_000) {
      this.#cached++;
      const e = { params: ps.slice(), ns: r };
      if (bucket === undefined) byOp.set(h, [e]);
      else bucket.push(e);
    }
    return r;
  }
  #price(call: CallInfo): number {
    let flops = 0;
    let bytes = call.totalBytes;
    try {
      flops = kernelSpec(call.op).flops(call.params);
      const sizes = kernelSizes(call.op, call.params);
      bytes = 0;
      for (const b of sizes.inputs) bytes += b;
      for (const b of sizes.outputs) bytes += b;
    } catch {
      // Not a kernel-table operator (a trace name): bytes only.
    }
    const ns = this.peaks.launchNs +
      Math.max((flops / this.peaks.flopsPerS) * 1e9, (bytes / this.peaks.memBytesPerS) * 1e9);
    return Math.round(ns);
  }
  swapCost(bytes: number): number {
    return this.#swap.swapCost(bytes);
  }
}

/**
 * Profiled costs: taken from a recorded trace. A call's cost is the time of the
 * call with the same sequence index if the op matches, else the median time of
 * that op in the trace, else `fallbackNs`.
 */
export class ProfiledCostModel implements CostModel {
  readonly name: string = "profiled";
  readonly measures: boolean = false;
  readonly #byIndex: { op: string; timeNs: number }[];
  readonly #byOp = new Map<string, number>();
  readonly #swap: SwapCost;
  readonly #fallback: number;
  /** A profiled cost model from the recorded `calls` (op and time of each, in sequence order). */
  constructor(
    calls: readonly { op: string; timeNs: number }[],
    options: SwapCostOptions & { fallbackNs?: number } = {},
  ) {
    this.#byIndex = [...calls];
    const groups = new Map<string, number[]>();
    for (const c of calls) {
      let g = groups.get(c.op);
      if (!g) groups.set(c.op, g = []);
      g.push(c.timeNs);
    }
    for (const [op, ts] of groups) {
      ts.sort((a, b) => a - b);
      this.#byOp.set(op, ts[ts.length >> 1]!);
    }
    this.#swap = new SwapCost(options);
    this.#fallback = options.fallbackNs ?? 1;
  }
  callCost(call: CallInfo): number {
    if (call.index !== undefined) {
      const c = this.#byIndex[call.index];
      if (c && c.op === call.op) return c.timeNs;
    }
    return this.#byOp.get(call.op) ?? this.#fallback;
  }
  swapCost(bytes: number): number {
    return this.#swap.swapCost(bytes);
  }
}

/**
 * The clock staleness is measured on: it advances by the cost of every
 * (re)computation and swap, not by wall time, so simulations and live runs
 * given the same costs see the same clock. Starts at 1 like DTR's simulator.
 */
export class Clock {
  /** Current time in cost units (ns). */
  now = 1;
  /** Advances by `ns` (>= 0) and returns the new time. */
  advance(ns: number): number {
    if (ns > 0) this.now += ns;
    return this.now;
  }
}

/**
 * Profiled costs recorded from live warm-up steps, then frozen: while
 * recording, a call costs what was measured for it and the time is kept for
 * its index in the step (the lowest time seen at that index for the same op,
 * so a step slowed by other processes or a late compile counts least); after
 * {@link freeze}, every call costs what the profile says for its index (else
 * the op's median, else `fallbackNs`) whatever is measured, so every
 * decision of the rest of the run rests on the same, fixed costs.
 *
 * @example
 * ```ts
 * import { FrozenProfileCostModel } from "@libra/cost";
 * const m = new FrozenProfileCostModel();
 * m.callCost({ op: "relu", params: [4], index: 0, totalBytes: 16 }, 900);
 * m.callCost({ op: "relu", params: [4], index: 0, totalBytes: 16 }, 700);
 * m.freeze();
 * if (m.callCost({ op: "relu", params: [4], index: 0, totalBytes: 16 }, 5) !== 700) {
 *   throw new Error("the fastest warm-up time, frozen");
 * }
 * ```
 */
export class FrozenProfileCostModel implements CostModel {
  readonly name: string = "profiled";
  readonly #calls: { op: string; timeNs: number }[] = [];
  readonly #options: SwapCostOptions & { fallbackNs?: number };
  readonly #swap: SwapCost;
  #frozen: ProfiledCostModel | null = null;
  /** A cost model that records warm-up times until frozen; `fallbackNs` covers calls never timed. */
  constructor(options: SwapCostOptions & { fallbackNs?: number } = {}) {
    this.#options = options;
    this.#swap = new SwapCost(options);
  }
  /** True once {@link freeze} was called. */
  get frozen(): boolean {
    return this.#frozen !== null;
  }
  /** Measured times matter only while recording. */
  get measures(): boolean {
    return this.#frozen === null;
  }
  /** Calls recorded so far (the profile's length). */
  get recordedCalls(): number {
    return this.#calls.length;
  }
  /** Stops recording: from now on costs come from the profile only. */
  freeze(): void {
    if (this.#frozen !== null) return;
    this.#frozen = new ProfiledCostModel(
      this.#calls.filter((c) => c !== undefined),
      this.#options,
    );
  }
  callCost(call: CallInfo, measuredNs?: number): number {
    if (this.#frozen !== null) return this.#frozen.callCost(call);
    const ok = measuredNs !== undefined && Number.isFinite(measuredNs) && measuredNs >= 0;
    const ns = ok ? measuredNs : this.#options.fallbackNs ?? 1;
    const i = call.index;
    if (ok && i !== undefined && i >= 0 && Number.isInteger(i) && i < 10_000_000) {
      const had = this.#calls[i];
      if (had === undefined || had.op !== call.op) this.#calls[i] = { op: call.op, timeNs: ns };
      else if (ns < had.timeNs) had.timeNs = ns;
    }
    return ns;
  }
  swapCost(bytes: number): number {
    return this.#swap.swapCost(bytes);
  }
}

/** Names of the cost models a live run can use. */
export const LIVE_COST_MODELS = ["analytic", "profiled", "measured"] as const;

/** A cost model of a live run by name (see {@link LIVE_COST_MODELS}). */
export type LiveCostModelName = typeof LIVE_COST_MODELS[number];

/**
 * The cost model named `name` for a live run on `device`: `analytic` (the
 * roofline of the device's peaks: the same decisions on every run),
 * `profiled` (a {@link FrozenProfileCostModel}: the caller freezes it after
 * the warm-up steps) or `measured` (every call priced by its own measured
 * time: decisions follow machine noise).
 *
 * @example
 * ```ts
 * import { liveCostModel } from "@libra/cost";
 * if (liveCostModel("analytic", "cpu").name !== "analytic") throw new Error("analytic");
 * ```
 */
export function liveCostModel(name: string, device: "cpu" | "cuda" = "cpu"): CostModel {
  switch (name) {
    case "analytic":
      return new AnalyticCostModel(device === "cuda" ? DEVICE_PEAKS.h100! : DEVICE_PEAKS.cpu!);
    case "profiled":
      return new FrozenProfileCostModel();
    case "measured":
      return new MeasuredCostModel();
    default:
      throw new RangeError(
        `unknown cost model "${name}" for a live run (choose one of ${
          LIVE_COST_MODELS.join(", ")
        })`,
      );
  }
}
