/**
 * A chart drawn by @observablehq/plot. The server draws it too, into a DOM from
 * linkedom (see {@linkcode setServerDocument}), so pages show their charts without
 * JavaScript; in the browser the island's effect redraws it at the page's width.
 *
 * @module
 */

import type { VNode } from "preact";
import { useEffect, useRef } from "preact/hooks";

let serverDocument: (() => Document) | null = null;

/** Lets the server draw charts: `make` returns a fresh DOM document (linkedom's). */
export function setServerDocument(make: (() => Document) | null): void {
  serverDocument = make;
}

/** Figure props. */
export interface PlotFigureProps {
  /** Builds the chart; `document` is given on the server. */
  draw: (width: number, document?: Document) => Element;
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
    const width = Math.max(280, Math.min(el.clientWidth || 800, 1100));
    el.replaceChildren(p.draw(width));
    el.dataset.drawn = "true";
  }, p.deps);
  let html: string | null = null;
  if (typeof document === "undefined" && serverDocument) {
    try {
      html = p.draw(900, serverDocument()).outerHTML;
    } catch {
      html = null; // the browser will draw it
    }
  }
  return (
    <figure class="chart" data-chart={p.id}>
      {html !== null
        ? <div ref={ref} class="plot" dangerouslySetInnerHTML={{ __html: html }} />
        : (
          <div ref={ref} class="plot">
            <p class="nojs">The chart is drawn in the browser; turn on JavaScript to see it.</p>
          </div>
        )}
      <figcaption>{p.caption}</figcaption>
    </figure>
  );
}
