/**
 * The fast trace replayer behind {@link simulateTrace}: the published DTR
 * simulator's semantics (uwsampl/dtr-prototype, `simrd`: the budget-free
 * baseline of runtime V1, which banishes every storage no handle refers to,
 * and the budgeted runtime V2 with eager eviction and equivalence classes),
 * on flat objects compiled once per trace and reused across budgets.
 *
 * `dtr` and `msps` read each candidate's evicted regions (the compute of the
 * evicted storages reachable downstream or upstream through evicted storages).
 * `simrd` keeps them as sets merged on every eviction; here each storage
 * caches the two sums as the sums over the storages a walk counted, which
 * stay lower bounds while those stay evicted (each evicted storage lists the
 * walks that counted it, and its rematerialization drops their sums), and
 * exact until an eviction grows the region (an eviction marks the material
 * storages bordering the evicted area around it: a walk that stops where an
 * earlier walk of the same choice epoch went). A choice scores the candidates
 * with exact sums, then walks the others that can still win in increasing
 * lower score, each walk stopping once its sum passes the best score so far
 * (by a margin, so that the lower bound it leaves holds for a while).
 * The choices equal a fresh walk of every candidate at every choice (tested,
 * choice by choice), and `simrd`'s on the published logs.
 *
 * Semantics, as in `simrd`: a CONSTANT is a zero-cost call whose output is
 * pinned; a CALL's view outputs (ALIAS k) share argument k's storage and take
 * no memory; MUTATE is a call producing a new version of each mutated argument
 * (the old handle released); COPY takes a reference, COPY_FROM releases the
 * destination's tensor and takes one on the source's; RELEASE drops one; READ
 * (this runtime's recordings) re-materializes an evicted tensor; the
 * tensors still referenced at the end are re-materialized and pinned in order
 * of first definition of their names. The pool of evictable storages is kept
 * in insertion order; a heuristic scans it, the last storage of minimal score
 * wins and a zero score stops the scan. Overhead = (compute + recompute) /
 * compute; a replay whose recomputation passes (limit - 1) x compute thrashes.
 *
 * @module
 */

import { seededRandom } from "@libra/evict";
import { type CompiledTrace, COMPUTE, GET, PIN, READ, RELEASE } from "./_sim_compile.ts";
import {
  find,
  Op,
  PoolHeap,
  Storage,
  type StorageLinks,
  storageLinks,
  Tensor,
  UF,
  WalkLists,
} from "./_sim_graph.ts";

export { type CompiledTrace, compileTrace } from "./_sim_compile.ts";

/** The heuristics of the fast replayer, in the order of its internal codes. */
const HEURISTICS = ["dtr-eq", "dtr", "dtr-local", "msps", "lru", "largest", "random"] as const;

/** The policies the fast replayer implements (the dynamic ones without swapping). */
export const FAST_POLICIES: ReadonlySet<string> = new Set(HEURISTICS);

/** Outcome of one fast replay. */
export interface FastReplay {
  feasible: boolean;
  reason?: "out of memory" | "thrashing";
  /** (compute + recompute) / compute (Infinity when infeasible). */
  overhead: number;
  peakBytes: number;
  computeNs: number;
  recomputeNs: number;
  /** Recomputed calls (direct rematerializations). */
  remats: number;
  /** Policy evictions. */
  evictions: number;
  /** Evictions of unreferenced storages (eager). */
  eagerDrops: number;
  /** Time of the heuristic's scans, ns. */
  policyNs: number;
  /** Bytes in use at the end. */
  endBytes: number;
}

/** Options of {@link fastReplay}. */
export interface FastReplayOptions {
  /** Budget in bytes; `Infinity` replays the budget-free baseline (runtime V1 semantics). */
  budgetBytes: number;
  /** One of {@link FAST_POLICIES}. */
  policy: string;
  /** Thrash limit X (Infinity: none). */
  overheadLimit: number;
  /** Seed of `random`. Default 1. */
  seed?: number;
  /**
   * The reference the fast searches are tested against (the choices are the
   * same): every choice scans the pool (`lru`, `largest`: no heap) and scores
   * every candidate afresh (`dtr`, `msps`: walks its regions; `dtr-eq`: sums
   * its neighbouring classes), without caches or pruning (slow).
   */
  uncachedRegions?: boolean;
  /**
   * When given, receives the choices of the policy in order: the id of the
   * first tensor of each storage it evicts (for tests comparing decisions).
   */
  choices?: number[];
}

