import assert from "node:assert/strict";
import { SwapCost } from "@libra/cost";
import { plannerContext, readTrace, replayTrace, simulateTrace } from "@libra/runtime";
import { plannerConformance } from "./_conformance.ts";
import { chainTrace, TraceBuilder } from "./_planner_testing.ts";
import { ChenSqrtPlanner } from "./chen_sqrt_planner.ts";
import { type LibraOptions, LibraPlanner, type Refinement } from "./libra_planner.ts";
import { type Plan, planHostLimit, type PlannerContext, planPolicy } from "./planner.ts";
import { createPolicy } from "./policies.ts";

const KiB = 1024;

/** Libra's own algorithm: its refinement only, no other plans, no fallback compared. */
function libraOnly(options: LibraOptions = {}): LibraPlanner {
  return new LibraPlanner({
    compareFallback: false,
    refinements: ["peak"],
    partialGoals: [],
    backwardCandidates: false,
    ...options,
  });
}

plannerConformance(
  "libra (chain of 6, host memory)",
  () => new LibraPlanner(),
  chainTrace(6),
  plannerContext(chainTrace(6), { hostLimitBytes: Infinity }),
  [0.9, 0.75],
);
plannerConformance(
  "libra without swaps (chain of 6, no host memory)",
  () => new LibraPlanner({ swap: false }),
  chainTrace(6),
  plannerContext(chainTrace(6)),
  [0.9, 0.75],
);

// chainTrace(4): x, h0..h3 forward (1 KiB each, 100 ns), backward reads h3..h0.
// Budget-free peak: 6 KiB at call 4 (x, h0..h3, g3). Candidates there in
// topological order: h0 (out between calls 1 and 7), h1 (2..6), h2 (3..5).
Deno.test("LibraPlanner.plan() at 5 KiB drops h0, the first candidate, and recomputes it before its backward use", () => {
  const t = chainTrace(4);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  assert.equal(ctx.baselinePeakBytes, 6 * KiB);
  const plan = libraOnly().plan(t, 5 * KiB, ctx);
  assert.deepEqual(plan.steps, [
    { kind: "evict", call: 1, tensor: "h0", action: "drop" },
    { kind: "restore", call: 7, tensor: "h0" },
  ]);
  assert.equal(plan.stats.peakCall, 4);
  assert.equal(plan.stats.candidates, 1);
  assert.equal(plan.stats.converted, 1, "the swap became a recomputation: the peak did not move");
  assert.equal(plan.stats.planPeakBytes, 5 * KiB);
  assert.ok(plan.stats.fitsWithoutFallback);
  // one recomputation of h0 (100 ns) over 800 ns of compute
  assert.equal(plan.stats.replayOverhead, 900 / 800);
});

Deno.test("LibraPlanner.plan() at 4 KiB keeps the swap whose recomputation would raise the peak", () => {
  const t = chainTrace(4);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  const plan = libraOnly().plan(t, 4 * KiB, ctx);
  // h0 and h1 are chosen; recomputing h1 before call 6 would need h0 back
  // too (5 KiB), so h1 stays swapped; h0 alone recomputes within 4 KiB.
  assert.deepEqual(plan.steps, [
    { kind: "evict", call: 1, tensor: "h0", action: "drop" },
    { kind: "evict", call: 2, tensor: "h1", action: "swap" },
    { kind: "restore", call: 6, tensor: "h1" },
    { kind: "restore", call: 7, tensor: "h0" },
  ]);
  assert.equal(plan.stats.swaps, 1);
  assert.equal(plan.stats.recomputes, 1);
  assert.equal(plan.stats.planPeakBytes, 4 * KiB);
  // 1 replay of the estimate, 3 of the refinement ({h0,h1} rejected, {h0} kept, {h1} rejected), 1 final
  assert.equal(plan.stats.replays, 5);
  assert.equal(plan.stats.refinement, "peak");
  const swap = new SwapCost().swapCost(KiB);
  assert.ok(
    Math.abs(plan.stats.replayOverhead - (800 + 100 + 2 * swap) / 800) < 1e-12,
    `swap out and in are charged with the swap cost model: ${plan.stats.replayOverhead}`,
  );
  const r = ctx.replay(plan, 4 * KiB);
  assert.ok(r.feasible && r.peakBytes <= 4 * KiB);
});

