/**
 * Lineage upkeep: what happens when values lose their last reference, are
 * overwritten or are collected. Releasing a reference (eager eviction, freeing
 * leaves nothing needs), the reachability questions behind it (is a storage
 * still needed for recomputation?), making dependents independent of a value
 * about to change (`invalidate`), copy-on-write (`preserve`), detaching a
 * storage's tensors (`retire`) and garbage collection (`collect`).
 *
 * @module
 */

import type { CallNode, Lineage, StorageNode, TensorNode } from "@libra/lineage";
import type { Engine } from "./engine.ts";
import type { EngineState } from "./_engine_state.ts";
import { addUsed, evict, lock, now, refreshPool, reserve, takeReady, unlock } from "./_eviction.ts";
import { materialize } from "./_remat.ts";
import { clearList, removeLast, Stack } from "@libra/util/list";

/** Drops an external reference; with eager eviction an unreferenced storage is evicted (lineage kept). */
export function release(e: Engine, k: EngineState, t: TensorNode): void {
  if (t.extRefs <= 0) throw new Error(`release ${t.name}: no external reference left`);
  t.extRefs--;
  const s = t.storage;
  s.extRefs--;
  if (s.extRefs === 0 && !s.pinned && !s.droppable) k.orphans.add(s);
  if (s.extRefs > 0 || s.locks > 0) return;
  if (s.residency === "resident") {
    if (s.droppable && !s.pinned) {
      if (k.eager) evict(e, k, s, "drop", "eager");
    } else if (k.leafRelease === "keep-pinned" && s.pinned) {
      return; // DTR's constants: pinned, resident until the end
    } else if (
      k.leafRelease === "free" || !isNeeded(e, s, true) ||
      (k.leafRelease === "free-unless-evicted" && !evictedNeeds(e, s))
    ) {
      // A leaf (or pinned value) no handle refers to: free it for good. Calls
      // that read it can no longer be replayed, so their resident outputs
      // become leaves (swap-only).
      invalidate(e, k, s);
      freeStorage(e, k, s);
      return;
    }
  }
  if (
    k.gc && k.eager && k.policy.hooks === undefined && s.residency === "evicted" &&
    s.droppable && !s.pinned && unread(s)
  ) {
    // Dropped (or evicted before), and nothing existing is computed from it: no one can need
    // it again (but a plan, whose steps may name any value of the step, to re-materialize it
    // say, as the replay of the step it was made on keeps it: not under one). Freed now, with
    // the evicted values it was computed from that only it needed, while they are in the
    // cache, rather than by the next collection (a forward chain's values, released one by
    // one, die when its last is: the 10k-live dispatch stream's collections under dtr-eq
    // took ~0.4 us a call, ~0.08 with this, its releases ~0.2 more).
    freeChain(e, k, s);
  }
  reapAncestors(e, k, s);
  // Collect once the releases since the last collection pass 1024 and half the table
  // (amortized: a pass costs the table's size). Lineage a long step leaves dead then
  // dies young, before V8's scavenges copy and promote it: at 4096 the unlimited
  // dispatch stream spent 0.25-0.75 us more per call (means, in-process A/B).
  if (
    k.gc && ++k.deadCandidates > 1024 &&
    k.deadCandidates > e.lineage.storages.size / 2 && k.deadCandidates > k.collectHold
  ) {
    const walked = e.lineage.storages.size;
    const freed = collect(e, k);
    // One that freed less than an eighth of what it walked found lineage the program
    // still needs (a recurrent step's forward values, until its backward: lstm small's
    // two such collections a step freed nothing and cost 2-3 ms of its 70-130). The next
    // then waits for more releases than twice the size it walked (doubled again after
    // each such one, up to 16 times that size: what piles up stays bounded by the
    // lineage then live); one that frees more ends the wait.
    k.collectHold = freed * 8 < walked
      ? Math.min(16 * walked, 2 * Math.max(walked, k.collectHold))
      : 0;
  }
}

/**
 * True when no call reads any of `s`'s tensors: its consumer lists are empty
 * (a call whose outputs are all freed leaves them when the edges next to
 * what was freed are pruned), so nothing is computed from it. Reads the
 * storage's `readers` hint first, then the lists' lengths alone where it is
 * 0: this runs on every release, where following a list to the storages a
 * call computed cost a cache miss per object on the way.
 */
