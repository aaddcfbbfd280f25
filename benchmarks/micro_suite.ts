/**
 * Runs the side-by-side micro-benchmarks of `micro.ts` for `main.ts`.
 *
 * @module
 */

import type { BenchOptions } from "./options.ts";
import type { Engine } from "./engine.ts";
import type { MicroJson } from "./schema.ts";
import { dispatchBench, findTorchPython, sgemmBench } from "./micro.ts";
import { oneLine } from "./runner.ts";

/** Runs every micro-benchmark; a benchmark that throws is reported as skipped with the error. */
export async function runMicro(options: BenchOptions, engine: Engine): Promise<MicroJson[]> {
  const deps = engine.microDeps({
    seed: options.seed,
    steps: options.steps,
    device: options.device,
    costModel: options.costModel,
    timeline: false,
  });
  const out: MicroJson[] = [];
  const guard = (name: string, unit: string, f: () => MicroJson) => {
    try {
      out.push(f());
    } catch (e) {
      out.push({
        name,
        subject: "",
        reference: "",
        unit,
        subjectValue: null,
        referenceValue: null,
        ratio: null,
        note: `failed: ${oneLine(e)}`,
        skipped: true,
      });
    }
  };
  guard("runtime dispatch", "ns/call", () => dispatchBench(deps, options.quick));
  guard("sgemm", "GFLOP/s", () => sgemmBench(deps, options.quick));
  out.push(...await vsPytorch(options));
  return out;
}

/** The training-step comparison with PyTorch, through `benchmarks/vs_pytorch.ts` (written by the nn package). */
export async function vsPytorch(options: BenchOptions): Promise<MicroJson[]> {
  const name = "training step vs PyTorch";
  const skip = (
    note: string,
  ): MicroJson[] => [{
    name,
    subject: "libra",
    reference: "PyTorch",
    unit: "ms/step",
    subjectValue: null,
    referenceValue: null,
    ratio: null,
    note,
    skipped: true,
  }];
  const py = await findTorchPython();
  if (typeof py !== "string") return skip(py.reason);
  const path = new URL("./vs_pytorch.ts", import.meta.url);
  try {
    Deno.statSync(path);
  } catch {
    return skip("benchmarks/vs_pytorch.ts is not there yet (the nn package provides it)");
  }
  void options;
  return skip("benchmarks/vs_pytorch.ts has no interface the suite knows yet");
}
