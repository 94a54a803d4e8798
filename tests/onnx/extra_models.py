#!/usr/bin/env python3
"""ONNX test models the backend suite lacks, in its layout, for conformance.py.

Writes <out>/<test>/model.onnx and test_data_set_0/{input,output}_*.pb, like
ONNX's backend node tests: grouped, depthwise and 1 x 1 convolutions (the
node suite has none; its pytorch-converted ones are opset 6), a Conv with
bias followed by Clip, Concat of computed tensors
Trilu of FLOAT tensors (the suite's Trilu tests are all INT64), and And, Or,
Xor, Not on computed BOOLs (the suite's take BOOL inputs) with a BOOL output,
Pad (constant with a value and negative pads, edge, reflect) and Tile of
computed tensors (the suite's edge and reflect tests pad INT32 tensors),
GRU and RNN with sequence_lens shorter than the sequence (the suite's are
all as long as it), ShuffleNet's rank-5 channel shuffle, 3-D Conv, MaxPool
and AveragePool with asymmetric pads, a model of DOUBLE tensors, grouped
ConvTranspose with bias, asymmetric pads and output_padding (the suite's
have one group and no bias), and Resize of batches of several channels
(the suite's resize one image of one channel), and the indexing operators
on FLOAT data with constant indices where the suite has only small or
INT32 cases: ScatterElements with duplicates under add, mul and max,
ScatterND of slices, GatherND with batch_dims, GatherElements on a middle
axis, TopK smallest on a middle axis, and Einsum of attention's equations
(checked against numpy.einsum); float Mod of computed tensors (both fmod
forms) and Min and Max with a scalar constant operand; ReduceSum, ReduceMax,
ReduceMin and ReduceProd of INT64 and INT32 tensors, and Pad and GatherND of
INT32 and BOOL tensors, all computed by a Cast of the FLOAT input (the
suite's integer tests feed integer inputs, which conformance.py freezes into
constants, so their nodes are folded, not computed); and the
shape code exporters write from x.shape (Shape -> Gather -> Div -> Cast ->
Pow -> Unsqueeze -> Concat -> Reshape, and a 1/sqrt(C) scale) of an input
whose batch is known only at run time, which wfgen folds when importing
(--check-folded checks that the spec keeps only the Reshape and the Mul),
and a constant laid out by Transpose, ReduceSum, Tile, Expand, Flatten and
ReduceMax, folded likewise; BitShift (LEFT, wrapping at 256, and RIGHT) of
UINT8 tensors computed by a Cast of the FLOAT input (the suite's BitShift
tests feed UINT8 inputs, which conformance.py freezes and wfgen folds).
The expected outputs come from naive loops written here, not from an
ONNX runtime.

Usage: tests/onnx/extra_models.py OUT_DIR
       tests/onnx/extra_models.py --check-folded WFGEN OUT_DIR   (after the first)
"""
import math
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, load, mapping, numpy_helper, save


