import assert from "node:assert/strict";
import {
  checkKernelCall,
  KERNEL_FAMILIES,
  KERNEL_NAMES,
  type KernelFamily,
  kernelMayMutate,
  kernelMutates,
  kernelSizes,
  kernelSpec,
} from "./kernels.ts";

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

Deno.test("lstm_cell_backward: its extra h gradients set its input count, and a bad count is named", () => {
  const [B, H] = [2, 3], n = B * H * 4;
  const ins = [4 * n, 2 * n, 2 * n, 2 * n];
  const outs = [4 * n, 2 * n];
  for (const extra of [0, 1, 2]) {
    const more = new Array<number>(extra).fill(n);
    assert.deepEqual(
      checkKernelCall("lstm_cell_backward", [...ins, ...more], outs, [B, H, extra]).inputs,
      [...ins, ...more],
    );
  }
  assert.throws(
    () => checkKernelCall("lstm_cell_backward", ins, outs, [B, H, 3]),
    /extra must be 0, 1 or 2, got 3/,
  );
  assert.throws(
    () => checkKernelCall("lstm_cell_backward", ins, outs, [B, H, 1]),
    /lstm_cell_backward/,
  );
  assert.throws(
    () => checkKernelCall("lstm_cell_backward", ins, outs, [B, H]),
    /batch, hidden, extra/,
  );
});

Deno.test("lstm_step: recurrent sets its input count; a step past the sequence is named", () => {
  const [B, S, H] = [2, 4, 3], n = B * H * 4;
  const outs = [2 * n, n, 4 * n];
  for (const rec of [0, 1]) {
    const ins = rec ? [4 * S * n, 2 * n, n, 4 * H * H * 4] : [4 * S * n, 2 * n];
    assert.deepEqual(checkKernelCall("lstm_step", ins, outs, [B, S, H, S - 1, rec]).inputs, ins);
  }
  const ins = [4 * S * n, 2 * n];
  assert.throws(
    () => checkKernelCall("lstm_step", ins, outs, [B, S, H, S, 0]),
    /t = 4 must be below steps = 4/,
  );
  assert.throws(
    () => checkKernelCall("lstm_step", ins, outs, [B, S, H, 0, 2]),
    /recurrent must be 0 or 1, got 2/,
  );
  assert.throws(
    () => checkKernelCall("lstm_step", ins, outs, [B, S, H, 0, 1]),
    /expected 4 input buffers \(xw, state, ...\(h, whh\)\), got 2/,
  );
});

Deno.test("lstm_step_backward: h's gradient comes in after the last step and goes out before the first", () => {
  const [B, S, H] = [2, 4, 3], n = B * H * 4, w = 4 * H * H * 4;
  const base = [4 * n, 2 * n, 2 * n, 2 * n, S * n, w];
  for (let t = 0; t < S; t++) {
    const sizes = kernelSizes("lstm_step_backward", [B, S, H, t]);
    assert.deepEqual(sizes.inputs, t < S - 1 ? [...base, n] : base, `inputs at t = ${t}`);
    assert.deepEqual(sizes.outputs, t > 0 ? [4 * n, 2 * n, n] : [4 * n, 2 * n], `outputs at ${t}`);
  }
  assert.throws(
    () => checkKernelCall("lstm_step_backward", base, [4 * n, 2 * n], [B, S, H, 1]),
    /expected 7 input buffers/,
  );
  assert.throws(
    () => kernelSizes("lstm_step_backward", [B, S, H, S]),
    /lstm_step_backward: t = 4 must be below steps = 4/,
  );
});

Deno.test("the multi-tensor updates: sizes and in-place inputs follow count and momentum; bad params named", () => {
  const F = 4;
  // Two tensors of 3 and 0 elements.
  const p = (momentum: number) => [2, 0.1, momentum, 0, 0, 0, 1, 3, 0];
  assert.deepEqual(
    kernelSizes("sgd_update_multi", p(0.9)).inputs,
    [3, 3, 3, 0, 0, 0].map((n) => n * F),
  );
  assert.deepEqual(kernelMutates("sgd_update_multi", p(0.9)), [0, 2, 3, 5]);
  assert.deepEqual(kernelSizes("sgd_update_multi", p(0)).inputs, [3, 3, 0, 0].map((n) => n * F));
  assert.deepEqual(kernelMutates("sgd_update_multi", p(0)), [0, 2]);
  const adam = [2, 1e-3, 0.9, 0.999, 1e-8, 0, 1, 3, 0];
  assert.deepEqual(kernelMutates("adamw_update_multi", adam), [0, 2, 3, 4, 6, 7]);
  assert.equal(kernelSpec("adamw_update_multi").flops(adam), 36);
  assert.ok(kernelMayMutate("sgd_update_multi") && kernelMayMutate("sgd_update"));
  assert.ok(!kernelMayMutate("add"));
  assert.deepEqual(kernelMutates("add", [0]), []);
  assert.throws(
    () => kernelSizes("sgd_update_multi", [2, 0.1, 0.9, 0, 0, 0]),
    /sgd_update_multi: expected at least 7 params \(count, lr, .*\), got 6/,
  );
  assert.throws(
    () => kernelSizes("sgd_update_multi", [2, 0.1, 0.9, 0, 0, 0, 1, 3]),
    /expected 9 params \(.* with count 2\), got 8/,
  );
  assert.throws(
    () => kernelSizes("adamw_update_multi", [1, 1e-3, 0.9, 0.999, 1e-8, 0, 1, 2.5]),
    /adamw_update_multi: n\[0\] \(param 7\) must be a non-negative integer, got 2.5/,
  );
  assert.throws(
    () => checkKernelCall("sgd_update_multi", [12, 12, 12], [], p(0)),
    /expected 4 input buffers/,
  );
});