Deno.test("LibraPlanner.plan() says when no plan fits: 3 KiB is below the chain's minimum", () => {
  const t = chainTrace(4);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  // call 5 reads h2 and g3 and writes g2 while x is pinned: 4 KiB at least.
  const plan = libraOnly().plan(t, 3 * KiB, ctx);
  assert.equal(plan.stats.fitsWithoutFallback, false);
  assert.equal(plan.stats.replayFeasible, false);
  assert.ok(plan.stats.planPeakBytes >= 4 * KiB);
});

Deno.test("LibraPlanner.plan() without host memory falls back to recomputation", () => {
  const t = chainTrace(4);
  const ctx = plannerContext(t); // hostLimitBytes 0: planned swaps cannot happen
  const plan = libraOnly().plan(t, 5 * KiB, ctx);
  assert.ok(plan.steps.every((s) => s.kind === "restore" || s.action === "drop"));
  assert.ok(plan.stats.fitsWithoutFallback);
  assert.throws(
    () => libraOnly().plan(t, 0, ctx),
    /budget must be > 0/,
  );
});

Deno.test("LibraPlanner.plan() drops a held value no call reads again, without a restore", () => {
  // The forward half of chainTrace(4): h0..h3 stay referenced to the end; the
  // peak is the last call (x, h0..h3: 5 KiB), which reads h2. h0 comes first.
  const t = { events: chainTrace(4).events.filter((e) => e.kind !== "call" || !e.backward) };
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  assert.equal(ctx.baselinePeakBytes, 5 * KiB);
  const plan = libraOnly().plan(t, 4 * KiB, ctx);
  assert.deepEqual(plan.steps, [{ kind: "evict", call: 1, tensor: "h0", action: "drop" }]);
  assert.equal(plan.stats.unusedDrops, 1);
  assert.equal(plan.stats.recomputes, 0);
  assert.equal(plan.stats.planPeakBytes, 4 * KiB);
  assert.equal(plan.stats.replayOverhead, 1, "nothing is recomputed");
});

Deno.test("LibraPlanner.plan() leaves a value the program reads on the host on the device", () => {
  // As above, and the program reads h0 on the host after the last call (a loss's item()),
  // before it releases the values.
  const fwd = chainTrace(4).events.filter((e) => e.kind !== "call" || !e.backward);
  const last = fwd.findLastIndex((e) => e.kind === "call") + 1;
  const read = {
    events: [
      ...fwd.slice(0, last),
      { kind: "read" as const, name: "h0", line: 0 },
      ...fwd.slice(last),
    ],
  };
  const ctxOf = (t: typeof read) => plannerContext(t, { hostLimitBytes: Infinity });
  const plan = libraOnly().plan(read, 4 * KiB, ctxOf(read));
  assert.deepEqual(plan.steps, [{ kind: "evict", call: 2, tensor: "h1", action: "drop" }]);
  assert.equal(plan.stats.replayOverhead, 1, "nothing is recomputed");
  // Made blind to the read, the plan drops h0, and the read recomputes it.
  const blind = libraOnly().plan({ events: fwd }, 4 * KiB, ctxOf({ events: fwd }));
  assert.equal(blind.steps[0]!.tensor, "h0");
  const run = (p: Plan) =>
    replayTrace(read, {
      budgetBytes: 4 * KiB,
      hostLimitBytes: Infinity,
      policy: planPolicy(p, createPolicy("dtr-eq+swap")),
    });
  assert.ok(run(blind).stats.recomputeNs > 0);
  assert.equal(run(plan).stats.recomputeNs, 0);
  assert.equal(run(plan).stats.peakBytes, 4 * KiB);
});

