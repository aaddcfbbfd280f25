/**
 * {@link Runtime}: a `Backend` that wraps a real one and runs everything above
 * it (tensors, autograd, models) under a memory budget.
 *
 * Its buffers are virtual storages: device memory is taken when a value is
 * written or computed, released when the storage is evicted or freed, and
 * taken again when the value is re-materialized. Kernel calls are recorded in
 * lineage with their exact params (including Philox seed and offset), so a
 * recomputation gives bitwise the value the first run gave.
 *
 * @module
 */

import type { CostModel } from "@libra/cost";
import { AnalyticCostModel, DEVICE_PEAKS } from "@libra/cost";
import {
  createPolicy,
  type EvictionPolicy,
  needsOf,
  type Plan,
  planPolicy,
  type SearchOptions,
} from "@libra/evict";
import { type Lineage, NameScope, StorageNode, type TensorNode } from "@libra/lineage";
import type { Trace, TraceEvent } from "@libra/lineage/trace";
import {
  type Backend,
  type DeviceBuffer,
  type DeviceKind,
  type HostBuffer,
  KernelError,
  type MemoryInfo,
  type Transfer,
} from "@libra/tensor/backend";
import { checkKernelCall, kernelMutates, type KernelName } from "@libra/tensor/kernels";
import { Engine } from "./engine.ts";
import { clockCost } from "./_eviction.ts";
import { LiveExecutor } from "./_live_executor.ts";
import { unreadLeaf } from "./_upkeep.ts";
import { clearList } from "@libra/util/list";
import type { RuntimeEvent, RuntimeStats, Timeline } from "./stats.ts";

/** A budget: bytes, or a ratio of the budget-free peak (measured by the first step unless given). */
export type Budget = number | { ratio: number; peakBytes?: number };

/**
 * The runtime's candidate search when its options name none: the policy
 * scans a pool of up to 1024 evictable storages in full (every decision the
 * published DTR heuristics would make), and scores ceil(sqrt(N)) sampled
 * ones of a larger pool, as DTR's own runtime did. A full scan costs ~7 ns a
 * member on the 2-core development VM: with 10k values live and `dtr-eq`
 * evicting on ~43% of the calls it added ~25 us a call, sampling ~4.
 */
export const DEFAULT_SEARCH: Readonly<SearchOptions> = Object.freeze({
  mode: "sqrt",
  fullUpTo: 1024,
});

/** Options of {@link Runtime}. */
export interface RuntimeOptions {
  /** The wrapped backend (cpu, cuda, meta, reference). */
  backend: Backend;
  /** Budget. Default: unlimited. */
  budget?: Budget;
  /** Policy or policy name (see `createPolicy`). Default `"dtr-eq"`. */
  policy?: EvictionPolicy | string;
  /**
   * Candidate search for a named policy. Default {@link DEFAULT_SEARCH}: a
   * full scan of pools of up to 1024 evictable storages, sqrt(N) sampling of
   * larger ones.
   */
  search?: SearchOptions;
  /**
   * Cost model. Default: the analytic model with the device's peaks, so the
   * same run makes the same decisions every time (`MeasuredCostModel` prices
   * calls by the time they just took, and its decisions follow machine noise).
   */
  costModel?: CostModel;
  /**
   * Time every kernel call (`stats.kernelNs` then counts them all). Default:
   * when the cost model prices calls by measured time (its `measures` is not
   * false); recomputations are always timed.
   */
  timeKernels?: boolean;
  /**
   * Queue the kernels it need not time, and run them in order before
   * anything reads or changes device bytes (reads, writes, copies, swaps,
   * `sync`, `endStep`), as a GPU stream does: the runtime's bookkeeping for
   * a run of calls then runs back to back, its code in the caches. Results
   * are bitwise the same; a kernel that fails reports it at the next of
   * those points, and the runtime then launches and reads nothing. Default: true
   * unless the backend's device is `cuda` (whose stream queues launches).
   */
  deferLaunches?: boolean;
  /** Host memory for swapping, bytes. Default: unlimited for `+swap` policies, else 0 (no swapping). */
  hostLimitBytes?: number;
  /** Evict storages as soon as no handle references them (lineage kept). Default true. */
  eagerEviction?: boolean;
  /** Record the step as a DTR-format trace (see {@link Runtime.trace}). Default false. */
  record?: boolean;
  /** Record the memory timeline. Default true. */
  timeline?: boolean;
  /** See `EngineOptions.leafRelease`. Default `"keep-if-needed"`. */
  leafRelease?: "keep-if-needed" | "free-unless-evicted";
  /**
   * Thrash limit X (see `EngineOptions.overheadLimit`): a call throws
   * `ThrashingError` once recomputation plus stalls pass (X - 1) x the compute
   * of the model calls so far. Default `Infinity`; `libra run` passes 2.0.
   */
  overheadLimit?: number;
  /** Event listener (also see {@link Runtime.subscribe}). */
  onEvent?: (e: RuntimeEvent) => void;
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/** Numbers per call in `Runtime.#sigs`: the longest signature (3 counts and 13 numbers) held there. */
const SIG_STRIDE = 16;
/**
 * Calls per step with a signature in `Runtime.#sigs` (2 MB at most, for a
 * program that never ends a step; lstm small makes 363 calls a step).
 */
const SIG_CALLS = 1 << 14;

/** Whether the signature at `o` of `sig` is that of a call with `params`, `ins` and `outs`. */
function sameSignature(
  sig: Float64Array,
  o: number,
  params: readonly number[],
  ins: readonly StorageNode[],
  outs: readonly StorageNode[],
): boolean {
  const np = params.length, ni = ins.length, no = outs.length;
  if (sig[o] !== np || sig[o + 1] !== ni || sig[o + 2] !== no) return false;
  let j = o + 3;
  for (let i = 0; i < np; i++) if (!Object.is(sig[j++], params[i])) return false;
  for (let i = 0; i < ni; i++) if (sig[j++] !== ins[i]!.bytes) return false;
  for (let i = 0; i < no; i++) if (sig[j++] !== outs[i]!.bytes) return false;
  return true;
}

function sameBytes(a: readonly number[], b: readonly StorageNode[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]!.bytes) return false;
  return true;
}

