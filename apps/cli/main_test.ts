import assert from "node:assert/strict";
import { COMMANDS, run } from "./main.ts";

Deno.test("run() returns 2 and names the command for an unknown subcommand", async () => {
  const errors: string[] = [];
  const orig = console.error;
  console.error = (m: string) => errors.push(m);
  try {
    assert.equal(await run(["no-such-command"]), 2);
  } finally {
    console.error = orig;
  }
  assert.match(errors.join("\n"), /unknown command "no-such-command"/);
});

Deno.test("every registered command loads and has a summary", async () => {
  for (const [name, load] of Object.entries(COMMANDS)) {
    const cmd = await load();
    assert.equal(typeof cmd.main, "function", name);
    assert.ok(cmd.summary.length > 0, name);
  }
});
