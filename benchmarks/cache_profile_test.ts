import assert from "node:assert/strict";
import { byGroup, codeGroup, perStep } from "./cache_profile.ts";
import { cacheWorkload, modelOption, targetOption } from "./_cache_workload.ts";
import type { Backend } from "@libra/tensor/backend";
import { withoutKernels } from "../packages/train/_step_parts.ts";

const EVENTS = ["Ir", "Dr", "ILmr", "DLmr", "DLmw"];

Deno.test("perStep: the difference of two runs over the steps between them, misses first", () => {
  const short = new Map([["JS:*'a packages/runtime/x.ts:1:1", [100, 9, 10, 4, 2]], ["b", [
    5,
    0,
    0,
    0,
    0,
  ]]]);
  const long = new Map([
    ["JS:*'a packages/runtime/x.ts:1:1", [400, 9, 40, 10, 8]],
    ["b", [5, 0, 0, 0, 0]],
    ["JS:*'c packages/tensor/t.ts:2:2", [60, 0, 30, 30, 0]],
  ]);
  assert.deepEqual(perStep(EVENTS, short, long, 3), [
    // c: (30 + 30) / 3 = 20 misses a step; a: (30 + 6 + 6) / 3 = 14.
    { name: "JS:*'c packages/tensor/t.ts:2:2", ir: 20, instrMisses: 10, dataMisses: 10 },
    { name: "JS:*'a packages/runtime/x.ts:1:1", ir: 100, instrMisses: 10, dataMisses: 4 },
    { name: "b", ir: 0, instrMisses: 0, dataMisses: 0 },
  ]);
  assert.throws(() => perStep(["Ir", "Dr"], short, long, 3), /ILmr.*--cache-sim=yes/);
  assert.throws(() => perStep(EVENTS, short, long, 0), /steps must be positive/);
});

Deno.test("codeGroup and byGroup: rows summed by where their code lives", () => {
  assert.equal(codeGroup("JS:*'run packages/runtime/_remat.ts:153:13"), "runtime packages");
  assert.equal(codeGroup("JS:+'addCall packages/lineage/graph.ts:52:14"), "runtime packages");
  assert.equal(codeGroup("JS:*'mm packages/tensor/ops/matmul.ts:11:82"), "tensor layer");
  assert.equal(codeGroup("JS:+'run packages/native/native_backend.ts:296:6"), "native library");
  assert.equal(codeGroup("libra_cpu_portable.so:k_relu"), "native library");
  assert.equal(codeGroup("Builtin:DefineNamedOwnIC_NoFeedback"), "V8 builtins");
  assert.equal(codeGroup("deno (unnamed)"), "V8 and Deno");
  assert.equal(
    codeGroup("libc.so.6:__memcpy_avx_unaligned_erms"),
    "libc (the stand-in kernels' copies)",
  );
  const rows = [
    { name: "JS:*'a packages/runtime/a.ts:1:1", ir: 10, instrMisses: 3, dataMisses: 1 },
    { name: "JS:*'b packages/evict/b.ts:1:1", ir: 5, instrMisses: 2, dataMisses: 2 },
    { name: "JS:*'c packages/nn/c.ts:1:1", ir: 1, instrMisses: 9, dataMisses: 0 },
  ];
  assert.deepEqual(byGroup(rows), [
    { name: "tensor layer", ir: 1, instrMisses: 9, dataMisses: 0 },
    { name: "runtime packages", ir: 15, instrMisses: 5, dataMisses: 3 },
  ]);
});

Deno.test("_cache_workload: bad options name the option and the choices", () => {
  assert.throws(() => targetOption("t", "gpu"), /--target must be one of runtime, direct, got gpu/);
  assert.throws(() => modelOption("t", "bert"), /--model must be one of .*gpt.*, got bert/);
  assert.equal(targetOption("t", "direct"), "direct");
  assert.equal(modelOption("t", "gpt"), "gpt");
});

let native: Backend | null = null;
try {
  const { cpuBackend } = await import("@libra/native");
  // The library's thread count as it is: it is process-wide, and later test modules (the lab
  // executor's, which compares its losses with a `libra run` subprocess's) run with the default.
  native = cpuBackend();
} catch (e) {
  console.warn(`cache_profile_test: no native cpu backend (${(e as Error).message})`);
}

Deno.test({
  name: "_cache_workload: a copy for every kernel once streaming, as many on a runtime as direct",
  ignore: native === null,
  fn() {
    const copies: Record<string, number> = {};
    for (const target of ["direct", "runtime"] as const) {
      // The backend with its copies counted (the stand-in kernel runs `copy` on it).
      let n = 0;
      const count: Backend["run"] = (kernel, inputs, outputs, params) => {
        if (kernel === "copy") n++;
        native!.run(kernel, inputs, outputs, params);
      };
      const inner = withoutKernels(native!, count as () => void);
      const w = cacheWorkload(inner, "mlp", target, 1);
      w.step();
      assert.equal(n, 0, `${target}: no copy before streaming`);
      w.streaming();
      w.step();
      copies[target] = n;
    }
    assert.ok(copies.direct! > 0);
    assert.equal(copies.runtime, copies.direct);
  },
});
