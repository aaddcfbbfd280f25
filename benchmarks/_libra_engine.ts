/**
 * The {@link Engine} the suite runs on: `@libra/runtime` (trace import,
 * `replayTrace` on the meta backend, the `Runtime` backend), `@libra/evict`
 * (policy names), `@libra/nn` (model zoo, synthetic data, `train`) and
 * `@libra/native` (cpu and cuda backends).
 *
 * The live path loads `Runtime` and the model zoo through their package entry
 * points at run time and checks what it finds, so that a checkout where they
 * are not exported yet still runs the simulated part and says exactly what is
 * missing instead of failing to start.
 *
 * @module
 */

import { POLICY_NAMES } from "@libra/evict";
import { cpuBackend, cudaBackend } from "@libra/native";
import { OutOfBudgetError, readTrace, type ReplayResult, replayTrace } from "@libra/runtime";
import type { Trace } from "@libra/lineage/trace";
import type { Backend } from "@libra/tensor/backend";
import type {
  DeviceInfo,
  Engine,
  MicroDeps,
  Outcome,
  PreparedModel,
  PreparedTrace,
  RunSettings,
} from "./engine.ts";
import type { BenchOptions } from "./options.ts";

/** The parts of `Runtime` the suite uses (structural, so the seam stays small). */
interface RuntimeLike extends Backend {
  readonly stats: {
    evictions: number;
    remats: number;
    swapOutBytes: number;
    bookkeepingNs: number;
    peakBytes: number;
  };
  readonly timeline: {
    readonly bytes: readonly number[];
    readonly calls: readonly number[];
    readonly markers: readonly { call: number; kind: string }[];
  };
  trace(): Trace;
  endStep(): void;
}

interface RuntimeCtor {
  new (options: {
    backend: Backend;
    budget?: number;
    policy?: string;
    search?: { seed?: number };
    record?: boolean;
    timeline?: boolean;
  }): RuntimeLike;
}

interface ModelLike {
  parameters(): unknown[];
}

interface NnLike {
  MODEL_NAMES: readonly string[];
  createModel(name: string, preset: string, options: { backend: Backend }): ModelLike;
  createData(name: string, preset: string, options: { seed: number }): unknown;
  train(options: {
    model: ModelLike;
    data: unknown;
    optimizer: unknown;
    steps: number;
    backend?: Backend;
    onStep?: (info: { step: number }) => void;
  }): { times: number[]; losses: number[] };
  SGD: new (params: unknown[], options: { lr: number; momentum?: number }) => unknown;
}

interface Live {
  Runtime: RuntimeCtor;
  nn: NnLike;
  manualSeed: (seed: number) => void;
}

/** Loads what live runs need, or says what is missing. */
async function loadLive(): Promise<Live | string> {
  const missing: string[] = [];
  const rt = await import("@libra/runtime") as Record<string, unknown>;
  if (typeof rt.Runtime !== "function") missing.push("Runtime from @libra/runtime");
  let nn: Record<string, unknown> = {};
  try {
    nn = await import("@libra/nn") as Record<string, unknown>;
  } catch (e) {
    missing.push(`@libra/nn (${(e as Error).message.split("\n")[0]})`);
  }
  for (const k of ["createModel", "createData", "train", "SGD", "MODEL_NAMES"]) {
    if (nn[k] === undefined) missing.push(`${k} from @libra/nn`);
  }
  const tensor = await import("@libra/tensor") as Record<string, unknown>;
  if (typeof tensor.manualSeed !== "function") missing.push("manualSeed from @libra/tensor");
  if (missing.length > 0) return `not exported yet: ${missing.join(", ")}`;
  return {
    Runtime: rt.Runtime as RuntimeCtor,
    nn: nn as unknown as NnLike,
    manualSeed: tensor.manualSeed as (seed: number) => void,
  };
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
}

/** Kernel calls of a trace (CALL and MUTATE events). */
function callCount(trace: Trace): number {
  let n = 0;
  for (const e of trace.events) if (e.kind === "call" || e.kind === "mutate") n++;
  return n;
}

function prepareTrace(trace: Trace): PreparedTrace {
  const base = replayTrace(trace, { budgetBytes: Infinity });
  if (!base.feasible) {
    throw new Error(
      `budget-free replay of ${trace.source ?? "trace"} failed: ${base.error?.message}`,
    );
  }
  return {
    peakBytes: base.stats.peakBytes,
    computeNs: base.stats.computeNs,
    calls: callCount(trace),
    handle: trace,
  };
}

function replayOutcome(r: ReplayResult, timeline: boolean): Outcome {
  return {
    feasible: r.feasible,
    overhead: r.feasible ? r.overhead : null,
    evictions: r.stats.evictions,
    remats: r.stats.remats,
    swapBytes: r.stats.swapOutBytes,
    bookkeepingMs: r.stats.bookkeepingNs / 1e6,
    peakBytes: r.stats.peakBytes,
    timeMs: null,
    baselineTimeMs: null,
    error: r.error ? firstLine(r.error) : null,
    ...(timeline ? { timeline: timelineOf(r.timeline) } : {}),
  };
}

function timelineOf(t: RuntimeLike["timeline"]): NonNullable<Outcome["timeline"]> {
  return {
    points: t.calls.map((call, i) => ({ call, bytes: t.bytes[i]! })),
    events: t.markers.map((m) => ({ call: m.call, kind: m.kind })),
  };
}

