/**
 * Runs the side-by-side micro-benchmarks of `micro.ts` for `main.ts`.
 *
 * @module
 */

import type { BenchOptions } from "./options.ts";
import type { Engine } from "./engine.ts";
import type { MicroJson } from "./schema.ts";
import { dispatchBench, evictingDispatchBench, findTorchPython, sgemmBench } from "./micro.ts";
import { oneLine } from "./runner.ts";

/** Runs every micro-benchmark; a benchmark that throws is reported as skipped with the error. */
export async function runMicro(options: BenchOptions, engine: Engine): Promise<MicroJson[]> {
  const deps = engine.microDeps({
    seed: options.seed,
    steps: options.steps,
    device: options.device,
    costModel: options.costModel,
    timeLimitMs: options.timeLimitMs,
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
  guard("runtime dispatch, evicting", "ns/call", () => evictingDispatchBench(deps, options.quick));
  // The same stream with a choice that costs nothing: the runtime's share of the row above.
  guard(
    "runtime dispatch, evicting every call",
    "ns/call",
    () => evictingDispatchBench(deps, options.quick, 10_000, "oldest-first"),
  );
  guard("sgemm", "GFLOP/s", () => sgemmBench(deps, options.quick));
  out.push(...await vsPytorch(options));
  return out;
}

/** One row of `vs_pytorch.ts --json` (the fields used here). */
interface VsRow {
  model: string;
  preset: string;
  input: string;
  ours: { wallMs: number };
  torch: { wallMs: number };
  wallRatio: number;
  wallRatioInterval: [number, number];
}

/**
 * The training-step comparison with PyTorch: runs `benchmarks/vs_pytorch.ts`
 * (written with the nn package; same model, batch, thread count and
 * optimizer on both sides) for the suite's models and first preset, and turns
 * its `--json` rows into micro-benchmark entries.
 */
export async function vsPytorch(options: BenchOptions): Promise<MicroJson[]> {
  const name = "training step vs PyTorch";
  const skip = (note: string): MicroJson[] => [{
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
  if (options.device !== "cpu") {
    return skip(`compares cpu step times; this run uses ${options.device}`);
  }
  const py = await findTorchPython();
  if (typeof py !== "string") return skip(py.reason);
  const script = new URL("./vs_pytorch.ts", import.meta.url);
  try {
    Deno.statSync(script);
  } catch {
    return skip("benchmarks/vs_pytorch.ts is missing");
  }
  // --quick compares one model: each comparison starts a Python with PyTorch (seconds).
  const all = options.models.length > 0 ? options.models : ["mlp"];
  const models = options.quick ? all.slice(-1) : all;
  const preset = options.presets[0] ?? "tiny";
  const threads = navigator.hardwareConcurrency;
  const json = await Deno.makeTempFile({ prefix: "libra_vs_pytorch_", suffix: ".json" });
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        script.pathname,
        "--models",
        models.join(","),
        "--preset",
        preset,
        "--rounds",
        options.quick ? "3" : "5",
        "--per-round",
        "1",
        "--warmup",
        options.quick ? "1" : "2",
        "--threads",
        String(threads),
        "--python",
        py,
        "--json",
        json,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const skipped = text.match(/vs_pytorch: skipped: (.*)/);
    if (skipped) return skip(skipped[1]!);
    if (!out.success) {
      const err = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" | ");
      return skip(`vs_pytorch.ts failed (exit ${out.code}): ${err}`);
    }
    const r = JSON.parse(await Deno.readTextFile(json)) as {
      torch: string;
      threads: number;
      rows: VsRow[];
    };
    return r.rows.map((row) => ({
      name: `train step ${row.model}/${row.preset} (input ${row.input})`,
      subject: "libra cpu",
      reference: `PyTorch ${r.torch}`,
      unit: "ms/step",
      subjectValue: row.ours.wallMs,
      referenceValue: row.torch.wallMs,
      ratio: row.wallRatio,
      note: `median step, AdamW, ${r.threads} thread(s), interleaved; 95% interval of the ratio ${
        row.wallRatioInterval.map((x) => x.toFixed(2)).join("-")
      }`,
      skipped: false,
    }));
  } finally {
    await Deno.remove(json).catch(() => {});
  }
}
