/**
 * Builds the islands bundle (`static/build/islands.js`) with `deno bundle`, the one
 * build step of the dashboard. The server calls {@linkcode ensureBundle} at start, which
 * rebuilds only when a source is newer than the bundle.
 *
 * @module
 */

const here = new URL(".", import.meta.url);
/** Path of the bundle. */
export const BUNDLE_PATH: string = new URL("static/build/islands.js", here).pathname;

async function newestSource(): Promise<number> {
  let newest = 0;
  for (const dir of ["islands", "components"]) {
    for await (const e of Deno.readDir(new URL(dir + "/", here))) {
      const s = await Deno.stat(new URL(`${dir}/${e.name}`, here));
      newest = Math.max(newest, s.mtime?.getTime() ?? 0);
    }
  }
  const c = await Deno.stat(new URL("client.ts", here));
  return Math.max(newest, c.mtime?.getTime() ?? 0);
}

/** Bundles the islands; throws with deno's output when it fails. */
export async function buildIslands(opts: { minify?: boolean } = {}): Promise<string> {
  const args = [
    "bundle",
    "--quiet",
    "--platform",
    "browser",
    "--sourcemap",
    "linked",
    "-o",
    BUNDLE_PATH,
    new URL("client.ts", here).pathname,
  ];
  if (opts.minify ?? true) args.splice(1, 0, "--minify");
  const out = await new Deno.Command(Deno.execPath(), { args, stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(
      `deno bundle of the dashboard islands failed (exit ${out.code}):\n${
        new TextDecoder().decode(out.stderr)
      }`,
    );
  }
  return BUNDLE_PATH;
}

/** Builds the bundle if it is missing or older than its sources. */
export async function ensureBundle(): Promise<string> {
  let built = 0;
  try {
    built = (await Deno.stat(BUNDLE_PATH)).mtime?.getTime() ?? 0;
  } catch { /* missing */ }
  if (built === 0 || built < await newestSource()) await buildIslands();
  return BUNDLE_PATH;
}

if (import.meta.main) console.log(`built ${await buildIslands()}`);