interface ModelHandle {
  readonly name: string;
  readonly preset: string;
  readonly backend: Backend;
}

/** Creates the engine on the @libra packages. */
export async function createLibraEngine(options: Pick<BenchOptions, "device">): Promise<Engine> {
  const live = await loadLive();
  let backend: Backend | string | undefined;
  const getBackend = (device: "cpu" | "cuda"): Backend | string => {
    if (backend === undefined) {
      try {
        backend = device === "cuda" ? cudaBackend() : cpuBackend();
      } catch (e) {
        backend = `${device} backend unavailable: ${firstLine(e)}${
          device === "cpu" ? " (run deno task build:native)" : ""
        }`;
      }
    }
    return backend;
  };
  void options;

  /** Trains `steps` steps from a fresh, seeded model on `b`; returns the summed step times (ms). */
  const runSteps = (
    l: Live,
    m: ModelHandle,
    b: Backend,
    s: RunSettings,
    onStep?: () => void,
  ): number => {
    l.manualSeed(s.seed);
    const model = l.nn.createModel(m.name, m.preset, { backend: b });
    const data = l.nn.createData(m.name, m.preset, { seed: s.seed });
    const optimizer = new l.nn.SGD(model.parameters(), { lr: 0.01, momentum: 0.9 });
    const r = l.nn.train({
      model,
      data,
      optimizer,
      steps: s.steps,
      backend: b,
      ...(onStep ? { onStep } : {}),
    });
    return r.times.reduce((a, x) => a + x, 0);
  };

  const engine: Engine = {
    policies: () => POLICY_NAMES,
    models: () => (typeof live === "string" ? [] : live.nn.MODEL_NAMES),
    liveUnavailable(s) {
      if (typeof live === "string") return live;
      const b = getBackend(s.device);
      return typeof b === "string" ? b : null;
    },
    simulateUnavailable: () => null,
    device(s): DeviceInfo {
      const b = getBackend(s.device);
      if (typeof b === "string") return { kind: s.device, name: "unavailable" };
      const name = (b as { deviceName?: string }).deviceName;
      return { kind: b.device, name: name ?? b.name };
    },
    microDeps(s): MicroDeps {
      return {
        backend: () => getBackend(s.device),
        unlimitedRuntime: (b) =>
          typeof live === "string" ? live : new live.Runtime({ backend: b, timeline: false }),
      };
    },

    async importTrace(path) {
      return prepareTrace(await readTrace(path));
    },
    recordTrace(model, preset, s) {
      if (typeof live === "string") return Promise.reject(new Error(live));
      const b = getBackend(s.device);
      if (typeof b === "string") return Promise.reject(new Error(b));
      const rt = new live.Runtime({ backend: b, record: true, timeline: false });
      runSteps(live, { name: model, preset, backend: b }, rt, { ...s, steps: 1 });
      return Promise.resolve(prepareTrace(rt.trace()));
    },
    simulate(trace, policy, budgetBytes, s) {
      const r = replayTrace(trace.handle as Trace, {
        budgetBytes,
        policy,
        search: { seed: s.seed },
        timeline: s.timeline,
        knownFeasibleBytes: trace.peakBytes,
      });
      return Promise.resolve(replayOutcome(r, s.timeline));
    },

    prepareModel(model, preset, s) {
      if (typeof live === "string") return Promise.reject(new Error(live));
      const b = getBackend(s.device);
      if (typeof b === "string") return Promise.reject(new Error(b));
      const handle: ModelHandle = { name: model, preset, backend: b };
      // Warm-up (JIT, allocator, thread pool), then the peak of a budget-free run under the runtime.
      runSteps(live, handle, b, s);
      const rt = new live.Runtime({ backend: b, timeline: false });
      runSteps(live, handle, rt, s);
      return Promise.resolve({ peakBytes: rt.stats.peakBytes, handle } satisfies PreparedModel);
    },
    baseline(m, s) {
      if (typeof live === "string") return Promise.reject(new Error(live));
      const h = m.handle as ModelHandle;
      return Promise.resolve(runSteps(live, h, h.backend, s));
    },
    live(m, policy, budgetBytes, s) {
      if (typeof live === "string") return Promise.reject(new Error(live));
      const h = m.handle as ModelHandle;
      const baselineTimeMs = runSteps(live, h, h.backend, s);
      const rt = new live.Runtime({
        backend: h.backend,
        budget: budgetBytes,
        policy,
        search: { seed: s.seed },
        timeline: s.timeline,
      });
      let timeMs: number | null = null;
      let error: string | null = null;
      try {
        timeMs = runSteps(live, h, rt, s, () => rt.endStep());
      } catch (e) {
        if (!(e instanceof OutOfBudgetError)) throw e;
        error = firstLine(e);
      }
      const st = rt.stats;
      return Promise.resolve({
        feasible: timeMs !== null,
        overhead: timeMs !== null ? timeMs / baselineTimeMs : null,
        evictions: st.evictions,
        remats: st.remats,
        swapBytes: st.swapOutBytes,
        bookkeepingMs: st.bookkeepingNs / 1e6,
        peakBytes: st.peakBytes,
        timeMs,
        baselineTimeMs,
        error,
        ...(s.timeline ? { timeline: timelineOf(rt.timeline) } : {}),
      });
    },
  };
  return engine;
}
