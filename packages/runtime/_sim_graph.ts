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

/**
 * The region walks (by id: `live`, 1 while a storage's `fwd` or `rev` sums
 * that walk's storages; `from`, the storage walked from) and per storage (by
 * index), the ids of the walks that counted it, in segments of one growing
 * arena: storage `u`'s are `arena[at[u] ...]`, `n[u]` of them.
 */
export class WalkLists {
  live = new Uint8Array(1024);
  readonly from: Storage[] = [];
  #last = 0;
  arena = new Int32Array(1 << 16);
  #top = 0;
  readonly at: Int32Array;
  readonly n: Int32Array;
  readonly #cap: Int32Array;

  constructor(storages: number) {
    this.at = new Int32Array(storages);
    this.n = new Int32Array(storages);
    this.#cap = new Int32Array(storages);
  }

  /** A new walk id, of a walk from `s`. */
  newWalk(s: Storage): number {
    const id = ++this.#last;
    if (id === this.live.length) {
      const x = new Uint8Array(2 * id);
      x.set(this.live);
      this.live = x;
    }
    this.from[id] = s;
    return id;
  }

  /**
   * Adds walk `id` to `u`'s list; a full list first drops the walks that
   * `live` no longer marks, and moves to a segment 4 times what stays when
   * that leaves less than half of it free.
   */
  add(u: number, id: number): void {
    const live = this.live;
    let n = this.n[u]!;
    const cap = this.#cap[u]!;
    if (n === cap) {
      const a = this.arena, at = this.at[u]!;
      let m = 0;
      for (let i = at; i < at + n; i++) {
        const j = a[i]!;
        if (live[j] === 1) a[at + m++] = j;
      }
      n = m;
      if (2 * m >= cap) {
        const size = Math.max(8, 4 * m);
        if (this.#top + size > this.arena.length) this.#collect(size);
        const to = this.#top;
        this.arena.copyWithin(to, this.at[u]!, this.at[u]! + m);
        this.at[u] = to;
        this.#cap[u] = size;
        this.#top += size;
      }
    }
    this.arena[this.at[u]! + n] = id;
    this.n[u] = n + 1;
  }

  /** Copies the segments in use into an arena with room for `size` more. */
  #collect(size: number): void {
    let used = size;
    for (let u = 0; u < this.#cap.length; u++) used += this.#cap[u]!;
    const old = this.arena;
    const next = new Int32Array(Math.max(old.length, 4 * used));
    let top = 0;
    for (let u = 0; u < this.#cap.length; u++) {
      const cap = this.#cap[u]!;
      if (cap === 0) continue;
      next.set(old.subarray(this.at[u]!, this.at[u]! + this.n[u]!), top);
      this.at[u] = top;
      top += cap;
    }
    this.arena = next;
    this.#top = top;
  }
}

/**
 * The pool of `lru` or `largest` as a binary heap by (key ascending, pool
 * order descending): the top is what a scan of the pool in order keeping the
 * last storage of least key finds. Entries are pushed when a storage enters
 * the pool or (`lru`) its key changes there, and dropped when they surface
 * stale (the storage left the pool, re-entered it, or has another key).
 */
export class PoolHeap {
  #key = new Float64Array(1024);
  #seq = new Int32Array(1024);
  #s: Storage[] = [];
  #n = 0;

  /** `key(s)`: the storage's score (`lru`: its last access; `largest`: 1 / size). */
  constructor(readonly key: (s: Storage) => number) {}

  /** Adds an entry for `s` (in the pool) at its current key. */
  push(s: Storage): void {
    if (this.#n === this.#key.length) {
      const k = new Float64Array(2 * this.#n), q = new Int32Array(2 * this.#n);
      k.set(this.#key);
      q.set(this.#seq);
      this.#key = k;
      this.#seq = q;
    }
    let i = this.#n++;
    const key = this.key(s), seq = s.seq;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#before(key, seq, p)) break;
      this.#move(p, i);
      i = p;
    }
    this.#set(i, key, seq, s);
  }

  /** The storage a scan of the pool would choose (null: the pool is empty). */
  top(poolSize: number): Storage | null {
    if (this.#n > 2 * poolSize + 1024) this.#rebuild();
    while (this.#n > 0) {
      const s = this.#s[0]!;
      if (s.inPool && s.seq === this.#seq[0] && this.key(s) === this.#key[0]) return s;
      const n = --this.#n;
      const key = this.#key[n]!, seq = this.#seq[n]!, last = this.#s[n]!;
      this.#s.length = n;
      if (n > 0) this.#siftDown(0, key, seq, last);
    }
    return null;
  }

  #before(key: number, seq: number, j: number): boolean {
    const kj = this.#key[j]!;
    return key < kj || (key === kj && seq > this.#seq[j]!);
  }

  #set(i: number, key: number, seq: number, s: Storage): void {
    this.#key[i] = key;
    this.#seq[i] = seq;
    this.#s[i] = s;
  }

  #move(from: number, to: number): void {
    this.#set(to, this.#key[from]!, this.#seq[from]!, this.#s[from]!);
  }

  #siftDown(i: number, key: number, seq: number, s: Storage): void {
    const n = this.#n;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && this.#before(this.#key[c + 1]!, this.#seq[c + 1]!, c)) c++;
      if (!this.#beforeEntry(c, key, seq)) break;
      this.#move(c, i);
      i = c;
    }
    this.#set(i, key, seq, s);
  }

  /** Whether entry `c` comes before (key, seq). */
  #beforeEntry(c: number, key: number, seq: number): boolean {
    const kc = this.#key[c]!;
    return kc < key || (kc === key && this.#seq[c]! > seq);
  }

  /** Keeps the entries still valid only. */
  #rebuild(): void {
    const keep: Storage[] = [];
    for (let i = 0; i < this.#n; i++) {
      const s = this.#s[i]!;
      if (s.inPool && s.seq === this.#seq[i] && this.key(s) === this.#key[i]) keep.push(s);
    }
    this.#n = 0;
    this.#s.length = 0;
    for (const s of keep) this.push(s);
  }
}
