/**
 * `resnet`: residual networks with torchvision's module names, so a torchvision
 * state dict loads without renaming. Two families:
 * - CIFAR style (He et al. 2016, section 4.2; the DTR evaluation's ResNet-32):
 *   a 3x3 stem, three stages of basic blocks (widths 16, 32, 64), global average
 *   pooling, a linear classifier. Where a block changes shape the shortcut is a
 *   1x1 convolution plus BatchNorm (option B) named `downsample.0/1`.
 * - ImageNet style (ResNet-50): 7x7/2 stem and 3x3/2 max pooling, bottleneck
 *   blocks (1x1, 3x3 with the stride, 1x1 expanding by 4: torchvision v1.5).
 *
 * @module
 */

import { chain, globalAvgPool, maxPool2d, type Tensor, tidy } from "./_ops.ts";
import { BatchNorm2d, Conv2d, type Layer, Linear, Sequential } from "./layers.ts";
import { Module } from "./module.ts";

/** Configuration of {@link ResNet}. */
export interface ResNetConfig {
  /** `"basic"` (two 3x3 convs) or `"bottleneck"` (1x1, 3x3, 1x1 x4). */
  block: "basic" | "bottleneck";
  /** `"cifar"`: 3x3 stride-1 stem; `"imagenet"`: 7x7 stride-2 stem + max pool. */
  stem: "cifar" | "imagenet";
  /** Blocks per stage. */
  layers: number[];
  /** Base width per stage (stage 1 keeps the resolution, later stages halve it). */
  widths: number[];
  /** Input image channels. */
  inChannels: number;
  /** Number of classes. */
  numClasses: number;
}

/** Two 3x3 convolutions with a residual connection. */
export class BasicBlock extends Module implements Layer {
  /** Output channels per unit of block width. */
  static readonly expansion = 1;
  /** First 3x3 convolution. */
  readonly conv1: Conv2d;
  /** Batch norm after `conv1`. */
  readonly bn1: BatchNorm2d;
  /** Second 3x3 convolution. */
  readonly conv2: Conv2d;
  /** Batch norm after `conv2`. */
  readonly bn2: BatchNorm2d;
  /** 1x1 projection of the shortcut when the shape changes; otherwise null. */
  readonly downsample: Sequential | null;
  /** A basic block from `cin` channels to `width`, with `stride` on its first convolution. */
  constructor(cin: number, width: number, stride: number) {
    super();
    this.conv1 = this.child(
      "conv1",
      new Conv2d(cin, width, 3, { stride, padding: 1, bias: false }),
    );
    this.bn1 = this.child("bn1", new BatchNorm2d(width));
    this.conv2 = this.child("conv2", new Conv2d(width, width, 3, { padding: 1, bias: false }));
    this.bn2 = this.child("bn2", new BatchNorm2d(width));
    this.downsample = stride !== 1 || cin !== width
      ? this.child(
        "downsample",
        new Sequential(new Conv2d(cin, width, 1, { stride, bias: false }), new BatchNorm2d(width)),
      )
      : null;
  }
  /** `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`. */
  forward(x: Tensor): Tensor {
    return tidy(() => {
      const out = this.bn2.forward(
        this.conv2.forward(this.bn1.forward(this.conv1.forward(x)).relu()),
      );
      const sc = this.downsample ? this.downsample.forward(x) : x;
      return out.add(sc).relu();
    });
  }
}

