/** Helpers shared by the API's tests. @module */

import type { ConfigurationInput } from "./schemas.ts";

/** A one-step tiny MLP configuration under `dtr` at half the memory, named `name`. */
export function tinyMlpConfiguration(name: string): ConfigurationInput {
  return {
    name,
    model: "mlp",
    preset: "tiny",
    config: null,
    device: "cpu",
    budgetRatio: 0.5,
    budgetBytes: null,
    policy: "dtr",
    costModel: "measured",
    steps: 1,
    seed: 0,
    overheadLimit: 2,
  };
}

/**
 * A body that produces `total` bytes of `fill` in chunks as it is pulled, and counts
 * what was pulled: a test can check that a server stopped reading near its limit.
 */
export function flood(
  total: number,
  opts: { chunk?: number; fill?: number } = {},
): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  const chunk = opts.chunk ?? 16 << 10;
  const block = new Uint8Array(chunk).fill(opts.fill ?? 0x61);
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(ctl) {
      if (pulled >= total) return ctl.close();
      const n = Math.min(chunk, total - pulled);
      pulled += n;
      ctl.enqueue(n === chunk ? block.slice() : block.slice(0, n));
    },
  }, { highWaterMark: 0 });
  return { stream, pulled: () => pulled };
}

/** Polls `f` every 20 ms until it returns a truthy value (returned), or throws after `ms`. */
export async function until<T>(
  f: () => Promise<T | null | undefined | false>,
  ms = 5000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}
