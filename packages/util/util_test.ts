import assert from "node:assert/strict";
import {
  clearList,
  formatDuration,
  median,
  mulberry32,
  removeLast,
  renderTable,
  Rng,
  Stack,
  StatusLine,
} from "./mod.ts";

Deno.test("median: odd, even, unsorted, empty; the input is left alone", () => {
  const xs = [5, 1, 4];
  assert.equal(median(xs), 4);
  assert.deepEqual(xs, [5, 1, 4]);
  assert.equal(median([10, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

Deno.test("mulberry32 is deterministic, in [0, 1), and roughly uniform", () => {
  const a = mulberry32(42), b = mulberry32(42), c = mulberry32(43);
  const xs = Array.from({ length: 10_000 }, () => a());
  assert.deepEqual(xs.slice(0, 5), Array.from({ length: 5 }, () => b()));
  assert.notEqual(xs[0], c());
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.02, `mean ${mean}`);
});

Deno.test("Rng: splitmix32 words, standard normals, permutations", () => {
  // splitmix32 of state 0x9e3779b9 (seed 0), computed step by step from the definition
  let z = 0x9e3779b9;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  assert.equal(new Rng(0).nextU32(), (z ^ (z >>> 16)) >>> 0);
  const r = new Rng(7);
  const n = 20_000;
  const ys = Array.from({ length: n }, () => r.normal());
  const mean = ys.reduce((s, y) => s + y, 0) / n;
  const v = ys.reduce((s, y) => s + (y - mean) ** 2, 0) / n;
  assert.ok(Math.abs(mean) < 0.03 && Math.abs(v - 1) < 0.05, `mean ${mean} var ${v}`);
  const p = [...new Rng(1).permutation(50)].sort((a, b) => a - b);
  assert.deepEqual(p, Array.from({ length: 50 }, (_, i) => i));
});

Deno.test("renderTable pads columns, right-aligns numbers and trims the end", () => {
  const t = renderTable(["name", "n", "note"], [["a", "1", ""], ["bbb", "22", "x"]], [
    false,
    true,
    false,
  ]);
  assert.equal(t, ["name   n  note", "----  --  ----", "a      1", "bbb   22  x"].join("\n"));
});

Deno.test("formatDuration picks seconds, minutes or hours", () => {
  assert.equal(formatDuration(12_345), "12.3s");
  assert.equal(formatDuration(185_000), "3m05s");
  assert.equal(formatDuration(3_720_000), "1h02m");
  assert.equal(formatDuration(-1), "?");
});

Deno.test("StatusLine redraws on a terminal and prints plain lines elsewhere", () => {
  let tty = "";
  const a = new StatusLine({ write: (t) => void (tty += t), isTerminal: true, now: () => 0 }, 30);
  a.show("x".repeat(50));
  a.print("kept");
  a.clear();
  assert.equal(
    tty,
    `\r\x1b[2K${"x".repeat(29)}\r\x1b[2Kkept\n\r\x1b[2K${"x".repeat(29)}\r\x1b[2K`,
  );
  let plain = "";
  const b = new StatusLine({ write: (t) => void (plain += t), isTerminal: false, now: () => 0 });
  b.show("status");
  b.print("kept");
  b.clear();
  assert.equal(plain, "kept\n");
});

Deno.test("clearList empties the list in place (the same array, no elements left)", () => {
  const a: unknown[] = [1, "x", null, undefined, { k: 1 }];
  const same = a;
  clearList(a);
  assert.equal(a, same);
  assert.equal(a.length, 0);
  assert.equal(0 in a, false);
  a.push(7);
  assert.deepEqual(a, [7]);
  clearList(a);
  clearList(a);
  assert.deepEqual(a, []);
});

Deno.test("removeLast removes what splice at lastIndexOf removes, in place (oracle: splice)", () => {
  const rng = mulberry32(3);
  for (let trial = 0; trial < 200; trial++) {
    const a = Array.from({ length: Math.floor(rng() * 8) }, () => Math.floor(rng() * 4));
    const x = Math.floor(rng() * 5); // 4 is never in the list
    const want = [...a];
    const i = want.lastIndexOf(x);
    if (i >= 0) want.splice(i, 1);
    const same = a;
    removeLast(a, x);
    assert.equal(a, same);
    assert.deepEqual(a, want, `trial ${trial}`);
  }
});

Deno.test("Stack: last in, first out, as an array's push and pop (oracle: an array)", () => {
  const rng = mulberry32(11);
  const s = new Stack<number>();
  const want: number[] = [];
  for (let i = 0; i < 2000; i++) {
    if (want.length > 0 && rng() < 0.45) assert.equal(s.pop(), want.pop());
    else {
      s.push(i);
      want.push(i);
    }
    assert.equal(s.size, want.length);
    if (rng() < 0.01) {
      s.clear();
      want.length = 0;
      assert.equal(s.size, 0);
    }
  }
});

const gc = (globalThis as { gc?: () => void }).gc;
Deno.test({
  name: "Stack forgets what it held: popped and cleared items can be collected",
  ignore: gc === undefined, // deno task test runs with --expose-gc
  fn: async () => {
    const s = new Stack<object>();
    const refs: WeakRef<object>[] = [];
    // Made in a function of their own, so that no local of this one holds the last.
    const fill = () => {
      for (let i = 0; i < 100; i++) {
        const o = { i };
        refs.push(new WeakRef(o));
        s.push(o);
      }
    };
    fill();
    for (let i = 0; i < 50; i++) s.pop();
    s.clear();
    s.push({ i: -1 }); // the room is reused
    // Weak references hold their targets until the current task ends.
    await new Promise((r) => setTimeout(r, 0));
    gc!();
    assert.equal(refs.filter((r) => r.deref() !== undefined).length, 0);
    assert.equal(s.size, 1);
  },
});
