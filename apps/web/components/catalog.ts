/**
 * The names the configuration form offers, from the server's packages: presets of
 * each model (`@libra/nn`), and the cost models a live run accepts.
 *
 * @module
 */

/** Cost models a live run accepts (those of `@libra/cost`). */
export { LIVE_COST_MODELS } from "@libra/cost";

let cached: Promise<Record<string, string[]>> | null = null;

/** Presets per model of the zoo; `{}` when `@libra/nn` is not in this build. */
export function zooPresets(): Promise<Record<string, string[]>> {
  cached ??= import("@libra/nn").then(
    (nn) =>
      Object.fromEntries(
        Object.entries(nn.PRESETS).map(([model, presets]) => [model, Object.keys(presets)]),
      ),
    () => ({}),
  );
  return cached;
}
