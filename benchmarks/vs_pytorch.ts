/**
 * Step time of our stack against PyTorch, side by side: the same model
 * (architectures mirrored in scripts/make_torch_fixtures.py), the same batch
 * geometry and the same CPU thread count, AdamW, one training step (forward,
 * cross-entropy, backward, update).
 *
 * The two sides are interleaved: PyTorch runs in one long-lived child process,
 * and each round times `--per-round` steps of ours, then the same number of
 * PyTorch's, for `--rounds` rounds, so machine load hits both alike. Per
 * model it prints the median wall and CPU time per step (CPU time = user +
 * system of the whole process, all threads, so it is robust to other load on
 * the machine) with a distribution-free 95% interval of each median, and the
 * ours/PyTorch ratio of the medians with a 95% bootstrap interval over rounds.
 *
 * `--profile` then runs a few more steps of each side under a profiler: ours
 * by kernel name (time inside each native call, plus alloc/free and the
 * TypeScript time between calls), PyTorch's `torch.profiler` by op (self CPU
 * time), printed side by side.
 *
 * ```sh
 * deno run -A benchmarks/vs_pytorch.ts                       # the issue-13 workloads, 1 thread
 * deno run -A benchmarks/vs_pytorch.ts --threads 2 --profile
 * deno run -A benchmarks/vs_pytorch.ts --models gpt --preset small --rounds 5
 * ```
 *
 * `--device cuda` runs both sides on the GPU: ours on the cuda library, PyTorch's
 * model and optimizer with `.cuda()`. Each step of either side uploads its
 * batch from host memory and ends synchronized (ours: `trainStep`'s sync;
 * PyTorch: `torch.cuda.synchronize()`), so wall times are whole steps.
 * `--threads` then only sets the CPU threads of the PyTorch process.
 *
 * `--preset issue13` (default) is MLP 784-1024-1024-10 batch 256; GPT 4
 * layers, width 256, 4 heads, context 128, vocabulary 256, batch 8; ResNet-32
 * (CIFAR) batch 32. Any zoo preset name works too.
 *
 * Skips (exit 0, with a message) when no Python with PyTorch is found
 * (`--python`, `$PYTHON`, `/usr/bin/python3`, `python3` are tried) or when the
 * native library is not built.
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { manualSeed } from "@libra/tensor";
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
    models: { type: "string", default: "mlp,gpt,resnet" },
    preset: { type: "string", default: "issue13" },
    rounds: { type: "string", default: "7" },
    steps: { type: "string" },
    "per-round": { type: "string", default: "2" },
    warmup: { type: "string", default: "2" },
    threads: { type: "string", default: "1" },
    device: { type: "string", default: "cpu" },
    profile: { type: "boolean", default: false },
    "profile-steps": { type: "string", default: "3" },
    top: { type: "string", default: "14" },
    python: { type: "string" },
    json: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (opts.help) {
  console.log(
    "usage: deno run -A benchmarks/vs_pytorch.ts [--models mlp,gpt,resnet,unet,lstm] [--preset issue13|tiny|small|...] " +
      "[--rounds 7] [--per-round 2] [--steps N (= --rounds N --per-round 1)] [--warmup 2] [--threads 1] [--device cpu|cuda] [--profile] [--profile-steps 3] [--top 14] " +
      "[--python PATH] [--json OUT]",
  );
  Deno.exit(0);
}

// --steps N (the older interface, used by benchmarks/micro_suite.ts): N rounds of one step
const rounds = Number(opts.steps ?? opts.rounds);
const perRound = opts.steps !== undefined ? 1 : Number(opts["per-round"]);
const warmup = Number(opts.warmup), threads = Number(opts.threads);
const profileSteps = Number(opts["profile-steps"]), top = Number(opts.top);
for (
  const [k, v, min] of [
    [opts.steps !== undefined ? "steps" : "rounds", rounds, 1],
    ["per-round", perRound, 1],
    ["warmup", warmup, 0],
    ["threads", threads, 1],
    ["profile-steps", profileSteps, 1],
    ["top", top, 1],
  ] as const
) {
  if (!Number.isInteger(v) || v < min) {
    console.error(`vs_pytorch: --${k} must be an integer >= ${min}, got ${v}`);
    Deno.exit(2);
  }
}
if (opts.device !== "cpu" && opts.device !== "cuda") {
  console.error(`vs_pytorch: --device must be cpu or cuda, got "${opts.device}"`);
  Deno.exit(2);
}
const device: "cpu" | "cuda" = opts.device;
const models = opts.models.split(",").map((s) => s.trim()) as ModelName[];
for (const m of models) {
  if (!MODEL_NAMES.includes(m)) {
    console.error(`vs_pytorch: unknown model "${m}"; available: ${MODEL_NAMES.join(", ")}`);
    Deno.exit(2);
  }
}

/** The workloads of issue 13 (not zoo presets): config and batch geometry. */
// deno-lint-ignore no-explicit-any
const ISSUE13: Partial<Record<ModelName, { config: any; input: Record<string, number> }>> = {
  mlp: {
    config: { inFeatures: 784, hidden: [1024, 1024], outFeatures: 10 },
    input: { batchSize: 256 },
  },
  gpt: {
    config: { vocabSize: 256, contextLength: 128, nLayer: 4, nHead: 4, nEmbd: 256 },
    input: { batchSize: 8, seqLen: 128 },
  },
  resnet: {
    config: {
      block: "basic",
      stem: "cifar",
      layers: [5, 5, 5],
      widths: [16, 32, 64],
      inChannels: 3,
      numClasses: 10,
    },
    input: { batchSize: 32, imageSize: 32 },
  },
};

