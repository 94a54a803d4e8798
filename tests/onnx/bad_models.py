#!/usr/bin/env python3
"""Writes tests/onnx/bad/: crafted ONNX model files `wfgen import` must refuse.

Each case is <name>.onnx with <name>.expect beside it, the exact message
`wfgen import <name>.onnx -o out.yaml` prints (`{file}` stands for the model's
path as given, `{parent}` for the real path of the folder above), and, when the case needs
options, <name>.args (one option a line). Files the external data cases read
(<name>.bin, a symlink pointing out of the folder) are written here as well.
test_onnx_untrusted ("every crafted bad model ...") imports each, checks the
message and that nothing was written. The output is deterministic: run it
again after a change and commit the diff.

Usage: tests/onnx/bad_models.py [OUT_DIR]   (default: tests/onnx/bad beside this script)
"""
import os
import shutil
import sys

from onnx import TensorProto, TypeProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = []  # (name, model bytes, expected message, args)


def case(name, expect, args=()):
    """Registers the function below it as the writer of case `name`."""
    def register(fn):
        CASES.append((name, fn, expect, list(args)))
        return fn
    return register


def model(nodes=None, inits=(), inputs=None, outputs=None, opset=13):
    """Y = Relu(X) on [2, 3] unless the case gives its own graph."""
    f = TensorProto.FLOAT
    nodes = nodes if nodes is not None else [helper.make_node("Relu", ["X"], ["Y"], name="relu")]
    inputs = inputs if inputs is not None else [helper.make_tensor_value_info("X", f, [2, 3])]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("Y", f, [2, 3])]
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] if opset else [])
    m.ir_version = 7
    m.producer_name = "tests/onnx/bad_models.py"
    return m


def raw_tensor(name, dims, data, dtype=TensorProto.FLOAT):
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    t.raw_data = data
    return t


def external(name, dims, entries, dtype=TensorProto.FLOAT):
    """A tensor whose data is in a file: `entries` the external_data key/values, in order."""
    t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def typed(name, dtype, dims, values):
    """A tensor with its values in the typed field, as many as given (helper.make_tensor checks the count)."""
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    (t.float_data if dtype == TensorProto.FLOAT else t.int64_data).extend(values)
    return t


def with_init(t):
    """The default graph plus one initializer (the importer checks every one, used or not)."""
    return model(inits=[t])


# --- the file itself ---------------------------------------------------------

@case("not_protobuf", "{file} is not an ONNX model (the protobuf ModelProto does not parse)")
def _():
    return b"# this is a YAML file, not a model\nmodels: []\n"


@case("truncated", "{file} is not an ONNX model (the protobuf ModelProto does not parse)")
def _():
    data = model(inits=[raw_tensor("w", [16], bytes(64))]).SerializeToString()
    return data[: len(data) - 40]


@case("nesting_200_deep", "{file} is not an ONNX model (the protobuf ModelProto does not parse)")
def _():
    m = model()
    cur = m.graph.input[0].type
    cur.Clear()
    for _ in range(200):  # protobuf's recursion limit (100) stops the parse
        cur = cur.sequence_type.elem_type
    cur.tensor_type.elem_type = TensorProto.FLOAT
    return m


@case("file_over_limit", "the model file is 103 bytes, over the limit of 100 bytes (--max-data raises it)",
      ["--max-data", "100"])
def _():
    return model()


@case("many_empty_nodes", "reading the model file would take about 6 MiB of memory (its messages, strings and arrays),"
      " over the limit of 1048576 bytes (1 MiB) (--max-data raises it)", ["--max-data", "1MiB"])
def _():
    # 20000 empty NodeProtos: 2 bytes each in the file, ~320 once parsed.
    m = model()
    data = m.graph.SerializeToString() + b"\x0a\x00" * 20000
    m.ClearField("graph")
    head = m.SerializeToString(deterministic=True)
    n, size = len(data), b""
    while True:
        size += bytes([(n & 0x7f) | (0x80 if n > 0x7f else 0)])
        n >>= 7
        if not n:
            break
    return head + b"\x3a" + size + data


@case("no_default_opset", "{file} imports no opset of the default domain (ai.onnx)")
def _():
    return model(opset=0)


# Older opsets are upgraded with ONNX's version converter (wfgen/onnx/upgrade.cpp),
# after ONNX's checker: what either refuses is an error naming both opsets.
@case("opset_5", "{file} uses opset 5, which wfgen imports by upgrading it to opset 13 with ONNX's version"
      " converter, but checking it failed: No Op registered for Det with domain_version of 5")
