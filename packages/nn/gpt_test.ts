import assert from "node:assert/strict";
import { fromTypedArray, setDefaultBackend, tidy } from "@libra/tensor";
import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
import { assertClose, loadFixture } from "./_testing.ts";
import { fromHuggingFaceGPT2, GPT, type GPTConfig } from "./gpt.ts";
import type { HostTensor } from "./safetensors.ts";

setDefaultBackend(new ReferenceBackend());

/** Rewrites our (nn.Linear) layout into Hugging Face's: prefix, Conv1D [in, out], mask buffers, lm_head. */
function toHuggingFace(ours: Map<string, HostTensor>, T: number): Map<string, HostTensor> {
  const hf = new Map<string, HostTensor>();
  for (const [k, t] of ours) {
    if (/(c_attn|c_proj|c_fc)\.weight$/.test(k)) {
      const [o, i] = t.shape as [number, number];
      const d = new Float32Array(o * i);
      for (let r = 0; r < o; r++) for (let c = 0; c < i; c++) d[c * o + r] = t.data[r * i + c]!;
      hf.set(`transformer.${k}`, { dtype: "f32", shape: [i, o], data: d });
    } else hf.set(`transformer.${k}`, t);
    const m = /^h\.(\d+)\.ln_1\.weight$/.exec(k);
    if (m) {
      hf.set(`transformer.h.${m[1]}.attn.bias`, {
        dtype: "f32",
        shape: [1, 1, T, T],
        data: new Float32Array(T * T),
      });
    }
  }
  hf.set("lm_head.weight", ours.get("wte.weight")!);
  return hf;
}

Deno.test("fromHuggingFaceGPT2() turns a Hugging Face layout into ours: the PyTorch GPT fixture loads strictly and reproduces its logits", async () => {
  const f = await loadFixture("gpt");
  const cfg = f.config as unknown as GPTConfig;
  const hf = toHuggingFace(f.withPrefix("param."), cfg.contextLength);
  const model = new GPT(cfg);
  model.loadStateDict(fromHuggingFaceGPT2(hf));
  tidy(() => {
    const x = f.get("input.x");
    const y = model.forward(fromTypedArray(x.data, x.shape));
    assertClose("logits", y.toTypedArray(), f.get("expected.output").data, {
      atol: 5e-5,
      rtol: 1e-3,
    });
  });
  model.dispose();
});

Deno.test("fromHuggingFaceGPT2() rejects a Conv1D weight that is not 2-D", () => {
  assert.throws(
    () =>
      fromHuggingFaceGPT2(
        new Map([["h.0.attn.c_attn.weight", {
          dtype: "f32",
          shape: [4],
          data: new Float32Array(4),
        }]]),
      ),
    /h\.0\.attn\.c_attn\.weight should be a 2-D f32 Conv1D weight, got f32\[4\]/,
  );
});