function workload(name: ModelName) {
  if (opts.preset === "issue13") {
    const w = ISSUE13[name];
    if (!w) {
      console.error(`vs_pytorch: --preset issue13 has no ${name}; use a zoo preset for it`);
      Deno.exit(2);
    }
    return w;
  }
  const p = getPreset(name, opts.preset);
  return { config: p.config, input: p.input as unknown as Record<string, number> };
}

const SCRIPTS = new URL("../scripts/", import.meta.url).pathname;

/**
 * The PyTorch side: a worker reading one JSON command per line on stdin and
 * answering one JSON line on stdout. Commands: setup (build model, data,
 * optimizer), steps n (timed steps: wall and process CPU ms each), profile n.
 */
const TORCH_WORKER = `
import json, sys, time
sys.path.insert(0, ${JSON.stringify(SCRIPTS)})
import torch
import torch.nn.functional as F
import make_torch_fixtures as M
torch.use_deterministic_algorithms(False)
state = {}
dev = "cpu"
def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()
def step():
    model, x, t, opt = state["model"], state["x"], state["t"], state["opt"]
    if dev == "cuda":
        x, t = x.to(dev), t.to(dev)
    out = model(x)
    if out.dim() == 4:
        out = out.permute(0, 2, 3, 1)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    return loss.item()
for line in sys.stdin:
    job = json.loads(line)
    cmd = job["cmd"]
    if cmd == "setup":
        torch.set_num_threads(job["threads"])
        torch.manual_seed(0)
        dev = job["device"]
        if dev == "cuda" and not torch.cuda.is_available():
            reply({"error": "torch.cuda.is_available() is False: PyTorch sees no GPU"})
            continue
        cls = {"mlp": M.MLP, "resnet": M.ResNet, "gpt": M.GPT, "unet": M.UNet, "lstm": M.LSTMLM}[job["name"]]
        # float32 on both sides: no TF32 in PyTorch's convolutions either (its matmuls default to none)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        model = cls(job["config"]).to(dev)
        model.train()
        x = torch.randint(0, job["config"].get("vocabSize", 1), job["x"]) if job["ids"] else torch.randn(job["x"])
        t = torch.randint(0, job["classes"], job["targets"])
        state.update(model=model, x=x, t=t, opt=torch.optim.AdamW(model.parameters(), lr=1e-3))
        for _ in range(job["warmup"]):
            step()
        reply({"torch": torch.__version__, "threads": torch.get_num_threads(),
               "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else None})
    elif cmd == "steps":
        wall, cpu = [], []
        for _ in range(job["n"]):
            w0, c0 = time.perf_counter(), time.process_time()
            step()
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
        reply({"wall": wall, "cpu": cpu})
    elif cmd == "profile":
        from torch.profiler import profile, ProfilerActivity
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(job["n"]):
                step()
        rows = [{"name": e.key, "calls": e.count, "ms": e.self_cpu_time_total / 1000.0}
                for e in prof.key_averages()]
        rows.sort(key=lambda r: -r["ms"])
        reply({"ops": rows})
    else:
        reply({"error": "unknown command " + cmd})
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
  return `PyTorch not found; tried ${tried.join(", ")}. Install torch or pass --python`;
}

/** A long-lived PyTorch worker process. */
class TorchWorker {
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #reader: ReadableStreamDefaultReader<string>;
  #buf = "";
  constructor(python: string) {
    this.#child = new Deno.Command(python, {
      args: ["-c", TORCH_WORKER],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
      env: {
        OMP_NUM_THREADS: String(threads),
        MKL_NUM_THREADS: String(threads),
        // the same OpenMP wait policy as our side (@libra/native loads libgomp passive
        // unless the environment says otherwise): spinning workers would charge the
        // waits on a loaded machine to PyTorch's CPU and wall time
        OMP_WAIT_POLICY: Deno.env.get("OMP_WAIT_POLICY") ?? "passive",
      },
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#reader = this.#child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  }
  // deno-lint-ignore no-explicit-any
  async ask(cmd: Record<string, unknown>): Promise<any> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(cmd) + "\n"));
    let nl: number;
    while ((nl = this.#buf.indexOf("\n")) < 0) {
      const r = await this.#reader.read();
      if (r.done) throw new Error(`the PyTorch worker exited during ${cmd.cmd}`);
      this.#buf += r.value;
    }
    const line = this.#buf.slice(0, nl);
    this.#buf = this.#buf.slice(nl + 1);
    const out = JSON.parse(line);
    if (out.error) throw new Error(`the PyTorch worker: ${out.error}`);
    return out;
  }
  async close(): Promise<void> {
    await this.#writer.close();
    await this.#reader.cancel().catch(() => {});
    await this.#child.status;
  }
}

function quantile(sorted: number[], q: number): number {
  const pos = (sorted.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

function median(xs: number[]): number {
  return quantile([...xs].sort((a, b) => a - b), 0.5);
}

/** Distribution-free ~95% interval of the median (order statistics; the range when n < 6). */
function medianInterval(xs: number[]): [number, number] {
  const s = [...xs].sort((a, b) => a - b), n = s.length;
  const h = Math.max(0, Math.floor(n / 2 - 0.98 * Math.sqrt(n)));
  return [s[h]!, s[n - 1 - h]!];
}

/** 95% bootstrap interval of median(a)/median(b), resampling rounds (paired). */
function ratioInterval(a: number[][], b: number[][], seed = 1): [number, number] {
  let st = seed >>> 0;
  const rnd = () => {
    st = (st * 1664525 + 1013904223) >>> 0;
    return st / 2 ** 32;
  };
  const ratios: number[] = [];
  for (let it = 0; it < 2000; it++) {
    const ra: number[] = [], rb: number[] = [];
    for (let i = 0; i < a.length; i++) {
      const j = Math.floor(rnd() * a.length);
      ra.push(...a[j]!);
      rb.push(...b[j]!);
    }
    ratios.push(median(ra) / median(rb));
  }
  ratios.sort((x, y) => x - y);
  return [quantile(ratios, 0.025), quantile(ratios, 0.975)];
}

const fmt = (x: number, d = 1) => x.toFixed(d);
const iv = (xs: number[]) => {
  const [lo, hi] = medianInterval(xs);
  return `${fmt(median(xs)).padStart(8)} [${fmt(lo)}, ${fmt(hi)}]`;
};

const py = await findPython();
if (typeof py === "string") {
  console.log(`vs_pytorch: skipped: ${py}`);
  Deno.exit(0);
}

let openBackend: () => import("@libra/native").NativeBackend;
let deviceName: string;
try {
  const native = await import("@libra/native");
  openBackend = device === "cuda"
    ? () => native.cudaBackend()
    : () => native.cpuBackend({ threads });
  deviceName = openBackend().deviceName;
} catch (e) {
  console.log(
    `vs_pytorch: skipped: native ${device} backend unavailable (${
      (e as Error).message.split("\n")[0]
    })${device === "cpu" ? "; run `deno task build:native`" : ""}`,
  );
  Deno.exit(0);
}

async function uptime(): Promise<string> {
  try {
    const s = await Deno.readTextFile("/proc/loadavg");
    return `load average ${s.split(" ").slice(0, 3).join(" ")}`;
  } catch {
    return "load average unknown";
  }
}

interface Side {
  wall: number[][];
  cpu: number[][];
}

interface Row {
  model: string;
  preset: string;
  input: string;
  /** Same as `input` (the field name benchmarks/micro_suite.ts reads). */
  batch: string;
  /** Median wall ms per step, ours and PyTorch's, and their ratio (as before the CPU columns). */
  oursMs: number;
  torchMs: number;
  ratio: number;
  threads: number;
  device: "cpu" | "cuda";
  ours: { wallMs: number; cpuMs: number; wall: number[]; cpu: number[] };
  torch: { wallMs: number; cpuMs: number; wall: number[]; cpu: number[] };
  wallRatio: number;
  wallRatioInterval: [number, number];
  cpuRatio: number;
  cpuRatioInterval: [number, number];
  profile?: {
    ours: { name: string; calls: number; ms: number }[];
    torch: { name: string; calls: number; ms: number }[];
  };
}

const rows: Row[] = [];
console.log(
  `vs_pytorch: preset ${opts.preset}, device ${device}${
    device === "cuda" ? ` (${deviceName})` : ""
  }, ${threads} thread(s), ${warmup} warm-up steps, ${rounds} rounds x ${perRound} steps per side, interleaved; PyTorch ${py.version} (${py.python}); ${await uptime()}`,
);
console.log(
  "times are medians per step in ms with 95% intervals; cpu = user+system of the process, all threads; " +
    `OpenMP wait policy ${Deno.env.get("OMP_WAIT_POLICY") ?? "passive"} on both sides`,
);
const worker = new TorchWorker(py.python);
try {
  for (const name of models) {
    const w = workload(name);
    const backend = openBackend();
    manualSeed(0);
    const model = createModel(name, w.config, { backend });
    const data = createData(name, w.config, w.input);
    const batch = data.next();
    const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
    model.train();
    const step = () => trainStep({ model, batch, optimizer });
    for (let i = 0; i < warmup; i++) step();

    const config = name === "gpt" ? { tiedHead: true, dropout: 0, ...w.config } : w.config;
    await worker.ask({
      cmd: "setup",
      name,
      config,
      x: batch.x.shape,
      ids: batch.x.dtype === "i32",
      targets: batch.targets.shape,
      classes: data.classes,
      threads,
      warmup,
      device,
    });

    const ours: Side = { wall: [], cpu: [] }, torch: Side = { wall: [], cpu: [] };
    for (let r = 0; r < rounds; r++) {
      const wall: number[] = [], cpu: number[] = [];
      for (let i = 0; i < perRound; i++) {
        const c0 = process.cpuUsage(), t0 = performance.now();
        step();
        const t1 = performance.now(), c1 = process.cpuUsage(c0);
        wall.push(t1 - t0);
        cpu.push((c1.user + c1.system) / 1000);
      }
      ours.wall.push(wall);
      ours.cpu.push(cpu);
      const t = await worker.ask({ cmd: "steps", n: perRound });
      torch.wall.push(t.wall);
      torch.cpu.push(t.cpu);
    }
    const flat = (s: number[][]) => s.flat();
    const row: Row = {
      model: name,
      preset: opts.preset,
      input: batch.x.shape.join("x"),
      batch: batch.x.shape.join("x"),
      oursMs: median(flat(ours.wall)),
      torchMs: median(flat(torch.wall)),
      ratio: median(flat(ours.wall)) / median(flat(torch.wall)),
      threads,
      device,
      ours: {
        wallMs: median(flat(ours.wall)),
        cpuMs: median(flat(ours.cpu)),
        wall: flat(ours.wall),
        cpu: flat(ours.cpu),
      },
      torch: {
        wallMs: median(flat(torch.wall)),
        cpuMs: median(flat(torch.cpu)),
        wall: flat(torch.wall),
        cpu: flat(torch.cpu),
      },
      wallRatio: median(flat(ours.wall)) / median(flat(torch.wall)),
      wallRatioInterval: ratioInterval(ours.wall, torch.wall),
      cpuRatio: median(flat(ours.cpu)) / median(flat(torch.cpu)),
      cpuRatioInterval: ratioInterval(ours.cpu, torch.cpu),
    };
    console.log(`\n${name} (${row.input}), ${device === "cuda" ? "cuda" : `${threads} thread(s)`}`);
    console.log(`  wall ms: ours ${iv(row.ours.wall)}   pytorch ${iv(row.torch.wall)}`);
    console.log(`  cpu ms:  ours ${iv(row.ours.cpu)}   pytorch ${iv(row.torch.cpu)}`);
    console.log(
      `  ratio ours/pytorch: wall ${fmt(row.wallRatio, 2)} [${fmt(row.wallRatioInterval[0], 2)}, ${
        fmt(row.wallRatioInterval[1], 2)
      }]   cpu ${fmt(row.cpuRatio, 2)} [${fmt(row.cpuRatioInterval[0], 2)}, ${
        fmt(row.cpuRatioInterval[1], 2)
      }]`,
    );

    if (opts.profile) {
      const t0 = performance.now();
      backend.startProfile();
      for (let i = 0; i < profileSteps; i++) step();
      const kernels = backend.stopProfile();
      const total = performance.now() - t0;
      const inKernels = kernels.reduce((s, e) => s + e.ms, 0);
      const ourRows = [
        ...kernels,
        { name: "(typescript between calls)", calls: profileSteps, ms: total - inKernels },
      ].sort((a, b) => b.ms - a.ms).map((e) => ({ ...e, ms: e.ms / profileSteps }));
      const tp = await worker.ask({ cmd: "profile", n: profileSteps });
      const torchRows = (tp.ops as { name: string; calls: number; ms: number }[])
        .map((e) => ({ ...e, ms: e.ms / profileSteps }));
      row.profile = { ours: ourRows, torch: torchRows };
      const oursTotal = ourRows.reduce((s, e) => s + e.ms, 0);
      const torchTotal = torchRows.reduce((s, e) => s + e.ms, 0);
      console.log(
        `  profile, ms per step (${profileSteps} steps; ours: wall in each native call; pytorch: self cpu by op)`,
      );
      console.log(
        `  ${"ours: kernel".padEnd(30)} ${"calls".padStart(6)} ${"ms".padStart(8)} ${
          "%".padStart(5)
        }   ${"pytorch: op".padEnd(34)} ${"calls".padStart(6)} ${"ms".padStart(8)} ${
          "%".padStart(5)
        }`,
      );
      for (let i = 0; i < top; i++) {
        const a = ourRows[i], b = torchRows[i];
        const left = a
          ? `${a.name.slice(0, 30).padEnd(30)} ${String(a.calls / profileSteps).padStart(6)} ${
            fmt(a.ms, 2).padStart(8)
          } ${fmt((100 * a.ms) / oursTotal).padStart(5)}`
          : " ".repeat(52);
        const right = b
          ? `${b.name.slice(0, 34).padEnd(34)} ${String(b.calls / profileSteps).padStart(6)} ${
            fmt(b.ms, 2).padStart(8)
          } ${fmt((100 * b.ms) / torchTotal).padStart(5)}`
          : "";
        if (a || b) console.log(`  ${left}   ${right}`);
      }
      console.log(
        `  ${"total".padEnd(30)} ${"".padStart(6)} ${fmt(oursTotal, 2).padStart(8)} ${
          "".padStart(5)
        }   ${"total".padEnd(34)} ${"".padStart(6)} ${fmt(torchTotal, 2).padStart(8)}`,
      );
    }
    rows.push(row);
    optimizer.dispose();
    model.dispose();
  }
} finally {
  await worker.close();
}
console.log(`\nvs_pytorch: done; ${await uptime()}`);
if (opts.json) {
  await Deno.writeTextFile(
    opts.json,
    JSON.stringify(
      { device, threads, rounds, perRound, warmup, torch: py.version, rows },
      null,
      2,
    ) + "\n",
  );
}
