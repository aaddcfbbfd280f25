/**
 * The browser's form rules agree with the API's schema: over many forms, valid and not,
 * both accept the same ones and name the same fields.
 */
import assert from "node:assert/strict";
import { DEFAULT_RUN_STEPS, realCatalog } from "@libra/api";
import { DEFAULT_STEPS } from "@libra/train";
import { LIVE_COST_MODELS, zooPresets } from "./catalog.ts";
import { EMPTY_FORM, type FormChoices, parseConfigForm } from "./config_form_data.ts";
import { parseConfigFormOnServer } from "./config_form_server.ts";

Deno.test("the form's browser rules and the API's schema accept the same forms and name the same fields", async () => {
  const catalog = (await realCatalog())!;
  const choices: FormChoices = {
    models: catalog.models,
    presets: await zooPresets(),
    policies: catalog.policies,
    costModels: [...LIVE_COST_MODELS],
  };
  const pools: Record<string, string[]> = {
    name: ["a run", "", "   ", "x".repeat(101), "tab\there"],
    model: ["mlp", "gpt", "Nope", "nonesuch"],
    preset: ["tiny", "small", "huge", ""],
    device: ["cpu", "cuda", "tpu"],
    budgetRatio: ["0.5", "1", "0", "1.5", "", "abc"],
    budgetBytes: ["", "1000", "-5", "2.5"],
    policy: ["dtr-eq", "libra", "lru+swap", "BAD", "nonsense"],
    costModel: ["measured", "analytic", "profiled"],
    steps: ["3", "0", "10001", "2.5", ""],
    seed: ["0", "-1", "x", ""],
    overheadLimit: ["2", "1.5", "1", "0.5", "", "lots", "1e7"],
  };
  let x = 7;
  const pick = (xs: string[]) => xs[(x = (x * 1103515245 + 12345) % 2 ** 31) % xs.length]!;
  let accepted = 0;
  for (let i = 0; i < 600; i++) {
    const form = Object.fromEntries(
      Object.entries(pools).map(([k, xs]) => [k, i % 3 === 0 ? xs[0]! : pick(xs)]),
    );
    if (i % 3 === 0) form.budgetBytes = ""; // a third valid but for one field at most
    const client = parseConfigForm(form, choices);
    const server = parseConfigFormOnServer(form, choices);
    assert.equal(
      client.ok,
      server.ok,
      `${JSON.stringify(form)}: ${JSON.stringify([client, server])}`,
    );
    if (client.ok && server.ok) {
      accepted++;
      assert.deepEqual(client.value, server.value);
    } else if (!client.ok && !server.ok) {
      const fields = (r: typeof client) =>
        r.ok ? [] : [...new Set(r.errors.map((e) => e.field.split(".")[0]))].sort();
      assert.deepEqual(fields(client), fields(server), JSON.stringify(form));
    }
  }
  assert.ok(accepted >= 100, `${accepted} valid forms among the 600`);
});

Deno.test("the form, the lab's API and libra run measure the same number of steps by default", () => {
  assert.equal(DEFAULT_RUN_STEPS, DEFAULT_STEPS);
  assert.equal(EMPTY_FORM.steps, String(DEFAULT_RUN_STEPS));
});
