import assert from "node:assert/strict";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { NO_CLASS } from "@libra/lineage";
import { Runtime } from "./runtime.ts";
import { dispatchStream, STREAM_VALUE_BYTES } from "./dispatch_stream.ts";

Deno.test("dtr-eq's class nodes in use are those of the classes evicted storages hold, however long the run", () => {
  // The dispatch stream frees most values evicted (whole chains at once, and single
  // values released): every class whose members have all gone gives its nodes back.
  const live = 600;
  const rt = new Runtime({
    backend: new ReferenceBackend(),
    timeline: false,
    budget: Math.floor(0.9 * live * STREAM_VALUE_BYTES),
  });
  const step = dispatchStream(rt, live);
  const g = rt.engine.lineage;
  let made = 0;
  for (let round = 0; round < 6; round++) {
    for (let i = 0; i < 4000; i++) step();
    // The oracle: the nodes of the distinct classes held, counted by walking the storages.
    const roots = new Set<number>();
    let evicted = 0;
    for (const s of g.storages.values()) {
      if (s.residency !== "evicted") continue;
      evicted++;
      assert.notEqual(s.eq, NO_CLASS, `evicted ${s.name} holds a class`);
      roots.add(g.classes.find(s.eq));
    }
    let held = 0;
    for (const r of roots) held += g.classes.size(r);
    assert.ok(evicted > 0, "the stream evicts");
    assert.equal(g.classes.nodes, held, `round ${round}: nodes in use`);
    made = rt.stats.evictions + rt.stats.eagerDrops;
  }
  assert.ok(made > 10 * g.classes.nodes, `${made} classes joined, ${g.classes.nodes} nodes in use`);
});
