/**
 * Instructions per call of the dispatch stream, per function: a measure that
 * does not move with the machine's load, for comparing two versions of the
 * runtime's hot paths where timings on a shared VM move by more than the
 * change (the micro-benchmarks' rows vary by up to 2x between runs here).
 *
 * The stream (`benchmarks/_instr_workload.ts`) runs twice under valgrind's
 * callgrind, with the same warm-up and two different numbers of calls; the
 * difference of the two counts, per function, over the difference of calls is
 * the steady state's cost per call, start-up and warm-up cancelled. JIT code is
 * named from V8's perf map (`--perf-basic-prof`): `JS:*'name file:line:col` is
 * optimized (TurboFan) code, `+` Maglev, `^` baseline, `~` the interpreter;
 * V8's builtins are named `Builtin:...`. V8 runs `--predictable` (no
 * background threads, no timing heuristics). The JavaScript and native rows
 * repeat to within a few instructions a call run to run; the row of V8's and
 * Deno's own code (`deno (unnamed)`: the garbage collector, the compilers) moves
 * by thousands, with where collections fall (10.6k and 15.9k a call in two
 * runs of `dtr-eq` whose other rows agreed to 6 instructions).
 *
 * The native rows are the portable library's (no machine flags: valgrind
 * cannot decode AVX-512), whose loops compile differently from the default
 * build's: time native changes on the default build.
 *
 * Needs valgrind (`apt-get install -y valgrind`) and the portable cpu library
 * (`deno task build:native` builds it). Each run takes minutes (valgrind runs
 * the stream ~50x slower); the two run side by side.
 *
 * ```sh
 * deno run -A benchmarks/instr_profile.ts --policy dtr-eq          # the evicting micro row's stream
 * deno run -A benchmarks/instr_profile.ts --policy direct --top 20 # the backend called directly
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  integerOption,
  policyOption,
  WORKLOAD_OPTIONS,
  WORKLOAD_POLICIES,
  type WorkloadPolicy,
} from "./_instr_workload.ts";

/** One symbol of a perf map (`/tmp/perf-<pid>.map`). */
export interface PerfMapEntry {
  /** First address. */
  readonly start: number;
  /** Size in bytes. */
  readonly size: number;
  /** The name V8 gave it. */
  readonly name: string;
}

/** The entries of a perf map's text (`<hex start> <hex size> <name>` lines), sorted by address. */
export function parsePerfMap(text: string): PerfMapEntry[] {
  const out: PerfMapEntry[] = [];
  for (const line of text.split("\n")) {
    const m = /^([0-9a-fA-F]+) ([0-9a-fA-F]+) (.*)$/.exec(line);
    if (m === null) continue;
    out.push({ start: parseInt(m[1]!, 16), size: parseInt(m[2]!, 16), name: m[3]! });
  }
  return out.sort((a, b) => a.start - b.start);
}

/** The entry of `map` (sorted) holding `addr`, or `undefined`. */
function lookUp(map: readonly PerfMapEntry[], addr: number): PerfMapEntry | undefined {
  let lo = 0, hi = map.length - 1, found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (map[mid]!.start <= addr) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (found < 0) return undefined;
  const e = map[found]!;
  return addr < e.start + e.size ? e : undefined;
}

/** The number of a callgrind position: `0x` hex or decimal. */
function number(s: string, line: number): number {
  const v = s.startsWith("0x") ? parseInt(s.slice(2), 16) : Number(s);
  if (!Number.isFinite(v)) throw new Error(`callgrind output line ${line}: bad number ${s}`);
  return v;
}

/** Each event's self cost per function of a callgrind output (see {@link costsByFunction}). */
export interface FunctionCosts {
  /** The events counted, in callgrind's order (`Ir`, and with `--cache-sim=yes` the misses). */
  readonly events: readonly string[];
  /** Per function, its self cost of each event, in the order of {@link events}. */
  readonly costs: Map<string, number[]>;
}

/**
 * Self costs per function of a callgrind output made with
 * `--dump-instr=yes`, every event it counts: each instruction's costs go to
 * the perf map's symbol holding its address (`root`, a `file://` prefix, is
 * cut from the names), else to `<object>:<function>` as callgrind names it
 * (`<object> (unnamed)` where the object has no symbols; JIT code outside the
 * map is `(JIT code outside the perf map)`). Inclusive costs of calls are
 * skipped: the counts are self costs.
 */
