/** A synthetic memory timeline for tests of the memory chart. @module */

import type { MemoryTimeline } from "./memory_view.ts";

/** A synthetic run: `steps` steps of `perStep` calls, evictions and remats at known calls. */
export function syntheticTimeline(steps: number, perStep: number, seed = 1) {
  let x = seed;
  const rnd = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const samples: [number, number][] = [];
  const markers: MemoryTimeline["markers"] = [];
  const calls = steps * perStep;
  for (let t = 0; t < calls; t++) {
    const inStep = t % perStep;
    const bytes = 1000 + Math.round(800 * Math.sin((Math.PI * inStep) / perStep)) +
      Math.floor(t / perStep);
    samples.push([t, bytes]);
    const r = rnd();
    if (r < 0.06) markers.push({ t, kind: r < 0.03 ? "drop" : "swap-out", bytes });
    else if (r < 0.1) markers.push({ t, kind: r < 0.08 ? "remat" : "swap-in", bytes });
  }
  const count = (k: string) => markers.filter((m) => m.kind === k).length;
  const stats = {
    calls,
    steps,
    drops: count("drop"),
    swapOuts: count("swap-out"),
    remats: count("remat"),
    swapIns: count("swap-in"),
  };
  return { memory: { budgetBytes: 2000, unit: "call", samples, markers }, stats };
}
