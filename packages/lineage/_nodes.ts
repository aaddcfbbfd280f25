/**
 * The nodes of the lineage graph: storages, the tensors (values) living in
 * them and the calls that produced them (see {@link Lineage}).
 *
 * @module
 */

import type { EqNode } from "./union_find.ts";
import type { Lineage } from "./graph.ts";

/**
 * Where a storage's bytes are:
 * - `empty`: allocated virtually, never written or computed;
 * - `resident`: on the device;
 * - `evicted`: dropped, recomputable from lineage;
 * - `swapped`: copied to host memory;
 * - `freed`: gone for good (no one can need it again).
 */
export type Residency = "empty" | "resident" | "evicted" | "swapped" | "freed";

/** A connected set of evicted storages with its summed compute (a cache of the lineage). */
export interface EvictedComponent {
  /** Summed compute of the members. */
  readonly sum: number;
  /** Summed absolute compute of the members. */
  readonly abs: number;
  /** Every member's compute is an integer and `abs` is a safe integer (sums exact in any order). */
  readonly exact: boolean;
  /** Cache version it was built under. */
  readonly version: number;
}

/**
 * A storage's caches for the lineage's cost questions, owned by its
 * {@link Lineage} (`null` on a storage until a cost function asks about it or
 * near it, so storages of runs whose policy asks nothing carry none).
 *
 * - `regionCost`, `regionVersion`, `component`: the evicted region
 *   ({@link Lineage.evictedNeighborhoodCost}, `dtr`);
 * - `noEvictedNeighbors`, `neighbors`, `neighborsAt`: the neighbour list and
 *   "no evicted neighbour" flag ({@link Lineage.neighborClassCost}, `dtr-eq`);
 * - `eq`: the storage's `dtr-eq` equivalence class while evicted, which the
 *   runtime keeps through {@link Lineage.joinEvictedClass},
 *   {@link Lineage.leaveClass} and {@link Lineage.forgetClass} once a policy
 *   needs classes.
 *
 * Every field is set in the constructor (one shape for all records).
 */
export class CostCaches {
  /** Cached {@link Lineage.evictedNeighborhoodCost} (valid while `regionVersion` is current). */
  regionCost = 0;
  /** Version of {@link regionCost}; -1 when stale. */
  regionVersion: number = -1;
  /** While evicted: the connected evicted component holding the storage (cached by version). */
  component: EvictedComponent | null = null;
  /** Non-zero when the storage is known to have no evicted neighbour; 0 when unknown. */
  noEvictedNeighbors = 0;
  /**
   * Every neighbour (evicted or not) in the order {@link Lineage.evictedNeighbors}
   * walks them, kept while the edges stay as they were (valid when
   * {@link neighborsAt} is the lineage's edge epoch).
   */
  neighbors: StorageNode[] | null = null;
  /** Edge epoch {@link neighbors} was walked at; 0 when it lapsed. */
  neighborsAt = 0;
  /** Equivalence-class node while evicted (`dtr-eq`); `null` otherwise. */
  eq: EqNode | null = null;
}

/** The {@link CostCaches} of `s`, made (empty) on first use. */
export function costCaches(s: StorageNode): CostCaches {
  return s.caches ??= new CostCaches();
}

/**
 * A storage's links in the runtime's evictable pool, owned by that pool
 * (`@libra/runtime`); the lineage never reads them. One record per storage,
 * made with it: the pool's insert and remove touch nothing else.
 */
export class PoolLinks {
  /** Position in the pool's array of members, or -1 outside the pool. */
  index: number = -1;
  /** Previous member in insertion order (null at the head or outside). */
  prev: StorageNode | null = null;
  /** Next member in insertion order (null at the tail or outside). */
  next: StorageNode | null = null;
}

/**
 * A storage: one device allocation shared by a tensor and its views.
 *
 * Its state is grouped by owner:
 * - graph facts on the node itself: identity and size, the tensors, residency,
 *   pins, locks, references, compute, last access and the counters of
 *   evictions and re-materializations; the lineage makes and links the node,
 *   the runtime updates residency, pins, locks, references and clock, and
 *   policies read them;
 * - {@link caches}: the lineage's {@link CostCaches} (evicted regions,
 *   neighbour lists, `dtr-eq` classes), kept by its cost functions;
 * - {@link pool}: the runtime's {@link PoolLinks};
 * - {@link data} and {@link host}: the runtime executor's payloads;
 * - {@link stamp}: traversal scratch shared by every walk (lineage and
 *   runtime alike draw stamps from {@link Lineage.nextStamp}), flat because
 *   each step of a walk reads it.
 */
export class StorageNode {
  /** Unique id. */
  readonly id: number;
  /** Size in bytes. */
  readonly bytes: number;
  /** Tensors living in this storage; `tensors[0]` is the root (owner), the others are views. */
  tensors: TensorNode[] = [];
  #residency: Residency = "empty";
  /** The graph that made this storage (told when it enters or leaves `evicted`). */
  owner: Lineage | null = null;
  /**
   * The lineage's cost caches; `null` until a cost function asks about this
   * storage or a neighbour's class is kept (see {@link CostCaches}).
   */
  caches: CostCaches | null = null;
  /** Links in the runtime's evictable pool (see {@link PoolLinks}). */
  readonly pool: PoolLinks = new PoolLinks();

