import assert from "node:assert/strict";
import { KERNEL_FAMILIES, KERNEL_NAMES, type KernelFamily } from "./kernels.ts";

const FAMILIES = Object.keys(KERNEL_FAMILIES) as KernelFamily[];

Deno.test("kernel families partition the table, in table order", () => {
  assert.deepEqual(FAMILIES.flatMap((f) => KERNEL_FAMILIES[f]), [...KERNEL_NAMES]);
});

Deno.test("every kernel family lines up with native/cpu/<family>.c", async (t) => {
  const dir = new URL("../../native/cpu/", import.meta.url);
  try {
    await Deno.stat(dir);
  } catch {
    t.step({ name: "native/cpu is not beside this package: skipped", ignore: true, fn() {} });
    return;
  }
  const sources = new Map<KernelFamily, string>();
  for (const f of FAMILIES) sources.set(f, await Deno.readTextFile(new URL(`${f}.c`, dir)));
  for (const f of FAMILIES) {
    for (const k of KERNEL_FAMILIES[f]) {
      // defined as `k_<name>(` or through a family macro such as `BINARY(add, ...)`
      const mention = new RegExp(`(?<![a-z0-9])${k}(?![a-z0-9_])`);
      assert.ok(
        mention.test(sources.get(f)!),
        `kernel ${k} (family ${f}) is not in native/cpu/${f}.c`,
      );
      for (const g of FAMILIES) {
        if (g === f) continue;
        assert.ok(
          !new RegExp(`\\bk_${k}\\(`).test(sources.get(g)!),
          `kernel ${k} (family ${f}) is defined in native/cpu/${g}.c`,
        );
      }
    }
  }
});

Deno.test("the reference backend implements each family in its own module", async () => {
  for (const f of FAMILIES) {
    const mod = await import(`./testing/reference/${f}.ts`);
    const table = mod[`REF_${f.toUpperCase()}`] as Record<string, unknown>;
    assert.deepEqual(Object.keys(table), [...KERNEL_FAMILIES[f]], `reference family ${f}`);
  }
});
