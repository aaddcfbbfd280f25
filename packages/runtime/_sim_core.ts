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
 * caches the two sums, an eviction or rematerialization marks the caches of
 * the material storages bordering the evicted area around it (a walk that
 * stops where an earlier walk of the same choice epoch went), and a choice
 * walks only the marked candidates that can still win: a candidate's own cost
 * plus its regions' last sums (a lower bound while only evictions touched
 * them) is compared with the best cost found so far.
 * The choices equal a fresh walk of every candidate at every choice (tested),
 * and `simrd`'s on the published logs.
 *
 * Semantics, as in `simrd`: a CONSTANT is a zero-cost call whose output is
 * pinned; a CALL's view outputs (ALIAS k) share argument k's storage and take
 * no memory; MUTATE is a call producing a new version of each mutated argument
 * (the old handle released); COPY takes a reference, COPY_FROM releases the
 * destination's tensor and takes one on the source's; RELEASE drops one; the
 * tensors still referenced at the end are re-materialized and pinned in order
 * of first definition of their names. The pool of evictable storages is kept
 * in insertion order; a heuristic scans it, the last storage of minimal score
 * wins and a zero score stops the scan. Overhead = (compute + recompute) /
 * compute; a replay whose recomputation passes (limit - 1) x compute thrashes.
 *
 * @module
 */

import { seededRandom } from "@libra/evict";
import { type CompiledTrace, COMPUTE, GET, PIN, RELEASE } from "./_sim_compile.ts";

export { type CompiledTrace, compileTrace } from "./_sim_compile.ts";

/** The heuristics of the fast replayer, in the order of its internal codes. */
const HEURISTICS = ["dtr-eq", "dtr", "dtr-local", "msps", "lru", "largest", "random"] as const;

/** The policies the fast replayer implements (the dynamic ones without swapping). */
export const FAST_POLICIES: ReadonlySet<string> = new Set(HEURISTICS);

class UF {
  parent: UF | null = null;
  mark = 0;
  constructor(public value: number) {}
}

function find(n: UF): UF {
  let r = n;
  while (r.parent !== null) r = r.parent;
  while (n.parent !== null && n.parent !== r) {
    const p: UF = n.parent;
    n.parent = r;
    n = p;
  }
  return r;
}

