// Autodiff errors at build time: each bad spec is run through wfgen::cli::gen()
// and must give its diagnostic (file:line:col and the words below), exit
// code 2, and leave the output directory untouched.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include "tests/listed_outputs.hpp"
#include "wfgen/cli/commands.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string err;
  bool output_untouched;
};

Result gen(const std::string& name, const std::string& spec) {
  fs::path dir = fs::temp_directory_path() / ("wfgen_test_autodiff_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "out");
  std::ofstream(dir / "out" / "keep.txt") << "untouched\n";
  std::ofstream(dir / (name + ".yaml")) << spec;
  std::ostringstream out, err;
  wfgen::cli::GenOptions o;
  o.specs = {dir / (name + ".yaml")};
  o.output = dir / "out";
  int code = wfgen::cli::gen(o, {out, err, false});
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir / "out")) files.insert(e.path().filename().string());
  std::ifstream keep(dir / "out" / "keep.txt");
  std::string line;
  std::getline(keep, line);
  Result r{code, err.str(), files == std::set<std::string>{"keep.txt"} && line == "untouched"};
  fs::remove_all(dir);
  return r;
}

const char* kModel = R"SPEC(models:
  - name: M
    params:
      W: {shape: [3, 3], init: xavier}
    where: "X[batch 3] -> loss[1]"
    call: |
      y = twice(X @ W)
      return sum(y, keepdims=true).reshape(1)
)SPEC";

}  // namespace