def conv_reference(x, w, b, group, stride, pad, dilation):
    """Y[n, m, y, x] by the definition: group g's filters see its channels only."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dilation * (kw - 1) - 1) // stride + 1
    mg = m // group
    y = np.zeros((n, m, oh, ow), dtype=np.float64)
    for i in range(n):
        for o in range(m):
            g = o // mg
            for r in range(oh):
                for q in range(ow):
                    acc = float(b[o]) if b is not None else 0.0
                    for ci in range(cg):
                        for a in range(kh):
                            for e in range(kw):
                                yy = r * stride - pad + a * dilation
                                xx = q * stride - pad + e * dilation
                                if 0 <= yy < h and 0 <= xx < wd:
                                    acc += float(x[i, g * cg + ci, yy, xx]) * float(w[o, ci, a, e])
                    y[i, o, r, q] = acc
    return y.astype(np.float32)


def write(out, name, nodes, inputs, outputs, initializers):
    """The model (opset 13) and its one data set: `inputs` are fed, `outputs` expected."""
    write_opset(out, name, nodes, inputs, outputs, initializers, 13)


def write_opset(out, name, nodes, inputs, outputs, initializers, opset):
    def info(k, v):
        return helper.make_tensor_value_info(k, mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype], list(v.shape))
    graph = helper.make_graph(nodes, name, [info(k, v) for k, v in inputs], [info(k, v) for k, v in outputs],
                              [numpy_helper.from_array(v, k) for k, v in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    save(model, os.path.join(d, "model.onnx"))
    for prefix, tensors in (("input", inputs), ("output", outputs)):
        for k, (n, v) in enumerate(tensors):
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (prefix, k)), "wb") as f:
                f.write(numpy_helper.from_array(v, n).SerializeToString())


def draw(rng, shape, positive):
    """Normal values, or (positive) uniform in [0, 1): sums of terms of one
    sign, none near 0. A Winograd convolution (winograd_conv2d) rounds its
    transforms' sums: about 1e-6 of the terms' magnitude in fp32, like the
    direct sum's rounding but larger, where ONNX's tolerance 1e-3 |want| +
    1e-7 fails an output that cancels to 1e-2 out of 144 normal terms."""
    return (rng.uniform(0.0, 1.0, shape) if positive else rng.standard_normal(shape)).astype(np.float32)


def conv_same_reference(x, w, b):
    """Y of a k x k Conv at stride 1 with padding k // 2 (group 1), by shifted
    slices of the padded input, in float64: conv_reference's sum without its
    Python loops, for planes of 32 x 32 and more (winograd_conv2d's)."""
    k = w.shape[2]
    h, wd = x.shape[2], x.shape[3]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    y = np.zeros((x.shape[0], w.shape[0], h, wd))
    for a in range(k):
        for e in range(k):
            y += np.einsum("mc,nchw->nmhw", w[:, :, a, e].astype(np.float64), xp[:, :, a:a + h, e:e + wd])
    return y + (b.astype(np.float64).reshape(1, -1, 1, 1) if b is not None else 0.0)


def conv_test(out, name, rng, n, c, hw, m, group, k, stride=1, pad=0, dilation=1, bias=True, positive=False):
    x = draw(rng, (n, c, hw, hw), positive)
    w = draw(rng, (m, c // group, k, k), positive)
    b = rng.standard_normal((m,)).astype(np.float32) if bias else None
    same = group == 1 and stride == 1 and dilation == 1 and pad == k // 2
    y = (conv_same_reference(x, w, b) if same and hw >= 32 else conv_reference(x, w, b, group, stride, pad, dilation)).astype(np.float32)
    attrs = dict(group=group, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, dilations=[dilation] * 2)
    node = helper.make_node("Conv", ["x", "W"] + (["B"] if bias else []), ["y"], name="conv", **attrs)
    inits = [("W", w)] + ([("B", b)] if bias else [])
    write(out, name, [node], [("x", x)], [("y", y)], inits)


def conv_clip_test(out, name, rng, n, c, hw, m, k, pad, group=1, stride=1):
    """Conv with bias, then Clip(0, 6) (MobileNet's relu6): the import adds
    the bias where the Clip reads it, one fused pass (a depthwise one's: the
    convolution's epilogue, in its kernel)."""
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    b = (3 * rng.standard_normal((m,))).astype(np.float32)
    y = np.clip(conv_reference(x, w, b, group, stride, pad, 1), 0.0, 6.0).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "W", "B"], ["t"], name="conv", kernel_shape=[k, k], pads=[pad] * 4, group=group,
                            strides=[stride, stride])
    clip = helper.make_node("Clip", ["t", "lo", "hi"], ["y"], name="relu6")
    inits = [("W", w), ("B", b), ("lo", np.array(0.0, np.float32)), ("hi", np.array(6.0, np.float32))]
    write(out, name, [conv, clip], [("x", x)], [("y", y)], inits)


def conv_residual_test(out, name, rng, n, c, hw, k=1, positive=False):
    """A k x k Conv with bias (padded to keep the plane), the residual sum
    with its input, then Relu (a residual block's end): the bias and the
    sum become the GEMM's epilogue (fuse.cpp, through the reshape to the
    image shape; the Relu writes the output, which stays in the image
    shape); a 3 x 3 one with 16 channels or more on a 32 x 32 plane or
    larger is winograd_conv2d, which runs the three in its output
    transform."""
    x = draw(rng, (n, c, hw, hw), positive)
    w = draw(rng, (c, c, k, k), positive)
    b = rng.standard_normal((c,)).astype(np.float32)
    y = np.maximum(x + (conv_same_reference(x, w, b) if hw >= 32 else conv_reference(x, w, b, 1, 1, k // 2, 1)), 0.0).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "W", "B"], ["t"], name="conv", kernel_shape=[k, k], pads=[k // 2] * 4)
    add = helper.make_node("Add", ["x", "t"], ["s"], name="residual")
    relu = helper.make_node("Relu", ["s"], ["y"], name="relu")
    write(out, name, [conv, add, relu], [("x", x)], [("y", y)], [("W", w), ("B", b)])


def concat_test(out, name, rng, shapes, axis):
    """Concat of computed tensors (each input plus 1), so none is folded."""
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    nodes = [helper.make_node("Add", ["x%d" % k, "one"], ["a%d" % k]) for k in range(len(xs))]
    nodes.append(helper.make_node("Concat", ["a%d" % k for k in range(len(xs))], ["y"], axis=axis))
    parts = [x + np.float32(1) for x in xs]
    rank = len(shapes[0])
    ax = axis % rank
    # The reference joins along `ax` by index arithmetic, not np.concatenate's own code path.
    out_shape = list(shapes[0])
    out_shape[ax] = sum(s[ax] for s in shapes)
    y = np.zeros(out_shape, dtype=np.float32)
    start = 0
    for p in parts:
        index = [slice(None)] * rank
        index[ax] = slice(start, start + p.shape[ax])
        y[tuple(index)] = p
        start += p.shape[ax]
    write(out, name, nodes, [("x%d" % k, x) for k, x in enumerate(xs)], [("y", y)],
          [("one", np.array(1.0, dtype=np.float32))])


def trilu_test(out, name, rng, shape, upper, k):
    """Trilu of a computed FLOAT tensor, k a constant input."""
    x = rng.standard_normal(shape).astype(np.float32)
    y = x.copy()
    for index in np.ndindex(*shape):
        i, j = index[-2], index[-1]
        keep = j - i >= k if upper else j - i <= k
        if not keep:
            y[index] = 0.0
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Neg", ["n"], ["p"]),
             helper.make_node("Trilu", ["p", "k"], ["y"], upper=1 if upper else 0)]
    write(out, name, nodes, [("x", x)], [("y", y)], [("k", np.array(k, dtype=np.int64))])


def logic_test(out, name, rng, shape_x, shape_y):
    """BOOLs computed by comparisons, combined by And, Or, Xor and Not; a BOOL output."""
    x = rng.standard_normal(shape_x).astype(np.float32)
    y = rng.standard_normal(shape_y).astype(np.float32)
    nodes = [helper.make_node("Greater", ["x", "zero"], ["a"]), helper.make_node("Less", ["y", "half"], ["b"]),
             helper.make_node("And", ["a", "b"], ["ab"]), helper.make_node("Or", ["a", "b"], ["a_or_b"]),
             helper.make_node("Not", ["a_or_b"], ["neither"]), helper.make_node("Xor", ["ab", "neither"], ["z"])]
    xb, yb = np.broadcast_arrays(x, y)
    z = np.zeros(xb.shape, dtype=bool)
    for index in np.ndindex(*xb.shape):
        a, b = bool(xb[index] > 0), bool(yb[index] < 0.5)
        z[index] = (a and b) != (not (a or b))
    write(out, name, nodes, [("x", x), ("y", y)], [("z", z)],
          [("zero", np.array(0.0, dtype=np.float32)), ("half", np.array(0.5, dtype=np.float32))])


def pad_reference(x, pads, mode, value):
    """Pad by hand: each output element mapped to its input element, constant
    (with negative pads cropping), edge (clamped) or reflect (mirrored about
    the ends)."""
    shape = x.shape
    r = len(shape)
    begin, end = pads[:r], pads[r:]
    y_shape = tuple(shape[k] + begin[k] + end[k] for k in range(r))
    y = np.zeros(y_shape, dtype=x.dtype)
    for o in np.ndindex(*y_shape):
        index, inside = [], True
        for k in range(r):
            i, n = o[k] - begin[k], shape[k]
            if mode == "edge":
                i = min(max(i, 0), n - 1)
            elif mode == "reflect":
                while i < 0 or i >= n:
                    i = -i if i < 0 else 2 * (n - 1) - i
            inside = inside and 0 <= i < n
            index.append(i)
        y[o] = x[tuple(index)] if inside else value
    return y


def pad_test(out, name, rng, shape, pads, mode, value=0.0):
    """Pad of a computed tensor (Relu's output)."""
    x = rng.standard_normal(shape).astype(np.float32)
    y = pad_reference(np.maximum(x, np.float32(0)), pads, mode, value)
    inits = [("pads", np.array(pads, dtype=np.int64))]
    ins = ["r", "pads"]
    if mode == "constant":
        inits.append(("value", np.array(value, dtype=np.float32)))
        ins.append("value")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Pad", ins, ["y"], mode=mode)]
    write(out, name, nodes, [("x", x)], [("y", y)], inits)


def tile_test(out, name, rng, shape, repeats):
    """Tile of a computed tensor: output element o is input element o mod n, axis by axis."""
    x = rng.standard_normal(shape).astype(np.float32)
    y_shape = tuple(n * k for n, k in zip(shape, repeats))
    y = np.zeros(y_shape, dtype=np.float32)
    for o in np.ndindex(*y_shape):
        y[o] = -x[tuple(i % n for i, n in zip(o, shape))]
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Tile", ["n", "repeats"], ["y"])]
    write(out, name, nodes, [("x", x)], [("y", y)], [("repeats", np.array(repeats, dtype=np.int64))])


def recurrent_reference(op, x, w, r, b, lens, direction, lbr):
    """Y [T D B H] and Y_h [D B H] of RNN or GRU by ONNX's equations, one sequence at a time:
    a reverse direction walks t = len-1 .. 0; Y is 0 past a sequence's length."""
    directions = 2 if direction == "bidirectional" else 1
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))
    t_len, batch, _ = x.shape
    hid = r.shape[2]
    y = np.zeros((t_len, directions, batch, hid))
    y_h = np.zeros((directions, batch, hid))
    for d in range(directions):
        wb, rb = b[d, :b.shape[1] // 2], b[d, b.shape[1] // 2:]
        for n in range(batch):
            h = np.zeros(hid)
            backward = d == 1 or direction == "reverse"
            steps = range(lens[n] - 1, -1, -1) if backward else range(lens[n])
            for t in steps:
                xt = x[t, n].astype(np.float64)
                if op == "RNN":
                    h = np.tanh(w[d] @ xt + r[d] @ h + wb + rb)
                else:
                    gx, gh = w[d] @ xt + wb, r[d] @ h + rb
                    z = sig(gx[:hid] + gh[:hid])
                    rr = sig(gx[hid:2 * hid] + gh[hid:2 * hid])
                    if lbr:
                        nn = np.tanh(gx[2 * hid:] + rr * gh[2 * hid:])
                    else:
                        nn = np.tanh(gx[2 * hid:] + r[d, 2 * hid:] @ (rr * h) + rb[2 * hid:])
                    h = (1 - z) * nn + z * h
                y[t, d, n] = h
            y_h[d, n] = h
    return y.astype(np.float32), y_h.astype(np.float32)


def recurrent_test(out, name, rng, op, t_len, batch, feat, hid, lens, direction, lbr=0):
    """RNN or GRU with constant sequence_lens shorter than T (the node suite's are all T)."""
    directions = 2 if direction == "bidirectional" else 1
    gates = 3 if op == "GRU" else 1
    x = rng.uniform(-1, 1, (t_len, batch, feat)).astype(np.float32)
    w = rng.uniform(-0.7, 0.7, (directions, gates * hid, feat)).astype(np.float32)
    r = rng.uniform(-0.7, 0.7, (directions, gates * hid, hid)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, (directions, 2 * gates * hid)).astype(np.float32)
    y, y_h = recurrent_reference(op, x, w, r, b, lens, direction, lbr)
    extra = {"linear_before_reset": lbr} if op == "GRU" else {}
    node = helper.make_node(op, ["x", "w", "r", "b", "lens"], ["y", "y_h"], hidden_size=hid, direction=direction, **extra)
    write(out, name, [node], [("x", x)], [("y", y), ("y_h", y_h)],
          [("w", w), ("r", r), ("b", b), ("lens", np.array(lens, dtype=np.int32))])


def channel_shuffle_test(out, name, rng, n, c, h, w, groups):
    """ShuffleNet's channel shuffle: Reshape to rank 5, Transpose, Reshape back."""
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    y = np.zeros_like(x)
    for i in range(n):
        for j in range(c):
            y[i, j] = x[i, (j % groups) * (c // groups) + j // groups]
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s4"], ["y"])]
    inits = [("s5", np.array([n, groups, c // groups, h, w], dtype=np.int64)), ("s4", np.array([n, c, h, w], dtype=np.int64))]
    write(out, name, nodes, [("x", x)], [("y", y)], inits)


def window_positions(size, k, stride, dilation, begin, end):
    """The input positions of each output window along one axis (None in the padding)."""
    span = dilation * (k - 1) + 1
    count = (size + begin + end - span) // stride + 1
    return [[p if 0 <= p < size else None for p in (o * stride - begin + a * dilation for a in range(k))]
            for o in range(count)]


def windows_3d(shape, kernel, strides, pads, dilations):
    """For each output (od, oh, ow): the list of (kd, kh, kw, d, h, w) it reads, padding left out."""
    axes = [window_positions(shape[k], kernel[k], strides[k], dilations[k], pads[k], pads[k + 3]) for k in range(3)]
    out = {}
    for o in np.ndindex(*(len(a) for a in axes)):
        out[o] = [(a, b, e, axes[0][o[0]][a], axes[1][o[1]][b], axes[2][o[2]][e])
                  for a in range(kernel[0]) for b in range(kernel[1]) for e in range(kernel[2])
                  if None not in (axes[0][o[0]][a], axes[1][o[1]][b], axes[2][o[2]][e])]
    return [len(a) for a in axes], out


def conv3d_test(out, name, rng, x_shape, m, group, kernel, strides, pads, dilations):
    """Conv over N C D H W by the definition (grouped, asymmetric pads, dilated)."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    n, c = x_shape[:2]
    w = rng.standard_normal((m, c // group) + tuple(kernel)).astype(np.float32)
    b = rng.standard_normal((m,)).astype(np.float32)
    sizes, win = windows_3d(x_shape[2:], kernel, strides, pads, dilations)
    y = np.zeros((n, m) + tuple(sizes), dtype=np.float64)
    cg, mg = c // group, m // group
    for i in range(n):
        for o in range(m):
            g = o // mg
            for pos, reads in win.items():
                acc = float(b[o])
                for ci in range(cg):
                    for a, bb, e, d, h, ww in reads:
                        acc += float(x[i, g * cg + ci, d, h, ww]) * float(w[o, ci, a, bb, e])
                y[(i, o) + pos] = acc
    node = helper.make_node("Conv", ["x", "W", "B"], ["y"], group=group, kernel_shape=kernel, strides=strides, pads=pads,
                            dilations=dilations)
    write(out, name, [node], [("x", x)], [("y", y.astype(np.float32))], [("W", w), ("B", b)])


def pool3d_test(out, name, rng, x_shape, op, kernel, strides, pads):
    """MaxPool or AveragePool (count_include_pad 0) over N C D H W, padding never counted."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    sizes, win = windows_3d(x_shape[2:], kernel, strides, pads, [1, 1, 1])
    y = np.zeros(tuple(x_shape[:2]) + tuple(sizes), dtype=np.float32)
    for i in range(x_shape[0]):
        for ch in range(x_shape[1]):
            for pos, reads in win.items():
                v = [float(x[i, ch, d, h, w]) for _, _, _, d, h, w in reads]
                y[(i, ch) + pos] = max(v) if op == "MaxPool" else sum(v) / len(v)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=kernel, strides=strides, pads=pads)
    write(out, name, [node], [("x", x)], [("y", y)], [])


def double_test(out, name, rng):
    """A model whose tensors are all DOUBLE: x * w + 0.1 (a Constant), built as f64."""
    x = rng.standard_normal((2, 3)).astype(np.float64)
    w = rng.standard_normal((3,)).astype(np.float64)
    tenth = helper.make_tensor("tenth", TensorProto.DOUBLE, [], [0.1])
    nodes = [helper.make_node("Constant", [], ["c"], value=tenth), helper.make_node("Mul", ["x", "w"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["y"])]
    write(out, name, nodes, [("x", x)], [("y", x * w + 0.1)], [("w", w)])


def conv_transpose_test(out, name, rng, x_shape, m_group, group, kernel, strides, pads, output_padding, bias=True):
    """Y[n, g*mg + j, oy, ox] += X[n, ci, y, x] W[ci, j, a, e] where oy = y*s + a - pad_head: each input pixel
    spreads its filters over the output (the definition, one scatter at a time)."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    n, c = x_shape[:2]
    spatial = x_shape[2:]
    w = rng.standard_normal((c, m_group) + tuple(kernel)).astype(np.float32)
    b = rng.standard_normal((m_group * group,)).astype(np.float32) if bias else None
    dims = len(spatial)
    size = [(spatial[i] - 1) * strides[i] + kernel[i] + output_padding[i] - pads[i] - pads[dims + i] for i in range(dims)]
    y = np.zeros((n, m_group * group) + tuple(size), dtype=np.float64)
    cg = c // group
    for i in range(n):
        for ci in range(c):
            g = ci // cg
            for pos in np.ndindex(*spatial):
                for k in np.ndindex(*kernel):
                    o = [pos[a] * strides[a] + k[a] - pads[a] for a in range(dims)]
                    if all(0 <= o[a] < size[a] for a in range(dims)):
                        for j in range(m_group):
                            y[(i, g * m_group + j) + tuple(o)] += float(x[(i, ci) + pos]) * float(w[(ci, j) + k])
    if bias:
        y += b.reshape((-1,) + (1,) * dims)
    node = helper.make_node("ConvTranspose", ["x", "W"] + (["B"] if bias else []), ["y"], name="deconv", group=group,
                            kernel_shape=list(kernel), strides=list(strides), pads=list(pads), output_padding=list(output_padding))
    write(out, name, [node], [("x", x)], [("y", y.astype(np.float32))], [("W", w)] + ([("B", b)] if bias else []))


def resize_test(out, name, rng, x_shape, scales, mode):
    """Resize of N C H W as torch's nn.Upsample exports it: bilinear with half-pixel centres (the source
    clamped at 0, its neighbour at the edge), or nearest as floor(dst / scale)."""
    x = rng.standard_normal(x_shape).astype(np.float32)
    n, c, h, wd = x_shape
    oh, ow = int(h * scales[2]), int(wd * scales[3])
    y = np.zeros((n, c, oh, ow), dtype=np.float64)
    for r in range(oh):
        for q in range(ow):
            if mode == "nearest":
                y[:, :, r, q] = x[:, :, int(np.floor(r / scales[2])), int(np.floor(q / scales[3]))]
                continue
            sy, sx = max((r + 0.5) / scales[2] - 0.5, 0.0), max((q + 0.5) / scales[3] - 0.5, 0.0)
            y0, x0 = int(np.floor(sy)), int(np.floor(sx))
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, wd - 1)
            ly, lx = sy - y0, sx - x0
            y[:, :, r, q] = ((1 - ly) * (1 - lx) * x[:, :, y0, x0] + (1 - ly) * lx * x[:, :, y0, x1] +
                             ly * (1 - lx) * x[:, :, y1, x0] + ly * lx * x[:, :, y1, x1])
    attrs = dict(mode=mode, coordinate_transformation_mode="asymmetric" if mode == "nearest" else "pytorch_half_pixel")
    if mode == "nearest":
        attrs["nearest_mode"] = "floor"
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", **attrs)
    write(out, name, [node], [("x", x)], [("y", y.astype(np.float32))], [("scales", np.array(scales, dtype=np.float32))])


def indexing_tests(out, rng):
    f = np.float32
    x = rng.standard_normal((3, 4, 5)).astype(f)
    # ScatterElements along axis 1, duplicate targets, each reduction by a loop.
    idx = rng.integers(-4, 4, size=(3, 3, 5)).astype(np.int64)
    upd = rng.standard_normal((3, 3, 5)).astype(f)
    for reduction in ("add", "mul", "max"):
        y = x.astype(np.float64).copy()
        for i, j, k in np.ndindex(*idx.shape):
            t = (i, idx[i, j, k] % 4, k)
            y[t] = {"add": y[t] + upd[i, j, k], "mul": y[t] * upd[i, j, k], "max": max(y[t], upd[i, j, k])}[reduction]
        node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="scatter", axis=1, reduction=reduction)
        write_opset(out, "test_scatter_elements_axis1_duplicates_" + reduction, [node], [("x", x), ("u", upd)],
                    [("y", y.astype(f))], [("i", idx)], 18)
    # ScatterND of rows [.., 5] (the last write of a row wins: no duplicates here).
    rows = np.array([[2, 1], [0, 3], [1, 0]], dtype=np.int64)
    u2 = rng.standard_normal((3, 5)).astype(f)
    y = x.copy()
    for p, (a, b) in enumerate(rows):
        y[a, b, :] = u2[p]
    write(out, "test_scatternd_rows", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="scatternd")],
          [("x", x), ("u", u2)], [("y", y)], [("i", rows)])
    # GatherND with batch_dims 1: y[b, p, :] = x[b, i[b, p, 0], :].
    gi = rng.integers(0, 4, size=(3, 2, 1)).astype(np.int64)
    y = np.stack([np.stack([x[b, gi[b, p, 0], :] for p in range(2)]) for b in range(3)])
    write(out, "test_gathernd_batch_dims_1_float", [helper.make_node("GatherND", ["x", "i"], ["y"], name="gathernd", batch_dims=1)],
          [("x", x)], [("y", y)], [("i", gi)])
    # GatherElements on axis 1.
    ei = rng.integers(0, 4, size=(3, 6, 5)).astype(np.int64)
    y = np.take_along_axis(x, ei, axis=1)
    write(out, "test_gather_elements_axis1_float", [helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=1)],
          [("x", x)], [("y", y)], [("i", ei)])
    # TopK: the 3 smallest along axis 1, ascending, first index on ties.
    order = np.argsort(x, axis=1, kind="stable")[:, :3, :]
    vals = np.take_along_axis(x, order, axis=1)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=1, largest=0)
    write(out, "test_topk_smallest_axis1", [node], [("x", x)], [("v", vals), ("i", order.astype(np.int64))],
          [("k", np.array([3], dtype=np.int64))])
    # Einsum: attention's scores and mix, and an outer product.
    q = rng.standard_normal((2, 3, 4, 5)).astype(f)
    k = rng.standard_normal((2, 3, 6, 5)).astype(f)
    vv = rng.standard_normal((2, 6, 3, 5)).astype(f)
    for name, eq, a, b in (("test_einsum_attention_scores", "bhqd,bhkd->bhqk", q, k),
                           ("test_einsum_attention_mix_transposed", "bhqk,bkhd->bqhd",
                            np.einsum("bhqd,bhkd->bhqk", q, k).astype(f), vv),
                           ("test_einsum_outer_sum", "ij,k->kj", x[0], q[0, 0, 0])):
        y = np.einsum(eq, a.astype(np.float64), b.astype(np.float64)).astype(f)
        write(out, name, [helper.make_node("Einsum", ["a", "b"], ["y"], name="einsum", equation=eq)],
              [("a", a), ("b", b)], [("y", y)], [])
def mod_and_extremes_test(out, name, rng):
    """Float Mod of computed tensors (fmod 1: C's fmod, the dividend's sign;
    fmod 0: Python's %, the divisor's), and Min and Max with a scalar
    constant operand, element by element in Python's floats."""
    f = np.float32
    x = rng.uniform(-10.0, 10.0, (3, 4)).astype(f)
    y = (rng.uniform(0.5, 3.0, (4,)) * np.array([1, -1, 1, -1])).astype(f)
    xb, yb = np.broadcast_arrays(x, y)
    z1, z0, lo, hi = (np.zeros(x.shape, dtype=f) for _ in range(4))
    for i in np.ndindex(*x.shape):
        p, q = float(xb[i]), float(yb[i])
        z1[i], z0[i] = math.fmod(p, q), p % q
        lo[i], hi[i] = min(p, 0.5), max(p, q, 2.0)
    nodes = [helper.make_node("Mod", ["x", "y"], ["z1"], fmod=1), helper.make_node("Mod", ["x", "y"], ["z0"], fmod=0),
             helper.make_node("Min", ["x", "half"], ["lo"]), helper.make_node("Max", ["x", "y", "two"], ["hi"])]
    write(out, name, nodes, [("x", x), ("y", y)], [("z1", z1), ("z0", z0), ("lo", lo), ("hi", hi)],
          [("half", np.array(0.5, dtype=f)), ("two", np.array(2.0, dtype=f))])


def integer_reductions_test(out, name, rng):
    """ReduceSum, ReduceMax, ReduceMin and ReduceProd of INT64 and INT32
    tensors computed by a Cast (so not folded), by Python loops."""
    x = rng.integers(-4, 5, (2, 3, 4)).astype(np.float32)
    v = x.astype(np.int64)

    def reduce(fn, axes, keep):
        shape = [1 if k in axes else n for k, n in enumerate(v.shape)]
        y = {}
        for i in np.ndindex(*v.shape):
            o = tuple(0 if k in axes else i[k] for k in range(3))
            y[o] = fn(y[o], int(v[i])) if o in y else int(v[i])
        r = np.zeros(shape, dtype=np.int64)
        for o, total in y.items():
            r[o] = total
        return r if keep else r.reshape([n for k, n in enumerate(v.shape) if k not in axes])

    add, mul = (lambda a, b: a + b), (lambda a, b: a * b)
    nodes = [helper.make_node("Cast", ["x"], ["c64"], to=TensorProto.INT64), helper.make_node("Cast", ["x"], ["c32"], to=TensorProto.INT32),
             helper.make_node("ReduceSum", ["c64", "axis1"], ["s"], keepdims=0),
             helper.make_node("ReduceMax", ["c64"], ["mx"], axes=[2], keepdims=1),
             helper.make_node("ReduceMin", ["c64"], ["mn"], axes=[0, 2], keepdims=0),
             helper.make_node("ReduceProd", ["c64"], ["pr"], axes=[1], keepdims=1),
             helper.make_node("ReduceSum", ["c32", "axis2"], ["s32"], keepdims=1),
             helper.make_node("ReduceProd", ["c32"], ["pr32"], axes=[0], keepdims=0)]
    outs = [("s", reduce(add, [1], False)), ("mx", reduce(max, [2], True)), ("mn", reduce(min, [0, 2], False)),
            ("pr", reduce(mul, [1], True)), ("s32", reduce(add, [2], True).astype(np.int32)),
            ("pr32", reduce(mul, [0], False).astype(np.int32))]
    write(out, name, nodes, [("x", x)], outs,
          [("axis1", np.array([1], dtype=np.int64)), ("axis2", np.array([2], dtype=np.int64))])


def bitshift_uint8_test(out, name, rng):
    """Cast FLOAT -> UINT8 (in range, fractional: toward zero), then BitShift
    LEFT (wrapping at 256; counts of 8 and more give 0) and RIGHT with
    broadcast counts, and with a UINT8 scalar constant count; a UINT8 result
    cast back to FLOAT. Python's ints, masked to 8 bits, are the reference."""
    x = rng.uniform(0.0, 255.99, (3, 5)).astype(np.float32)
    x[0, :3] = [0.0, 255.0, 128.5]
    y = np.array([0.0, 1.0, 3.7, 7.0, 9.0], dtype=np.float32)
    left, right, by3 = (np.zeros(x.shape, dtype=np.uint8) for _ in range(3))
    back = np.zeros(x.shape, dtype=np.float32)
    for i in np.ndindex(*x.shape):
        a, n = int(float(x[i])), int(float(y[i[1]]))
        left[i], right[i], by3[i] = (a << n) & 255, a >> n, a >> 3
        back[i] = float((a << n) & 255)
    nodes = [helper.make_node("Cast", ["x"], ["xu"], to=TensorProto.UINT8), helper.make_node("Cast", ["y"], ["yu"], to=TensorProto.UINT8),
             helper.make_node("BitShift", ["xu", "yu"], ["left"], direction="LEFT"),
             helper.make_node("BitShift", ["xu", "yu"], ["right"], direction="RIGHT"),
             helper.make_node("BitShift", ["xu", "three"], ["by3"], direction="RIGHT"),
             helper.make_node("Cast", ["left"], ["back"], to=TensorProto.FLOAT)]
    write(out, name, nodes, [("x", x), ("y", y)], [("left", left), ("right", right), ("by3", by3), ("back", back)],
          [("three", np.array(3, dtype=np.uint8))])


def integer_indexing_test(out, name, rng):
    """Pad (edge, reflect, constant) and GatherND of INT32 and BOOL tensors
    computed by a Cast, by pad_reference and loops."""
    x = rng.integers(-3, 4, (2, 3, 4)).astype(np.float32)
    v, b = x.astype(np.int32), x != 0
    pads = {"edge": [1, 0, 1, 0, 2, 3], "reflect": [0, 1, 2, 0, 2, 1], "constant": [0, 2, 0, 1, 0, 1]}
    gi = np.array([[1, 2], [0, 1], [1, 0]], dtype=np.int64)
    bi = np.array([[[2]], [[0]]], dtype=np.int64)
    g = np.stack([v[i, j, :] for i, j in gi])
    gb = np.stack([np.stack([b[k, bi[k, p, 0], :] for p in range(1)]) for k in range(2)])
    nodes = [helper.make_node("Cast", ["x"], ["c32"], to=TensorProto.INT32), helper.make_node("Cast", ["x"], ["cb"], to=TensorProto.BOOL),
             helper.make_node("GatherND", ["c32", "gi"], ["g"]), helper.make_node("GatherND", ["cb", "bi"], ["gb"], batch_dims=1),
             helper.make_node("Pad", ["cb", "pads_b"], ["pb"], mode="constant")]
    outs = [("g", g), ("gb", gb), ("pb", pad_reference(b, [0, 1, 0, 0, 0, 2], "constant", False))]
    inits = [("gi", gi), ("bi", bi), ("pads_b", np.array([0, 1, 0, 0, 0, 2], dtype=np.int64)), ("seven", np.array(7, dtype=np.int32))]
    for mode, p in pads.items():
        inits.append(("pads_" + mode, np.array(p, dtype=np.int64)))
        ins = ["c32", "pads_" + mode] + (["seven"] if mode == "constant" else [])
        nodes.append(helper.make_node("Pad", ins, ["p_" + mode], mode=mode))
        outs.append(("p_" + mode, pad_reference(v, p, mode, 7)))
    write(out, name, nodes, [("x", x)], outs, inits)


def shape_code_test(out, name, rng):
    """y = x.reshape(x.shape[0], C, (H // 2) ** 2 * 4) / sqrt(C), as exporters write it from x.shape."""
    def const(k, v):
        return helper.make_node("Constant", [], [k], value=numpy_helper.from_array(np.array(v), k + "_value"))
    nodes = [const("i1", np.int64(1)), const("i2", np.int64(2)), const("two", np.int64(2)), const("f2", np.float32(2.0)),
             const("minus_1", np.array([-1], dtype=np.int64)), const("axes", np.array([0], dtype=np.int64)),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i1"], ["c"]),
             helper.make_node("Gather", ["s", "i2"], ["h"]),
             helper.make_node("Div", ["h", "two"], ["half"]),
             helper.make_node("Cast", ["half"], ["half_f"], to=TensorProto.FLOAT),
             helper.make_node("Pow", ["half_f", "f2"], ["sq"]),
             helper.make_node("Cast", ["sq"], ["sq_i"], to=TensorProto.INT64),
             helper.make_node("Mul", ["sq_i", "two"], ["hw2"]),
             helper.make_node("Mul", ["hw2", "two"], ["hw"]),
             helper.make_node("Unsqueeze", ["c", "axes"], ["c1"]),
             helper.make_node("Unsqueeze", ["hw", "axes"], ["hw1"]),
             helper.make_node("Concat", ["minus_1", "c1", "hw1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Cast", ["c"], ["c_f"], to=TensorProto.FLOAT),
             helper.make_node("Sqrt", ["c_f"], ["root"]),
             helper.make_node("Reciprocal", ["root"], ["scale"]),
             helper.make_node("Mul", ["r", "scale"], ["y"])]
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    y = (x.astype(np.float64).reshape(2, 3, 16) / np.sqrt(3.0)).astype(np.float32)
    write(out, name, nodes, [("x", x)], [("y", y)], [])
    # The batch is a run-time dim: only the model's declared input says so.
    model_path = os.path.join(out, name, "model.onnx")
    model = load(model_path)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    save(model, model_path)


def constant_layout_test(out, name, rng):
    """y = x + m, m computed from a constant by Transpose, ReduceSum, Tile, Expand, Flatten and ReduceMax."""
    w = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[2, 0, 1]),
             helper.make_node("ReduceSum", ["wt", "axis_1"], ["rs"], keepdims=1),
             helper.make_node("Tile", ["rs", "repeats"], ["t"]),
             helper.make_node("Expand", ["t", "shape"], ["e"]),
             helper.make_node("Flatten", ["e"], ["f"], axis=2),
             helper.make_node("ReduceMax", ["f"], ["m"], axes=[0], keepdims=0),
             helper.make_node("Add", ["x", "m"], ["y"])]
    t = np.tile(w.astype(np.float64).transpose(2, 0, 1).sum(axis=1, keepdims=True), (1, 1, 2))
    m = (t * np.ones((2, 4, 1, 6))).reshape(8, 6).max(axis=0)
    x = rng.standard_normal((1, 6)).astype(np.float32)
    write(out, name, nodes, [("x", x)], [("y", (x + m).astype(np.float32))],
          [("w", w), ("axis_1", np.array([1], dtype=np.int64)), ("repeats", np.array([1, 1, 2], dtype=np.int64)),
           ("shape", np.array([2, 4, 1, 6], dtype=np.int64))])


def spec_body(wfgen, out, test):
    """The spec `wfgen import` writes of OUT/test: its text, and its body's statements."""
    spec = os.path.join(out, test + ".yaml")
    subprocess.run([wfgen, "import", os.path.join(out, test, "model.onnx"), "-o", spec], check=True)
    with open(spec) as f:
        text = f.read()
    return text, [line.strip() for line in text.split("call: |")[1].split("builds:")[0].strip().splitlines()]


def check_folded(wfgen, out):
    """The constant subgraphs of test_shape_code_folded and test_constant_layout_folded left no statement in the spec;
    test_conv_pointwise_bias is a matmul on the input itself, without im2col; and `wfgen import --devices`."""
    for test, want, where in (
            ("test_shape_code_folded", ["r = x.reshape(-1, 3, 16)  # Reshape", "y = r * 0.57735026  # Mul", "return y"],
             'where: "x[batch 3 4 4] -> y[batch 3 16]"'),
            ("test_constant_layout_folded", ["y = x + m  # Add", "return y"], 'where: "x[1 6] -> y[1 6]"'),
            ("test_conv_pointwise_bias",
             ["y = (W.reshape(7, 5) @ (x).reshape(-1, 5, 36)).reshape(2, 7, 6, 6) + B.reshape(7, 1, 1)  # Conv 'conv'", "return y"],
             'where: "x[2 5 6 6] -> y[2 7 6 6]"')):
        text, body = spec_body(wfgen, out, test)
        if body != want:
            sys.exit("%s: the spec's body is\n  %s\nnot\n  %s" % (test, "\n  ".join(body), "\n  ".join(want)))
        if where not in text:
            sys.exit("%s: the spec has no line %s:\n%s" % (test, where, text))
        if ", devices: [cpu]}" not in text:
            sys.exit("%s: the build is not on the cpu device alone:\n%s" % (test, text))
    # --devices blas,cpu: the build's matmuls through cblas; blas alone is refused (most nodes have cpu kernels only).
    model, spec = os.path.join(out, "test_conv_pointwise_bias", "model.onnx"), os.path.join(out, "devices.yaml")
    subprocess.run([wfgen, "import", model, "-o", spec, "--devices", "blas,cpu"], check=True)
    with open(spec) as f:
        if ", devices: [blas, cpu]}" not in f.read():
            sys.exit("--devices blas,cpu: the build does not list blas, cpu")
    bad = subprocess.run([wfgen, "import", model, "-o", spec + ".bad", "--devices", "blas"], capture_output=True, text=True)
    if bad.returncode != 2 or "--devices expects cpu or blas,cpu" not in bad.stderr or os.path.exists(spec + ".bad"):
        sys.exit("--devices blas: exit %d, %s" % (bad.returncode, bad.stderr))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check-folded":
        check_folded(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):  # an option is not an output folder
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    conv_test(out, "test_conv_groups_2", rng, n=2, c=4, hw=6, m=6, group=2, k=3, pad=1)
    conv_test(out, "test_conv_depthwise", rng, n=1, c=3, hw=7, m=3, group=3, k=3, stride=2, pad=1)
    # Planes with an interior (the 3 x 3 kernel's vectorised path, next to the borders) and 5 x 5 filters.
    conv_test(out, "test_conv_depthwise_planes", rng, n=2, c=5, hw=19, m=5, group=5, k=3, pad=1)
    conv_test(out, "test_conv_depthwise_5x5_strided", rng, n=1, c=4, hw=21, m=4, group=4, k=5, stride=2, pad=2)
    conv_test(out, "test_conv_depthwise_multiplier", rng, n=2, c=2, hw=5, m=6, group=2, k=2, dilation=2, bias=False)
    conv_test(out, "test_conv_groups_4_strided", rng, n=1, c=8, hw=9, m=4, group=4, k=3, stride=2)
    concat_test(out, "test_concat_computed_3_inputs_axis_1", rng, [(2, 3, 4), (2, 1, 4), (2, 5, 4)], 1)
    concat_test(out, "test_concat_computed_axis_0", rng, [(2, 3), (4, 3)], 0)
    concat_test(out, "test_concat_computed_axis_negative_1", rng, [(2, 2, 3), (2, 2, 1)], -1)
    concat_test(out, "test_concat_computed_nchw_channels", rng, [(1, 2, 3, 3), (1, 3, 3, 3)], 1)
    trilu_test(out, "test_trilu_float_upper_k1", rng, (2, 4, 5), True, 1)
    trilu_test(out, "test_trilu_float_lower_neg", rng, (3, 6), False, -1)
    trilu_test(out, "test_trilu_float_lower_wide", rng, (2, 2, 3, 7), False, 2)
    logic_test(out, "test_logic_computed_bools", rng, (3, 4), (3, 4))
    logic_test(out, "test_logic_computed_bools_broadcast", rng, (2, 3, 4), (4,))
    pad_test(out, "test_pad_constant_value_and_crop", rng, (2, 3, 4, 5), [0, 1, -1, 2, 1, 0, 2, -2], "constant", 0.75)
    pad_test(out, "test_pad_edge", rng, (1, 2, 3, 4), [0, 0, 2, 1, 0, 0, 1, 3], "edge")
    pad_test(out, "test_pad_reflect", rng, (2, 2, 4, 5), [0, 0, 3, 1, 0, 0, 2, 4], "reflect")
    tile_test(out, "test_tile_computed", rng, (2, 3, 2), [2, 1, 3])
    recurrent_test(out, "test_gru_sequence_lens_bidirectional", rng, "GRU", 4, 3, 2, 3, [4, 2, 3], "bidirectional")
    recurrent_test(out, "test_rnn_sequence_lens_reverse", rng, "RNN", 5, 2, 3, 4, [3, 5], "reverse")
    channel_shuffle_test(out, "test_channel_shuffle_rank_5", rng, 2, 6, 3, 4, 2)
    conv3d_test(out, "test_conv3d_groups_pads_dilation", rng, (1, 4, 5, 6, 5), m=4, group=2, kernel=[2, 3, 2],
                strides=[2, 1, 2], pads=[1, 0, 1, 1, 2, 1], dilations=[1, 2, 1])
    pool3d_test(out, "test_maxpool3d_pads", rng, (2, 2, 4, 5, 5), "MaxPool", [2, 2, 3], [2, 1, 2], [1, 0, 1, 1, 1, 1])
    pool3d_test(out, "test_averagepool3d_pads", rng, (1, 3, 5, 4, 6), "AveragePool", [3, 2, 2], [1, 2, 2], [1, 1, 0, 1, 1, 0])
    double_test(out, "test_double_tensors", rng)
    conv_transpose_test(out, "test_convtranspose_groups_bias_pads", rng, (2, 4, 3, 4), 3, 2, [3, 2], [2, 3],
                        [1, 0, 2, 1], [1, 2])
    conv_transpose_test(out, "test_convtranspose_1d_bias", rng, (1, 3, 5), 2, 1, [4], [2], [1, 2], [0])
    conv_transpose_test(out, "test_convtranspose_3d_groups_bias_pads", rng, (2, 4, 2, 3, 3), 2, 2, [2, 3, 2], [2, 1, 2],
                        [1, 0, 0, 0, 1, 1], [1, 0, 1])
    resize_test(out, "test_resize_bilinear_pytorch_batch", rng, (2, 3, 3, 4), [1.0, 1.0, 2.0, 2.5], "linear")
    resize_test(out, "test_resize_nearest_floor_batch", rng, (2, 2, 3, 4), [1.0, 1.0, 2.0, 1.5], "nearest")
    indexing_tests(out, rng)
    mod_and_extremes_test(out, "test_mod_float_and_min_max_constant", rng)
    integer_reductions_test(out, "test_integer_reductions_computed", rng)
    integer_indexing_test(out, "test_integer_pad_gathernd_computed", rng)
    shape_code_test(out, "test_shape_code_folded", rng)
    constant_layout_test(out, "test_constant_layout_folded", rng)
    # 1 x 1 convolutions: at stride 1 without padding a matmul on the input
    # itself (no im2col), with bias, grouped, and followed by a Clip; strided
    # or padded, through im2col.
    conv_test(out, "test_conv_pointwise_bias", rng, n=2, c=5, hw=6, m=7, group=1, k=1)
    conv_test(out, "test_conv_pointwise_groups", rng, n=1, c=6, hw=5, m=4, group=2, k=1, bias=False)
    conv_test(out, "test_conv_pointwise_strided", rng, n=1, c=3, hw=7, m=5, group=1, k=1, stride=2)
    conv_test(out, "test_conv_pointwise_padded", rng, n=1, c=3, hw=4, m=2, group=1, k=1, pad=1)
    conv_clip_test(out, "test_conv_pointwise_clip", rng, n=1, c=4, hw=9, m=6, k=1, pad=0)
    conv_clip_test(out, "test_conv_3x3_clip", rng, n=2, c=3, hw=6, m=4, k=3, pad=1)
    conv_residual_test(out, "test_conv_pointwise_residual", rng, n=2, c=6, hw=5)
    # winograd_conv2d: F(4 x 4) with partial tiles (33 x 33 outputs), and with the residual and relu fused.
    conv_test(out, "test_conv_winograd_3x3", rng, n=2, c=16, hw=33, m=17, group=1, k=3, pad=1, positive=True)
    conv_residual_test(out, "test_conv_winograd_residual", rng, n=1, c=18, hw=32, k=3, positive=True)
    bitshift_uint8_test(out, "test_bitshift_uint8_computed", rng)
    # Depthwise, followed by a Clip: the bias and the Clip become the
    # convolution's epilogue (fuse.cpp), in its kernel; a small plane (the
    # padded copy) and a strided large one (interior rows and border).
    conv_clip_test(out, "test_conv_depthwise_clip", rng, n=2, c=5, hw=9, m=5, k=3, pad=1, group=5)
    conv_clip_test(out, "test_conv_depthwise_clip_strided", rng, n=1, c=6, hw=40, m=6, k=3, pad=1, group=6, stride=2)


if __name__ == "__main__":
    main()
