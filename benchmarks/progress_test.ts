import assert from "node:assert/strict";
import { formatDuration, Progress, type ProgressSink } from "./progress.ts";

function sink(isTerminal: boolean): ProgressSink & { out: string[]; t: number } {
  const s = {
    out: [] as string[],
    t: 0,
    isTerminal,
    write(x: string) {
      s.out.push(x);
    },
    now: () => s.t,
  };
  return s;
}

Deno.test("formatDuration() picks seconds, minutes or hours", () => {
  assert.equal(formatDuration(12_340), "12.3s");
  assert.equal(formatDuration(185_000), "3m05s");
  assert.equal(formatDuration(3_720_000), "1h02m");
  assert.equal(formatDuration(NaN), "?");
});

Deno.test("Progress: the line shows current experiment, done/total, elapsed and a linear estimate", () => {
  const s = sink(false);
  const p = new Progress(10, s);
  p.start("w dtr@0.5");
  s.t = 4000;
  p.tick(4);
  // 4 of 10 done in 4 s -> 6 left at 1 s each.
  assert.equal(p.line(), "[4/10 40%] w dtr@0.5 | elapsed 4.0s | eta 6.0s");
});

Deno.test("Progress on a pipe prints plain lines, at most one per interval, plus the last", () => {
  const s = sink(false);
  const p = new Progress(100, s, 5000);
  p.start("a"); // first line
  for (let i = 0; i < 99; i++) {
    s.t += 100; // 9.9 s in all -> one more line at 5 s
    p.tick();
  }
  p.tick(); // the last
  p.note("bench: a note");
  p.finish();
  assert.ok(s.out.every((l) => !l.includes("\r") && !l.includes("\x1b")), "no control characters");
  const lines = s.out.filter((l) => l.startsWith("bench: ["));
  assert.equal(lines.length, 3, s.out.join(""));
  assert.match(lines[2]!, /^bench: \[100\/100 100%\]/);
  assert.deepEqual(s.out.slice(-2), ["bench: a note\n", "bench: 100/100 done in 9.9s\n"]);
});

Deno.test("Progress on a terminal redraws one line and clears it at the end", () => {
  const s = sink(true);
  const p = new Progress(2, s);
  p.start("x");
  p.tick();
  p.note("kept");
  p.finish();
  assert.ok(s.out.slice(0, 2).every((l) => l.startsWith("\r\x1b[2K[") && !l.endsWith("\n")));
  assert.ok(s.out.includes("\r\x1b[2Kkept\n"), "notes end with a newline so they stay");
  assert.equal(s.out[s.out.length - 1], "\r\x1b[2K");
});