Deno.test("LibraPlanner.plan() prefetches swap-ins so the copy overlaps compute", () => {
  // chainTrace(12) with 1 us calls; a copy takes 2.5 us. At 60% of the peak
  // h5 (backward use at call 18) stays swapped: its swap-in is issued
  // ceil(2.5 / 1) = 3 calls early, before call 15; without prefetch, before 18.
  const t = chainTrace(12, 1000);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  const budget = Math.floor(ctx.baselinePeakBytes * 0.6);
  const swapCost = { swapCost: () => 2500 };
  const restoreOf = (prefetch: boolean) => {
    const p = libraOnly({ swapCost, prefetch }).plan(t, budget, ctx);
    assert.ok(p.stats.fitsWithoutFallback);
    assert.deepEqual(p.steps.find((s) => s.kind === "evict" && s.tensor === "h5"), {
      kind: "evict",
      call: 6,
      tensor: "h5",
      action: "swap",
    });
    return p.steps.find((s) => s.kind === "restore" && s.tensor === "h5")!.call;
  };
  assert.equal(restoreOf(true), 15);
  assert.equal(restoreOf(false), 18);
});

const RESNET = "../shared/traces/resnet32-56.log";
let resnet: Awaited<ReturnType<typeof readTrace>> | undefined;
try {
  resnet = await readTrace(RESNET);
} catch {
  resnet = undefined;
}

Deno.test({
  name: "libra and chen-sqrt vs dtr-eq on resnet32-56 at ratios 0.8..0.3",
  ignore: resnet === undefined,
  fn() {
    const t = resnet!;
    const ctx = plannerContext(t, { hostLimitBytes: Infinity });
    const noHost = plannerContext(t);
    assert.equal(ctx.baselinePeakBytes, 10061179152);
    const ratios = [0.8, 0.7, 0.6, 0.5, 0.4, 0.3];
    const dtr = simulateTrace(t, { policy: "dtr-eq", ratios });
    const swapCost = new SwapCost();
    const rows: string[] = [
      "ratio  dtr-eq   | libra: fits  overhead(replay)  est.(prefetch)  swaps  recomp  replays | chen-sqrt: overhead  plan peak",
    ];
    for (const [i, ratio] of ratios.entries()) {
      const budget = Math.floor(ratio * ctx.baselinePeakBytes);
      const lp = libraOnly({ swapCost }).plan(
        t,
        budget,
        ctx,
      );
      const s = lp.stats;
      const lr = ctx.replay(lp, budget);
      assert.ok(
        !lr.feasible || lr.peakBytes <= budget,
        "a feasible replay stays within the budget",
      );
      if (s.fitsWithoutFallback) assert.ok(s.planPeakBytes <= budget);
      assert.ok(s.replayOverhead >= 1 && s.estimatedOverhead >= 1);
      assert.ok(s.replays <= 64 + 1);
      // swaps are charged: each swapped tensor is copied out and in at least once
      let swapNs = 0;
      for (const st of lp.steps) {
        if (st.kind === "evict" && st.action === "swap") {
          swapNs += 2 * swapCost.swapCost(bytesOf(t, st.tensor));
        }
      }
      assert.ok((s.replayOverhead - 1) * 291905487 >= swapNs * (1 - 1e-9));
      const cp = new ChenSqrtPlanner().plan(t, budget);
      const cr = noHost.replay(cp, budget);
      const cInf = noHost.replay(cp, Infinity);
      assert.ok(!cr.feasible || cr.peakBytes <= budget);
      assert.ok(cInf.overhead > 1 && cInf.overhead < 1.5, "about one extra forward pass");
      rows.push(
        `${ratio.toFixed(2)}   ${dtr.results[i]!.overhead?.toFixed(3) ?? "inf"}    |        ${
          s.fitsWithoutFallback ? "yes" : "no "
        }   ${s.replayOverhead.toFixed(3)}             ${
          s.estimatedOverhead.toFixed(3)
        }           ${String(s.swaps).padStart(3)}  ${String(s.recomputes).padStart(6)}  ${
          String(s.replays).padStart(7)
        } |  ${cr.feasible ? cr.overhead.toFixed(3) : "infeasible"}           ${
          (cInf.peakBytes / ctx.baselinePeakBytes).toFixed(3)
        }`,
      );
    }
    console.log(rows.join("\n"));
  },
});

