/**
 * Import and export of traces in the DTR format (ARCHITECTURE.md, "The DTR trace format"):
 * one JSON object per line, `INSTRUCTION` naming the kind, numbers as strings.
 * Malformed traces are rejected with the line number and the reason.
 *
 * @module
 */

import type { Trace, TraceEvent, TraceResult } from "@libra/lineage/trace";

export type { Trace, TraceEvent, TraceResult };

/** A malformed trace: names the source, the 1-based line and the reason. */
export class TraceError extends Error {
  /** 1-based line number. */
  readonly line: number;
  /** The error for `source`, 1-based `line` and `reason`. */
  constructor(source: string, line: number, reason: string) {
    super(`${source}:${line}: ${reason}`);
    this.name = "TraceError";
    this.line = line;
  }
}

const INSTRUCTIONS = new Set([
  "ANNOTATE",
  "CONSTANT",
  "MEMORY",
  "CALL",
  "ALIAS",
  "MUTATE",
  "COPY",
  "COPY_FROM",
  "RELEASE",
  "READ",
]);

type Json = Record<string, unknown>;

/**
 * Parses a DTR-format trace. Lines before the `START` annotation (when there
 * is one) are checked for syntax and skipped. Every name used must be defined
 * by a CONSTANT, CALL result, MUTATE, COPY or COPY_FROM before; a RELEASE of an
 * unknown name is ignored (as the format says).
 *
 * @example
 * ```ts
 * import { parseTrace } from "@libra/runtime/trace";
 * const t = parseTrace([
 *   `{"INSTRUCTION":"CONSTANT","NAME":"x"}`,
 *   `{"INSTRUCTION":"MEMORY","MEMORY":"16","NAME":"x"}`,
 *   `{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["y"],"TIME":"5"}`,
 *   `{"INSTRUCTION":"MEMORY","MEMORY":"16","NAME":"y"}`,
 *   `{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}`,
 * ].join("\n"));
 * if (t.events.length !== 2) throw new Error("a constant and a call");
 * ```
 */
