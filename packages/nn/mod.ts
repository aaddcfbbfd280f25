/**
 * `@libra/nn`: layers, the model zoo of the re-materialization literature,
 * optimizers, losses and safetensors weights, built on `@libra/tensor`.
 *
 * @module
 */

export * from "./safetensors.ts";