def _():
    return model(nodes=[helper.make_node("Det", ["X"], ["Y"], name="det")], opset=5)


@case("opset_5_hostile_name", "{file} uses opset 5, which wfgen imports by upgrading it to opset 13 with ONNX's"
      " version converter, but checking it failed: No Op registered for Det\\nreturn X * 0.0\\x1b[31m with"
      " domain_version of 5")
def _():
    return model(nodes=[helper.make_node("Det\nreturn X * 0.0\x1b[31m", ["X"], ["Y"], name="n\n# x")], opset=5)


# --- names -------------------------------------------------------------------

@case("node_name_5000_bytes", "a node's name is 5000 bytes long ('\\nreturn X * 0.0\\nreturn X * 0.0\\nreturn...');"
      " names of up to 4096 bytes are accepted")
def _():
    m = model()
    m.graph.node[0].name = ("\nreturn X * 0.0" * 400)[:5000]
    return m


@case("input_name_10000_bytes", "a value's name is 10000 bytes long ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...');"
      " names of up to 4096 bytes are accepted")
def _():
    name = "x" * 10000
    m = model(nodes=[helper.make_node("Relu", [name], ["Y"])],
              inputs=[helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])])
    return m


@case("hostile_op_type", "cannot import operator Det\\nreturn X * 0.0\\x1b[31m of domain 'evil\\ndomain' (node 'n\\r\\n# \\\\'):"
      " only the default ONNX domain is supported")
def _():
    return model(nodes=[helper.make_node("Det\nreturn X * 0.0\x1b[31m", ["X"], ["Y"], name="n\r\n# \\", domain="evil\ndomain")],
                 opset=13)


@case("hostile_unsupported_attribute", "cannot import operator Relu (node 'relu') of opset 13: its attribute 'a\\nb: \\x00' is not supported")
def _():
    m = model()
    m.graph.node[0].attribute.append(helper.make_attribute("a\nb: \x00", 1))
    return m


# --- dims and data -------------------------------------------------------------

@case("negative_dim", "initializer 'w' has dims [-1, 3]: dim 0 is negative")
def _():
    return with_init(raw_tensor("w", [-1, 3], b""))


@case("dims_overflow_int64", "initializer 'w' has dims [1099511627776, 1099511627776], more elements than the limit of 4294967296 bytes (4 GiB)"
      " allows (--max-data raises it)")
def _():
    return with_init(raw_tensor("w", [1 << 40, 1 << 40], b""))


@case("dims_over_4gib", "initializer 'w' has dims [1073741824, 2], more elements than the limit of 4294967296 bytes (4 GiB) allows"
      " (--max-data raises it)")
def _():
    return with_init(raw_tensor("w", [1 << 30, 2], b""))


@case("raw_data_short", "initializer 'w' has dims [2, 3] (6 elements of FLOAT, 24 bytes) but its data holds 20 bytes")
def _():
    return with_init(raw_tensor("w", [2, 3], bytes(20)))


@case("raw_data_long", "initializer 'w' has dims [2, 3] (6 elements of FLOAT, 24 bytes) but its data holds 28 bytes")
def _():
    return with_init(raw_tensor("w", [2, 3], bytes(28)))


@case("float_data_short", "initializer 'w' has dims [2, 3] (6 elements) but holds 5 values")
def _():
    return with_init(typed("w", TensorProto.FLOAT, [2, 3], [1.0] * 5))


@case("float_data_long", "initializer 'w' has dims [2, 3] (6 elements) but holds 7 values")
def _():
    return with_init(typed("w", TensorProto.FLOAT, [2, 3], [1.0] * 7))


@case("int64_data_short", "initializer 'shape' has dims [2] (2 elements) but holds 1 values")
def _():
    return with_init(typed("shape", TensorProto.INT64, [2], [3]))


@case("no_data", "initializer 'w' has dims [2, 3] (6 elements) but holds 0 values")
def _():
    return with_init(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3]))


@case("raw_and_typed_data", "initializer 'w' holds values both in raw_data and in float_data")
def _():
    t = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    t.raw_data = bytes(8)
    return with_init(t)


@case("wrong_typed_field", "initializer 'w' is FLOAT but holds values in int64_data (ONNX keeps FLOAT values in float_data or raw_data)")
def _():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
    t.int64_data.extend([1, 2])
    return with_init(t)


@case("undefined_element_type", "initializer 'w' has element type 0, which ONNX does not define")
def _():
    return with_init(TensorProto(name="w", dims=[1], float_data=[1.0]))