export function parseTrace(text: string, source = "trace"): Trace {
  const raw = text.split("\n");
  const rows: { j: Json; line: number }[] = [];
  let start = -1;
  for (let i = 0; i < raw.length; i++) {
    const s = raw[i]!.trim();
    if (s === "") continue;
    let j: unknown;
    try {
      j = JSON.parse(s);
    } catch (e) {
      throw new TraceError(source, i + 1, `invalid JSON (${(e as Error).message})`);
    }
    if (typeof j !== "object" || j === null || Array.isArray(j)) {
      throw new TraceError(source, i + 1, "expected a JSON object per line");
    }
    const instr = (j as Json).INSTRUCTION;
    if (typeof instr !== "string" || !INSTRUCTIONS.has(instr)) {
      throw new TraceError(
        source,
        i + 1,
        `unknown instruction ${JSON.stringify(instr)} (expected one of ${
          [...INSTRUCTIONS].join(", ")
        })`,
      );
    }
    if (instr === "ANNOTATE" && (j as Json).ANNOTATION === "START" && start < 0) {
      start = rows.length;
    }
    rows.push({ j: j as Json, line: i + 1 });
  }
  const defined = new Set<string>();
  // Reference counts per tensor (names share one after COPY), and storage sizes.
  const tensorOf = new Map<string, { refs: number; bytes: number }>();
  let totalBytes = 0, totalTime = 0;
  const addBytes = (line: number, bytes: number, what: string): void => {
    totalBytes += bytes;
    if (!Number.isSafeInteger(totalBytes)) {
      throw new TraceError(
        source,
        line,
        `${what}: the bytes allocated so far sum to ${totalBytes}, past 2^53 - 1 (${Number.MAX_SAFE_INTEGER}); every size and sum must be a safe integer`,
      );
    }
  };
  const addTime = (line: number, ns: number, what: string): void => {
    totalTime += ns;
    if (!Number.isSafeInteger(totalTime)) {
      throw new TraceError(
        source,
        line,
        `${what}: the TIMEs so far sum to ${totalTime} ns, past 2^53 - 1 (${Number.MAX_SAFE_INTEGER}); every time and sum must be a safe integer`,
      );
    }
  };
  const drop = (line: number, name: string, what: string): void => {
    const t = tensorOf.get(name)!;
    if (t.refs <= 0) {
      throw new TraceError(
        source,
        line,
        `${what} ${
          JSON.stringify(name)
        }: its tensor has no reference left (released more often than it was referenced)`,
      );
    }
    t.refs--;
  };
  const events: TraceEvent[] = [];
  let backward = false;
  let k = start >= 0 ? start + 1 : 0;
  const str = (r: { j: Json; line: number }, f: string): string => {
    const v = r.j[f];
    if (typeof v !== "string") {
      throw new TraceError(
        source,
        r.line,
        `${r.j.INSTRUCTION}: field ${f} must be a string, got ${JSON.stringify(v)}`,
      );
    }
    return v;
  };
  const int = (r: { j: Json; line: number }, f: string, min: number): number => {
    const v = str(r, f);
    const n = Number(v);
    if (!/^-?\d+$/.test(v) || !Number.isSafeInteger(n) || n < min) {
      throw new TraceError(
        source,
        r.line,
        `${r.j.INSTRUCTION}: field ${f} must be an integer >= ${min} as a string, got ${
          JSON.stringify(v)
        }`,
      );
    }
    return n;
  };
  const names = (r: { j: Json; line: number }, f: string): string[] => {
    const v = r.j[f];
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      throw new TraceError(
        source,
        r.line,
        `${r.j.INSTRUCTION}: field ${f} must be a list of names`,
      );
    }
    return v as string[];
  };
  const use = (r: { j: Json; line: number }, name: string): void => {
    if (!defined.has(name)) {
      throw new TraceError(
        source,
        r.line,
        `${r.j.INSTRUCTION}: undefined name ${JSON.stringify(name)}`,
      );
    }
  };
  const params = (r: { j: Json; line: number }): number[] | undefined => {
    const v = r.j.PARAMS;
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "number")) {
      throw new TraceError(source, r.line, `${r.j.INSTRUCTION}: PARAMS must be a list of numbers`);
    }
    return v as number[];
  };
  const expect = (
    at: number,
    instr: string,
    name: string,
    what: string,
  ): { j: Json; line: number } => {
    const r = rows[at];
    const prev = rows[at - 1]!;
    const origin = rows[k0]!;
    if (!r || r.j.INSTRUCTION !== instr || r.j.NAME !== name) {
      throw new TraceError(
        source,
        r?.line ?? prev.line,
        `missing ${instr} line for ${JSON.stringify(name)} after ${what} (line ${origin.line})${
          r
            ? `; found ${String(r.j.INSTRUCTION)}${
              r.j.NAME !== undefined ? ` ${JSON.stringify(r.j.NAME)}` : ""
            }`
            : "; found end of file"
        }`,
      );
    }
    return r;
  };
  let k0 = 0;
  while (k < rows.length) {
    k0 = k;
    const r = rows[k++]!;
    const line = r.line;
    switch (r.j.INSTRUCTION) {
      case "ANNOTATE": {
        const a = str(r, "ANNOTATION");
        if (a === "BACKWARD") backward = true;
        events.push({ kind: "annotate", annotation: a, line });
        break;
      }
      case "CONSTANT": {
        const name = str(r, "NAME");
        if (defined.has(name)) {
          throw new TraceError(
            source,
            line,
            `CONSTANT: ${JSON.stringify(name)} is already defined`,
          );
        }
        const m = expect(k++, "MEMORY", name, "CONSTANT");
        defined.add(name);
        const bytes = int(m, "MEMORY", 0);
        addBytes(m.line, bytes, "CONSTANT");
        tensorOf.set(name, { refs: 1, bytes });
        events.push({ kind: "constant", name, bytes, line });
        break;
      }
      case "CALL": {
        const op = str(r, "NAME");
        const args = names(r, "ARGS");
        const result = names(r, "RESULT");
        const time = int(r, "TIME", 0);
        addTime(line, time, `CALL ${op}`);
        for (const a of args) use(r, a);
        backward ||= op.includes("backward");
        const results: TraceResult[] = [];
        for (const name of result) {
          const m = expect(k++, "MEMORY", name, `CALL ${op}`);
          const al = expect(k++, "ALIAS", name, `CALL ${op}`);
          const alias = int(al, "ALIAS", -1);
          if (alias >= args.length) {
            throw new TraceError(
              source,
              al.line,
              `ALIAS ${alias} of ${
                JSON.stringify(name)
              } is not an argument index (the call has ${args.length})`,
            );
          }
          if (defined.has(name) || results.some((x) => x.name === name)) {
            throw new TraceError(
              source,
              line,
              `CALL ${op}: result ${JSON.stringify(name)} is already defined`,
            );
          }
          results.push({ name, bytes: alias >= 0 ? 0 : int(m, "MEMORY", 0), alias });
        }
        for (const x of results) {
          defined.add(x.name);
          addBytes(line, x.bytes, `CALL ${op}`);
          tensorOf.set(x.name, {
            refs: 1,
            bytes: x.alias >= 0 ? tensorOf.get(args[x.alias]!)!.bytes : x.bytes,
          });
        }
        const p = params(r);
        events.push({
          kind: "call",
          op,
          args,
          results,
          timeNs: time,
          backward,
          line,
          ...(p ? { params: p } : {}),
        });
        break;
      }
      case "MUTATE": {
        const op = str(r, "NAME");
        const args = names(r, "ARGS");
        for (const a of args) use(r, a);
        const mv = r.j.MUTATE;
        const mutate = Array.isArray(mv) ? mv.map((x) => Number(x)) : [];
        if (
          !Array.isArray(mv) ||
          mutate.some((x) => !Number.isInteger(x) || x < 0 || x >= args.length)
        ) {
          throw new TraceError(
            source,
            line,
            `MUTATE ${op}: MUTATE must list argument indices below ${args.length}, got ${
              JSON.stringify(mv)
            }`,
          );
        }
        backward ||= op.includes("backward");
        const p = params(r);
        const timeNs = int(r, "TIME", 0);
        addTime(line, timeNs, `MUTATE ${op}`);
        for (const m of mutate) {
          const name = args[m]!;
          const bytes = tensorOf.get(name)!.bytes;
          addBytes(line, bytes, `MUTATE ${op}`);
          drop(line, name, `MUTATE ${op} of`);
          tensorOf.set(name, { refs: 1, bytes });
        }
        events.push({
          kind: "mutate",
          op,
          args,
          mutate,
          timeNs,
          backward,
          line,
          ...(p ? { params: p } : {}),
        });
        break;
      }
      case "COPY": {
        const dst = str(r, "DST"), src = str(r, "SRC");
        use(r, src);
        if (defined.has(dst)) {
          throw new TraceError(
            source,
            line,
            `COPY: destination ${JSON.stringify(dst)} is already defined`,
          );
        }
        defined.add(dst);
        const t = tensorOf.get(src)!;
        t.refs++;
        tensorOf.set(dst, t);
        events.push({ kind: "copy", dst, src, line });
        break;
      }
      case "COPY_FROM": {
        const dst = str(r, "DST"), src = str(r, "SRC");
        use(r, src);
        use(r, dst);
        drop(line, dst, "COPY_FROM into");
        const t = tensorOf.get(src)!;
        t.refs++;
        tensorOf.set(dst, t);
        events.push({ kind: "copyFrom", dst, src, line });
        break;
      }
      case "RELEASE": {
        const name = str(r, "NAME");
        if (defined.has(name)) {
          drop(line, name, "RELEASE of");
          events.push({ kind: "release", name, line });
        }
        break;
      }
      case "READ": {
        const name = str(r, "NAME");
        use(r, name);
        if (tensorOf.get(name)!.refs <= 0) {
          throw new TraceError(
            source,
            line,
            `READ of ${JSON.stringify(name)}: its tensor has no reference left`,
          );
        }
        events.push({ kind: "read", name, line });
        break;
      }
      case "MEMORY":
      case "ALIAS":
        throw new TraceError(
          source,
          line,
          `${r.j.INSTRUCTION} line for ${
            JSON.stringify(r.j.NAME)
          } does not follow a CONSTANT or CALL result`,
        );
    }
  }
  return { events, source };
}