function unread(s: StorageNode): boolean {
  // The hint first: on the storage, read already, where the lists are objects of their own.
  if (s.readers > 0) return false;
  const ts = s.tensors;
  for (let i = 0; i < ts.length; i++) if (ts[i]!.consumers.length > 0) return false;
  return true;
}

/**
 * Frees `s` (unheld, evicted, {@link unread}), then each evicted, unheld,
 * unpinned droppable value it was computed from that has no dependants left
 * (`walkDependants` finds none; a call it was read by is usually the one
 * that computed what was just freed, still in the cache), and so on up: what
 * the next collection would free of them. Then prunes the edges next to what it freed, as that
 * collection would (see `pruneNextTo`; around every storage there instead
 * when edges were cut or tensors moved since the last, which covers these
 * too), but around values many calls read (see {@link PRUNE_NOW_READERS}):
 * the values they were computed from are left {@link unread} where they
 * were their last readers.
 */
function freeChain(e: Engine, k: EngineState, s: StorageNode): void {
  const stack = k.reapStack, freed = chainFreed;
  clearList(stack);
  freeStorage(e, k, s, false);
  freed.push(s);
  stack.push(s);
  while (stack.length > 0) {
    const ts = stack.pop()!.tensors;
    for (let i = 0; i < ts.length; i++) {
      const p = ts[i]!.producer;
      if (p === null) continue;
      const ins = p.inputs;
      for (let j = 0; j < ins.length; j++) {
        const n = ins[j]!.storage;
        if (
          n.residency !== "evicted" || n.extRefs > 0 || n.locks > 0 || n.pinned ||
          !n.droppable || walkDependants(e, n, "any")
        ) continue;
        freeStorage(e, k, n, false);
        freed.push(n);
        stack.push(n);
      }
    }
  }
  const lineage = e.lineage, seen = lineage.nextStamp();
  for (let i = 0; i < freed.length; i++) {
    const d = freed[i]!;
    if (!pruneNextTo(lineage, d, seen, PRUNE_NOW_READERS)) noteFreed(e, k, d);
  }
  clearList(freed);
}

/** {@link freeChain}'s scratch: what it freed (not re-entered). */
const chainFreed: StorageNode[] = [];

/**
 * Past this many calls reading a storage, {@link freeChain} leaves the
 * pruning of its consumer lists to the next collection: a value many calls
 * read (a step's input, read by every chain) would be walked whole after
 * each chain it lost, where the collection walks it once for all.
 */
const PRUNE_NOW_READERS = 4;

/**
 * A leaf found needed within the last 256 releases is not checked again: a
 * leaf many values are computed from (a weight a recurrent layer reads at
 * every time step) would otherwise cost a graph walk on nearly every release.
 * What this leaves unreaped, `collect` frees (at the step's end, or when
 * memory runs short).
 */
function recentlyNeeded(k: EngineState, n: StorageNode): boolean {
  return n.neededAt >= 0 && k.releases - n.neededAt < 256;
}

/**
 * Up to this many unreferenced leaves, a release checks each of them rather
 * than walk the released storage's ancestors for them.
 */
const FEW_ORPHANS = 8;

/**
 * After `s` lost its last reference: unreferenced leaves may have been kept
 * only for `s`'s sake; free those nothing needs now. With few of them (a
 * training step keeps one or two: its input batch, read again by the
 * backward), each is looked at, where a walk from `s` visited half a dozen
 * storages on every release (~0.6 ms of a 120 ms gpt small step, on storages
 * cold after the kernels); otherwise the walk finds those among `s`'s nearby
 * ancestors (through evicted, unreferenced storages; at most 16 visited).
 */