TEST_CASE("a gradient through a node without backward is an error naming the node and the line") {
  Result r = gen("no_backward", std::string(R"SPEC(nodes:
  - name: twice
    where: "X[~] OUT[~] -> OUT[~]"
impls:
  - {node: twice, device: cpu, dtypes: [f32], ranks: [2], elementwise: "X * 2"}
)SPEC") + kModel + R"SPEC(builds:
  - {name: m, model: M, backward: true}
)SPEC");
  CHECK(r.code == wfgen::cli::kBadInput);
  CHECK(r.output_untouched);
  CHECK_THAT(r.err, Catch::Contains("no_backward.yaml:12:11: error: no backward for input 'X' of node 'twice'"));
  CHECK_THAT(r.err, Catch::Contains("y = twice(X @ W)"));
  CHECK_THAT(r.err, Catch::Contains("no_backward.yaml:2:11: note: node 'twice' is declared here without a backward"));
}

TEST_CASE("the same model without backward: true builds (no pullback, no error)") {
  Result r = gen("no_grad", std::string(R"SPEC(nodes:
  - name: twice
    where: "X[~] OUT[~] -> OUT[~]"
impls:
  - {node: twice, device: cpu, dtypes: [f32], ranks: [2], elementwise: "X * 2"}
)SPEC") + kModel + R"SPEC(builds:
  - {name: m, model: M}
)SPEC");
  CHECK(r.code == wfgen::cli::kOk);
}

TEST_CASE("a backward expression of the wrong shape points at the expression") {
  Result r = gen("bad_shape", std::string(R"SPEC(nodes:
  - name: twice
    where: "X[~] OUT[~] -> OUT[~]"
    backward: {X: "sum(dout, axis=-1, keepdims=true)"}
impls:
  - {node: twice, device: cpu, dtypes: [f32], ranks: [2], elementwise: "X * 2"}
)SPEC") + kModel + R"SPEC(builds:
  - {name: m, model: M, backward: true}
)SPEC");
  CHECK(r.code == wfgen::cli::kBadInput);
  CHECK(r.output_untouched);
  CHECK_THAT(r.err, Catch::Contains("bad_shape.yaml:4:20: error: the backward of 'twice' for 'X' gives a tensor of shape (batch 1), "
                                    "but 'X' has shape (batch 3)"));
}

TEST_CASE("a backward expression that does not parse or names an unknown tensor") {
  Result r = gen("bad_expr", std::string(R"SPEC(nodes:
  - name: twice
    where: "X[~] OUT[~] -> OUT[~]"
    backward: {X: "dout * Y"}
impls:
  - {node: twice, device: cpu, dtypes: [f32], ranks: [2], elementwise: "X * 2"}
)SPEC") + kModel + R"SPEC(builds:
  - {name: m, model: M, backward: true}
)SPEC");
  CHECK(r.code == wfgen::cli::kBadInput);
  CHECK_THAT(r.err, Catch::Contains("bad_expr.yaml:4:27: error: unknown name 'Y'"));
  CHECK_THAT(r.err, Catch::Contains("note: while differentiating a call of 'twice' for its input 'X': y = twice(X @ W)"));
}

TEST_CASE("build keys of autodiff are checked") {
  const std::string stdlib_model = R"SPEC(models:
  - name: M
    params:
      W: {shape: [3, 3], init: xavier}
    where: "X[batch 3] -> loss[1]"
    call: |
      return sum(X @ W, keepdims=true).reshape(1)
)SPEC";
  SECTION("an optimizer needs backward: true") {
    Result r = gen("opt_no_bw", stdlib_model + "builds:\n  - {name: m, model: M, optimizer: {sgd: {lr: 0.1}}}\n");
    CHECK(r.code == wfgen::cli::kBadInput);
    CHECK_THAT(r.err, Catch::Contains("opt_no_bw.yaml:9:12: error: build 'm' sets an optimizer, which needs 'backward: true'"));
  }
  SECTION("unknown hyper-parameters get a did-you-mean") {
    Result r = gen("opt_key", stdlib_model + "builds:\n  - {name: m, model: M, backward: true, optimizer: {adam: {lr: 0.1, beta: 0.5}}}\n");
    CHECK(r.code == wfgen::cli::kBadInput);
    CHECK_THAT(r.err, Catch::Contains("error: the optimizer 'adam' has no hyper-parameter 'beta'; did you mean 'beta1'?"));
  }
  SECTION("sgd needs its learning rate") {
    Result r = gen("opt_lr", stdlib_model + "builds:\n  - {name: m, model: M, backward: true, optimizer: {sgd: {momentum: 0.9}}}\n");
    CHECK_THAT(r.err, Catch::Contains("error: the optimizer 'sgd' of build 'm' needs its hyper-parameter 'lr'"));
  }
  SECTION("hyper-parameters have types") {
    Result r = gen("opt_type", stdlib_model + "builds:\n  - {name: m, model: M, backward: true, optimizer: {sgd: {lr: 0.1, nesterov: 1}}}\n");
    CHECK_THAT(r.err, Catch::Contains("error: the hyper-parameter 'nesterov' of optimizer 'sgd' is true or false, not a number"));
  }
  SECTION("an unknown optimizer is a schema error") {
    Result r = gen("opt_name", stdlib_model + "builds:\n  - {name: m, model: M, backward: true, optimizer: {rmsprop: {lr: 0.1}}}\n");
    CHECK(r.code == wfgen::cli::kBadInput);
    CHECK_THAT(r.err, Catch::Contains("rmsprop"));
  }
  SECTION("grad_inputs name inputs of the model") {
    Result r = gen("grad_in", stdlib_model + "builds:\n  - {name: m, model: M, backward: true, grad_inputs: [Y]}\n");
    CHECK_THAT(r.err, Catch::Contains("error: build 'm' asks for the gradient of 'Y', which is not an input of model 'M'"));
  }
  SECTION("gradients need a float dtype") {
    Result r = gen("int_grad", stdlib_model + "builds:\n  - {name: m, model: M, dtype: i32, backward: true}\n");
    CHECK_THAT(r.err, Catch::Contains("gradients need a float dtype (f32 or f64), not i32"));
  }
}

TEST_CASE("the generated files are the ones tests/autodiff/CMakeLists.txt lists") {
  std::set<std::string> present;
  for (const char* f : {WFGEN_AD_FILES}) present.insert(f);
  CHECK(wfgen::test::listed_outputs({fs::path(WFGEN_TEST_DATA) / "grad_check.yaml", fs::path(WFGEN_TEST_DATA) / "training.yaml",
                                     fs::path(WFGEN_AD_ONNX), fs::path(WFGEN_TEST_DATA) / "onnx_recurrent_check.yaml"},
                                    WFGEN_AD_GEN, "gc") == present);
}

TEST_CASE("save_for_backward hides the inputs it does not keep from the backward expressions") {
  const std::string node = R"SPEC(nodes:
  - name: twice
    where: "X[~] OUT[~] -> OUT[~]"
    save_for_backward: [false, false]
    backward: {X: "dout * 2 + X * 0"}
impls:
  - {node: twice, device: cpu, dtypes: [f32], ranks: [2], elementwise: "X * 2"}
)SPEC";
  Result r = gen("sv4bw", node + kModel + "builds:\n  - {name: m, model: M, backward: true}\n");
  CHECK(r.code == wfgen::cli::kBadInput);
  CHECK(r.output_untouched);
  CHECK_THAT(r.err, Catch::Contains("sv4bw.yaml:5:31: error: unknown name 'X'"));
  CHECK_THAT(r.err, Catch::Contains("(save_for_backward keeps no input)"));
}