/**
 * A region walk of a candidate that cannot win goes on until its sum passes the best score so far
 * by this factor: the lower bound it leaves keeps the candidate out of the next choices while its
 * staleness grows (a walk cut at the best score itself is walked again at almost every choice).
 */
const SLACK = 4;

class OOM extends Error {}
class Thrash extends Error {}

/** Replays a compiled trace. */
export function fastReplay(c: CompiledTrace, o: FastReplayOptions): FastReplay {
  return new Sim(c, o).run();
}

class Sim {
  readonly #c: CompiledTrace;
  readonly #budget: number;
  readonly #baseline: boolean;
  readonly #h: number;
  readonly #regions: boolean;
  readonly #uncached: boolean;
  /** Neighbour lists and evicted-neighbour counts are kept (dtr-eq, dtr, msps). */
  readonly #nb: boolean;
  readonly #eq: boolean;
  readonly #limit: number;
  readonly #rng: () => number;
  readonly #choices: number[] | undefined;
  readonly #tensors: (Tensor | undefined)[];
  #head: Storage | null = null;
  #tail: Storage | null = null;
  #poolSize = 0;
  clock = 1;
  used = 0;
  peak = 0;
  model = 0;
  remat = 0;
  remats = 0;
  evictions = 0;
  eager = 0;
  policyNs = 0;
  #stamp = 0;
  /** The last `seq` given. */
  #seq = 0;
  /** The candidates of a choice whose regions may need a walk, and their lower scores. */
  readonly #cand: Storage[] = [];
  readonly #candLow: number[] = [];
  /**
   * `dtr`, `msps`, by storage index: the storages, material (1) or not, compute, the last walk
   * that reached it, the epochs in which an invalidation walk last went upstream (downstream)
   * through it, the walks that counted it while evicted; the storages' links and how many of
   * each storage's are linked yet; the walks' stack.
   */
  readonly #all: Storage[] = [];
  readonly #mat: Uint8Array;
  readonly #comp: Float64Array;
  readonly #seen: Int32Array;
  readonly #seenUp: Int32Array;
  readonly #seenDown: Int32Array;
  readonly #refs: WalkLists | null;
  readonly #links: StorageLinks | null;
  readonly #upLen: Int32Array;
  readonly #downLen: Int32Array;
  readonly #stack: Int32Array;
  /** `lru`, `largest`: the pool as a heap (null: scanned). */
  readonly #heap: PoolHeap | null;
  /** Incremented by each choice, which reads (and cleans) the cached region costs. */
  #epoch = 1;
  /** The last region walk stopped at its limit. */
  #cut = false;

  constructor(c: CompiledTrace, o: FastReplayOptions) {
    this.#c = c;
    this.#budget = o.budgetBytes;
    this.#baseline = o.budgetBytes === Infinity;
    const h = (HEURISTICS as readonly string[]).indexOf(o.policy);
    if (h < 0) throw new RangeError(`fast replay: unsupported policy "${o.policy}"`);
    this.#h = h;
    this.#regions = !this.#baseline && (h === 1 || h === 3);
    this.#eq = !this.#baseline && h === 0;
    this.#uncached = o.uncachedRegions === true;
    this.#nb = this.#eq || this.#regions;
    this.#limit = o.overheadLimit === Infinity ? Infinity : c.computeNs * (o.overheadLimit - 1);
    this.#rng = seededRandom((o.seed ?? 1) ^ 0x5bd1e995);
    this.#tensors = new Array(c.tensors);
    this.#choices = o.choices;
    this.#links = this.#regions ? storageLinks(c) : null;
    const n = this.#links !== null ? this.#links.storages : 0;
    this.#upLen = new Int32Array(n);
    this.#downLen = new Int32Array(n);
    this.#refs = this.#links !== null ? new WalkLists(n) : null;
    const heap = !this.#baseline && !this.#uncached && (h === 4 || h === 5);
    this.#heap = heap ? new PoolHeap(h === 4 ? (s) => s.lastAccess : (s) => 1 / s.size) : null;
    this.#mat = new Uint8Array(n);
    this.#comp = new Float64Array(n);
    this.#seen = new Int32Array(n);
    this.#seenUp = new Int32Array(n);
    this.#seenDown = new Int32Array(n);
    this.#stack = new Int32Array(n);
  }

