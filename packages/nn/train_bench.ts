/**
 * Training-step time of every tiny and small model of the zoo on the native
 * cpu backend (AdamW, synthetic data, batch from the preset). Run with
 * `deno bench -A packages/nn/train_bench.ts`; skipped when the native library
 * is not built. `LIBRA_BENCH_THREADS=n` sets the kernel threads (default: the
 * library's). On a shared, oversubscribed machine OpenMP with more threads
 * than free cores can be several times slower than 1 thread.
 */

import { manualSeed } from "@libra/tensor";
import { nativeBackend, nativeSkipReason } from "./_testing.ts";
import { AdamW } from "./optim.ts";
import { trainStep } from "./train.ts";
import { createData, createModel, MODEL_NAMES } from "./zoo.ts";

const threads = Number(Deno.env.get("LIBRA_BENCH_THREADS") ?? 0);
const backend = await nativeBackend();
if (backend !== null && threads > 0) {
  (backend as { setThreads?: (n: number) => void }).setThreads?.(threads);
}
if (backend === null) console.log(`train_bench: skipped: ${nativeSkipReason()}`);

for (const preset of ["tiny", "small"]) {
  for (const name of MODEL_NAMES) {
    if (backend === null) {
      Deno.bench({ name: `${name}/${preset} training step`, ignore: true, fn() {} });
      continue;
    }
    manualSeed(0);
    const model = createModel(name, preset, { backend });
    const data = createData(name, preset);
    const batch = data.next();
    const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
    model.train();
    Deno.bench({
      name: `${name}/${preset} training step`,
      group: preset,
      warmup: 2,
      n: preset === "tiny" ? 20 : 5,
      fn() {
        trainStep({ model, batch, optimizer });
      },
    });
  }
}
