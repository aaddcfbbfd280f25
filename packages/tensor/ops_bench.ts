/** Per-op overhead of the tensor layer (meta backend: no kernel work, only bookkeeping). */
import { MetaBackend } from "./meta_backend.ts";
import * as T from "./mod.ts";

const meta = new MetaBackend();
T.setDefaultBackend(meta);
const a = T.zeros([4, 4]);
const b = T.zeros([4, 4]);
const w = T.zeros([4, 4], { requiresGrad: true });
const row = T.zeros([4]);

Deno.bench("add same shape, no grad (alloc + run + dispose)", () => {
  T.add(a, b).dispose();
});
Deno.bench("add broadcast, no grad", () => {
  T.add(a, row).dispose();
});
Deno.bench("mul with grad recording (node + saved views)", () => {
  T.mul(a, w).dispose();
});
Deno.bench("matmul + relu + sum, forward and backward in tidy", () => {
  const loss = T.tidy(() => T.matmul(a, w).relu().sum());
  loss.backward();
  loss.dispose();
  w.grad?.dispose();
  w.grad = null;
});
