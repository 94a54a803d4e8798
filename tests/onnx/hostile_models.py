#!/usr/bin/env python3
"""ONNX models whose names and doc strings try to change what the imported model computes.

Writes <out>/<test>/model.onnx and test_data_set_0/{input,output}_*.pb in the
layout of ONNX's backend node tests, for conformance.py, which imports,
generates, compiles and runs each and compares it with the expected outputs.
Those come from numpy, computing the graph's meaning: a name that ended a
comment in the imported spec and began a statement (`return X * 0.0`), a name
that shadowed a function (`exp`), or two dim params made one symbol would
change the results, so the test fails.

The names and docs hold line breaks followed by body statements, '#', '"',
"'", '*/', '\\', YAML indicators, NUL, CR, U+2028, non-ASCII and bytes that
are not UTF-8, and long runs. One more model keeps its weights in external
data, which the importer reads from the model's folder. Deterministic: the same files on every run.

Usage: tests/onnx/hostile_models.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import helper, mapping, numpy_helper

# Text that would be a statement, a comment's end or YAML structure if pasted.
INJECT = "\nreturn X * 0.0\n"
NASTY = [
    "n1" + INJECT + "  # \"'*/\\",
    "#",
    "x: {y: [1, 2]}\n- !!str &a *a | > % @ `",
    "*/ /* \\",
    "\\",
    "a\r\nreturn Y",
    "tab\there\x00nul",
    "\u2028line sep\u0085nel",
    "caf\u00e9 \u6a21\u578b",
    "\"quoted\" 'single'",
]
# Bytes that are not UTF-8 cannot be set through the Python API: this
# placeholder (as long) is replaced in the serialized file.
NOT_UTF8_PLACEHOLDER, NOT_UTF8 = b"QzQz", b"\xff\xfe\xc3\x28"


def info(name, dtype, shape):
    return helper.make_tensor_value_info(name, mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)], shape)


def write(out, test, model, feeds, expected):
    """The model and its one data set: `feeds` are the inputs, `expected` the outputs (in order)."""
    d = os.path.join(out, test)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    data = model.SerializeToString(deterministic=True).replace(NOT_UTF8_PLACEHOLDER, NOT_UTF8)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(data)
    for prefix, tensors in (("input", feeds), ("output", expected)):
        for k, v in enumerate(tensors):
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (prefix, k)), "wb") as f:
                f.write(numpy_helper.from_array(v, "%s_%d" % (prefix, k)).SerializeToString())


def make_model(graph, doc=""):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], doc_string=doc,
                              producer_name="hostile" + INJECT + "producer", producer_version="1\n# v")
    model.ir_version = 7
    return model


def node_names(out, rng):
    """exp((X + Y) * W) - X, every name and value hostile, one value named `exp`."""
    x_name, y_name, w_name, z_name = "X" + INJECT, NASTY[2], NASTY[3] + "QzQz", NASTY[5]
    nodes = [
        helper.make_node("Add", [x_name, y_name], [NASTY[0]], name=NASTY[0], doc_string=NASTY[1]),
        helper.make_node("Mul", [NASTY[0], w_name], ["exp"], name=NASTY[4]),
        helper.make_node("Exp", ["exp"], [NASTY[6]], name=NASTY[7]),
        helper.make_node("Sub", [NASTY[6], x_name], [z_name], name=NASTY[8]),
    ]
    x = rng.standard_normal((2, 3)).astype(np.float32) * 0.5
    y = rng.standard_normal((2, 3)).astype(np.float32) * 0.5
    w = rng.standard_normal((2, 3)).astype(np.float32) * 0.5
    graph = helper.make_graph(nodes, NASTY[9], [info(x_name, np.float32, [2, 3]), info(y_name, np.float32, [2, 3])],
                              [info(z_name, np.float32, [2, 3])], [numpy_helper.from_array(w, w_name)])
    z = (np.exp((x.astype(np.float64) + y) * w) - x).astype(np.float32)
    write(out, "test_hostile_node_names", make_model(graph), [x, y], [z])


def doc_strings(out, rng):
    """Relu(X) + 1.5 with doc strings of every kind of hostile text on the model, graph and nodes."""
    long_run = "#" * 20000 + "\n" * 5000 + "\\" * 3001
    docs = NASTY + [INJECT * 50, long_run, "QzQz doc", "\x00" * 10]
    nodes = [helper.make_node("Relu", ["X"], ["r"], name="relu", doc_string=docs[0]),
             helper.make_node("Add", ["r", "c"], ["Z"], name="add", doc_string=docs[11])]
    graph = helper.make_graph(nodes, "docs", [info("X", np.float32, [3, 4])], [info("Z", np.float32, [3, 4])],
                              [numpy_helper.from_array(np.array(1.5, dtype=np.float32), "c")],
                              doc_string="".join(docs))
    for vi in list(graph.input) + list(graph.output):
        vi.doc_string = docs[2] + docs[12]
    x = rng.standard_normal((3, 4)).astype(np.float32)
    write(out, "test_hostile_doc_strings", make_model(graph, doc="".join(reversed(docs))), [x],
          [np.maximum(x, 0) + np.float32(1.5)])


def long_and_alike_names(out, rng):
    """X @ Y^T for X[p 3], Y[q 3] whose dim params `n.1` and `n_1` mangle alike (p != q), long names,
    names that mangle to the same body name, and names the body language reserves."""
    long_a, long_b = "\n" * 3000 + "a", "\n" * 3000 + "b"  # mangle alike, then truncated alike
    nodes = [
        helper.make_node("Transpose", ["Y"], [long_a], perm=[1, 0], name="\n" * 4000),
        helper.make_node("MatMul", ["X", long_a], [long_b], name="return"),
        helper.make_node("Identity", [long_b], ["a.b"]),
        helper.make_node("Neg", ["a.b"], ["a_b"], name="wf_n"),
        helper.make_node("Neg", ["a_b"], ["wf_out"], name="/a/b/"),
    ]
    graph = helper.make_graph(nodes, "alike", [info("X", np.float32, ["n.1", 3]), info("Y", np.float32, ["n_1", 3])],
                              [info("wf_out", np.float32, ["n.1", "n_1"])])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    write(out, "test_hostile_long_and_alike_names", make_model(graph), [x, y],
          [(x.astype(np.float64) @ y.T.astype(np.float64)).astype(np.float32)])


def external_data(out, rng):
    """X @ W + B with W and B in external data (weights.bin in the model's folder, after 16 bytes of
    other data, B at its own offset): the importer reads them, inside the folder, at their offsets."""
    from onnx import TensorProto
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    blob = bytes(range(16)) + w.tobytes() + bytes(8) + b.tobytes()
    inits = []
    for name, v, offset in (("W", w, 16), ("B", b, 16 + w.nbytes + 8)):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=v.shape, data_location=TensorProto.EXTERNAL)
        for k, val in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(v.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, val
        inits.append(t)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Y"])]
    graph = helper.make_graph(nodes, "external", [info("X", np.float32, [2, 4])], [info("Y", np.float32, [2, 3])], inits)
    write(out, "test_external_data", make_model(graph), [x],
          [(x.astype(np.float64) @ w.astype(np.float64) + b).astype(np.float32)])
    with open(os.path.join(out, "test_external_data", "weights.bin"), "wb") as f:
        f.write(blob)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(39)
    node_names(out, rng)
    doc_strings(out, rng)
    long_and_alike_names(out, rng)
    external_data(out, rng)


if __name__ == "__main__":
    main()
