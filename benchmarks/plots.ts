/**
 * SVG plots made with Observable Plot on the server (linkedom supplies the
 * `document`): overhead against budget ratio, one line per policy and one plot
 * per workload; memory over time for chosen runs, with the budget as a
 * horizontal line. Legends are drawn as marks inside the SVG (Plot's own
 * legends are HTML), so every file is a standalone SVG.
 *
 * @module
 */

import * as Plot from "@observablehq/plot";
import { parseHTML } from "linkedom";
import type { PolicySummaryJson, TimelineJson } from "./schema.ts";

const SVG_NS = "http://www.w3.org/2000/svg";

/** Ten distinguishable colours (Observable's "tableau10"), assigned to policies in order. */
const COLORS = [
  "#4e79a7",
  "#f28e2c",
  "#e15759",
  "#76b7b2",
  "#59a14f",
  "#edc949",
  "#af7aa1",
  "#ff9da7",
  "#9c755f",
  "#bab0ab",
];

type PlotDocument = NonNullable<Plot.PlotOptions["document"]>;

/** The part of a DOM element this file uses (the project compiles without the DOM library). */
interface SerializableElement {
  readonly tagName: string;
  readonly outerHTML: string;
  getAttribute(name: string): string | null;
  setAttribute(name: string, value: string): void;
}

/** Colours of timeline markers (drop, remat, swap-in, swap-out, ...). */
const EVENT_COLORS = ["#59a14f", "#af7aa1", "#9c755f", "#f28e2c", "#76b7b2", "#edc949"];

function newDocument(): PlotDocument {
  const { document } = parseHTML("<!doctype html><html><body></body></html>") as unknown as {
    document: PlotDocument;
  };
  return document;
}

function serialize(plotted: unknown): string {
  const node = plotted as SerializableElement;
  if (node.tagName.toLowerCase() !== "svg") {
    throw new Error(
      `plots: Plot returned <${node.tagName}> instead of <svg> (no HTML legends or titles here)`,
    );
  }
  node.setAttribute("xmlns", SVG_NS);
  // A white background, so viewers with dark themes still show the axes.
  node.setAttribute(
    "style",
    `${node.getAttribute("style") ?? ""};background:white`.replace(/^;/, ""),
  );
  return `<?xml version="1.0" encoding="UTF-8"?>\n${node.outerHTML}\n`;
}

