// Worker-thread entry of the real executor (JavaScript, so that the worker does
// not type-check its graph again under `deno test`; executor.ts is checked with
// the rest of the package). Receives one run, posts progress, then the result or the error.
import { executeInThisThread, warmUp } from "./executor.ts";

self.onmessage = async (e) => {
  if (e.data.warm) {
    // loading errors surface on the first run, with the run's context
    await warmUp().catch(() => {});
    return;
  }
  const { spec, trace } = e.data;
  try {
    const result = await executeInThisThread(spec, {
      signal: new AbortController().signal,
      progress: (event) => self.postMessage({ type: "progress", event }),
      ...(trace === undefined ? {} : { trace }),
    });
    self.postMessage({ type: "result", result });
  } catch (err) {
    self.postMessage({ type: "error", message: err instanceof Error ? err.message : String(err) });
  }
};
