/**
 * The `chen-sqrt` planner: sqrt(N) segment checkpointing (Chen et al., 2016,
 * "Training Deep Nets with Sublinear Memory Cost"), as a baseline.
 *
 * The N forward calls (those before the first backward call) are split into
 * about sqrt(N) segments of consecutive calls. The outputs of each segment's
 * last call are kept (the checkpoints); every other activation the backward
 * pass reads is dropped after its last forward use. In the backward pass,
 * before the first backward use of any dropped tensor of a segment, the whole
 * segment's dropped tensors are recomputed, in forward order, from the
 * previous checkpoint. Forward values that are held but never read again
 * are dropped after their last use too (free). The plan ignores the budget
 * (it is a fixed strategy); where its memory does not fit, the runtime's
 * fallback policy evicts more.
 *
 * @module
 */

import type { Trace } from "@libra/lineage/trace";
import type { Plan, Planner, PlanStep } from "./planner.ts";
import { analyzeTrace } from "./_trace_analysis.ts";

/** Options of {@link ChenSqrtPlanner}. */
export interface ChenSqrtOptions {
  /** Number of segments. Default: round(sqrt(N)) for N forward calls. */
  segments?: number;
}

/** What {@link ChenSqrtPlanner} reports about a plan. */
export interface ChenSqrtPlanStats {
  /** Forward calls N. */
  readonly forwardCalls: number;
  /** Segments. */
  readonly segments: number;
  /** Checkpointed tensors kept (outputs of segment ends that the backward pass reads). */
  readonly checkpoints: number;
  /** Tensors dropped and recomputed. */
  readonly recomputes: number;
  /** Forward tensors held but never read again, dropped after their last use (free). */
  readonly unusedDrops: number;
}

/** A plan made by {@link ChenSqrtPlanner}, with its statistics. */
export interface ChenSqrtPlan extends Plan {
  /** What the planner did. */
  readonly stats: ChenSqrtPlanStats;
}

/**
 * The `chen-sqrt` planner. See the module doc.
 *
 * @example
 * ```ts
 * import { ChenSqrtPlanner } from "@libra/evict";
 * if (new ChenSqrtPlanner().name !== "chen-sqrt") throw new Error("name");
 * ```
 */
export class ChenSqrtPlanner implements Planner {
  /** Always `"chen-sqrt"`. */
  readonly name: string = "chen-sqrt";
  readonly #segments: number | undefined;

  /** A sqrt(N) checkpointing planner with `options`. */
  constructor(options: ChenSqrtOptions = {}) {
    if (
      options.segments !== undefined &&
      !(Number.isInteger(options.segments) && options.segments >= 1)
    ) {
      throw new RangeError(`chen-sqrt: segments must be an integer >= 1, got ${options.segments}`);
    }
    this.#segments = options.segments;
  }

  /** Makes the segment-checkpointing plan for `trace` at `budgetBytes`. */
  plan(trace: Trace, budgetBytes: number): ChenSqrtPlan {
    const a = analyzeTrace(trace);
    const nf = a.firstBackward;
    const k = Math.max(1, Math.min(nf, this.#segments ?? Math.round(Math.sqrt(nf))));
    /** Segment of forward call c. */
    const segOf = (c: number) => Math.min(k - 1, Math.floor((c * k) / Math.max(1, nf)));
    const isSegmentEnd = (c: number) => c === nf - 1 || segOf(c + 1) !== segOf(c);
    const steps: PlanStep[] = [];
    const perSegment = new Map<number, { name: string; producer: number }[]>();
    const firstBwd = new Map<number, number>();
    let checkpoints = 0;
    let unused = 0;
    for (const v of a.values) {
      if (v.producer < 0 || v.producer >= nf || v.backward || v.bytes === 0) continue;
      const bwdUse = v.uses.find((u) => u >= nf);
      if (bwdUse === undefined) {
        // Not read again but still held (a handle kept to the end of the step):
        // drop it after its last use; nothing recomputes it.
        const last = v.uses.length > 0 ? v.uses[v.uses.length - 1]! : v.producer;
        if (v.addressable && v.freeAt > last + 1 && last < a.calls.length - 1) {
          steps.push({ kind: "evict", call: last, tensor: v.name, action: "drop" });
          unused++;
        }
        continue;
      }
      if (isSegmentEnd(v.producer)) {
        checkpoints++;
        continue;
      }
      if (!v.addressable) continue;
      let lastFwd = v.producer;
      for (const u of v.uses) if (u < nf) lastFwd = u;
      const s = segOf(v.producer);
      steps.push({ kind: "evict", call: lastFwd, tensor: v.name, action: "drop" });
      let list = perSegment.get(s);
      if (!list) perSegment.set(s, list = []);
      list.push({ name: v.name, producer: v.producer });
      firstBwd.set(s, Math.min(firstBwd.get(s) ?? Infinity, bwdUse));
    }
    let recomputes = 0;
    for (const [s, list] of perSegment) {
      const at = firstBwd.get(s)!;
      list.sort((x, y) => x.producer - y.producer);
      for (const t of list) {
        steps.push({ kind: "restore", call: at, tensor: t.name });
        recomputes++;
      }
    }
    steps.sort((x, y) => x.call - y.call);
    return {
      planner: this.name,
      budgetBytes,
      steps,
      stats: { forwardCalls: nf, segments: k, checkpoints, recomputes, unusedDrops: unused },
    };
  }
}
