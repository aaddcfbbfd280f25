/** Island: overhead against budget ratio, one line per policy; infeasible ratios marked. @module */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { island } from "../components/island.tsx";
import { PlotFigure } from "../components/plot_figure.tsx";

/** Props. */
export interface OverheadChartProps {
  /** Curves per policy. */
  policies: {
    policy: string;
    points: { ratio: number; feasible: boolean; overhead: number | null }[];
  }[];
  /** Caption. */
  caption: string;
}

function OverheadChartView(p: OverheadChartProps): VNode {
  return (
    <PlotFigure
      id="overhead"
      deps={[p.policies]}
      caption={p.caption}
      draw={(width, document) => {
        const ok = p.policies.flatMap((c) =>
          c.points.filter((x) => x.feasible && x.overhead !== null).map((x) => ({
            policy: c.policy,
            ratio: x.ratio,
            overhead: x.overhead!,
          }))
        );
        // a policy that thrashes (overhead 10x and more) would flatten the others: use a log scale
        const log = ok.length > 0 && Math.max(...ok.map((d) => d.overhead)) > 3;
        const bad = p.policies.flatMap((c) =>
          c.points.filter((x) => !x.feasible).map((x) => ({ policy: c.policy, ratio: x.ratio }))
        );
        return Plot.plot({
          ...(document ? { document } : {}),
          width,
          height: 340,
          marginLeft: 60,
          x: { label: "budget ratio (budget / budget-free peak)", reverse: true, domain: [0, 1] },
          y: log
            ? { label: "overhead (time / time without budget, log scale)", grid: true, type: "log" }
            : { label: "overhead (time / time without budget)", grid: true },
          color: { legend: true },
          symbol: { legend: false },
          marks: [
            Plot.ruleY([1], { stroke: "#bbb" }),
            Plot.line(ok, {
              x: "ratio",
              y: "overhead",
              stroke: "policy",
              sort: "ratio",
              marker: "circle",
            }),
            Plot.dot(bad, {
              x: "ratio",
              frameAnchor: "bottom",
              dy: -6,
              stroke: "policy",
              symbol: "times",
              r: 5,
            }),
            Plot.tip(ok, Plot.pointer({ x: "ratio", y: "overhead", stroke: "policy" })),
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
