/**
 * The graph nodes of the fast replayer (`_sim_core.ts`): tensors, the calls
 * producing them, and storages with the state the heuristics read (pool
 * links, equivalence classes, evicted-neighbour counts, cached evicted
 * regions and the walks they come from).
 *
 * @module
 */

/** A union-find node of `dtr-eq`'s equivalence classes (value: the class's compute). */
export class UF {
  parent: UF | null = null;
  mark = 0;
  /** Incremented when `value` changes. */
  ver = 0;
  constructor(public value: number) {}
}

/** The root of `n`'s class (compressing the path). */
export function find(n: UF): UF {
  let r = n;
  while (r.parent !== null) r = r.parent;
  while (n.parent !== null && n.parent !== r) {
    const p: UF = n.parent;
    n.parent = r;
    n = p;
  }
  return r;
}

/** A tensor of the replayed graph. */
export class Tensor {
  defined = false;
  refExt = 1;
  readonly children: Tensor[] = [];
  constructor(
    readonly id: number,
    readonly op: Op,
    readonly index: number,
    readonly storage: Storage,
    readonly parents: Tensor[],
  ) {}
}

/** A call of the replayed graph (its outputs, cost and sizes). */
export class Op {
  outputs: Tensor[] = [];
  constructor(
    readonly cost: number,
    readonly sizes: number[],
    readonly totalSize: number,
  ) {}
}

/** A storage of the replayed graph: the memory one or more tensors (views) share. */
export class Storage {
  compute = 0;
  material = false;
  refInt = 0;
  refExt = 0;
  pinned = false;
  lastAccess = -Infinity;
  ecn: UF | null = null;
  readonly tensors: Tensor[] = [];
  prev: Storage | null = null;
  next: Storage | null = null;
  inPool = false;
  /** Position in the pool's order (set when the storage enters it; the pool is in increasing `seq`). */
  seq = 0;
  stamp = 0;
  /** Incidences to non-material storages (parents' and children's, other storages): 0 = no evicted neighbour. */
  evNb = 0;
  /** Incremented when a neighbour is linked or turns evicted or material. */
  nbVer = 0;
  /**
   * `dtr-eq`: the last cost computed (valid while `nbVer` is `eqNbVer`, -1
   * before any, and the classes summed, the first `eqRoots` of `eqR`, are
   * still roots of the versions `eqV`).
   */
  eqNum = 0;
  eqNbVer = -1;
  eqRoots = 0;
  readonly eqR: UF[] = [];
  readonly eqV: number[] = [];
  /** Neighbouring storages (of parents and children; repeats possible, never itself). */
  readonly nbrs: Storage[] = [];
  /**
   * `dtr`, `msps`: the indices (`idx`) of the storages of the children
   * (`down`) and parents (`up`) of its tensors, each once, never its own.
   */
  readonly down: number[] = [];
  readonly up: number[] = [];
  /** Index in the replay's storages (the order of creation). */
  idx = 0;
  /**
   * A lower bound of the compute of the evicted storages reachable downstream
   * (children) through evicted storages: the sum over the storages that walk
   * `fwdWalk` counted (0 and no walk: nothing known); exact unless `fwdDirty`.
   */
  fwd = 0;
  /** The same upstream (parents). */
  rev = 0;
  fwdDirty = true;
  revDirty = true;
  /** The walk whose storages `fwd` (`rev`) sums (ids are never reused; 0: none). */
  fwdWalk = 0;
  revWalk = 0;
  /**
   * While evicted: the ids of the walks that counted it (the first `refN`;
   * those of walks no longer cached are dropped when `refN` reaches `refCap`).
   */
  readonly refW: number[] = [];
  refN = 0;
  refCap = 32;
  constructor(readonly size: number, readonly rootId: number) {}
}