export function costsByFunction(
  callgrind: string,
  map: readonly PerfMapEntry[],
  root = "",
): FunctionCosts {
  const costs = new Map<string, number[]>();
  let events: string[] = [];
  const add = (k: string, w: readonly string[], from: number) => {
    let c = costs.get(k);
    if (c === undefined) costs.set(k, c = new Array<number>(events.length).fill(0));
    for (let i = 0; i < events.length; i++) c[i]! += Number(w[from + i] ?? 0);
  };
  const names = { ob: new Map<string, string>(), fn: new Map<string, string>() };
  // `(id) name` defines a compressed name, `(id)` refers to it, a plain name is itself.
  const name = (kind: "ob" | "fn", v: string): string => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(v);
    if (m === null) return v;
    if (m[2] !== undefined) names[kind].set(m[1]!, m[2]);
    return names[kind].get(m[1]!) ?? v;
  };
  let positions = 0;
  // `inclusive`: the line after `calls=`, the call's inclusive cost (a position, not a self cost).
  let ob = "", fn = "", last = 0, inclusive = false;
  const lines = callgrind.split("\n");
  for (let li = 0; li < lines.length; li++) {
    const line = lines[li]!;
    if (line.startsWith("positions:")) {
      const p = line.slice(10).trim().split(/\s+/);
      if (p[0] !== "instr") {
        throw new Error(
          "callgrind output has no instruction addresses: run callgrind with --dump-instr=yes",
        );
      }
      positions = p.length;
    } else if (line.startsWith("events:")) {
      events = line.slice(7).trim().split(/\s+/);
      if (!events.includes("Ir")) throw new Error("callgrind output counts no Ir (instructions)");
    } else if (line.startsWith("ob=")) ob = name("ob", line.slice(3));
    else if (line.startsWith("fn=")) fn = name("fn", line.slice(3));
    else if (line.startsWith("calls=")) inclusive = true;
    else if (/^(0x[0-9a-fA-F]+|[+-]\d+|\*)(\s|$)/.test(line)) {
      if (positions === 0 || events.length === 0) {
        throw new Error(`callgrind output line ${li + 1}: a cost before its positions and events`);
      }
      const w = line.trim().split(/\s+/);
      const p = w[0]!;
      const addr = p === "*"
        ? last
        : p[0] === "+"
        ? last + number(p.slice(1), li + 1)
        : p[0] === "-"
        ? last - number(p.slice(1), li + 1)
        : number(p, li + 1);
      last = addr;
      if (inclusive) {
        inclusive = false;
        continue;
      }
      const e = lookUp(map, addr);
      if (e !== undefined) add(root === "" ? e.name : e.name.replaceAll(root, ""), w, positions);
      else if (ob === "???") add("(JIT code outside the perf map)", w, positions);
      else {
        const lib = ob.slice(ob.lastIndexOf("/") + 1);
        add(fn.startsWith("0x") || fn === "" ? `${lib} (unnamed)` : `${lib}:${fn}`, w, positions);
      }
    }
  }
  return { events, costs };
}

/**
 * Instructions (`Ir`) per function of a callgrind output made with
 * `--dump-instr=yes` (see {@link costsByFunction}; functions that ran none
 * are left out).
 */
export function instructionsByFunction(
  callgrind: string,
  map: readonly PerfMapEntry[],
  root = "",
): Map<string, number> {
  return instructionsOf(costsByFunction(callgrind, map, root));
}

/** The instructions (`Ir`) of each function of `fc` that ran any. */
export function instructionsOf(fc: FunctionCosts): Map<string, number> {
  const ir = fc.events.indexOf("Ir");
  const out = new Map<string, number>();
  for (const [k, c] of fc.costs) if (c[ir]! !== 0) out.set(k, c[ir]!);
  return out;
}

/** A row of {@link perCall}: a function's instructions per call. */
export interface PerCallRow {
  /** The function (see {@link instructionsByFunction}). */
  readonly name: string;
  /** Instructions per call. */
  readonly perCall: number;
}

/** `(long - short) / calls` per function, largest first (functions of either run). */
export function perCall(
  short: ReadonlyMap<string, number>,
  long: ReadonlyMap<string, number>,
  calls: number,
): PerCallRow[] {
  if (!(calls > 0)) throw new RangeError(`perCall: calls must be positive, got ${calls}`);
  const rows: PerCallRow[] = [];
  for (const k of new Set([...short.keys(), ...long.keys()])) {
    rows.push({ name: k, perCall: ((long.get(k) ?? 0) - (short.get(k) ?? 0)) / calls });
  }
  return rows.sort((a, b) => b.perCall - a.perCall || (a.name < b.name ? -1 : 1));
}

const ROOT = new URL("..", import.meta.url).href;

/** The row of the Deno binary's unnamed code: V8's collector and compilers, Deno's runtime. */
const V8_INTERNALS = "deno (unnamed)";

/**
 * Runs the Deno script `workload` with `args` under valgrind's callgrind
 * (`options` added to its own: `--dump-instr=yes`, uncompressed names and
 * positions, self-modifying-code checks for JIT code; V8 `--predictable` and
 * its perf map); the per-function costs of that run. `done` is what the
 * script prints once it finished; `tool` names the caller in errors.
 */
