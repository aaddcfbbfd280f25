/**
 * `deno doc --lint` over every exported entry point of every published
 * workspace member (those whose deno.json does not say `"publish": false`).
 * Exits non-zero, with deno's report, when any symbol lacks JSDoc or an
 * explicit type.
 *
 * @module
 */

const root = new URL("../", import.meta.url);
const config = JSON.parse(await Deno.readTextFile(new URL("deno.json", root))) as {
  workspace: string[];
};
const entries: string[] = [];
for (const member of config.workspace) {
  const dir = new URL(`${member.replace(/^\.\//, "")}/`, root);
  const pkg = JSON.parse(await Deno.readTextFile(new URL("deno.json", dir))) as {
    publish?: boolean;
    exports?: string | Record<string, string>;
  };
  if (pkg.publish === false || pkg.exports === undefined) continue;
  const exports = typeof pkg.exports === "string" ? [pkg.exports] : Object.values(pkg.exports);
  for (const e of exports) entries.push(new URL(e, dir).pathname);
}
if (entries.length === 0) throw new Error("doc_lint: no published entry points found");
const { code } = await new Deno.Command(Deno.execPath(), {
  args: ["doc", "--lint", ...entries],
  stdout: "inherit",
  stderr: "inherit",
}).output();
Deno.exit(code);
