import assert from "node:assert/strict";
import type { Trace } from "@libra/lineage/trace";
import {
  candidateIntervals,
  chooseIntervals,
  type Interval,
  intervalCostNs,
} from "./_drop_intervals.ts";
import { chainTrace, TraceBuilder } from "./_planner_testing.ts";
import { analyzeTrace, memoryProfile } from "./_trace_analysis.ts";

const KiB = 1024;

/** The least-cost feasible set of candidates, by trying every subset. */
function bruteForce(t: Trace, target: number): { cost: number; chosen: Interval[] } {
  const a = analyzeTrace(t);
  const mem = memoryProfile(a);
  const n = a.calls.length;
  const ivs = candidateIntervals(a, mem, target);
  assert.ok(ivs.length <= 18, `${ivs.length} candidates: too many to enumerate`);
  let best = { cost: Infinity, chosen: [] as Interval[] };
  for (let mask = 0; mask < 1 << ivs.length; mask++) {
    const set = ivs.filter((_, i) => (mask >> i) & 1);
    if (new Set(set.map((iv) => iv.group)).size !== set.length) continue; // one per gap
    let fits = true;
    for (let k = 0; k < n && fits; k++) {
      let used = mem[k]!;
      for (const iv of set) {
        const to = Math.min(iv.restore, Number.isFinite(iv.v.freeAt) ? iv.v.freeAt : n);
        if (iv.from <= k && k < to) used -= iv.v.bytes;
      }
      fits = used <= target;
    }
    if (!fits) continue;
    const cost = intervalCostNs(a, set);
    if (cost < best.cost) best = { cost, chosen: set };
  }
  return best;
}

function check(name: string, t: Trace, target: number): boolean {
  const exact = bruteForce(t, target);
  const milp = chooseIntervals(analyzeTrace(t), target, { mipRelGap: 0 });
  if (exact.cost === Infinity) {
    assert.ok(milp.uncoveredBytes > 0, `${name}: no subset fits, yet the MILP covers everything`);
    return false;
  }
  assert.equal(milp.uncoveredBytes, 0, `${name}: the MILP leaves memory uncovered`);
  assert.equal(
    milp.objectiveNs,
    exact.cost,
    `${name}: MILP ${milp.objectiveNs} ns, optimum ${exact.cost} ns`,
  );
  return true;
}

/** x -> a -> b -> c -> d (forward) joined back: d also reads a (a U-Net-like skip); backward reverses. */
function skipTrace(): Trace {
  const b = new TraceBuilder().constant("x", KiB);
  b.call("f", ["x"], "a", KiB, 100).call("f", ["a"], "b", KiB, 300).call("f", ["b"], "c", KiB, 50);
  b.call("cat", ["c", "a"], "d", KiB, 80);
  b.call("d_backward", ["d"], "gd", KiB, 80, true).release("d");
  b.call("c_backward", ["gd", "c"], "gc", KiB, 50, true).release("gd").release("c");
  b.call("b_backward", ["gc", "b"], "gb", KiB, 300, true).release("gc").release("b");
  b.call("a_backward", ["gb", "a"], "ga", KiB, 100, true).release("gb").release("a");
  return b.build();
}

/** x -> a; b = f(a); c = g(a); d = h(b, c) (a diamond); backward reads d, c, b, a. */
function diamondTrace(): Trace {
  const b = new TraceBuilder().constant("x", KiB);
  b.call("f", ["x"], "a", KiB, 100).call("f", ["a"], "b", KiB, 40).call(
    "g",
    ["a"],
    "c",
    2 * KiB,
    200,
  );
  b.call("h", ["b", "c"], "d", KiB, 60);
  b.call("h_backward", ["d"], "gd", KiB, 60, true).release("d");
  b.call("g_backward", ["gd", "c"], "gc", KiB, 200, true).release("c");
  b.call("f_backward", ["gd", "b"], "gb", KiB, 40, true).release("gd").release("b");
  b.call("f_backward", ["gb", "gc", "a"], "ga", KiB, 100, true).release("gb").release("gc");
  b.release("a");
  return b.build();
}

Deno.test("chooseIntervals() finds the brute-force optimum on a chain, a diamond and a U-Net-like skip", () => {
  let solved = 0;
  for (const target of [5, 4.5, 4]) {
    if (check(`chain of 4 at ${target} KiB`, chainTrace(4), target * KiB)) solved++;
  }
  for (const target of [5, 4]) {
    if (check(`chain of 6 at ${target} KiB`, chainTrace(6), target * KiB)) solved++;
  }
  const peak = (t: Trace) => Math.max(...memoryProfile(analyzeTrace(t)));
  for (const f of [0.9, 0.8, 0.7, 0.6]) {
    if (check(`diamond at ${f}`, diamondTrace(), Math.floor(f * peak(diamondTrace())))) solved++;
    if (check(`skip at ${f}`, skipTrace(), Math.floor(f * peak(skipTrace())))) solved++;
  }
  assert.ok(solved >= 10, `only ${solved} of 13 cases had a feasible subset`);
});