/** Reads and parses a trace file. */
export async function readTrace(path: string): Promise<Trace> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new Error(`cannot read trace ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseTrace(text, path);
}

/** Formats a trace in the DTR format (with a leading START annotation). */
export function formatTrace(trace: Trace): string {
  const out: string[] = [JSON.stringify({ ANNOTATION: "START", INSTRUCTION: "ANNOTATE" })];
  for (const e of trace.events) {
    switch (e.kind) {
      case "annotate":
        if (e.annotation !== "START") {
          out.push(JSON.stringify({ ANNOTATION: e.annotation, INSTRUCTION: "ANNOTATE" }));
        }
        break;
      case "constant":
        out.push(JSON.stringify({ INSTRUCTION: "CONSTANT", NAME: e.name }));
        out.push(JSON.stringify({ INSTRUCTION: "MEMORY", MEMORY: String(e.bytes), NAME: e.name }));
        break;
      case "call":
        out.push(JSON.stringify({
          ARGS: e.args,
          INSTRUCTION: "CALL",
          NAME: e.op,
          RESULT: e.results.map((r) => r.name),
          TIME: String(Math.round(e.timeNs)),
          ...(e.params ? { PARAMS: e.params } : {}),
        }));
        for (const r of e.results) {
          out.push(
            JSON.stringify({ INSTRUCTION: "MEMORY", MEMORY: String(r.bytes), NAME: r.name }),
          );
          out.push(JSON.stringify({ ALIAS: String(r.alias), INSTRUCTION: "ALIAS", NAME: r.name }));
        }
        break;
      case "mutate":
        out.push(JSON.stringify({
          ARGS: e.args,
          INSTRUCTION: "MUTATE",
          MUTATE: [...e.mutate],
          NAME: e.op,
          TIME: String(Math.round(e.timeNs)),
          ...(e.params ? { PARAMS: e.params } : {}),
        }));
        break;
      case "copy":
        out.push(JSON.stringify({ DST: e.dst, INSTRUCTION: "COPY", SRC: e.src }));
        break;
      case "copyFrom":
        out.push(JSON.stringify({ DST: e.dst, INSTRUCTION: "COPY_FROM", SRC: e.src }));
        break;
      case "release":
        out.push(JSON.stringify({ INSTRUCTION: "RELEASE", NAME: e.name }));
        break;
      case "read":
        out.push(JSON.stringify({ INSTRUCTION: "READ", NAME: e.name }));
        break;
    }
  }
  return out.join("\n") + "\n";
}
