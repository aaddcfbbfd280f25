/**
 * The simulator: replays a trace under a policy and a budget with the same
 * {@link Engine} a live run uses, on the meta backend (sizes only, no data).
 *
 * @module
 */

import type { CostModel } from "@libra/cost";
import { SwapCost } from "@libra/cost";
import {
  createPolicy,
  type EvictionPolicy,
  needsOf,
  type Plan,
  planHostLimit,
  type PlannerContext,
  planPolicy,
  type SearchOptions,
} from "@libra/evict";
import type { CallNode, StorageNode, TensorNode } from "@libra/lineage";
import type { Trace } from "@libra/lineage/trace";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { MetaBackend } from "@libra/tensor/meta-backend";
import type { Link } from "./copy_engine.ts";
import { compileTrace, FAST_POLICIES, fastReplay } from "./_sim_core.ts";
import { Engine, type Executor, type LeafRelease } from "./engine.ts";
import { unreadLeaf } from "./_upkeep.ts";
import { type InfeasibleReason, OutOfBudgetError } from "./errors.ts";
import type { RuntimeEvent, RuntimeStats, Timeline } from "./stats.ts";

/** Executor for replays: memory accounting on a {@link MetaBackend}, no data, no kernels. */
export class MetaExecutor implements Executor {
  /** The meta backend holding one buffer per resident storage. */
  readonly meta: MetaBackend = new MetaBackend();
  allocate(s: StorageNode): void {
    s.data = this.meta.alloc(s.bytes);
  }
  release(s: StorageNode): void {
    if (s.data !== undefined) {
      this.meta.free(s.data as DeviceBuffer);
      s.data = undefined;
    }
  }
  execute(call: CallNode): undefined {
    for (let i = 0; i < call.outputs.length; i++) {
      if (call.aliases[i]! >= 0) continue;
      const s = call.outputs[i]!.storage;
      if (s.residency === "resident" || s.residency === "freed") continue;
      if (s.data === undefined) this.allocate(s);
    }
    return undefined;
  }
  swapOut(s: StorageNode): undefined {
    this.release(s);
    return undefined;
  }
  swapIn(s: StorageNode): undefined {
    this.allocate(s);
    return undefined;
  }
  copy(): undefined {
    return undefined;
  }
}

/** Options of {@link replayTrace}. */
export interface ReplayOptions {
  /** Budget in bytes (default: unlimited). */
  budgetBytes?: number;
  /** Policy name (see `createPolicy`) or instance, or a factory. Default `"dtr-eq"`. */
  policy?: string | EvictionPolicy | (() => EvictionPolicy);
  /** Candidate search of named policies. */
  search?: SearchOptions;
  /** Cost model: when given, call costs come from it instead of the trace's TIME; swap costs always do. */
  costModel?: CostModel;
  /** Eager eviction of unreferenced storages. Default true. */
  eagerEviction?: boolean;
  /** Host memory for swap-aware policies. Default: unlimited when the policy name ends in `+swap`, else 0. */
  hostLimitBytes?: number;
  /** Record the memory timeline. Default false. */
  timeline?: boolean;
  /** Record the eviction decisions in order. Default false. */
  recordDecisions?: boolean;
  /** Event listener. */
  onEvent?: (e: RuntimeEvent) => void;
  /** Peak of a budget-free replay, reported as known-feasible in errors. */
  knownFeasibleBytes?: number;
  /**
   * What a release of a constant's last handle does (see `EngineOptions.leafRelease`).
   * Default `"free-unless-evicted"`. {@link simulateTrace} replays as the
   * published DTR simulator does: `"free"` without a budget (its baseline
   * banishes every unreferenced storage, constants included) and `"keep-pinned"`
   * under a budget (its budgeted runtime pins constants for good).
   */
  leafRelease?: LeafRelease;
  /**
   * Thrash limit X (default 2.0, as in the published DTR evaluation): once
   * recomputation plus stalls pass (X - 1) x the budget-free compute (the sum
   * of the trace's call costs), the replay stops, infeasible with reason
   * `"thrashing"`. `Infinity` turns it off.
   */
  overheadLimit?: number;
  /**
   * Swaps on an asynchronous copy stream at this link (`"pcie4"`, `"pcie5"`,
   * `"nvlink-c2c"` or GB/s; see `CopyEngine`): compute waits only for a copy it
   * needs. Default: none, a swap stalls for the cost model's swap cost
   * (`libra simulate` defaults to `pcie5`).
   */
  link?: Link;
  /**
   * How a MUTATE runs. `"copy"` (default, the published DTR simulator's): a
   * call producing a new version of each mutated argument, the old one
   * released. `"in-place"`, as this runtime runs an in-place kernel (for
   * traces it recorded): a leaf no call read changes where it is; any other
   * value is first copied where a value computed from it may still need it
   * (copy-on-write), else it becomes a leaf holding the new value.
   */
  mutate?: "copy" | "in-place";
}

