import assert from "node:assert/strict";
import { createPolicy, type Plan, planPolicy } from "@libra/evict";
import { CopyEngine, hiddenSwap, linkBandwidth } from "./copy_engine.ts";
import { replayTrace } from "./simulator.ts";
import { parseTrace } from "./trace.ts";

// Hand-computed timelines at 1 GB/s: a copy of n bytes takes n ns.

Deno.test("CopyEngine: a swap fully hidden behind compute costs nothing", () => {
  const ce = new CopyEngine(1);
  assert.deepEqual(ce.swapOut(100), { startNs: 0, endNs: 100 });
  ce.compute(300); // the memory is needed only after 300 ns
  assert.equal(ce.waitForMemory(100), 0);
  assert.deepEqual(ce.swapIn(100), { startNs: 300, endNs: 400 });
  ce.compute(200); // the reader comes at 500
  assert.equal(ce.waitUntil(400), 0);
  assert.equal(ce.now, 500);
  assert.equal(ce.stallNs, 0);
  assert.equal(ce.copyNs, 200);
});

Deno.test("CopyEngine: a partly hidden swap stalls for the rest", () => {
  const ce = new CopyEngine(1);
  ce.swapOut(100); // 0..100
  ce.compute(40);
  assert.equal(ce.heldBytes(), 100);
  assert.equal(ce.waitForMemory(100), 60, "the memory is back at 100");
  assert.equal(ce.heldBytes(), 0);
  assert.deepEqual(ce.swapIn(100), { startNs: 100, endNs: 200 });
  ce.compute(30); // 130
  assert.equal(ce.waitUntil(200), 70);
  assert.equal(ce.stallNs, 130);
  assert.equal(ce.now, 200);
});

Deno.test("CopyEngine: copies are serialized on one stream; compute waits only as long as it must", () => {
  const ce = new CopyEngine(1);
  ce.swapOut(100); // 0..100
  ce.swapOut(100); // 100..200
  assert.deepEqual(ce.swapIn(50), { startNs: 200, endNs: 250 }, "queued behind both");
  assert.equal(ce.waitForMemory(80), 100, "the first swap-out frees enough");
  assert.equal(ce.waitForMemory(100), 100, "the second is needed too: wait to 200");
  assert.equal(ce.waitUntil(250), 50);
  assert.equal(ce.stallNs, 250);
});

