/**
 * Island: memory in use over time with the budget as a line. With few events every
 * eviction and re-materialization is a dot; with many, the server aggregates per step
 * (see `components/memory_view.ts`): a band from the lowest to the highest memory of
 * each step and stacked bars of its events, every event counted. Clicking a step
 * zooms into it (`?step=N`, a permalink).
 *
 * @module
 */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { plainTick } from "../components/format.ts";
import { island } from "../components/island.tsx";
import { memoryCaption, type MemoryView } from "../components/memory_view.ts";
import { PlotFigure } from "../components/plot_figure.tsx";

/** Props: the server-computed view of the run's timeline. */
export interface MemoryChartProps {
  /** What to draw. */
  view: MemoryView;
}

/** A unit that keeps the budget between 1 and 1024 of it. */
export function byteUnit(bytes: number): [string, number] {
  if (bytes >= 1024 ** 3) return ["GiB", 1024 ** 3];
  if (bytes >= 1024 ** 2) return ["MiB", 1024 ** 2];
  if (bytes >= 1024) return ["KiB", 1024];
  return ["B", 1];
}

const COLORS = { domain: ["evict", "re-materialize"], range: ["#e8850c", "#2f6fdb"] };

function budgetMarks(budget: number) {
  return [
    Plot.ruleY([budget], { stroke: "#d62728", strokeWidth: 2, strokeDasharray: "6,4" }),
    Plot.text([budget], {
      y: (d: number) => d,
      frameAnchor: "right",
      text: () => "budget",
      dy: -8,
      fill: "#d62728",
    }),
  ];
}

function drawEvents(v: MemoryView, width: number, scale: number, unit: string, doc?: Document) {
  const data = v.samples.map(([t, b]) => ({ t, v: b / scale }));
  const marks = v.markers.map((m) => ({ t: m.t, v: m.bytes / scale, kind: m.kind }));
  return Plot.plot({
    ...(doc ? { document: doc } : {}),
    width,
    height: 320,
    marginLeft: 60,
    x: {
      label: v.unit === "call" ? "kernel call" : v.unit,
      ...(v.zoom ? { domain: [v.zoom.from, v.zoom.to - 1] } : {}),
      tickFormat: plainTick,
    },
    y: { label: `${unit} in use`, grid: true, zero: true, tickFormat: plainTick },
    color: { ...COLORS, legend: true },
    marks: [
      Plot.areaY(data, { x: "t", y: "v", fill: "#7a5cc6", fillOpacity: 0.15, curve: "step-after" }),
      Plot.lineY(data, { x: "t", y: "v", stroke: "#5b3fa8", curve: "step-after" }),
      Plot.dot(marks, {
        x: "t",
        y: "v",
        stroke: "kind",
        r: 3.5,
        strokeWidth: 1.5,
        title: (d: { t: number; v: number; kind: string }) =>
          `${d.kind} at ${v.unit} ${d.t}: ${d.v.toFixed(2)} ${unit} in use after`,
      }),
      ...budgetMarks(v.budgetBytes / scale),
    ],
  });
}

interface BinRow {
  x1: number;
  x2: number;
  index: number;
  min: number;
  max: number;
}

