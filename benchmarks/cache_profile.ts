/**
 * Cache misses per training step, per function, with the caches as kernels
 * leave them: what the runtime's work costs in situ, where it is memory
 * latency (`libra run` at ratio 1.0 measures it; a timing of it moves with
 * the machine's load by more than the changes worth comparing).
 *
 * The workload (`benchmarks/_cache_workload.ts`: steps of a small preset, each
 * kernel replaced by a native copy larger than the simulated last-level
 * cache) runs twice under valgrind's callgrind with `--cache-sim=yes`, the
 * same warm-up, and two numbers of measured steps; the difference per
 * function over the difference of steps is the steady state's cost per step,
 * start-up and warm-up cancelled. Events: instructions (`Ir`), and misses of
 * the simulated last-level cache on instruction fetches (`ILmr`) and on data
 * reads and writes (`DLmr`, `DLmw`), each a trip to memory. JIT code is named
 * from V8's perf map as in `instr_profile.ts`. Rows are summed by where the
 * code lives: the runtime's packages (`runtime`, `lineage`, `evict`, `cost`,
 * `util`), the tensor layer (`tensor`, `nn`, `train`), the native library,
 * V8's builtins, V8's and Deno's own code (which moves with where collections
 * and compilations fall).
 *
 * Needs valgrind (`apt-get install -y valgrind`) and the portable cpu library
 * (`deno task build:native`). The two runs take ~3 minutes side by side.
 *
 * ```sh
 * deno run -A benchmarks/cache_profile.ts                    # gpt small under a runtime at ratio 1.0
 * deno run -A benchmarks/cache_profile.ts --target direct    # the same steps on the backend
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { callgrindCosts } from "./instr_profile.ts";
import {
  CACHE_TARGETS,
  CACHE_WORKLOAD_OPTIONS,
  modelOption,
  targetOption,
} from "./_cache_workload.ts";
import { integerOption } from "./_instr_workload.ts";

/** The events a row reports, per step. */
export interface StepCosts {
  /** Instructions. */
  ir: number;
  /** Last-level misses on instruction fetches. */
  instrMisses: number;
  /** Last-level misses on data reads and writes. */
  dataMisses: number;
}

/** A function's (or a group's) costs per step. */
export interface CacheRow extends StepCosts {
  readonly name: string;
}

