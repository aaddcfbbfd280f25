/**
 * The lineage graph: storages, the tensors (values) that live in them, and the
 * calls that produced them. A call is `{ op, params, inputs, outputs, cost }`;
 * an output either owns a fresh storage or is a view (alias) of an input's
 * storage. The re-materialization runtime keeps this graph; eviction policies
 * read it; planners export it.
 *
 * All traversals use explicit stacks, so arbitrarily long chains of evicted
 * storages never overflow the JavaScript call stack.
 *
 * @module
 */

import { jsonToDot, lineageToJSON } from "./_export.ts";
import { ClassForest, DEPARTED, NO_CLASS } from "./union_find.ts";
import { StorageTable } from "./_storage_table.ts";
import {
  CallNode,
  type EvictedComponent,
  NameScope,
  newRegionCache,
  type RegionCache,
  type Residency,
  StorageNode,
  TensorNode,
} from "./_nodes.ts";
import { clearList } from "@libra/util/list";

export {
  CallNode,
  type EvictedComponent,
  NameScope,
  type RegionCache,
  type Residency,
  StorageNode,
  StorageTable,
  TensorNode,
};

/** Output description for {@link Lineage.addCall}. */
export interface OutputSpec {
  /** Tensor name; default `t<id>`. */
  name?: string;
  /** Bytes of fresh storage (ignored for views). */
  bytes: number;
  /** -1 (default) for fresh storage, or the index of the input this output is a view of. */
  alias?: number;
  /** Existing empty storage to produce into (live runtime: the storage a buffer it allocated is). */
  storage?: StorageNode;
}

/** JSON export of the graph (see {@link Lineage.toJSON}). */
export interface LineageJSON {
  /** The storages: id, bytes, residency, pin, external references, tensor names. */
  storages: {
    id: number;
    bytes: number;
    residency: Residency;
    pinned: boolean;
    extRefs: number;
    tensors: string[];
  }[];
  /** The calls: id, op, input and output tensor names, cost, whether replayable. */
  calls: {
    id: number;
    op: string;
    inputs: string[];
    outputs: string[];
    cost: number;
    replayable: boolean;
  }[];
}

/**
 * The storage/call graph.
 *
 * @example
 * ```ts
 * import { Lineage } from "@libra/lineage";
 * const g = new Lineage();
 * const x = g.addLeaf(16, "x");
 * const [y] = g.addCall("relu", [4], [x], [{ bytes: 16, name: "y" }], 10);
 * if (y!.producer?.inputs[0] !== x) throw new Error("lineage records inputs");
 * ```
 */
export class Lineage {
  /** Live storages by id, in the order they were made (id order). */
  readonly storages: StorageTable = new StorageTable();
  #nextStorage = 1;
  #nextTensor = 1;
  #nextCall = 1;
  #stamp = 1;

