/**
 * The copy engine: swaps as on a GPU with asynchronous copies. Swap-outs and
 * swap-ins are serialized on one copy stream at a link bandwidth and overlap
 * the compute stream; compute waits only for a copy it needs (a swapped-in
 * tensor not yet back, or memory a swap-out still holds). Overhead =
 * makespan / budget-free compute, where the makespan is the compute stream's
 * time, waits included.
 *
 * The {@link Engine} drives one per run when given a link; a planner can drive
 * its own to ask how much of a swap is hidden (see {@link hiddenSwap}).
 *
 * @module
 */

/** Named links and their effective bandwidths, GB/s (1 GB/s = 1 byte/ns). */
export const LINKS: Readonly<Record<string, number>> = {
  pcie4: 25,
  pcie5: 55,
  "nvlink-c2c": 450,
};

/** A link: a name of {@link LINKS} or a bandwidth in GB/s. */
export type Link = string | number;

/** The default link (PCIe 5 x16, 55 GB/s effective). */
export const DEFAULT_LINK = "pcie5";

/**
 * Parses a link: a name of {@link LINKS}, or a positive bandwidth in GB/s (a
 * number, or a string such as `"32"`). Throws a RangeError naming the choices.
 */
export function linkBandwidth(link: Link): number {
  if (typeof link === "number") {
    if (link > 0 && Number.isFinite(link)) return link;
    throw new RangeError(`link bandwidth must be a positive number of GB/s, got ${link}`);
  }
  const named = LINKS[link];
  if (named !== undefined) return named;
  const n = Number(link);
  if (link.trim() !== "" && n > 0 && Number.isFinite(n)) return n;
  throw new RangeError(
    `unknown link "${link}" (links: ${
      Object.keys(LINKS).map((k) => `${k} (${LINKS[k]} GB/s)`).join(", ")
    }, or a bandwidth in GB/s)`,
  );
}

/** One copy on the stream. */
export interface CopyWindow {
  /** When the copy starts (the stream was free and it was issued), ns. */
  startNs: number;
  /** When it ends, ns. */
  endNs: number;
}

/** A timeline of one compute stream and one copy stream. Times in ns from 0. */
export class CopyEngine {
  /** Link bandwidth, GB/s (bytes per ns). */
  readonly gbps: number;
  /** Compute stream time: where the next kernel starts. */
  now = 0;
  /** When the copy stream is idle again. */
  copyFreeNs = 0;
  /** Total time the compute stream waited on copies. */
  stallNs = 0;
  /** Total time the copy stream was busy. */
  copyNs = 0;
  /** Swap-outs in flight: their end times (non-decreasing) and the bytes they hold until then. */
  readonly #outEnds: number[] = [];
  readonly #outBytes: number[] = [];
  #outHead = 0;

  /** A copy engine for `link` (a name of {@link LINKS} or GB/s; default pcie5). */
  constructor(link: Link = DEFAULT_LINK) {
    this.gbps = linkBandwidth(link);
  }

  /** Time to copy `bytes` over the link, ns. */
  durationNs(bytes: number): number {
    return bytes / this.gbps;
  }

  /** Runs `ns` of compute on the compute stream. */
  compute(ns: number): void {
    this.now += ns;
  }

  #issue(bytes: number): CopyWindow {
    const startNs = Math.max(this.now, this.copyFreeNs);
    const d = this.durationNs(bytes);
    const endNs = startNs + d;
    this.copyFreeNs = endNs;
    this.copyNs += d;
    return { startNs, endNs };
  }

  /**
   * Issues a swap-out of `bytes` now (it starts when the stream is free). The
   * device memory stays held until it ends ({@link waitForMemory}).
   */
  swapOut(bytes: number): CopyWindow {
    const w = this.#issue(bytes);
    this.#outEnds.push(w.endNs);
    this.#outBytes.push(bytes);
    return w;
  }

  /** Issues a swap-in of `bytes` now; whoever reads it waits until `endNs` ({@link waitUntil}). */
  swapIn(bytes: number): CopyWindow {
    return this.#issue(bytes);
  }

  /** The compute stream waits until `t` (no-op when it is already later); returns the wait. */
  waitUntil(t: number): number {
    if (t <= this.now) return 0;
    const w = t - this.now;
    this.now = t;
    this.stallNs += w;
    return w;
  }

  /** Bytes still held by swap-outs in flight now. */
  heldBytes(): number {
    this.#retire();
    let b = 0;
    for (let i = this.#outHead; i < this.#outBytes.length; i++) b += this.#outBytes[i]!;
    return b;
  }

  /**
   * Waits until swap-outs in flight have released at least `bytes` (the
   * memory a call needs that they still hold); returns the wait.
   */
  waitForMemory(bytes: number): number {
    if (bytes <= 0) return 0;
    this.#retire();
    let freed = 0;
    for (let i = this.#outHead; i < this.#outEnds.length; i++) {
      freed += this.#outBytes[i]!;
      if (freed >= bytes) return this.waitUntil(this.#outEnds[i]!);
    }
    return this.waitUntil(this.copyFreeNs);
  }

  #retire(): void {
    const ends = this.#outEnds;
    while (this.#outHead < ends.length && ends[this.#outHead]! <= this.now) this.#outHead++;
    if (this.#outHead > 64 && this.#outHead * 2 > ends.length) {
      ends.splice(0, this.#outHead);
      this.#outBytes.splice(0, this.#outHead);
      this.#outHead = 0;
    }
  }
}

/** How much of a swap round trip the compute around it hides (see {@link hiddenSwap}). */
export interface HiddenSwap {
  /** Copy time of the round trip (out + in), ns. */
  copyNs: number;
  /** Of which overlapped with compute, ns. */
  hiddenNs: number;
  /** Of which compute waits for, ns (copyNs - hiddenNs when nothing else queues). */
  stallNs: number;
}

/**
 * How much of swapping `bytes` out and back in is hidden behind compute, on an
 * otherwise idle copy stream: the swap-out starts right after the producing
 * call and overlaps the `outOverlapNs` of compute before the memory is needed
 * (0 when the memory is needed at once); the swap-in is issued `inLeadNs` of
 * compute before the consumer (0: issued on demand). `busyNs`: the copy stream
 * is still busy that long when the swap-out is issued.
 *
 * @example
 * ```ts
 * import { hiddenSwap } from "@libra/runtime";
 * // 55 MB over PCIe 5 (1 ms each way), 3 ms of compute before memory is needed
 * // and the swap-in prefetched 0.5 ms ahead: out hidden, 0.5 ms of the in waited for.
 * const h = hiddenSwap(55e6, { link: "pcie5", outOverlapNs: 3e6, inLeadNs: 0.5e6 });
 * if (h.stallNs !== 0.5e6) throw new Error(String(h.stallNs));
 * ```
 */
export function hiddenSwap(
  bytes: number,
  options: { link?: Link; outOverlapNs?: number; inLeadNs?: number; busyNs?: number } = {},
): HiddenSwap {
  const ce = new CopyEngine(options.link ?? DEFAULT_LINK);
  ce.copyFreeNs = options.busyNs ?? 0;
  ce.swapOut(bytes);
  ce.compute(options.outOverlapNs ?? 0);
  ce.waitForMemory(bytes);
  const lead = options.inLeadNs ?? 0;
  const w = ce.swapIn(bytes);
  ce.compute(lead);
  ce.waitUntil(w.endNs);
  const copyNs = 2 * ce.durationNs(bytes);
  return { copyNs, hiddenNs: copyNs - ce.stallNs, stallNs: ce.stallNs };
}