function reapAncestors(e: Engine, k: EngineState, s: StorageNode): void {
  k.releases++;
  const orphans = k.orphans;
  // No storage is an unreferenced leaf: the walk would find nothing to free.
  if (orphans.size === 0) return;
  if (orphans.size <= FEW_ORPHANS) {
    const list = orphans.list;
    // From the end: freeing one moves the last member, already looked at, into its place.
    for (let i = list.length - 1; i >= 0; i--) {
      const n = list[i];
      if (n !== undefined) reapIfUnneeded(e, k, n);
    }
    return;
  }
  const stamp = e.lineage.nextStamp();
  s.stamp = stamp;
  // Not re-entered: what the walk frees does not release anything.
  const stack = k.reapStack;
  clearList(stack);
  stack.push(s);
  let budget = 16;
  while (stack.length > 0 && budget-- > 0) {
    const cur = stack.pop()!;
    for (const t of cur.tensors) {
      const p = t.producer;
      if (p === null) continue;
      for (const inp of p.inputs) {
        const n = inp.storage;
        if (n.stamp === stamp) continue;
        n.stamp = stamp;
        if (n.residency === "evicted") {
          if (n.extRefs === 0 && !n.pinned && n.locks === 0) stack.push(n);
        } else reapIfUnneeded(e, k, n);
      }
    }
  }
  clearList(stack);
}

/** Frees `n` if it is an unreferenced, resident leaf nothing needs (not found needed lately). */
function reapIfUnneeded(e: Engine, k: EngineState, n: StorageNode): void {
  if (n.extRefs > 0 || n.pinned || n.locks > 0 || recentlyNeeded(k, n)) return;
  if (n.residency !== "resident" || n.droppable) return;
  if (isNeeded(e, n)) n.neededAt = k.releases;
  else freeStorage(e, k, n);
}

/**
 * Releases `s`'s memory and forgets it (no one needs it again); `note`: list
 * it for the next collection's pruning (see `noteFreed`), unless the caller
 * prunes next to it itself.
 */
export function freeStorage(e: Engine, k: EngineState, s: StorageNode, note = true): void {
  if (s.residency === "resident") {
    k.exec.release(s);
    e.used -= s.bytes;
  } else if (s.residency === "swapped") {
    e.hostUsed -= s.bytes;
    k.exec.release(s);
  }
  k.pool.remove(s);
  s.residency = "freed";
  takeReady(k, s);
  for (const t of s.tensors) t.defined = false;
  e.lineage.removeStorage(s);
  if (k.orphans.size > 0) k.orphans.delete(s);
  if (note) noteFreed(e, k, s);
}

/**
 * Lists `s`, just freed, for the next {@link collect}'s pruning of the edges
 * next to it. Past the table's size (a program that never collects), the list
 * is dropped and that collection prunes around every storage instead.
 */
function noteFreed(e: Engine, k: EngineState, s: StorageNode): void {
  const list = k.freedSince;
  if (k.pruneAll) return;
  if (list.length >= 4096 && list.length >= e.lineage.storages.size) {
    clearList(list);
    k.pruneAll = true;
    return;
  }
  list.push(s);
}

/**
 * True when some value that may still be read could need `s` to be
 * recomputed: a descendant (through droppable storages) is referenced.
 */
export function isNeeded(e: Engine, s: StorageNode, ignorePin = false): boolean {
  if (s.extRefs > 0 || (s.pinned && !ignorePin) || s.locks > 0) return true;
  return walkDependants(e, s, "held");
}

/**
 * Walks the values computed from `s` that still exist (through replayable
 * calls; freed and empty storages are skipped), each once, depth first; the
 * dependants of a value the program holds (referenced, pinned or locked) are
 * not walked. Returns true, stopping there, at the first value that `stop`
 * names: any (`"any"`), a held one (`"held"`), a held one off the device
 * (`"held-off-device"`); `"never"` walks them all. The held values go to
 * `held`, the others to `between`, where given. (A mode, not a callback: it
 * is on the path of every release.)
 */
function walkDependants(
  e: Engine,
  s: StorageNode,
  stop: "any" | "held" | "held-off-device" | "never",
  held?: StorageNode[],
  between?: StorageNode[],
): boolean {
  const stamp = e.lineage.nextStamp();
  s.stamp = stamp;
  // Not re-entered (nothing in here calls out): one stack serves every walk, every engine's.
  const stack = walkStack;
  stack.clear();
  stack.push(s);
  while (stack.size > 0) {
    const cur = stack.pop()!;
    for (const t of cur.tensors) {
      for (const c of t.consumers) {
        if (!c.replayable) continue;
        for (const o of c.outputs) {
          const n = o.storage;
          if (n.stamp === stamp || n.residency === "freed" || n.residency === "empty") continue;
          n.stamp = stamp;
          if (stop === "any") {
            stack.clear();
            return true;
          }
          if (n.extRefs > 0 || n.pinned || n.locks > 0) {
            if (stop === "held" || (stop === "held-off-device" && n.residency !== "resident")) {
              stack.clear();
              return true;
            }
            held?.push(n);
          } else {
            between?.push(n);
            stack.push(n);
          }
        }
      }
    }
  }
  return false;
}