/** Outcome of one replay. */
export interface ReplayResult {
  /** False when the replay ran out of budget or thrashed. */
  feasible: boolean;
  /** Why it is infeasible (absent when feasible). */
  reason?: InfeasibleReason;
  /** (compute + recompute + swap stall) / compute; `Infinity` when infeasible. */
  overhead: number;
  /** Statistics. */
  stats: RuntimeStats;
  /** The error when infeasible. */
  error?: OutOfBudgetError;
  /** Memory timeline (when requested). */
  timeline: Timeline;
  /** Eviction decisions (when requested). */
  decisions: string[];
  /** Bytes in use at the end (outputs resident). */
  endBytes: number;
  /** Peak the meta backend saw (cross-check of the engine's accounting, excluding transient duplicates). */
  metaPeakBytes: number;
  /** The engine after the replay (lineage, pool state), for inspection. */
  engine: Engine;
}

function makePolicy(p: ReplayOptions["policy"], search: SearchOptions | undefined): EvictionPolicy {
  if (p === undefined) return createPolicy("dtr-eq", search);
  if (typeof p === "string") return createPolicy(p, search);
  if (typeof p === "function") return p();
  return p;
}

/**
 * Replays `trace` under a budget. CONSTANTs are pinned leaves; CALLs are
 * computed (views join their argument's storage); MUTATE is copy-on-write (a
 * new version per mutated argument, the old handle released); COPY/COPY_FROM
 * move references; RELEASE drops one; tensors still referenced at the end are
 * outputs and are re-materialized and pinned.
 *
 * @example
 * ```ts
 * import { parseTrace, replayTrace } from "@libra/runtime";
 * const trace = parseTrace([
 *   `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
 *   `{"INSTRUCTION":"MEMORY","MEMORY":"16","NAME":"x"}`,
 *   `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"5"}`,
 *   `{"INSTRUCTION":"MEMORY","MEMORY":"16","NAME":"y"}`,
 *   `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
 * ].join("\n"));
 * const r = replayTrace(trace);
 * if (r.stats.peakBytes !== 32) throw new Error(`peak ${r.stats.peakBytes}`);
 * ```
 */
