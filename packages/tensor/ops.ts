/**
 * The op table: every differentiable tensor op, its forward (which validates
 * shapes and dtypes, allocates the output and runs kernels through the
 * backend) next to its gradient rule. Autodiff is data: `OP_TABLE[name]` is
 * `{ name, forward, backward }`, and a recorded graph node points at the entry.
 * Ops live by kernel family in `ops/<family>.ts` (elementwise, reduce, matmul,
 * layout, conv, norm, random, loss_optim), as the kernels do in
 * `kernels/<family>.ts` and `native/cpu/<family>.c`; `ops/rnn.ts` holds a
 * whole LSTM layer as one op over kernels of several families.
 *
 * Every op is also exported as a function (`add(a, b)`) and, for the common
 * ones, as a {@link Tensor} method (`a.add(b)`). Binary ops follow numpy
 * broadcasting and accept a number on either side. Errors name the op and the
 * shapes involved, e.g. `matmul: inner dimensions differ: [2,3] @ [4,5]`.
 *
 * @module
 */

export {
  add,
  broadcastTo,
  cast,
  clone,
  div,
  eq,
  exp,
  ge,
  gelu,
  gt,
  le,
  log,
  lstmCell,
  lt,
  mul,
  ne,
  neg,
  pow,
  relu,
  rsqrt,
  sigmoid,
  silu,
  sqrt,
  sub,
  tanh,
  where,
} from "./ops/elementwise.ts";
export { argmax, logSoftmax, max, mean, softmax, sum } from "./ops/reduce.ts";
export { linear, matmul, type MatmulOptions } from "./ops/matmul.ts";
export {
  concat,
  embedding,
  flatten,
  indexSelect,
  narrow,
  permute,
  reshape,
  slice,
  squeeze,
  transpose,
  unsqueeze,
} from "./ops/layout.ts";
export {
  avgPool2d,
  conv2d,
  type Conv2dOptions,
  globalAvgPool,
  maxPool2d,
  type Pool2dOptions,
  upsampleNearest2x,
} from "./ops/conv.ts";
export { batchNorm, type BatchNormOptions, layerNorm, rmsNorm } from "./ops/norm.ts";
export { dropout } from "./ops/random.ts";
export { crossEntropy, mse } from "./ops/loss_optim.ts";
export { lstmLayer } from "./ops/rnn.ts";
import type { GradRule } from "./autograd.ts";
import { ELEMENTWISE_OPS } from "./ops/elementwise.ts";
import { REDUCE_OPS } from "./ops/reduce.ts";
import { MATMUL_OPS } from "./ops/matmul.ts";
import { LAYOUT_OPS } from "./ops/layout.ts";
import { CONV_OPS } from "./ops/conv.ts";
import { NORM_OPS } from "./ops/norm.ts";
import { RANDOM_OPS } from "./ops/random.ts";
import { LOSS_OPTIM_OPS } from "./ops/loss_optim.ts";
import { RNN_OPS } from "./ops/rnn.ts";

/**
 * The name of a differentiable op: a key of {@link OP_TABLE} and the `name` of its
 * gradient rule.
 */
export type OpName =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "relu"
  | "gelu_tanh"
  | "gelu_erf"
  | "silu"
  | "sigmoid"
  | "tanh"
  | "add_scalar"
  | "mul_scalar"
  | "rsub_scalar"
  | "rdiv_scalar"
  | "pow_scalar"
  | "where"
  | "broadcast_to"
  | "lstm_cell"
  | "clone"
  | "sum"
  | "mean"
  | "max"
  | "softmax"
  | "log_softmax"
  | "matmul"
  | "linear"
  | "permute"
  | "reshape"
  | "slice"
  | "concat"
  | "index_select"
  | "embedding"
  | "conv2d"
  | "max_pool2d"
  | "avg_pool2d"
  | "global_avg_pool"
  | "upsample_nearest2x"
  | "batch_norm"
  | "layer_norm"
  | "rms_norm"
  | "dropout"
  | "cross_entropy"
  | "mse"
  | "lstm_layer";

/**
 * The op table as data: every differentiable op's gradient rule by name (the
 * `op` of recorded graph nodes points at these entries).
 */
export const OP_TABLE: Readonly<Record<OpName, GradRule>> = {
  ...ELEMENTWISE_OPS,
  ...REDUCE_OPS,
  ...MATMUL_OPS,
  ...LAYOUT_OPS,
  ...CONV_OPS,
  ...NORM_OPS,
  ...RANDOM_OPS,
  ...LOSS_OPTIM_OPS,
  ...RNN_OPS,
};
