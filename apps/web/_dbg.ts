import { startE2E } from "./_e2e_harness.ts";
const h = await startE2E();
const pt = (policy: string, ratio: number, overhead: number | null) => ({
  kind: "live",
  model: "mlp",
  preset: "tiny",
  policy,
  ratio,
  feasible: overhead !== null,
  overhead,
});
await h.server.lab.store.ingestBench({
  suite: "x",
  machine: {},
  results: [pt("lru", 0.5, 14), pt("lru", 0.6, 1.2), pt("lru", 0.3, null)] as never,
});
const html = await (await fetch(`${h.server.url}/compare?model=mlp/tiny`)).text();
console.log(
  html.slice(html.indexOf('data-chart="overhead"'), html.indexOf('data-chart="overhead"') + 200),
);
for (const m of html.matchAll(/aria-label="[^"]*"/g)) console.log(m[0]);
await h.close();
