/** Formatting helpers shared by pages and islands. @module */

/** Bytes with a binary unit: `1.50 MiB`. */
export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(2)} ${units[u]}`;
}

/** A time as `YYYY-MM-DD HH:MM:SS` UTC. */
export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

/** A number with `digits` decimals, or a dash. */
export function formatNumber(n: number | null | undefined, digits = 3): string {
  return n === null || n === undefined || !Number.isFinite(n) ? "—" : n.toFixed(digits);
}

/** A duration in ms as `1.2 s` / `340 ms`. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** A tick label without SI prefixes or exponents: `0.5`, `12`, `1,500`. */
export function plainTick(d: number): string {
  if (!Number.isFinite(d)) return "";
  const r = Number(d.toPrecision(6));
  return Math.abs(r) >= 10_000 ? r.toLocaleString("en-US") : String(r);
}

/** Whole-number ticks from 1 to `max` (about ten of them), for step axes. */
export function stepTicks(max: number): number[] {
  const stride = Math.max(1, Math.ceil(max / 10));
  const out: number[] = [];
  for (let s = 1; s <= max; s += stride) out.push(s);
  return out;
}

/**
 * How an infeasible result is named in tables and exports: the reason the runtime
 * reported (`out of memory`, `thrashing`), or `infeasible` when none was recorded.
 */
export function infeasibleLabel(reason: string | null | undefined): string {
  return reason ?? "infeasible";
}