function bytesOf(
  t: { events: readonly import("@libra/lineage/trace").TraceEvent[] },
  name: string,
): number {
  for (const e of t.events) {
    if (e.kind === "call") { for (const r of e.results) if (r.name === name) return r.bytes; }
  }
  throw new Error(`no ${name}`);
}

if (resnet === undefined) console.log(`skipping the resnet32-56 comparison: ${RESNET} is absent`);

const UNET = "../shared/traces/unet-6.log";
let unet: Awaited<ReturnType<typeof readTrace>> | undefined;
try {
  unet = await readTrace(UNET);
} catch {
  console.log(`skipping the unet-6 planner checks: ${UNET} is absent`);
}
if (unet !== undefined) {
  // U-Net has in-place MUTATEs and a forward op named max_pool2d_backward: the
  // planners take the backward pass to start at the BACKWARD annotation.
  const ctx = plannerContext(unet, { hostLimitBytes: Infinity });
  plannerConformance("libra (unet-6)", () => new LibraPlanner(), unet, ctx, [0.8, 0.5]);
  plannerConformance(
    "chen-sqrt (unet-6)",
    () => new ChenSqrtPlanner(),
    unet,
    plannerContext(unet),
    [0.8, 0.5],
  );
  Deno.test("planners read the forward/backward boundary of unet-6 from its BACKWARD annotation", () => {
    let calls = 0, boundary = -1;
    for (const e of unet!.events) {
      if (e.kind === "annotate" && e.annotation === "BACKWARD") boundary = calls;
      if (e.kind === "call" || e.kind === "mutate") calls++;
    }
    assert.equal(boundary, 128);
    const plan = new ChenSqrtPlanner().plan(unet!, 1);
    assert.equal(plan.stats.forwardCalls, 128);
    assert.equal(plan.stats.segments, Math.round(Math.sqrt(128)));
  });
}

Deno.test("LibraPlanner.plan() keeps the fallback policy alone (an empty plan) where it replays better", () => {
  const t = chainTrace(4);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  // Libra's plan alone (one refinement, no partial plans), so that dtr-eq alone is better
  const libra = { refinements: ["peak"], partialGoals: [], backwardCandidates: false } as const;
  const own = new LibraPlanner({ ...libra, compareFallback: false }).plan(t, 4 * KiB, ctx);
  const alone = ctx.replay({ planner: "none", budgetBytes: 4 * KiB, steps: [] }, 4 * KiB);
  assert.ok(alone.overhead < own.stats.replayOverhead, "dtr-eq alone is better here");
  const p = new LibraPlanner(libra).plan(t, 4 * KiB, ctx);
  assert.equal(p.stats.keptFallback, true);
  assert.deepEqual(p.steps, []);
  assert.equal(p.stats.replayOverhead, alone.overhead);
  assert.equal(p.stats.recomputes + p.stats.swaps, 0);
});

