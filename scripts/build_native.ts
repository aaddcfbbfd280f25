/**
 * Builds the native kernel libraries (`deno task build:native`):
 *
 * - `native/build/libra_cpu.so` from `native/cpu/*.c` with gcc, OpenMP and
 *   OpenBLAS `cblas_sgemm` when a test program links against `-lopenblas`
 *   (set `LIBRA_NO_OPENBLAS=1` to force the portable blocked sgemm), and
 *   `-march=native` when a probe program built with it runs here
 *   (`LIBRA_MARCH=<arch>` or `LIBRA_MARCH=none` override it);
 * - `native/build/libra_cpu_portable.so`, the portable variant (portable sgemm,
 *   no machine flags), always (tests compare the two sgemm paths);
 * - `native/build/libra_cuda.so` from `native/cuda/*.cu` when `nvcc` is on the
 *   PATH or at `/usr/local/cuda/bin/nvcc` (static cudart, so it loads on a
 *   machine without a driver).
 *
 * Each library is rebuilt only when its sources, headers, flags or compiler
 * change (a SHA-256 stamp next to it in `native/build/`); `--force` rebuilds.
 * A failing compile exits non-zero with the compiler output.
 *
 * @module
 */

const ROOT = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");
const BUILD = `${ROOT}/native/build`;
const FORCE = Deno.args.includes("--force");

interface Target {
  /** Output file, relative to ROOT. */
  out: string;
  /** Compiler executable. */
  compiler: string;
  /** Full argument list (paths relative to ROOT). */
  args: string[];
  /** Files whose contents decide whether to rebuild (relative to ROOT). */
  inputs: string[];
  /** What to print about it. */
  label: string;
}

class BuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

