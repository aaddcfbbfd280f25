/**
 * Side-by-side micro-benchmarks, each printed as a ratio from one run so that
 * machine noise affects both sides alike (the two sides are interleaved):
 * - runtime dispatch against calling the backend directly, at an unlimited
 *   budget: the runtime's bookkeeping cost per kernel call; and with 10k
 *   values live under a budget they exceed by a tenth, so that the runtime
 *   evicts on many calls;
 * - sgemm through the `@libra/native` binding against OpenBLAS's `cblas_sgemm`
 *   called directly through a minimal FFI symbol;
 * - a training step against the same step in PyTorch (`benchmarks/vs_pytorch.ts`).
 *
 * @module
 */

import type { EvictingChoice, MicroDeps } from "./engine.ts";
import type { MicroJson } from "./schema.ts";
import { spread } from "./stats.ts";
import { dispatchStream, OLDEST_FIRST, STREAM_VALUE_BYTES } from "@libra/runtime/dispatch-stream";
import type { RuntimeOptions } from "@libra/runtime";

function skipped(
  name: string,
  subject: string,
  reference: string,
  unit: string,
  why: string,
): MicroJson {
  return {
    name,
    subject,
    reference,
    unit,
    subjectValue: null,
    referenceValue: null,
    ratio: null,
    note: why,
    skipped: true,
  };
}

/** Median time per iteration in ns of `fn`, over `rounds` rounds of `iters` iterations. */
function timePerIter(fn: () => void, iters: number): number {
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) fn();
  return ((performance.now() - t0) * 1e6) / iters;
}

/**
 * Interleaves two timed loops for `rounds` rounds and returns the best (lowest)
 * ns per iteration of each, as `packages/native/native_bench.ts` does: load
 * from other processes only adds time, and interleaving exposes both sides to
 * it alike. The first round is a warm-up (of `warmupIters` iterations each,
 * default `iters`) and is discarded.
 */
export function sideBySide(
  a: () => void,
  b: () => void,
  iters: number,
  rounds: number,
  warmupIters = iters,
): [number, number] {
  const ta: number[] = [], tb: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const n = r === 0 ? warmupIters : iters;
    const x = timePerIter(a, n);
    const y = timePerIter(b, n);
    if (r > 0) {
      ta.push(x);
      tb.push(y);
    }
  }
  return [spread(ta).min, spread(tb).min];
}

/** Runtime dispatch against the backend called directly, on a 16-element relu. */
export function dispatchBench(deps: MicroDeps, quick: boolean): MicroJson {
  const name = "runtime dispatch (relu, 16 floats)";
  const subject = "Runtime at unlimited budget";
  const unit = "ns/call";
  const backend = deps.backend();
  if (typeof backend === "string") return skipped(name, subject, "backend direct", unit, backend);
  const runtime = deps.unlimitedRuntime(backend);
  if (typeof runtime === "string") {
    return skipped(name, subject, `${backend.name} direct`, unit, runtime);
  }
  const n = 16;
  const bx = backend.alloc(4 * n), by = backend.alloc(4 * n);
  const rx = runtime.alloc(4 * n), ry = runtime.alloc(4 * n);
  const zeros = new Float32Array(n);
  backend.write(bx, zeros);
  runtime.write(rx, zeros);
  const iters = quick ? 2000 : 20000;
  const [direct, viaRuntime] = sideBySide(
    () => backend.run("relu", [bx], [by], [n]),
    () => runtime.run("relu", [rx], [ry], [n]),
    iters,
    quick ? 5 : 9,
    // Both paths reach the optimizing compiler only after tens of thousands of calls. A fresh
    // process's quick run read 2436 against 691 ns per call after 2000 calls of warm-up,
    // 925-1833 against 296-650 after 100000 (a process warm from earlier runs: 651-799
    // against 139-142).
    100_000,
  );
  backend.sync();
  runtime.sync();
  for (const b of [rx, ry]) runtime.free(b);
  for (const b of [bx, by]) backend.free(b);
  return {
    name,
    subject: `${runtime.name}`,
    reference: `${backend.name} direct`,
    unit,
    subjectValue: viaRuntime,
    referenceValue: direct,
    ratio: viaRuntime / direct,
    note: `bookkeeping ${(viaRuntime - direct).toFixed(0)} ns/call`,
    skipped: false,
  };
}