// chainTrace(n, 100000): calls of 100 us, so a swap round trip of 1 KiB costs far less than a
// recomputation and a swap-aware policy with host memory swaps.
Deno.test("planPolicy with fallbackAction drop refuses the fallback's swaps: a swap-aware dtr-eq with host memory replays as dtr-eq without it", () => {
  const t = chainTrace(6, 100_000);
  for (const kib of [7, 6, 5, 4]) {
    const budgetBytes = kib * KiB;
    const swapping = replayTrace(t, {
      budgetBytes,
      hostLimitBytes: Infinity,
      policy: createPolicy("dtr-eq+swap"),
    });
    assert.ok(swapping.stats.swapOuts > 0, `at ${kib} KiB the swap-aware policy swaps`);
    const plan: Plan = { planner: "test", budgetBytes, steps: [], fallbackAction: "drop" };
    const dropping = replayTrace(t, {
      budgetBytes,
      hostLimitBytes: Infinity,
      policy: planPolicy(plan, createPolicy("dtr-eq+swap")),
    });
    const plain = replayTrace(t, {
      budgetBytes,
      hostLimitBytes: 0,
      policy: createPolicy("dtr-eq"),
    });
    assert.equal(dropping.stats.swapOuts, 0);
    assert.equal(dropping.stats.evictions, plain.stats.evictions);
    assert.equal(dropping.overhead, plain.overhead);
    assert.ok(plain.overhead > swapping.overhead, "here the swaps were the better choice");
  }
});

Deno.test("planHostLimit gives no host memory to a plan whose fallback only drops and that swaps nothing", () => {
  const base: Plan = { planner: "test", budgetBytes: 1, steps: [] };
  const swapStep = { kind: "evict", call: 0, tensor: "h0", action: "swap" } as const;
  assert.equal(planHostLimit(base, Infinity), Infinity);
  assert.equal(planHostLimit({ ...base, fallbackAction: "drop" }, Infinity), 0);
  assert.equal(planHostLimit({ ...base, fallbackAction: "drop", steps: [swapStep] }, 5), 5);
  assert.equal(
    planHostLimit({ ...base, fallbackAction: "drop", steps: [{ ...swapStep, action: "drop" }] }, 5),
    0,
  );
});

Deno.test("LibraPlanner.plan() keeps its fallback alone dropping only where that replays best, and never a worse candidate", () => {
  const t = chainTrace(4);
  const real = plannerContext(t, { hostLimitBytes: Infinity });
  // Scripted replays of the two empty plans; the planner's own plan replays for real.
  const scripted = (alone: number, dropping: number): PlannerContext => ({
    ...real,
    replay(plan, budgetBytes) {
      if (plan.steps.length > 0) return real.replay(plan, budgetBytes);
      const overhead = plan.fallbackAction === "drop" ? dropping : alone;
      return { feasible: Number.isFinite(overhead), peakBytes: budgetBytes, overhead };
    },
  });
  const own = new LibraPlanner({ compareFallback: false }).plan(t, 5 * KiB, real);
  assert.ok(own.steps.length > 0 && own.stats.replayOverhead > 1);
  const best = own.stats.replayOverhead;

  const dropping = new LibraPlanner().plan(t, 5 * KiB, scripted(best + 0.1, best - 0.05));
  assert.deepEqual(dropping.steps, []);
  assert.equal(dropping.fallbackAction, "drop");
  assert.equal(dropping.stats.keptFallback, true);
  assert.equal(dropping.stats.replayOverhead, best - 0.05);
  assert.equal(dropping.stats.replays, own.stats.replays + 2);

  const alone = new LibraPlanner().plan(t, 5 * KiB, scripted(best - 0.05, best - 0.01));
  assert.deepEqual(alone.steps, []);
  assert.equal(alone.fallbackAction, undefined);
  assert.equal(alone.stats.replayOverhead, best - 0.05);

  const kept = new LibraPlanner().plan(t, 5 * KiB, scripted(best + 0.1, Infinity));
  assert.deepEqual(kept.steps, own.steps);
  assert.equal(kept.stats.keptFallback, false);
  assert.equal(kept.fallbackAction, undefined);
});