@case("unknown_element_type", "initializer 'w' has element type 99, which ONNX does not define")
def _():
    return with_init(TensorProto(name="w", data_type=99, dims=[1], float_data=[1.0]))


@case("string_raw_data", "initializer 's' is a STRING tensor with raw_data, which ONNX does not allow")
def _():
    return with_init(raw_tensor("s", [2], b"ab", TensorProto.STRING))


@case("total_over_limit", "initializer 'b' (4096 bytes) brings the model's tensor data to more than the limit of 7168 bytes"
      " (--max-data raises it)", ["--max-data", "7KiB"])
def _():
    # In external data: the file itself (and its parse) is under the limit.
    return model(inits=[external("a", [1024], [("location", "ext_8k.bin"), ("length", "4096")]),
                        external("b", [1024], [("location", "ext_8k.bin"), ("offset", "4096")])])


@case("constant_value_short", "attribute 'value' of node 'c' (Constant) has dims [4] (4 elements) but holds 3 values")
def _():
    c = helper.make_node("Constant", [], ["C"], name="c", value=typed("v", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0]))
    return model(nodes=[c, helper.make_node("Add", ["X", "C"], ["Y"])])


@case("constant_of_shape_value_10", "attribute 'value' of node 'cos' (ConstantOfShape) has dims [10] (10 values); its value is one value")
def _():
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
    cos = helper.make_node("ConstantOfShape", ["shape"], ["C"], name="cos",
                           value=helper.make_tensor("v", TensorProto.FLOAT, [10], [0.0] * 10))
    return model(nodes=[cos, helper.make_node("Add", ["X", "C"], ["Y"])], inits=[shape])


@case("constant_of_shape_huge", "cannot import operator ConstantOfShape (node 'cos') of opset 13: ConstantOfShape with a negative dim"
      " or more than 2^24 elements")
def _():
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [100000, 100000])
    cos = helper.make_node("ConstantOfShape", ["shape"], ["C"], name="cos")
    return model(nodes=[cos, helper.make_node("Add", ["X", "C"], ["Y"])], inits=[shape])


@case("constant_of_shape_negative", "cannot import operator ConstantOfShape (node 'cos') of opset 13: ConstantOfShape with a negative dim"
      " or more than 2^24 elements")
def _():
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-4, 3])
    cos = helper.make_node("ConstantOfShape", ["shape"], ["C"], name="cos")
    return model(nodes=[cos, helper.make_node("Add", ["X", "C"], ["Y"])], inits=[shape])


@case("folded_broadcast_huge", "cannot import operator Add (node 'add') of opset 13: the constant operands of Add do not broadcast,"
      " or broadcast to more than 2^24 elements")
def _():
    a = helper.make_tensor("a", TensorProto.INT64, [5000, 1], [1] * 5000)
    b = helper.make_tensor("b", TensorProto.INT64, [1, 5000], [1] * 5000)
    add = helper.make_node("Add", ["a", "b"], ["s"], name="add")
    return model(nodes=[add, helper.make_node("Reshape", ["X", "s"], ["Y"])], inits=[a, b])


@case("folded_reshape_mismatch", "cannot import operator Reshape (node 'r') of opset 13: a Reshape of a constant of 6 elements to a"
      " shape that does not hold them")
def _():
    data = helper.make_tensor("d", TensorProto.INT64, [6], [1, 2, 3, 4, 5, 6])
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [4, 4])
    r = helper.make_node("Reshape", ["d", "s"], ["t"], name="r")
    return model(nodes=[r, helper.make_node("Reshape", ["X", "t"], ["Y"])], inits=[data, shape])


@case("attribute_ints_2000", "attribute 'perm' of node 't' (Transpose) holds 2000 values; the attributes of wfgen's operators hold at most 1024")
def _():
    return model(nodes=[helper.make_node("Transpose", ["X"], ["Y"], name="t", perm=list(range(2000)))])


@case("attribute_tensor_2000", "attribute 'junk' of node 'relu' (Relu) is a tensor of 2000 values; an operator's attribute tensor holds at"
      " most 1024")
def _():
    m = model()
    m.graph.node[0].attribute.append(helper.make_attribute("junk", helper.make_tensor("j", TensorProto.FLOAT, [2000], [0.0] * 2000)))
    return m


# --- external data --------------------------------------------------------------

@case("ext_absolute", "initializer 'w': the external data location '/etc/passwd' is an absolute path; it must name a file in the model's folder")
def _():
    return with_init(external("w", [2, 3], [("location", "/etc/passwd")]))


