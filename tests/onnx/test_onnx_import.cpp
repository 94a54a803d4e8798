// `wfgen import` on ONNX's own backend test models (Debian's libonnx-testdata):
// the spec it writes, and its errors, each naming the operator, the opset and
// the file, with nothing written. The numbers of imported models are checked
// by tests/onnx/conformance.py (ctest onnx.conformance_sample).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <onnx/onnx_pb.h>

#include "wfgen/cli/import.hpp"
#include "wfgen/model_support.hpp"
#include "wfgen/onnx/onnx_import.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kData = "/usr/share/libonnx-testdata/data/node/";

struct Run {
  int code;
  std::string out, err;
};

Run import(const std::string& test, const fs::path& spec, std::vector<std::string> dims = {}, std::string freeze = "") {
  wfgen::cli::ImportOptions o;
  o.freeze_dir = freeze;
  o.model = kData + test + "/model.onnx";
  o.output = spec;
  o.dims = std::move(dims);
  std::ostringstream out, err;
  int code = wfgen::cli::import_onnx(o, {out, err, false});
  return {code, out.str(), err.str()};
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("wfgen-onnx-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("an imported Gemm is a readable spec: the where line, the body statement and the build") {
  fs::path dir = scratch("gemm");
  Run r = import("test_gemm_all_attributes", dir / "gemm.yaml");
  REQUIRE(r.code == 0);
  std::string spec = read(dir / "gemm.yaml");
  CHECK(spec.find("# Imported by `wfgen import` from model.onnx (ONNX IR") != std::string::npos);
  CHECK(spec.find("where: \"a[4 3] b[5 4] c[1 5] -> y[3 5]\"") != std::string::npos);
  // transA, transB, alpha = 0.25, beta = 0.35
  CHECK(spec.find("y = (a.T @ b.T) * 0.25 + c * 0.35  # Gemm") != std::string::npos);
  CHECK(spec.find("builds:\n  - {name: gemm, model: gemm, dtype: f32, devices: [cpu]}") != std::string::npos);
}

// A model written here with the protobuf classes, as an exporter would: a
// Gemm whose weights are float initializers, a Reshape whose shape is an
// int64 initializer, and ONNX names that are not body names.
fs::path write_linear_model(const fs::path& dir) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("wfgen-test");
  auto* opset = m.add_opset_import();
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("linear");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<std::int64_t> dims, const char* param = nullptr) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    if (param) t->mutable_shape()->mutable_dim(0)->set_dim_param(param);
  };
  value(g->add_input(), "input.1", {0, 3}, "batch");
  value(g->add_output(), "19", {0, 2, 1}, "batch");
  auto* w = g->add_initializer();
  w->set_name("fc.weight");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) w->add_float_data(v);
  auto* b = g->add_initializer();
  b->set_name("fc.bias");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(2);
  for (float v : {0.5f, -0.5f}) b->add_float_data(v);
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(3);
  for (std::int64_t v : {0, 2, 1}) shape->add_int64_data(v);
  auto* gemm = g->add_node();
  gemm->set_op_type("Gemm");
  gemm->set_name("/fc/Gemm");
  gemm->add_input("input.1");
  gemm->add_input("fc.weight");
  gemm->add_input("fc.bias");
  gemm->add_output("/fc/Gemm_output_0");
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  auto* reshape = g->add_node();
  reshape->set_op_type("Reshape");
  reshape->add_input("/fc/Gemm_output_0");
  reshape->add_input("shape");
  reshape->add_output("19");
  fs::path file = dir / "linear.onnx";
  std::ofstream out(file, std::ios::binary);
  m.SerializeToOstream(&out);
  return file;
}

TEST_CASE("initializers become parameters in a parameter file, names that are not body names are mangled") {
  fs::path dir = scratch("params");
  wfgen::cli::ImportOptions o;
  o.model = write_linear_model(dir);
  o.output = dir / "fc_net.yaml";
  std::ostringstream out, err;
  REQUIRE(wfgen::cli::import_onnx(o, {out, err, false}) == 0);
  std::string spec = read(dir / "fc_net.yaml");
  CHECK(spec.find("# input input_1 is ONNX 'input.1'") != std::string::npos);
  CHECK(spec.find("models:\n  - name: fc_net\n") != std::string::npos);
  CHECK(spec.find("fc_weight: {shape: [2, 3], init: zeros}  # ONNX initializer 'fc.weight'") != std::string::npos);
  CHECK(spec.find("where: \"input_1[batch 3] -> v_19[batch 2 1]\"") != std::string::npos);
  CHECK(spec.find("fc_Gemm_output_0 = input_1 @ fc_weight.T + fc_bias  # Gemm '/fc/Gemm', ONNX value '/fc/Gemm_output_0'") !=
        std::string::npos);
  // Reshape's 0 copies the run-time dim.
  CHECK(spec.find("v_19 = fc_Gemm_output_0.reshape(-1, 2, 1)  # Reshape, ONNX value '19'") != std::string::npos);
  // The parameter file holds the initializers, by their body names.
  std::vector<std::string> names = {"fc_weight", "fc_bias"};
  std::vector<wfgen::rt::Tensor> tensors = {wfgen::rt::Tensor::zeros(wfgen::rt::DType::f32, {2, 3}),
                                            wfgen::rt::Tensor::zeros(wfgen::rt::DType::f32, {2})};
  wfgen::rt::load_parameters((dir / "fc_net.wfparams").string(), names, tensors);
  CHECK(tensors[0].at<float>({1, 2}) == 6.f);
  CHECK(tensors[1].at<float>({1}) == -0.5f);
}