  run(): FastReplay {
    const s = this.#c.schedule;
    let reason: FastReplay["reason"];
    try {
      for (let i = 0; i < s.length; i += 2) {
        const x = s[i + 1]!;
        switch (s[i]) {
          case COMPUTE:
            this.#computeOp(x);
            break;
          case GET: {
            const t = this.#tensors[x]!;
            t.storage.refExt++;
            t.refExt++;
            break;
          }
          case RELEASE:
            this.#release(this.#tensors[x]!);
            break;
          case PIN: {
            const t = this.#tensors[x]!;
            if (!t.defined) this.#materialize(t, true);
            this.#pin(t);
            break;
          }
          case READ: {
            const t = this.#tensors[x]!;
            if (!t.defined) this.#materialize(t, true);
            this.#touch(t.storage);
            break;
          }
        }
      }
    } catch (e) {
      if (e instanceof OOM) reason = "out of memory";
      else if (e instanceof Thrash) reason = "thrashing";
      else throw e;
    }
    const feasible = reason === undefined;
    return {
      feasible,
      ...(reason ? { reason } : {}),
      overhead: feasible ? (this.model > 0 ? (this.model + this.remat) / this.model : 1) : Infinity,
      peakBytes: this.peak,
      computeNs: this.model,
      recomputeNs: this.remat,
      remats: this.remats,
      evictions: this.evictions,
      eagerDrops: this.eager,
      policyNs: this.policyNs,
      endBytes: this.used,
    };
  }

  // ---------------------------------------------------------------- pool

  /** `s` is read or written now. */
  #touch(s: Storage): void {
    s.lastAccess = this.clock;
    if (s.inPool && this.#h === 4) this.#heap?.push(s);
  }

  #poolAdd(s: Storage): void {
    if (s.inPool) return;
    s.inPool = true;
    s.seq = ++this.#seq;
    s.prev = this.#tail;
    s.next = null;
    if (this.#tail === null) this.#head = s;
    else this.#tail.next = s;
    this.#tail = s;
    this.#poolSize++;
    this.#heap?.push(s);
  }

