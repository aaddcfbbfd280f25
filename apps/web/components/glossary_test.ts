import assert from "node:assert/strict";
import { entryFor, formatStat, GLOSSARY } from "./glossary.ts";

Deno.test("statistics get human labels, units from the glossary or from their names", () => {
  assert.equal(entryFor("budgetStepMs").label, "median step under the budget");
  assert.equal(formatStat(12.5, entryFor("budgetStepMs").unit), "12.5 ms");
  assert.equal(formatStat(2500, "ms"), "2.50 s");
  assert.equal(formatStat(0.9375, entryFor("overheadConfidence").unit), "93.8 %");
  assert.equal(formatStat(3 * 1024 * 1024, entryFor("swapInBytes").unit), "3.00 MiB");
  assert.equal(formatStat(null, "ms"), "—");
  const sim = entryFor("evictions[dtr-eq@0.5]");
  assert.equal(sim.label, "evictions, dtr-eq at ratio 0.5");
  assert.equal(sim.unit, "count");
  const unknown = entryFor("fancyNewBytes");
  assert.deepEqual([unknown.label, unknown.unit], ["fancy new", "bytes"]);
  for (const [k, e] of Object.entries(GLOSSARY)) {
    assert.doesNotMatch(e.label, /[a-z][A-Z]/, `${k}: a label, not a key`);
    assert.ok(e.help.length > 10, `${k} explained`);
  }
});