TEST_CASE("inputs needed as constants are frozen from a sample data set") {
  fs::path dir = scratch("freeze");
  wfgen::cli::ImportOptions o;
  o.model = kData + "test_reshape_reduced_dims/model.onnx";
  o.output = dir / "r.yaml";
  std::ostringstream out, err;
  // Without sample inputs, the int64 shape input is a typed input (i64), which Reshape cannot take.
  CHECK(wfgen::cli::import_onnx(o, {out, err, false}) == 2);
  CHECK_THAT(err.str(), Catch::Contains("cannot import operator Reshape of opset 14: shape 'shape' is not a constant integer initializer"));
  o.freeze_dir = kData + "test_reshape_reduced_dims/test_data_set_0";
  REQUIRE(wfgen::cli::import_onnx(o, {out, err, false}) == 0);
  std::string spec = read(dir / "r.yaml");
  CHECK(spec.find("# input 'shape' (input 1) frozen from") != std::string::npos);
  CHECK(spec.find("reshaped = data.reshape(2, 12)  # Reshape") != std::string::npos);
}

TEST_CASE("opset semantics: Softmax before opset 13 normalises over the flattened trailing dims") {
  fs::path dir = scratch("softmax11");
  // The backend tests are opset 13; operators_of still reads any model.
  auto ops = wfgen::onnx_import::operators_of(kData + "test_softmax_axis_1_expanded/model.onnx");
  CHECK(std::find(ops.begin(), ops.end(), "ReduceMax") != ops.end());
  Run r = import("test_softmax_axis_1", dir / "s.yaml");
  REQUIRE(r.code == 0);
  CHECK(read(dir / "s.yaml").find("y = softmax(x, axis=1)  # Softmax") != std::string::npos);
}