/** Calls per step whose output names are cached. */
const NAME_CACHE = 1 << 16;

/**
 * One kernel call in this many is timed into `stats.dispatchNs` (see
 * {@link Runtime.run}). A sample reads the clock four times (~0.5 us; ~10 us
 * after kernels that pushed the clock's path out of the caches, as gpt small's
 * do): on every call that would cost more than the runtime adds to a small
 * call in the dispatch bench; one in eight still put ~0.1 us a call on it.
 * Still ~270 samples in the 41 measured steps of a gpt small run.
 */
export const DISPATCH_SAMPLE = 32;

/** True for the names the runtime gives a step's own values: `c<call>.<k>` and `w<n>`. */
function stepLocal(name: string): boolean {
  const c = name.charCodeAt(0), d = name.charCodeAt(1);
  return (c === 99 || c === 119) && d >= 48 && d <= 57; // [cw]\d
}
/** A step's call output name `c<i>.<k>`. */
const STEP_OUTPUT = /^c(\d+)\.(\d+)$/;

/** A kernel call that passed `checkKernelCall`: its params, buffer sizes and in-place inputs. */
interface CheckedCall {
  readonly kernel: KernelName;
  readonly params: number[];
  readonly ins: number[];
  readonly outs: number[];
  readonly mutates: readonly number[];
  /** The cost of such a call, kept once priced when the cost model's costs are static. */
  cost: number | undefined;
}

/** Whether `e` is the entry of a call with `params`, `ins` and `outs` (its kernel's). */
function sameCall(
  e: CheckedCall,
  params: readonly number[],
  ins: readonly StorageNode[],
  outs: readonly StorageNode[],
): boolean {
  return sameNumbers(e.params, params) && sameBytes(e.ins, ins) && sameBytes(e.outs, outs);
}

/** The value in input buffer `i` of a call of `kernel`. */
function inputTensor(kernel: KernelName, ins: readonly StorageNode[], i: number): TensorNode {
  const x = ins[i]!;
  const t = x.tensors[0];
  if (t === undefined) {
    throw new KernelError(kernel, `input ${i} (buffer ${x.id}) was never written or computed`);
  }
  return t;
}

function hasConsumers(s: StorageNode): boolean {
  for (const t of s.tensors) if (t.consumers.length > 0) return true;
  return false;
}

/**
 * The re-materialization runtime as a `Backend`.
 *
 * @example
 * ```ts
 * import { Runtime } from "@libra/runtime";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * const rt = new Runtime({ backend: new ReferenceBackend(), budget: 1 << 20 });
 * const x = rt.alloc(16), y = rt.alloc(16);
 * rt.write(x, new Float32Array([-1, 2, -3, 4]));
 * rt.run("relu", [x], [y], [4]);
 * const out = new Float32Array(rt.read(y).buffer);
 * if (out[1] !== 2 || out[0] !== 0) throw new Error("relu");
 * ```
 */