/** Where a function's code lives (see the module note). */
export function codeGroup(name: string): string {
  if (/packages\/(runtime|lineage|evict|cost|util)\//.test(name)) return "runtime packages";
  if (/packages\/(tensor|nn|train)\//.test(name)) return "tensor layer";
  if (/packages\/native\//.test(name) || /libra_cpu/.test(name)) return "native library";
  if (name.startsWith("Builtin:") || name.startsWith("Bytecode")) return "V8 builtins";
  if (name === "deno (unnamed)") return "V8 and Deno";
  if (name.startsWith("libc.so")) return "libc (the stand-in kernels' copies)";
  return "other";
}

/**
 * Per function, `(long - short) / steps` of each reported event, from two
 * runs' callgrind costs (`events` names their columns); largest trips to
 * memory first.
 */
export function perStep(
  events: readonly string[],
  short: ReadonlyMap<string, readonly number[]>,
  long: ReadonlyMap<string, readonly number[]>,
  steps: number,
): CacheRow[] {
  if (!(steps > 0)) throw new RangeError(`perStep: steps must be positive, got ${steps}`);
  const at = (e: string) => {
    const i = events.indexOf(e);
    if (i < 0) {
      throw new Error(`perStep: the callgrind output counts no ${e} (run with --cache-sim=yes)`);
    }
    return i;
  };
  const ir = at("Ir"), ilmr = at("ILmr"), dlmr = at("DLmr"), dlmw = at("DLmw");
  const rows: CacheRow[] = [];
  for (const k of new Set([...short.keys(), ...long.keys()])) {
    const a = short.get(k), b = long.get(k);
    const d = (i: number) => ((b?.[i] ?? 0) - (a?.[i] ?? 0)) / steps;
    rows.push({ name: k, ir: d(ir), instrMisses: d(ilmr), dataMisses: d(dlmr) + d(dlmw) });
  }
  const misses = (r: CacheRow) => r.instrMisses + r.dataMisses;
  return rows.sort((x, y) => misses(y) - misses(x) || (x.name < y.name ? -1 : 1));
}

/** `rows` summed by {@link codeGroup}, most trips to memory first. */
export function byGroup(rows: readonly CacheRow[]): CacheRow[] {
  const sums = new Map<string, StepCosts>();
  for (const r of rows) {
    const g = codeGroup(r.name);
    const s = sums.get(g) ?? { ir: 0, instrMisses: 0, dataMisses: 0 };
    s.ir += r.ir;
    s.instrMisses += r.instrMisses;
    s.dataMisses += r.dataMisses;
    sums.set(g, s);
  }
  return [...sums].map(([name, s]) => ({ name, ...s }))
    .sort((x, y) => y.instrMisses + y.dataMisses - (x.instrMisses + x.dataMisses));
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      ...CACHE_WORKLOAD_OPTIONS,
      "ll-mb": { type: "string", default: "4" },
      top: { type: "string", default: "30" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(
      `usage: deno run -A benchmarks/cache_profile.ts [--model gpt] [--target ${
        CACHE_TARGETS.join("|")
      }] [--warmup 600] [--steps 8] [--stream-mb 8] [--ll-mb 4] [--top 30] [--json]`,
    );
    Deno.exit(0);
  }
  const positive = (name: string, v: string) => integerOption("cache_profile", name, v, 1);
  const model = modelOption("cache_profile", values.model);
  const target = targetOption("cache_profile", values.target);
  const warmup = positive("warmup", values.warmup), steps = positive("steps", values.steps);
  const streamMb = positive("stream-mb", values["stream-mb"]),
    llMb = positive("ll-mb", values["ll-mb"]);
  const top = positive("top", values.top);
  if (streamMb <= llMb) {
    throw new RangeError(
      `cache_profile: --stream-mb (${streamMb}) must exceed --ll-mb (${llMb}): each kernel's copy ` +
        "must pass the simulated last-level cache",
    );
  }
  const args = [
    `--model=${model}`,
    `--target=${target}`,
    `--warmup=${warmup}`,
    `--stream-mb=${streamMb}`,
  ];
  console.error(
    `cache_profile: ${model} small, ${target}: two runs under callgrind's cache simulation ` +
      `(last level ${llMb} MB; ${warmup} warm-up steps, then 2 and ${2 + steps} steps with a ` +
      `${streamMb} MB copy for each kernel); minutes each`,
  );
  const ll = llMb * 2 ** 20;
  const profiled = (n: number) =>
    callgrindCosts(
      "cache_profile",
      ["--cache-sim=yes", `--LL=${ll},16,64`],
      new URL("./_cache_workload.ts", import.meta.url),
      [...args, `--steps=${n}`],
      `steps ${n}`,
    );
  const [short, long] = await Promise.all([profiled(2), profiled(2 + steps)]);
  const rows = perStep(long.events, short.costs, long.costs, steps);
  const groups = byGroup(rows);
  if (values.json) {
    console.log(JSON.stringify({ model, target, warmup, steps, streamMb, llMb, groups, rows }));
  } else {
    const f = (v: number) => v.toFixed(0).padStart(10);
    console.log(
      `per step, ${model} small, ${target} (${steps} steps): instructions, last-level misses ` +
        "on instruction fetches, on data",
    );
    for (const g of groups) {
      console.log(`${f(g.ir)}${f(g.instrMisses)}${f(g.dataMisses)}  ${g.name}`);
    }
    console.log("functions, most trips to memory first:");
    for (const r of rows.slice(0, top)) {
      console.log(`${f(r.ir)}${f(r.instrMisses)}${f(r.dataMisses)}  ${r.name}`);
    }
  }
  // ~100 instructions a kernel call or more (gpt small makes 213 a step).
  const unoptimized = rows.filter((r) => /^JS:[+^~]/.test(r.name) && r.ir >= 20_000);
  if (unoptimized.length > 0) {
    console.error(
      `cache_profile: hot functions ran below the optimizing tier (${
        unoptimized.map((r) => r.name.split(" ")[0]).join(", ")
      }): a longer --warmup compares steady states`,
    );
  }
}