TEST_CASE("what wfgen cannot import is an error naming the operator, the opset and the file, and nothing is written") {
  fs::path dir = scratch("errors");
  // A type the body has no dtype for (UINT8 has one: u8).
  Run r = import("test_bitshift_left_uint16", dir / "a.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("model.onnx: error: input 'x' has element type UINT16; wfgen's ONNX import supports FLOAT (f32) inputs and outputs"));
  CHECK_THAT(r.err, Catch::Contains("and INT64, INT32, UINT8 and BOOL ones"));
  r = import("test_det_2d", dir / "b.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("test_det_2d/model.onnx: error: cannot import operator Det of opset"));
  CHECK_THAT(r.err, Catch::Contains("the operator is not supported (supported: Abs, Acos, Acosh, Add,"));
  // An attribute value: Dropout in training mode (its inputs frozen from the sample data set).
  r = import("test_training_dropout", dir / "c.yaml", {}, kData + "test_training_dropout/test_data_set_0");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator Dropout of opset"));
  CHECK_THAT(r.err, Catch::Contains("training_mode must be a constant false"));
  CHECK(fs::is_empty(dir));
}

TEST_CASE("bad usage and bad files are errors, not crashes") {
  fs::path dir = scratch("usage");
  Run r = import("test_relu", dir / "a.yaml", {"batch"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--dim expects NAME=SIZE with a size >= 0, but got 'batch'"));
  r = import("test_relu", dir / "a.yaml", {"batch=-3"});
  CHECK(r.code == 2);
  std::ofstream(dir / "not.onnx") << "this is not a protobuf";
  wfgen::cli::ImportOptions o;
  o.model = dir / "not.onnx";
  o.output = dir / "x.yaml";
  std::ostringstream out, err;
  CHECK(wfgen::cli::import_onnx(o, {out, err, false}) == 2);
  CHECK_THAT(err.str(), Catch::Contains("is not an ONNX model (the protobuf ModelProto does not parse)"));
  CHECK_FALSE(fs::exists(dir / "x.yaml"));
}

TEST_CASE("windows, slices and constants: what the import writes and what it refuses", "[onnx]") {
  fs::path dir = scratch("windows");
  // Pads of 1 on H and 0 on W, stride 2: one im2col and one batched matmul.
  Run r = import("test_conv_with_strides_and_asymmetric_padding", dir / "c.yaml");
  REQUIRE(r.code == 0);
  const std::string conv = read(dir / "c.yaml");
  CHECK_THAT(conv, Catch::Contains("y_col = im2col(x, k_h=3, k_w=3, stride_h=2, stride_w=2, pad_h=1, pad_w=0, dilation_h=1, dilation_w=1).reshape(-1, 9, 4, 2)"));
  CHECK_THAT(conv, Catch::Contains("y = (W.reshape(1, 9) @ y_col.reshape(-1, 9, 8)).reshape(1, 1, 4, 2)  # Conv"));
  // SAME_UPPER with an odd total (0 before, 1 after): max_pool pads 1 at both ends, the first row and column are dropped.
  r = import("test_maxpool_2d_same_upper", dir / "u.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "u.yaml"),
             Catch::Contains("y = max_pool(x, k_h=2, k_w=2, stride_h=1, stride_w=1, pad_h=1, pad_w=1)[:, :, 1:33, 1:33]  # MaxPool"));
  // A max pool with padding: the node max_pool, whose padding never wins.
  r = import("test_maxpool_2d_pads", dir / "m.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "m.yaml"), Catch::Contains("y = max_pool(x, k_h=3, k_w=3, stride_h=1, stride_w=1, pad_h=2, pad_w=2)  # MaxPool"));
  // A dilated one: im2col's windows and a max over them.
  r = import("test_maxpool_2d_dilations", dir / "d.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "d.yaml"), Catch::Contains("dilation_h=2, dilation_w=2"));
  CHECK_THAT(read(dir / "d.yaml"), Catch::Contains("y = (max(y_windows.reshape(-1, 1, 4, 4), axis=2)).reshape(1, 1, 2, 2)  # MaxPool"));
  // Shape arithmetic of an expanded function folds into constants.
  r = import("test_softmax_axis_1_expanded", dir / "s.yaml");
  CHECK(r.code == 0);

  // Refused, each with its reason.
  r = import("test_slice_neg_steps", dir / "x.yaml", {}, kData + "test_slice_neg_steps/test_data_set_0");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator Slice of opset 13: step -1 (wfgen's slices step forward)"));
  r = import("test_cast_FLOAT_to_DOUBLE", dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("a cast of a computed tensor to DOUBLE; wfgen's ONNX import computes in FLOAT"));
  r = import("test_maxpool_with_argmax_2d_precomputed_strides", dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("storage_order = 1"));

  // A convolution of one channel in two groups, a Constant of strings: made from a backend model.
  onnx::ModelProto m;
  {
    std::ifstream in(kData + "test_basic_conv_with_padding/model.onnx", std::ios::binary);
    REQUIRE(m.ParseFromIstream(&in));
  }
  auto* group = m.mutable_graph()->mutable_node(0)->add_attribute();
  group->set_name("group");
  group->set_type(onnx::AttributeProto::INT);
  group->set_i(2);
  {
    std::ofstream out(dir / "grouped.onnx", std::ios::binary);
    REQUIRE(m.SerializeToOstream(&out));
  }
  wfgen::cli::ImportOptions o;
  o.model = dir / "grouped.onnx";
  o.output = dir / "g.yaml";
  std::ostringstream out, err;
  CHECK(wfgen::cli::import_onnx(o, {out, err, false}) == 2);
  CHECK_THAT(err.str(), Catch::Contains("cannot import operator Conv"));
  CHECK_THAT(err.str(), Catch::Contains("group = 2 with 1 input and 1 output channels (group must divide both)"));
  CHECK_FALSE(fs::exists(dir / "g.yaml"));

  onnx::ModelProto c;
  {
    std::ifstream in(kData + "test_relu/model.onnx", std::ios::binary);
    REQUIRE(c.ParseFromIstream(&in));
  }
  auto* k = c.mutable_graph()->add_node();
  k->set_op_type("Constant");
  k->add_output("text");
  auto* a = k->add_attribute();
  a->set_name("value_strings");
  a->set_type(onnx::AttributeProto::STRINGS);
  a->add_strings("hello");
  c.mutable_graph()->mutable_node()->SwapElements(0, 1);  // the Constant first
  {
    std::ofstream os(dir / "strings.onnx", std::ios::binary);
    REQUIRE(c.SerializeToOstream(&os));
  }
  o.model = dir / "strings.onnx";
  o.output = dir / "t.yaml";
  std::ostringstream out2, err2;
  CHECK(wfgen::cli::import_onnx(o, {out2, err2, false}) == 2);
  CHECK_THAT(err2.str(), Catch::Contains("cannot import operator Constant"));
  CHECK_THAT(err2.str(), Catch::Contains("its attribute 'value_strings' is not supported (value, value_float(s) and value_int(s) are)"));
  CHECK_FALSE(fs::exists(dir / "t.yaml"));
}

TEST_CASE("losses: targets known when importing become a one-hot constant, the rest is refused", "[onnx]") {
  fs::path dir = scratch("losses");
  const std::string t = "test_sce_mean_weight_ii";
  Run r = import(t, dir / "l.yaml", {}, kData + t + "/test_data_set_0");
  REQUIRE(r.code == 0);
  const std::string spec = read(dir / "l.yaml");
  CHECK_THAT(spec, Catch::Contains("= log_softmax(x, axis=1)  # SoftmaxCrossEntropyLoss: log-probabilities"));
  CHECK_THAT(spec, Catch::Contains("z_targets: {shape: [3, 5]"));
  // A weighted mean divides by the summed weights of the targets.
  CHECK_THAT(spec, Catch::Contains(" / sum(sum((z_targets * w.reshape(5)), axis=1, keepdims=true), axis=0, keepdims=true)"));
  // Without sample data the targets are a run-time input: refused.
  r = import(t, dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator SoftmaxCrossEntropyLoss of opset 13: targets computed at run time"));
  // Rank 7 imports: its kernels are generated on demand (ranks up to 8).
  const std::string big = "test_nllloss_NCd1d2d3d4d5_mean_weight";
  r = import(big, dir / "y.yaml", {}, kData + big + "/test_data_set_0");
  CHECK(r.code == 0);
  const std::string rank7 = read(dir / "y.yaml");
  CHECK_THAT(rank7, Catch::Contains("where: \"input[3 5 6 6 5 3 4] weight[5] -> loss[]\""));
  CHECK_THAT(rank7, Catch::Contains("loss_targets: {shape: [3, 5, 6, 6, 5, 3, 4], init: zeros}"));
}

TEST_CASE("Gelu (opset 20): the exact form is the stdlib's gelu, the tanh form a composition", "[onnx]") {
  fs::path dir = scratch("gelu");
  for (const char* approximate : {"none", "tanh", "cubic"}) {
    onnx::ModelProto m;
    {
      std::ifstream in(kData + "test_relu/model.onnx", std::ios::binary);
      REQUIRE(m.ParseFromIstream(&in));
    }
    auto* node = m.mutable_graph()->mutable_node(0);
    node->set_op_type("Gelu");
    auto* a = node->add_attribute();
    a->set_name("approximate");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(approximate);
    const fs::path model = dir / (std::string(approximate) + ".onnx");
    {
      std::ofstream out(model, std::ios::binary);
      REQUIRE(m.SerializeToOstream(&out));
    }
    wfgen::cli::ImportOptions o;
    o.model = model;
    o.output = dir / (std::string(approximate) + ".yaml");
    std::ostringstream out, err;
    const int code = wfgen::cli::import_onnx(o, {out, err, false});
    INFO(approximate << ": " << err.str());
    if (std::string(approximate) == "cubic") {
      CHECK(code == 2);
      CHECK_THAT(err.str(), Catch::Contains("cannot import operator Gelu"));
      CHECK_THAT(err.str(), Catch::Contains("approximate = 'cubic'"));
      continue;
    }
    REQUIRE(code == 0);
    const std::string spec = read(o.output);
    if (std::string(approximate) == "none") CHECK_THAT(spec, Catch::Contains("y = gelu(x)  # Gelu"));
    else CHECK_THAT(spec, Catch::Contains("y = x * (tanh((x + x * x * x * 0.044715) * 0.7978845608028654) + 1.0) * 0.5  # Gelu"));
  }
}

// test_relu's model with its input and output given `rank` dims of 1 and
// element types `in` and `out`, imported: (exit code, stderr, spec).
static std::tuple<int, std::string, std::string> relu_variant(const fs::path& dir, const std::string& name, int rank, int in, int out) {
  onnx::ModelProto m;
  {
    std::ifstream f(kData + "test_relu/model.onnx", std::ios::binary);
    REQUIRE(m.ParseFromIstream(&f));
  }
  for (auto* vi : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)}) {
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(vi == m.mutable_graph()->mutable_input(0) ? in : out);
    t->mutable_shape()->clear_dim();
    for (int k = 0; k < rank; ++k) t->mutable_shape()->add_dim()->set_dim_value(k == rank - 1 ? 3 : 1);
  }
  const fs::path model = dir / (name + ".onnx");
  {
    std::ofstream f(model, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
  }
  wfgen::cli::ImportOptions o;
  o.model = model;
  o.output = dir / (name + ".yaml");
  std::ostringstream sout, serr;
  const int code = wfgen::cli::import_onnx(o, {sout, serr, false});
  return {code, serr.str(), code == 0 ? read(o.output) : ""};
}

TEST_CASE("ranks up to 8 import and rank 9 is refused: a DOUBLE model is built as f64 and a mixed one refused", "[onnx]") {
  fs::path dir = scratch("ranks");
  const int f32 = onnx::TensorProto::FLOAT, f64 = onnx::TensorProto::DOUBLE;
  auto [code, err, spec] = relu_variant(dir, "r8", 8, f32, f32);
  CHECK(code == 0);
  CHECK_THAT(spec, Catch::Contains("where: \"x[1 1 1 1 1 1 1 3] -> y[1 1 1 1 1 1 1 3]\""));
  std::tie(code, err, spec) = relu_variant(dir, "r9", 9, f32, f32);
  CHECK(code == 2);
  CHECK_THAT(err, Catch::Contains("cannot import operator Relu of opset"));
  CHECK_THAT(err, Catch::Contains("a result of rank 9 (wfgen's kernels go up to rank 8)"));
  std::tie(code, err, spec) = relu_variant(dir, "f64", 2, f64, f64);
  CHECK(code == 0);
  CHECK_THAT(spec, Catch::Contains("# The model's tensors are DOUBLE: the build computes in f64."));
  CHECK_THAT(spec, Catch::Contains("dtype: f64, devices: [cpu]"));
  std::tie(code, err, spec) = relu_variant(dir, "mixed", 2, f64, f32);
  CHECK(code == 2);
  CHECK_THAT(err, Catch::Contains("input 'x' has element type DOUBLE; wfgen's ONNX import supports FLOAT (f32) inputs and outputs, or "
                                  "DOUBLE (f64) ones when every floating tensor of the model is DOUBLE"));
}

TEST_CASE("Mish (opset 18) is the stdlib's mish node, an older opset refused with the row's range", "[onnx]") {
  fs::path dir = scratch("mish");
  for (int opset : {18, 17}) {
    onnx::ModelProto m;
    {
      std::ifstream in(kData + "test_relu/model.onnx", std::ios::binary);
      REQUIRE(m.ParseFromIstream(&in));
    }
    m.mutable_graph()->mutable_node(0)->set_op_type("Mish");
    for (auto& o : *m.mutable_opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") o.set_version(opset);
    const fs::path model = dir / ("mish" + std::to_string(opset) + ".onnx");
    {
      std::ofstream out(model, std::ios::binary);
      REQUIRE(m.SerializeToOstream(&out));
    }
    wfgen::cli::ImportOptions o;
    o.model = model;
    o.output = dir / ("mish" + std::to_string(opset) + ".yaml");
    std::ostringstream out, err;
    const int code = wfgen::cli::import_onnx(o, {out, err, false});
    INFO(opset << ": " << err.str());
    if (opset == 17) {
      CHECK(code == 2);
      CHECK_THAT(err.str(), Catch::Contains("cannot import operator Mish of opset 17: wfgen imports Mish in opsets 18+ only"));
      continue;
    }
    REQUIRE(code == 0);
    CHECK_THAT(read(o.output), Catch::Contains("y = mish(x)  # Mish"));
  }
}

TEST_CASE("the operator table: --supported-operators prints every row the dispatch knows, and its opset range is enforced", "[onnx]") {
  wfgen::cli::ImportOptions o;
  o.supported_operators = true;
  std::ostringstream out, err;
  REQUIRE(wfgen::cli::import_onnx(o, {out, err, false}) == 0);
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  CHECK(line == "# operator\topsets\tattributes\tdtypes\tconstant inputs\tdoc");
  std::vector<std::string> names;
  while (std::getline(lines, line)) {
    CHECK(std::count(line.begin(), line.end(), '\t') == 5);
    names.push_back(line.substr(0, line.find('\t')));
  }
  CHECK(names == wfgen::onnx_import::supported_operators());
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK_THAT(out.str(), Catch::Contains("\nAbs\t7+\t-\tFLOAT INT64 INT32\t-\tabs(x)\n"));
  CHECK_THAT(out.str(), Catch::Contains("\nSlice\t7+\tstarts ends axes\tFLOAT INT64 INT32 BOOL UINT8\t1 2 3 4 from opset 10\t"));
  CHECK_THAT(out.str(), Catch::Contains("\nReduceMean\t7-17\taxes keepdims noop_with_empty_axes\t"));

  // ReduceMean's axes are an input from opset 18 on, which its handler does
  // not read: refused, not reduced over every axis.
  fs::path dir = scratch("opsets");
  onnx::ModelProto m;
  {
    std::ifstream in(kData + "test_reduce_mean_keepdims_example/model.onnx", std::ios::binary);
    REQUIRE(m.ParseFromIstream(&in));
  }
  m.mutable_opset_import(0)->set_version(18);
  const fs::path model = dir / "reduce_mean_18.onnx";
  {
    std::ofstream f(model, std::ios::binary);
    REQUIRE(m.SerializeToOstream(&f));
  }
  wfgen::cli::ImportOptions r;
  r.model = model;
  r.output = dir / "reduce_mean_18.yaml";
  std::ostringstream out2, err2;
  CHECK(wfgen::cli::import_onnx(r, {out2, err2, false}) == 2);
  CHECK_THAT(err2.str(), Catch::Contains("reduce_mean_18.onnx: error: cannot import operator ReduceMean of opset 18: "
                                         "wfgen imports ReduceMean in opsets 7-17 only"));
  CHECK(!fs::exists(r.output));
}

// PyTorch's first exporters wrote opset 6 (libonnx-testdata's pytorch-converted
// and pytorch-operator tests): ONNX's version converter upgrades such a
// model to opset 13 before the import (wfgen/onnx/upgrade.cpp).
TEST_CASE("a model of opset 6 is upgraded to opset 13 by ONNX's version converter, and the spec says so", "[onnx]") {
  fs::path dir = scratch("upgrade");
  const std::string converted = "/usr/share/libonnx-testdata/data/pytorch-converted/";
  wfgen::cli::ImportOptions o;
  o.model = converted + "test_Conv1d_pad2/model.onnx";  // opset 6, a Conv with 1-D windows
  o.output = dir / "conv.yaml";
  std::ostringstream out, err;
  REQUIRE(wfgen::cli::import_onnx(o, {out, err, false}) == 0);
  std::string spec = read(dir / "conv.yaml");
  CHECK(spec.find(", opset 13, produced by pytorch") != std::string::npos);
  CHECK(spec.find("# The file is opset 6: ONNX's version converter (libonnx) upgraded it to opset 13 before the import.") !=
        std::string::npos);
  // Conv1d: the input viewed as an image of height 1.
  CHECK(spec.find("im2col(v_0.reshape(2, 4, 1, 10), k_h=1, k_w=5") != std::string::npos);

  // An operator of the upgraded model that wfgen does not map: the error
  // names both opsets.
  onnx::ModelProto m;
  m.set_ir_version(3);
  m.add_opset_import()->set_version(6);
  auto* g = m.mutable_graph();
  g->set_name("lp");
  for (auto* v : {g->add_input(), g->add_output()}) {
    v->set_name(v == &g->input(0) ? "x" : "y");
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : {2, 3}) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  auto* n = g->add_node();
  n->set_op_type("LpNormalization");
  n->set_name("norm");
  n->add_input("x");
  n->add_output("y");
  {
    std::ofstream f(dir / "lp.onnx", std::ios::binary);
    m.SerializeToOstream(&f);
  }
  o.model = dir / "lp.onnx";
  o.output = dir / "lp.yaml";
  std::ostringstream out2, err2;
  CHECK(wfgen::cli::import_onnx(o, {out2, err2, false}) == 2);
  CHECK_THAT(err2.str(), Catch::Contains("lp.onnx: error: cannot import operator LpNormalization (node 'norm') of opset 13 "
                                         "(upgraded from opset 6)"));
  CHECK_FALSE(fs::exists(dir / "lp.yaml"));
}

TEST_CASE("recurrent layers: a loop of stdlib nodes over the steps, and the activations and clip refused by name", "[onnx]") {
  fs::path dir = scratch("recurrent");
  Run r = import("test_gru_seq_length", dir / "g.yaml");
  REQUIRE(r.code == 0);
  const std::string gru = read(dir / "g.yaml");
  CHECK_THAT(gru, Catch::Contains("gru_xw = X @ W[0].T + B[0, 0:15]"));
  CHECK_THAT(gru, Catch::Contains("for gru_s in range(2):"));
  CHECK_THAT(gru, Catch::Contains("gru_h = gru_n + gru_zr[:, 0:5] * (gru_h - gru_n)"));
  CHECK_THAT(gru, Catch::Contains("linear_before_reset = 0"));
  CHECK_THAT(gru, !Catch::Contains("concat("));  // no node reads Y: not collected
  // sequence_lens must be known when importing: frozen from the sample, equal to T here (no mask).
  r = import("test_lstm_with_peepholes", dir / "l.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator LSTM of opset 14: its sequence_lens 'sequence_lens' is not a constant integer initializer"));
  r = import("test_lstm_with_peepholes", dir / "l.yaml", {}, kData + "test_lstm_with_peepholes/test_data_set_0");
  REQUIRE(r.code == 0);
  const std::string lstm = read(dir / "l.yaml");
  CHECK_THAT(lstm, Catch::Contains("lstm_c = initial_c[0]"));
  CHECK_THAT(lstm, Catch::Contains("lstm_h = sigmoid(lstm_g[:, 3:6] + lstm_c * P[0, 3:6]) * tanh(lstm_c)"));
  CHECK_THAT(lstm, !Catch::Contains("mask"));

  // Another activation, clip: refused naming the attribute, the node, the opset and the file.
  auto refused = [&](const std::string& name, auto&& change) {
    onnx::ModelProto m;
    {
      std::ifstream in(kData + "test_simple_rnn_defaults/model.onnx", std::ios::binary);
      REQUIRE(m.ParseFromIstream(&in));
    }
    change(*m.mutable_graph()->mutable_node(0));
    {
      std::ofstream out(dir / (name + ".onnx"), std::ios::binary);
      REQUIRE(m.SerializeToOstream(&out));
    }
    wfgen::cli::ImportOptions o;
    o.model = dir / (name + ".onnx");
    o.output = dir / (name + ".yaml");
    std::ostringstream out, err;
    CHECK(wfgen::cli::import_onnx(o, {out, err, false}) == 2);
    CHECK_FALSE(fs::exists(o.output));
    return err.str();
  };
  std::string err = refused("relu", [](onnx::NodeProto& n) {
    n.set_name("cell");
    auto* a = n.add_attribute();
    a->set_name("activations");
    a->set_type(onnx::AttributeProto::STRINGS);
    a->add_strings("Relu");
  });
  CHECK_THAT(err, Catch::Contains("relu.onnx: error: cannot import operator RNN (node 'cell') of opset 14: its attribute 'activations' = [Relu]"));
  err = refused("clip", [](onnx::NodeProto& n) {
    auto* a = n.add_attribute();
    a->set_name("clip");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(1.0f);
  });
  CHECK_THAT(err, Catch::Contains("cannot import operator RNN of opset 14: its attribute 'clip'"));
}

TEST_CASE("ConvTranspose is a matmul and col2im, Resize a matmul per axis, and what they cannot be is refused by name", "[onnx]") {
  fs::path dir = scratch("spatial");
  Run r = import("test_convtranspose_pads", dir / "ct.yaml");
  REQUIRE(r.code == 0);
  const std::string ct = read(dir / "ct.yaml");
  CHECK_THAT(ct, Catch::Contains(".T @ X.reshape(1, 1, 1, 9)).reshape(1, 2, 3, 3, 3, 3)"));
  CHECK_THAT(ct, Catch::Contains("k_h=3, k_w=3, stride_h=3, stride_w=2, dilation_h=1, dilation_w=1)[:, :, 1:8, 2:5]"));
  // The scales known (frozen from the data set): one matrix per resized axis, the last axis first.
  const std::string test = "test_resize_upsample_scales_linear";
  r = import(test, dir / "rs.yaml", {}, kData + test + "/test_data_set_0");
  REQUIRE(r.code == 0);
  const std::string rs = read(dir / "rs.yaml");
  CHECK_THAT(rs, Catch::Contains("# Resize: axis 3 from 2 to 4"));
  CHECK_THAT(rs, Catch::Contains("# Resize: axis 2 from 2 to 4"));
  CHECK(rs.find("axis 1 from") == std::string::npos);
  // Scales computed at run time would make the output's shape depend on values.
  r = import(test, dir / "a.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator Resize of opset 13: scales computed at run time"));
  // 3-D: col2im over h and w for each depth offset and input depth, then over the depth.
  r = import("test_convtranspose_3d", dir / "c3.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "c3.yaml"), Catch::Contains("Y_cols.permute(0, 1, 2, 5, 3, 4, 6, 7).reshape(1, 18, 3, 3, 4, 5)"));
}

TEST_CASE("the indexing operators gather at positions computed from constant indices, and Einsum is a matmul", "[onnx]") {
  fs::path dir = scratch("indexing");
  const std::string test = "test_gather_elements_0";
  Run r = import(test, dir / "ge.yaml", {}, kData + test + "/test_data_set_0");
  REQUIRE(r.code == 0);
  // data [2 2], indices [[0 0] [1 0]] on axis 1: positions 0 0 3 2 of data flattened.
  CHECK_THAT(read(dir / "ge.yaml"), Catch::Contains("gather(data.reshape(4, 1), y_from).reshape(2, 2)"));
  r = import(test, dir / "a.yaml");
  CHECK(r.code == 2);
  // Not frozen, the indices are an INT64 input computed at run time: refused by name.
  CHECK_THAT(r.err, Catch::Contains("cannot import operator GatherElements of opset 13"));
  r = import("test_einsum_batch_matmul", dir / "em.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "em.yaml"), Catch::Contains("(x.reshape(5, 2, 3) @ y.reshape(5, 3, 4)).reshape(5, 2, 4)"));
}

TEST_CASE("integer and bool tensors: typed inputs and outputs, casts, comparisons to bool, computed indices, Mod of integers and floats", "[onnx]") {
  fs::path dir = scratch("typed");
  // INT64 indices computed at run time: a typed input, cast to the data's dtype for gather; a negative one counts from the end.
  Run r = import("test_gather_negative_indices", dir / "g.yaml");
  REQUIRE(r.code == 0);
  const std::string g = read(dir / "g.yaml");
  CHECK_THAT(g, Catch::Contains("typed_inputs: {indices: i64}"));
  CHECK_THAT(g, Catch::Contains("y_ids = to_f32(indices)  # Gather indices"));
  CHECK_THAT(g, Catch::Contains("y = (gather(y_table, y_ids) + gather(y_table, y_ids + 10)).reshape(3)  # Gather"));
  // INT32 operands compare in i32; the result is a bool (u8), returned as such.
  r = import("test_equal", dir / "e.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "e.yaml"), Catch::Contains("z = to_bool(x == y)  # Equal"));
  CHECK_THAT(read(dir / "e.yaml"), Catch::Contains("typed_inputs: {x: i32, y: i32}"));
  // UINT8 inputs are u8 tensors of their own (not BOOLs): BitShift becomes the stdlib's shl and shr.
  r = import("test_bitshift_left_uint8", dir / "bl.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "bl.yaml"), Catch::Contains("z = shl(x, y)  # BitShift"));
  CHECK_THAT(read(dir / "bl.yaml"), Catch::Contains("typed_inputs: {x: u8, y: u8}"));
  r = import("test_bitshift_right_uint8", dir / "br.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "br.yaml"), Catch::Contains("z = shr(x, y)  # BitShift"));
  // A BOOL condition computed at run time is cast to the branches' dtype.
  r = import("test_where_example", dir / "w.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "w.yaml"), Catch::Contains("z = select(to_f32(condition), x, y)  # Where"));
  // ArgMax gives INT64.
  r = import("test_argmax_no_keepdims_example", dir / "a.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "a.yaml"), Catch::Contains("result = to_i64(argmax(data, axis=1, keepdims=false))  # ArgMax"));
  // Python's modulo on INT64: C's remainder, corrected where the signs differ.
  r = import("test_mod_mixed_sign_int64", dir / "m.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "m.yaml"), Catch::Contains("z = z_rem + y * abs(sign(z_rem)) * (sign(z_rem) != sign(y))  # Mod"));
  // Refused by name: an operator whose output shape depends on values computed at run time, a dtype a row does not take.
  r = import("test_nonzero_example", dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator NonZero of opset 13: the shape of its output depends on the values"));
  r = import("test_mod_mixed_sign_float16", dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("input 'x' has element type FLOAT16; wfgen's ONNX import supports FLOAT (f32) inputs"));
  CHECK_FALSE(fs::exists(dir / "x.yaml"));
  // Float Mod: the stdlib's fmod (C's, fmod = 1), and Python's % from it (fmod = 0, ONNX's reference).
  r = import("test_mod_mixed_sign_float32", dir / "f.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "f.yaml"), Catch::Contains("z = fmod(x, y)  # Mod"));
}

TEST_CASE("CumSum is the stdlib's cumsum along the last axis, another axis swapped there as a view, a computed axis refused", "[onnx]") {
  fs::path dir = scratch("cumsum");
  std::string test = "test_cumsum_2d_axis_0";
  Run r = import(test, dir / "c0.yaml", {}, kData + test + "/test_data_set_0");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "c0.yaml"), Catch::Contains("y = cumsum(x.permute(1, 0)).permute(1, 0)  # CumSum"));
  test = "test_cumsum_1d_reverse_exclusive";
  r = import(test, dir / "c1.yaml", {}, kData + test + "/test_data_set_0");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "c1.yaml"), Catch::Contains("y = cumsum(x, exclusive=true, reverse=true)  # CumSum"));
  // Not frozen, the axis is an INT32 input: CumSum needs it when importing.
  r = import(test, dir / "x.yaml");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator CumSum of opset 14: axis 'axis' is not a constant integer initializer"));
  CHECK_FALSE(fs::exists(dir / "x.yaml"));
}

TEST_CASE("Pow keeps x's type: an integer exponent cast to a float base, an integer base raised in f64 and cast back", "[onnx]") {
  fs::path dir = scratch("pow");
  Run r = import("test_pow_types_int32_float32", dir / "i.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "i.yaml"), Catch::Contains("z = to_i32(to_f64(x) ** to_f64(y))  # Pow"));
  r = import("test_pow_types_int", dir / "f.yaml");
  REQUIRE(r.code == 0);
  CHECK_THAT(read(dir / "f.yaml"), Catch::Contains("z = x ** to_f32(y)  # Pow"));
  // UINT32 has no dtype in wfgen: refused by name.
  const std::string test = "test_pow_types_float32_uint32";
  r = import(test, dir / "x.yaml", {}, kData + test + "/test_data_set_0");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("cannot import operator Pow of opset 15: its input 'y' is a UINT32"));
  CHECK_FALSE(fs::exists(dir / "x.yaml"));
}

TEST_CASE("a 3 x 3 stride-1 Conv on a large plane is winograd_conv2d, im2col + matmul with --no-winograd or on a small plane", "[onnx]") {
  fs::path dir = scratch("winograd");
  // test_basic_conv_with_padding (3 x 3, pads 1) with 16 channels in and out on a 32 x 32 plane, or 4 x 4.
  for (const int side : {32, 4}) {
    onnx::ModelProto m;
    {
      std::ifstream in(kData + "test_basic_conv_with_padding/model.onnx", std::ios::binary);
      REQUIRE(m.ParseFromIstream(&in));
    }
    auto shape = [](onnx::ValueInfoProto* vi, std::initializer_list<int> dims) {
      auto* s = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
      s->clear_dim();
      for (int d : dims) s->add_dim()->set_dim_value(d);
    };
    shape(m.mutable_graph()->mutable_input(0), {1, 16, side, side});
    shape(m.mutable_graph()->mutable_input(1), {16, 16, 3, 3});
    shape(m.mutable_graph()->mutable_output(0), {1, 16, side, side});
    const fs::path model = dir / ("conv" + std::to_string(side) + ".onnx");
    {
      std::ofstream out(model, std::ios::binary);
      REQUIRE(m.SerializeToOstream(&out));
    }
    for (const bool no_winograd : {false, true}) {
      wfgen::cli::ImportOptions o;
      o.model = model;
      o.output = dir / ("conv" + std::to_string(side) + (no_winograd ? "-gemm" : "") + ".yaml");
      o.no_winograd = no_winograd;
      std::ostringstream out, err;
      INFO(side << (no_winograd ? " --no-winograd" : "") << ": " << err.str());
      REQUIRE(wfgen::cli::import_onnx(o, {out, err, false}) == 0);
      const std::string spec = read(o.output);
      const bool winograd = side == 32 && !no_winograd;
      CHECK((spec.find("= winograd_conv2d(x, W, pad_h=1, pad_w=1)") != std::string::npos) == winograd);
      CHECK((spec.find("im2col(x, k_h=3, k_w=3") != std::string::npos) == !winograd);
    }
  }
}
