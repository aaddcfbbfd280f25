/**
 * What the memory chart draws, computed on the server from a run's stored timeline:
 * every event individually when there are few, otherwise per-step (or per-window)
 * bands of memory in use and counts of evictions and re-materializations per step.
 * Every stored event is counted in exactly one bin; the totals are compared with the
 * runtime's own counters so that a timeline which kept fewer events than the run made
 * says so instead of under-reporting.
 *
 * @module
 */

import { thinSamples } from "@libra/util/stats";

/** A run's stored memory timeline (`MemoryTimeline` of `@libra/api`; not imported, as this
 * module is bundled for the browser). */
export interface MemoryTimeline {
  budgetBytes: number;
  unit: string;
  samples: [number, number][];
  markers: {
    t: number;
    kind: "evict" | "drop" | "swap-out" | "swap-in" | "remat";
    bytes: number;
  }[];
}

/** Event markers drawn one by one at most; above this the chart aggregates per step. */
export const MAX_DOTS = 2000;
/** Memory samples drawn at most (peaks kept). */
export const MAX_LINE_SAMPLES = 1500;
/** Windows used when the run's steps are unknown (trace replays, bench uploads). */
export const WINDOWS = 100;

/** One step (or window) of the aggregated chart. */
export interface MemoryBin {
  /** Step index (0-based), or window index. */
  index: number;
  /** First timeline position in it. */
  from: number;
  /** One past the last timeline position in it. */
  to: number;
  /** Lowest stored memory sample in it, bytes (null when it holds no sample). */
  min: number | null;
  /** Highest stored memory sample in it, bytes. */
  max: number | null;
  /** Evictions (drops, swap-outs) in it. */
  evictions: number;
  /** Re-materializations (recomputes, swap-ins) in it. */
  remats: number;
}

/** The chart's input: either every event, or bins. */
export interface MemoryView {
  /** `events`: every stored event is a dot; `bins`: bands and counts per bin. */
  mode: "events" | "bins";
  /** What a bin is: a training `step`, or a `window` of equal length. */
  binUnit: "step" | "window";
  /** What t counts (`call`). */
  unit: string;
  /** Budget in bytes. */
  budgetBytes: number;
  /** In `events` mode: `[t, bytes]`, thinned to at most {@link MAX_LINE_SAMPLES} (peaks kept). */
  samples: [number, number][];
  /** In `events` mode: every stored event in the range. */
  markers: { t: number; kind: "evict" | "re-materialize"; bytes: number }[];
  /** In `bins` mode: the bins. */
  bins: MemoryBin[];
  /** Events in the range shown (every one counted). */
  shown: { evictions: number; remats: number };
  /** The run's totals from the runtime's counters, when it reported them. */
  totals: { evictions: number; remats: number } | null;
  /** Events the stored timeline holds for the whole run. */
  stored: { evictions: number; remats: number };
  /** Stored memory samples and the calls they summarize (whole run). */
  storedSamples: number;
  /** Calls the run made under the budget, when known. */
  calls: number | null;
  /** Training steps under the budget, when known. */
  steps: number | null;
  /** The step zoomed into, with its timeline range; null for the whole run. */
  zoom: { step: number; from: number; to: number } | null;
}

const isRemat = (kind: string) => kind === "remat" || kind === "swap-in";

function totalsOf(stats: Record<string, number>): MemoryView["totals"] {
  const n = (k: string) => (typeof stats[k] === "number" ? stats[k]! : null);
  const drops = n("drops"), swapOuts = n("swapOuts"), remats = n("remats"), swapIns = n("swapIns");
  if (drops !== null && remats !== null) {
    return { evictions: drops + (swapOuts ?? 0), remats: remats + (swapIns ?? 0) };
  }
  const ev = n("evictions");
  if (ev !== null && remats !== null) return { evictions: ev, remats };
  return null;
}

/** Timeline range of step `s` (0-based) when a step makes `perStep` calls. */
export function stepRange(s: number, perStep: number): { from: number; to: number } {
  return { from: Math.round(s * perStep), to: Math.round((s + 1) * perStep) };
}

/**
 * Builds the chart's view of `memory`. `stats` are the run's statistics (`calls`,
 * `steps`, `drops`, `remats`, ...); `step` zooms into one training step.
 */
