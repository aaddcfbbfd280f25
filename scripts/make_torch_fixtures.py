#!/usr/bin/env python3
"""Generates the PyTorch reference fixtures of @libra/nn (packages/nn/testdata/).

Run with a Python that has PyTorch (tested with Debian's python3-torch 1.13):

    /usr/bin/python3 scripts/make_torch_fixtures.py

The models below mirror packages/nn/{mlp,resnet,gpt,unet,lstm,layers}.ts exactly: same module tree, so
the same PyTorch state-dict names and shapes (Linear weight [out, in], Conv2d
[out, in, kh, kw], BatchNorm running statistics as buffers). Naming:

- mlp:    layers.{i}.weight/bias (an nn.Sequential of Linear and ReLU; ReLU slots
          hold no parameters, as in PyTorch).
- resnet: torchvision names: conv1, bn1, layer{s}.{b}.conv1/bn1/conv2/bn2[/conv3/bn3],
          layer{s}.{b}.downsample.0 (1x1 conv) / .1 (BatchNorm), fc.
- gpt:    GPT-2 (Hugging Face) names: wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn,
          h.{i}.attn.c_proj, h.{i}.ln_2, h.{i}.mlp.c_fc, h.{i}.mlp.c_proj, ln_f,
          lm_head (untied only). Weights use the nn.Linear layout [out, in]; Hugging
          Face GPT-2 checkpoints store Conv1D weights [in, out] and need a transpose.
- unet:   downs.{i}/bottleneck/decs.{i} are DoubleConv (conv1, bn1, conv2, bn2),
          ups.{i} a 3x3 Conv2d after nearest x2 upsampling, head a 1x1 Conv2d.
- lstm:   embed, lstm (nn.LSTM names weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
          bias_hh_l{k}; gate order i, f, g, o), head.

Each case writes <case>.safetensors with keys
  param.<name>        the PyTorch state dict (parameters and buffers, including BatchNorm's
                      I64 num_batches_tracked, which @libra/nn accepts and ignores) before the step
  input.<name>        inputs (f32, or i32 for indices/targets)
  expected.output     forward output
  expected.loss       scalar loss (shape [])
  grad.<name>         gradient of the loss w.r.t. a parameter or input
  buffer_after.<name> buffers after the forward pass (BatchNorm running statistics)
  step<k>.<name>      parameters after optimizer step k (optimizer cases)
and one entry in fixtures.json with the configuration. Everything is seeded and
computed in float32 on one thread, so the files are reproducible.
"""

import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "packages", "nn", "testdata")

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# --------------------------------------------------------------- safetensors writer


