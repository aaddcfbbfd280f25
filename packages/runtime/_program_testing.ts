/**
 * Random programs on an engine under a budget, for the tests of what the
 * runtime's collections free and prune: values from one or two live values or
 * leaves (some with a view of their first input beside a fresh output),
 * releases, leaves replaced (host writes) and updated in place (copy-on-write
 * or invalidation), collections on their own and asked for, evictions by
 * `dtr-eq` (evicted classes, kept neighbour lists); half the values live on
 * into the next step.
 *
 * @module
 */

import { AnalyticCostModel } from "@libra/cost";
import { createPolicy } from "@libra/evict";
import type { TensorNode } from "@libra/lineage";
import { mulberry32 } from "@libra/util/rng";
import { Engine } from "./engine.ts";
import { MetaExecutor } from "./simulator.ts";
import { OutOfBudgetError } from "./errors.ts";

/** What a test does at the points of a {@link randomProgram}. */
export interface ProgramHooks {
  /** Collects (the program asks now, `where` says when); returns the storages freed. */
  collect(e: Engine, where: string): number;
  /** After every call, releases included (collections may have run on their own). */
  afterCall?(e: Engine, where: string): void;
}

/** What a {@link randomProgram} did, for a test to check that it exercised its subject. */
export interface ProgramSummary {
  /** Storages freed by the collections asked for. */
  freed: number;
  /** Evictions made. */
  evictions: number;
  /** Storages in the table after each collection asked for, summed. */
  kept: number;
  /** Calls that ended their step out of budget (values cut from lineage can fill it). */
  outOfBudget: number;
}

/** Runs the random program of `seed` (10 steps of up to 60 calls) with `hooks`. */
export function randomProgram(seed: number, hooks: ProgramHooks): ProgramSummary {
  const rng = mulberry32(seed);
  const e = new Engine({
    budgetBytes: 24 * 64,
    policy: createPolicy("dtr-eq"),
    costModel: new AnalyticCostModel(),
    executor: new MetaExecutor(),
    timeline: false,
  });
  const leaves: TensorNode[] = [];
  for (let i = 0; i < 4; i++) leaves.push(e.leaf(64, `w${i}`, { pinned: i === 0 }));
  let live: TensorNode[] = [];
  const out: ProgramSummary = { freed: 0, evictions: 0, kept: 0, outOfBudget: 0 };
  const collect = (where: string) => {
    out.freed += hooks.collect(e, where);
    out.kept += e.lineage.storages.size;
  };
  const pick = () =>
    live.length > 0 && rng() < 0.8
      ? live[Math.floor(rng() * live.length)]!
      : leaves[Math.floor(rng() * leaves.length)]!;
  for (let step = 0; step < 10; step++) {
    for (let i = 0; i < 60; i++) {
      const where = `seed ${seed}, step ${step}, call ${i}`;
      const ins = rng() < 0.3 ? [pick(), pick()] : [pick()];
      const r = rng();
      // Fresh outputs, two of them, or a view of the first input beside a fresh one (of a
      // computed value: an update of a leaf in place takes its views' references).
      const viewable = ins[0]!.storage.tensors[0]!.producer !== null;
      const outs = r < 0.15
        ? [{ bytes: 64 }, { bytes: 64 }]
        : r < 0.25 && viewable
        ? [{ bytes: 0, alias: 0 }, { bytes: 64 }]
        : [{ bytes: 64 }];
      let made: TensorNode[];
      try {
        made = e.compute("f", [], ins, outs, 1 + Math.floor(rng() * 50));
      } catch (err) {
        if (!(err instanceof OutOfBudgetError)) throw err;
        out.outOfBudget++;
        break;
      }
      live.push(...made);
      // Release some values (lineage kept while something computed from them is held).
      while (live.length > 30 || (live.length > 0 && rng() < 0.35)) {
        const j = Math.floor(rng() * live.length);
        e.release(live[j]!);
        live.splice(j, 1);
      }
      if (rng() < 0.04) {
        // A leaf replaced (a host write): freed once nothing needs it.
        const j = 1 + Math.floor(rng() * (leaves.length - 1));
        e.release(leaves[j]!);
        leaves[j] = e.leaf(64, `v${step}.${i}`);
      }
      if (rng() < 0.05) {
        // An in-place update of a leaf: its readers' lineage preserved (a copy) or cut.
        const j = 1 + Math.floor(rng() * (leaves.length - 1)), w = leaves[j]!, s = w.storage;
        if (s.residency === "resident") {
          let ext: number;
          try {
            ext = e.overwrite(s, rng() < 0.7);
          } catch (err) {
            // Invalidation brings back the held values computed from `s`: they may not fit.
            if (!(err instanceof OutOfBudgetError)) throw err;
            out.outOfBudget++;
            break;
          }
          leaves[j] = e.adoptLeaf(s, ext, w.name);
        }
      }
      hooks.afterCall?.(e, where);
      if (rng() < 0.08) collect(where);
    }
    // Half the values live on into the next step; the rest are released, then collected.
    const next: TensorNode[] = [];
    for (const t of live) {
      if (rng() < 0.5) next.push(t);
      else e.release(t);
    }
    live = next;
    collect(`seed ${seed}, end of step ${step}`);
  }
  out.evictions = e.stats.evictions;
  return out;
}
