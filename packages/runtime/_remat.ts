/**
 * Re-materialization and execution: bringing a tensor onto the device
 * (swapping its storage in, or recomputing its producer after its undefined
 * inputs, with an explicit stack so long evicted chains never overflow the
 * JavaScript stack), waiting for copies on the copy stream, and running a call
 * through the executor with its accounting (pricing, clock, memory, stats).
 *
 * @module
 */

import { type CallNode, storageCompute, type StorageNode, type TensorNode } from "@libra/lineage";
import type { Engine } from "./engine.ts";
import type { EngineState } from "./_engine_state.ts";
import {
  addUsed,
  checkThrash,
  emit,
  lock,
  refreshPool,
  reserve,
  swapIn,
  takeReady,
  unlock,
} from "./_eviction.ts";
import { clearList } from "@libra/util/list";
import { OutOfBudgetError } from "./errors.ts";

interface Frame {
  t: TensorNode;
  remat: boolean;
  undef: TensorNode[] | null;
  i: number;
  locked: StorageNode[];
  waiting: TensorNode | null;
}

/**
 * Makes `target` defined: runs its producer (a model call when `remat` is
 * false, a recomputation otherwise) after re-materializing what it needs.
 */
export function materialize(e: Engine, k: EngineState, target: TensorNode, remat: boolean): void {
  const p0 = target.producer;
  if (p0 !== null && p0.replayable && target.storage.residency !== "swapped") {
    // Fast path: every input on the device (locked while memory is made for the outputs,
    // as the general path below does, without its frames).
    const ins = p0.inputs;
    let ready = true;
    for (let i = 0; i < ins.length; i++) {
      if (!ins[i]!.defined) {
        ready = false;
        break;
      }
    }
    if (ready) {
      const c = e.clock;
      for (let i = 0; i < ins.length; i++) {
        const s = ins[i]!.storage;
        k.pool.touch(s, c);
        lock(k, s);
      }
      try {
        if (e.used + p0.totalBytes > k.budget) reserve(e, k, p0.totalBytes);
        run(e, k, p0, remat);
      } catch (err) {
        if (remat && err instanceof OutOfBudgetError) err.rematerializing(1);
        throw err;
      } finally {
        for (let i = 0; i < ins.length; i++) unlock(k, ins[i]!.storage);
      }
      return;
    }
  }
  const stack: Frame[] = [{ t: target, remat, undef: null, i: 0, locked: [], waiting: null }];
  try {
    while (stack.length > 0) {
      const f = stack[stack.length - 1]!;
      if (f.undef === null) {
        const s = f.t.storage;
        if (s.residency === "swapped") {
          swapIn(e, k, s);
          if (f.t.defined) {
            stack.pop();
            continue;
          }
        }
        const p = f.t.producer;
        if (p === null || !p.replayable) {
          throw new Error(
            `${f.t.name} (storage ${s.id}, ${s.residency}) is not on the device and cannot be recomputed: ${
              p === null
                ? "it has no producer"
                : `its producer ${p.op} read a value that was overwritten`
            }`,
          );
        }
        const c = e.clock;
        const undef: TensorNode[] = [];
        for (const inp of p.inputs) k.pool.touch(inp.storage, c);
        for (const inp of p.inputs) {
          if (inp.defined) {
            lock(k, inp.storage);
            f.locked.push(inp.storage);
          } else undef.push(inp);
        }
        f.undef = undef;
      }
      if (f.waiting !== null) {
        if (!f.waiting.defined) {
          throw new Error(`internal: re-materializing ${f.waiting.name} left it undefined`);
        }
        f.waiting = null;
      }
      let pushed = false;
      while (f.i < f.undef.length) {
        const inp = f.undef[f.i]!;
        if (!inp.defined) {
          f.waiting = inp;
          stack.push({ t: inp, remat: true, undef: null, i: 0, locked: [], waiting: null });
          pushed = true;
          break;
        }
        lock(k, inp.storage);
        f.locked.push(inp.storage);
        f.i++;
      }
      if (pushed) continue;
      const call = f.t.producer!;
      if (e.used + call.totalBytes > k.budget) reserve(e, k, call.totalBytes);
      run(e, k, call, f.remat);
      for (const s of f.locked) unlock(k, s);
      clearList(f.locked);
      stack.pop();
    }
  } catch (err) {
    // The frames re-materializing are the stack less the target when it is the program's
    // own call's input (`remat` false: the bottom frame runs a call the program made).
    if (err instanceof OutOfBudgetError) err.rematerializing(stack.length - (remat ? 0 : 1));
    for (const f of stack) {
      for (const s of f.locked) unlock(k, s);
      clearList(f.locked);
    }
    throw err;
  }
}