def save_safetensors(path, tensors):
    """Minimal writer (no dependency on the safetensors package): F32 / I32 / I64."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype == torch.float32:
            dtype, fmt = "F32", "f"
        elif t.dtype == torch.int32:
            dtype, fmt = "I32", "i"
        elif t.dtype == torch.int64:
            dtype, fmt = "I64", "q"
        else:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        vals = t.reshape(-1).tolist()
        blob = struct.pack("<" + fmt * len(vals), *vals)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


# --------------------------------------------------------------- models (mirror the TS zoo)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        dims = [c["inFeatures"], *c["hidden"], c["outFeatures"]]
        mods = []
        for i in range(len(dims) - 1):
            mods.append(nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                mods.append(nn.ReLU())
        self.layers = nn.Sequential(*mods)

    def forward(self, x):
        return self.layers(x)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = None
        if stride != 1 or cin != width:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x if self.downsample is None else self.downsample(x)
        return F.relu(out + sc)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        sc = x if self.downsample is None else self.downsample(x)
        return F.relu(out + sc)


class ResNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        block = BasicBlock if c["block"] == "basic" else Bottleneck
        w0 = c["widths"][0]
        self.imagenet_stem = c["stem"] == "imagenet"
        if self.imagenet_stem:
            self.conv1 = nn.Conv2d(c["inChannels"], w0, 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(c["inChannels"], w0, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w0)
        cin = w0
        for s, (n, w) in enumerate(zip(c["layers"], c["widths"])):
            blocks = []
            for b in range(n):
                stride = 2 if (s > 0 and b == 0) else 1
                blocks.append(block(cin, w, stride))
                cin = w * block.expansion
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        self.nstages = len(c["layers"])
        self.fc = nn.Linear(cin, c["numClasses"])

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.imagenet_stem:
            x = F.max_pool2d(x, 3, 2, 1)
        for s in range(self.nstages):
            x = getattr(self, f"layer{s + 1}")(x)
        x = x.mean(dim=(2, 3))
        return self.fc(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPTMLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPTBlock(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = GPTMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocabSize"], c["nEmbd"])
        self.wpe = nn.Embedding(c["contextLength"], c["nEmbd"])
        self.h = nn.ModuleList([GPTBlock(c["nEmbd"], c["nHead"]) for _ in range(c["nLayer"])])
        self.ln_f = nn.LayerNorm(c["nEmbd"])
        self.tied = c["tiedHead"]
        if not self.tied:
            self.lm_head = nn.Linear(c["nEmbd"], c["vocabSize"], bias=False)
        # GPT-2 initialisation scale (the TS side uses the same rule); values only matter for training
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.h:
            x = blk(x)
        x = self.ln_f(x)
        w = self.wte.weight if self.tied else self.lm_head.weight
        return x @ w.t()


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        w, d = c["baseWidth"], c["depth"]
        widths = [w * 2**i for i in range(d + 1)]
        self.downs = nn.ModuleList()
        cin = c["inChannels"]
        for i in range(d):
            self.downs.append(DoubleConv(cin, widths[i]))
            cin = widths[i]
        self.bottleneck = DoubleConv(widths[d - 1], widths[d])
        self.ups = nn.ModuleList([nn.Conv2d(widths[i + 1], widths[i], 3, 1, 1) for i in range(d)])
        self.decs = nn.ModuleList([DoubleConv(2 * widths[i], widths[i]) for i in range(d)])
        self.head = nn.Conv2d(widths[0], c["numClasses"], 1)
        self.depth = d

    def forward(self, x):
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = F.max_pool2d(x, 2, 2)
        x = self.bottleneck(x)
        for i in reversed(range(self.depth)):
            x = F.interpolate(x, scale_factor=2, mode="nearest")
            x = self.ups[i](x)
            x = torch.cat([skips[i], x], dim=1)
            x = self.decs[i](x)
        return self.head(x)


class LSTMLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = nn.Embedding(c["vocabSize"], c["embedDim"])
        self.lstm = nn.LSTM(c["embedDim"], c["hiddenSize"], c["numLayers"], batch_first=True)
        self.head = nn.Linear(c["hiddenSize"], c["vocabSize"])

    def forward(self, idx):
        y, _ = self.lstm(self.embed(idx))
        return self.head(y)


class RMSNorm(nn.Module):
    """PyTorch 1.13 has no nn.RMSNorm; this is the formula the TS layer (and the kernel) implement."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


# --------------------------------------------------------------- cases

CASES = {}


def record(case, kind, config, model, inputs, output, loss, extra=None, grad_inputs=()):
    t = {}
    for k, v in model.state_dict().items():
        t[f"param.{k}"] = v.clone()
    for k, v in inputs.items():
        t[f"input.{k}"] = v.to(torch.int32) if v.dtype == torch.int64 else v
    t["expected.output"] = output.detach()
    t["expected.loss"] = loss.detach().reshape(())
    loss.backward()
    for k, p in model.named_parameters():
        t[f"grad.{k}"] = p.grad.detach().clone()
    for k in grad_inputs:
        t[f"grad.input.{k}"] = inputs[k].grad.detach().clone()
    if extra:
        t.update(extra)
    CASES[case] = {"kind": kind, "config": config, "file": f"{case}.safetensors"}
    return t


def snapshot_buffers(model, before):
    out = {}
    for k, v in model.named_buffers():
        if k.endswith("num_batches_tracked"):
            continue
        out[f"buffer_after.{k}"] = v.clone()
    return out


def strip_counters(t):
    # num_batches_tracked is an int64 counter the TS BatchNorm does not keep; the
    # param.* copies stay (stored as I64) so the tests load real PyTorch state dicts
    return {k: v for k, v in t.items() if k.startswith("param.") or not k.endswith("num_batches_tracked")}


