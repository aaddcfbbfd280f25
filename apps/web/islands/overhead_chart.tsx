/**
 * Island: overhead against budget ratio, one line per policy. The ratio axis grows to
 * the right, as in the bench's SVG plots. Each point is a link to its run and shows
 * its values on hover. Infeasible ratios are marks in a row per policy under the
 * plot, by the reason the run reported: crosses for out of memory (or no reason
 * recorded), triangles for thrashing (stopped at its thrash limit), so that marks of
 * different policies stay apart where they overlap.
 *
 * @module
 */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { plainTick } from "../components/format.ts";
import { island } from "../components/island.tsx";
import { PlotFigure } from "../components/plot_figure.tsx";

/** One point of a curve. */
export interface OverheadPoint {
  /** Budget ratio. */
  ratio: number;
  /** Whether the step fitted. */
  feasible: boolean;
  /** Median overhead, null when infeasible. */
  overhead: number | null;
  /** Why it was infeasible (`out of memory`, `thrashing`), when it was and it is known. */
  reason?: string | null;
  /** Measurements behind the median. */
  n?: number;
  /** The confidence interval of the median over the repeats, and its coverage. */
  low?: number | null;
  high?: number | null;
  confidence?: number | null;
  /** The run to open when the point is clicked. */
  href?: string | null;
}

/** Props. */
export interface OverheadChartProps {
  /** Curves per policy. */
  policies: { policy: string; points: OverheadPoint[] }[];
  /** Caption. */
  caption: string;
}

/** 1-2-5 ticks covering `values` (and 1), for a log axis that stays readable. */
export function logTicks(values: number[]): number[] {
  const lo = Math.min(1, ...values), hi = Math.max(1, ...values);
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const t = Number((m * 10 ** e).toPrecision(3));
      if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
    }
  }
  return out;
}

interface Row {
  policy: string;
  ratio: number;
  overhead: number;
  n: number;
  min: number;
  max: number;
  confidence: number | null;
  href: string | null;
}

/** An infeasible point: drawn under the plot, by its reason. */
interface Bad {
  policy: string;
  ratio: number;
  href: string | null;
  reason: string | null;
}

/** The hover text of an infeasible point. */
export function infeasibleTitle(
  d: { policy: string; ratio: number; reason: string | null },
): string {
  return `${d.policy} at ratio ${d.ratio}: infeasible, ${
    d.reason === "thrashing"
      ? "thrashing (recomputation passed the thrash limit)"
      : d.reason === "out of memory"
      ? "out of memory (the step did not fit)"
      : "the step did not fit"
  }`;
}

function OverheadChartView(p: OverheadChartProps): VNode {
  return (
    <PlotFigure
      id="overhead"
      deps={[p.policies]}
      caption={p.caption}
      draw={(width, document) => {
        const names = p.policies.map((c) => c.policy);
        const ok: Row[] = p.policies.flatMap((c) =>
          c.points.filter((x) => x.feasible && x.overhead !== null).map((x) => ({
            policy: c.policy,
            ratio: x.ratio,
            overhead: x.overhead!,
            n: x.n ?? 1,
            min: x.low ?? x.overhead!,
            max: x.high ?? x.overhead!,
            confidence: x.confidence ?? null,
            href: x.href ?? null,
          }))
        );
        // a policy far slower than the others would flatten them: use a log scale
        const log = ok.length > 0 && Math.max(...ok.map((d) => d.overhead)) > 3;
        const bad: Bad[] = p.policies.flatMap((c) =>
          c.points.filter((x) => !x.feasible).map((x) => ({
            policy: c.policy,
            ratio: x.ratio,
            href: x.href ?? null,
            reason: x.reason ?? null,
          }))
        );
        const ratios = p.policies.flatMap((c) => c.points.map((x) => x.ratio));
        const rowGap = 14;
        const marginBottom = 40 + rowGap * (bad.length ? names.length : 0);
        const label = (d: Row) =>
          `${d.policy} at ratio ${d.ratio}: overhead ${d.overhead.toFixed(3)}${
            d.n > 1 ? `, median of ${d.n} runs (${d.min.toFixed(3)}–${d.max.toFixed(3)})` : ""
          }${d.href ? " · click to open" : ""}`;
        return Plot.plot({
          ...(document ? { document } : {}),
          width,
          height: 360 + marginBottom - 40,
          marginLeft: 64,
          marginBottom,
          x: {
            label: "budget ratio (budget / budget-free peak) →",
            domain: [Math.min(0, ...ratios), 1.02],
            tickFormat: plainTick,
            grid: true,
          },
          y: log
            ? {
              label: "overhead (time / time without budget, log scale)",
              grid: true,
              type: "log",
              ticks: logTicks(ok.flatMap((d) => [d.min, d.max])),
              tickFormat: plainTick,
            }
            : { label: "overhead (time / time without budget)", grid: true, tickFormat: plainTick },
          color: { legend: true, domain: names },
          // triangles mean thrashing and crosses out of memory: policies get the other shapes
          symbol: {
            domain: names,
            range: ["circle", "square", "diamond", "star", "wye", "plus"],
          },
          marks: [
            Plot.ruleY([1], { stroke: "#bbb" }),
            // the confidence interval of the median over the repeats
            Plot.ruleX(ok.filter((d) => d.max > d.min), {
              x: "ratio",
              y1: "min",
              y2: "max",
              stroke: "policy",
              strokeWidth: 2,
              strokeOpacity: 0.6,
              className: "interval",
            }),
            Plot.line(ok, {
              x: "ratio",
              y: "overhead",
              stroke: "policy",
              sort: "ratio",
              z: "policy",
            }),
            Plot.dot(ok, {
              x: "ratio",
              y: "overhead",
              stroke: "policy",
              symbol: "policy",
              fill: "white",
              r: 4.5,
              strokeWidth: 2,
              href: (d: Row) => d.href,
              title: label,
              className: "point",
            }),
            // one row of marks per policy under the frame: they never cover each other;
            // crosses for out of memory, triangles for thrashing (the reason the run reported)
            ...names.flatMap((name, i) =>
              (["infeasible", "thrashing"] as const).map((kind) =>
                Plot.dot(
                  bad.filter((b) =>
                    b.policy === name && (b.reason === "thrashing") === (kind === "thrashing")
                  ),
                  {
                    x: "ratio",
                    frameAnchor: "bottom",
                    dy: 30 + rowGap * i,
                    stroke: "policy",
                    ...(kind === "thrashing" ? { fill: "policy" } : {}),
                    symbol: () => kind === "thrashing" ? "triangle" : "times",
                    r: 5,
                    strokeWidth: 2,
                    href: (d: Bad) => d.href,
                    title: infeasibleTitle,
                    className: kind,
                    clip: false,
                  },
                )
              )
            ),
            Plot.tip(ok, Plot.pointer({ x: "ratio", y: "overhead", title: label })),
          ],
        });
      }}
    />
  );
}

/** The overhead chart island. */
export const OverheadChart: (props: OverheadChartProps) => VNode = island(
  "OverheadChart",
  OverheadChartView,
);
/** The component itself (for the client registry). */
export const component: typeof OverheadChartView = OverheadChartView;
