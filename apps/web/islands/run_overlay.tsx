/**
 * Island: several runs overlaid, memory in use over time (peaks per stretch, with each
 * run's budget dashed) and loss per step, one colour per run. Hovering shows the
 * values; each run's points link to its page.
 *
 * @module
 */

import * as Plot from "@observablehq/plot";
import type { VNode } from "preact";
import { plainTick, stepTicks } from "../components/format.ts";
import { island } from "../components/island.tsx";
import { PlotFigure } from "../components/plot_figure.tsx";
import { byteUnit } from "./memory_chart.tsx";

/** One run of the overlay. */
export interface OverlayRun {
  /** Run id. */
  id: string;
  /** Legend label (policy, ratio, id). */
  label: string;
  /** Budget in bytes, when known. */
  budgetBytes: number | null;
  /** `[call, bytes]`, thinned by the server (peaks kept). */
  samples: [number, number][];
  /** Loss per step. */
  loss: { step: number; loss: number }[];
}

/** Props. */
export interface RunOverlayProps {
  /** The runs. */
  runs: OverlayRun[];
}

function RunOverlayView(p: RunOverlayProps): VNode {
  const labels = p.runs.map((r) => r.label);
  const maxBytes = Math.max(1, ...p.runs.map((r) => r.budgetBytes ?? 0));
  const [unit, scale] = byteUnit(maxBytes);
  const withMemory = p.runs.filter((r) => r.samples.length);
  const withLoss = p.runs.filter((r) => r.loss.length);
  return (
    <div class="overlay">
      <PlotFigure
        id="overlay-memory"
        deps={[p.runs]}
        caption={`Memory in use (${unit}) against kernel call, one colour per run (${withMemory.length} of ${p.runs.length} recorded a timeline; each line is the peak of each stretch of calls); dashed: each run's budget. Hover for values.`}
        draw={(width, document) => {
          const rows = withMemory.flatMap((r) =>
            r.samples.map(([t, b]) => ({ run: r.label, t, v: b / scale }))
          );
          const budgets = withMemory.filter((r) => r.budgetBytes !== null).map((r) => ({
            run: r.label,
            v: r.budgetBytes! / scale,
          }));
          return Plot.plot({
            ...(document ? { document } : {}),
            width,
            height: 300,
            marginLeft: 64,
            x: { label: "kernel call", tickFormat: plainTick },
            y: { label: `${unit} in use`, grid: true, zero: true, tickFormat: plainTick },
            color: { legend: true, domain: labels },
            marks: [
              Plot.lineY(rows, { x: "t", y: "v", stroke: "run", z: "run", curve: "step-after" }),
              Plot.ruleY(budgets, { y: "v", stroke: "run", strokeDasharray: "6,4" }),
              Plot.tip(
                rows,
                Plot.pointer({
                  x: "t",
                  y: "v",
                  stroke: "run",
                  title: (d: (typeof rows)[number]) =>
                    `${d.run}\ncall ${d.t}: ${d.v.toFixed(2)} ${unit} in use`,
                }),
              ),
            ],
          });
        }}
      />
      <PlotFigure
        id="overlay-loss"
        deps={[p.runs]}
        caption={`Training loss per step, one colour per run (${withLoss.length} of ${p.runs.length} recorded losses). Hover for values; click a point to open its run.`}
        draw={(width, document) => {
          const rows = withLoss.flatMap((r) =>
            r.loss.map((l) => ({
              run: r.label,
              step: l.step + 1,
              loss: l.loss,
              href: `/runs/${r.id}`,
            }))
          );
          const label = (d: (typeof rows)[number]) =>
            `${d.run}\nstep ${d.step}: loss ${d.loss.toFixed(4)} · click to open`;
          return Plot.plot({
            ...(document ? { document } : {}),
            width,
            height: 260,
            marginLeft: 64,
            x: {
              label: "step",
              ticks: stepTicks(Math.max(1, ...rows.map((r) => r.step))),
              tickFormat: plainTick,
            },
            y: { label: "loss", grid: true, tickFormat: plainTick },
            color: { legend: true, domain: labels },
            marks: [
              Plot.line(rows, { x: "step", y: "loss", stroke: "run", z: "run" }),
              Plot.dot(rows, {
                x: "step",
                y: "loss",
                stroke: "run",
                fill: "white",
                r: 3.5,
                href: "href",
                title: label,
              }),
              Plot.tip(rows, Plot.pointer({ x: "step", y: "loss", stroke: "run", title: label })),
            ],
          });
        }}
      />
    </div>
  );
}

/** The overlay island. */
export const RunOverlay: (props: RunOverlayProps) => VNode = island("RunOverlay", RunOverlayView);
/** The component itself (for the client registry). */
export const component: typeof RunOverlayView = RunOverlayView;
