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
 * The `CostModel` contract (DESIGN.md): the cost of (re)computing a call and of
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
  /** The device peaks used. */
  readonly peaks: DevicePeaks;
  readonly #swap: SwapCost;
  readonly #cache = new Map<string, number>();
  constructor(peaks: DevicePeaks = DEVICE_PEAKS.cpu!, swap: SwapCostOptions = {}) {
    this.peaks = peaks;
    this.#swap = new SwapCost(swap);
  }
  callCost(call: CallInfo): number {
    const key = call.op + ":" + call.params.join(",");
    const hit = this.#cache.get(key);
    if (hit !== undefined) return hit;
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
    const r = Math.round(ns);
    if (this.#cache.size < 100_000) this.#cache.set(key, r);
    return r;
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
  readonly #byIndex: { op: string; timeNs: number }[];
  readonly #byOp = new Map<string, number>();
  readonly #swap: SwapCost;
  readonly #fallback: number;
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
