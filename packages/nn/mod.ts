/**
 * `@libra/nn`: layers, the model zoo of the re-materialization literature,
 * optimizers, losses and safetensors weights, built on `@libra/tensor`.
 *
 * ```ts
 * import { manualSeed, setDefaultBackend } from "@libra/tensor";
 * import { ReferenceBackend } from "@libra/tensor/testing/reference-backend";
 * import { AdamW, createData, createModel, train } from "@libra/nn";
 * setDefaultBackend(new ReferenceBackend());
 * manualSeed(0);
 * const model = createModel("mlp", "tiny");
 * const data = createData("mlp", "tiny");
 * const result = train({ model, data, optimizer: new AdamW(model.parameters(), { lr: 0.01 }), steps: 3 });
 * if (!(result.losses.length === 3)) throw new Error("example: unexpected result");
 * ```
 *
 * Every forward pass is made of tensor ops only, so the re-materialization
 * runtime (itself a `Backend`) can run any model of the zoo under a budget.
 *
 * @module
 */

export * from "./data.ts";
export * from "./gpt.ts";
export * from "./layers.ts";
export * from "./loss.ts";
export * from "./lstm.ts";
export * from "./mlp.ts";
export * from "./module.ts";
export * from "./optim.ts";
export * from "./resnet.ts";
export * from "./safetensors.ts";
export * from "./schedule.ts";
export * from "./train.ts";
export * from "./unet.ts";
export * from "./zoo.ts";
