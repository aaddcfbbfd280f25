/**
 * Progress on a terminal: one status line redrawn in place on a terminal,
 * plain lines elsewhere (CI logs, pipes). The benchmark runner and the CLI's
 * `start` demo both draw through {@link StatusLine}.
 *
 * @module
 */

/** Where progress text goes and how time is read (injectable for tests). */
export interface ProgressSink {
  /** Writes text as is (no newline added). */
  write(text: string): void;
  /** True when the sink is a terminal (the status line is redrawn in place). */
  readonly isTerminal: boolean;
  /** Milliseconds from some fixed origin. */
  now(): number;
}

/**
 * The default sink: stderr and the wall clock.
 *
 * @example
 * ```ts
 * import { stderrSink } from "@libra/util/progress";
 * const sink = stderrSink();
 * if (typeof sink.isTerminal !== "boolean") throw new Error("example: sink");
 * ```
 */
export function stderrSink(): ProgressSink {
  const enc = new TextEncoder();
  return {
    write: (t) => {
      Deno.stderr.writeSync(enc.encode(t));
    },
    isTerminal: Deno.stderr.isTerminal(),
    now: () => performance.now(),
  };
}

/**
 * Formats a duration in ms as `1h02m`, `3m05s` or `12.3s` (`?` when unknown).
 *
 * @example
 * ```ts
 * import { formatDuration } from "@libra/util/progress";
 * if (formatDuration(185_000) !== "3m05s") throw new Error("example: format");
 * ```
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "?";
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

/** Columns of the console, or `fallback` when there is none (or it is narrower than 40). */
export function consoleColumns(fallback = 100): number {
  try {
    const c = Deno.consoleSize().columns;
    return c >= 40 ? c : fallback;
  } catch {
    return fallback;
  }
}

/**
 * One status line redrawn in place on a terminal sink. `show` is a no-op on
 * other sinks: they get permanent lines from `print` only.
 *
 * @example
 * ```ts
 * import { StatusLine } from "@libra/util/progress";
 * let out = "";
 * const line = new StatusLine({ write: (t) => void (out += t), isTerminal: true, now: () => 0 }, 80);
 * line.show("[1/2] working");
 * line.print("done: a");
 * line.clear();
 * if (!out.includes("done: a\n")) throw new Error("example: status line");
 * ```
 */
export class StatusLine {
  readonly #sink: ProgressSink;
  readonly #columns: number | undefined;
  #text = "";
  #shown = false;

  /** Draws on `sink`; `columns` fixes the width (default: the console's, read at each draw). */
  constructor(sink: ProgressSink, columns?: number) {
    this.#sink = sink;
    this.#columns = columns;
  }

  /** True when the sink is a terminal. */
  get isTerminal(): boolean {
    return this.#sink.isTerminal;
  }

  /** Replaces the status line (terminal only), cut to the console width. */
  show(text: string): void {
    if (!this.#sink.isTerminal) return;
    this.#text = text;
    const cols = this.#columns ?? consoleColumns(120);
    this.#sink.write(`\r\x1b[2K${text.slice(0, Math.max(20, cols - 1))}`);
    this.#shown = true;
  }

  /** Writes a permanent line; on a terminal the status line is cleared and redrawn below it. */
  print(text: string): void {
    if (!this.#sink.isTerminal) {
      this.#sink.write(`${text}\n`);
      return;
    }
    const redraw = this.#shown;
    this.clear();
    this.#sink.write(`${text}\n`);
    if (redraw) this.show(this.#text);
  }

  /** Erases the status line (terminal only). */
  clear(): void {
    if (this.#shown) this.#sink.write("\r\x1b[2K");
    this.#shown = false;
  }
}