Deno.test("LibraPlanner.plan() keeps the plan made without the refinement where its swaps cost less than the recomputations", () => {
  // calls of 100 us: recomputing a value costs far more than swapping its 1 KiB out and back
  const t = chainTrace(4, 100_000);
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  const plan = new LibraPlanner({ compareFallback: false }).plan(t, 5 * KiB, ctx);
  assert.equal(plan.stats.refinement, "none");
  assert.deepEqual(plan.steps, [
    { kind: "evict", call: 1, tensor: "h0", action: "swap" },
    // prefetched: brought back before call 6, whose compute hides the copy
    { kind: "restore", call: 6, tensor: "h0" },
  ]);
  assert.equal(plan.stats.converted, 0);
  assert.equal(plan.stats.swaps, 1);
  // the refined plan (h0 recomputed) replays worse: 100 us of recomputation on 800 us
  const refined: Plan = {
    planner: "libra",
    budgetBytes: 5 * KiB,
    steps: [
      { kind: "evict", call: 1, tensor: "h0", action: "drop" },
      { kind: "restore", call: 7, tensor: "h0" },
    ],
  };
  const r = ctx.replay(refined, 5 * KiB);
  assert.ok(Math.abs(r.overhead - 900_000 / 800_000) < 1e-12);
  assert.ok(plan.stats.replayOverhead < r.overhead);
  const swap = new SwapCost().swapCost(KiB);
  assert.ok(Math.abs(plan.stats.replayOverhead - (800_000 + 2 * swap) / 800_000) < 1e-12);
});

Deno.test("LibraPlanner.plan() keeps the plan whose refinement turns only the swaps that lower the overhead into recomputations", () => {
  // a chain whose values cost 100 ns or 100 us to recompute; the backward calls take 1 us
  const times = [100, 100_000, 100_000, 100, 100, 100_000];
  const b = new TraceBuilder().constant("x", KiB);
  let prev = "x";
  for (const [i, ns] of times.entries()) {
    b.call("f", [prev], `h${i}`, KiB, ns);
    prev = `h${i}`;
  }
  let g = "";
  for (let i = times.length - 1; i >= 0; i--) {
    b.call("f_backward", g === "" ? [`h${i}`] : [`h${i}`, g], `g${i}`, KiB, 1000, true);
    if (g !== "") b.release(g);
    b.release(`h${i}`);
    g = `g${i}`;
  }
  const t = b.build();
  const ctx = plannerContext(t, { hostLimitBytes: Infinity });
  const only = (r: Refinement) =>
    new LibraPlanner({
      compareFallback: false,
      refinements: [r],
      partialGoals: [],
      backwardCandidates: false,
    }).plan(
      t,
      5 * KiB,
      ctx,
    );
  const [peak, none, cost] = [only("peak"), only("none"), only("cost")];
  assert.ok(cost.stats.replayFeasible);
  assert.ok(cost.stats.replayOverhead < none.stats.replayOverhead);
  assert.ok(cost.stats.replayOverhead < peak.stats.replayOverhead);
  const evicted = (p: Plan) =>
    p.steps.filter((s) => s.kind === "evict").map((s) => `${s.tensor}:${s.action}`);
  // the cheap values (h0, h3, h4) recomputed, the expensive ones (h1, h2) swapped
  assert.deepEqual(evicted(cost), ["h0:drop", "h1:swap", "h2:swap", "h3:drop", "h4:drop"]);
  assert.ok(evicted(none).every((e) => e.endsWith(":swap")));
  const all = new LibraPlanner({
    compareFallback: false,
    partialGoals: [],
    backwardCandidates: false,
  }).plan(t, 5 * KiB, ctx);
  assert.equal(all.stats.refinement, "cost");
  assert.deepEqual(all.steps, cost.steps);
  assert.equal(all.stats.replayOverhead, cost.stats.replayOverhead);
  assert.equal(
    all.stats.replays,
    peak.stats.replays + none.stats.replays + cost.stats.replays,
    "three plans made, each replayed",
  );
  assert.throws(() => new LibraPlanner({ refinements: [] }), /refinements must not be empty/);
  assert.throws(
    () => new LibraPlanner({ refinements: ["fast" as Refinement] }),
    /unknown refinement "fast"/,
  );
});

