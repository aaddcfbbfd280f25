/**
 * Exactness of every tiny model of `@libra/nn` under the runtime: two training
 * steps under a budget give bitwise the losses and updated weights of the same
 * steps without the runtime, on the native cpu backend (skipped with the reason
 * when it is not built).
 */

import assert from "node:assert/strict";
import { AdamW, createData, createModel, MODEL_NAMES, trainStep } from "@libra/nn";
import { type Backend, manualSeed } from "@libra/tensor";
import { Runtime } from "./runtime.ts";

let native: (() => Backend) | null = null;
let why = "";
try {
  const mod = await import("@libra/native");
  const probe = mod.cpuBackend();
  probe.free(probe.alloc(4));
  native = () => mod.cpuBackend();
} catch (e) {
  why = (e as Error).message.split("\n")[0]!;
}
if (native === null) {
  console.warn(`zoo_exactness_test: skipped: native cpu backend unavailable (${why})`);
}

function steps(name: (typeof MODEL_NAMES)[number], backend: Backend, n = 2) {
  manualSeed(11);
  const model = createModel(name, "tiny", { backend });
  const data = createData(name, "tiny", { seed: 5 });
  const opt = new AdamW(model.parameters(), { lr: 0.01 });
  const losses: number[] = [];
  for (let i = 0; i < n; i++) {
    losses.push(trainStep({ model, batch: data.next(), optimizer: opt, backend }));
    if (backend instanceof Runtime && i === 0) backend.endStep();
  }
  const weights = model.parameters().map((p) => Array.from(p.toArray()));
  opt.dispose();
  model.dispose();
  return { losses, weights };
}

for (const name of MODEL_NAMES) {
  Deno.test({
    name: `tiny ${name}: steps under dtr-eq/dtr-local/lru${
      name === "lstm" ? "/dtr" : ""
    } at two budgets are bitwise exact (native cpu)`,
    ignore: native === null,
    fn() {
      const ref = steps(name, native!());
      // Parameters, optimizer state and the batch are leaves (never dropped):
      // budgets are taken between that floor and the budget-free peak.
      const probe = new Runtime({ backend: native!() });
      const bytes: number[] = [];
      manualSeed(11);
      const model = createModel(name, "tiny", { backend: probe });
      const data = createData(name, "tiny", { seed: 5 });
      const opt = new AdamW(model.parameters(), { lr: 0.01 });
      for (let i = 0; i < 2; i++) {
        trainStep({ model, batch: data.next(), optimizer: opt, backend: probe });
        bytes.push(probe.memory().usedBytes);
      }
      const peak = probe.stats.peakBytes, floor = bytes[1]!;
      // dtr walks evicted neighbourhoods (cached per storage, see Lineage.evictedNeighborhoodCost);
      // the lstm's long evicted chains make it the case worth covering
      const policies = name === "lstm" ? ["dtr-eq", "dtr-local", "lru", "dtr"] : [
        "dtr-eq",
        "dtr-local",
        "lru",
      ];
      for (const policy of policies) {
        // (the lstm's largest calls, a layer's recurrence each way, need more than half the
        // way from the floor between steps to the peak)
        for (const ratio of name === "lstm" ? [0.8, 0.65] : [0.7, 0.5]) {
          const budget = Math.floor(floor + ratio * (peak - floor));
          const rt = new Runtime({ backend: native!(), budget, policy });
          let r;
          try {
            r = steps(name, rt);
          } catch (e) {
            throw new Error(`${name} ${policy} ${ratio}: ${(e as Error).message}`, { cause: e });
          }
          assert.deepEqual(r.losses, ref.losses, `${name} ${policy} ${ratio}: losses`);
          assert.deepEqual(r.weights, ref.weights, `${name} ${policy} ${ratio}: weights`);
          assert.ok(
            rt.stats.peakBytes <= budget,
            `${name}: peak ${rt.stats.peakBytes} > ${budget} (floor ${floor}, free peak ${peak})`,
          );
          assert.ok(rt.stats.evictions + rt.stats.eagerDrops > 0);
        }
      }
    },
  });
}