export function replayTrace(trace: Trace, options: ReplayOptions = {}): ReplayResult {
  const policy = makePolicy(options.policy, options.search);
  const swapAware = needsOf(policy).swaps;
  const cm = options.costModel;
  const costs = eventCosts(trace, cm);
  let baselineComputeNs = 0;
  for (let i = 0; i < costs.length; i++) baselineComputeNs += costs[i]!;
  const exec = new MetaExecutor();
  const engine = new Engine({
    budgetBytes: options.budgetBytes ?? Infinity,
    policy,
    costModel: options.costModel ??
      { name: "trace", callCost: () => 0, swapCost: (b) => swap.swapCost(b) },
    executor: exec,
    eagerEviction: options.eagerEviction ?? true,
    hostLimitBytes: options.hostLimitBytes ?? (swapAware ? Infinity : 0),
    timeline: options.timeline ?? false,
    gc: false,
    leafRelease: options.leafRelease ?? "free-unless-evicted",
    overheadLimit: options.overheadLimit ?? 2,
    baselineComputeNs,
    ...(options.link !== undefined ? { link: options.link } : {}),
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    ...(options.knownFeasibleBytes !== undefined
      ? { knownFeasibleBytes: options.knownFeasibleBytes }
      : {}),
  });
  engine.recordDecisions = options.recordDecisions ?? false;
  // Classes kept from the start, as a live run's later steps have them.
  engine.keepClasses();
  const names = new Map<string, TensorNode>();
  engine.resolveName = (n) => names.get(n)?.storage;
  let index = 0;
  const t0 = performance.now();
  let error: OutOfBudgetError | undefined;
  try {
    for (const e of trace.events) {
      switch (e.kind) {
        case "constant":
          names.set(e.name, engine.leaf(e.bytes, e.name, { pinned: true }));
          break;
        case "call": {
          const inputs = e.args.map((a) => names.get(a)!);
          const outs = engine.compute(
            e.op,
            e.params ?? [],
            inputs,
            e.results.map((r) => ({ name: r.name, bytes: r.bytes, alias: r.alias })),
            costs[index]!,
            e.backward,
          );
          index++;
          e.results.forEach((r, i) => names.set(r.name, outs[i]!));
          break;
        }
        case "mutate": {
          const inputs = e.args.map((a) => names.get(a)!);
          if (options.mutate === "in-place") {
            mutateInPlace(engine, e, inputs, costs[index]!, names);
            index++;
            break;
          }
          const outs = engine.compute(
            e.op,
            e.params ?? [],
            inputs,
            e.mutate.map((m) => ({
              name: `${e.args[m]}$`,
              bytes: inputs[m]!.storage.bytes,
              alias: -1,
            })),
            costs[index]!,
            e.backward,
          );
          index++;
          e.mutate.forEach((m, i) => {
            const name = e.args[m]!;
            const old = names.get(name)!;
            names.set(name, outs[i]!);
            engine.release(old);
          });
          break;
        }
        case "copy": {
          const t = names.get(e.src)!;
          engine.get(t);
          names.set(e.dst, t);
          break;
        }
        case "copyFrom": {
          const old = names.get(e.dst)!;
          const t = names.get(e.src)!;
          names.set(e.dst, t);
          engine.release(old);
          engine.get(t);
          break;
        }
        case "release": {
          const t = names.get(e.name);
          if (t === undefined) break;
          if (t.extRefs <= 0) {
            throw new Error(
              `${
                trace.source ?? "trace"
              }:${e.line}: RELEASE of ${e.name}, which has no reference left`,
            );
          }
          engine.release(t);
          break;
        }
        case "read": {
          // Brought back (and locked while read) if evicted.
          const t = names.get(e.name)!;
          engine.unlockInputs(engine.lockInputs([t]));
          break;
        }
        case "annotate":
          break;
      }
    }
    for (const t of names.values()) if (t.extRefs > 0) engine.pin(t);
  } catch (e) {
    if (!(e instanceof OutOfBudgetError)) throw e;
    error = e;
  }
  engine.stats.bookkeepingNs = (performance.now() - t0) * 1e6;
  const st = engine.stats;
  const result: ReplayResult = {
    feasible: error === undefined,
    overhead: error === undefined && st.computeNs > 0
      ? (st.computeNs + st.recomputeNs + st.swapStallNs) / st.computeNs
      : error === undefined
      ? 1
      : Infinity,
    stats: st,
    timeline: engine.timeline,
    decisions: engine.decisions,
    endBytes: engine.used,
    metaPeakBytes: exec.meta.memory().peakBytes,
    engine,
  };
  if (error) {
    result.error = error;
    result.reason = error.reason;
  }
  return result;
}

/**
 * A MUTATE as the runtime runs an in-place kernel (`ReplayOptions.mutate`
 * `"in-place"`): its inputs brought back and locked, each written storage
 * updated in place when it holds a leaf no call read, else copied first where
 * something computed from it may need the old value ({@link Engine.overwrite})
 * and given a new leaf; the call priced at `cost`. Every name of a written
 * value names its new leaf.
 */