@case("ext_dotdot", "initializer 'w': the external data location '../CMakeLists.txt' climbs out of the model's folder with '..'")
def _():
    return with_init(external("w", [2, 3], [("location", "../CMakeLists.txt")]))


@case("ext_dotdot_inner", "initializer 'w': the external data location 'sub/../../bad/ext_data.bin' climbs out of the model's folder with '..'")
def _():
    return with_init(external("w", [2, 3], [("location", "sub/../../bad/ext_data.bin")]))


@case("ext_symlink_out", "initializer 'w': the external data location 'ext_symlink_out.bin' resolves (through a symlink) to"
      " '{parent}/CMakeLists.txt', outside the model's folder")
def _():
    return with_init(external("w", [2, 3], [("location", "ext_symlink_out.bin")]))


@case("ext_missing_file", "initializer 'w': its external data file 'missing.bin' cannot be opened: No such file or directory")
def _():
    return with_init(external("w", [2, 3], [("location", "missing.bin")]))


@case("ext_file_short", "initializer 'w': its external data (offset 0, length 24) goes past the end of 'ext_data.bin', which is 16 bytes long")
def _():
    return with_init(external("w", [2, 3], [("location", "ext_data.bin")]))


@case("ext_offset_past_end", "initializer 'w': its external data (offset 1000, length 8) goes past the end of 'ext_data.bin', which is 16"
      " bytes long")
def _():
    return with_init(external("w", [2], [("location", "ext_data.bin"), ("offset", "1000")]))


@case("ext_offset_overflow", "initializer 'w': its external data (offset 18446744073709551615, length 8) goes past the end of"
      " 'ext_data.bin', which is 16 bytes long")
def _():
    return with_init(external("w", [2], [("location", "ext_data.bin"), ("offset", str(2**64 - 1))]))


@case("ext_offset_negative", "initializer 'w': its external data offset '-8' is not a whole number >= 0")
def _():
    return with_init(external("w", [2], [("location", "ext_data.bin"), ("offset", "-8")]))


@case("ext_length_mismatch", "initializer 'w' has dims [2, 3] (24 bytes) but its external data holds 12 bytes")
def _():
    return with_init(external("w", [2, 3], [("location", "ext_data.bin"), ("length", "12")]))


@case("ext_no_location", "initializer 'w' refers to external data without a location")
def _():
    return with_init(external("w", [2], [("offset", "0")]))


@case("ext_key_twice", "initializer 'w' gives its external data's 'location' twice")
def _():
    return with_init(external("w", [2], [("location", "ext_data.bin"), ("location", "/etc/passwd")]))


@case("ext_nul_in_location", "initializer 'w': the external data location 'ext_data.bin\\x00/../../x' holds a NUL byte")
def _():
    return with_init(external("w", [2], [("location", "ext_data.bin\0/../../x")]))


@case("ext_folder", "initializer 'w': its external data file 'sub' is not a regular file")
def _():
    return with_init(external("w", [2], [("location", "sub")]))


@case("ext_string_tensor", "initializer 's' is a STRING tensor in external data, which ONNX does not allow")
def _():
    return with_init(external("s", [2], [("location", "ext_data.bin")], TensorProto.STRING))


@case("ext_constant_dotdot", "attribute 'value' of node 'c' (Constant): the external data location '../../etc/passwd' climbs out of the"
      " model's folder with '..'")
def _():
    c = helper.make_node("Constant", [], ["C"], name="c", value=external("v", [2, 3], [("location", "../../etc/passwd")]))
    return model(nodes=[c, helper.make_node("Add", ["X", "C"], ["Y"])])


# --- the graph -------------------------------------------------------------------

@case("input_dim_negative", "value 'X' has dims [-3, 2]: dim 0 is -3")
def _():
    return model(inputs=[helper.make_tensor_value_info("X", TensorProto.FLOAT, [-3, 2])])


@case("input_dims_over_2_56", "value 'X' has dims [4611686018427387904, 4]: more than 2^56 elements")
def _():
    return model(inputs=[helper.make_tensor_value_info("X", TensorProto.FLOAT, [1 << 62, 4])])


@case("reshape_to_huge", "cannot import operator Reshape (node 'r') of opset 13: a result of dims [4611686018427387904, 4, 1]:"
      " more than 2^56 elements")
def _():
    shape = helper.make_tensor("s", TensorProto.INT64, [3], [1 << 62, 4, 1])
    return model(nodes=[helper.make_node("Reshape", ["X", "s"], ["Y"], name="r")], inits=[shape],
                 outputs=[helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])


@case("output_from_no_node", "output 'Z' is computed by no node of the graph")
def _():
    return model(outputs=[helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3])])