  /** Creates an empty storage of `bytes` (residency `empty`). */
  addStorage(bytes: number): StorageNode {
    const s = new StorageNode(this.#nextStorage++, bytes);
    s.owner = this;
    this.storages.add(s);
    return s;
  }

  /** Creates a leaf tensor (no producer) in a new storage, or in `storage` if given. */
  addLeaf(bytes: number, name?: string, storage?: StorageNode): TensorNode {
    const s = storage ?? this.addStorage(bytes);
    const id = this.#nextTensor++;
    const t = new TensorNode(id, name ?? `t${id}`, s, null, 0);
    s.tensors = withTensor(s.tensors, t);
    return t;
  }

  /**
   * Records a call and creates its output tensors (not yet defined: the runtime
   * materializes them). A view output joins its input's storage and adds the
   * call's cost to that storage's compute.
   */
  addCall(
    op: string,
    params: readonly number[],
    inputs: readonly TensorNode[],
    outputs: readonly OutputSpec[],
    cost: number,
    backward = false,
  ): TensorNode[] {
    const n = outputs.length;
    let fresh = true;
    for (let i = 0; i < n; i++) {
      const a = outputs[i]!.alias;
      if (a !== undefined && a >= 0) fresh = false;
    }
    // Calls whose outputs all own fresh storage (every live runtime call) share one aliases list.
    const aliases = fresh ? allFresh(n) : outputs.map((o) => o.alias ?? -1);
    const sizes = n === 1
      ? oneSize(aliases[0]! >= 0 ? 0 : outputs[0]!.bytes)
      : outputs.map((o, i) => (aliases[i]! >= 0 ? 0 : o.bytes));
    // Lists made at their final length (a push onto an empty list reserves 17 slots, and
    // lineage lives long enough for that waste to cost the garbage collector).
    const outs: TensorNode[] = n === 1 ? [null as unknown as TensorNode] : new Array(n);
    const call = new CallNode(
      this.#nextCall++,
      op,
      params,
      inputs,
      sizes,
      aliases,
      cost,
      backward,
      outs,
    );
    for (let i = 0; i < n; i++) {
      const spec = outputs[i]!;
      const a = aliases[i]!;
      let s: StorageNode;
      if (a >= 0) {
        const base = inputs[a];
        if (!base) {
          throw new RangeError(
            `${op}: output ${i} aliases input ${a}, but the call has ${inputs.length} inputs`,
          );
        }
        s = base.storage;
      } else {
        s = spec.storage ?? this.addStorage(spec.bytes);
      }
      const id = this.#nextTensor++;
      const t = new TensorNode(id, spec.name ?? `t${id}`, s, call, i);
      outs[i] = t;
      // A call's one output in a storage of its own: the storage's list is the call's (never
      // modified: see `StorageNode.tensors`), one array fewer per value for the collector.
      s.tensors = n === 1 && s.tensors.length === 0 ? outs : withTensor(s.tensors, t);
    }
    for (let i = 0; i < inputs.length; i++) {
      const inp = inputs[i]!;
      if (inp.consumers.length === 0) inp.consumers = [call];
      else inp.consumers.push(call);
      inp.storage.readers++;
    }
    for (let i = 0; i < n; i++) {
      const s = outs[i]!.storage;
      s.compute = storageCompute(s);
    }
    if (this.cachesEvictedNeighbors) this.#newEdges(call);
    return call.outputs;
  }

  /**
   * A new call's edges, once {@link neighborClassCost} has been asked: no
   * storage they touch is known to have no evicted neighbour, and their kept
   * neighbour lists are made what a walk would make now, where that is
   * cheap and sure, or lapse. Sure when every output is fresh (its storage
   * holds only its new tensor: it had no edges, so no list names it): an
   * output's list is the call's distinct input storages, and an input
   * storage holding one tensor walks the new call last, so its kept list
   * gains the outputs at its end. Made here, while these storages are in
   * the cache, rather than by a walk when a sampled search first scores them.
   */
  #newEdges(call: CallNode): void {
    const inputs = call.inputs, outs = call.outputs;
    let sure = this.cachesNeighborLists;
    for (let i = 0; i < outs.length && sure; i++) {
      if (outs[i]!.storage.tensors.length !== 1) sure = false;
    }
    if (!sure) {
      for (let i = 0; i < inputs.length; i++) {
        const s = inputs[i]!.storage;
        s.noEvictedNeighbors = 0;
        s.neighborListAt = 0;
      }
      for (let i = 0; i < outs.length; i++) {
        const s = outs[i]!.storage;
        s.noEvictedNeighbors = 0;
        s.neighborListAt = 0;
      }
      return;
    }
    const epoch = this.#edgeEpoch;
    const stamp = this.nextStamp();
    // The outputs' list: the distinct input storages (on the node, with no array, for one or
    // two of them).
    const ins = this.#inputScratch;
    for (let i = 0; i < inputs.length; i++) {
      const s = inputs[i]!.storage;
      if (s.stamp === stamp) continue;
      s.stamp = stamp;
      ins.push(s);
      s.noEvictedNeighbors = 0;
      if (s.nbCount >= 0 && s.neighborListAt === epoch && s.tensors.length === 1) {
        for (let k = 0; k < outs.length; k++) s.pushNeighbor(outs[k]!.storage);
      } else s.neighborListAt = 0;
    }
    for (let k = 0; k < outs.length; k++) {
      const s = outs[k]!.storage;
      s.noEvictedNeighbors = 0;
      s.setNeighbors(ins);
      s.neighborListAt = epoch;
    }
    clearList(ins);
  }

  /** {@link #newEdges}' list of a call's distinct input storages. */
  readonly #inputScratch: StorageNode[] = [];