  #poolRemove(s: Storage): void {
    if (!s.inPool) return;
    s.inPool = false;
    if (s.prev === null) this.#head = s.next;
    else s.prev.next = s.next;
    if (s.next === null) this.#tail = s.prev;
    else s.next.prev = s.prev;
    s.prev = s.next = null;
    this.#poolSize--;
  }

  #lock(s: Storage): void {
    if (s.refInt === 0) this.#poolRemove(s);
    s.refInt++;
  }

  #unlock(s: Storage): void {
    s.refInt--;
    if (s.refInt === 0) this.#poolAdd(s);
  }

  // ---------------------------------------------------------------- calls

  #computeOp(k: number): void {
    const d = this.#c.ops[k]!;
    const n = d.sizes.length;
    let total = 0;
    for (let i = 0; i < n; i++) total += d.sizes[i]!;
    if (!Number.isSafeInteger(total)) {
      throw new RangeError(`call ${k}: output sizes sum past 2^53 - 1 bytes (${total})`);
    }
    const op = new Op(d.cost, d.sizes, total);
    const parents: Tensor[] = d.args.map((a) => this.#tensors[a]!);
    for (let i = 0; i < n; i++) {
      const a = d.aliases[i]!;
      const id = d.out0 + i;
      let st: Storage;
      if (a >= 0) st = parents[a]!.storage;
      else {
        st = new Storage(d.sizes[i]!, id);
        st.idx = this.#all.length;
        this.#all.push(st);
      }
      const t = new Tensor(id, op, i, st, parents);
      st.tensors.push(t);
      st.refExt++;
      // The storage's compute: the distinct ops of its tensors.
      if (
        st.tensors.length === 1 ||
        !st.tensors.some((u, j) => u.op === op && j < st.tensors.length - 1)
      ) {
        st.compute += op.cost;
        if (this.#regions) this.#comp[st.idx] = st.compute;
      }
      op.outputs.push(t);
      this.#tensors[id] = t;
      if (st.ecn === null && st.tensors.length === 1 && this.#eq) st.ecn = new UF(0);
    }
    for (const p of parents) {
      for (const t of op.outputs) {
        p.children.push(t);
        if (this.#nb) {
          const ps = p.storage, ts = t.storage;
          if (ps !== ts) {
            if (!ps.material) ts.evNb++;
            if (!ts.material) ps.evNb++;
            ts.nbVer++;
            ps.nbVer++;
            if (ts.nbrs[ts.nbrs.length - 1] !== ps) ts.nbrs.push(ps);
            if (ps.nbrs[ps.nbrs.length - 1] !== ts) ps.nbrs.push(ts);
          }
        }
      }
    }
    // Outputs linked under an evicted argument extend the regions above it until computed.
    if (this.#links !== null) {
      const l = this.#links;
      for (let j = l.opEdges[k]!, e = l.opEdges[k + 1]!; j < e; j++) {
        this.#upLen[l.edgeTo[j]!]!++;
        this.#downLen[l.edgeFrom[j]!]!++;
      }
      for (const p of parents) {
        if (!p.storage.material) {
          this.#invalidateAround(op.outputs[0]!.storage);
          break;
        }
      }
    }
    this.#materialize(op.outputs[0]!, false);
    for (const t of op.outputs) this.#touch(t.storage);
  }

  #materialize(t: Tensor, remat: boolean): void {
    const ps = t.parents;
    for (let i = 0; i < ps.length; i++) this.#touch(ps[i]!.storage);
    const undef: Tensor[] = [];
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i]!;
      if (p.defined) this.#lock(p.storage);
      else undef.push(p);
    }
    for (const p of undef) {
      if (!p.defined) this.#materialize(p, true);
      this.#lock(p.storage);
    }
    const size = t.op.totalSize;
    if (this.used + size > this.#budget) this.#free(size);
    this.#compute(t, remat);
    for (let i = 0; i < ps.length; i++) this.#unlock(ps[i]!.storage);
    if (this.remat > this.#limit) throw new Thrash();
  }

  #free(size: number): void {
    while (this.used + size > this.#budget) {
      if (this.#poolSize === 0) throw new OOM();
      const t0 = performance.now();
      const s = this.#choose();
      this.#epoch++;
      this.policyNs += (performance.now() - t0) * 1e6;
      this.evictions++;
      this.#choices?.push(s.rootId);
      this.#evict(s);
    }
  }

  #compute(t: Tensor, remat: boolean): void {
    const op = t.op;
    const outs = op.outputs;
    // simrd's order: the siblings, then t (pool order breaks ties).
    const rematStorages: Storage[] = [];
    for (const u of outs) if (u !== t && !u.storage.material) rematStorages.push(u.storage);
    if (!t.storage.material) rematStorages.push(t.storage);
    this.clock += op.cost;
    this.used += op.totalSize;
    if (this.used > this.peak) this.peak = this.used;
    if (remat) {
      this.remat += op.cost;
      this.remats++;
    } else this.model += op.cost;
    for (const u of outs) {
      if (u === t || !u.defined) {
        u.storage.material = true;
        if (this.#regions) this.#mat[u.storage.idx] = 1;
        u.defined = true;
      } else this.used -= op.sizes[u.index]!;
    }
    for (const s of rematStorages) {
      if (s.refInt === 0 && !this.#baseline) this.#poolAdd(s);
    }
    if (this.#nb) { for (const s of rematStorages) this.#neighbours(s, -1); }
    // A new output borders no evicted storage: no region changes, unless a choice read the
    // regions while the output was linked into the graph but not yet computed (a walk then
    // went through it as an evicted storage).
    if (this.#regions) { for (const s of rematStorages) this.#regionsShrink(s); }
    if (this.#eq) {
      for (const s of rematStorages) {
        if (s.ecn !== null) {
          const r = find(s.ecn);
          r.value -= s.compute;
          r.ver++;
        }
        s.ecn = null;
      }
    }
  }

  #release(t: Tensor): void {
    const s = t.storage;
    s.refExt--;
    t.refExt--;
    if (s.refExt !== 0 || !s.material) return;
    if (this.#baseline) {
      // Runtime V1 without a budget: banished (freed) once unreferenced, constants included.
      s.material = false;
      this.used -= s.size;
      for (const u of s.tensors) u.defined = false;
      if (s.refInt > 0) s.refInt = 0;
      return;
    }
    if (s.pinned) return;
    this.eager++;
    this.#evict(s);
  }

  #pin(t: Tensor): void {
    const s = t.storage;
    if (s.pinned) return;
    if (!this.#baseline) this.#lock(s);
    else s.refInt++;
    s.pinned = true;
  }

  #evict(s: Storage): void {
    s.material = false;
    if (this.#regions) this.#mat[s.idx] = 0;
    this.used -= s.size;
    this.#poolRemove(s);
    for (const t of s.tensors) t.defined = false;
    if (this.#nb) this.#neighbours(s, 1);
    if (this.#regions) this.#invalidateAround(s);
    if (this.#eq) {
      const e = new UF(s.compute);
      s.ecn = e;
      for (const n of s.nbrs) {
        if (n.material) continue;
        const l = find(n.ecn!), r = find(e);
        if (l === r) continue;
        l.parent = r;
        r.value = l.value + r.value;
        r.ver++;
      }
    }
  }

  /** `s` turned non-material (+1) or material (-1): its neighbours' counts follow. */
  #neighbours(s: Storage, d: number): void {
    for (const t of s.tensors) {
      for (const p of t.parents) if (p.storage !== s) (p.storage.evNb += d, p.storage.nbVer++);
      for (const c of t.children) if (c.storage !== s) (c.storage.evNb += d, c.storage.nbVer++);
    }
  }

  /**
   * `s` turned evicted (or was linked into the graph under an evicted
   * argument): the regions around it grew, and the cached region costs of the
   * material storages at the border of the evicted area around `s` are no
   * longer exact (`simrd` absorbs those regions at this point), though still
   * lower bounds; so are `s`'s own. The walk goes through evicted storages
   * only, and not through one that an earlier walk of this epoch went through
   * in the same direction: every material storage beyond it was marked then,
   * or turned material since (and was marked then), or is beyond a later
   * change's walk (marks are cleared only by a choice, which starts a new epoch).
   */
  #invalidateAround(s: Storage): void {
    s.fwdDirty = s.revDirty = true;
    const epoch = this.#epoch, si = s.idx;
    const stack = this.#stack, mat = this.#mat, all = this.#all, links = this.#links!;
    for (let up = 0; up < 2; up++) {
      const seen = up === 1 ? this.#seenUp : this.#seenDown;
      const start = up === 1 ? links.upStart : links.downStart;
      const adj = up === 1 ? links.up : links.down;
      const len = up === 1 ? this.#upLen : this.#downLen;
      stack[0] = si;
      let top = 1;
      while (top > 0) {
        const x = stack[--top]!;
        for (let j = start[x]!, e = j + len[x]!; j < e; j++) {
          const u = adj[j]!;
          if (u === si) continue;
          if (mat[u] === 1) {
            if (up === 1) all[u]!.fwdDirty = true;
            else all[u]!.revDirty = true;
          } else if (seen[u] !== epoch) {
            seen[u] = epoch;
            stack[top++] = u;
          }
        }
      }
    }
  }

  /**
   * `s` turned material: the regions that counted it shrank. The walks that
   * counted it are the ones listed in its walk list; their storages lose those
   * cached sums (no lower bound any more). Regions that did not count `s` are
   * unchanged, and cached sums of walks that did not go through `s` stay lower
   * bounds (their storages are still evicted and linked the same way). `s`'s
   * own cached sums stay lower bounds, but not exact (walks of changes while
   * it was evicted went through it).
   */
  #regionsShrink(s: Storage): void {
    s.fwdDirty = s.revDirty = true;
    const refs = this.#refs!, a = refs.arena, live = refs.live, at = refs.at[s.idx]!;
    for (let i = at, e = at + refs.n[s.idx]!; i < e; i++) {
      const id = a[i]!;
      if (live[id] !== 1) continue;
      live[id] = 0;
      const b = refs.from[id]!;
      if (b.fwdWalk === id) (b.fwd = 0, b.fwdWalk = 0, b.fwdDirty = true);
      else (b.rev = 0, b.revWalk = 0, b.revDirty = true);
    }
    refs.n[s.idx] = 0;
  }

  /**
   * The compute of the evicted storages reachable from `base` (downstream, or
   * upstream when `reverse`) through evicted storages. With a `limit`, the walk
   * stops (setting `#cut`) as soon as `(add + sum) / den` passes it, and returns
   * the part summed (a lower bound).
   */
  #regionCost(
    base: Storage,
    reverse: boolean,
    add: number,
    den: number,
    limit: number,
    id: number,
  ): number {
    this.#cut = false;
    const stamp = ++this.#stamp;
    const stack = this.#stack, seen = this.#seen, mat = this.#mat, comp = this.#comp;
    const refs = this.#refs!, links = this.#links!;
    const start = reverse ? links.upStart : links.downStart;
    const adj = reverse ? links.up : links.down;
    const len = reverse ? this.#upLen : this.#downLen;
    seen[base.idx] = stamp;
    let c = 0;
    stack[0] = base.idx;
    let top = 1;
    while (top > 0) {
      const x = stack[--top]!;
      for (let j = start[x]!, e = j + len[x]!; j < e; j++) {
        const u = adj[j]!;
        if (seen[u] === stamp) continue;
        seen[u] = stamp;
        if (mat[u] === 1) continue;
        c += comp[u]!;
        refs.add(u, id);
        if ((add + c) / den > limit) {
          this.#cut = true;
          return c;
        }
        stack[top++] = u;
      }
    }
    return c;
  }

  /**
   * {@link #regionCost} without limit, walking the tensors' parents and
   * children (the reference of `uncachedRegions`, independent of `up`/`down`).
   */
  #regionCostByTensors(base: Storage, reverse: boolean): number {
    const stamp = ++this.#stamp;
    base.stamp = stamp;
    let c = 0;
    const stack: Storage[] = [base];
    while (stack.length > 0) {
      const x = stack.pop()!;
      for (const t of x.tensors) {
        const next = reverse ? t.parents : t.children;
        for (let i = 0; i < next.length; i++) {
          const us = next[i]!.storage;
          if (us.stamp === stamp) continue;
          us.stamp = stamp;
          if (us.material) continue;
          c += us.compute;
          stack.push(us);
        }
      }
    }
    return c;
  }

  /**
   * `s`'s downstream (or upstream, `reverse`) region from its cache, walked
   * when not exact: the exact sum, or Infinity once `(add + sum) / den` is
   * known to pass `limit` (the cache then keeps the larger of its lower bound
   * and the part summed, and stays inexact).
   */
  #region(s: Storage, reverse: boolean, add: number, den: number, limit: number): number {
    if (reverse ? !s.revDirty : !s.fwdDirty) return reverse ? s.rev : s.fwd;
    const id = this.#refs!.newWalk(s);
    const c = this.#regionCost(s, reverse, add, den, limit, id);
    const cut = this.#cut, live = this.#refs!.live;
    if (reverse) {
      if (!cut || c > s.rev) (live[s.revWalk] = 0, s.rev = c, s.revWalk = id, live[id] = 1);
      if (!cut) s.revDirty = false;
    } else {
      if (!cut || c > s.fwd) (live[s.fwdWalk] = 0, s.fwd = c, s.fwdWalk = id, live[id] = 1);
      if (!cut) s.fwdDirty = false;
    }
    return cut ? Infinity : c;
  }

  /** `dtr`'s cost of `s` (`(compute + regions down and up) / den`), or Infinity once past `limit`. */
  #dtrCost(s: Storage, den: number, limit: number): number {
    const f = this.#region(s, false, s.compute + s.rev, den, limit * SLACK);
    if (f === Infinity) return Infinity;
    const r = this.#region(s, true, s.compute + f, den, limit * SLACK);
    if (r === Infinity) return Infinity;
    return (s.compute + (f + r)) / den;
  }

  // ------------------------------------------------------------ heuristics

  /** Whether `s` at `cost` beats `best` at `bestCost` in a scan in pool order (see {@link #choose}). */
  static #beats(s: Storage, cost: number, best: Storage | null, bestCost: number): boolean {
    if (best === null || cost < bestCost) return true;
    if (cost > bestCost) return false;
    return cost === 0 ? s.seq < best.seq : s.seq > best.seq;
  }

  /** The choice: the pool storage (in order) of least score; of equal ones the last, of 0 the first. */
  #choose(): Storage {
    if (this.#regions && !this.#uncached) return this.#chooseRegions();
    if (this.#heap !== null) return this.#heap.top(this.#poolSize)!;
    let best: Storage | null = null;
    let bestCost = Infinity;
    const h = this.#h, clock = this.clock;
    for (let s = this.#head; s !== null; s = s.next) {
      let cost: number;
      if (h <= 2) {
        const den = s.size * (clock - s.lastAccess);
        if (h === 1) {
          cost = den > 0
            ? (s.compute +
              (this.#regionCostByTensors(s, false) + this.#regionCostByTensors(s, true))) /
              den
            : Infinity;
        } else {
          // dtr-eq: the class costs are never negative, so a candidate whose own cost already
          // loses to the best so far cannot be chosen (nor stop the scan).
          if (h === 0 && den > 0 && s.evNb > 0 && s.compute / den > bestCost && !this.#uncached) {
            continue;
          }
          const num = h === 0 ? this.#eqCost(s) : s.compute;
          cost = den > 0 ? num / den : Infinity;
        }
      } else if (h === 3) {
        cost = s.size > 0 ? (s.compute + this.#regionCostByTensors(s, true)) / s.size : Infinity;
      } else if (h === 4) cost = s.lastAccess;
      else if (h === 5) cost = s.size > 0 ? 1 / s.size : Infinity;
      else cost = this.#rng() + 1e-9;
      if (cost <= bestCost) {
        bestCost = cost;
        best = s;
      }
      if (cost === 0) break;
    }
    return best!;
  }

  /**
   * `dtr` and `msps` with the cached regions: the choice of {@link #choose}.
   * A first pass scores the candidates whose regions are cached; the others
   * get a lower score from their caches (region costs are never negative, and
   * a cached sum stays a lower bound while only evictions touched the region),
   * and those that can still win are walked in increasing lower score, each
   * walk stopping as soon as it passes the best score so far.
   */
  #chooseRegions(): Storage {
    const dtr = this.#h === 1, clock = this.clock;
    const cand = this.#cand, low = this.#candLow;
    let k = 0;
    let best: Storage | null = null;
    let bestCost = Infinity;
    for (let s = this.#head; s !== null; s = s.next) {
      const den = dtr ? s.size * (clock - s.lastAccess) : s.size;
      let cost: number;
      if (!(den > 0)) cost = Infinity;
      else if (s.evNb === 0) cost = s.compute / den;
      else if (dtr) {
        if (!s.fwdDirty && !s.revDirty) cost = (s.compute + (s.fwd + s.rev)) / den;
        else {
          const l = (s.compute + s.fwd + s.rev) / den;
          if (l <= bestCost) (cand[k] = s, low[k++] = l);
          continue;
        }
      } else if (!s.revDirty) cost = (s.compute + s.rev) / den;
      else {
        const l = (s.compute + s.rev) / den;
        if (l <= bestCost) (cand[k] = s, low[k++] = l);
        continue;
      }
      if (Sim.#beats(s, cost, best, bestCost)) (best = s, bestCost = cost);
    }
    while (k > 0) {
      let j = 0;
      for (let i = 1; i < k; i++) if (low[i]! < low[j]!) j = i;
      const s = cand[j]!;
      if (low[j]! > bestCost) break;
      k--;
      cand[j] = cand[k]!;
      low[j] = low[k]!;
      const cost = dtr
        ? this.#dtrCost(s, s.size * (clock - s.lastAccess), bestCost)
        : this.#msps(s, bestCost);
      if (cost !== Infinity || best === null) {
        if (Sim.#beats(s, cost, best, bestCost)) (best = s, bestCost = cost);
      }
    }
    return best!;
  }

  /** `msps`'s cost of `s` (`(compute + region upstream) / size`), or Infinity once it passes `limit`. */
  #msps(s: Storage, limit: number): number {
    const r = this.#region(s, true, s.compute, s.size, limit * SLACK);
    return r === Infinity ? Infinity : (s.compute + r) / s.size;
  }
  /**
   * `dtr-eq`'s numerator: `s`'s compute plus the compute of the classes of its
   * evicted neighbours (each once); cached while its neighbours and (for up to
   * two classes) the classes summed do not change.
   */
  #eqCost(s: Storage): number {
    if (s.evNb === 0) return s.compute;
    const rs = s.eqR, vs = s.eqV;
    if (s.eqNbVer === s.nbVer && !this.#uncached) {
      let i = 0;
      const k = s.eqRoots;
      while (i < k && rs[i]!.parent === null && rs[i]!.ver === vs[i]) i++;
      if (i === k) return s.eqNum;
    }
    const stamp = ++this.#stamp;
    let c = s.compute, k = 0;
    const ns = s.nbrs;
    for (let i = 0; i < ns.length; i++) {
      const n = ns[i]!;
      if (n.material) continue;
      const r = find(n.ecn!);
      if (r.mark === stamp) continue;
      r.mark = stamp;
      c += r.value;
      rs[k] = r;
      vs[k++] = r.ver;
    }
    s.eqNum = c;
    s.eqRoots = k;
    s.eqNbVer = s.nbVer;
    return c;
  }
}
