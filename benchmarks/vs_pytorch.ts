/**
 * Step time of our stack against PyTorch, side by side: the same model
 * (architectures mirrored in scripts/make_torch_fixtures.py), the same batch
 * geometry and the same CPU thread count, AdamW, one training step
 * (forward, cross-entropy, backward, update) timed after warm-up; prints the
 * median step times and their ratio per model.
 *
 * ```sh
 * deno run -A benchmarks/vs_pytorch.ts --preset tiny --threads 2
 * deno run -A benchmarks/vs_pytorch.ts --models gpt,resnet --preset small --steps 3
 * ```
 *
 * Skips (exit 0, with a message) when no Python with PyTorch is found
 * (`--python`, `$PYTHON`, `/usr/bin/python3`, `python3` are tried) or when the
 * native library is not built.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { manualSeed } from "@libra/tensor";
import { median } from "@libra/util/stats";
import {
  AdamW,
  createData,
  createModel,
  getPreset,
  MODEL_NAMES,
  type ModelName,
  trainStep,
} from "@libra/nn";

const { values: opts } = parseArgs({
  options: {
    models: { type: "string", default: MODEL_NAMES.join(",") },
    preset: { type: "string", default: "tiny" },
    steps: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    threads: { type: "string", default: "2" },
    python: { type: "string" },
    json: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (opts.help) {
  console.log(
    "usage: deno run -A benchmarks/vs_pytorch.ts [--models mlp,resnet,gpt,unet,lstm] [--preset tiny|small|...] [--steps 5] [--warmup 2] [--threads 2] [--python PATH] [--json OUT]",
  );
  Deno.exit(0);
}

const steps = Number(opts.steps), warmup = Number(opts.warmup), threads = Number(opts.threads);
for (const [k, v] of [["steps", steps], ["warmup", warmup], ["threads", threads]] as const) {
  if (!Number.isInteger(v) || v < (k === "warmup" ? 0 : 1)) {
    console.error(`vs_pytorch: --${k} must be a positive integer, got ${v}`);
    Deno.exit(2);
  }
}
const models = opts.models.split(",").map((s) => s.trim()) as ModelName[];
for (const m of models) {
  if (!MODEL_NAMES.includes(m)) {
    console.error(`vs_pytorch: unknown model "${m}"; available: ${MODEL_NAMES.join(", ")}`);
    Deno.exit(2);
  }
}

const SCRIPTS = new URL("../scripts/", import.meta.url).pathname;

/** The PyTorch side: reads a JSON job on stdin, prints the step times as JSON. */
const TORCH_STEP = `
import json, sys, time
sys.path.insert(0, ${JSON.stringify(SCRIPTS)})
import torch
import torch.nn.functional as F
import make_torch_fixtures as M
job = json.load(sys.stdin)
torch.use_deterministic_algorithms(False)
torch.set_num_threads(job["threads"])
torch.manual_seed(0)
cls = {"mlp": M.MLP, "resnet": M.ResNet, "gpt": M.GPT, "unet": M.UNet, "lstm": M.LSTMLM}[job["name"]]
model = cls(job["config"])
model.train()
x = torch.randint(0, job["config"].get("vocabSize", 1), job["x"]) if job["ids"] else torch.randn(job["x"])
t = torch.randint(0, job["classes"], job["targets"])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
def step():
    out = model(x)
    if out.dim() == 4:
        out = out.permute(0, 2, 3, 1)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()
for _ in range(job["warmup"]):
    step()
times = []
for _ in range(job["steps"]):
    t0 = time.perf_counter()
    step()
    times.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"times": times, "torch": torch.__version__, "threads": torch.get_num_threads()}))
`;

async function findPython(): Promise<{ python: string; version: string } | string> {
  const candidates = [opts.python, Deno.env.get("PYTHON"), "/usr/bin/python3", "python3"]
    .filter((c): c is string => !!c);
  const tried: string[] = [];
  for (const python of candidates) {
    try {
      const r = await new Deno.Command(python, {
        args: ["-c", "import torch; print(torch.__version__)"],
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (r.success) return { python, version: new TextDecoder().decode(r.stdout).trim() };
      tried.push(`${python} (no torch)`);
    } catch {
      tried.push(`${python} (not found)`);
    }
  }
  return `PyTorch not found; tried ${tried.join(", ")}. Install python3-torch or pass --python`;
}

const py = await findPython();
if (typeof py === "string") {
  console.log(`vs_pytorch: skipped: ${py}`);
  Deno.exit(0);
}

let cpuBackend: typeof import("@libra/native").cpuBackend;
try {
  ({ cpuBackend } = await import("@libra/native"));
  cpuBackend({ threads });
} catch (e) {
  console.log(
    `vs_pytorch: skipped: native cpu backend unavailable (${
      (e as Error).message.split("\n")[0]
    }); run \`deno task build:native\``,
  );
  Deno.exit(0);
}

interface Row {
  model: string;
  preset: string;
  batch: string;
  oursMs: number;
  torchMs: number;
  ratio: number;
}

const rows: Row[] = [];
console.log(
  `vs_pytorch: preset ${opts.preset}, ${threads} thread(s), ${warmup} warm-up + ${steps} timed steps, PyTorch ${py.version} (${py.python})`,
);
for (const name of models) {
  const preset = getPreset(name, opts.preset);
  const backend = cpuBackend({ threads });
  manualSeed(0);
  const model = createModel(name, opts.preset, { backend });
  const data = createData(name, opts.preset);
  const batch = data.next();
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
  model.train();
  const ours: number[] = [];
  for (let i = 0; i < warmup + steps; i++) {
    const t0 = performance.now();
    trainStep({ model, batch, optimizer });
    if (i >= warmup) ours.push(performance.now() - t0);
  }
  optimizer.dispose();
  model.dispose();

  const config = name === "gpt" ? { tiedHead: true, dropout: 0, ...preset.config } : preset.config;
  const job = {
    name,
    config,
    x: batch.x.shape,
    ids: batch.x.dtype === "i32",
    targets: batch.targets.shape,
    classes: data.classes,
    threads,
    warmup,
    steps,
  };
  const child = new Deno.Command(py.python, {
    args: ["-c", TORCH_STEP],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(JSON.stringify(job)));
  await w.close();
  const out = await child.output();
  if (!out.success) {
    console.error(
      `vs_pytorch: the PyTorch run of ${name} failed:\n${new TextDecoder().decode(out.stderr)}`,
    );
    Deno.exit(1);
  }
  const torchTimes = JSON.parse(new TextDecoder().decode(out.stdout)).times as number[];
  const row: Row = {
    model: name,
    preset: opts.preset,
    batch: `${batch.x.shape.join("x")}`,
    oursMs: median(ours),
    torchMs: median(torchTimes),
    ratio: median(ours) / median(torchTimes),
  };
  rows.push(row);
  console.log(
    `${row.model.padEnd(7)} ${row.preset.padEnd(6)} input ${row.batch.padEnd(14)} ours ${
      row.oursMs.toFixed(1).padStart(9)
    } ms   pytorch ${row.torchMs.toFixed(1).padStart(9)} ms   ratio ${
      row.ratio.toFixed(2).padStart(6)
    }x`,
  );
}
if (opts.json) {
  await Deno.writeTextFile(
    opts.json,
    JSON.stringify({ threads, steps, warmup, torch: py.version, rows }, null, 2) + "\n",
  );
}