/** Scratch: the stack of {@link walkDependants} (on every release that asks {@link isNeeded}). */
const walkStack = new Stack<StorageNode>();

/** True when an evicted value that may still be needed is computed directly from `s`. */
function evictedNeeds(e: Engine, s: StorageNode): boolean {
  for (const t of s.tensors) {
    for (const c of t.consumers) {
      if (!c.replayable) continue;
      for (const o of c.outputs) {
        if (o.storage.residency === "evicted" && isNeeded(e, o.storage)) return true;
      }
    }
  }
  return false;
}

/**
 * Before the value in `s` is overwritten (in-place kernel, host write, a
 * buffer produced into again) or forgotten: every referenced value computed
 * from it (directly or through unreferenced intermediates) is made
 * independent of it: brought back if evicted, then frozen (its producer
 * becomes non-replayable, so it can be swapped but not dropped). The
 * unreferenced intermediates that nothing needs any more are freed, and the
 * calls that read `s` become non-replayable.
 */
export function invalidate(e: Engine, k: EngineState, s: StorageNode): void {
  walkAndInvalidate(e, k, s, false);
}

/**
 * The walk of {@link invalidate} from `s`, then the invalidation, unless
 * `copyIfOffDevice` and a held value computed from `s` is off the device:
 * then nothing is invalidated and it returns true (the caller copies `s`
 * instead, see {@link overwrite}).
 */
function walkAndInvalidate(
  e: Engine,
  k: EngineState,
  s: StorageNode,
  copyIfOffDevice: boolean,
): boolean {
  // The engine's scratch lists, unless an invalidation is running (re-materializing
  // what it holds could start another).
  const own = k.walkListsBusy;
  const between = own ? [] : k.walkBetween, referenced = own ? [] : k.walkReferenced;
  k.walkListsBusy = true;
  try {
    walkDependants(e, s, "never", referenced, between);
    if (copyIfOffDevice) {
      for (const n of referenced) if (n.residency !== "resident") return true;
    }
    invalidateWalked(e, k, s, referenced, between);
    return false;
  } finally {
    if (!own) {
      clearList(between);
      clearList(referenced);
      k.walkListsBusy = false;
    }
  }
}

/** {@link invalidate} after the walk from `s`: its held values and the others in between. */
function invalidateWalked(
  e: Engine,
  k: EngineState,
  s: StorageNode,
  referenced: StorageNode[],
  between: StorageNode[],
): void {
  // Unreferenced values computed from `s` lose their producers' replayability
  // below (or are locked now and unreferenced): they may stay as leaves.
  for (const n of referenced) if (n.extRefs === 0 && !n.pinned) k.orphans.add(n);
  for (const n of between) if (!n.pinned) k.orphans.add(n);
  const held: StorageNode[] = [];
  try {
    for (const n of referenced) {
      if (n.residency === "evicted") materialize(e, k, n.tensors[0]!, true);
      // Its views as well: the call of one may read `s` (it is frozen below), and a view
      // left undefined could then never be brought back, its storage dropped or not.
      const ts = n.tensors;
      for (let i = 1; i < ts.length; i++) if (!ts[i]!.defined) materialize(e, k, ts[i]!, true);
      lock(k, n);
      held.push(n);
    }
    for (const n of referenced) {
      const p = n.tensors[0]!.producer;
      if (p !== null && p.replayable) {
        p.replayable = false;
        for (const o of p.outputs) {
          if (o.storage.residency === "resident") refreshPool(k, o.storage);
        }
      }
    }
    for (const t of s.tensors) {
      for (const c of t.consumers) c.replayable = false;
      t.consumers = [];
    }
    e.lineage.invalidateNeighborhoods();
    if (between.length === 0) return;
    // Read before anything is freed (freeing walks neighbourhoods with new stamps). The
    // engine's scratch: nothing in the loop calls back into an invalidation.
    const needed = neededAmong(e, k, between);
    for (let i = 0; i < between.length; i++) {
      const n = between[i]!;
      if (n.residency === "freed") continue;
      if (needed[i] === 0) {
        e.lineage.forgetClass(n);
        freeStorage(e, k, n);
      } else if (n.residency === "resident") refreshPool(k, n);
    }
  } finally {
    for (const n of held) unlock(k, n);
  }
}