/** How each {@link EvictingChoice} chooses, as runtime options and in a row's words. */
const EVICTING: Record<
  EvictingChoice,
  { options: Pick<RuntimeOptions, "policy" | "search">; name: string; policy: string }
> = {
  "dtr-eq": {
    options: { search: { mode: "sqrt" } },
    name: "evicting",
    policy: "dtr-eq, sqrt sampling",
  },
  "oldest-first": {
    options: { policy: OLDEST_FIRST },
    name: "evicting every call, oldest first",
    policy: "oldest first",
  },
};

/**
 * The options that make a runtime choose its victims as `choice` says, for an
 * {@link MicroDeps.evictingRuntime}: `dtr-eq` with sqrt sampling, or
 * `OLDEST_FIRST`.
 */
export function evictingRuntimeOptions(
  choice: EvictingChoice,
): Pick<RuntimeOptions, "policy" | "search"> {
  return EVICTING[choice].options;
}

/**
 * The runtime's cost per call while it evicts, with 10k values live (`live`),
 * against the backend called directly: the same stream
 * (`@libra/runtime/dispatch-stream`) on both sides, 90% of the values fitting
 * the runtime's budget. Each call needs a value's room, which the value it
 * frees gives back only when the policy had left that one resident. With
 * `choice` `"dtr-eq"` (the default), `dtr-eq` chooses from a sample of ~100
 * (sqrt) and evicts on ~43% of the calls; with `"oldest-first"` the oldest
 * evictable value goes, a choice that costs nothing, on every call: what the
 * runtime itself adds around a policy (eviction, lineage, pool, collection).
 */
export function evictingDispatchBench(
  deps: MicroDeps,
  quick: boolean,
  live = 10_000,
  choice: EvictingChoice = "dtr-eq",
): MicroJson {
  const how = EVICTING[choice];
  const name = `runtime dispatch, ${how.name} (${live} live, relu of 16 floats)`;
  const subject = `Runtime at a 90% budget (${how.policy})`;
  const unit = "ns/call";
  const backend = deps.backend();
  if (typeof backend === "string") return skipped(name, subject, "backend direct", unit, backend);
  const evicting = deps.evictingRuntime(
    backend,
    Math.floor(0.9 * live * STREAM_VALUE_BYTES),
    choice,
  );
  if (typeof evicting === "string") {
    return skipped(name, subject, `${backend.name} direct`, unit, evicting);
  }
  const runtime = evicting.backend;
  const direct = dispatchStream(backend, live), viaRuntime = dispatchStream(runtime, live);
  const ns0 = evicting.searchNs(), calls0 = evicting.calls();
  // The runtime's evicting paths reach the optimizing compiler after tens of thousands of
  // calls, as the unlimited one does (see `dispatchBench`).
  const [d, r] = sideBySide(direct, viaRuntime, quick ? 10_000 : 50_000, quick ? 5 : 9, 50_000);
  const search = (evicting.searchNs() - ns0) / Math.max(1, evicting.calls() - calls0);
  backend.sync();
  runtime.sync();
  return {
    name,
    subject: `${runtime.name}, 90% budget (${how.policy})`,
    reference: `${backend.name} direct`,
    unit,
    subjectValue: r,
    referenceValue: d,
    ratio: r / d,
    // The searches' share is their counted time over every call of the run (the subject is
    // the fastest round's): what of the added time is the policy's, the rest the runtime's.
    note: choice === "dtr-eq"
      ? `added ${(r - d).toFixed(0)} ns/call (the target: 2000), of which dtr-eq's searches ~${
        search.toFixed(0)
      }`
      : `added ${
        (r - d).toFixed(0)
      } ns/call evicting on every call by a choice costing nothing: the runtime's own share`,
    skipped: false,
  };
}

