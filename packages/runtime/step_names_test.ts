/**
 * A step's end renames the values named in the step that live on (`c<i>.<k>`
 * and `w<n>` become `s<step>.c<i>.<k>`, `s<step>.w<n>`) and leaves the others
 * as they are. The oracle is the table itself, read after every step's end:
 * no live value keeps a name of the step, and every value that had a name of
 * an earlier step keeps it.
 */

import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import type { DeviceBuffer } from "@libra/tensor/backend";
import { mulberry32 } from "@libra/util/rng";
import { Runtime } from "./runtime.ts";

const n = 16, bytes = 4 * n;

/** Every live value's name, by tensor (the table's storages, each tensor). */
function liveNames(rt: Runtime): Map<object, string> {
  const out = new Map<object, string>();
  for (const s of rt.lineage.storages.values()) for (const t of s.tensors) out.set(t, t.name);
  return out;
}

/** Checks the renaming a step's end did, from the names before and after it. */
function checkRenamed(rt: Runtime, before: Map<object, string>, step: number): number {
  let renamed = 0;
  for (const [t, name] of liveNames(rt)) {
    assert.ok(!/^[cw]\d/.test(name), `step ${step}: ${name} kept a name of the step`);
    const old = before.get(t);
    if (old === undefined) continue;
    if (/^[cw]\d/.test(old)) {
      assert.equal(name, `s${step}.${old}`, `step ${step}: ${old} renamed`);
      renamed++;
    } else assert.equal(name, old, `step ${step}: ${old} (of an earlier step) kept its name`);
  }
  return renamed;
}

/**
 * Random steps: host writes (whole and partial), calls, in-place updates of
 * written values (copy-on-write when something was computed from them), frees,
 * and values kept across steps.
 */
function randomSteps(
  rt: Runtime,
  seed: number,
  steps: number,
  calls: number,
  maxHeld = 24,
): number {
  const rng = mulberry32(seed);
  const held: DeviceBuffer[] = [];
  const written: DeviceBuffer[] = [];
  let renamed = 0;
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < calls; i++) {
      const r = rng();
      if (r < 0.15 || held.length === 0) {
        const w = rt.alloc(bytes);
        rt.write(w, new Float32Array(n).fill(rng()));
        held.push(w);
        written.push(w);
      } else if (r < 0.25 && written.length > 0) {
        // An in-place update of a written value (a gradient accumulated into it).
        const w = written[Math.floor(rng() * written.length)]!;
        const g = held[Math.floor(rng() * held.length)]!;
        if (g !== w) rt.run("add_inplace", [w, g], [], [n]);
      } else if (r < 0.3 && written.length > 0) {
        const w = written[Math.floor(rng() * written.length)]!;
        rt.write(w, new Float32Array(n / 2).fill(rng()), bytes / 2);
      } else {
        const y = rt.alloc(bytes);
        rt.run("relu", [held[Math.floor(rng() * held.length)]!], [y], [n]);
        held.push(y);
      }
      while (held.length > maxHeld) {
        const j = Math.floor(rng() * held.length);
        const b = held[j]!;
        held.splice(j, 1);
        const w = written.indexOf(b);
        if (w >= 0) written.splice(w, 1);
        rt.free(b);
      }
    }
    const before = liveNames(rt);
    rt.endStep();
    renamed += checkRenamed(rt, before, step);
  }
  return renamed;
}

Deno.test("a step's end renames the step's values that live on, and only those", () => {
  // Up to 200 values live and 40 calls a step: once the table has grown, the runtime renames
  // from its list of the values the step named (shorter than the table).
  let renamed = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
    renamed += randomSteps(rt, seed, 6, 40, 200);
  }
  assert.ok(renamed > 500, `${renamed} values renamed`);
});

Deno.test("a step naming more values than the table holds renames by a walk of the table", () => {
  // ~24 values live and 80 or 5000 calls a step: the list of the step's named values grows
  // as long as the table in most steps, and is emptied; the step's end walks the table instead.
  let renamed = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
    renamed += randomSteps(rt, seed, 6, 80);
  }
  const rt = new Runtime({ backend: new ReferenceBackend(), timeline: false });
  renamed += randomSteps(rt, 11, 3, 5000);
  assert.ok(renamed > 500, `${renamed} values renamed`);
});
