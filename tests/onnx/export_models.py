#!/usr/bin/env python3
"""Real PyTorch exports in ONNX's backend-test layout, and their run through wfgen.

Writes, for every model below, OUT/test_<name>/model.onnx (torch.onnx.export
from Debian's python3-torch with random seeded weights, eval mode) and
test_data_set_0/input_<k>.pb, output_<k>.pb (torch's own outputs), then runs
tests/onnx/conformance.py on OUT: import, generate, compile, run, compare.
A model passes when every output is within |got - want| <= 1e-4 + 1e-3 |want|
(the file OUT/tolerance says so to conformance.py): the graphs chain many
f32 operations, the node tests' 1e-7 is for one operation.

The models are what people export: torchvision CNNs (weights=None, small
inputs), a post-LN nn.TransformerEncoder, a GPT-style decoder block whose
causal mask is written with view/transpose/masked_fill, LSTM, GRU and RNN
taggers (batch_first, 2 layers, bidirectional), and LSTM and GRU layers given
their initial states that return their last states too. --small exports only
the cheap ones ctest runs (onnx.exports: the small CNN, the transformer
encoder, the GPT block and the bidirectional LSTM given its states); the
whole set is

  /usr/bin/python3 tests/onnx/export_models.py OUT --run --wfgen build/wfgen/wfgen --build build \\
      [--markdown docs/onnx-conformance-exports.md]

Usage: export_models.py OUT [--small] [--only a,b] [--run --wfgen W --build B [--jobs N] [--markdown F]]
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL, RTOL = 1e-4, 1e-3
MODELS = []  # (name, small, build) where build() -> (module, example inputs)


def model(name, small=False):
    def register(fn):
        MODELS.append((name, small, fn))
        return fn
    return register


def torchvision_cnn(factory, size):
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, factory)(weights=None)
    return m, (torch.randn(1, 3, size, size),)


@model("resnet18")
def _():
    return torchvision_cnn("resnet18", 32)


@model("mobilenet_v2")
def _():
    return torchvision_cnn("mobilenet_v2", 32)


@model("squeezenet1_1")
def _():
    return torchvision_cnn("squeezenet1_1", 64)


@model("shufflenet_v2_x0_5")
def _():
    # The channel shuffle reshapes to rank 5.
    return torchvision_cnn("shufflenet_v2_x0_5", 32)


class SmallCnn(torch.nn.Module):
    """Conv, BatchNorm, ReLU, pools, Flatten, Linear: the LeNet-like model
    every tutorial starts with."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        return torch.log_softmax(self.head(torch.flatten(self.features(x), 1)), dim=1)


@model("small_cnn", small=True)
def _():
    torch.manual_seed(0)
    m = SmallCnn()
    with torch.no_grad():  # running statistics that are not the identity
        m.features[1].running_mean.uniform_(-0.5, 0.5)
        m.features[1].running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(2, 1, 12, 12),)


@model("transformer_encoder", small=True)
def _():
    # Post-LN (norm_first=False, the default), two layers.
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(1, 5, 16),)


class CausalSelfAttention(torch.nn.Module):
    """A GPT block as people write it (nanoGPT): the mask a registered
    buffer, heads by view/transpose, masked_fill with -inf."""

    def __init__(self, d=16, heads=2, t=6):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


@model("gpt_block", small=True)
def _():
    torch.manual_seed(0)
    return CausalSelfAttention(), (torch.randn(1, 6, 16),)


class Tagger(torch.nn.Module):
    """A sequence tagger: a recurrent layer (batch_first) and a linear head."""

    def __init__(self, cell, bidirectional=False, layers=1):
        super().__init__()
        self.rnn = cell(8, 12, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.head = torch.nn.Linear(12 * (2 if bidirectional else 1), 5)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


@model("lstm_tagger")
def _():
    torch.manual_seed(0)
    return Tagger(torch.nn.LSTM, layers=2), (torch.randn(2, 7, 8),)


@model("gru_tagger")
def _():
    torch.manual_seed(0)
    return Tagger(torch.nn.GRU), (torch.randn(2, 7, 8),)


@model("bilstm_tagger")
def _():
    torch.manual_seed(0)
    return Tagger(torch.nn.LSTM, bidirectional=True), (torch.randn(2, 7, 8),)


@model("rnn_tagger")
def _():
    torch.manual_seed(0)
    return Tagger(torch.nn.RNN, bidirectional=True, layers=2), (torch.randn(2, 7, 8),)


class Stateful(torch.nn.Module):
    """A recurrent layer (sequence first) given its initial state, returning its output and last state."""

    def __init__(self, cell, **kw):
        super().__init__()
        self.rnn = cell(6, 5, **kw)

    def forward(self, x, *state):
        y, last = self.rnn(x, state[0] if len(state) == 1 else state)
        return (y,) + (last if isinstance(last, tuple) else (last,))


@model("lstm_state", small=True)
def _():
    torch.manual_seed(0)
    return Stateful(torch.nn.LSTM, bidirectional=True), (torch.randn(4, 3, 6), torch.randn(2, 3, 5), torch.randn(2, 3, 5))


@model("gru_state")
def _():
    torch.manual_seed(0)
    return Stateful(torch.nn.GRU, num_layers=2), (torch.randn(4, 3, 6), torch.randn(2, 3, 5))


def export(name, build, out, opset=13):
    module, inputs = build()
    module.eval()
    folder = os.path.join(out, "test_" + name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    # With gradients on: under no_grad, eval-mode transformer layers take
    # their fused path, which neither exports nor computes what the export
    # does.
    outputs = module(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    torch.onnx.export(module, inputs, os.path.join(folder, "model.onnx"), opset_version=opset,
                      input_names=["input_%d" % k for k in range(len(inputs))],
                      output_names=["output_%d" % k for k in range(len(outputs))])
    for kind, tensors in (("input", inputs), ("output", outputs)):
        for k, t in enumerate(tensors):
            proto = numpy_helper.from_array(np.ascontiguousarray(t.detach().numpy()), "%s_%d" % (kind, k))
            with open(os.path.join(folder, "test_data_set_0", "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(proto.SerializeToString())
    onnx.checker.check_model(onnx.load(os.path.join(folder, "model.onnx")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--small", action="store_true", help="only the cheap models ctest runs")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--run", action="store_true", help="then run conformance.py on them")
    ap.add_argument("--wfgen", default="")
    ap.add_argument("--build", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--markdown", default="")
    ap.add_argument("--expect-pass", type=int, default=-1)
    args = ap.parse_args()
    only = set(n for n in args.only.split(",") if n)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tolerance"), "w") as f:
        f.write("%g %g\n" % (ATOL, RTOL))
    torch.set_num_threads(1)
    written = 0
    for name, small, build in MODELS:
        if (only and name not in only) or (args.small and not small):
            continue
        export(name, build, args.out)
        written += 1
    print("export_models: %d models in %s" % (written, args.out))
    if not args.run:
        return 0
    cmd = [sys.executable, os.path.join(HERE, "conformance.py"), "--wfgen", args.wfgen, "--build", args.build,
           "--data", args.out, "--jobs", str(args.jobs), "--work", os.path.join(args.out, ".work"),
           "--expect-pass", str(args.expect_pass)]
    if args.markdown:
        cmd += ["--markdown", args.markdown]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
