// Issue 20: the build-time checks users rely on.
//  - every file of tests/models/warnings/ gives exactly the warnings in its
//    `# warning: LINE:COL: MESSAGE` lines (`wfgen gen` and `wfgen check`), and
//    fails with them as errors, writing nothing, under --warnings-as-errors;
//  - no warning (and no error) from `wfgen check` on every good spec of the
//    repository (examples/, tests/), and none on every node and model of the
//    standard library (each also checked by itself, as `wfgen check` does);
//  - an assert on a run-time dim is checked by the generated model (the
//    `even_batch` build of models.yaml, with its message and the dims).
// The bad specs with failing preconditions are in tests/models/bad/ (walked
// by test_models.cpp), the bodies `wfgen check` rejects in tests/spec/check/.
#include <catch2/catch.hpp>
#include <map>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "even_batch.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/trace/trace.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("wfgen_test_diagnostics_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& word) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.find(word) != std::string::npos) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("each warning has its name, its place and a test, --warnings-as-errors fails and writes nothing", "[warnings]") {
  fs::path dir = scratch("warnings");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(WFGEN_TEST_DATA) / "warnings"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 7);
  for (const auto& f : files) {
    SECTION(f.filename().string()) {
      const std::string text = slurp(f);
      std::vector<std::string> expected;
      static const std::regex re(R"(^# warning: (\d+:\d+): (.*)$)");
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (std::regex_match(l, m, re)) expected.push_back(f.string() + ":" + std::string(m[1]) + ": warning: " + std::string(m[2]));
      }
      REQUIRE(!expected.empty());
      std::ostringstream out, err;
      wfgen::cli::GenOptions o;
      o.specs = {f};
      o.output = dir / f.stem();
      CHECK(wfgen::cli::gen(o, {out, err, false}) == wfgen::cli::kOk);
      INFO(err.str());
      CHECK(lines_with(err.str(), ": warning: ") == expected);
      // The command line's check says the same.
      std::ostringstream cout_, cerr_;
      CHECK(wfgen::cli::check({{f}}, {cout_, cerr_, false}) == wfgen::cli::kOk);
      CHECK(lines_with(cerr_.str(), ": warning: ") == expected);
      // As errors: exit 2, the same places, nothing written.
      std::ostringstream out2, err2;
      o.output = dir / (f.stem().string() + "_werror");
      o.warnings_as_errors = true;
      CHECK(wfgen::cli::gen(o, {out2, err2, false}) == wfgen::cli::kBadInput);
      CHECK(!fs::exists(o.output));
      const auto errors = lines_with(err2.str(), ": error: ");
      REQUIRE(errors.size() == expected.size());
      for (std::size_t k = 0; k < errors.size(); ++k) {
        std::string want = expected[k];
        want.replace(want.find(": warning: "), 11, ": error: ");
        want.insert(want.rfind(" [-W") + 3, "Werror,-");
        CHECK(errors[k] == want);
      }
      CHECK(err2.str().find(std::to_string(expected.size()) + " error") != std::string::npos);
      std::ostringstream cout2, cerr2;
      wfgen::cli::CheckOptions co{{f}, true};
      CHECK(wfgen::cli::check(co, {cout2, cerr2, false}) == wfgen::cli::kBadInput);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("no warning on the examples, the test models and the standard library", "[warnings]") {
  // Every good spec of the repository: the examples and the tests' specs
  // (not the corpora of bad ones, of warnings, of `wfgen check` cases).
  std::vector<fs::path> specs;
  for (const char* dir : {"examples", "tests"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(WFGEN_SOURCE_DIR) / dir)) {
      const std::string p = e.path().generic_string();
      if (e.path().extension() != ".yaml" || p.find("/bad/") != std::string::npos || p.find("/warnings/") != std::string::npos ||
          p.find("/spec/check/") != std::string::npos || p.find("/fuzz/") != std::string::npos)
        continue;
      // It builds on a spec `wfgen import` writes at build time (tests/autodiff/CMakeLists.txt), which
      // is not in the source tree; tests/autodiff generates and compiles the two together.
      if (e.path().filename() == "onnx_recurrent_check.yaml") continue;
      specs.push_back(e.path());
    }
  }
  std::sort(specs.begin(), specs.end());
  REQUIRE(specs.size() >= 10);
  // Specs that build models of another file, loaded with it (as their CMake does).
  const fs::path root(WFGEN_SOURCE_DIR);
  const std::map<fs::path, fs::path> loaded_after = {
      {root / "tests" / "cnn" / "cnn_check.yaml", root / "examples" / "cnn-training" / "cnn.yaml"},
      {root / "tests" / "rnn" / "rnn_check.yaml", root / "examples" / "rnn" / "rnn.yaml"},
      {root / "tests" / "tiny-lm" / "tiny_lm_check.yaml", root / "examples" / "tiny-lm" / "tiny_lm.yaml"},
      {root / "examples" / "web-classifier" / "classifier.yaml", root / "examples" / "cnn-training" / "cnn.yaml"}};
  for (const auto& spec : specs) {
    INFO(spec.string());
    std::ostringstream out, err;
    std::vector<fs::path> files = {spec};
    if (auto it = loaded_after.find(spec); it != loaded_after.end()) files.insert(files.begin(), it->second);
    CHECK(wfgen::cli::check({files, true}, {out, err, false}) == wfgen::cli::kOk);
    INFO(err.str());
    CHECK(err.str().find("warning") == std::string::npos);
    CHECK(err.str().find("error") == std::string::npos);
  }
  // Every standard model: no warning, resolved, and checked by itself (notes only).
  const wfgen::spec::Spec s = wfgen::spec::load_with_stdlib({});
  int models = 0;
  for (const auto& m : s.models) {
    INFO(m.name);
    ++models;
    CHECK(wfgen::trace::lint_model(s, m).empty());
    CHECK_NOTHROW(wfgen::trace::resolve_model(s, m));
    std::vector<wfgen::Diagnostic> notes;
    CHECK_NOTHROW(notes = wfgen::trace::check_model(s, m));
    for (const auto& n : notes) CHECK(n.severity == wfgen::Diagnostic::Severity::Note);
  }
  CHECK(models >= 11);
  for (const auto& n : s.nodes) {
    INFO(n.name);
    CHECK(wfgen::trace::lint_node(s, n).empty());
  }
}

