/**
 * A small deterministic {@link Engine} for the suite's own tests: its answers
 * follow closed formulas, so the tests can compute the expected report by hand.
 * It is never used by `deno task bench`.
 *
 * - peak: 1000 bytes for traces, 2000 bytes for models;
 * - policy `p` is feasible when budget >= MIN_RATIO[p] * peak;
 * - overhead = 1 + SLOPE[p] * (peak / budget - 1);
 * - evictions = floor((peak - budget) / 10), remats = floor(evictions / 2);
 * - bookkeepingMs cycles 1, 2, 3 over successive runs (so repeats differ).
 *
 * @module
 */

import type {
  Engine,
  MicroDeps,
  Outcome,
  PreparedModel,
  PreparedTrace,
  RunSettings,
} from "./engine.ts";

/** Smallest feasible ratio of each fake policy. */
export const MIN_RATIO: Readonly<Record<string, number>> = {
  "dtr-eq": 0.2,
  lru: 0.4,
  largest: 0.3,
};
/** Overhead slope of each fake policy. */
export const SLOPE: Readonly<Record<string, number>> = { "dtr-eq": 0.1, lru: 0.3, largest: 0.2 };

/** Options of {@link testEngine}. */
export interface TestEngineOptions {
  /** Model names whose preparation throws. */
  failingModels?: readonly string[];
  /** Live runs unavailable, with this reason. */
  liveUnavailable?: string;
}

/** Creates the deterministic test engine. */
export function testEngine(o: TestEngineOptions = {}): Engine & { calls: string[] } {
  let n = 0;
  const calls: string[] = [];
  function outcome(
    peak: number,
    policy: string,
    budget: number,
    live: boolean,
    s: RunSettings,
  ): Outcome {
    const k = n++;
    const feasible = budget >= MIN_RATIO[policy]! * peak;
    const overhead = 1 + SLOPE[policy]! * (peak / budget - 1);
    const evictions = Math.floor((peak - budget) / 10);
    return {
      feasible,
      overhead: feasible ? overhead : null,
      evictions,
      remats: Math.floor(evictions / 2),
      swapBytes: 0,
      bookkeepingMs: 1 + (k % 3),
      peakBytes: Math.min(peak, budget),
      timeMs: live ? 100 * overhead : null,
      baselineTimeMs: live ? 100 : null,
      error: feasible ? null : `out of budget: ${budget} bytes`,
      ...(s.timeline
        ? {
          timeline: {
            points: Array.from(
              { length: 10 },
              (_, i) => ({ call: i, bytes: Math.min(budget, (peak * i) / 9) }),
            ),
            events: [{ call: 5, kind: "evict" }, { call: 7, kind: "remat" }],
          },
        }
        : {}),
    };
  }
  return {
    calls,
    policies: () => Object.keys(MIN_RATIO),
    models: () => ["mlp", "gpt", "broken"],
    presets: () => ["tiny", "small"],
    liveUnavailable: () => o.liveUnavailable ?? null,
    liveUnsupported: (
      p,
    ) => (p === "largest" ? "largest is simulated only in the test engine" : null),
    simulateUnavailable: () => null,
    device: (s) => ({ kind: s.device, name: "test device" }),
    microDeps: (): MicroDeps => ({
      backend: () => "test engine has no backend",
      unlimitedRuntime: () => "no runtime",
      evictingRuntime: () => "no runtime",
    }),
    importTrace(path): Promise<PreparedTrace> {
      calls.push(`import ${path}`);
      return Promise.resolve({ peakBytes: 1000, computeNs: 5e6, calls: 42, handle: path });
    },
    recordTrace(model, preset): Promise<PreparedTrace> {
      calls.push(`record ${model}/${preset}`);
      if (o.failingModels?.includes(model)) {
        return Promise.reject(new Error(`cannot build ${model}`));
      }
      return Promise.resolve({ peakBytes: 1000, computeNs: 1e6, calls: 7, handle: model });
    },
    simulate(_t, policy, budget, s): Promise<Outcome> {
      calls.push(`simulate ${policy} ${budget}`);
      return Promise.resolve(outcome(1000, policy, budget, false, s));
    },
    prepareModel(model, preset): Promise<PreparedModel> {
      calls.push(`prepare ${model}/${preset}`);
      if (o.failingModels?.includes(model)) {
        return Promise.reject(new Error(`cannot build ${model}`));
      }
      return Promise.resolve({ peakBytes: 2000, handle: model });
    },
    baseline(): Promise<number> {
      return Promise.resolve(100);
    },
    live(_m, policy, budget, s): Promise<Outcome> {
      calls.push(`live ${policy} ${budget}`);
      return Promise.resolve(outcome(2000, policy, budget, true, s));
    },
  };
}

/** Runs `main` on the test engine into a fresh folder; returns the folder, exit status and output. */
export async function runMainOnTestEngine(
  args: readonly string[],
  engineOptions: TestEngineOptions = {},
): Promise<{ dir: string; status: number; stdout: string; stderr: string; progress: string }> {
  const { main } = await import("./main.ts");
  const dir = Deno.makeTempDirSync({ prefix: "libra_bench_test_" });
  let stdout = "", stderr = "", progress = "";
  let t = 0;
  const status = await main(["--out", dir, ...args], {
    engine: () => Promise.resolve(testEngine(engineOptions)),
    micro: () => Promise.resolve([]),
    progress: { write: (s) => (progress += s), isTerminal: false, now: () => (t += 7) },
    stdout: (s) => (stdout += s + "\n"),
    stderr: (s) => (stderr += s + "\n"),
    traceDefaults: () => [],
  });
  return { dir, status, stdout, stderr, progress };
}
