/**
 * Seeded fuzzing of the trace parser and the simulator: 3000 mutations of a
 * valid trace (lines dropped, repeated, swapped, cut; fields replaced by huge,
 * negative, fractional, non-string or nested values; names changed; garbage
 * inserted). Each input must give a {@link TraceError} or a trace that both
 * replayers simulate without throwing, never another error or a hang.
 */
import assert from "node:assert/strict";
import { seededRandom } from "@libra/evict";
import { lstmLikeTrace } from "./_synth_trace.ts";
import { simulateTrace } from "./simulator.ts";
import { parseTrace, TraceError } from "./trace.ts";

const BASE = lstmLikeTrace({ steps: 2, layers: 1, hiddenBytes: 64, seed: 7 }).trim().split("\n");

const WEIRD: unknown[] = [
  "9007199254740993",
  "9007199254740991",
  "-1",
  "-2",
  "1e3",
  "0x10",
  "4.5",
  "",
  " 7",
  "NaN",
  7,
  null,
  true,
  [],
  ["x0"],
  {},
  [[["deep"]]],
  "x0",
  "x1",
  "nobody",
  "\u0000",
];

function mutate(lines: string[], rnd: () => number): string {
  const L = [...lines];
  const pick = (n: number) => Math.floor(rnd() * n);
  const k = rnd() < 0.5 ? 1 : 1 + pick(4);
  for (let i = 0; i < k && L.length > 0; i++) {
    const at = pick(L.length);
    switch (pick(8)) {
      case 0:
        L.splice(at, 1);
        break;
      case 1:
        L.splice(at, 0, L[pick(L.length)]!);
        break;
      case 2: {
        const b = pick(L.length);
        [L[at], L[b]] = [L[b]!, L[at]!];
        break;
      }
      case 3:
        L[at] = L[at]!.slice(0, pick(L[at]!.length));
        break;
      case 4:
        L.splice(
          at,
          0,
          ["{}", "[]", "null", "garbage", '{"INSTRUCTION":"CALL"}', "{".repeat(50)][
            pick(6)
          ]!,
        );
        break;
      default: {
        let j: Record<string, unknown>;
        try {
          j = JSON.parse(L[at]!);
        } catch {
          break;
        }
        if (typeof j !== "object" || j === null) break;
        const keys = Object.keys(j);
        const key = keys[pick(keys.length)]!;
        j[key] = WEIRD[pick(WEIRD.length)];
        L[at] = JSON.stringify(j);
      }
    }
  }
  return L.join("\n");
}

Deno.test("fuzz: 3000 mutated traces each give a TraceError or a trace the simulator replays", () => {
  const rnd = seededRandom(20261201);
  let parsed = 0, rejected = 0;
  for (let i = 0; i < 3000; i++) {
    const text = mutate(BASE, rnd);
    let trace;
    try {
      trace = parseTrace(text, `case${i}`);
    } catch (e) {
      assert.ok(e instanceof TraceError, `case ${i}: ${(e as Error).stack}\n${text}`);
      assert.match(e.message, new RegExp(`^case${i}:\\d+: `));
      rejected++;
      continue;
    }
    parsed++;
    if (!trace.events.some((e) => e.kind === "call" || e.kind === "mutate")) continue;
    // Replays: the fast replayer always, the Engine on every 10th (slower).
    for (const engine of i % 10 === 0 ? ["fast", "engine"] as const : ["fast"] as const) {
      try {
        const r = simulateTrace(trace, { ratios: [1, 0.5, 0.2], policy: "dtr-eq", engine });
        for (const row of r.results) {
          assert.ok(row.feasible ? row.overhead! >= 1 : row.reason !== null, `case ${i}`);
          assert.ok(Number.isSafeInteger(row.peakBytes), `case ${i}: peak ${row.peakBytes}`);
        }
      } catch (e) {
        assert.fail(`case ${i} (${engine}): ${(e as Error).stack}\n${text}`);
      }
    }
  }
  assert.ok(parsed > 100 && rejected > 1000, `parsed ${parsed}, rejected ${rejected}`);
});