async function listFiles(dir: string, exts: string[]): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(`${ROOT}/${dir}`)) {
      if (e.isFile && exts.some((x) => e.name.endsWith(x))) out.push(`${dir}/${e.name}`);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out.sort();
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Runs a command; returns its exit status and combined output (never throws for a failed run). */
async function run(
  cmd: string,
  args: string[],
): Promise<{ ok: boolean; output: string }> {
  try {
    const r = await new Deno.Command(cmd, { args, cwd: ROOT, stdout: "piped", stderr: "piped" })
      .output();
    const dec = new TextDecoder();
    return { ok: r.success, output: dec.decode(r.stdout) + dec.decode(r.stderr) };
  } catch (e) {
    return { ok: false, output: `could not run ${cmd}: ${(e as Error).message}` };
  }
}

async function sha256(parts: (string | Uint8Array)[]): Promise<string> {
  const enc = new TextEncoder();
  const chunks = parts.map((p) => (typeof p === "string" ? enc.encode(p + "\0") : p));
  const total = chunks.reduce((n, c) => n + c.length, 0);
  const all = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    all.set(c, off);
    off += c.length;
  }
  const digest = await crypto.subtle.digest("SHA-256", all);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Compiler identity (its --version line) so a toolchain change rebuilds. */
async function compilerId(compiler: string): Promise<string> {
  const r = await run(compiler, ["--version"]);
  return r.output.split("\n").filter((l) => l.trim()).slice(0, 4).join(" ");
}

/** Builds a target unless its stamp matches; returns whether it compiled. */
async function build(t: Target): Promise<boolean> {
  const contents = await Promise.all(t.inputs.map((f) => Deno.readFile(`${ROOT}/${f}`)));
  const parts: (string | Uint8Array)[] = [t.compiler, await compilerId(t.compiler), ...t.args];
  t.inputs.forEach((f, i) => parts.push(f, contents[i]!));
  const hash = await sha256(parts);
  const stamp = `${ROOT}/${t.out}.stamp`;
  if (!FORCE && await exists(`${ROOT}/${t.out}`)) {
    const old = await Deno.readTextFile(stamp).catch(() => "");
    if (old.trim() === hash) {
      console.log(`build:native: ${t.out} is up to date (${t.label})`);
      return false;
    }
  }
  const t0 = performance.now();
  // Compile to a temporary name and rename it into place: processes that have the
  // old library mapped keep the old inode instead of seeing it rewritten under them.
  const tmp = `${t.out}.tmp-${Deno.pid}`;
  const args = t.args.map((a) => (a === t.out ? tmp : a));
  const r = await run(t.compiler, args);
  if (!r.ok) {
    await Deno.remove(`${ROOT}/${tmp}`).catch(() => {});
    await Deno.remove(stamp).catch(() => {});
    throw new BuildError(
      `build:native: compiling ${t.out} failed:\n${t.compiler} ${args.join(" ")}\n${r.output}`,
    );
  }
  if (r.output.trim()) console.log(r.output.trim());
  await Deno.rename(`${ROOT}/${tmp}`, `${ROOT}/${t.out}`);
  await Deno.writeTextFile(stamp, hash + "\n");
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  console.log(`build:native: built ${t.out} (${t.label}) in ${secs} s`);
  return true;
}

/** True when a tiny cblas program compiles, links against -lopenblas and runs. */
async function openblasWorks(): Promise<{ ok: boolean; why: string }> {
  const dir = await Deno.makeTempDir({ prefix: "libra_blas_probe_" });
  try {
    const src = `${dir}/probe.c`;
    await Deno.writeTextFile(
      src,
      `#include <cblas.h>
int main(void) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  return c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4 ? 0 : 1;
}
`,
    );
    const exe = `${dir}/probe`;
    const cc = await run("gcc", [src, "-o", exe, "-lopenblas"]);
    if (!cc.ok) {
      return { ok: false, why: `a cblas test program does not link: ${cc.output.trim()}` };
    }
    const ex = await run(exe, []);
    if (!ex.ok) return { ok: false, why: "the cblas test program gave a wrong result" };
    return { ok: true, why: "" };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/**
 * Machine flags for the default cpu library: `-march=native` when a test
 * program built with it compiles and runs here (so the kernels' loops are
 * vectorized for this CPU, e.g. AVX2/AVX-512), nothing otherwise.
 * `LIBRA_MARCH=<arch>` picks another `-march` (e.g. `x86-64-v3`), `LIBRA_MARCH=none`
 * none. The portable library never gets machine flags.
 */
async function marchFlags(): Promise<{ flags: string[]; why: string }> {
  const env = Deno.env.get("LIBRA_MARCH");
  if (env === "none") return { flags: [], why: "LIBRA_MARCH=none" };
  const flag = `-march=${env || "native"}`;
  const dir = await Deno.makeTempDir({ prefix: "libra_march_probe_" });
  try {
    const src = `${dir}/probe.c`;
    await Deno.writeTextFile(
      src,
      `#include <math.h>
int main(void) {
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = sqrtf((float)i);
  float s = 0;
  for (int i = 0; i < 64; i++) s += a[i];
  return s > 0 ? 0 : 1;
}
`,
    );
    const cc = await run("gcc", ["-O3", flag, src, "-o", `${dir}/probe`, "-lm"]);
    if (!cc.ok) return { flags: [], why: `${flag} does not compile: ${cc.output.trim()}` };
    const ex = await run(`${dir}/probe`, []);
    if (!ex.ok) return { flags: [], why: `a program built with ${flag} does not run here` };
    return { flags: [flag], why: flag };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

async function findNvcc(): Promise<string | null> {
  const r = await run("nvcc", ["--version"]);
  if (r.ok) return "nvcc";
  if (await exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return null;
}

function cpuTarget(
  out: string,
  sources: string[],
  headers: string[],
  blas: boolean,
  march: string[],
): Target {
  return {
    out,
    compiler: "gcc",
    args: [
      "-std=c11",
      "-O3",
      "-fPIC",
      "-shared",
      "-fopenmp",
      "-fno-math-errno",
      ...march,
      "-fvisibility=hidden",
      "-Wall",
      "-Wextra",
      "-Wno-psabi", // vector-typed static helpers: no ABI crosses the library boundary
      // Never unmapped by dlclose: OpenMP and OpenBLAS worker threads outlive the
      // Deno.DynamicLibrary (a test worker closing it would pull code from under them).
      "-Wl,-z,nodelete",
      "-Inative/include",
      ...(blas ? ["-DLIBRA_OPENBLAS"] : []),
      "-o",
      out,
      ...sources,
      ...(blas ? ["-lopenblas"] : []),
      "-lm",
    ],
    inputs: [...sources, ...headers],
    label: (blas ? "cpu: OpenBLAS sgemm, OpenMP" : "cpu: portable blocked sgemm, OpenMP") +
      (march.length ? `, ${march.join(" ")}` : ""),
  };
}

async function main(): Promise<void> {
  await Deno.mkdir(BUILD, { recursive: true });
  const headers = [
    ...(await listFiles("native/include", [".h", ".inc"])),
    ...(await listFiles("native/cpu", [".h"])),
  ];
  const sources = await listFiles("native/cpu", [".c"]);
  if (sources.length === 0) throw new BuildError("build:native: no sources in native/cpu/");

  let blas = false;
  if (Deno.env.get("LIBRA_NO_OPENBLAS") === "1") {
    console.log("build:native: LIBRA_NO_OPENBLAS=1: using the portable sgemm");
  } else {
    const probe = await openblasWorks();
    blas = probe.ok;
    console.log(
      blas
        ? "build:native: OpenBLAS found: matmul and conv2d use cblas_sgemm"
        : `build:native: OpenBLAS not usable (${probe.why}); using the portable sgemm`,
    );
  }
  const march = await marchFlags();
  if (!march.flags.length) console.log(`build:native: no machine flags (${march.why})`);
  const cpuTargets = [cpuTarget("native/build/libra_cpu.so", sources, headers, blas, march.flags)];
  cpuTargets.push(cpuTarget("native/build/libra_cpu_portable.so", sources, headers, false, []));
  // Both compiles run to completion (no orphaned compiler), then the first failure is reported.
  const settled = await Promise.allSettled(cpuTargets.map(build));
  const failed = settled.find((x): x is PromiseRejectedResult => x.status === "rejected");
  if (failed) throw failed.reason;

  const cuSources = await listFiles("native/cuda", [".cu"]);
  const cuHeaders = await listFiles("native/cuda", [".h", ".cuh"]);
  const nvcc = await findNvcc();
  if (!nvcc) {
    console.log("build:native: nvcc not found: CUDA library skipped");
  } else if (cuSources.length === 0) {
    console.log("build:native: no native/cuda/*.cu sources yet: CUDA library skipped");
  } else {
    await build({
      out: "native/build/libra_cuda.so",
      compiler: nvcc,
      args: [
        "-O3",
        "-std=c++17",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-Inative/include",
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=[sm_90,compute_90]",
        "-o",
        "native/build/libra_cuda.so",
        ...cuSources,
        "-ldl",
      ],
      inputs: [
        ...cuSources,
        ...cuHeaders,
        ...headers.filter((h) => h.startsWith("native/include")),
      ],
      label: "cuda: sm_80, sm_90",
    });
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(e instanceof BuildError ? e.message : e);
    Deno.exit(1);
  }
}
