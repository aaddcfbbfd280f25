/**
 * A training step as data: the event stream of the DTR trace format
 * (ARCHITECTURE.md, "The DTR trace format"), parsed. The runtime imports and records
 * traces in this shape; the simulator replays them; planners read them.
 *
 * @module
 */

/** One output of a traced call. */
export interface TraceResult {
  /** Handle name. */
  readonly name: string;
  /** Storage bytes (0 for views). */
  readonly bytes: number;
  /** -1: fresh storage; k >= 0: a view of argument k's storage. */
  readonly alias: number;
}

/** One event of a trace; `line` is the 1-based line it came from (0 when built in memory). */
export type TraceEvent =
  | {
    readonly kind: "constant";
    readonly name: string;
    readonly bytes: number;
    readonly line: number;
  }
  | {
    readonly kind: "call";
    readonly op: string;
    readonly args: readonly string[];
    readonly results: readonly TraceResult[];
    readonly timeNs: number;
    readonly backward: boolean;
    /** Kernel params when recorded by this runtime (extension field `PARAMS`). */
    readonly params?: readonly number[];
    readonly line: number;
  }
  | {
    readonly kind: "mutate";
    readonly op: string;
    readonly args: readonly string[];
    readonly mutate: readonly number[];
    readonly timeNs: number;
    readonly backward: boolean;
    readonly params?: readonly number[];
    readonly line: number;
  }
  | { readonly kind: "copy"; readonly dst: string; readonly src: string; readonly line: number }
  | { readonly kind: "copyFrom"; readonly dst: string; readonly src: string; readonly line: number }
  | { readonly kind: "release"; readonly name: string; readonly line: number }
  /**
   * The program reads the value on the host (a loss's `item()`): it must be on
   * the device then. Recorded by this runtime (extension instruction `READ`).
   */
  | { readonly kind: "read"; readonly name: string; readonly line: number }
  | { readonly kind: "annotate"; readonly annotation: string; readonly line: number };

/** A parsed trace (events after the `START` annotation). */
export interface Trace {
  /** Events in order. */
  readonly events: readonly TraceEvent[];
  /** Where it came from (file path), for messages. */
  readonly source?: string;
}