/** Bytes in binary units for axis ticks. */
function tickBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${Number(v.toPrecision(3))} ${units[u]}`;
}

function legend(items: readonly { label: string; color: string }[]): Plot.Markish[] {
  return items.map((it, i) =>
    Plot.text([it.label], {
      frameAnchor: "top-right",
      dx: 12,
      dy: 4 + 16 * i,
      text: (d: string) => `\u2014 ${d}`,
      fill: it.color,
      textAnchor: "start",
      fontWeight: "bold",
      fontSize: 11,
    })
  );
}

function title(text: string): Plot.Markish {
  return Plot.text([text], {
    frameAnchor: "top-left",
    dx: -50,
    dy: -30,
    text: (d: string) => d,
    textAnchor: "start",
    fontSize: 13,
    fontWeight: "bold",
  });
}

/**
 * Overhead against budget ratio for one workload: one line per policy through
 * its feasible points, a dot per point, a cross at ratios where it was infeasible.
 */
export function overheadPlot(workload: string, summaries: readonly PolicySummaryJson[]): string {
  const mine = summaries.filter((s) => s.workload === workload);
  if (mine.length === 0) throw new Error(`overheadPlot: no results for workload "${workload}"`);
  const policies = mine.map((s) => s.policy);
  const color = (p: string) => COLORS[policies.indexOf(p) % COLORS.length]!;
  const points = mine.flatMap((s) =>
    s.curve.filter((c) => c.feasible && c.overhead !== null).map((c) => ({
      policy: s.policy,
      ratio: c.ratio,
      overhead: c.overhead!,
    }))
  );
  const infeasible = mine.flatMap((s) =>
    s.curve.filter((c) => !c.feasible).map((c) => ({ policy: s.policy, ratio: c.ratio }))
  );
  const maxOverhead = Math.max(1.05, ...points.map((p) => p.overhead));
  const allRatios = mine.flatMap((s) => s.curve.map((c) => c.ratio));
  const svg = Plot.plot({
    document: newDocument(),
    width: 760,
    height: 400,
    marginTop: 40,
    marginLeft: 60,
    marginRight: 140,
    x: {
      label: "budget ratio (budget / budget-free peak) \u2192",
      domain: [Math.min(0, ...allRatios), 1.02],
      grid: true,
    },
    y: {
      label: "overhead (time / budget-free time)",
      labelAnchor: "center",
      domain: [Math.min(1, ...points.map((p) => p.overhead)) * 0.98, maxOverhead * 1.05],
      grid: true,
    },
    color: { domain: policies, range: policies.map(color) },
    marks: [
      title(`Overhead vs budget: ${workload}`),
      Plot.ruleY([1], { stroke: "#888", strokeDasharray: "2,3" }),
      ...policies.map((p) =>
        Plot.line(points.filter((q) => q.policy === p).sort((a, b) => a.ratio - b.ratio), {
          x: "ratio",
          y: "overhead",
          stroke: color(p),
          strokeWidth: 2,
          // the optimum (or a bound of it) is dashed
          ...(p.startsWith("optimal") ? { strokeDasharray: "6,3" } : {}),
          ariaDescription: `policy ${p}`,
        })
      ),
      Plot.dot(points, {
        x: "ratio",
        y: "overhead",
        fill: "policy",
        r: 3,
        ariaDescription: "feasible point",
      }),
      Plot.dot(infeasible, {
        x: "ratio",
        y: () => maxOverhead * 1.02,
        stroke: "policy",
        symbol: "times",
        r: 4,
        ariaDescription: "infeasible point",
      }),
      ...legend(policies.map((p) => ({ label: p, color: color(p) }))),
      // Below the legend, in the right margin, where no data point can hide it.
      Plot.text(["\u00d7 infeasible"], {
        frameAnchor: "top-right",
        dx: 12,
        dy: 4 + 16 * policies.length + 8,
        text: (d: string) => d,
        textAnchor: "start",
        fill: "#555",
      }),
    ],
  });
  return serialize(svg);
}

/** Memory in use after each kernel call of one run, with the budget as a horizontal line. */
export function memoryPlot(t: TimelineJson, baselinePeakBytes?: number): string {
  if (t.points.length === 0) {
    throw new Error(`memoryPlot: the timeline of ${t.workload} ${t.policy}@${t.ratio} is empty`);
  }
  const maxBytes = Math.max(t.budgetBytes, baselinePeakBytes ?? 0, ...t.points.map((p) => p.bytes));
  const kinds = [...new Set(t.events.map((e) => e.kind))].sort();
  // Marker colours avoid the memory line's blue and the budget's red.
  const eventColor = (k: string) => EVENT_COLORS[kinds.indexOf(k) % EVENT_COLORS.length]!;
  const marks: Plot.Markish[] = [
    title(`Memory over time: ${t.workload}, ${t.policy} at ratio ${t.ratio}`),
    Plot.areaY(t.points, {
      x: "call",
      y: "bytes",
      fill: COLORS[0]!,
      fillOpacity: 0.15,
      curve: "step-after",
    }),
    Plot.lineY(t.points, {
      x: "call",
      y: "bytes",
      stroke: COLORS[0]!,
      curve: "step-after",
      ariaDescription: "memory in use",
    }),
    Plot.ruleY([t.budgetBytes], {
      stroke: "#d62728",
      strokeWidth: 2,
      strokeDasharray: "6,3",
      ariaDescription: "budget",
    }),
    Plot.text([t.budgetBytes], {
      x: () => t.points[0]!.call,
      y: (d: number) => d,
      text: (d: number) => `budget ${tickBytes(d)}`,
      dy: -7,
      textAnchor: "start",
      fill: "#d62728",
    }),
  ];
  const items = [{ label: "memory in use", color: COLORS[0]! }, {
    label: "budget",
    color: "#d62728",
  }];
  if (baselinePeakBytes !== undefined) {
    marks.push(
      Plot.ruleY([baselinePeakBytes], {
        stroke: "#888",
        strokeDasharray: "2,3",
        ariaDescription: "budget-free peak",
      }),
    );
    items.push({ label: "budget-free peak", color: "#888" });
  }
  for (const k of kinds) {
    marks.push(Plot.ruleX(t.events.filter((e) => e.kind === k), {
      x: "call",
      y1: 0,
      y2: maxBytes * 0.04 * (1 + kinds.indexOf(k)),
      stroke: eventColor(k),
      strokeOpacity: 0.6,
      ariaDescription: `event ${k}`,
    }));
    items.push({ label: k, color: eventColor(k) });
  }
  marks.push(...legend(items));
  const svg = Plot.plot({
    document: newDocument(),
    width: 820,
    height: 360,
    marginTop: 40,
    marginLeft: 80,
    marginRight: 150,
    x: { label: "kernel call \u2192" },
    y: {
      label: "memory in use",
      labelAnchor: "center",
      domain: [0, maxBytes * 1.12],
      tickFormat: tickBytes,
      grid: true,
    },
    marks,
  });
  return serialize(svg);
}

/** A file-name-safe form of a label. */
export function slug(label: string): string {
  return label.replace(/[^A-Za-z0-9.-]+/g, "_").replace(/^_+|_+$/g, "");
}
