/** Island: memory in use over time, the budget as a line, eviction/re-materialization marks. @module */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { island } from "../components/island.tsx";
import { PlotFigure } from "../components/plot_figure.tsx";

/** Props (a timeline, already thinned by the server). */
export interface MemoryChartProps {
  /** `[t, bytes]`. */
  samples: [number, number][];
  /** Budget in bytes. */
  budgetBytes: number;
  /** What t counts. */
  unit: string;
  /** Evictions and re-materializations. */
  markers: { t: number; kind: string; bytes: number }[];
}

/** A unit that keeps the budget between 1 and 1024 of it. */
export function byteUnit(bytes: number): [string, number] {
  if (bytes >= 1024 ** 3) return ["GiB", 1024 ** 3];
  if (bytes >= 1024 ** 2) return ["MiB", 1024 ** 2];
  if (bytes >= 1024) return ["KiB", 1024];
  return ["B", 1];
}

function MemoryChartView(p: MemoryChartProps): VNode {
  const evictions = p.markers.filter((m) => m.kind !== "remat" && m.kind !== "swap-in").length;
  const remats = p.markers.length - evictions;
  const [unit, scale] = byteUnit(p.budgetBytes);
  return (
    <PlotFigure
      id="memory"
      deps={[p.samples, p.budgetBytes]}
      caption={`Memory in use (${unit}) per ${p.unit}; red line: budget ${
        (p.budgetBytes / scale).toFixed(2)
      } ${unit}; dots: ${evictions} evictions (orange), ${remats} re-materializations (blue)`}
      draw={(width, document) => {
        const data = p.samples.map(([t, b]) => ({ t, v: b / scale }));
        const marks = p.markers.map((m) => ({
          t: m.t,
          v: m.bytes / scale,
          kind: m.kind === "remat" || m.kind === "swap-in" ? "re-materialize" : "evict",
        }));
        return Plot.plot({
          ...(document ? { document } : {}),
          width,
          height: 320,
          marginLeft: 60,
          x: { label: p.unit === "call" ? "kernel call" : p.unit },
          y: { label: `${unit} in use`, grid: true, zero: true },
          color: {
            domain: ["evict", "re-materialize"],
            range: ["#e8850c", "#2f6fdb"],
            legend: true,
          },
          marks: [
            Plot.areaY(data, {
              x: "t",
              y: "v",
              fill: "#7a5cc6",
              fillOpacity: 0.15,
              curve: "step-after",
            }),
            Plot.lineY(data, { x: "t", y: "v", stroke: "#5b3fa8", curve: "step-after" }),
            Plot.dot(marks, { x: "t", y: "v", stroke: "kind", r: 3.5, strokeWidth: 1.5 }),
            Plot.ruleY([p.budgetBytes / scale], {
              stroke: "#d62728",
              strokeWidth: 2,
              strokeDasharray: "6,4",
            }),
            Plot.text([p.budgetBytes / scale], {
              y: (d: number) => d,
              frameAnchor: "right",
              text: () => "budget",
              dy: -8,
              fill: "#d62728",
            }),
          ],
        });
      }}
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