export class Runtime implements Backend {
  readonly name: string;
  readonly device: DeviceKind;
  readonly hasData: boolean;
  /** The shared core (lineage, stats, timeline). */
  readonly engine: Engine;
  readonly #backend: Backend;
  readonly #exec: LiveExecutor;
  /** The cost model when its call costs are static (`staticCallCost`): calls are priced once per checked entry. */
  readonly #staticCost: CostModel | null;
  #ratio: number | undefined;
  readonly #listeners = new Set<(e: RuntimeEvent) => void>();
  #user: ((e: RuntimeEvent) => void) | undefined;
  #record: TraceEvent[] | null;
  #step = 0;
  #writes = 0;
  /**
   * Storages by name (read through {@link #named}): every live storage by its
   * value's name when built, kept up to date for host writes `w<n>` since (a
   * step's call outputs `c<i>.<k>` resolve through {@link #callOuts} first).
   * Built on first use after a step ends, from the lineage's storages as they
   * are then: only plan hooks read it, and hashing every carried value's name
   * at every step's end costs a model with many live values more than its calls.
   */
  #names = new Map<string, StorageNode>();
  /** {@link #names} is to be built again (a step ended since it was built). */
  #namesStale = false;
  /** Per call of this step (index since the step began): its output buffers. */
  readonly #callOuts: (readonly StorageNode[] | undefined)[] = [];
  /** Per kernel, by a hash of params and buffer sizes: the calls that passed `checkKernelCall`. */
  readonly #checked = new Map<string, Map<number, CheckedCall[]>>();
  /**
   * By call index in the step (the first {@link SIG_CALLS}): the entry of
   * {@link #checked} the call of that index found last. A training step
   * repeats its calls in order, so the call of the same index in the next
   * step is usually the same call, and is compared with that entry alone,
   * before two maps are looked into: with the caches cold after each kernel
   * (the step's tensors pass through them), those lookups cost about 2 us a
   * call on gpt small.
   */
  readonly #checkedAt: (CheckedCall | undefined)[] = [];
  /**
   * Per call index of {@link #checkedAt}, {@link SIG_STRIDE} numbers from
   * `index * SIG_STRIDE`: the counts of params, inputs and outputs, then the
   * params and the input and output sizes (or -1 where they do not fit,
   * compared by the entry's lists). A call is compared with these rather than
   * with the entry's three lists: consecutive calls read consecutive numbers
   * here, which the processor fetches ahead, where the lists are six objects
   * a call, each a fetch from memory when the caches are cold.
   */
  #sigs: Float64Array = new Float64Array(0);
  /** Scratch of {@link #runInPlace}: the storages it writes, their values' names, their references. */
  readonly #mutated: StorageNode[] = [];
  readonly #oldNames: string[] = [];
  readonly #ext: number[] = [];
  /** Scratch of {@link #runInPlace}: the kernel's storages and buffer list, by length. */
  readonly #storesBy: StorageNode[][] = [];
  readonly #bufsBy: DeviceBuffer[][] = [];
  /** Output names `c<index>.<k>` by call index in the step. */
  readonly #outNames: string[][] = [];
  /**
   * The scope of this step's local names (`c<i>.<k>`, `w<n>`), closed by
   * {@link endStep} with the prefix `s<step>.`: a tensor given such a name
   * carries it out of the step (see `TensorNode.carryName`), renamed when its
   * name is next read. (Renaming them all at the step's end, by a list of
   * them or a walk of the table, touched each: ~0.1 us a call of the 10k-live
   * dispatch stream under `dtr-eq`, a string each promoted with its tensor.)
   */
  #scope = new NameScope();
  /** Scratch of `run`: its input and output buffers and output specs. */
  readonly #ins: StorageNode[] = [];
  readonly #outs: StorageNode[] = [];
  readonly #specs: { bytes: number; storage: StorageNode; name: string }[] = [];

