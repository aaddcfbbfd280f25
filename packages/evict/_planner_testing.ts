/**
 * Small hand-built traces with known answers, shared by the planner tests.
 *
 * @module
 */

import type { Trace, TraceEvent } from "@libra/lineage/trace";

/** Builds a trace in memory. */
export class TraceBuilder {
  readonly events: TraceEvent[] = [];
  constant(name: string, bytes: number): this {
    this.events.push({ kind: "constant", name, bytes, line: 0 });
    return this;
  }
  call(
    op: string,
    args: string[],
    result: string,
    bytes: number,
    timeNs: number,
    backward = false,
  ): this {
    this.events.push({
      kind: "call",
      op,
      args,
      results: [{ name: result, bytes, alias: -1 }],
      timeNs,
      backward,
      line: 0,
    });
    return this;
  }
  release(name: string): this {
    this.events.push({ kind: "release", name, line: 0 });
    return this;
  }
  build(): Trace {
    return { events: [...this.events], source: "hand-built" };
  }
}

/**
 * A chain x -> h0 -> ... -> h{n-1} (forward calls 0..n-1, each 1 KiB and
 * `timeNs`), then a backward pass that reads h{n-1}, ..., h0 in reverse
 * (backward call n + j reads h{n-1-j} and the previous gradient, and
 * releases both). Budget-free memory peaks at the first backward call with
 * x, h0..h{n-1} and the first gradient resident: (n + 2) KiB.
 */
export function chainTrace(n: number, timeNs = 100): Trace {
  const b = new TraceBuilder().constant("x", 1024);
  let prev = "x";
  for (let i = 0; i < n; i++) {
    b.call("f", [prev], `h${i}`, 1024, timeNs);
    prev = `h${i}`;
  }
  let g = "";
  for (let i = n - 1; i >= 0; i--) {
    b.call("f_backward", g === "" ? [`h${i}`] : [`h${i}`, g], `g${i}`, 1024, timeNs, true);
    if (g !== "") b.release(g);
    b.release(`h${i}`);
    g = `g${i}`;
  }
  return b.build();
}
