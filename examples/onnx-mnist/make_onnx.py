#!/usr/bin/env python3
"""Writes the CNN of examples/cnn-training as an ONNX model, with the weights
of a training run of that example, using only ONNX's helper API (Debian's
python3-onnx):

    make_onnx.py WEIGHTS.wfparams OUT.onnx

WEIGHTS is the parameter file the CNN example saves for its `cnn_predict`
class (wfgen's format: docs/runtime-api.md). The graph takes raw pixels in
[0, 1] and standardises them itself, as the CNN example's main.cpp does
before calling its class:

    image [N 1 28 28] -> (x - 0.2860) / 0.3530
      -> Conv(16, 3x3, pad 1) -> Relu -> MaxPool 2x2
      -> Conv(32, 3x3)        -> Relu -> MaxPool 2x2
      -> Flatten -> Gemm(1152 -> 10) -> logits [N 10]
"""
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {0: np.float32, 1: np.float64}  # wfgen's dtype codes of f32 and f64


def read_wfparams(path):
    """{name: array} of a wfgen parameter file: WFGENPRM, version, count,
    then name, dtype, rank, dims and data per parameter, then a checksum."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"WFGENPRM":
        sys.exit("make_onnx.py: %s is not a wfgen parameter file" % path)
    at = 8
    version, count = struct.unpack_from("<II", data, at)
    at += 8
    if version != 1:
        sys.exit("make_onnx.py: %s has version %d, expected 1" % (path, version))
    out = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, at)
        at += 4
        name = data[at:at + length].decode()
        at += length
        dtype, rank = struct.unpack_from("<BI", data, at)
        at += 5
        dims = struct.unpack_from("<%dq" % rank, data, at)
        at += 8 * rank
        (nbytes,) = struct.unpack_from("<Q", data, at)
        at += 8
        if dtype not in DTYPES:
            sys.exit("make_onnx.py: parameter %s has dtype code %d, expected f32" % (name, dtype))
        out[name] = np.frombuffer(data[at:at + nbytes], dtype=DTYPES[dtype]).reshape(dims).astype(np.float32)
        at += nbytes
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    p = read_wfparams(sys.argv[1])
    need = {"conv2d_0.W": (16, 9), "conv2d_0.b": (16,), "conv2d_1.W": (32, 144), "conv2d_1.b": (32,),
            "linear_0.W": (1152, 10), "linear_0.b": (10,)}
    for name, shape in need.items():
        if name not in p or p[name].shape != shape:
            sys.exit("make_onnx.py: %s needs %s of shape %s" % (sys.argv[1], name, shape))
    inits = [
        numpy_helper.from_array(np.array(0.2860, np.float32), "pixel_mean"),
        numpy_helper.from_array(np.array(0.3530, np.float32), "pixel_std"),
        # wfgen's conv2d keeps W as [out, in*kh*kw]; ONNX's Conv wants [out, in, kh, kw].
        numpy_helper.from_array(p["conv2d_0.W"].reshape(16, 1, 3, 3), "conv1.weight"),
        numpy_helper.from_array(p["conv2d_0.b"], "conv1.bias"),
        numpy_helper.from_array(p["conv2d_1.W"].reshape(32, 16, 3, 3), "conv2.weight"),
        numpy_helper.from_array(p["conv2d_1.b"], "conv2.bias"),
        numpy_helper.from_array(p["linear_0.W"], "fc.weight"),
        numpy_helper.from_array(p["linear_0.b"], "fc.bias"),
    ]
    nodes = [
        helper.make_node("Sub", ["image", "pixel_mean"], ["centred"]),
        helper.make_node("Div", ["centred", "pixel_std"], ["x"]),
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"]),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["conv2"], ["relu2"]),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool2"], ["features"], axis=1),
        helper.make_node("Gemm", ["features", "fc.weight", "fc.bias"], ["logits"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "fashion_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="wfgen examples/onnx-mnist/make_onnx.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[2])
    print("make_onnx.py: wrote %s (opset 13, %d nodes) from %s" % (sys.argv[2], len(nodes), sys.argv[1]))


if __name__ == "__main__":
    main()
