// Worker-thread entry of the memory estimator (JavaScript, so that the thread does not
// type-check its graph again under `deno test`; estimate.ts is checked with the package).
import { estimateInThisThread } from "./estimate.ts";

self.onmessage = async (e) => {
  try {
    self.postMessage({ ok: true, estimate: await estimateInThisThread(e.data) });
  } catch (err) {
    self.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
  }
};