Deno.test("hiddenSwap() answers how much of a round trip compute hides", () => {
  // 55 MB over PCIe 5: 1 ms each way.
  assert.deepEqual(hiddenSwap(55e6, { outOverlapNs: 5e6, inLeadNs: 5e6 }), {
    copyNs: 2e6,
    hiddenNs: 2e6,
    stallNs: 0,
  });
  assert.deepEqual(hiddenSwap(55e6, { outOverlapNs: 0.25e6, inLeadNs: 0 }), {
    copyNs: 2e6,
    hiddenNs: 0.25e6,
    stallNs: 1.75e6,
  });
  const nv = hiddenSwap(450e6, { link: "nvlink-c2c", outOverlapNs: 0.5e6, inLeadNs: 0.25e6 });
  assert.equal(nv.stallNs, 0.5e6 + 0.75e6);
  assert.equal(linkBandwidth("pcie4"), 25);
  assert.equal(linkBandwidth("12.5"), 12.5);
  assert.throws(() => linkBandwidth("usb"), /unknown link "usb" \(links: pcie4 \(25 GB\/s\)/);
  assert.throws(() => new CopyEngine(0), /positive number of GB\/s/);
});

/** x; a = f(x); b = f(x); c = f(b); d = f(c); e = f(a, d): 100 ns a call, `bytes` a tensor. */
function fiveCalls(bytes: number) {
  const L = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"${bytes}","NAME":"x"}`,
  ];
  const call = (res: string, args: string[]) =>
    L.push(
      `{"ARGS":${
        JSON.stringify(args)
      },"INSTRUCTION":"CALL","NAME":"f","RESULT":["${res}"],"TIME":"100"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"${bytes}","NAME":"${res}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${res}"}`,
    );
  call("a", ["x"]);
  call("b", ["x"]);
  call("c", ["b"]);
  call("d", ["c"]);
  call("e", ["a", "d"]);
  return parseTrace(L.join("\n"));
}

function swapA(restoreBefore: number): Plan {
  return {
    planner: "hand",
    budgetBytes: Infinity,
    steps: [
      { kind: "evict", call: 0, tensor: "a", action: "swap" },
      { kind: "restore", call: restoreBefore, tensor: "a" },
    ],
  };
}

Deno.test("Engine with a link: swaps overlap compute (hidden, partly hidden, stall)", () => {
  const run = (bytes: number, restoreBefore: number) =>
    replayTrace(fiveCalls(bytes), {
      policy: planPolicy(swapA(restoreBefore), createPolicy("dtr-eq")),
      hostLimitBytes: Infinity,
      link: 1,
    });
  // a swaps out 100..200 while b and c run; prefetched before d (t = 300), back
  // at 400 when e needs it: hidden.
  let r = run(100, 3);
  assert.ok(r.feasible);
  assert.equal(r.stats.swapOuts, 1);
  assert.equal(r.stats.swapIns, 1);
  assert.equal(r.stats.swapStallNs, 0);
  assert.equal(r.overhead, 1);
  // 150 bytes: back at 300 + 150 = 450, e waits 50 ns: partly hidden.
  r = run(150, 3);
  assert.equal(r.stats.swapStallNs, 50);
  assert.equal(r.overhead, 550 / 500);
  // Restored only before e (t = 400): e waits the whole 100 ns copy.
  r = run(100, 4);
  assert.equal(r.stats.swapStallNs, 100);
  assert.equal(r.overhead, 600 / 500);
  assert.equal(r.engine.copyEngine!.now, 600, "makespan");
  // Without a link the same swap stalls synchronously for the cost model's swap cost.
  const sync = replayTrace(fiveCalls(100), {
    policy: planPolicy(swapA(3), createPolicy("dtr-eq")),
    hostLimitBytes: Infinity,
  });
  assert.ok(sync.stats.swapStallNs > 0);
  assert.equal(sync.engine.copyEngine, null);
});

Deno.test("Engine with a link: a call waits for memory a swap-out still holds", () => {
  // x (100, pinned); a = f(x) (100); b = f(x) (100, released at once); c = g(a) (50).
  const L = [
    `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
    `{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}`,
  ];
  const call = (res: string, args: string[], bytes: number) =>
    L.push(
      `{"ARGS":${
        JSON.stringify(args)
      },"INSTRUCTION":"CALL","NAME":"f","RESULT":["${res}"],"TIME":"100"}`,
      `{"INSTRUCTION":"MEMORY","MEMORY":"${bytes}","NAME":"${res}"}`,
      `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"${res}"}`,
    );
  call("a", ["x"], 100);
  call("b", ["x"], 100);
  L.push(`{"INSTRUCTION":"RELEASE","NAME":"b"}`);
  call("c", ["a"], 50);
  const r = replayTrace(parseTrace(L.join("\n")), {
    policy: planPolicy(swapA(2), createPolicy("dtr-eq")),
    hostLimitBytes: Infinity,
    budgetBytes: 250,
    overheadLimit: Infinity,
    link: 1,
  });
  // a: 0..100, its swap-out 100..200. b needs 100 with x (100) and the copy in
  // flight (100) held under 250: it waits to 200 and runs 200..300. a comes back
  // 300..400 (restored before c), c waits for it and runs 400..500.
  assert.ok(r.feasible, r.error?.message);
  assert.equal(r.stats.swapOuts, 1);
  assert.equal(r.stats.swapIns, 1);
  assert.equal(r.stats.swapStallNs, 200);
  assert.equal(r.engine.copyEngine!.now, 500);
  assert.equal(r.overhead, 500 / 300);
  assert.ok(r.stats.peakBytes <= 250);
});
