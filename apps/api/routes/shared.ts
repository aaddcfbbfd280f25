/**
 * What the API's sub-apps share: their dependencies, the run view with its links, and
 * the 404 answer.
 *
 * @module
 */

import type { Context } from "hono";
import type { BodyLimits } from "../body.ts";
import type { Run, Store } from "../store.ts";

/** What every sub-app of the API gets. */
export interface ApiDeps {
  /** Storage. */
  store: Store;
  /** Body limits in force. */
  limits: BodyLimits;
  /** Called after a run is queued (wakes the in-process worker). */
  onQueued?: (() => void) | undefined;
  /** Interval at which the event stream polls a run, ms. */
  eventPollMs: number;
  /** Ends open event streams when aborted (server shutdown). */
  signal?: AbortSignal | undefined;
}

/** `404 {"error": "<what> \"<id>\" not found"}`. */
export function notFound(c: Context, what: string, id: string): Response {
  return c.json({ error: `${what} ${JSON.stringify(id)} not found` }, 404);
}

/** The public view of a run: the stored fields plus links to its sub-resources. */
export function runView(r: Run): Run & { links: Record<string, string> } {
  const base = `/api/runs/${r.id}`;
  return {
    ...r,
    links: {
      self: base,
      results: `${base}/results`,
      memory: `${base}/memory`,
      loss: `${base}/loss`,
      trace: `${base}/trace`,
      events: `${base}/events`,
    },
  };
}