export async function callgrindCosts(
  tool: string,
  options: readonly string[],
  workload: URL,
  args: readonly string[],
  done: string,
): Promise<FunctionCosts> {
  const dir = await Deno.makeTempDir({ prefix: "libra_callgrind_" });
  const out = `${dir}/callgrind.out`;
  const cmd = new Deno.Command("valgrind", {
    args: [
      "--tool=callgrind",
      ...options,
      "--dump-instr=yes",
      "--compress-pos=no",
      "--compress-strings=no",
      // JIT code is written and rewritten in anonymous memory.
      "--smc-check=all-non-file",
      `--callgrind-out-file=${out}`,
      Deno.execPath(),
      "run",
      "-A",
      "--v8-flags=--predictable,--perf-basic-prof",
      workload.pathname,
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  });
  let child: Deno.ChildProcess;
  try {
    child = cmd.spawn();
  } catch (e) {
    await Deno.remove(dir, { recursive: true });
    if (e instanceof Deno.errors.NotFound) {
      throw new Error(`${tool}: valgrind not found (apt-get install -y valgrind)`);
    }
    throw e;
  }
  const map = `/tmp/perf-${child.pid}.map`;
  try {
    const r = await child.output();
    const text = new TextDecoder();
    const stdout = text.decode(r.stdout), stderr = text.decode(r.stderr);
    if (!r.success || !stdout.includes(done)) {
      const why = stderr.includes("unhandled instruction bytes")
        ? " (valgrind met an instruction it cannot decode, AVX-512 likely: the workload loads " +
          "the portable cpu library, built without machine flags, so the instruction is in " +
          "another library or the Deno binary)"
        : "";
      throw new Error(`${tool}: the workload under valgrind failed${why}:\n${stderr.slice(-2000)}`);
    }
    return costsByFunction(
      await Deno.readTextFile(out),
      parsePerfMap(await Deno.readTextFile(map)),
      ROOT,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(map).catch(() => {});
  }
}

/** Runs the workload under callgrind; the per-function instructions of that run. */
async function profiled(
  policy: WorkloadPolicy,
  live: number,
  warmup: number,
  calls: number,
): Promise<Map<string, number>> {
  return instructionsOf(
    await callgrindCosts(
      "instr_profile",
      [],
      new URL("./_instr_workload.ts", import.meta.url),
      [`--policy=${policy}`, `--live=${live}`, `--warmup=${warmup}`, `--calls=${calls}`],
      `calls ${calls}`,
    ),
  );
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      ...WORKLOAD_OPTIONS,
      top: { type: "string", default: "40" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(
      `usage: deno run -A benchmarks/instr_profile.ts [--policy ${
        WORKLOAD_POLICIES.join("|")
      }] [--live 10000] [--warmup 100000] [--calls 20000] [--top 40] [--json]`,
    );
    Deno.exit(0);
  }
  const policy = policyOption("instr_profile", values.policy);
  const positive = (name: string, v: string) => integerOption("instr_profile", name, v, 1);
  const live = positive("live", values.live), warmup = positive("warmup", values.warmup);
  const calls = positive("calls", values.calls), top = positive("top", values.top);
  // The short run's calls: past the warm-up as well, so that both runs' warm-ups compiled alike.
  const base = Math.max(1000, Math.floor(calls / 10));
  console.error(
    `instr_profile: ${policy}, ${live} live: two runs under callgrind (${warmup} warm-up calls, ` +
      `then ${base} and ${base + calls}); minutes each`,
  );
  const [short, long] = await Promise.all([
    profiled(policy, live, warmup, base),
    profiled(policy, live, warmup, base + calls),
  ]);
  const rows = perCall(short, long, calls);
  const total = rows.reduce((s, r) => s + r.perCall, 0);
  const internal = rows.find((r) => r.name === V8_INTERNALS)?.perCall ?? 0;
  // Hot JavaScript below the optimizing tier: the warm-up was too short for the comparison to
  // be the steady state's (a function can reach it late after a deoptimization).
  const unoptimized = rows.filter((r) => /^JS:[+^~]/.test(r.name) && r.perCall >= 100);
  if (values.json) {
    console.log(
      JSON.stringify({ policy, live, warmup, calls, total, internal, rows }, null, 1),
    );
  } else {
    console.log(
      `instructions per call, ${policy}, ${live} live (${calls} calls): ${total.toFixed(0)}, ` +
        `of which JavaScript and native code ${(total - internal).toFixed(0)} (repeatable), ` +
        `V8's and Deno's own ${internal.toFixed(0)} (moves with where collections fall)`,
    );
    for (const r of rows.slice(0, top)) {
      console.log(`${r.perCall.toFixed(0).padStart(8)}  ${r.name}`);
    }
  }
  if (unoptimized.length > 0) {
    console.error(
      `instr_profile: hot functions ran below the optimizing tier (${
        unoptimized.map((r) => r.name.split(" ")[0]).join(", ")
      }): a longer --warmup compares steady states`,
    );
  }
}
