/**
 * Island: live progress of a queued or running run, from the API's server-sent
 * events: the phase in plain words, how far it is, and the time left estimated from
 * the pace so far; reloads the page when the run ends so that the results render.
 *
 * @module
 */

import { useSignal } from "@preact/signals";
import type { VNode } from "preact";
import { useEffect } from "preact/hooks";
import { island } from "../components/island.tsx";
import { etaMs, formatEta, phaseText } from "../components/progress.ts";

/** Props. */
export interface LiveProgressProps {
  /** Run id. */
  runId: string;
  /** State when the page rendered. */
  status: string;
  /** Progress when the page rendered. */
  progress: { phase: string; done: number; total: number; message: string } | null;
  /** Time since a worker started the run, when the page rendered (ms); null if queued. */
  elapsedMs: number | null;
}

function LiveProgressView(p: LiveProgressProps): VNode | null {
  const status = useSignal(p.status);
  const progress = useSignal(p.progress);
  const connected = useSignal(false);
  // the run's clock: the server's elapsed time at render, advanced by this page's clock
  const mounted = useSignal(typeof performance === "undefined" ? 0 : performance.now());
  const tick = useSignal(0);
  useEffect(() => {
    const t = setInterval(() => (tick.value = tick.value + 1), 1000);
    return () => clearInterval(t);
  }, []);
  useEffect(() => {
    if (!["queued", "running"].includes(p.status)) return;
    const es = new EventSource(`/api/runs/${encodeURIComponent(p.runId)}/events`);
    es.onopen = () => (connected.value = true);
    es.addEventListener("progress", (e) => {
      const d = JSON.parse((e as MessageEvent).data);
      if (status.value === "queued" && d.status === "running") mounted.value = performance.now();
      status.value = d.status;
      progress.value = d.progress;
    });
    es.addEventListener("end", (e) => {
      es.close();
      status.value = JSON.parse((e as MessageEvent).data).status;
      setTimeout(() => location.reload(), 300);
    });
    return () => es.close();
  }, [p.runId]);
  if (!["queued", "running"].includes(status.value)) {
    return <p class="live done" data-status={status.value}>Run {status.value}.</p>;
  }
  const pr = progress.value;
  void tick.value; // re-render every second: the estimate counts down
  const elapsed = status.value === "running"
    ? (p.status === "running" ? p.elapsedMs ?? 0 : 0) +
      (typeof performance === "undefined" ? 0 : performance.now() - mounted.value)
    : null;
  const eta = pr && elapsed !== null ? etaMs(elapsed, pr.done, pr.total) : null;
  const what = status.value === "queued"
    ? phaseText("queued")
    : pr
    ? phaseText(pr.phase)
    : "Starting";
  return (
    <div class="live" data-status={status.value}>
      <p class="phase">
        <span class={`badge status-${status.value}`}>{status.value}</span>{" "}
        <strong data-phase={pr?.phase ?? status.value}>{what}</strong>
        {connected.value ? <span class="muted">· live</span> : null}
      </p>
      {pr && <p class="muted small message">{pr.message}</p>}
      <progress max={pr?.total || 1} value={pr ? pr.done : undefined}></progress>
      <p class="eta">
        {pr
          ? `${pr.done} of ${pr.total} done (${Math.round((100 * pr.done) / (pr.total || 1))}%)`
          : ""}
        {pr ? " · " : ""}
        {eta === null
          ? status.value === "queued" ? "not started" : "time left: estimating…"
          : `about ${formatEta(eta)} left`}
      </p>
    </div>
  );
}

/** The live progress island. */
export const LiveProgress: (props: LiveProgressProps) => VNode = island(
  "LiveProgress",
  LiveProgressView,
);
/** The component itself (for the client registry). */
export const component: typeof LiveProgressView = LiveProgressView;