export function memoryView(
  memory: MemoryTimeline,
  stats: Record<string, number>,
  opts: { step?: number | null; maxDots?: number } = {},
): MemoryView {
  const maxDots = opts.maxDots ?? MAX_DOTS;
  const samples = memory.samples;
  const markers = memory.markers;
  const lastT = Math.max(
    samples.length ? samples[samples.length - 1]![0] : 0,
    markers.length ? markers[markers.length - 1]!.t : 0,
  );
  const calls = typeof stats.calls === "number" && stats.calls > 0 ? stats.calls : null;
  const steps = typeof stats.steps === "number" && stats.steps > 0 ? stats.steps : null;
  const span = Math.max(calls ?? 0, lastT + 1);
  // steps bin the timeline only when it spans them (at least one call per step)
  const perStep = steps !== null && span / steps >= 1 ? span / steps : null;
  let stored = { evictions: 0, remats: 0 };
  for (const m of markers) {
    if (isRemat(m.kind)) stored.remats++;
    else stored.evictions++;
  }
  stored = { ...stored };

  let zoom: MemoryView["zoom"] = null;
  let from = 0, to = span;
  if (opts.step !== undefined && opts.step !== null && perStep !== null) {
    const s = Math.min(Math.max(0, Math.floor(opts.step)), steps! - 1);
    ({ from, to } = stepRange(s, perStep));
    zoom = { step: s, from, to };
  }
  const inRange = (t: number) => t >= from && t < to;
  const rangeMarkers = zoom ? markers.filter((m) => inRange(m.t)) : markers;
  const rangeSamples = zoom ? samples.filter(([t]) => inRange(t)) : samples;
  const shown = { evictions: 0, remats: 0 };
  for (const m of rangeMarkers) {
    if (isRemat(m.kind)) shown.remats++;
    else shown.evictions++;
  }
  const base = {
    unit: memory.unit,
    budgetBytes: memory.budgetBytes,
    shown,
    totals: totalsOf(stats),
    stored,
    storedSamples: samples.length,
    calls,
    steps,
    zoom,
  };
  if (rangeMarkers.length <= maxDots) {
    return {
      ...base,
      mode: "events",
      binUnit: perStep !== null ? "step" : "window",
      samples: thinSamples(rangeSamples, MAX_LINE_SAMPLES),
      markers: rangeMarkers.map((m) => ({
        t: m.t,
        kind: isRemat(m.kind) ? "re-materialize" : "evict",
        bytes: m.bytes,
      })),
      bins: [],
    };
  }
  // bins: the run's steps, or equal windows (also inside a zoomed step that is too busy)
  const byStep = perStep !== null && zoom === null;
  const n = byStep ? steps! : WINDOWS;
  const width = byStep ? perStep! : (to - from) / n;
  const bins: MemoryBin[] = [];
  for (let i = 0; i < n; i++) {
    const r = byStep ? stepRange(i, width) : {
      from: from + Math.round(i * width),
      to: i === n - 1 ? to : from + Math.round((i + 1) * width),
    };
    bins.push({ index: i, ...r, min: null, max: null, evictions: 0, remats: 0 });
  }
  const binOf = (t: number) => {
    let i = Math.min(n - 1, Math.max(0, Math.floor((t - from) / width)));
    // rounding of the edges: move to the bin whose [from, to) holds t
    while (i > 0 && t < bins[i]!.from) i--;
    while (i < n - 1 && t >= bins[i]!.to) i++;
    return bins[i]!;
  };
  for (const [t, b] of rangeSamples) {
    const bin = binOf(t);
    bin.min = bin.min === null ? b : Math.min(bin.min, b);
    bin.max = bin.max === null ? b : Math.max(bin.max, b);
  }
  for (const m of rangeMarkers) {
    const bin = binOf(m.t);
    if (isRemat(m.kind)) bin.remats++;
    else bin.evictions++;
  }
  return {
    ...base,
    mode: "bins",
    binUnit: byStep ? "step" : "window",
    samples: [],
    markers: [],
    bins,
  };
}

/** The caption: what is drawn, how it was aggregated, and the true counts. */
export function memoryCaption(v: MemoryView, unitName: string, scale: number): string {
  const fmt = (n: number) => n.toLocaleString("en-US");
  const parts: string[] = [];
  const where = v.zoom
    ? `step ${v.zoom.step + 1} of ${v.steps} (${v.unit}s ${fmt(v.zoom.from)}–${fmt(v.zoom.to - 1)})`
    : v.steps !== null && v.binUnit === "step"
    ? `all ${fmt(v.steps)} steps${v.calls !== null ? ` (${fmt(v.calls)} ${v.unit}s)` : ""}`
    : `the whole run${v.calls !== null ? ` (${fmt(v.calls)} ${v.unit}s)` : ""}`;
  parts.push(
    `Memory in use (${unitName}) over ${where}; red dashed line: budget ${
      (v.budgetBytes / scale).toFixed(2)
    } ${unitName}.`,
  );
  const counts = `${fmt(v.shown.evictions)} evictions and ${
    fmt(v.shown.remats)
  } re-materializations`;
  if (v.mode === "events") {
    parts.push(`Dots: all ${counts} (orange: eviction, blue: re-materialization).`);
  } else {
    parts.push(
      `Too many events to draw one by one: shaded band = lowest to highest memory per ${v.binUnit}, bars below = events per ${v.binUnit}; all ${counts} are counted.`,
    );
    parts.push(
      v.binUnit === "step" ? "Click a step, or pick one below, to see its events." : "",
    );
  }
  if (v.storedSamples > 0 && v.calls !== null && v.storedSamples < v.calls) {
    parts.push(
      `The timeline keeps ${fmt(v.storedSamples)} samples of ${
        fmt(v.calls)
      } ${v.unit}s (the peak of each stretch).`,
    );
  }
  if (v.totals) {
    const missing = v.totals.evictions - v.stored.evictions + v.totals.remats - v.stored.remats;
    if (missing > 0) {
      parts.push(
        `The run made ${fmt(v.totals.evictions)} evictions and ${
          fmt(v.totals.remats)
        } re-materializations; its stored timeline holds ${fmt(v.stored.evictions)} and ${
          fmt(v.stored.remats)
        } (the rest were not recorded), so the chart shows only those.`,
      );
    }
  }
  return parts.filter((p) => p).join(" ");
}
