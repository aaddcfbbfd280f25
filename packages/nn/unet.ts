/**
 * `unet`: an encoder-decoder with skip connections (Ronneberger et al. 2015)
 * with "same" padding: each level is a DoubleConv (3x3 conv, BatchNorm, ReLU,
 * twice); 2x2 max pooling down; nearest x2 upsampling followed by a 3x3 conv up;
 * the skip is concatenated before the level's decoder DoubleConv; a 1x1 conv
 * head gives per-pixel class logits.
 *
 * Names: `downs.{i}` and `decs.{i}` (DoubleConv: conv1, bn1, conv2, bn2),
 * `bottleneck`, `ups.{i}` (Conv2d after upsampling), `head`.
 *
 * @module
 */

import { concat, maxPool2d, type Tensor, tidy, upsampleNearest2x } from "./_ops.ts";
import { BatchNorm2d, Conv2d, type Layer, ModuleList } from "./layers.ts";
import { Module } from "./module.ts";

/** Configuration of {@link UNet}. */
export interface UNetConfig {
  /** Input image channels. */
  inChannels: number;
  /** Number of classes (output channels). */
  numClasses: number;
  /** Channels of the first level; level i has `baseWidth * 2^i`. */
  baseWidth: number;
  /** Number of down-sampling levels (input sides must be divisible by 2^depth). */
  depth: number;
}

/** (3x3 conv without bias, BatchNorm, ReLU) twice. */
export class DoubleConv extends Module implements Layer {
  /** First 3x3 convolution. */
  readonly conv1: Conv2d;
  /** Batch norm after `conv1`. */
  readonly bn1: BatchNorm2d;
  /** Second 3x3 convolution. */
  readonly conv2: Conv2d;
  /** Batch norm after `conv2`. */
  readonly bn2: BatchNorm2d;
  /** Two conv-BN-ReLU layers from `cin` to `cout` channels ("same" padding). */
  constructor(cin: number, cout: number) {
    super();
    this.conv1 = this.child("conv1", new Conv2d(cin, cout, 3, { padding: 1, bias: false }));
    this.bn1 = this.child("bn1", new BatchNorm2d(cout));
    this.conv2 = this.child("conv2", new Conv2d(cout, cout, 3, { padding: 1, bias: false }));
    this.bn2 = this.child("bn2", new BatchNorm2d(cout));
  }
  /** `relu(bn2(conv2(relu(bn1(conv1(x))))))`. */
  forward(x: Tensor): Tensor {
    return tidy(() => {
      const h = this.bn1.forward(this.conv1.forward(x)).relu();
      return this.bn2.forward(this.conv2.forward(h)).relu();
    });
  }
}

/** U-Net. Input `[N, inChannels, H, W]`; output logits `[N, numClasses, H, W]`. */
export class UNet extends Module implements Layer {
  /** Encoder levels. */
  readonly downs: ModuleList<DoubleConv>;
  /** The lowest level. */
  readonly bottleneck: DoubleConv;
  /** Decoder convolutions after each nearest 2x up-sampling. */
  readonly ups: ModuleList<Conv2d>;
  /** Decoder levels (after concatenating the skip connection). */
  readonly decs: ModuleList<DoubleConv>;
  /** 1x1 convolution to the classes. */
  readonly head: Conv2d;
  /** Builds the network described by `config`. */
  constructor(readonly config: UNetConfig) {
    super();
    const { inChannels, numClasses, baseWidth: w, depth: d } = config;
    if (!Number.isInteger(d) || d < 1) throw new RangeError(`UNet: depth must be >= 1, got ${d}`);
    const widths = Array.from({ length: d + 1 }, (_, i) => w * 2 ** i);
    this.downs = this.child(
      "downs",
      new ModuleList(
        widths.slice(0, d).map((c, i) => new DoubleConv(i === 0 ? inChannels : widths[i - 1]!, c)),
      ),
    );
    this.bottleneck = this.child("bottleneck", new DoubleConv(widths[d - 1]!, widths[d]!));
    this.ups = this.child(
      "ups",
      new ModuleList(
        widths.slice(0, d).map((c, i) => new Conv2d(widths[i + 1]!, c, 3, { padding: 1 })),
      ),
    );
    this.decs = this.child(
      "decs",
      new ModuleList(widths.slice(0, d).map((c) => new DoubleConv(2 * c, c))),
    );
    this.head = this.child("head", new Conv2d(widths[0]!, numClasses, 1));
  }
  /** Per-pixel logits `[N, classes, H, W]` for images `[N, in, H, W]`. */
  forward(x: Tensor): Tensor {
    const d = this.config.depth;
    const [, , H, W] = x.shape as [number, number, number, number];
    if (x.ndim !== 4 || H % 2 ** d !== 0 || W % 2 ** d !== 0) {
      throw new RangeError(
        `UNet(depth ${d}): input [${x.shape}] must be [N, C, H, W] with H and W divisible by ${
          2 ** d
        }`,
      );
    }
    // Each value is freed once the last layer that reads it has run (a skip connection's
    // after its decoder; what the backward pass needs of it, autograd keeps).
    const skips: Tensor[] = [];
    let h = x;
    const next = (y: Tensor) => {
      if (h !== x) h.dispose();
      h = y;
    };
    for (const down of this.downs) {
      const s = down.forward(h);
      skips.push(s);
      next(maxPool2d(s, 2, 2, 0));
    }
    next(this.bottleneck.forward(h));
    for (let i = d - 1; i >= 0; i--) {
      next(tidy(() => this.ups.at(i).forward(upsampleNearest2x(h))));
      next(tidy(() => this.decs.at(i).forward(concat([skips[i]!, h], 1))));
      skips[i]!.dispose();
    }
    const out = this.head.forward(h);
    next(out);
    return out;
  }
}