class Tensor {
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

class Op {
  outputs: Tensor[] = [];
  constructor(
    readonly cost: number,
    readonly sizes: number[],
    readonly totalSize: number,
  ) {}
}

class Storage {
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
  stamp = 0;
  /** Incidences to non-material storages (parents' and children's, other storages): 0 = no evicted neighbour. */
  evNb = 0;
  /** Neighbouring storages (of parents and children; repeats possible, never itself). */
  readonly nbrs: Storage[] = [];
  /** Compute of the evicted storages reachable downstream (children) through evicted storages; valid unless `fwdDirty`. */
  fwd = 0;
  /** The same upstream (parents). */
  rev = 0;
  fwdDirty = true;
  revDirty = true;
  /** A rematerialization reached the region since `fwd` (`rev`) was cached: it is no lower bound. */
  fwdShrunk = true;
  revShrunk = true;
  /** The epoch in which an invalidation walk last went upstream (resp. downstream) through this storage. */
  walkUp = 0;
  walkDown = 0;
  /** The same for walks after a rematerialization (which also mark regions shrunk). */
  walkUpShrink = 0;
  walkDownShrink = 0;
  constructor(readonly size: number, readonly rootId: number) {}
}

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
   * `dtr` and `msps`: walk every candidate's evicted regions afresh at every
   * choice, without caches or pruning (slow; the reference the cached search
   * is tested against: the choices are the same).
   */
  uncachedRegions?: boolean;
}

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
  /** Incremented by each choice, which reads (and cleans) the cached region costs. */
  #epoch = 1;
  /** The epoch when the current call's outputs were linked into the graph. */
  #opEpoch = 0;
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

  #poolAdd(s: Storage): void {
    if (s.inPool) return;
    s.inPool = true;
    s.prev = this.#tail;
    s.next = null;
    if (this.#tail === null) this.#head = s;
    else this.#tail.next = s;
    this.#tail = s;
    this.#poolSize++;
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
      const st = a >= 0 ? parents[a]!.storage : new Storage(d.sizes[i]!, id);
      const t = new Tensor(id, op, i, st, parents);
      st.tensors.push(t);
      st.refExt++;
      // The storage's compute: the distinct ops of its tensors.
      if (
        st.tensors.length === 1 ||
        !st.tensors.some((u, j) => u.op === op && j < st.tensors.length - 1)
      ) {
        st.compute += op.cost;
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
            if (ts.nbrs[ts.nbrs.length - 1] !== ps) ts.nbrs.push(ps);
            if (ps.nbrs[ps.nbrs.length - 1] !== ts) ps.nbrs.push(ts);
          }
        }
      }
    }
    // Outputs linked under an evicted argument extend the regions above it until computed.
    if (this.#regions) {
      for (const p of parents) {
        if (!p.storage.material) {
          this.#invalidateAround(op.outputs[0]!.storage, false);
          break;
        }
      }
    }
    this.#opEpoch = this.#epoch;
    this.#materialize(op.outputs[0]!, false);
    for (const t of op.outputs) t.storage.lastAccess = this.clock;
  }

  #materialize(t: Tensor, remat: boolean): void {
    const ps = t.parents;
    for (let i = 0; i < ps.length; i++) ps[i]!.storage.lastAccess = this.clock;
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
    if (this.#regions && (remat || this.#epoch !== this.#opEpoch)) {
      for (const s of rematStorages) this.#invalidateAround(s, true);
    }
    if (this.#eq) {
      for (const s of rematStorages) {
        if (s.ecn !== null) {
          const r = find(s.ecn);
          r.value -= s.compute;
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
    this.used -= s.size;
    this.#poolRemove(s);
    for (const t of s.tensors) t.defined = false;
    if (this.#nb) this.#neighbours(s, 1);
    if (this.#regions) this.#invalidateAround(s, false);
    if (this.#eq) {
      const e = new UF(s.compute);
      s.ecn = e;
      for (const n of s.nbrs) {
        if (n.material) continue;
        const l = find(n.ecn!), r = find(e);
        if (l === r) continue;
        l.parent = r;
        r.value = l.value + r.value;
      }
    }
  }

  /** `s` turned non-material (+1) or material (-1): its neighbours' counts follow. */
  #neighbours(s: Storage, d: number): void {
    for (const t of s.tensors) {
      for (const p of t.parents) if (p.storage !== s) p.storage.evNb += d;
      for (const c of t.children) if (c.storage !== s) c.storage.evNb += d;
    }
  }

  /**
   * `s` changed state (evicted or rematerialized): the cached region costs of
   * the material storages at the border of the evicted area around `s` are
   * stale (`simrd` absorbs or rebuilds those regions at this point), and so
   * are `s`'s own. After an eviction (`shrink` false) the regions only grew,
   * so their cached costs stay lower bounds. The walk goes through evicted
   * storages only, and not through one that an earlier walk of this epoch went
   * through in the same direction (for a walk that marks regions shrunk, an earlier such walk):
   * every material storage beyond it was marked then or by the walk of a
   * later change (marks are cleared only by a choice, which starts a new
   * epoch).
   */
  #invalidateAround(s: Storage, shrink: boolean): void {
    s.fwdDirty =
      s.revDirty =
      s.fwdShrunk =
      s.revShrunk =
        true;
    const epoch = this.#epoch;
    for (const up of [true, false]) {
      const stack: Storage[] = [s];
      while (stack.length > 0) {
        const x = stack.pop()!;
        for (const t of x.tensors) {
          const next = up ? t.parents : t.children;
          for (let i = 0; i < next.length; i++) {
            const us = next[i]!.storage;
            if (us === s) continue;
            if (us.material) {
              if (up) {
                us.fwdDirty = true;
                if (shrink) us.fwdShrunk = true;
              } else {
                us.revDirty = true;
                if (shrink) us.revShrunk = true;
              }
            } else if (up) {
              if ((shrink ? us.walkUpShrink : us.walkUp) === epoch) continue;
              us.walkUp = epoch;
              if (shrink) us.walkUpShrink = epoch;
              stack.push(us);
            } else {
              if ((shrink ? us.walkDownShrink : us.walkDown) === epoch) continue;
              us.walkDown = epoch;
              if (shrink) us.walkDownShrink = epoch;
              stack.push(us);
            }
          }
        }
      }
    }
  }

  /** The compute of the evicted storages reachable from `base` (downstream, or upstream when `reverse`) through evicted storages. */
  #regionCost(base: Storage, reverse: boolean, add = 0, den = 1, limit = Infinity): number {
    this.#cut = false;
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
          if ((add + c) / den > limit) {
            this.#cut = true;
            return c;
          }
          stack.push(us);
        }
      }
    }
    return c;
  }

  /**
   * `dtr`'s neighbourhood: the compute of `s`'s evicted regions downstream and
   * upstream. (Walks are not cut at the scan's limit as `msps`'s are: `dtr`'s
   * choices come back to the same large regions, and a cut walk is walked
   * again, which measured slower than completing it once.)
   */
  #bothRegions(s: Storage): number {
    if (this.#uncached) return this.#regionCost(s, false) + this.#regionCost(s, true);
    if (s.evNb === 0) return 0;
    if (s.fwdDirty) {
      s.fwd = this.#regionCost(s, false);
      s.fwdDirty = s.fwdShrunk = false;
    }
    if (s.revDirty) {
      s.rev = this.#regionCost(s, true);
      s.revDirty = s.revShrunk = false;
    }
    return s.fwd + s.rev;
  }

  /** A lower bound of `s.compute + this.#bothRegions(s)` from the caches. */
  #lowerBoth(s: Storage): number {
    if (s.evNb === 0) return s.compute;
    return s.compute + (s.fwdShrunk ? 0 : s.fwd) + (s.revShrunk ? 0 : s.rev);
  }

  /** A lower bound of `s.compute + this.#upRegion(s)` from the cache. */
  #lowerUp(s: Storage): number {
    if (s.evNb === 0) return s.compute;
    return s.compute + (s.revShrunk ? 0 : s.rev);
  }

  /**
   * `msps`'s: the compute of `s`'s evicted region upstream; Infinity as soon as
   * `(s.compute + region) / den` is known to pass `limit` (the walk stops; what
   * it summed stays as a lower bound).
   */
  #upRegion(s: Storage, den = 1, limit = Infinity): number {
    if (this.#uncached) return this.#regionCost(s, true);
    if (s.evNb === 0) return 0;
    if (s.revDirty) {
      s.rev = this.#regionCost(s, true, s.compute, den, limit);
      s.revShrunk = false;
      if (this.#cut) return Infinity;
      s.revDirty = false;
    }
    return s.rev;
  }

  // ------------------------------------------------------------ heuristics

  #choose(): Storage {
    let best: Storage | null = null;
    let bestCost = Infinity;
    const h = this.#h, clock = this.clock;
    // dtr and msps: region costs are never negative, so a candidate whose own cost plus
    // its regions' last sums (a lower bound while only evictions touched them) already
    // loses to the best so far cannot be chosen, and its regions are not walked.
    const prune = !this.#uncached;
    for (let s = this.#head; s !== null; s = s.next) {
      let cost: number;
      if (h <= 2) {
        const den = s.size * (clock - s.lastAccess);
        if (h === 1) {
          if (prune && den > 0 && this.#lowerBoth(s) / den > bestCost) continue;
          cost = den > 0 ? (s.compute + this.#bothRegions(s)) / den : Infinity;
        } else {
          const num = h === 0 ? this.#eqCost(s) : s.compute;
          cost = den > 0 ? num / den : Infinity;
        }
      } else if (h === 3) {
        if (prune && s.size > 0 && this.#lowerUp(s) / s.size > bestCost) continue;
        cost = s.size > 0 ? (s.compute + this.#upRegion(s, s.size, bestCost)) / s.size : Infinity;
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

  #eqCost(s: Storage): number {
    if (s.evNb === 0) return s.compute;
    const stamp = ++this.#stamp;
    let c = s.compute;
    const ns = s.nbrs;
    for (let i = 0; i < ns.length; i++) {
      const n = ns[i]!;
      if (n.material) continue;
      const r = find(n.ecn!);
      if (r.mark === stamp) continue;
      r.mark = stamp;
      c += r.value;
    }
    return c;
  }
}