Deno.test("chooseIntervals() on a chain of 4 at 5 KiB drops one activation over the peak (call 4) until its backward use, for 100 ns", () => {
  const r = chooseIntervals(analyzeTrace(chainTrace(4)), 5 * KiB, { mipRelGap: 0 });
  assert.equal(r.status, "Optimal");
  assert.equal(r.objectiveNs, 100);
  assert.equal(r.chosen.length, 1);
  const iv = r.chosen[0]!;
  // h_i is read by its backward call 7 - i; h0 and h1 are out over call 4 either way.
  assert.ok(["h0", "h1"].includes(iv.v.name), iv.v.name);
  assert.equal(iv.action, "drop");
  assert.ok(iv.prev < 4 && iv.restore === 7 - Number(iv.v.name.slice(1)));
});

Deno.test("chooseIntervals() swaps where the copy stream hides the copies and drops where it cannot", () => {
  const a = analyzeTrace(chainTrace(4));
  // 1 KiB at 1e6 bytes/ns: copies take about 1 ps, hidden by any compute.
  const fast = chooseIntervals(a, 5 * KiB, { mipRelGap: 0, swapGbps: 1e6 });
  assert.equal(fast.objectiveNs, 0);
  assert.deepEqual(fast.chosen.map((iv) => iv.action), ["swap"]);
  const iv = fast.chosen[0]!;
  // its memory is free once the next call ran (the copy overlaps it); it comes
  // back one call before its backward use (the copy overlaps that call)
  assert.ok(
    iv.from === iv.prev + 2 && iv.restore === iv.next - 1 && iv.from <= 4 && 4 < iv.restore,
  );
  // 1 KiB at 1e-3 bytes/ns takes 1 ms each way, far more than the 800 ns step: drop.
  const slow = chooseIntervals(a, 5 * KiB, { mipRelGap: 0, swapGbps: 1e-3 });
  assert.equal(slow.objectiveNs, 100);
  assert.deepEqual(slow.chosen.map((iv) => iv.action), ["drop"]);
});

/**
 * A random forward pass of `n` calls (sizes 1..3 KiB, times 10..400 ns, each
 * call reading the previous value and at times an older one) and a backward
 * pass reading the values in reverse, from a seeded generator.
 */
function randomTrace(seed: number, n: number): Trace {
  let s = seed;
  const rnd = () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
  const b = new TraceBuilder().constant("x", KiB);
  const names: string[] = [];
  let prev = "x";
  for (let i = 0; i < n; i++) {
    const args = [prev];
    if (names.length > 1 && rnd() < 0.4) {
      const old = names[Math.floor(rnd() * (names.length - 1))]!;
      if (!args.includes(old)) args.push(old);
    }
    const name = `v${i}`;
    b.call("f", args, name, (1 + Math.floor(rnd() * 3)) * KiB, 10 + Math.floor(rnd() * 390));
    names.push(name);
    prev = name;
  }
  let g = "";
  for (let i = n - 1; i >= 0; i--) {
    b.call("f_backward", g === "" ? [`v${i}`] : [`v${i}`, g], `g${i}`, KiB, 50, true);
    if (g !== "") b.release(g);
    b.release(`v${i}`);
    g = `g${i}`;
  }
  return b.build();
}

Deno.test("chooseIntervals() finds the brute-force optimum on random forward/backward traces", () => {
  let solved = 0, cases = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const t = randomTrace(seed, 4 + (seed % 2));
    const peak = Math.max(...memoryProfile(analyzeTrace(t)));
    for (const f of [0.85, 0.7]) {
      const target = Math.floor(f * peak);
      if (candidateIntervals(analyzeTrace(t), memoryProfile(analyzeTrace(t)), target).length > 16) {
        continue;
      }
      cases++;
      if (check(`random ${seed} at ${f}`, t, target)) solved++;
    }
  }
  assert.ok(cases >= 20 && solved >= 16, `${solved} of ${cases} cases had a feasible subset`);
});

Deno.test("chooseIntervals() relaxed: the LP optimum is at most the brute-force optimum, and its rounding covers the excess", () => {
  let cases = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const t = randomTrace(seed, 4 + (seed % 2));
    const a = analyzeTrace(t);
    const peak = Math.max(...memoryProfile(a));
    for (const f of [0.85, 0.7]) {
      const target = Math.floor(f * peak);
      if (candidateIntervals(a, memoryProfile(a), target).length > 16) continue;
      const exact = bruteForce(t, target);
      if (exact.cost === Infinity) continue;
      cases++;
      const lp = chooseIntervals(a, target, { relax: true });
      assert.equal(lp.status, "Optimal");
      // the LP objective adds a tie-break of about 1 ns per interval taken
      assert.ok(
        lp.relaxedNs <= exact.cost + 1.2 * exact.chosen.length + 1e-6,
        `random ${seed} at ${f}: LP ${lp.relaxedNs} ns, optimum ${exact.cost} ns`,
      );
      assert.equal(lp.uncoveredBytes, 0, `random ${seed} at ${f}: the rounding leaves memory over`);
      // the MILP reports no relaxation
      assert.ok(Number.isNaN(chooseIntervals(a, target).relaxedNs));
    }
  }
  assert.ok(cases >= 16, `${cases} cases`);
});