def classification_case(case, family, model, config, x, targets, grad_inputs=()):
    model.train()
    before = {f"param.{k}": v.clone() for k, v in model.state_dict().items()}
    out = model(x)
    logits = out.reshape(-1, out.shape[-1]) if out.dim() == 3 else out
    if out.dim() == 4:  # [N, K, H, W] -> per-pixel rows
        logits = out.permute(0, 2, 3, 1).reshape(-1, out.shape[1])
    loss = F.cross_entropy(logits, targets.reshape(-1))
    bufs = snapshot_buffers(model, None)
    t = record(case, family, config, model, {"x": x, "targets": targets}, out, loss, bufs, grad_inputs)
    t.update(before)
    return strip_counters(t)


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}

    # ---- layers
    torch.manual_seed(1)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2, bias=True)
    x = torch.randn(2, 3, 9, 8, requires_grad=True)
    y = conv(x)
    r = torch.randn_like(y)
    loss = (y * r).sum()
    t = record("conv2d", "layer", {"inChannels": 3, "outChannels": 4, "kernelSize": 3, "stride": 2,
                                   "padding": 1, "dilation": 2, "bias": True},
               conv, {"x": x, "gradOutput": r}, y, loss, grad_inputs=("x",))
    files["conv2d"] = t

    torch.manual_seed(2)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(3))
        bn.bias.copy_(torch.randn(3))
        bn.running_mean.copy_(torch.randn(3))
        bn.running_var.copy_(torch.rand(3) + 0.5)
    x = (torch.randn(4, 3, 3, 2) * 2 + 1).requires_grad_(True)
    bn.train()
    before = strip_counters({f"param.{k}": v.clone() for k, v in bn.state_dict().items()})
    y = bn(x)
    r = torch.randn_like(y)
    loss = (y * r).sum()
    t = record("batchnorm2d", "layer", {"numFeatures": 3, "eps": 1e-5, "momentum": 0.1}, bn,
               {"x": x, "gradOutput": r}, y, loss, snapshot_buffers(bn, None), grad_inputs=("x",))
    t.update(before)
    bn.eval()
    with torch.no_grad():
        t["expected.evalOutput"] = bn(x)
    files["batchnorm2d"] = strip_counters(t)

    torch.manual_seed(3)
    ln = nn.LayerNorm(5)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(5))
        ln.bias.copy_(torch.randn(5))
    x = torch.randn(2, 3, 5, requires_grad=True)
    y = ln(x)
    r = torch.randn_like(y)
    files["layernorm"] = record("layernorm", "layer", {"dim": 5, "eps": 1e-5}, ln,
                                {"x": x, "gradOutput": r}, y, (y * r).sum(), grad_inputs=("x",))

    torch.manual_seed(4)
    rms = RMSNorm(6, 1e-6)
    with torch.no_grad():
        rms.weight.copy_(torch.randn(6))
    x = torch.randn(4, 6, requires_grad=True)
    y = rms(x)
    r = torch.randn_like(y)
    files["rmsnorm"] = record("rmsnorm", "layer", {"dim": 6, "eps": 1e-6}, rms,
                              {"x": x, "gradOutput": r}, y, (y * r).sum(), grad_inputs=("x",))

    torch.manual_seed(5)
    emb = nn.Embedding(7, 3)
    ids = torch.tensor([[1, 6, 1], [0, 3, 6]])
    y = emb(ids)
    r = torch.randn_like(y)
    files["embedding"] = record("embedding", "layer", {"numEmbeddings": 7, "dim": 3}, emb,
                                {"ids": ids, "gradOutput": r}, y, (y * r).sum())

    torch.manual_seed(6)
    attn = CausalSelfAttention(8, 2)
    x = torch.randn(2, 5, 8, requires_grad=True)
    y = attn(x)
    r = torch.randn_like(y)
    files["attention"] = record("attention", "layer", {"nEmbd": 8, "nHead": 2}, attn,
                                {"x": x, "gradOutput": r}, y, (y * r).sum(), grad_inputs=("x",))

    torch.manual_seed(7)
    lin = nn.Linear(4, 3)
    logits = torch.randn(6, 3, requires_grad=True)
    targets = torch.tensor([0, 2, 1, 1, 0, 2])
    loss = F.cross_entropy(logits, targets)
    loss.backward()
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(3, 4)
    mse = F.mse_loss(a, b)
    mse.backward()
    files["losses"] = {
        "input.logits": logits.detach(), "input.targets": targets.to(torch.int32),
        "expected.crossEntropy": loss.detach().reshape(()), "grad.input.logits": logits.grad,
        "input.a": a.detach(), "input.b": b, "expected.mse": mse.detach().reshape(()),
        "grad.input.a": a.grad,
    }
    CASES["losses"] = {"kind": "loss", "config": {}, "file": "losses.safetensors"}
    del lin

    # ---- optimizers: 3 steps on fixed gradient sequences
    for name, make, cfg in [
        ("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
         {"lr": 0.1, "momentum": 0.9, "weightDecay": 0.01}),
        ("adamw", lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
         {"lr": 0.01, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weightDecay": 0.1}),
    ]:
        torch.manual_seed(8)
        w = nn.Parameter(torch.randn(3, 4))
        b = nn.Parameter(torch.randn(4))
        t = {"param.w": w.detach().clone(), "param.b": b.detach().clone()}
        opt = make([w, b])
        for k in range(3):
            gw, gb = torch.randn(3, 4), torch.randn(4)
            t[f"grad{k}.w"], t[f"grad{k}.b"] = gw, gb
            w.grad, b.grad = gw.clone(), gb.clone()
            opt.step()
            t[f"step{k}.w"], t[f"step{k}.b"] = w.detach().clone(), b.detach().clone()
        files[name] = t
        CASES[name] = {"kind": "optimizer", "config": cfg, "file": f"{name}.safetensors"}

    # ---- models
    torch.manual_seed(10)
    cfg = {"inFeatures": 6, "hidden": [8, 8], "outFeatures": 3}
    m = MLP(cfg)
    files["mlp"] = classification_case("mlp", "mlp", m, cfg, torch.randn(5, 6), torch.randint(0, 3, (5,)))

    torch.manual_seed(11)
    cfg = {"block": "basic", "stem": "cifar", "layers": [1, 1, 1], "widths": [4, 8, 8],
           "inChannels": 3, "numClasses": 5}
    m = ResNet(cfg)
    files["resnet_basic"] = classification_case("resnet_basic", "resnet", m, cfg,
                                                torch.randn(2, 3, 8, 8), torch.randint(0, 5, (2,)))

    torch.manual_seed(12)
    cfg = {"block": "bottleneck", "stem": "imagenet", "layers": [1, 1], "widths": [2, 4],
           "inChannels": 3, "numClasses": 4}
    m = ResNet(cfg)
    files["resnet_bottleneck"] = classification_case("resnet_bottleneck", "resnet", m, cfg,
                                                     torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2,)))

    for case, tied, seed in [("gpt", True, 13), ("gpt_untied", False, 14)]:
        torch.manual_seed(seed)
        cfg = {"vocabSize": 11, "contextLength": 8, "nLayer": 2, "nHead": 2, "nEmbd": 8,
               "dropout": 0.0, "tiedHead": tied}
        m = GPT(cfg)
        idx = torch.randint(0, 11, (2, 6))
        files[case] = classification_case(case, "gpt", m, cfg, idx, torch.randint(0, 11, (2, 6)))

    torch.manual_seed(15)
    cfg = {"inChannels": 1, "numClasses": 2, "baseWidth": 2, "depth": 2}
    m = UNet(cfg)
    files["unet"] = classification_case("unet", "unet", m, cfg, torch.randn(2, 1, 8, 8),
                                        torch.randint(0, 2, (2, 8, 8)))

    torch.manual_seed(16)
    cfg = {"vocabSize": 9, "embedDim": 4, "hiddenSize": 5, "numLayers": 2}
    m = LSTMLM(cfg)
    files["lstm"] = classification_case("lstm", "lstm", m, cfg, torch.randint(0, 9, (3, 4)),
                                        torch.randint(0, 9, (3, 4)))

    # index inputs go out as i32; int64 state-dict entries stay I64 (exercising the I64 -> i32 path)
    total = 0
    for case, t in files.items():
        t = {k: (v.to(torch.int32) if v.dtype == torch.int64 and not k.startswith("param.") else v)
             for k, v in t.items()}
        path = os.path.join(OUT, f"{case}.safetensors")
        save_safetensors(path, t)
        total += os.path.getsize(path)
    with open(os.path.join(OUT, "fixtures.json"), "w") as f:
        json.dump({"generator": "scripts/make_torch_fixtures.py", "torch": torch.__version__,
                   "cases": CASES}, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(files)} fixtures, {total} bytes, to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