  /** A runtime over `options.backend` with the budget, policy and cost model of `options`. */
  constructor(options: RuntimeOptions) {
    this.#backend = options.backend;
    this.name = `runtime(${options.backend.name})`;
    this.device = options.backend.device;
    this.hasData = options.backend.hasData;
    const policy = typeof options.policy === "object"
      ? options.policy
      : createPolicy(options.policy ?? "dtr-eq", options.search ?? DEFAULT_SEARCH);
    let budgetBytes = Infinity;
    const b = options.budget;
    if (typeof b === "number") {
      if (!(b > 0)) throw new RangeError(`Runtime: budget must be > 0 bytes, got ${b}`);
      budgetBytes = b;
    } else if (b !== undefined) {
      if (!(b.ratio > 0)) throw new RangeError(`Runtime: budget ratio must be > 0, got ${b.ratio}`);
      if (b.peakBytes !== undefined) budgetBytes = Math.floor(b.ratio * b.peakBytes);
      else this.#ratio = b.ratio;
    }
    this.#exec = new LiveExecutor(
      options.backend,
      options.deferLaunches ?? options.backend.device !== "cuda",
    );
    const cost: CostModel = options.costModel ??
      new AnalyticCostModel(DEVICE_PEAKS[options.backend.device === "cuda" ? "h100" : "cpu"]);
    this.#staticCost = cost.staticCallCost === true ? cost : null;
    if (options.timeKernels !== undefined) {
      const all = options.timeKernels;
      this.#exec.timeAll = () => all;
    } else this.#exec.timeAll = () => cost.measures !== false;
    this.engine = new Engine({
      budgetBytes,
      policy,
      costModel: cost,
      executor: this.#exec,
      eagerEviction: options.eagerEviction ?? true,
      hostLimitBytes: options.hostLimitBytes ?? (needsOf(policy).swaps ? Infinity : 0),
      ...(options.backend.sampleBounds === undefined
        ? {}
        : { sampleBounds: options.backend.sampleBounds }),
      timeline: options.timeline ?? true,
      leafRelease: options.leafRelease ?? "keep-if-needed",
      overheadLimit: options.overheadLimit ?? Infinity,
      ...(typeof b === "object" && b.peakBytes !== undefined
        ? { knownFeasibleBytes: b.peakBytes }
        : {}),
    });
    this.#exec.budget = () => this.engine.budgetBytes;
    this.#user = options.onEvent;
    this.#updateListener();
    this.#record = options.record ? [] : null;
    this.engine.resolveName = (name) => {
      const s = this.#stepOutput(name) ?? this.#named().get(name);
      return s !== undefined && s.tensors[0]?.name === name ? s : undefined;
    };
  }

  /** The storage named `c<i>.<k>` (output k of this step's call i) when it still has that name. */
  #stepOutput(name: string): StorageNode | undefined {
    const m = STEP_OUTPUT.exec(name);
    if (m === null) return undefined;
    const s = this.#callOuts[Number(m[1])]?.[Number(m[2])];
    return s !== undefined && s.tensors[0]?.name === name ? s : undefined;
  }

  #leafName(): string {
    return `w${this.#writes++}`;
  }

  /** Makes a plan (from a planner, made on a recorded step) steer eviction, `fallback` choosing beyond it. */
  applyPlan(plan: Plan, fallback: EvictionPolicy = this.engine.policy): void {
    this.engine.setPolicy(planPolicy(plan, fallback));
  }

  /** Statistics (swap stall includes waits on prefetches). */
  get stats(): RuntimeStats {
    const s = this.engine.stats;
    return { ...s, swapStallNs: s.swapStallNs + this.#exec.asyncStallNs };
  }

  /** The memory timeline. */
  get timeline(): Timeline {
    return this.engine.timeline;
  }

  /** The lineage graph. */
  get lineage(): Lineage {
    return this.engine.lineage;
  }

  /** The budget in force (Infinity while a ratio budget is still being measured). */
  get budgetBytes(): number {
    return this.engine.budgetBytes;
  }

  /**
   * Bytes of free device buffers the runtime keeps for reuse (never more than
   * the budget, nor than the most its values held at once, leaves room for).
   */
  get cachedBytes(): number {
    return this.#exec.cachedBytes;
  }

  /** Gives the cached free device buffers back to the backend. */
  releaseCached(): void {
    this.#exec.releaseCached();
  }

  /** Sets the budget in bytes. */
  setBudget(bytes: number): void {
    this.engine.setBudget(bytes);
  }

  /** Subscribes to events; returns the unsubscribe function. */
  subscribe(fn: (e: RuntimeEvent) => void): () => void {
    this.#listeners.add(fn);
    this.#updateListener();
    return () => {
      const had = this.#listeners.delete(fn);
      this.#updateListener();
      return had;
    };
  }

  /** Gives the engine a listener only while someone listens (events cost nothing otherwise). */
  #updateListener(): void {
    const user = this.#user;
    const listeners = this.#listeners;
    this.engine.setEventListener(
      user === undefined && listeners.size === 0 ? undefined : (e) => {
        user?.(e);
        for (const l of listeners) l(e);
      },
    );
  }

  /**
   * Marks the end of a training step. With a `{ ratio }` budget and no peak
   * given, the first step runs without a budget and its peak sets the budget
   * here. Every completed step records its budget (its peak without one): errors
   * report the largest, which every step so far fits, as known to work. Call
   * indices (plan hooks, profiled costs) restart at 0, and so do the names of
   * the step's own values: outputs `c<i>.<k>` (output k of call i) and host
   * writes `w<n>`, so a plan made on one step's trace names the same values in
   * the next step. Values that outlive the step are renamed with the step's
   * number as prefix (`c3.0` of step 0 becomes `s0.c3.0`, a name it keeps for
   * good), and a recording restarts with them declared as CONSTANTs, so each
   * step's trace stands alone and no name is defined twice in it.
   */
  endStep(): void {
    this.#exec.flush();
    if (this.#ratio !== undefined) {
      const peak = this.engine.stats.peakBytes;
      this.engine.noteFeasible(peak);
      this.engine.setBudget(Math.max(1, Math.floor(this.#ratio * peak)));
      this.#ratio = undefined;
    } else if (Number.isFinite(this.engine.budgetBytes)) {
      this.engine.noteFeasible(this.engine.budgetBytes);
    } else {
      this.engine.noteFeasible(this.engine.stats.peakBytes);
    }
    this.engine.stepBase = this.engine.callIndex;
    // The next step's choices depend on that step alone (a sampled search's draws restart).
    this.engine.policy.startStep?.();
    // What only the finished step could need (copies kept for its recomputation) goes now,
    // so the next step starts with the memory its trace's CONSTANTs declare.
    this.engine.collect();
    this.#renameCarried(`s${this.#step}.`);
    this.#step++;
    this.#writes = 0;
    if (this.#record !== null) this.#record = this.#liveConstants();
  }

  /** A recording's start: the values the program holds now, as CONSTANTs. */
  #liveConstants(): TraceEvent[] {
    const events: TraceEvent[] = [];
    for (const s of this.engine.lineage.storages.values()) {
      const t = s.tensors[0];
      if (
        t === undefined || s.extRefs <= 0 || s.residency === "empty" || s.residency === "freed"
      ) continue;
      events.push({ kind: "constant", name: t.name, bytes: s.bytes, line: 0 });
    }
    return events;
  }

  /**
   * Starts recording (as `record: true` does from the start), with the values
   * the program holds now declared as CONSTANTs: called between steps, the
   * next {@link trace} is that step's, as a runtime recording all along would
   * give it, without the cost of recording every step before (an event per
   * call and per value: a third more time per step on lstm small). A no-op
   * while recording.
   */
  startRecording(): void {
    if (this.#record === null) this.#record = this.#liveConstants();
  }

  /**
   * Gives every value named after this step's numbering (`c<i>.<k>`, `w<n>`)
   * the name `<prefix><name>` (when its name is next read: see
   * {@link #scope}), so the next step can reuse the short names. Values
   * already prefixed keep their names.
   */
  #renameCarried(prefix: string): void {
    // A new map rather than `clear()`: a cleared map's old table keeps pointing at its
    // new one, a chain that kept old steps' storages alive through minor collections.
    this.#names = new Map();
    this.#namesStale = true;
    this.#callOuts.length = 0;
    this.#scope.prefix = prefix;
    this.#scope = new NameScope();
  }

  /** Notes that `t` took a step-local name: it carries it out of the step (see {@link #scope}). */
  #named1(t: TensorNode): void {
    t.carryName(this.#scope);
  }

  /** {@link #names}, built first if a step ended since it was. */
  #named(): Map<string, StorageNode> {
    if (this.#namesStale) {
      this.#namesStale = false;
      const m = this.#names;
      this.engine.lineage.storages.forEach((s) => {
        const root = s.tensors[0];
        if (root !== undefined && s.residency !== "freed") m.set(root.name, s);
      });
    }
    return this.#names;
  }

  /**
   * The trace recorded since the start, the last {@link endStep} or
   * {@link startRecording} (requires `record: true` or `startRecording()`).
   */
  trace(): Trace {
    if (this.#record === null) {
      throw new Error(
        "Runtime.trace(): create the runtime with record: true, or call startRecording() first",
      );
    }
    return { events: [...this.#record], source: this.name };
  }

  /** Starts bringing a swapped buffer back ahead of use (asynchronous where the backend is). */
  prefetch(buf: DeviceBuffer): void {
    const s = this.#own(buf, "prefetch");
    const t = s.tensors[0];
    if (t !== undefined && s.residency === "swapped") this.engine.materialize(t);
  }

  // ----------------------------------------------------------- Backend

  alloc(bytes: number): DeviceBuffer {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new RangeError(
        `${this.name}.alloc: bytes must be a non-negative integer, got ${bytes}`,
      );
    }
    // The storage is the buffer: no handle object of its own per allocation.
    const s = this.engine.lineage.addStorage(bytes);
    s.buffer = 1;
    return s;
  }

  free(buf: DeviceBuffer): void {
    const s = this.#own(buf, "free");
    s.buffer = 2;
    const t = s.tensors[0];
    if (t === undefined) {
      this.engine.lineage.removeStorage(s);
      return;
    }
    this.#record?.push({ kind: "release", name: t.name, line: 0 });
    this.engine.release(t);
  }

  write(buf: DeviceBuffer, data: ArrayBufferView, offsetBytes = 0): void {
    const s = this.#own(buf, "write");
    if (offsetBytes < 0 || offsetBytes + data.byteLength > s.bytes) {
      throw new RangeError(
        `${this.name}.write: ${data.byteLength} bytes at offset ${offsetBytes} do not fit a buffer of ${s.bytes}`,
      );
    }
    const old = s.tensors[0];
    let t: TensorNode;
    if (old === undefined) {
      t = this.engine.leaf(s.bytes, this.#leafName(), { storage: s });
    } else {
      const full = offsetBytes === 0 && data.byteLength === s.bytes;
      if (!full) this.engine.materialize(old);
      this.engine.invalidate(s);
      // Bringing back what was computed from it may have evicted it again; a
      // partial write keeps the rest of its bytes, so they must be on the device.
      if (!full) this.engine.materialize(old);
      this.#record?.push({ kind: "release", name: old.name, line: 0 });
      if (!this.#namesStale && this.#names.get(old.name) === s) this.#names.delete(old.name);
      if (full) {
        this.engine.retire(s, false);
        t = this.engine.leaf(s.bytes, this.#leafName(), { storage: s });
      } else {
        const ext = this.engine.retire(s, true);
        t = this.engine.adoptLeaf(s, ext, this.#leafName());
      }
    }
    if (!this.#namesStale) this.#names.set(t.name, s);
    this.#named1(t);
    this.#record?.push({ kind: "constant", name: t.name, bytes: s.bytes, line: 0 });
    this.#exec.flushFor(s.data as DeviceBuffer);
    this.#backend.write(s.data as DeviceBuffer, data, offsetBytes);
  }

  read(buf: DeviceBuffer, bytes?: number): Uint8Array {
    const s = this.#own(buf, "read");
    const t = s.tensors[0];
    if (t === undefined) {
      throw new Error(`${this.name}.read: buffer ${buf.id} was never written or computed`);
    }
    // A plan made on the recording keeps the value on the device for the read.
    this.#record?.push({ kind: "read", name: t.name, line: 0 });
    return this.engine.withInputs([t], () => {
      this.#exec.wait(s);
      this.#exec.flushFor(s.data as DeviceBuffer);
      return this.#backend.read(s.data as DeviceBuffer, bytes);
    });
  }

  /**
   * Runs `kernel` (see {@link Backend.run}). Every {@link DISPATCH_SAMPLE}th
   * call is timed, its kernels with it: its time less the device work and the
   * bookkeeping it counted goes to `stats.dispatchNs`, that many times over.
   */
  run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    if (++this.#dispatchTick < DISPATCH_SAMPLE) {
      this.#run(kernel, inputs, outputs, params);
      return;
    }
    this.#dispatchTick = 0;
    const exec = this.#exec, st = this.engine.stats;
    const d0 = exec.deviceNs, b0 = st.bookkeepingNs;
    exec.sampling = true;
    const t0 = performance.now();
    try {
      this.#run(kernel, inputs, outputs, params);
    } finally {
      // Less its clock reads: the kernel's two (of which the kernel's time took one) and
      // half of each of its own (see `clockCost`).
      const own = (performance.now() - t0) * 1e6 - (exec.deviceNs - d0) - (st.bookkeepingNs - b0) -
        2 * clockCost();
      exec.sampling = false;
      if (own > 0) st.dispatchNs += DISPATCH_SAMPLE * own;
    }
  }

  #dispatchTick = 0;

  #run(
    kernel: KernelName,
    inputs: readonly DeviceBuffer[],
    outputs: readonly DeviceBuffer[],
    params: readonly number[],
  ): void {
    const ni = inputs.length, no = outputs.length;
    // Scratch lists (a call is done before the next one starts); what outlives the call is copied.
    const ins = this.#ins, outs = this.#outs;
    // Set only when it changes: the length setter is a call into the runtime.
    if (ins.length !== ni) ins.length = ni;
    if (outs.length !== no) outs.length = no;
    for (let i = 0; i < ni; i++) ins[i] = this.#own(inputs[i]!, kernel);
    for (let k = 0; k < no; k++) outs[k] = this.#own(outputs[k]!, kernel);
    const checked = this.#check(kernel, ins, outs, params);
    const mutates = checked.mutates;
    for (let k = 0; k < no; k++) {
      const o = outs[k]!;
      for (let i = 0; i < ni; i++) {
        if (ins[i] === o) {
          throw new KernelError(kernel, `output buffer ${o.id} is also an input`);
        }
      }
      for (let j = 0; j < k; j++) {
        if (outs[j] === o) {
          throw new KernelError(kernel, `output buffer ${o.id} is also output ${j}`);
        }
      }
    }
    // Kept by the call's lineage: made at its final length (a push reserves 17 slots).
    const tensors: TensorNode[] = ni === 1 ? [inputTensor(kernel, ins, 0)] : new Array(ni);
    if (ni !== 1) { for (let i = 0; i < ni; i++) tensors[i] = inputTensor(kernel, ins, i); }
    // The params equal the checked entry's copy number for number: calls share that copy.
    const p = checked.params;
    if (mutates.length > 0) {
      if (no > 0) {
        throw new KernelError(
          kernel,
          "in-place kernels with outputs are not supported by the runtime",
        );
      }
      this.#runInPlace(kernel, tensors, checked);
      return;
    }
    const record = this.#record;
    const engine = this.engine;
    for (let k = 0; k < no; k++) {
      const s = outs[k]!;
      const old = s.tensors[0];
      if (old !== undefined) {
        // A value nothing was computed from needs no dependents made independent.
        if (hasConsumers(s)) engine.invalidate(s);
        record?.push({ kind: "release", name: old.name, line: 0 });
        // Its device buffer goes to the executor's cache, where the new value finds it.
        engine.retire(s, false);
      }
    }
    const index = engine.callIndex - engine.stepBase;
    // Names `c<index>.<k>` repeat every step: made once (for the first 64k calls of a step),
    // each call's list at its length (an empty one, written at 0, reserved 17 slots: 0.5 MB
    // a runtime in the 4096-call steps of the dispatch stream).
    const names = index < NAME_CACHE
      ? this.#outNames[index] ?? (this.#outNames[index] = new Array<string>(no))
      : undefined;
    const specs = this.#specs;
    if (specs.length > no) specs.length = no;
    for (let k = 0; k < no; k++) {
      const o = outs[k]!;
      let name = names?.[k];
      if (name === undefined) {
        name = `c${index}.${k}`;
        if (names !== undefined) names[k] = name;
      }
      const spec = specs[k];
      if (spec === undefined) specs.push({ bytes: o.bytes, storage: o, name });
      else {
        spec.bytes = o.bytes;
        spec.storage = o;
        spec.name = name;
      }
    }
    // Names `c<index>.<k>` resolve through this (a string-keyed map costs more than the
    // call) for plans and recordings only: without `endStep` it would grow with every call.
    if (record !== null || engine.policy.hooks !== undefined) this.#callOuts[index] = outs.slice();
    // A static cost model prices the call as the engine would after running it (from the
    // same facts: op, params and the bytes of its fresh outputs, which the entry's sizes fix).
    let cost = checked.cost;
    if (cost === undefined && this.#staticCost !== null) {
      let totalBytes = 0;
      for (let k = 0; k < no; k++) totalBytes += outs[k]!.bytes;
      cost = this.#staticPrice(kernel, checked, index, totalBytes, true);
    }
    const results = engine.compute(kernel, p, tensors, specs, cost);
    for (let k = 0; k < results.length; k++) this.#named1(results[k]!);
    if (record !== null) {
      record.push({
        kind: "call",
        op: kernel,
        args: tensors.map((t) => t.name),
        results: results.map((r) => ({ name: r.name, bytes: r.storage.bytes, alias: -1 })),
        timeNs: results[0]!.producer!.cost,
        backward: kernel.endsWith("_backward"),
        params: p,
        line: 0,
      });
    }
  }

  /**
   * `checkKernelCall`, skipped when a call of the kernel with the same params
   * and buffer sizes passed before (the check depends on nothing else; a
   * model repeats a few dozen distinct calls, which the wrapped backend checks
   * again). Returns the entry: the kernel's in-place inputs (`mutates`) and a
   * copy of the params (never modified: the calls with these params share it).
   */
  #check(
    kernel: KernelName,
    ins: readonly StorageNode[],
    outs: readonly StorageNode[],
    params: readonly number[],
  ): CheckedCall {
    const index = this.engine.callIndex - this.engine.stepBase;
    if (index >= SIG_CALLS) return this.#lookUp(kernel, ins, outs, params);
    const at = this.#checkedAt[index];
    if (at !== undefined && at.kernel === kernel) {
      const sig = this.#sigs, o = index * SIG_STRIDE;
      const same = sig[o] === -1
        ? sameCall(at, params, ins, outs)
        : sameSignature(sig, o, params, ins, outs);
      if (same) return at;
    }
    const e = this.#lookUp(kernel, ins, outs, params);
    const list = this.#checkedAt;
    // Filled in index order (a gap would make the list sparse, and slower to read).
    while (list.length < index) list.push(undefined);
    list[index] = e;
    this.#sign(index, params, ins, outs);
    return e;
  }

  /** Writes the signature of the call of `index` (see {@link #sigs}). */
  #sign(
    index: number,
    params: readonly number[],
    ins: readonly StorageNode[],
    outs: readonly StorageNode[],
  ): void {
    let sig = this.#sigs;
    const o = index * SIG_STRIDE;
    if (sig.length < o + SIG_STRIDE) {
      const grown = new Float64Array(Math.max(2 * sig.length, o + SIG_STRIDE));
      grown.set(sig);
      sig = this.#sigs = grown;
    }
    const np = params.length, ni = ins.length, no = outs.length;
    if (3 + np + ni + no > SIG_STRIDE) {
      sig[o] = -1; // compared by the entry's lists
      return;
    }
    sig[o] = np;
    sig[o + 1] = ni;
    sig[o + 2] = no;
    let j = o + 3;
    for (let i = 0; i < np; i++) sig[j++] = params[i]!;
    for (let i = 0; i < ni; i++) sig[j++] = ins[i]!.bytes;
    for (let i = 0; i < no; i++) sig[j++] = outs[i]!.bytes;
  }

  /** {@link #check} by the maps of {@link #checked}: the entry found, or a new one. */
  #lookUp(
    kernel: KernelName,
    ins: readonly StorageNode[],
    outs: readonly StorageNode[],
    params: readonly number[],
  ): CheckedCall {
    let h = ins.length * 31 + outs.length;
    for (let i = 0; i < params.length; i++) h = (Math.imul(h, 31) + (params[i]! | 0)) | 0;
    for (let i = 0; i < ins.length; i++) h = (Math.imul(h, 31) + ins[i]!.bytes) | 0;
    for (let i = 0; i < outs.length; i++) h = (Math.imul(h, 31) + outs[i]!.bytes) | 0;
    let byKernel = this.#checked.get(kernel);
    if (byKernel === undefined) this.#checked.set(kernel, byKernel = new Map());
    const bucket = byKernel.get(h);
    if (bucket !== undefined) {
      for (const e of bucket) {
        if (sameCall(e, params, ins, outs)) return e;
      }
    }
    const inBytes = ins.map((x) => x.bytes), outBytes = outs.map((x) => x.bytes);
    checkKernelCall(kernel, inBytes, outBytes, params);
    const mutates = kernelMutates(kernel, params);
    // Bounded: a stream of ever-new shapes checks every call and remembers the latest ones.
    if (byKernel.size >= 4096) byKernel.clear();
    const e = {
      kernel,
      params: params.slice(),
      ins: inBytes,
      outs: outBytes,
      mutates,
      cost: undefined,
    };
    if (bucket === undefined) byKernel.set(h, [e]);
    else bucket.push(e);
    return e;
  }

  /**
   * The static cost model's price of a call of `checked` that writes
   * `totalBytes`, kept on the entry when `keep` (the price is then the same
   * for every call of it).
   */
  #staticPrice(
    kernel: KernelName,
    checked: CheckedCall,
    index: number,
    totalBytes: number,
    keep: boolean,
  ): number {
    const cost = this.#staticCost!.callCost({
      op: kernel,
      params: checked.params,
      index,
      totalBytes,
    });
    if (keep) checked.cost = cost;
    return cost;
  }

  #runInPlace(kernel: KernelName, tensors: TensorNode[], checked: CheckedCall): void {
    const engine = this.engine, params = checked.params;
    // The storages it writes, once each, with their values' names (scratch lists:
    // nothing in here calls back into the runtime).
    const mutated = this.#mutated, oldNames = this.#oldNames, ext = this.#ext;
    clearList(mutated);
    clearList(oldNames);
    clearList(ext);
    let bytes = 0;
    // Repeats found by a fresh stamp (an optimizer's update of every parameter writes ~100).
    const stamp = engine.lineage.nextStamp();
    for (const m of checked.mutates) {
      const s = tensors[m]!.storage;
      if (s.stamp === stamp) continue;
      s.stamp = stamp;
      mutated.push(s);
      oldNames.push(s.tensors[0]!.name);
      bytes += s.bytes;
    }
    const names = this.#record === null ? null : tensors.map((t) => t.name);
    // The buffers, as they are now: overwriting moves the inputs' values to other
    // storages (a copy, or a tombstone) and the kernel writes these.
    const n = tensors.length;
    const stores = this.#storesBy[n] ?? (this.#storesBy[n] = new Array(n));
    for (let i = 0; i < n; i++) stores[i] = tensors[i]!.storage;
    let ns: number | undefined;
    engine.beforeInPlace();
    const mark = engine.lockInputs(tensors);
    try {
      // Copy-on-write: a value that recorded calls read keeps its bytes in a
      // new storage, so everything computed from it stays recomputable.
      for (let i = 0; i < mutated.length; i++) {
        const s = mutated[i]!;
        // A leaf no recorded call read (an optimizer's state) changes in place: no lineage
        // refers to its old value, so its node stays (-1: nothing to retire and adopt).
        ext.push(unreadLeaf(s) ? -1 : engine.overwrite(s, s.bytes % 4 === 0));
      }
      const bufs = this.#bufsBy[n] ?? (this.#bufsBy[n] = new Array(n));
      for (let i = 0; i < n; i++) {
        const s = stores[i]!;
        this.#exec.wait(s);
        bufs[i] = s.data as DeviceBuffer;
      }
      try {
        // Timed as the executor times calls: when the cost model or the caller wants it, or
        // in a dispatch sample (device time, taken out of the sampled call's).
        const exec = this.#exec, timed = exec.timeAll();
        const dt = exec.launch(kernel, bufs, params, timed);
        if (timed) ns = dt;
      } finally {
        for (let i = 0; i < n; i++) {
          bufs[i] = undefined as unknown as DeviceBuffer;
          stores[i] = undefined as unknown as StorageNode;
        }
      }
    } finally {
      engine.unlockInputs(mark);
    }
    for (let i = 0; i < mutated.length; i++) {
      if (ext[i]! < 0) continue;
      const t = engine.adoptLeaf(mutated[i]!, ext[i]!, oldNames[i]!);
      if (stepLocal(t.name)) this.#named1(t);
    }
    // A static cost model prices the update as for other calls. The bytes it writes are the
    // entry's only when no two of its written inputs share a buffer: kept and reused only then.
    const distinct = mutated.length === checked.mutates.length;
    let fixed = distinct ? checked.cost : undefined;
    if (fixed === undefined && this.#staticCost !== null) {
      const index = engine.callIndex - engine.stepBase;
      fixed = this.#staticPrice(kernel, checked, index, bytes, distinct);
    }
    const cost = engine.noteInPlace(kernel, params, ns, bytes, fixed);
    if (names !== null) {
      this.#record!.push({
        kind: "mutate",
        op: kernel,
        args: names,
        mutate: [...checked.mutates],
        timeNs: cost,
        backward: false,
        params,
        line: 0,
      });
    }
  }

  memory(): MemoryInfo {
    return {
      usedBytes: this.engine.used,
      peakBytes: this.engine.stats.peakBytes,
      totalBytes: this.engine.budgetBytes,
    };
  }

  resetPeak(): void {
    this.engine.stats.peakBytes = this.engine.used;
  }

  sync(): void {
    this.#exec.flush();
    this.#backend.sync();
  }

  allocHost(bytes: number): HostBuffer {
    return this.#backend.allocHost(bytes);
  }

  freeHost(buf: HostBuffer): void {
    this.#backend.freeHost(buf);
  }

  copy(src: DeviceBuffer, dst: HostBuffer): void;
  copy(src: HostBuffer, dst: DeviceBuffer): void;
  copy(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): void {
    if (src instanceof StorageNode) {
      const bytes = this.read(src, Math.min(src.bytes, dst.bytes));
      (dst as HostBuffer).data.set(bytes);
    } else {
      this.write(
        dst as DeviceBuffer,
        (src as HostBuffer).data.subarray(0, (dst as DeviceBuffer).bytes),
      );
    }
  }

  copyAsync(src: DeviceBuffer, dst: HostBuffer): Transfer;
  copyAsync(src: HostBuffer, dst: DeviceBuffer): Transfer;
  copyAsync(src: DeviceBuffer | HostBuffer, dst: DeviceBuffer | HostBuffer): Transfer {
    this.copy(src as DeviceBuffer, dst as HostBuffer);
    return { done: true, wait() {} };
  }

  /** `buf` as the storage it is, when this runtime allocated it and it was not freed. */
  #own(buf: DeviceBuffer, what: string): StorageNode {
    if (!(buf instanceof StorageNode) || buf.buffer === 0 || buf.owner !== this.engine.lineage) {
      throw new TypeError(
        `${this.name}.${what}: buffer ${buf.id} was not allocated by this runtime`,
      );
    }
    if (buf.buffer === 2) {
      throw new Error(`${this.name}.${what}: buffer ${buf.id} was already freed`);
    }
    return buf;
  }
}