function mutateInPlace(
  engine: Engine,
  e: Extract<Trace["events"][number], { kind: "mutate" }>,
  inputs: TensorNode[],
  cost: number,
  names: Map<string, TensorNode>,
): void {
  // The storages it writes, once each (repeats found by a fresh stamp, as the runtime does).
  const written: StorageNode[] = [];
  const stamp = engine.lineage.nextStamp();
  let bytes = 0;
  for (const m of e.mutate) {
    const s = inputs[m]!.storage;
    if (s.stamp === stamp) continue;
    s.stamp = stamp;
    written.push(s);
    bytes += s.bytes;
  }
  engine.beforeInPlace();
  const old = written.map((s) => s.tensors[0]!);
  const ext: number[] = [];
  const mark = engine.lockInputs(inputs);
  try {
    for (const s of written) ext.push(unreadLeaf(s) ? -1 : engine.overwrite(s, s.bytes % 4 === 0));
  } finally {
    engine.unlockInputs(mark);
  }
  const adopted = new Map<TensorNode, TensorNode>();
  for (let i = 0; i < written.length; i++) {
    if (ext[i]! >= 0) adopted.set(old[i]!, engine.adoptLeaf(written[i]!, ext[i]!, old[i]!.name));
  }
  if (adopted.size > 0) {
    for (const [n, v] of names) {
      const t = adopted.get(v);
      if (t !== undefined) names.set(n, t);
    }
  }
  engine.noteInPlace(e.op, e.params ?? [], undefined, bytes, cost);
}

/**
 * The cost of each call and in-place call of `trace`, in order: its TIME, or
 * the cost model's price. Sums are checked to stay exact (safe integers).
 */
function eventCosts(trace: Trace, cm: CostModel | undefined): Float64Array {
  let n = 0;
  for (const e of trace.events) if (e.kind === "call" || e.kind === "mutate") n++;
  const out = new Float64Array(n);
  let i = 0;
  const sizes = new Map<string, number>();
  for (const e of trace.events) {
    if (e.kind === "constant") sizes.set(e.name, e.bytes);
    else if (e.kind === "call") {
      let bytes = 0;
      for (const r of e.results) {
        bytes += r.bytes;
        sizes.set(r.name, r.alias >= 0 ? sizes.get(e.args[r.alias]!) ?? 0 : r.bytes);
      }
      out[i] = cm
        ? cm.callCost({ op: e.op, params: e.params ?? [], index: i, totalBytes: bytes })
        : e.timeNs;
      i++;
    } else if (e.kind === "mutate") {
      let bytes = 0;
      for (const m of e.mutate) bytes += sizes.get(e.args[m]!) ?? 0;
      out[i] = cm
        ? cm.callCost({ op: e.op, params: e.params ?? [], index: i, totalBytes: bytes })
        : e.timeNs;
      i++;
    } else if (e.kind === "copy" || e.kind === "copyFrom") {
      sizes.set(e.dst, sizes.get(e.src) ?? 0);
    }
  }
  return out;
}

const swap = new SwapCost();

/** One row of {@link simulateTrace}. */
export interface SimulationResult {
  /** Budget ratio (fraction of the budget-free peak). */
  ratio: number;
  /** floor(ratio * baseline peak). */
  budgetBytes: number;
  /** False when the replay ran out of budget or thrashed. */
  feasible: boolean;
  /** Why it is infeasible (absent or `null` when feasible). */
  reason?: InfeasibleReason | null;
  /** Overhead (null when infeasible). */
  overhead: number | null;
  /** Policy evictions (drops + swap-outs; eager evictions of unreferenced storages excluded). */
  evictions: number;
  /** Recomputed calls. */
  remats: number;
  /** Wall time of the replay (policy search and all bookkeeping), ms. */
  bookkeepingMs: number;
  /** Peak bytes in use. */
  peakBytes: number;
  /** Swap-outs. */
  swaps: number;
}

/** Result of {@link simulateTrace}. */
export interface SimulationReport {
  /** Budget-free replay. */
  baseline: { peakBytes: number; computeNs: number };
  /** One row per ratio. */
  results: SimulationResult[];
}

