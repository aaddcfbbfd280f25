/**
 * Entry of a run's process (see `realExecutor` in executor.ts): loads the packages,
 * reads one job `{spec, trace}` as JSON from stdin, executes it, and writes progress,
 * then the result or the error, as lines `\x1elibra <json>` on stdout (anything else
 * on stdout is a package's own output, passed on by the parent).
 *
 * @module
 */

import { executeInThisThread, warmUp } from "./executor.ts";
import type { RunSpec } from "./run_executor.ts";

const enc = new TextEncoder();
const say = (m: unknown) => {
  const bytes = enc.encode(`\x1elibra ${JSON.stringify(m)}\n`);
  for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
};

await warmUp().catch(() => {}); // loading errors surface with the run's context
const job = JSON.parse(await new Response(Deno.stdin.readable).text()) as {
  spec: RunSpec;
  trace?: string;
};
try {
  const result = await executeInThisThread(job.spec, {
    signal: new AbortController().signal,
    progress: (event) => say({ type: "progress", event }),
    ...(job.trace === undefined ? {} : { trace: job.trace }),
  });
  say({ type: "result", result });
} catch (e) {
  say({ type: "error", message: e instanceof Error ? e.message : String(e) });
}