/** True when the program holds `n` (referenced, pinned or locked). */
function held(n: StorageNode): boolean {
  return n.extRefs > 0 || n.pinned || n.locks > 0;
}

/**
 * {@link isNeeded} of every storage of `between` that is not freed (1 or 0;
 * 0 for freed ones), in one pass over the edges rather than one walk per
 * storage: `between` holds the unheld values a walk from a storage found, so
 * every unheld successor of one of them is one of them (or that storage, whose
 * consumers are cut). A storage is needed when it is held, or a held value is
 * computed directly from it, or a needed unheld member is; the last spreads
 * backwards from each needed member to the members it is computed from. An
 * unneeded storage reaches no held value, so freeing it (in any order) leaves
 * the answer for the others as it was.
 */
function neededAmong(e: Engine, k: EngineState, between: readonly StorageNode[]): Uint8Array {
  const member = e.lineage.nextStamp();
  for (const n of between) if (n.residency !== "freed") n.stamp = member;
  const yes = e.lineage.nextStamp();
  const queue = k.neededQueue;
  for (const n of between) {
    if (n.stamp !== member) continue;
    if (held(n) || heldSuccessor(n)) {
      n.stamp = yes;
      queue.push(n);
    }
  }
  while (queue.size > 0) {
    const b = queue.pop();
    if (held(b)) continue; // what it is computed from has it as a held successor
    for (const o of b.tensors) {
      const p = o.producer;
      if (p === null || !p.replayable) continue;
      for (const inp of p.inputs) {
        const u = inp.storage;
        if (u.stamp !== member || !inp.consumers.includes(p)) continue;
        u.stamp = yes;
        queue.push(u);
      }
    }
  }
  // Read now: freeing storages (next) walks their neighbourhoods with new stamps.
  let out = k.neededOut;
  if (out.length < between.length) {
    out = k.neededOut = new Uint8Array(Math.max(2 * out.length, between.length));
  }
  for (let i = 0; i < between.length; i++) out[i] = between[i]!.stamp === yes ? 1 : 0;
  return out;
}

/** True when a held value (not freed or empty) is computed from `n` through a replayable call. */
function heldSuccessor(n: StorageNode): boolean {
  for (const t of n.tensors) {
    for (const c of t.consumers) {
      if (!c.replayable) continue;
      for (const o of c.outputs) {
        const m = o.storage;
        if (m === n || m.residency === "freed" || m.residency === "empty") continue;
        if (held(m)) return true;
      }
    }
  }
  return false;
}

/**
 * Whether an in-place update of `s` must copy its current value first
 * (copy-on-write) rather than invalidate it. Invalidating turns the values
 * computed from `s` that the program still holds into leaves (they can no
 * longer be dropped, only swapped) and frees those nothing needs. Under a
 * budget where evictions may come, that can block them, so it copies whenever
 * a value computed from `s` still exists; without a budget too, so the
 * budget-free peak that budget ratios scale counts the copies. Where a budget
 * is ample (at least the peak of the steps this engine ran without one: the
 * same steps, copying less, never need an eviction) it copies only if a held
 * value computed from `s` is off the device; so at ratio 1.0 a training step's
 * parameter updates copy nothing, as without a runtime.
 */
export function mustPreserve(e: Engine, k: EngineState, s: StorageNode): boolean {
  return walkDependants(e, s, ample(k) ? "held-off-device" : "any");
}

/** The budget is at least the peak of the steps run without one (see {@link mustPreserve}). */
function ample(k: EngineState): boolean {
  return k.budget !== Infinity && k.freePeak !== undefined && k.budget >= k.freePeak;
}

/**
 * `s` holds one leaf value, on the device, that no recorded call read: an in-place update
 * changes it where it is (no lineage refers to its old value). Otherwise {@link overwrite}.
 */