Deno.test("LibraPlanner.plan() keeps a plan that brings the peak only part of the way down where the fallback does the rest better", () => {
  // 8 values of 1 MiB, 20 us each to compute, a backward pass of 1 us calls; swaps over PCIe 5
  const MiB = 1 << 20;
  const b = new TraceBuilder().constant("x", MiB);
  let prev = "x";
  for (let i = 0; i < 8; i++) {
    b.call("f", [prev], `h${i}`, MiB, 20_000);
    prev = `h${i}`;
  }
  let g = "";
  for (let i = 7; i >= 0; i--) {
    b.call("f_backward", g === "" ? [`h${i}`] : [`h${i}`, g], `g${i}`, MiB, 1000, true);
    if (g !== "") b.release(g);
    b.release(`h${i}`);
    g = `g${i}`;
  }
  const t = b.build();
  const ctx = plannerContext(t, { hostLimitBytes: Infinity, link: "pcie5" });
  const budget = 7 * MiB;
  const whole = new LibraPlanner({ partialGoals: [], backwardCandidates: false }).plan(
    t,
    budget,
    ctx,
  );
  const p = new LibraPlanner().plan(t, budget, ctx);
  assert.ok(p.stats.partial > 0 && p.stats.partial < 1, `partial ${p.stats.partial}`);
  assert.equal(p.stats.fitsWithoutFallback, false, "the fallback evicts the rest");
  assert.equal(p.stats.keptFallback, false);
  assert.ok(p.stats.replayOverhead < whole.stats.replayOverhead - 0.05);
  const alone = ctx.replay({ planner: "none", budgetBytes: budget, steps: [] }, budget);
  assert.ok(p.stats.replayOverhead < alone.overhead);
  const r = ctx.replay(p, budget);
  assert.ok(r.feasible && r.peakBytes <= budget);
  assert.equal(r.overhead, p.stats.replayOverhead);
  assert.throws(
    () => new LibraPlanner({ partialGoals: [1] }),
    /partial goal must be in \(0, 1\), got 1/,
  );
});

Deno.test("LibraPlanner.plan() takes a gradient waiting across a peak inside the backward pass as a candidate", () => {
  // The peak (x, ga and a 4 KiB gb: 7 KiB with h0 still held) is inside the backward pass, where
  // no forward value is alive to evict; ga, a gradient read again only by the last call, is.
  const t = new TraceBuilder()
    .constant("x", KiB)
    .call("f", ["x"], "h0", KiB, 1000)
    .call("f_backward", ["h0"], "ga", KiB, 1000, true)
    .release("h0")
    .call("f_backward", ["x"], "gb", 4 * KiB, 1000, true)
    .call("f_backward", ["gb"], "gc", KiB, 1000, true)
    .release("gb")
    .call("f_backward", ["ga", "gc"], "gd", KiB, 1000, true)
    .release("ga")
    .release("gc")
    .build();
  const ctx = plannerContext(t, { hostLimitBytes: Infinity, link: "pcie5" });
  assert.equal(ctx.baselinePeakBytes, 7 * KiB);
  const p = new LibraPlanner().plan(t, 6 * KiB, ctx);
  assert.equal(p.stats.backwardCandidates, true);
  assert.deepEqual(p.steps, [
    { kind: "evict", call: 1, tensor: "ga", action: "swap" },
    { kind: "restore", call: 4, tensor: "ga" },
  ]);
  const forwardOnly = new LibraPlanner({ backwardCandidates: false }).plan(t, 6 * KiB, ctx);
  assert.deepEqual(forwardOnly.steps, [], "no forward value to plan for: the fallback alone");
  assert.ok(p.stats.replayOverhead < forwardOnly.stats.replayOverhead);
  assert.ok(p.stats.replayOverhead < 1.01, "the swap hides behind compute");
  const r = ctx.replay(p, 6 * KiB);
  assert.ok(r.feasible && r.peakBytes <= 6 * KiB);
});
