/**
 * The browser entry, bundled by `deno bundle` into `static/build/islands.js`: finds
 * every island marker the server rendered and hydrates it with its component.
 *
 * @module
 */

import { type ComponentType, h, hydrate } from "preact";
import { component as ConfigForm } from "./islands/config_form.tsx";
import { component as LiveProgress } from "./islands/live_progress.tsx";
import { component as LossChart } from "./islands/loss_chart.tsx";
import { component as MemoryChart } from "./islands/memory_chart.tsx";
import { component as OverheadChart } from "./islands/overhead_chart.tsx";
import { component as RunOverlay } from "./islands/run_overlay.tsx";

// deno-lint-ignore no-explicit-any
const ISLANDS: Record<string, ComponentType<any>> = {
  ConfigForm,
  LiveProgress,
  LossChart,
  MemoryChart,
  OverheadChart,
  RunOverlay,
};

for (const el of document.querySelectorAll<HTMLElement>("[data-island]")) {
  const name = el.dataset.island!;
  const C = ISLANDS[name];
  if (!C) {
    console.error(`libra: no island named ${name} in this bundle`);
    continue;
  }
  hydrate(h(C, JSON.parse(el.dataset.props ?? "{}")), el);
  el.dataset.hydrated = "true";
}