  /** Current residency. */
  get residency(): Residency {
    return this.#residency;
  }
  set residency(r: Residency) {
    const o = this.owner;
    if (o !== null && (r === "evicted") !== (this.#residency === "evicted")) {
      if (r === "evicted") {
        this.#residency = r;
        if (o.tracksNeighborhoods) o.neighborhoodChanged(this);
        if (o.cachesEvictedNeighbors) o.evictedNeighborAppeared(this);
      } else {
        if (o.tracksNeighborhoods) o.neighborhoodChanged(this);
        this.#residency = r;
      }
      return;
    }
    this.#residency = r;
  }
  /** Temporary pins (inputs of the running call, reads); a locked storage is never evicted. */
  locks = 0;
  /** Permanently pinned (constants, parameters, outputs): never evicted. */
  pinned = false;
  /** External references (handles held by the program) over all tensors of the storage. */
  extRefs = 0;
  /** Clock value of the last access (staleness = clock - lastAccess). */
  lastAccess: number = -Infinity;
  /** Summed cost of the distinct calls producing the tensors of this storage. */
  compute = 0;
  /** Scratch stamp for traversals (see {@link Lineage.nextStamp}). */
  stamp = 0;
  /** Times evicted (drop or swap), counted by the runtime. */
  evictions = 0;
  /** Times re-materialized (recompute or swap-in), counted by the runtime. */
  remats = 0;
  /** Backend payload (device or host buffer) owned by the runtime's executor. */
  data: unknown = undefined;
  /** Host copy while swapped (owned by the runtime's executor). */
  host: unknown = undefined;

  /** A storage of `bytes` with identifier `id`. */
  constructor(id: number, bytes: number) {
    this.id = id;
    this.bytes = bytes;
  }

  /** The owning tensor (first created in this storage). */
  get root(): TensorNode {
    return this.tensors[0]!;
  }

  /** True when the owning tensor has a replayable producer (so it may be dropped). */
  get droppable(): boolean {
    const p = this.tensors[0]?.producer;
    return p !== null && p !== undefined && p.replayable;
  }

  /** A name for messages: the root tensor's name. */
  get name(): string {
    return this.tensors[0]?.name ?? `s${this.id}`;
  }
}

/** A value: a tensor produced by a call (or a leaf), living in a storage. */
export class TensorNode {
  /** Unique id. */
  readonly id: number;
  /**
   * Name (trace name or `t<id>`). The live runtime renames values that outlive
   * a step (see `Runtime.endStep`), so it is not readonly.
   */
  name: string;
  /** Storage holding the bytes. */
  storage: StorageNode;
  /** The call that produced it; `null` for leaves (constants, host writes). */
  producer: CallNode | null;
  /** Output index in the producer. */
  readonly index: number;
  /** True while the value is available on the device. */
  defined = false;
  /** External references to this tensor. */
  extRefs = 0;
  /** Calls that read this tensor. */
  consumers: CallNode[] = [];

  /** A tensor (see the fields). */
  constructor(
    id: number,
    name: string,
    storage: StorageNode,
    producer: CallNode | null,
    index: number,
  ) {
    this.id = id;
    this.name = name;
    this.storage = storage;
    this.producer = producer;
    this.index = index;
  }

  /** True when this tensor is a view of another tensor's storage. */
  get isAlias(): boolean {
    return this.storage.tensors[0] !== this;
  }
}

/** A recorded call: what to replay to recompute its outputs. */
export class CallNode {
  /** Unique id (sequence number of recording). */
  readonly id: number;
  /** Operator name: a kernel-table name in live runs, any name in traces. */
  readonly op: string;
  /** Kernel params (incl. Philox seed/offset) replayed verbatim. */
  readonly params: readonly number[];
  /** Input tensors in order. */
  readonly inputs: readonly TensorNode[];
  /** Output tensors in order. */
  outputs: TensorNode[] = [];
  /** Per output: -1 for fresh storage, else the index of the input it is a view of. */
  readonly aliases: readonly number[];
  /** Per output: bytes of fresh storage (0 for views). */
  readonly sizes: readonly number[];
  /** Sum of `sizes`: the memory a (re)computation needs. */
  readonly totalBytes: number;
  /** Cost in nanoseconds (clock units) used for scoring and simulation. */
  cost: number;
  /** False once an input's value has been overwritten (in-place update): it cannot be replayed. */
  replayable = true;
  /** True for calls in the backward pass. */
  backward: boolean;

  /** A call (see the fields). */
  constructor(
    id: number,
    op: string,
    params: readonly number[],
    inputs: readonly TensorNode[],
    sizes: readonly number[],
    aliases: readonly number[],
    cost: number,
    backward: boolean,
  ) {
    this.id = id;
    this.op = op;
    this.params = params;
    this.inputs = inputs;
    this.sizes = sizes;
    this.aliases = aliases;
    let total = 0;
    for (const s of sizes) total += s;
    this.totalBytes = total;
    this.cost = cost;
    this.backward = backward;
  }
}
