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

/**
 * The storages' links of a compiled trace, as the replay builds them call by
 * call, in compressed rows: for storage `s` (numbered in order of creation),
 * its parents' storages are `up[upStart[s] ...]` and its children's
 * `down[downStart[s] ...]`, each once, never itself, in the order the calls
 * link them (so the links of the calls replayed so far are a prefix); call
 * `k` adds the links `(edgeFrom[j], edgeTo[j])` for `j` from `opEdges[k]` to
 * `opEdges[k + 1]`.
 */
export interface StorageLinks {
  readonly storages: number;
  readonly upStart: Int32Array;
  readonly up: Int32Array;
  readonly downStart: Int32Array;
  readonly down: Int32Array;
  readonly opEdges: Int32Array;
  readonly edgeFrom: Int32Array;
  readonly edgeTo: Int32Array;
}

const linksOf = new WeakMap<object, StorageLinks>();

/** The {@link StorageLinks} of `c` (computed once per compiled trace). */
export function storageLinks(
  c: {
    readonly ops: readonly { aliases: number[]; args: number[]; out0: number }[];
    readonly tensors: number;
  },
): StorageLinks {
  const known = linksOf.get(c);
  if (known) return known;
  const storageOf = new Int32Array(c.tensors);
  let storages = 0;
  const from: number[] = [], to: number[] = [];
  const opEdges = new Int32Array(c.ops.length + 1);
  const seen = new Set<number>();
  for (let k = 0; k < c.ops.length; k++) {
    const d = c.ops[k]!;
    const n = d.aliases.length;
    for (let i = 0; i < n; i++) {
      const a = d.aliases[i]!;
      storageOf[d.out0 + i] = a >= 0 ? storageOf[d.args[a]!]! : storages++;
    }
    opEdges[k] = from.length;
    for (const p of d.args) {
      const ps = storageOf[p]!;
      for (let i = 0; i < n; i++) {
        const ts = storageOf[d.out0 + i]!;
        if (ps === ts) continue;
        const key = ps * c.tensors + ts;
        if (seen.has(key)) continue;
        seen.add(key);
        from.push(ps);
        to.push(ts);
      }
    }
  }
  opEdges[c.ops.length] = from.length;
  const upStart = new Int32Array(storages + 1), downStart = new Int32Array(storages + 1);
  for (let j = 0; j < from.length; j++) (upStart[to[j]! + 1]!++, downStart[from[j]! + 1]!++);
  for (let s = 0; s < storages; s++) {
    upStart[s + 1]! += upStart[s]!;
    downStart[s + 1]! += downStart[s]!;
  }
  const up = new Int32Array(from.length), down = new Int32Array(from.length);
  const upFill = upStart.slice(0, storages), downFill = downStart.slice(0, storages);
  for (let j = 0; j < from.length; j++) {
    up[upFill[to[j]!]!++] = from[j]!;
    down[downFill[from[j]!]!++] = to[j]!;
  }
  const links = {
    storages,
    upStart,
    up,
    downStart,
    down,
    opEdges,
    edgeFrom: Int32Array.from(from),
    edgeTo: Int32Array.from(to),
  };
  linksOf.set(c, links);
  return links;
}
