/**
 * The fast trace replayer behind {@link simulateTrace}: the published DTR
 * simulator's semantics (uwsampl/dtr-prototype, `simrd`: the budget-free
 * baseline of runtime V1, which banishes every storage no handle refers to,
 * and the budgeted runtime V2 with eager eviction, equivalence classes and
 * incrementally maintained evicted regions), on flat objects compiled once per
 * trace and reused across budgets.
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
import type { Trace } from "@libra/lineage/trace";

/** The policies the fast replayer implements (the dynamic ones without swapping). */
export const FAST_POLICIES: ReadonlySet<string> = new Set([
  "dtr",
  "dtr-eq",
  "dtr-local",
  "msps",
  "lru",
  "largest",
  "random",
]);

const COMPUTE = 0, GET = 1, RELEASE = 2, PIN = 3;

/** A trace compiled for replays: ops and a schedule over tensor ids. */
export interface CompiledTrace {
  /** Per op: cost (ns), output sizes (0 for views), alias indices, argument tensor ids, first output id. */
  readonly ops: {
    cost: number;
    sizes: number[];
    aliases: number[];
    args: number[];
    out0: number;
    model: boolean;
  }[];
  /** Schedule: pairs (kind, operand). */
  readonly schedule: Int32Array;
  /** Number of tensors. */
  readonly tensors: number;
  /** Sum of the model calls' costs (the budget-free compute). */
  readonly computeNs: number;
}

/**
 * Compiles `trace` (as the published simulator's parser builds its graph).
 * `costs` gives each CALL/MUTATE's cost in order (default: its TIME).
 */
export function compileTrace(trace: Trace, costs?: ArrayLike<number>): CompiledTrace {
  const ops: CompiledTrace["ops"] = [];
  const sched: number[] = [];
  const names = new Map<string, number>();
  const refs: number[] = [];
  const storageSize: number[] = [];
  let tensors = 0, k = 0, computeNs = 0;
  const newOp = (
    cost: number,
    sizes: number[],
    aliases: number[],
    args: number[],
    model: boolean,
  ): number => {
    const out0 = tensors;
    for (let i = 0; i < sizes.length; i++) {
      const a = aliases[i]!;
      storageSize.push(a >= 0 ? storageSize[args[a]!]! : sizes[i]!);
      refs.push(1);
    }
    tensors += sizes.length;
    ops.push({ cost, sizes, aliases, args, out0, model });
    if (model) computeNs += cost;
    sched.push(COMPUTE, ops.length - 1);
    return out0;
  };
  for (const e of trace.events) {
    switch (e.kind) {
      case "constant": {
        const t = newOp(0, [e.bytes], [-1], [], false);
        sched.push(PIN, t);
        names.set(e.name, t);
        break;
      }
      case "call": {
        const args = e.args.map((a) => names.get(a)!);
        const cost = costs ? costs[k]! : e.timeNs;
        k++;
        const t = newOp(
          cost,
          e.results.map((r) => (r.alias >= 0 ? 0 : r.bytes)),
          e.results.map((r) => r.alias),
          args,
          true,
        );
        e.results.forEach((r, i) => names.set(r.name, t + i));
        break;
      }
      case "mutate": {
        const args = e.args.map((a) => names.get(a)!);
        const cost = costs ? costs[k]! : e.timeNs;
        k++;
        const t = newOp(
          cost,
          e.mutate.map((m) => storageSize[args[m]!]!),
          e.mutate.map(() => -1),
          args,
          true,
        );
        e.mutate.forEach((m, i) => {
          const old = names.get(e.args[m]!)!;
          names.set(e.args[m]!, t + i);
          refs[old]!--;
          sched.push(RELEASE, old);
        });
        break;
      }
      case "copy": {
        const t = names.get(e.src)!;
        names.set(e.dst, t);
        refs[t]!++;
        sched.push(GET, t);
        break;
      }
      case "copyFrom": {
        const old = names.get(e.dst)!;
        const t = names.get(e.src)!;
        names.set(e.dst, t);
        refs[old]!--;
        refs[t]!++;
        sched.push(RELEASE, old, GET, t);
        break;
      }
      case "release": {
        const t = names.get(e.name);
        if (t !== undefined) {
          refs[t]!--;
          sched.push(RELEASE, t);
        }
        break;
      }
      case "annotate":
        break;
    }
  }
  for (const t of names.values()) if (refs[t]! > 0) sched.push(PIN, t);
  return { ops, schedule: Int32Array.from(sched), tensors, computeNs };
}

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