export function unreadLeaf(s: StorageNode): boolean {
  const ts = s.tensors;
  if (ts.length !== 1 || s.residency !== "resident") return false;
  const t = ts[0]!;
  return t.producer === null && t.consumers.length === 0;
}

/**
 * Before an in-place update of resident `s`: copy-on-write ({@link preserve})
 * when `mayCopy` and {@link mustPreserve} says so, else {@link invalidate}
 * and {@link retire} keeping the memory. One walk serves both questions: the
 * values the copy question looks at are those `invalidate` walks. Returns the
 * external references the old tensors held.
 */
export function overwrite(e: Engine, k: EngineState, s: StorageNode, mayCopy: boolean): number {
  if (!mayCopy) invalidate(e, k, s);
  else if (ample(k)) {
    if (walkAndInvalidate(e, k, s, true)) return preserve(e, k, s);
  } else {
    // Found nothing computed from `s`: the walk of `invalidate` would find nothing either.
    if (walkDependants(e, s, "any")) return preserve(e, k, s);
    invalidateWalked(e, k, s, [], []);
  }
  return retire(e, k, s, true);
}

/**
 * Copy-on-write before an in-place update of resident `s`: its current
 * tensors move to a new storage holding a copy of the bytes (kept while
 * anything may need them, droppable when they have a producer), so every
 * recorded call stays replayable. `s` is left without tensors (to adopt the
 * new value); returns the external references the old tensors held.
 */
export function preserve(e: Engine, k: EngineState, s: StorageNode): number {
  if (s.residency !== "resident") {
    throw new Error(`preserve ${s.name}: storage is ${s.residency}`);
  }
  reserve(e, k, s.bytes);
  const copy = e.lineage.addStorage(s.bytes);
  k.exec.allocate(copy);
  const ns = k.exec.copy(s, copy);
  e.stats.kernelNs += ns ?? 0;
  e.stats.addedKernelNs += ns ?? 0;
  e.stats.copies++;
  copy.residency = "resident";
  addUsed(e, s.bytes);
  let ext = 0;
  const moved: TensorNode[] = [];
  for (const t of s.tensors) {
    ext += t.extRefs;
    t.extRefs = 0;
    t.storage = copy;
    moved.push(t);
  }
  copy.tensors = moved;
  copy.compute = s.compute;
  copy.lastAccess = s.lastAccess;
  k.orphans.add(copy); // unreferenced; a leaf when the value had no producer
  s.tensors = [];
  e.lineage.invalidateNeighborhoods();
  s.extRefs -= ext;
  s.compute = 0;
  k.pool.sync(s);
  refreshPool(k, copy);
  return ext;
}

/**
 * Detaches the current tensors of `s` (after {@link invalidate}) so that `s`
 * can take a new value: they move to a freed tombstone storage, and `s`
 * becomes empty (its memory released unless `keepMemory`).
 */
export function retire(e: Engine, k: EngineState, s: StorageNode, keepMemory: boolean): number {
  let ext = 0;
  if (s.tensors.length > 0) {
    const tomb = e.lineage.tombstone(s.bytes);
    // The list moves with the tensors (no copy made, nor a new empty list left).
    const moved = tomb.tensors = s.takeTensors();
    for (let j = 0; j < moved.length; j++) {
      const t = moved[j]!;
      ext += t.extRefs;
      t.extRefs = 0;
      t.defined = false;
      t.storage = tomb;
    }
    // A producer whose outputs are all gone can never be replayed for anyone:
    // unlink it from its inputs now (as `collect` would), so a buffer produced
    // into over and over does not grow its inputs' consumer lists.
    for (let j = 0; j < moved.length; j++) {
      const p = moved[j]!.producer;
      if (p !== null && allFreed(p)) {
        for (const inp of p.inputs) removeLast(inp.consumers, p);
      }
    }
    e.lineage.invalidateNeighborhoods();
  }
  s.extRefs -= ext;
  e.lineage.forgetClass(s);
  s.compute = 0;
  k.pool.sync(s);
  if (keepMemory && s.extRefs === 0 && !s.pinned) k.orphans.add(s); // resident, no value yet
  if (!keepMemory) {
    if (s.residency === "resident") {
      k.exec.release(s);
      e.used -= s.bytes;
    } else if (s.residency === "swapped") {
      k.exec.release(s);
      e.hostUsed -= s.bytes;
    }
    s.residency = "empty";
    k.pool.remove(s);
  }
  return ext;
}