const CBLAS = {
  // void cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
  cblas_sgemm: {
    parameters: [
      "i32",
      "i32",
      "i32",
      "i32",
      "i32",
      "i32",
      "f32",
      "buffer",
      "i32",
      "buffer",
      "i32",
      "f32",
      "buffer",
      "i32",
    ],
    result: "void",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** Opens OpenBLAS for a direct `cblas_sgemm`, or says why it cannot. */
export function openBlas(): Deno.DynamicLibrary<typeof CBLAS> | string {
  const names = [
    Deno.env.get("LIBRA_OPENBLAS"),
    "libopenblas.so.0",
    "libopenblas.so",
    "libopenblas.dylib",
  ].filter(
    (x): x is string => !!x,
  );
  const errors: string[] = [];
  for (const n of names) {
    try {
      return Deno.dlopen(n, CBLAS);
    } catch (e) {
      errors.push(`${n}: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  return `OpenBLAS not found (install libopenblas-dev or set LIBRA_OPENBLAS): ${errors.join("; ")}`;
}

/** sgemm of n x n matrices through the binding against OpenBLAS called directly. */
export function sgemmBench(deps: MicroDeps, quick: boolean): MicroJson {
  const n = quick ? 256 : 512;
  const name = `sgemm ${n}x${n}x${n}`;
  const unit = "GFLOP/s";
  const blas = openBlas();
  if (typeof blas === "string") return skipped(name, "binding", "OpenBLAS direct", unit, blas);
  try {
    const backend = deps.backend();
    if (typeof backend === "string") {
      return skipped(name, "binding", "OpenBLAS direct", unit, backend);
    }
    if (backend.device !== "cpu") {
      return skipped(
        name,
        backend.name,
        "OpenBLAS direct",
        unit,
        `sgemm against OpenBLAS compares cpu backends; this run uses ${backend.device}`,
      );
    }
    const a = new Float32Array(n * n).map((_, i) => ((i * 7919) % 1000) / 1000 - 0.5);
    const b = new Float32Array(n * n).map((_, i) => ((i * 104729) % 1000) / 1000 - 0.5);
    const c = new Float32Array(n * n);
    const da = backend.alloc(4 * n * n),
      db = backend.alloc(4 * n * n),
      dc = backend.alloc(4 * n * n);
    backend.write(da, a);
    backend.write(db, b);
    const params = [1, n, n, n, 0, 0, 0, 0];
    const [binding, direct] = sideBySide(
      () => {
        backend.run("matmul", [da, db], [dc], params);
        backend.sync();
      },
      () => blas.symbols.cblas_sgemm(101, 111, 111, n, n, n, 1, a, n, b, n, 0, c, n),
      quick ? 3 : 10,
      quick ? 5 : 9,
    );
    // Both sides must compute the same product, or the comparison means nothing.
    const got = new Float32Array(backend.read(dc).buffer.slice(0));
    let maxErr = 0;
    for (let i = 0; i < n * n; i += 97) maxErr = Math.max(maxErr, Math.abs(got[i]! - c[i]!));
    for (const x of [da, db, dc]) backend.free(x);
    const flops = 2 * n * n * n;
    const gBinding = flops / binding, gDirect = flops / direct; // flops per ns = GFLOP/s
    return {
      name,
      subject: `${backend.name} binding`,
      reference: "cblas_sgemm direct",
      unit,
      subjectValue: gBinding,
      referenceValue: gDirect,
      ratio: gBinding / gDirect,
      note: `${(backend as { buildInfo?: string }).buildInfo ?? backend.name}; binding costs ${
        ((binding / direct - 1) * 100).toFixed(1)
      }% time (max |diff| ${maxErr.toExponential(1)})`,
      skipped: false,
    };
  } finally {
    blas.close();
  }
}

/** Where Debian's python3 with python3-torch is, or why there is none. */
export async function findTorchPython(): Promise<string | { reason: string }> {
  for (const py of [Deno.env.get("LIBRA_PYTHON"), "/usr/bin/python3", "python3"]) {
    if (!py) continue;
    try {
      const r = await new Deno.Command(py, {
        args: ["-c", "import torch; print(torch.__version__)"],
        stdout: "piped",
        stderr: "null",
      }).output();
      if (r.success) return py;
    } catch {
      // Not installed at that path.
    }
  }
  return { reason: "PyTorch not installed (apt-get install python3-torch, or set LIBRA_PYTHON)" };
}
