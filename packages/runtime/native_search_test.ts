import assert from "node:assert/strict";
import { cpuBackend, LibraryLoadError } from "@libra/native";
import { Runtime } from "./runtime.ts";
import { dispatchStream, STREAM_VALUE_BYTES } from "./dispatch_stream.ts";

let why = "";
try {
  cpuBackend();
} catch (e) {
  if (!(e instanceof LibraryLoadError)) throw e;
  why = e.message;
}

/** The evictions of 12k calls of the 3000-live dispatch stream under dtr-eq's sampled search. */
function decisions(native: boolean): { decisions: string[]; nativeCalls: number } {
  const backend = cpuBackend();
  const kernel = backend.sampleBounds;
  let nativeCalls = 0;
  // The runtime reads the backend's kernel once: counted here, or taken away.
  Object.defineProperty(backend, "sampleBounds", {
    value: native ? (...a: Parameters<typeof kernel>) => (nativeCalls++, kernel(...a)) : undefined,
  });
  const live = 3000;
  const rt = new Runtime({
    backend,
    timeline: false,
    budget: Math.floor(0.9 * live * STREAM_VALUE_BYTES),
    search: { mode: "sqrt" },
  });
  rt.engine.recordDecisions = true;
  const step = dispatchStream(rt, live);
  for (let i = 0; i < 12_000; i++) step();
  return { decisions: [...rt.engine.decisions], nativeCalls };
}

Deno.test({
  name: "the sampled search decides the same with the backend's native draws and bounds as without",
  ignore: why !== "",
  fn() {
    const withNative = decisions(true), without = decisions(false);
    assert.ok(withNative.nativeCalls > 1000, `${withNative.nativeCalls} native searches`);
    assert.equal(without.nativeCalls, 0);
    assert.ok(without.decisions.length > 1000, `${without.decisions.length} evictions`);
    assert.deepEqual(withNative.decisions, without.decisions);
  },
});
if (why) console.log(`native search test skipped: ${why}`);
