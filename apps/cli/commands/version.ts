/** `libra version`: prints the version of the CLI and of Deno. @module */

import denoJson from "../deno.json" with { type: "json" };

/** One-line description for `--help`. */
export const summary = "print the libra and Deno versions";

/** Prints the versions. */
export function main(_args: string[]): number {
  console.log(`libra ${denoJson.version} (deno ${Deno.version.deno}, v8 ${Deno.version.v8})`);
  return 0;
}