  /**
   * A storage that is `freed` from the start and not kept in {@link storages}
   * (where a value's tensors go when its storage takes a new value). Same id
   * sequence as {@link addStorage}.
   */
  tombstone(bytes: number): StorageNode {
    const s = new StorageNode(this.#nextStorage++, bytes);
    s.owner = this;
    s.residency = "freed";
    return s;
  }

  /** Forgets a storage (after it is freed for good). */
  removeStorage(s: StorageNode): void {
    this.storages.remove(s.id);
    // A class it still holds keeps its node and its value, and the node still names it (a
    // walk of a small class's members names the neighbours of freed ones, as it always
    // has), but the class is no longer held up by it: once every member has gone, its nodes
    // are reused.
    if (s.eq !== NO_CLASS) {
      this.classes.depart(s.eq, true);
      s.eq = NO_CLASS;
    }
  }

  /** A fresh traversal stamp (storages whose `stamp` differs are unvisited). */
  nextStamp(): number {
    return ++this.#stamp;
  }

  /**
   * The evicted storages adjacent to `s` (DTR's evicted neighbours): storages of
   * the inputs of the calls producing `s`'s tensors and of the outputs of the
   * calls consuming them, that are evicted (dropped) and distinct from `s`.
   * Each neighbour is reported once.
   */
  evictedNeighbors(s: StorageNode, out: StorageNode[] = []): StorageNode[] {
    const stamp = this.nextStamp();
    s.stamp = stamp;
    for (const t of s.tensors) {
      const p = t.producer;
      if (p !== null) {
        for (const inp of p.inputs) {
          const n = inp.storage;
          if (n.stamp !== stamp && n.residency === "evicted") {
            n.stamp = stamp;
            out.push(n);
          }
        }
      }
      for (const c of t.consumers) {
        for (const o of c.outputs) {
          const n = o.storage;
          if (n.stamp !== stamp && n.residency === "evicted") {
            n.stamp = stamp;
            out.push(n);
          }
        }
      }
    }
    return out;
  }

  /**
   * Summed class values of the distinct equivalence classes among `s`'s
   * evicted neighbours. A storage found without evicted neighbours is
   * remembered as such (one field read next time, no walk) until a neighbour
   * is evicted or a call adds edges to it ({@link evictedNeighborAppeared}).
   */
  neighborClassCost(s: StorageNode): number {
    if (s.noEvictedNeighbors === NONE_EVICTED) return 0;
    if (!this.cachesEvictedNeighbors) {
      // From now on every eviction clears the caches of the storages next to it.
      this.cachesEvictedNeighbors = true;
      return this.neighborClassCost(s);
    }
    let ns: StorageNode[];
    if (this.cachesNeighborLists) {
      // The evicted members of the kept neighbour list: what a walk would find, in its order.
      ns = this.#scratch;
      if (!this.#kept(s)) this.#keepNeighbors(s);
      const c = s.nbCount;
      for (let i = 0; i < c; i++) {
        const n = s.neighborAt(i);
        if (n.residency === "evicted") ns.push(n);
      }
    } else ns = this.evictedNeighbors(s, this.#scratch);
    if (ns.length === 0) {
      s.noEvictedNeighbors = NONE_EVICTED;
      return 0;
    }
    let sum = 0;
    const roots = this.#roots, f = this.classes;
    for (let i = 0; i < ns.length; i++) {
      const n = ns[i]!;
      if (n.eq === NO_CLASS) continue;
      const r = f.find(n.eq);
      if (!roots.includes(r)) {
        roots.push(r);
        sum += f.value(r);
      }
    }
    clearList(ns);
    clearList(roots);
    return sum;
  }

  /**
   * `dtr-eq`'s classes: evicted `s` gets a class of its own compute, merged
   * with the classes of its evicted neighbours (the runtime calls it on every
   * drop once a policy needs classes; see {@link StorageNode.eq}).
   */
  joinEvictedClass(s: StorageNode): void {
    if (s.eq !== NO_CLASS) {
      throw new Error(`joinEvictedClass ${s.name}: the storage already holds a class`);
    }
    if (!(s.compute >= 0)) this.classesNonNegative = false;
    const f = this.classes;
    const eq = s.eq = f.add(s.compute, s);
    if (this.#kept(s)) {
      // The evicted members of the kept list, in a walk's order (the merges, and so every
      // class's root and the order of its sums, are a walk's): the list is on the node where
      // the walk reads each tensor, call and edge list of a storage that has usually not
      // been touched for thousands of calls.
      const c = s.nbCount;
      for (let i = 0; i < c; i++) {
        const n = s.neighborAt(i);
        if (n.residency === "evicted" && n.eq !== NO_CLASS) f.merge(n.eq, eq);
      }
      return;
    }
    const ns = this.evictedNeighbors(s, this.#scratch);
    for (let i = 0; i < ns.length; i++) {
      const n = ns[i]!;
      if (n.eq !== NO_CLASS) f.merge(n.eq, eq);
    }
    clearList(ns);
  }

  /**
   * `s` is re-materialized: its compute leaves its class (classes never
   * split) and it holds none any more. No-op without a class.
   *
   * Every neighbouring class cost that counts the class falls by at most
   * what leaves it: those of the neighbours of its members. With
   * {@link keepsFloors}, a class of at most {@link CLASS_LAPSE_LIMIT} nodes
   * names them in {@link floorsLapsed} (`s`'s own are named as it leaves
   * `evicted`), and every other cost keeps its floor; a larger one adds what
   * leaves to {@link classDecrease}, by which every floor falls. (With the
   * sum alone, a stretch of re-materializations took the floors of every
   * storage: on lstm small at ratio 0.5, searches after one scored 53
   * storages on average, and a search scored 10.3 in all; naming them, 3.4.)
   */
  leaveClass(s: StorageNode): void {
    const eq = s.eq;
    if (eq === NO_CLASS) return;
    const f = this.classes;
    if (!this.keepsFloors || !(s.compute >= 0)) this.neighborCostEpoch++;
    else if (f.size(eq) > CLASS_LAPSE_LIMIT) this.classDecrease += s.compute;
    else {
      const out = this.floorsLapsed;
      let unknown = false;
      for (let x = f.next(eq); x !== eq; x = f.next(x)) {
        const u = f.item(x);
        // Nodes of members that left the class (re-materialized, or forgotten by a
        // collection) are passed over: their neighbours were named when they left. Members
        // freed holding their node (a chain freed at once) are named as the others are. A
        // node made elsewhere names no storage: every floor falls then.
        if (u === DEPARTED) continue;
        if (u === null) unknown = true;
        else this.#nameNeighbors(u as StorageNode, out);
      }
      if (unknown) this.classDecrease += s.compute;
      this.#checkLapsed();
    }
    f.addTo(eq, -s.compute);
    if (!(f.value(eq) >= 0)) this.classesNonNegative = false;
    // The class keeps the node, not the storage (which may be freed long before the class).
    f.depart(eq);
    s.eq = NO_CLASS;
  }

  /**
   * True while every `dtr-eq` class value is known non-negative (false for
   * good once a storage of negative compute joins a class or a
   * re-materialization leaves one below zero, as rounding may), so that
   * {@link neighborClassCost} is never negative.
   */
  classesNonNegative = true;

  /** `s`'s value is gone (freed or retired): it holds no class (the class keeps its value). */
  forgetClass(s: StorageNode): void {
    if (s.eq !== NO_CLASS) {
      this.neighborCostFell(s);
      this.classes.depart(s.eq);
      s.eq = NO_CLASS;
    }
  }

  /**
   * `v` left `evicted` or lost its class: the neighbouring class costs of its
   * neighbours may fall by all it added. With {@link keepsFloors} they are
   * named in {@link floorsLapsed} (the epoch changes instead past
   * {@link LAPSED_LIMIT} of them); otherwise the epoch changes.
   */
  neighborCostFell(v: StorageNode): void {
    if (!this.keepsFloors) {
      this.neighborCostEpoch++;
      return;
    }
    this.#nameNeighbors(v, this.floorsLapsed);
    this.#checkLapsed();
  }

  /**
   * Pushes the resident storages next to `v` onto `out`: those of its kept
   * neighbour list where valid (each once), else those a walk of its edges
   * finds, with repeats. The kept list is on `v`'s node where the walk reads
   * `v`'s tensors, calls and edge lists, cold when `v` is freed long after it
   * was evicted. Only resident ones: no other keeps a floor (an evictable pool
   * holds resident storages, and a storage enters it with none). In the
   * 10k-live dispatch stream 99% of the storages named were freed ones (the
   * neighbours of a chain freed at once), each read again, cold, by the next
   * search to find it in no pool.
   */
  #nameNeighbors(v: StorageNode, out: StorageNode[]): void {
    if (!this.#kept(v)) nameNeighbors(v, out);
    else {
      const c = v.nbCount;
      for (let i = 0; i < c; i++) {
        const n = v.neighborAt(i);
        if (n.residency === "resident") out.push(n);
      }
    }
  }

  /** Past {@link LAPSED_LIMIT} storages in {@link floorsLapsed}: the epoch changes instead. */
  #checkLapsed(): void {
    const out = this.floorsLapsed;
    if (out.length > LAPSED_LIMIT) {
      clearList(out);
      this.neighborCostEpoch++;
    }
  }

  /**
   * Set by a policy that keeps floors of neighbouring class costs (`dtr-eq`'s
   * search): from then on, within an epoch, a cost falls only as
   * {@link classDecrease} and {@link floorsLapsed} say.
   */
  keepsFloors = false;
  /**
   * With {@link keepsFloors}: the compute re-materializations took out of
   * classes of more than {@link CLASS_LAPSE_LIMIT} nodes ({@link leaveClass}),
   * summed. A neighbouring class cost falls by at most the growth of this, but
   * where {@link floorsLapsed} names it.
   */
  classDecrease = 0;
  /**
   * With {@link keepsFloors}: resident storages whose neighbouring class cost
   * may have fallen by more than {@link classDecrease} grew (neighbours of a
   * storage that left `evicted` or its class, and of the members of a small
   * class a storage left), with repeats, until the floors' keeper empties it.
   * Storages not resident when named are left out: a floor is kept in an
   * evictable pool's slot, which a storage enters, resident, with none.
   */
  readonly floorsLapsed: StorageNode[] = [];

  /**
   * `dtr-eq`'s equivalence classes: a node of this forest is the class of
   * each evicted storage while classes are kept ({@link StorageNode.eq}).
   */
  readonly classes: ClassForest = new ClassForest();

  /** `s`'s `dtr-eq` class node in {@link classes}, or `NO_CLASS` (see {@link StorageNode.eq}). */
  classOf(s: StorageNode): number {
    return s.eq;
  }

  /** The value of `s`'s `dtr-eq` class (see {@link StorageNode.eq}), or `undefined` without one. */
  classValueOf(s: StorageNode): number | undefined {
    return s.eq === NO_CLASS ? undefined : this.classes.value(s.eq);
  }

  /**
   * `s`'s neighbours: the storages of the inputs of the calls producing its
   * tensors and of the outputs of the calls consuming them, each once, but
   * `s` and freed ones (the kept list while {@link cachesNeighborLists}: it
   * may name storages freed since it was made), in a new list.
   */
  neighbors(s: StorageNode): StorageNode[] {
    return this.neighborsInto(s, []);
  }

  /**
   * Pushes {@link neighbors} of `s` onto `out` (keeping `s`'s list where
   * none is kept and valid) and returns it: for a caller with a list of its
   * own to reuse.
   */
  neighborsInto(s: StorageNode, out: StorageNode[]): StorageNode[] {
    if (!this.cachesNeighborLists) return this.#walkNeighbors(s, out);
    if (!this.#kept(s)) this.#keepNeighbors(s);
    const c = s.nbCount;
    for (let i = 0; i < c; i++) out.push(s.neighborAt(i));
    return out;
  }

  /** True while `s`'s kept neighbour list is valid (see {@link neighbors}). */
  #kept(s: StorageNode): boolean {
    return this.cachesNeighborLists && s.neighborListAt === this.#edgeEpoch && s.nbCount >= 0;
  }

  /**
   * Walks and keeps `s`'s neighbours (see {@link StorageNode.nbCount}), but
   * for freed ones: those are never evicted again, and a list naming none
   * lapses only when a neighbour is freed later (a runtime's collection looks
   * for such lists next to the storages freed since the last one).
   */
  #keepNeighbors(s: StorageNode): void {
    const list = this.#walkNeighbors(s, this.#walkScratch);
    s.setNeighbors(list);
    s.neighborListAt = this.#edgeEpoch;
    clearList(list);
  }

  /** {@link #keepNeighbors}' walk. */
  readonly #walkScratch: StorageNode[] = [];

  /** Pushes `s`'s neighbours but freed ones, each once, onto `out` (see {@link neighbors}). */
  #walkNeighbors(s: StorageNode, out: StorageNode[]): StorageNode[] {
    const stamp = this.nextStamp();
    s.stamp = stamp;
    for (const t of s.tensors) {
      const p = t.producer;
      if (p !== null) {
        for (const inp of p.inputs) {
          const n = inp.storage;
          if (n.stamp !== stamp && n.residency !== "freed") {
            n.stamp = stamp;
            out.push(n);
          }
        }
      }
      for (const c of t.consumers) {
        for (const o of c.outputs) {
          const n = o.storage;
          if (n.stamp !== stamp && n.residency !== "freed") {
            n.stamp = stamp;
            out.push(n);
          }
        }
      }
    }
    return out;
  }

  /**
   * Keep each storage's neighbours from one {@link neighborClassCost} to the
   * next while the edges stay as they were (default true; false walks every
   * time, with the same results).
   */
  cachesNeighborLists = true;
  /** Changes with every edge removed or tensor moved (see {@link invalidateNeighborhoods}); from 1. */
  #edgeEpoch = 1;

  /** The epoch a kept neighbour list is valid in (see {@link StorageNode.neighborListAt}). */
  get neighborListEpoch(): number {
    return this.#edgeEpoch;
  }

  /**
   * Changes whenever some storage's {@link neighborClassCost} may have gone
   * down: edges were cut or tensors moved, and, until {@link keepsFloors}, a
   * storage left `evicted`, left or lost its class (after, those go to
   * {@link classDecrease} and {@link floorsLapsed}). In between, every one only grows (new edges and
   * evictions add classes; a merge's value is the sum of what it joins),
   * while {@link classesNonNegative} holds: a cost found then stays a lower
   * bound until this changes (up to rounding: a sum of the same values added
   * in another order).
   */
  neighborCostEpoch = 1;

  /**
   * After a collection freed storages and cut the calls that only fed freed
   * ones (the only edges it removes): `s`'s kept neighbour list lapses if it
   * names a freed storage. A list that names none is the one a walk would
   * make now, and one that does is only worth dropping so that it keeps no
   * dead storage alive: a freed storage is never evicted again, so it counts
   * in no {@link neighborClassCost} (which keeps the order of the others).
   * Every other list stays valid, where a new edge epoch would make every
   * storage walk its neighbours again. A list that lapsed already (its
   * storage walks again when next scored) is dropped too: its storages may no
   * longer be next to `s`, so no later collection would look for it.
   */
  dropFreedNeighbors(s: StorageNode): void {
    const c = s.nbCount;
    if (c < 0) return;
    if (s.neighborListAt !== this.#edgeEpoch) {
      s.clearNeighbors();
      s.neighborListAt = 0;
      return;
    }
    for (let i = 0; i < c; i++) {
      if (s.neighborAt(i).residency === "freed") {
        s.clearNeighbors();
        s.neighborListAt = 0;
        return;
      }
    }
  }

  readonly #scratch: StorageNode[] = [];
  readonly #roots: number[] = [];

  /**
   * True once {@link neighborClassCost} has been asked: it remembers the
   * storages without evicted neighbours, and evictions and new calls keep
   * that up to date.
   */
  cachesEvictedNeighbors = false;

  /**
   * `v` has just been evicted: every storage next to it may now have an
   * evicted neighbour, so none is known to have none.
   */
  evictedNeighborAppeared(v: StorageNode): void {
    if (this.#kept(v)) {
      // The kept list names every neighbour but freed ones (which are never scored), on the
      // node (see `joinEvictedClass`).
      const c = v.nbCount;
      for (let i = 0; i < c; i++) v.neighborAt(i).noEvictedNeighbors = 0;
      return;
    }
    for (const t of v.tensors) {
      const p = t.producer;
      if (p !== null) {
        for (const inp of p.inputs) inp.storage.noEvictedNeighbors = 0;
      }
      for (const c of t.consumers) {
        for (const o of c.outputs) o.storage.noEvictedNeighbors = 0;
      }
    }
  }

  /**
   * The evicted neighbourhood e*(s): every evicted storage reachable from `s`
   * through evicted producers and consumers (transitively), excluding `s`.
   */
  evictedNeighborhood(s: StorageNode): StorageNode[] {
    const result: StorageNode[] = [];
    const stamp = this.nextStamp();
    s.stamp = stamp;
    const stack: StorageNode[] = [s];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      for (const t of cur.tensors) {
        const p = t.producer;
        if (p !== null) {
          for (const inp of p.inputs) visit(inp.storage);
        }
        for (const c of t.consumers) {
          for (const o of c.outputs) visit(o.storage);
        }
      }
    }
    return result;
    function visit(n: StorageNode): void {
      if (n.stamp !== stamp && n.residency === "evicted") {
        n.stamp = stamp;
        result.push(n);
        stack.push(n);
      }
    }
  }