@case("input_from_no_node", "cannot import operator Add (node 'add') of opset 13: its input 'nowhere' is computed by no earlier node")
def _():
    return model(nodes=[helper.make_node("Add", ["X", "nowhere"], ["Y"], name="add")])


@case("value_info_contradicts_inference",
      "cannot import {file}: ONNX's shape inference fails on it: [ShapeInferenceError] (op_type:Relu, node name: r1):"
      " [ShapeInferenceError] Inferred shape and existing shape differ in dimension 1: (3) vs (4)")
def _():
    """The file says H is [2, 4]; Relu of X [2, 3] makes it [2, 3] (before ONNX's inference, the import never read value_info)."""
    m = model(nodes=[helper.make_node("Relu", ["X"], ["H"], name="r1"), helper.make_node("Relu", ["H"], ["Y"], name="r2")])
    m.graph.value_info.append(helper.make_tensor_value_info("H", TensorProto.FLOAT, [2, 4]))
    return m


@case("input_not_a_tensor", "input 'X' is not a tensor; wfgen imports tensors only")
def _():
    seq = helper.make_value_info("X", helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    return model(inputs=[seq])


# --- integer tensors ---------------------------------------------------------

@case("nonzero_computed", "cannot import operator NonZero (node 'nz') of opset 13: the shape of its output depends on the values"
      " of an input computed at run time; wfgen's shapes are known when generating code (it imports NonZero only when its"
      " inputs are constants, folded)")
def _():
    nodes = [helper.make_node("NonZero", ["X"], ["Y"], name="nz")]
    return model(nodes=nodes, outputs=[helper.make_tensor_value_info("Y", TensorProto.INT64, [2, None])])


@case("cumsum_bool", "cannot import operator CumSum (node 'cs') of opset 14: its input 'X' is BOOL; wfgen imports CumSum on"
      " FLOAT INT64 INT32 tensors")
def _():
    b = TensorProto.BOOL
    nodes = [helper.make_node("CumSum", ["X", "axis"], ["Y"], name="cs")]
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [0])
    return model(nodes=nodes, inits=[axis], inputs=[helper.make_tensor_value_info("X", b, [4])],
                 outputs=[helper.make_tensor_value_info("Y", b, [4])], opset=14)


@case("cumsum_two_axes", "cannot import operator CumSum (node 'cs') of opset 14: axis 'axis' holds 2 values (one is needed)")
def _():
    nodes = [helper.make_node("CumSum", ["X", "axis"], ["Y"], name="cs")]
    axis = helper.make_tensor("axis", TensorProto.INT64, [2], [0, 1])
    return model(nodes=nodes, inits=[axis], opset=14)


@case("matmul_int32", "cannot import operator MatMul (node 'mm') of opset 13: its input 'A' is INT32; wfgen imports MatMul on"
      " FLOAT tensors")
def _():
    i = TensorProto.INT32
    nodes = [helper.make_node("MatMul", ["A", "B"], ["Y"], name="mm")]
    return model(nodes=nodes, inputs=[helper.make_tensor_value_info("A", i, [2, 3]), helper.make_tensor_value_info("B", i, [3, 2])],
                 outputs=[helper.make_tensor_value_info("Y", i, [2, 2])])


def write_all(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "sub"))
    # Files the external data cases point at: 16 bytes of data, a folder, and
    # a symlink out of the folder (to tests/onnx/CMakeLists.txt).
    with open(os.path.join(out, "ext_data.bin"), "wb") as f:
        f.write(bytes(range(16)))
    with open(os.path.join(out, "ext_8k.bin"), "wb") as f:
        f.write(bytes(8192))
    with open(os.path.join(out, "sub", "README"), "w") as f:
        f.write("A folder an external data location names (case ext_folder).\n")
    os.symlink("../CMakeLists.txt", os.path.join(out, "ext_symlink_out.bin"))
    for name, fn, expect, args in CASES:
        m = fn()
        data = m if isinstance(m, bytes) else m.SerializeToString(deterministic=True)
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(data)
        with open(os.path.join(out, name + ".expect"), "w") as f:
            f.write(expect + "\n")
        if args:
            with open(os.path.join(out, name + ".args"), "w") as f:
                f.write("\n".join(args) + "\n")
    print("bad_models: %d cases in %s" % (len(CASES), out))


def main():
    if len(sys.argv) > 2:
        sys.exit(__doc__)
    write_all(sys.argv[1] if len(sys.argv) == 2 else os.path.join(HERE, "bad"))


if __name__ == "__main__":
    main()