/** Options of {@link simulateTrace}. */
export interface SimulateOptions extends Omit<ReplayOptions, "budgetBytes" | "knownFeasibleBytes"> {
  /** Budget ratios. */
  ratios: readonly number[];
  /** Progress callback (after each ratio). */
  onProgress?: (done: number, total: number, row: SimulationResult) => void;
  /**
   * Which replayer: `"fast"` (default where it applies: a named dynamic policy
   * without swapping, hooks, events, timeline or sampling) compiles the trace
   * once and replays it with the published simulator's semantics on flat
   * objects; `"engine"` always replays through the {@link Engine}. Both make
   * the same decisions (tested on the shared logs and random traces).
   */
  engine?: "fast" | "engine";
}

/**
 * The published DTR simulator's constant handling (`leafRelease`), as
 * {@link simulateTrace} replays: its budget-free baseline frees every storage
 * no handle refers to, constants included; under a budget its constants stay
 * pinned for good.
 */
export const PUBLISHED_LEAF_RELEASE: Readonly<{ baseline: LeafRelease; budgeted: LeafRelease }> =
  Object.freeze({ baseline: "free", budgeted: "keep-pinned" });

/**
 * How to replay a step this runtime recorded so that it runs as the runtime
 * ran it: updates in place (copy-on-write where a value computed from the old
 * one may need it), a released leaf kept while a value computed from it may
 * need it (the runtime's default). A plan's live steps then make its replay's
 * evictions and re-materializations, call by call.
 */
export const RECORDED_STEP_REPLAY: Readonly<Pick<ReplayOptions, "mutate" | "leafRelease">> = Object
  .freeze({ mutate: "in-place", leafRelease: "keep-if-needed" });

/** True when {@link simulateTrace}'s fast replayer implements `o`. */
export function fastEligible(
  o: Omit<ReplayOptions, "budgetBytes" | "knownFeasibleBytes">,
): boolean {
  const p = o.policy ?? "dtr-eq";
  return typeof p === "string" && FAST_POLICIES.has(p) && (o.eagerEviction ?? true) &&
    !o.hostLimitBytes && !o.timeline && !o.recordDecisions && o.onEvent === undefined &&
    o.leafRelease === undefined && (o.search?.mode ?? "full") === "full" && !o.search?.minBytes;
}

function simulateFast(trace: Trace, options: SimulateOptions): SimulationReport {
  const { ratios, onProgress } = options;
  const costs = options.costModel ? eventCosts(trace, options.costModel) : undefined;
  const compiled = compileTrace(trace, costs);
  const policy = (options.policy as string | undefined) ?? "dtr-eq";
  const seed = options.search?.seed ?? 1;
  const base = fastReplay(compiled, { budgetBytes: Infinity, policy, overheadLimit: Infinity });
  const peak = base.peakBytes;
  const results: SimulationResult[] = [];
  for (const ratio of ratios) {
    const budgetBytes = Math.floor(ratio * peak);
    const t0 = performance.now();
    const r = fastReplay(compiled, {
      budgetBytes,
      policy,
      overheadLimit: options.overheadLimit ?? 2,
      seed,
    });
    const row: SimulationResult = {
      ratio,
      budgetBytes,
      feasible: r.feasible,
      reason: r.reason ?? null,
      overhead: r.feasible ? r.overhead : null,
      evictions: r.evictions,
      remats: r.remats,
      bookkeepingMs: performance.now() - t0,
      peakBytes: r.peakBytes,
      swaps: 0,
    };
    results.push(row);
    onProgress?.(results.length, ratios.length, row);
  }
  return { baseline: { peakBytes: peak, computeNs: base.computeNs }, results };
}