/** Makes `s` (resident, retired with `keepMemory`) hold a new leaf tensor. */
export function adoptLeaf(
  e: Engine,
  k: EngineState,
  s: StorageNode,
  ext: number,
  name?: string,
): TensorNode {
  const t = e.lineage.addLeaf(s.bytes, name, s);
  t.defined = true;
  t.extRefs = ext;
  s.extRefs += ext;
  // Referenced again, it can lose its last reference only through an entry point.
  if (s.extRefs === 0 && !s.pinned) k.orphans.add(s);
  else if (k.orphans.size > 0) k.orphans.delete(s);
  k.pool.touch(s, e.clock);
  refreshPool(k, s);
  return t;
}

/**
 * Frees every storage no one can need again (unreferenced, and no referenced
 * value depends on it through droppable storages) and prunes dead calls from
 * consumer lists, so the graph stays proportional to live data.
 *
 * Only unreferenced storages can be freed, and one is needed exactly when a
 * path of producer inputs leads to it from a held storage through droppable
 * storages, every one past the first unreferenced: so the walk starts from the
 * unreferenced storages a held droppable one is computed from directly (found
 * by their consumers) and goes up through unreferenced ones, rather than from
 * every held storage (the dispatch bench holds 10k: its mark from all of them
 * cost ~0.5 us a call, amortized, of a collection at every step's end).
 */
export function collect(e: Engine, k: EngineState): number {
  const t0 = now();
  e.stats.collections++;
  k.deadCandidates = 0;
  const needed = e.lineage.nextStamp();
  const stack: StorageNode[] = [];
  // One pass over the table (its iterator allocates a result per storage where this runs
  // unoptimized, once every few thousand calls) lists the unreferenced storages; the passes
  // below read the list. Each pass calls a small function per storage: those are compiled
  // by the optimizing tier like any hot function, where a long loop in a function entered
  // once per step ran in a lower one (on-stack replacement).
  const free = k.collectScratch;
  clearList(free);
  e.lineage.storages.forEach((s) => {
    if (!held(s)) free.push(s);
  });
  for (let i = 0; i < free.length; i++) markIfHeldNeeds(free[i]!, needed, stack);
  while (stack.length > 0) markInputs(stack.pop()!, needed, stack);
  let freed = 0;
  const dead = stack; // empty: the walk is done
  for (let i = 0; i < free.length; i++) {
    const s = free[i]!;
    if (s.stamp !== needed && s.residency !== "empty") dead.push(s);
  }
  clearList(free);
  for (let i = 0; i < dead.length; i++) {
    freeStorage(e, k, dead[i]!);
    freed++;
  }
  clearList(dead);
  const lineage = e.lineage, freedList = k.freedSince;
  if (k.pruneAll || lineage.neighborListEpoch !== k.pruneEpoch) {
    // Tensors moved or edges were cut since the last collection (lists kept before then
    // lapsed, and may name storages no longer next to theirs), or too many were freed to
    // list: every storage (the table holds those not freed).
    lineage.storages.forEach((s) => pruneAround(lineage, s));
  } else {
    // Otherwise only the storages next to one freed since the last collection can read a
    // dead call or keep a neighbour list naming a freed storage: a call is dead once its
    // last output is freed, neighbours are the inputs of a storage's producer and the
    // outputs of its consumers (a freed storage keeps its edges), and a list names no
    // storage freed when it was made.
    const seen = lineage.nextStamp();
    for (let i = 0; i < freedList.length; i++) pruneNextTo(lineage, freedList[i]!, seen);
  }
  clearList(freedList);
  k.pruneAll = false;
  k.pruneEpoch = lineage.neighborListEpoch;
  e.stats.bookkeepingNs += (now() - t0) * 1e6;
  return freed;
}

/**
 * {@link collect} (and {@link freeChain}): prunes around each unfreed
 * neighbour of freed `d` not stamped `seen` yet, but those read by more than
 * `maxReaders` calls; returns false when it left one.
 */
