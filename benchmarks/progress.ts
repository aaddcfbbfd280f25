/**
 * Progress display on stderr: current experiment, done/total, elapsed time and
 * an estimate of the time left. On a terminal it redraws one line; otherwise
 * (CI logs, pipes) it prints plain lines, at most one every few seconds plus
 * the first and the last.
 *
 * @module
 */

import { formatDuration, type ProgressSink, StatusLine, stderrSink } from "@libra/util/progress";

/** The sink, the default stderr sink and the duration format are `@libra/util`'s. */
export { formatDuration, type ProgressSink, stderrSink };

/** Counts units of work and reports them. */
export class Progress {
  readonly #sink: ProgressSink;
  readonly #status: StatusLine;
  readonly #start: number;
  readonly #plainEveryMs: number;
  #total: number;
  #done = 0;
  #lastPlain = -Infinity;
  #current = "";

  constructor(total: number, sink: ProgressSink = stderrSink(), plainEveryMs = 5000) {
    this.#total = total;
    this.#sink = sink;
    this.#status = new StatusLine(sink);
    this.#start = sink.now();
    this.#plainEveryMs = plainEveryMs;
  }

  /** Units done so far. */
  get done(): number {
    return this.#done;
  }

  /** Total units (may grow when work is discovered late). */
  get total(): number {
    return this.#total;
  }

  /** Adds units of work to the total. */
  grow(n: number): void {
    this.#total += n;
  }

  /** Names the unit that starts now. */
  start(label: string): void {
    this.#current = label;
    this.#render(false);
  }

  /** Marks `n` units done. */
  tick(n = 1): void {
    this.#done = Math.min(this.#total, this.#done + n);
    this.#render(this.#done === this.#total);
  }

  /** A message that should not be overwritten (a skipped part, a warning). */
  note(text: string): void {
    if (this.#sink.isTerminal) {
      this.#sink.write(`\r\x1b[2K${text}\n`);
      this.#render(false);
    } else this.#sink.write(`${text}\n`);
  }

  /** Ends the display (clears the redrawn line on a terminal). */
  finish(): void {
    if (this.#sink.isTerminal) this.#sink.write("\r\x1b[2K");
    else {
      this.#sink.write(
        `bench: ${this.#done}/${this.#total} done in ${
          formatDuration(this.#sink.now() - this.#start)
        }\n`,
      );
    }
  }

  /** The status line without control characters. */
  line(): string {
    const elapsed = this.#sink.now() - this.#start;
    const eta = this.#done > 0 ? (elapsed / this.#done) * (this.#total - this.#done) : NaN;
    const pct = this.#total > 0 ? Math.floor((100 * this.#done) / this.#total) : 100;
    return `[${this.#done}/${this.#total} ${pct}%] ${this.#current} | elapsed ${
      formatDuration(elapsed)
    } | eta ${this.#done > 0 ? formatDuration(eta) : "?"}`;
  }

  #render(final: boolean): void {
    if (this.#sink.isTerminal) {
      this.#status.show(this.line());
      return;
    }
    const now = this.#sink.now();
    if (
      final || this.#done === 0 && this.#lastPlain === -Infinity ||
      now - this.#lastPlain >= this.#plainEveryMs
    ) {
      this.#lastPlain = now;
      this.#sink.write(`bench: ${this.line()}\n`);
    }
  }
}
