/**
 * The `libra` command. Each subcommand lives in `commands/<name>.ts` and exports
 * `summary` (one line for `--help`) and `main(args)`; this file only dispatches,
 * so subcommands are loaded on demand and can be added without touching it.
 *
 * @module
 */

import denoJson from "./deno.json" with { type: "json" };

/** Shape of a subcommand module. */
export interface Command {
  /** One-line description shown by `libra --help`. */
  summary: string;
  /** Runs the command; resolves to the process exit code. */
  main(args: string[]): Promise<number> | number;
}

/** Subcommands known to this build, by name. */
export const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  version: () => import("./commands/version.ts"),
  simulate: () => import("./commands/simulate.ts"),
  run: () => import("./commands/run.ts"),
  serve: () => import("./commands/serve.ts"),
  worker: () => import("./commands/worker.ts"),
  start: () => import("./commands/start.ts"),
  sweep: () => import("./commands/sweep.ts"),
};

function usage(summaries: [string, string][]): string {
  const width = Math.max(...summaries.map(([n]) => n.length));
  return [
    `libra ${denoJson.version}: tensor re-materialization for training in less memory`,
    "",
    "Usage: deno task libra <command> [options]    (deno task libra <command> --help for options)",
    "",
    "Commands:",
    ...summaries.map(([n, s]) => `  ${n.padEnd(width)}  ${s}`),
  ].join("\n");
}

/** Runs the CLI with `args`; returns the exit code. */
export async function run(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const summaries: [string, string][] = [];
    for (const [n, load] of Object.entries(COMMANDS)) summaries.push([n, (await load()).summary]);
    console.log(usage(summaries));
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-V") return (await COMMANDS.version!()).main([]);
  const load = COMMANDS[name];
  if (!load) {
    console.error(
      `libra: unknown command "${name}" (commands: ${
        Object.keys(COMMANDS).join(", ")
      }; see --help)`,
    );
    return 2;
  }
  try {
    return await (await load()).main(rest);
  } catch (e) {
    console.error(`libra ${name}: ${e instanceof Error ? e.message : String(e)}`);
    if (Deno.env.get("LIBRA_DEBUG")) console.error(e);
    return 1;
  }
}

if (import.meta.main) Deno.exit(await run(Deno.args));
