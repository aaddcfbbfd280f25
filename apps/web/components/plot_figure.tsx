/**
 * A chart drawn by @observablehq/plot in the browser: the server renders an empty
 * figure with a caption (and a note for readers without JavaScript); the island's
 * effect draws the SVG into it.
 *
 * @module
 */

import type { VNode } from "preact";
import { useEffect, useRef } from "preact/hooks";

/** Figure props. */
export interface PlotFigureProps {
  /** Builds the SVG (called in the browser only). */
  draw: (width: number) => Element;
  /** Caption under the chart. */
  caption: string;
  /** Redraw when any of these change. */
  deps: unknown[];
  /** Test id of the figure. */
  id: string;
}

/** A chart figure. */
export function PlotFigure(p: PlotFigureProps): VNode {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const width = Math.max(320, Math.min(el.clientWidth || 800, 1100));
    el.replaceChildren(p.draw(width));
    el.dataset.drawn = "true";
  }, p.deps);
  return (
    <figure class="chart" data-chart={p.id}>
      <div ref={ref} class="plot">
        <p class="nojs">The chart is drawn in the browser; turn on JavaScript to see it.</p>
      </div>
      <figcaption>{p.caption}</figcaption>
    </figure>
  );
}