class Region {
  readonly interior = new Set<Storage>();
  readonly frontier = new Set<Storage>();
  compute = 0;
  constructor(readonly base: Storage, readonly reverse: boolean) {}
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
  region: Region | null = null;
  regionRev: Region | null = null;
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

  constructor(c: CompiledTrace, o: FastReplayOptions) {
    this.#c = c;
    this.#budget = o.budgetBytes;
    this.#baseline = o.budgetBytes === Infinity;
    const h = ["dtr-eq", "dtr", "dtr-local", "msps", "lru", "largest", "random"].indexOf(o.policy);
    if (h < 0) throw new RangeError(`fast replay: unsupported policy "${o.policy}"`);
    this.#h = h;
    this.#regions = !this.#baseline && (h === 1 || h === 3);
    this.#eq = !this.#baseline && h === 0;
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
      if (this.#regions && st.region === null) {
        st.region = new Region(st, false);
        st.regionRev = new Region(st, true);
      }
    }
    for (const p of parents) {
      for (const t of op.outputs) {
        p.children.push(t);
        if (this.#eq) {
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
    if (this.#regions) this.#rebuildAround(rematStorages);
    if (this.#eq) {
      for (const s of rematStorages) this.#neighbours(s, -1);
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
    if (this.#regions) {
      // A pinned storage never enters the pool: its regions are never read.
      for (const ps of [...s.regionRev!.frontier]) if (!ps.pinned) absorb(ps.region!, s);
      for (const cs of [...s.region!.frontier]) if (!cs.pinned) absorb(cs.regionRev!, s);
      clear(s.region!);
      clear(s.regionRev!);
    }
    if (this.#eq) {
      this.#neighbours(s, 1);
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

  #rebuildAround(rematStorages: Storage[]): void {
    if (rematStorages.length === 0) return;
    const fwd = new Set<Storage>(), rev = new Set<Storage>();
    for (const s of rematStorages) {
      rebuild(s.region!);
      rebuild(s.regionRev!);
      for (const x of s.regionRev!.frontier) fwd.add(x);
      for (const x of s.region!.frontier) rev.add(x);
    }
    for (const x of fwd) if (!x.pinned) rebuild(x.region!);
    for (const x of rev) if (!x.pinned) rebuild(x.regionRev!);
  }

  // ------------------------------------------------------------ heuristics

  #choose(): Storage {
    let best: Storage | null = null;
    let bestCost = Infinity;
    const h = this.#h, clock = this.clock;
    for (let s = this.#head; s !== null; s = s.next) {
      let cost: number;
      if (h <= 2) {
        const den = s.size * (clock - s.lastAccess);
        const num = h === 0
          ? this.#eqCost(s)
          : h === 1
          ? s.compute + s.region!.compute + s.regionRev!.compute
          : s.compute;
        cost = den > 0 ? num / den : Infinity;
      } else if (h === 3) {
        cost = s.size > 0 ? (s.compute + s.regionRev!.compute) / s.size : Infinity;
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

function clear(r: Region): void {
  r.interior.clear();
  r.frontier.clear();
  r.compute = 0;
}

/** `simrd`'s Region.absorb: `s` (a frontier storage of `r`) was evicted. */
function absorb(r: Region, s: Storage): void {
  const reg = r.reverse ? s.regionRev! : s.region!;
  r.frontier.delete(s);
  for (const x of reg.frontier) r.frontier.add(x);
  // The interior gains reg's interior (what it lacked) and `s`, counted even
  // when already inside (as simrd's set difference plus add does).
  let sNew = false;
  for (const x of reg.interior) {
    if (!r.interior.has(x)) {
      r.interior.add(x);
      r.compute += x.compute;
      if (x === s) sNew = true;
    }
  }
  if (!sNew) {
    r.interior.add(s);
    r.compute += s.compute;
  }
}

/** `simrd`'s Region.rebuild: the evicted storages reachable from the base, and the material frontier. */
function rebuild(r: Region): void {
  clear(r);
  const base = r.base;
  const stack: Storage[] = [base];
  while (stack.length > 0) {
    const s = stack.pop()!;
    for (const t of s.tensors) {
      const next = r.reverse ? t.parents : t.children;
      for (const u of next) {
        const us = u.storage;
        if (us.material) {
          if (us.rootId !== base.rootId) r.frontier.add(us);
          continue;
        }
        if (!r.interior.has(us)) {
          r.compute += us.compute;
          r.interior.add(us);
          stack.push(us);
        }
      }
    }
  }
}
