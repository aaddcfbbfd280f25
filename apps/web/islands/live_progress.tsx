/**
 * Island: live progress of a queued or running run, from the API's server-sent
 * events; reloads the page when the run ends so that the results render.
 *
 * @module
 */

import { useSignal } from "@preact/signals";
import type { VNode } from "preact";
import { useEffect } from "preact/hooks";
import { island } from "../components/island.tsx";

/** Props. */
export interface LiveProgressProps {
  /** Run id. */
  runId: string;
  /** State when the page rendered. */
  status: string;
  /** Progress when the page rendered. */
  progress: { phase: string; done: number; total: number; message: string } | null;
}

function LiveProgressView(p: LiveProgressProps): VNode | null {
  const status = useSignal(p.status);
  const progress = useSignal(p.progress);
  const connected = useSignal(false);
  useEffect(() => {
    if (!["queued", "running"].includes(p.status)) return;
    const es = new EventSource(`/api/runs/${encodeURIComponent(p.runId)}/events`);
    es.onopen = () => (connected.value = true);
    es.addEventListener("progress", (e) => {
      const d = JSON.parse((e as MessageEvent).data);
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
  return (
    <div class="live" data-status={status.value}>
      <p>
        <span class={`badge status-${status.value}`}>{status.value}</span> {pr
          ? `${pr.phase}: ${pr.message}`
          : status.value === "queued"
          ? "waiting for a worker…"
          : "starting…"}
        {connected.value ? <span class="muted">· live</span> : null}
      </p>
      <progress max={pr?.total || 1} value={pr ? pr.done : undefined}></progress>
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