/** 1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, with a residual connection. */
export class Bottleneck extends Module implements Layer {
  /** Output channels per unit of block width. */
  static readonly expansion = 4;
  /** 1x1 reduction. */
  readonly conv1: Conv2d;
  /** Batch norm after `conv1`. */
  readonly bn1: BatchNorm2d;
  /** 3x3 convolution (carries the stride). */
  readonly conv2: Conv2d;
  /** Batch norm after `conv2`. */
  readonly bn2: BatchNorm2d;
  /** 1x1 expansion to `4 * width`. */
  readonly conv3: Conv2d;
  /** Batch norm after `conv3`. */
  readonly bn3: BatchNorm2d;
  /** 1x1 projection of the shortcut when the shape changes; otherwise null. */
  readonly downsample: Sequential | null;
  /** A bottleneck block from `cin` channels to `4 * width`, with `stride` on its 3x3 convolution. */
  constructor(cin: number, width: number, stride: number) {
    super();
    const cout = width * 4;
    this.conv1 = this.child("conv1", new Conv2d(cin, width, 1, { bias: false }));
    this.bn1 = this.child("bn1", new BatchNorm2d(width));
    this.conv2 = this.child(
      "conv2",
      new Conv2d(width, width, 3, { stride, padding: 1, bias: false }),
    );
    this.bn2 = this.child("bn2", new BatchNorm2d(width));
    this.conv3 = this.child("conv3", new Conv2d(width, cout, 1, { bias: false }));
    this.bn3 = this.child("bn3", new BatchNorm2d(cout));
    this.downsample = stride !== 1 || cin !== cout
      ? this.child(
        "downsample",
        new Sequential(new Conv2d(cin, cout, 1, { stride, bias: false }), new BatchNorm2d(cout)),
      )
      : null;
  }
  /** The bottleneck branch plus the shortcut, then ReLU. */
  forward(x: Tensor): Tensor {
    return tidy(() => {
      let out = this.bn1.forward(this.conv1.forward(x)).relu();
      out = this.bn2.forward(this.conv2.forward(out)).relu();
      out = this.bn3.forward(this.conv3.forward(out));
      const sc = this.downsample ? this.downsample.forward(x) : x;
      return out.add(sc).relu();
    });
  }
}

/** A ResNet; stages are children `layer1`, `layer2`, ... (Sequentials of blocks). */
export class ResNet extends Module implements Layer {
  /** Stem convolution. */
  readonly conv1: Conv2d;
  /** Batch norm after the stem. */
  readonly bn1: BatchNorm2d;
  /** The stages of blocks. */
  readonly stages: Sequential[] = [];
  /** Classifier after global average pooling. */
  readonly fc: Linear;
  /** Builds the network described by `config`. */
  constructor(readonly config: ResNetConfig) {
    super();
    const c = config;
    if (c.layers.length === 0 || c.layers.length !== c.widths.length) {
      throw new RangeError(
        `ResNet: layers [${c.layers}] and widths [${c.widths}] must be non-empty and equally long`,
      );
    }
    const Block = c.block === "basic" ? BasicBlock : Bottleneck;
    const w0 = c.widths[0]!;
    this.conv1 = this.child(
      "conv1",
      c.stem === "imagenet"
        ? new Conv2d(c.inChannels, w0, 7, { stride: 2, padding: 3, bias: false })
        : new Conv2d(c.inChannels, w0, 3, { padding: 1, bias: false }),
    );
    this.bn1 = this.child("bn1", new BatchNorm2d(w0));
    let cin = w0;
    c.layers.forEach((n, s) => {
      const blocks: Layer[] = [];
      for (let b = 0; b < n; b++) {
        blocks.push(new Block(cin, c.widths[s]!, s > 0 && b === 0 ? 2 : 1));
        cin = c.widths[s]! * Block.expansion;
      }
      this.stages.push(this.child(`layer${s + 1}`, new Sequential(...blocks)));
    });
    this.fc = this.child("fc", new Linear(cin, c.numClasses));
  }
  /** `[N, inChannels, H, W]` -> logits `[N, numClasses]`. */
  forward(x: Tensor): Tensor {
    // Each value between stages is freed once the next stage has run.
    return chain(x, [
      (h) =>
        tidy(() => {
          const y = this.bn1.forward(this.conv1.forward(h)).relu();
          return this.config.stem === "imagenet" ? maxPool2d(y, 3, 2, 1) : y;
        }),
      ...this.stages.map((s) => (h: Tensor) => s.forward(h)),
      (h) => tidy(() => this.fc.forward(globalAvgPool(h))),
    ]);
  }
}