TEST_CASE("an assert on a run-time dim is checked when the inputs are bound", "[assert]") {
  using namespace wfgen::rt;
  wfgen_models::even_batch m;
  Tensor ok = Tensor::zeros(DType::f32, {4, 3});
  CHECK(m.forward(ok).size() == 1);
  try {
    m.forward(Tensor::zeros(DType::f32, {3, 3}));
    FAIL("a batch of 3 passed the assert");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK(std::string(e.what()).find("models.yaml:") != std::string::npos);
    CHECK(std::string(e.what()).find("even_batch: the batch must be even (batch = 3)") != std::string::npos);
  }
  std::vector<Tensor> out;
  Status st = m.try_forward(out, Tensor::zeros(DType::f32, {5, 3}));
  CHECK(!st.ok());
  CHECK(st.message().find("(batch = 5)") != std::string::npos);
  CHECK(m.try_forward(out, Tensor::zeros(DType::f32, {6, 3})).ok());
}

// The case of the issue: a two-block transformer from the standard
// library's transformer_block with d_model 32 and heads 3. The error names
// the user's line first, then the chain of calls inside the standard
// library, innermost last, down to the assert that fails.
TEST_CASE("a failing precondition inside the standard library names the user's line, then the stdlib lines", "[assert]") {
  const fs::path spec = fs::path(WFGEN_TEST_DATA) / "bad" / "precondition_mha_divisible.yaml";
  std::ostringstream out, err;
  wfgen::cli::GenOptions o;
  o.specs = {spec};
  o.output = scratch("chain") / "out";
  CHECK(wfgen::cli::gen(o, {out, err, false}) == wfgen::cli::kBadInput);
  const std::string e = err.str();
  INFO(e);
  const std::string user = spec.string() + ":9:11: error: multi_head_attention: d_model must be divisible by heads (d_model = 32, heads = 3)";
  const std::string call = "<stdlib>/models.yaml:";
  const auto at_user = e.find(user), at_call = e.find(": note: in this call of model 'multi_head_attention'"),
             at_assert = e.find(": note: it fails here, in model 'multi_head_attention' of the standard library");
  REQUIRE(at_user == 0);
  REQUIRE(at_call != std::string::npos);
  REQUIRE(at_assert != std::string::npos);
  CHECK(at_call < at_assert);
  CHECK(e.rfind(call, at_call) > at_user);
  CHECK(e.find("assert d_model % heads == 0", at_assert) != std::string::npos);
  CHECK(e.find("1 error generated") != std::string::npos);
  CHECK(!fs::exists(o.output));
  fs::remove_all(o.output.parent_path());
}

TEST_CASE("a Shape-Error report from inside a standard model names the user's line first, then the stdlib line", "[assert]") {
  const fs::path spec = fs::path(WFGEN_TEST_DATA) / "bad" / "stdlib_shape_error.yaml";
  std::ostringstream out, err;
  wfgen::cli::GenOptions o;
  o.specs = {spec};
  o.output = scratch("stdlib_shape") / "out";
  CHECK(wfgen::cli::gen(o, {out, err, false}) == wfgen::cli::kBadInput);
  const std::string e = err.str();
  INFO(e);
  CHECK(e.rfind(spec.string() + ":14:14: error: shape error in a call of node 'gelu'\n", 0) == 0);
  const auto note = e.find("<stdlib>/models.yaml:");
  const auto report = e.find("[wfgen] Shape-Error");
  REQUIRE(note != std::string::npos);
  REQUIRE(report != std::string::npos);
  CHECK(note < report);
  CHECK(e.find(": note: it fails here, in model 'transformer_block' of the standard library") != std::string::npos);
  CHECK(e.find("1 error generated") != std::string::npos);
  fs::remove_all(o.output.parent_path());
}