/**
 * Before `call` runs on the compute stream: waits for its swapped-in inputs
 * to be back and for swap-outs in flight to release the memory it needs.
 */
function awaitCopies(e: Engine, k: EngineState, call: CallNode): void {
  const ce = e.copyEngine!;
  let wait = 0;
  if (k.readyCount > 0) {
    for (const inp of call.inputs) {
      const t = takeReady(k, inp.storage);
      if (t >= 0) wait += ce.waitUntil(t);
    }
  }
  if (k.budget !== Infinity) {
    const excess = e.used + ce.heldBytes() + call.totalBytes - k.budget;
    if (excess > 0) wait += ce.waitForMemory(excess);
  }
  if (wait > 0) {
    e.stats.swapStallNs += wait;
    k.thrashStallNs += wait;
    e.clock += wait;
    checkThrash(e, k);
  }
}

function run(e: Engine, k: EngineState, call: CallNode, remat: boolean): void {
  const outs = call.outputs;
  // A call runs to the end before the next one starts: one list serves them all.
  const fresh = k.fresh;
  if (fresh.length > 0) clearList(fresh);
  for (const o of outs) {
    const s = o.storage;
    if (s.residency !== "resident" && s.residency !== "freed" && !fresh.includes(s)) {
      fresh.push(s);
    }
  }
  if (e.copyEngine !== null) awaitCopies(e, k, call);
  const measured = k.exec.execute(call, remat);
  const st = e.stats;
  if (!remat) {
    if (k.pricing === call) {
      k.pricing = null;
      call.cost = k.cost.callCost(
        {
          op: call.op,
          params: call.params,
          index: e.callIndex - e.stepBase,
          totalBytes: call.totalBytes,
        },
        measured,
      );
      for (const s of fresh) {
        s.compute = storageCompute(s);
        k.pool.sync(s);
      }
      for (const o of outs) {
        if (o.isAlias) {
          o.storage.compute = storageCompute(o.storage);
          k.pool.sync(o.storage);
        }
      }
      e.lineage.computeChanged();
    }
    st.computeNs += call.cost;
    if (measured !== undefined) st.kernelNs += measured;
  } else {
    st.remats++;
    // In the cost model's units, like computeNs (the thrash limit compares the
    // two); the measured time goes to kernelNs.
    st.recomputeNs += k.cost.measures === false ? call.cost : measured ?? call.cost;
    if (measured !== undefined) {
      st.kernelNs += measured;
      st.addedKernelNs += measured;
    }
  }
  e.clock += call.cost;
  e.copyEngine?.compute(remat ? (measured ?? call.cost) : call.cost);
  addUsed(e, call.totalBytes);
  for (let i = 0; i < outs.length; i++) {
    const o = outs[i]!;
    if (o.defined) {
      if (call.aliases[i]! < 0) e.used -= call.sizes[i]!;
    } else if (o.storage.residency !== "freed") {
      o.defined = true;
    } else if (call.aliases[i]! < 0) {
      e.used -= call.sizes[i]!;
    }
  }
  for (const s of fresh) {
    s.residency = "resident";
    e.lineage.leaveClass(s);
    if (remat) {
      s.remats++;
      st.rematBytes += s.bytes;
    }
    refreshPool(k, s);
  }
  if (fresh.length > 0) clearList(fresh);
  if (remat) {
    if (e.timeline.enabled) {
      e.timeline.mark(e.callIndex, e.used, "remat", call.outputs[0]?.name ?? call.op);
    }
    if (k.onEvent) {
      emit(k, {
        type: "remat",
        how: "recompute",
        name: call.outputs[0]?.name ?? "",
        bytes: call.totalBytes,
      });
    }
    checkThrash(e, k);
  }
}
