/** Island: the loss per step, with the budget-free run's losses for comparison. @module */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { island } from "../components/island.tsx";
import { PlotFigure } from "../components/plot_figure.tsx";

/** Props. */
export interface LossChartProps {
  /** Loss per step. */
  loss: { step: number; loss: number; baseline: number | null }[];
}

function LossChartView(p: LossChartProps): VNode {
  const same = p.loss.length > 0 && p.loss.every((l) => l.baseline === l.loss);
  return (
    <PlotFigure
      id="loss"
      deps={[p.loss]}
      caption={same
        ? "Training loss per step: bitwise the same as without a budget (re-materialization is exact), so the two lines coincide"
        : "Training loss per step (under the budget; dashed: without a budget)"}
      draw={(width, document) => {
        const rows = [
          ...p.loss.map((l) => ({ step: l.step, loss: l.loss, run: "under budget" })),
          ...p.loss.filter((l) => l.baseline !== null).map((l) => ({
            step: l.step,
            loss: l.baseline!,
            run: "no budget",
          })),
        ];
        return Plot.plot({
          ...(document ? { document } : {}),
          width,
          height: 240,
          marginLeft: 60,
          x: p.loss.length <= 12
            ? { label: "step", ticks: p.loss.map((l) => l.step), tickFormat: "d" }
            : { label: "step", tickFormat: "d" },
          y: { label: "loss", grid: true },
          color: {
            legend: true,
            domain: ["under budget", "no budget"],
            range: ["#5b3fa8", "#999"],
          },
          marks: [
            Plot.line(rows.filter((r) => r.run === "no budget"), {
              x: "step",
              y: "loss",
              stroke: "run",
              strokeDasharray: "4,3",
            }),
            Plot.line(rows.filter((r) => r.run !== "no budget"), {
              x: "step",
              y: "loss",
              stroke: "run",
            }),
            Plot.dot(rows, { x: "step", y: "loss", stroke: "run" }),
          ],
        });
      }}
    />
  );
}

/** The loss chart island. */
export const LossChart: (props: LossChartProps) => VNode = island("LossChart", LossChartView);
/** The component itself (for the client registry). */
export const component: typeof LossChartView = LossChartView;