function pruneNextTo(
  lineage: Lineage,
  d: StorageNode,
  seen: number,
  maxReaders = Infinity,
): boolean {
  let all = true;
  const ts = d.tensors;
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i]!;
    const p = t.producer;
    if (p !== null) {
      const ins = p.inputs;
      for (let j = 0; j < ins.length; j++) {
        if (!pruneOnce(lineage, ins[j]!.storage, seen, maxReaders)) all = false;
      }
    }
    const cs = t.consumers;
    for (let j = 0; j < cs.length; j++) {
      const outs = cs[j]!.outputs;
      for (let l = 0; l < outs.length; l++) {
        if (!pruneOnce(lineage, outs[l]!.storage, seen, maxReaders)) all = false;
      }
    }
  }
  return all;
}

/**
 * {@link pruneNextTo} for one neighbour `n`: prunes around it unless it is
 * freed or stamped `seen` already; false (leaving it) when more than
 * `maxReaders` calls read it.
 */
function pruneOnce(lineage: Lineage, n: StorageNode, seen: number, maxReaders: number): boolean {
  if (n.stamp === seen || n.residency === "freed") return true;
  if (maxReaders !== Infinity) {
    const ts = n.tensors;
    let readers = 0;
    for (let i = 0; i < ts.length; i++) readers += ts[i]!.consumers.length;
    if (readers > maxReaders) return false;
  }
  n.stamp = seen;
  pruneAround(lineage, n);
  return true;
}

/**
 * {@link collect}: drops dead calls from `s`'s consumer lists, and its kept
 * neighbour list if it names a freed storage or lapsed already (see
 * `Lineage.dropFreedNeighbors`).
 */
function pruneAround(lineage: Lineage, s: StorageNode): void {
  pruneDeadConsumers(s);
  lineage.dropFreedNeighbors(s);
}

/**
 * {@link collect}: stamps unreferenced `u` and queues it when a held droppable
 * storage is computed from it by a replayable call (what the mark from that
 * storage would reach first).
 */
function markIfHeldNeeds(u: StorageNode, needed: number, stack: StorageNode[]): void {
  const ts = u.tensors;
  for (let i = 0; i < ts.length; i++) {
    const cs = ts[i]!.consumers;
    for (let j = 0; j < cs.length; j++) {
      const c = cs[j]!;
      if (!c.replayable) continue;
      const outs = c.outputs;
      for (let l = 0; l < outs.length; l++) {
        const n = outs[l]!.storage;
        if (n.residency !== "freed" && held(n) && n.droppable) {
          u.stamp = needed;
          stack.push(u);
          return;
        }
      }
    }
  }
}

/**
 * {@link collect}: what a needed droppable `cur` is recomputed from is needed
 * too (a held one is never freed, and what it needs is found from it).
 */
function markInputs(cur: StorageNode, needed: number, stack: StorageNode[]): void {
  if (!cur.droppable) return;
  const ts = cur.tensors;
  for (let i = 0; i < ts.length; i++) {
    const p = ts[i]!.producer;
    if (p === null || !p.replayable) continue;
    const ins = p.inputs;
    for (let j = 0; j < ins.length; j++) {
      const n = ins[j]!.storage;
      if (n.stamp !== needed && n.residency !== "freed" && !held(n)) {
        n.stamp = needed;
        stack.push(n);
      }
    }
  }
}

/**
 * {@link collect}: drops the calls whose outputs are all freed from the
 * consumer lists of `s`'s tensors. A new list only where a call is dead (a
 * walk up the stack may be iterating this one).
 */
function pruneDeadConsumers(s: StorageNode): void {
  const ts = s.tensors;
  let readers = 0;
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i]!;
    const cs = t.consumers;
    let j = 0;
    while (j < cs.length && !allFreed(cs[j]!)) j++;
    if (j === cs.length) {
      readers += j;
      continue;
    }
    const kept = cs.slice(0, j);
    for (j++; j < cs.length; j++) if (!allFreed(cs[j]!)) kept.push(cs[j]!);
    t.consumers = kept;
    readers += kept.length;
  }
  s.readers = readers;
}

function allFreed(call: CallNode): boolean {
  for (const o of call.outputs) if (o.storage.residency !== "freed") return false;
  return true;
}