  /**
   * Summed compute of {@link evictedNeighborhood}, in the walk's order. The sum
   * is cached per storage: it changes only when a storage enters or leaves the
   * evicted state next to `s`'s neighbourhood (each such change clears the
   * cache of every storage adjacent to the evicted component it touches) or
   * when the runtime restructures the graph ({@link invalidateNeighborhoods}),
   * so a cached sum is always the one a fresh walk would give.
   */
  evictedNeighborhoodCost(s: StorageNode): number {
    if (!this.tracksNeighborhoods) {
      // From now on every change to the evicted set invalidates the cached sums it affects.
      this.tracksNeighborhoods = true;
      this.#nbhdVersion++;
    }
    const rc = s.regions;
    if (rc !== null && rc.version === this.#nbhdVersion && s.residency !== "evicted") {
      return rc.cost;
    }
    let sum = s.residency === "evicted" ? -1 : this.#componentSum(s);
    if (sum < 0) {
      sum = 0;
      for (const n of this.evictedNeighborhood(s)) sum += n.compute;
    }
    const r = s.regions ??= newRegionCache();
    r.cost = sum;
    r.version = this.#nbhdVersion;
    return sum;
  }

  /**
   * e*(s) of a storage that is not evicted is the union of the evicted
   * components adjacent to it; when every member's compute is an integer the
   * sum is exact in any order, so it is the components' summed sums. Returns
   * -1 when that does not hold (the caller walks instead).
   */
  #componentSum(s: StorageNode): number {
    const comps = this.#comps;
    let sum = 0, abs = 0;
    const add = (n: StorageNode): boolean => {
      if (n === s || n.residency !== "evicted") return true;
      const c = this.#component(n);
      if (!c.exact) return false;
      if (!comps.includes(c)) {
        comps.push(c);
        sum += c.sum;
        abs += c.abs;
      }
      return true;
    };
    let ok = true;
    outer: for (const t of s.tensors) {
      const p = t.producer;
      if (p !== null) {
        for (const inp of p.inputs) if (!add(inp.storage)) ok = false;
        if (!ok) break outer;
      }
      for (const c of t.consumers) {
        for (const o of c.outputs) if (!add(o.storage)) ok = false;
        if (!ok) break outer;
      }
    }
    clearList(comps);
    return ok && abs <= Number.MAX_SAFE_INTEGER ? sum : -1;
  }

  readonly #comps: EvictedComponent[] = [];

  /** The evicted component holding `v` (evicted), built by a walk when not cached. */
  #component(v: StorageNode): EvictedComponent {
    const cached = v.regions?.component ?? null;
    if (cached !== null && cached.version === this.#nbhdVersion) return cached;
    const members: StorageNode[] = [v];
    const stamp = this.nextStamp();
    v.stamp = stamp;
    let sum = 0, abs = 0, ints = true;
    for (let i = 0; i < members.length; i++) {
      const cur = members[i]!;
      const c = cur.compute;
      sum += c;
      abs += Math.abs(c);
      if (!Number.isInteger(c)) ints = false;
      for (const t of cur.tensors) {
        const p = t.producer;
        if (p !== null) {
          for (const inp of p.inputs) {
            const n = inp.storage;
            if (n.stamp !== stamp && n.residency === "evicted") {
              n.stamp = stamp;
              members.push(n);
            }
          }
        }
        for (const cn of t.consumers) {
          for (const o of cn.outputs) {
            const n = o.storage;
            if (n.stamp !== stamp && n.residency === "evicted") {
              n.stamp = stamp;
              members.push(n);
            }
          }
        }
      }
    }
    const comp: EvictedComponent = {
      sum,
      abs,
      exact: ints && abs <= Number.MAX_SAFE_INTEGER,
      version: this.#nbhdVersion,
    };
    for (const m of members) (m.regions ??= newRegionCache()).component = comp;
    return comp;
  }

  /** True once {@link evictedNeighborhoodCost} has been asked (its cache is kept up to date). */
  tracksNeighborhoods = false;
  #nbhdVersion = 0;

  /**
   * Drops every cached neighbourhood cost: the runtime calls it when it moves
   * tensors between storages, cuts consumer lists or reprices an evicted storage.
   */
  invalidateNeighborhoods(): void {
    this.#nbhdVersion++;
    // Edges may be gone or tensors moved: the kept neighbour lists lapse too.
    this.#edgeEpoch++;
    this.neighborCostEpoch++;
  }

  /**
   * Drops every cached neighbourhood cost after storages' compute changed
   * (the graph's edges are as they were: lists of evicted neighbours stay).
   */
  computeChanged(): void {
    this.#nbhdVersion++;
  }

  /**
   * `v` is entering or leaving the evicted state (and is evicted now): clears
   * the cached neighbourhood cost of `v` and of every storage adjacent to the
   * evicted component holding `v`, the only storages whose neighbourhood changes.
   */
  neighborhoodChanged(v: StorageNode): void {
    const rv = v.regions;
    if (rv !== null) {
      rv.version = -1;
      rv.component = null;
    }
    const stamp = this.nextStamp();
    v.stamp = stamp;
    const stack: StorageNode[] = [v];
    const visit = (n: StorageNode): void => {
      if (n.stamp === stamp) return;
      n.stamp = stamp;
      const r = n.regions;
      if (n.residency === "evicted") {
        if (r !== null) {
          r.version = -1;
          r.component = null;
        }
        stack.push(n);
      } else if (r !== null) r.version = -1;
    };
    while (stack.length > 0) {
      const cur = stack.pop()!;
      for (const t of cur.tensors) {
        const p = t.producer;
        if (p !== null) {
          for (const inp of p.inputs) visit(inp.storage);
        }
        for (const c of t.consumers) {
          for (const o of c.outputs) visit(o.storage);
        }
      }
    }
  }

  /**
   * Cost of the evicted ancestors that recomputing `s` would also recompute
   * (producer side only, transitively through evicted storages).
   */
  evictedAncestorCost(s: StorageNode): number {
    const stamp = this.nextStamp();
    s.stamp = stamp;
    let sum = 0;
    const stack: StorageNode[] = [s];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      const p = cur.tensors[0]?.producer;
      if (!p) continue;
      for (const inp of p.inputs) {
        const n = inp.storage;
        if (n.stamp !== stamp && n.residency === "evicted") {
          n.stamp = stamp;
          sum += n.compute;
          stack.push(n);
        }
      }
    }
    return sum;
  }

  /**
   * The calls to replay, in order, to make `t` available, assuming nothing is
   * evicted meanwhile: a post-order over undefined producers computed with an
   * explicit stack. Throws when a needed value cannot be recomputed.
   */
  rematPlan(t: TensorNode): CallNode[] {
    const plan: CallNode[] = [];
    if (t.defined) return plan;
    const planned = new Set<CallNode>();
    const stack: { t: TensorNode; i: number }[] = [{ t, i: 0 }];
    while (stack.length > 0) {
      const f = stack[stack.length - 1]!;
      const p = f.t.producer;
      if (f.t.storage.residency === "swapped" && !f.t.isAlias) {
        stack.pop();
        continue;
      }
      if (p === null || !p.replayable) {
        throw new Error(
          `lineage: ${f.t.name} is not available and cannot be recomputed (${
            p === null
              ? "no producer"
              : `its producer ${p.op}#${p.id} read a value overwritten since`
          })`,
        );
      }
      if (planned.has(p)) {
        stack.pop();
        continue;
      }
      let pushed = false;
      while (f.i < p.inputs.length) {
        const inp = p.inputs[f.i++]!;
        if (!inp.defined && !(inp.producer !== null && planned.has(inp.producer))) {
          stack.push({ t: inp, i: 0 });
          pushed = true;
          break;
        }
      }
      if (pushed) continue;
      planned.add(p);
      plan.push(p);
      stack.pop();
    }
    return plan;
  }

  /** The graph as JSON (storages with their tensors, calls with their tensor names). */
  toJSON(): LineageJSON {
    return lineageToJSON(this.storages.values());
  }

  /** The graph in Graphviz DOT: storages as boxes (dashed when evicted), calls as ellipses. */
  toDot(): string {
    return jsonToDot(this.toJSON());
  }
}

/**
 * The most nodes a class may have for {@link Lineage.leaveClass} to name the
 * neighbours of its members in {@link Lineage.floorsLapsed} (each a walk of
 * the member's calls); a larger class adds to {@link Lineage.classDecrease}.
 * On lstm small at ratio 0.5 every class a storage left had at most 32.
 */
export const CLASS_LAPSE_LIMIT = 32;

/**
 * Pushes the resident storages next to `v` (its producers' inputs, its
 * consumers' outputs) onto `out` (see {@link Lineage.floorsLapsed}).
 */
function nameNeighbors(v: StorageNode, out: StorageNode[]): void {
  const ts = v.tensors;
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i]!;
    const p = t.producer;
    if (p !== null) {
      for (const inp of p.inputs) if (inp.storage.residency === "resident") out.push(inp.storage);
    }
    for (const c of t.consumers) {
      for (const o of c.outputs) if (o.storage.residency === "resident") out.push(o.storage);
    }
  }
}

/**
 * Past this many storages named in {@link Lineage.floorsLapsed}, the epoch
 * changes instead (every floor lapses): a keeper that stopped searching leaves
 * no list growing for good.
 */
export const LAPSED_LIMIT = 4096;

/** {@link StorageNode.noEvictedNeighbors} of a storage known to have no evicted neighbour. */
const NONE_EVICTED = 1;

const FRESH: (readonly number[])[] = [];

/** The shared aliases list of a call whose `n` outputs all own fresh storage. */
function allFresh(n: number): readonly number[] {
  return FRESH[n] ??= Object.freeze(new Array<number>(n).fill(-1));
}

/**
 * `list` with `t` appended, as a new list: a storage's list is never modified
 * in place (it may be its producer's outputs list). Literals for the usual
 * lengths, at their final length and packed like every other storage's list
 * (`new Array(n)` makes a holey one, which would give the loops that read
 * these lists a second kind to handle).
 */
function withTensor(list: readonly TensorNode[], t: TensorNode): TensorNode[] {
  if (list.length === 0) return [t];
  if (list.length === 1) return [list[0]!, t];
  const out = list.slice();
  out.push(t);
  return out;
}

const ONE_SIZE = new Map<number, readonly number[]>();

/**
 * The sizes list `[bytes]` of a one-output call, shared by the calls with
 * that size (a model has few; a list per call outlived most of them in the
 * lineage, at the garbage collector's cost). At most 4096 sizes are kept.
 */
function oneSize(bytes: number): readonly number[] {
  let l = ONE_SIZE.get(bytes);
  if (l === undefined) {
    l = Object.freeze([bytes]);
    if (ONE_SIZE.size < 4096) ONE_SIZE.set(bytes, l);
  }
  return l;
}

/** Sum of the costs of the distinct calls producing the tensors of `s`. */
export function storageCompute(s: StorageNode): number {
  const ts = s.tensors;
  if (ts.length === 1) {
    // The common case, without the list of distinct producers (same sum: 0 + cost).
    const p = ts[0]!.producer;
    return p === null ? 0 : 0 + p.cost;
  }
  let sum = 0;
  const seen: CallNode[] = [];
  for (const t of s.tensors) {
    const p = t.producer;
    if (p !== null && !seen.includes(p)) {
      seen.push(p);
      sum += p.cost;
    }
  }
  return sum;
}