function drawBins(v: MemoryView, width: number, scale: number, unit: string, doc?: Document) {
  const d = doc ?? document;
  const step = v.binUnit === "step";
  // steps are numbered from 1 on the axis; windows keep the timeline's unit
  const x1 = (b: MemoryView["bins"][number]) => (step ? b.index + 0.5 : b.from);
  const x2 = (b: MemoryView["bins"][number]) => (step ? b.index + 1.5 : b.to);
  const label = step ? "step" : v.unit === "call" ? "kernel call" : v.unit;
  const rows: BinRow[] = v.bins.filter((b) => b.max !== null).map((b) => ({
    x1: x1(b),
    x2: x2(b),
    index: b.index,
    min: b.min! / scale,
    max: b.max! / scale,
  }));
  const name = (i: number) => `${v.binUnit} ${i + 1}`;
  const band = Plot.plot({
    ...(doc ? { document: doc } : {}),
    width,
    height: 260,
    marginLeft: 60,
    x: { label, tickFormat: plainTick },
    y: { label: `${unit} in use`, grid: true, zero: true, tickFormat: plainTick },
    marks: [
      Plot.rectY(rows, {
        x1: "x1",
        x2: "x2",
        y1: "min",
        y2: "max",
        fill: "#7a5cc6",
        fillOpacity: 0.3,
        title: (r: BinRow) =>
          `${name(r.index)}: ${r.min.toFixed(2)}–${r.max.toFixed(2)} ${unit} in use`,
      }),
      Plot.lineY(rows, { x: (r: BinRow) => (r.x1 + r.x2) / 2, y: "max", stroke: "#5b3fa8" }),
      ...budgetMarks(v.budgetBytes / scale),
    ],
  });
  const events = v.bins.flatMap((b) => [
    { x1: x1(b), x2: x2(b), index: b.index, count: b.evictions, kind: "evict", b },
    { x1: x1(b), x2: x2(b), index: b.index, count: b.remats, kind: "re-materialize", b },
  ]);
  const bars = Plot.plot({
    ...(doc ? { document: doc } : {}),
    width,
    height: 180,
    marginLeft: 60,
    x: { label, tickFormat: plainTick },
    y: { label: `events per ${v.binUnit}`, grid: true },
    color: COLORS,
    marks: [
      Plot.rectY(events, {
        x1: "x1",
        x2: "x2",
        y: "count",
        fill: "kind",
        inset: v.bins.length > 150 ? 0 : 0.5,
        title: (e: (typeof events)[number]) =>
          `${name(e.index)}: ${e.b.evictions} evictions, ${e.b.remats} re-materializations`,
      }),
      Plot.ruleY([0]),
    ],
  });
  const box = d.createElement("div");
  box.setAttribute("class", "plot-stack");
  band.setAttribute("data-part", "band");
  bars.setAttribute("data-part", "events");
  // the legend apart, so that both charts are plain svgs of the same width, aligned
  const legend = Plot.legend({ ...(doc ? { document: doc } : {}), color: COLORS });
  box.append(band, legend, bars);
  if (step && typeof location !== "undefined") {
    for (const part of [band, bars]) {
      part.addEventListener("click", (ev) => {
        const svg = (ev.target as Element).closest("svg");
        const sc = (part as unknown as { scale(n: string): { invert?(x: number): number } })
          .scale("x");
        if (!svg || !sc.invert) return;
        // the svg may be drawn scaled (CSS max-width): back to its own coordinates
        const r = svg.getBoundingClientRect();
        const own = Number(svg.getAttribute("width")) || r.width;
        const x = ((ev as MouseEvent).clientX - r.left) * own / r.width;
        const s = Math.round(sc.invert(x));
        if (s < 1 || s > v.bins.length) return;
        const q = new URLSearchParams(location.search);
        q.set("step", String(s));
        location.assign(`?${q}#memory`);
      });
    }
  }
  return box;
}

function MemoryChartView(p: MemoryChartProps): VNode {
  const v = p.view;
  const [unit, scale] = byteUnit(v.budgetBytes);
  return (
    <PlotFigure
      id="memory"
      deps={[v]}
      caption={memoryCaption(v, unit, scale)}
      draw={(width, document) =>
        v.mode === "events"
          ? drawEvents(v, width, scale, unit, document)
          : drawBins(v, width, scale, unit, document)}
    />
  );
}

/** The memory chart island. */
export const MemoryChart: (props: MemoryChartProps) => VNode = island(
  "MemoryChart",
  MemoryChartView,
);
/** The component itself (for the client registry). */
export const component: typeof MemoryChartView = MemoryChartView;