/**
 * Replays `trace` without a budget (the baseline), then at each ratio of its
 * peak: what `libra simulate` prints, and what benchmarks call.
 *
 * @example
 * ```ts
 * import { parseTrace, simulateTrace } from "@libra/runtime";
 * const lines = [`{"INSTRUCTION":"CONSTANT","NAME":"x"}`, `{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"x"}`];
 * let prev = "x";
 * for (let i = 0; i < 4; i++) {
 *   lines.push(`{"ARGS":["${prev}"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y${i}"],"TIME":"10"}`,
 *     `{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"y${i}"}`, `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y${i}"}`);
 *   prev = `y${i}`;
 * }
 * const r = simulateTrace(parseTrace(lines.join("\n")), { policy: "dtr-eq", ratios: [1, 0.8] });
 * if (r.baseline.peakBytes !== 40 || !r.results[0]!.feasible) throw new Error("chain of 4");
 * ```
 */
export function simulateTrace(trace: Trace, options: SimulateOptions): SimulationReport {
  const { ratios, onProgress, ...rest } = options;
  for (const r of ratios) {
    if (!(r > 0) || !Number.isFinite(r)) throw new RangeError(`budget ratio must be > 0, got ${r}`);
  }
  if (options.engine !== "engine" && fastEligible(rest)) {
    return simulateFast(trace, options);
  }
  const base = replayTrace(trace, {
    ...rest,
    budgetBytes: Infinity,
    leafRelease: rest.leafRelease ?? PUBLISHED_LEAF_RELEASE.baseline,
  });
  const peak = base.stats.peakBytes;
  const results: SimulationResult[] = [];
  for (const ratio of ratios) {
    const budgetBytes = Math.floor(ratio * peak);
    const r = replayTrace(trace, {
      ...rest,
      budgetBytes,
      knownFeasibleBytes: peak,
      leafRelease: rest.leafRelease ?? PUBLISHED_LEAF_RELEASE.budgeted,
    });
    const row = simulationRow(ratio, budgetBytes, r);
    results.push(row);
    onProgress?.(results.length, ratios.length, row);
  }
  return { baseline: { peakBytes: peak, computeNs: base.stats.computeNs }, results };
}

/**
 * The result row of a replay at `ratio` of the baseline peak, under
 * `budgetBytes` (what {@link simulateTrace} reports per ratio); `extraMs` (e.g. planning time) is added to its bookkeeping.
 */
export function simulationRow(
  ratio: number,
  budgetBytes: number,
  r: ReplayResult,
  extraMs = 0,
): SimulationResult {
  return {
    ratio,
    budgetBytes,
    feasible: r.feasible,
    reason: r.reason ?? null,
    overhead: r.feasible ? r.overhead : null,
    evictions: r.stats.evictions,
    remats: r.stats.remats,
    bookkeepingMs: extraMs + r.stats.bookkeepingNs / 1e6,
    peakBytes: r.stats.peakBytes,
    swaps: r.stats.swapOuts,
  };
}

/**
 * Services for planners (the replay hook): the budget-free peak of `trace`,
 * and `replay(plan, budget)`, which runs the plan through the simulator with
 * `fallback` (default `dtr-eq`) choosing when the plan under-evicts. Its
 * replays have no thrash limit unless `overheadLimit` says otherwise.
 */
export function plannerContext(
  trace: Trace,
  options: Omit<ReplayOptions, "budgetBytes" | "policy"> & { fallback?: string } = {},
): PlannerContext {
  const { fallback, ...opts } = options;
  // A planner's search sees the true overhead of a plan that thrashes.
  const rest = { ...opts, overheadLimit: opts.overheadLimit ?? Infinity };
  const baseline = replayTrace(trace, { ...rest, timeline: true });
  return {
    baselinePeakBytes: baseline.stats.peakBytes,
    baselineBytes: [...baseline.timeline.bytes, baseline.endBytes],
    replay(plan: Plan, budgetBytes: number) {
      const r = replayTrace(trace, {
        ...rest,
        budgetBytes,
        hostLimitBytes: planHostLimit(plan, rest.hostLimitBytes ?? 0),
        policy: planPolicy(plan, createPolicy(fallback ?? "dtr-eq", rest.search)),
      });
      return {
        feasible: r.feasible,
        peakBytes: r.stats.peakBytes,
        overhead: r.overhead,
        computeNs: r.stats.computeNs,
        recomputeNs: r.stats.recomputeNs,
        stallNs: r.stats.swapStallNs,
      };
    },
  };
}
