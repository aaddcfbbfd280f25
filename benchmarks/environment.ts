/**
 * Where a report came from: machine, Deno and package versions, git commit,
 * device and seed.
 *
 * @module
 */

import os from "node:os";
import type { EnvironmentJson } from "./schema.ts";

const ROOT = new URL("../", import.meta.url);

/** The git commit of the working tree, and whether it has uncommitted changes; null outside git. */
export async function gitCommit(cwd: URL = ROOT): Promise<{ sha: string; dirty: boolean } | null> {
  try {
    const rev = await new Deno.Command("git", {
      args: ["rev-parse", "HEAD"],
      cwd,
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!rev.success) return null;
    const sha = new TextDecoder().decode(rev.stdout).trim();
    const st = await new Deno.Command("git", {
      args: ["status", "--porcelain", "--untracked-files=no"],
      cwd,
      stdout: "piped",
      stderr: "null",
    }).output();
    return { sha, dirty: !st.success || new TextDecoder().decode(st.stdout).trim() !== "" };
  } catch {
    return null;
  }
}

/** Versions of the workspace's @libra packages, read from their deno.json files. */
export function packageVersions(root: URL = ROOT): Record<string, string> {
  const out: Record<string, string> = {};
  for (const dir of ["packages", "apps"]) {
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(new URL(`${dir}/`, root))];
    } catch {
      continue;
    }
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      try {
        const j = JSON.parse(Deno.readTextFileSync(new URL(`${dir}/${e.name}/deno.json`, root)));
        if (typeof j.name === "string" && typeof j.version === "string") out[j.name] = j.version;
      } catch {
        // A folder without a deno.json is not a package.
      }
    }
  }
  return out;
}

/** Collects the environment record of a report. */
export async function environment(
  device: { kind: string; name: string },
  seed: number,
): Promise<EnvironmentJson> {
  const cpus = os.cpus();
  return {
    os: `${Deno.build.os} ${os.release()}`,
    arch: Deno.build.arch,
    cpus: navigator.hardwareConcurrency,
    cpuModel: cpus[0]?.model?.trim() || "unknown",
    memoryBytes: os.totalmem(),
    hostname: os.hostname(),
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    typescript: Deno.version.typescript,
    packages: packageVersions(),
    commit: await gitCommit(),
    device,
    seed,
  };
}
