// Parameter files (rt::save_parameters / rt::load_parameters): a round trip
// of every dtype, and every corruption — truncation at every length, any
// single byte changed, wrong magic, version, dtype, rank, shape, name or
// count, trailing bytes — is a BadParameterFile error that names the problem
// and leaves the parameters exactly as they were.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wfgen/model_support.hpp"

using rt::DType;
using rt::ErrorCode;
using rt::Tensor;
namespace fs = std::filesystem;

namespace {

struct Params {
  std::vector<std::string> names{"W", "b", "idx", "mask", "scale"};
  std::vector<Tensor> tensors{Tensor::empty(DType::f32, {3, 4}), Tensor::empty(DType::f64, {4}),
                              Tensor::empty(DType::i64, {2}), Tensor::empty(DType::u8, {2, 1, 2}),
                              Tensor::empty(DType::i32, {})};
  explicit Params(unsigned char fill) {
    for (auto& t : tensors) std::memset(t.raw_data(), fill, static_cast<std::size_t>(t.nbytes()));
  }
  std::vector<std::string> bytes() const {
    std::vector<std::string> out;
    for (const auto& t : tensors) out.emplace_back(static_cast<const char*>(t.raw_data()), static_cast<std::size_t>(t.nbytes()));
    return out;
  }
};

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("wfgen_params_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Loads `bytes` into parameters filled with 0x5a: must fail with
// BadParameterFile, a message containing `text`, and change nothing.
void expect_bad(const fs::path& file, const std::string& bytes, const std::string& text) {
  write_file(file, bytes);
  Params p(0x5a);
  const auto before = p.bytes();
  REQUIRE_RT_ERROR(rt::load_parameters(file.string(), p.names, p.tensors), ErrorCode::BadParameterFile, text);
  CHECK(p.bytes() == before);
}

// A file of `names`/`tensors` as save_parameters writes it.
std::string saved(const fs::path& file, const std::vector<std::string>& names, const std::vector<Tensor>& tensors) {
  rt::save_parameters(file.string(), names, tensors);
  return read_file(file);
}

}  // namespace

TEST_CASE("parameter files: a round trip of every dtype and rank 0", "[params]") {
  TempDir dir;
  Params a(0), b(0x5a);
  for (std::size_t k = 0; k < a.tensors.size(); ++k) {
    auto* p = static_cast<unsigned char*>(a.tensors[k].raw_data());
    for (std::size_t i = 0; i < a.tensors[k].nbytes(); ++i) p[i] = static_cast<unsigned char>(k * 31 + i * 7 + 1);
  }
  const fs::path file = dir.path / "p.wfp";
  rt::save_parameters(file.string(), a.names, a.tensors);
  CHECK(!fs::exists(file.string() + ".tmp"));
  rt::load_parameters(file.string(), b.names, b.tensors);
  CHECK(b.bytes() == a.bytes());
}

TEST_CASE("parameter files: every truncation and every changed byte is an error that changes nothing", "[params]") {
  TempDir dir;
  Params a(0x11);
  const fs::path file = dir.path / "p.wfp";
  const std::string good = saved(file, a.names, a.tensors);
  const fs::path bad = dir.path / "bad.wfp";
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " of " << good.size() << " bytes");
    expect_bad(bad, good.substr(0, n), "parameter file " + bad.string() + ": ");
  }
  for (std::size_t i = 0; i < good.size(); ++i) {
    INFO("byte " << i << " changed");
    std::string s = good;
    s[i] = static_cast<char>(s[i] ^ 0x21);
    expect_bad(bad, s, "parameter file " + bad.string() + ": ");
  }
}

TEST_CASE("parameter files: each kind of mismatch has its own message", "[params]") {
  TempDir dir;
  Params a(0x11);
  const fs::path file = dir.path / "p.wfp";
  const fs::path bad = dir.path / "bad.wfp";
  const std::string good = saved(file, a.names, a.tensors);

  expect_bad(bad, "", "the file is truncated");
  expect_bad(bad, good.substr(0, good.size() - 3), "truncated");
  expect_bad(bad, "WFGENPRX" + good.substr(8), "this is not a wfgen parameter file (wrong magic)");
  {
    std::string s = good;
    s[8] = 7;
    expect_bad(bad, s, "version 7 is not supported (expected 1)");
  }
  expect_bad(bad, good.substr(0, good.size() - 8) + "xx" + good.substr(good.size() - 8), "unexpected bytes after the last parameter");
  {
    std::string s = good;
    s[s.size() - 9] = static_cast<char>(s[s.size() - 9] ^ 1);  // the last data byte
    expect_bad(bad, s, "the checksum does not match: the file is corrupted");
  }
  {
    auto t = a.tensors;
    t[1] = Tensor::zeros(DType::f32, {4});
    expect_bad(bad, saved(dir.path / "x.wfp", a.names, t), "parameter 'b' has dtype f32, expected f64");
  }
  {
    std::string s = good;
    // The dtype byte of the first parameter: magic 8, version 4, count 4, name length 4, name "W".
    s[8 + 4 + 4 + 4 + 1] = 9;
    expect_bad(bad, s, "parameter 'W' has an unknown dtype code 9, expected f32");
  }
  {
    auto t = a.tensors;
    t[0] = Tensor::zeros(DType::f32, {4, 3});
    expect_bad(bad, saved(dir.path / "x.wfp", a.names, t), "parameter 'W' has shape (4 3), expected (3 4)");
  }
  {
    auto t = a.tensors;
    t[3] = Tensor::zeros(DType::u8, {4});
    expect_bad(bad, saved(dir.path / "x.wfp", a.names, t), "parameter 'mask' has rank 1, expected 3");
  }
  {
    auto n = a.names;
    n[2] = "index\n\x01";
    expect_bad(bad, saved(dir.path / "x.wfp", n, a.tensors),
               "the model's parameter 'idx' is not in the file; it holds 5 parameters: 'W', 'b', 'index\\x0a\\x01', 'mask', 'scale'");
  }
  {
    std::vector<std::string> n(a.names.begin(), a.names.end() - 1);
    std::vector<Tensor> t(a.tensors.begin(), a.tensors.end() - 1);
    expect_bad(bad, saved(dir.path / "x.wfp", n, t), "the model's parameter 'scale' is not in the file; it holds 4 parameters");
  }
}

TEST_CASE("parameter files: missing files, folders and mismatched arguments", "[params]") {
  TempDir dir;
  Params p(0x5a);
  REQUIRE_RT_ERROR(rt::load_parameters((dir.path / "none.wfp").string(), p.names, p.tensors), ErrorCode::BadParameterFile,
                   "cannot open the parameter file");
  REQUIRE_RT_ERROR(rt::load_parameters(dir.path.string(), p.names, p.tensors), ErrorCode::BadParameterFile,
                   "it is a directory");
  std::vector<std::string> fewer(p.names.begin(), p.names.end() - 1);
  REQUIRE_RT_ERROR(rt::load_parameters((dir.path / "none.wfp").string(), fewer, p.tensors), ErrorCode::InvalidArgument,
                   "4 names but 5 tensors");
  REQUIRE_RT_ERROR(rt::save_parameters((dir.path / "no" / "such" / "dir.wfp").string(), p.names, p.tensors),
                   ErrorCode::BadParameterFile, "cannot write the parameter file");
}

namespace {

// The parameters of one model as its inference build names them, and as a
// training build that calls it names them (docs/runtime-api.md, "Moving
// parameters between builds"): the model's own parameter "W1" becomes
// "classifier_0.W1", its layer's "linear_0.W" "classifier_0/linear_0.W".
struct Builds {
  std::vector<std::string> infer{"W1", "linear_0.W", "linear_0.b"};
  std::vector<Tensor> tensors{Tensor::zeros(DType::f32, {2, 3}), Tensor::zeros(DType::f32, {3, 2}), Tensor::zeros(DType::f32, {2})};
  std::vector<float> values() const {
    std::vector<float> out;
    for (const auto& t : tensors) out.insert(out.end(), t.data<float>(), t.data<float>() + t.numel());
    return out;
  }
};

// A tensor of `shape` holding first, first + 1, ...
Tensor counting(const rt::Shape& shape, float first) {
  Tensor t = Tensor::empty(DType::f32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = first + static_cast<float>(i);
  return t;
}

// A training build's parameters: the classifier under `scopes` (in order),
// each scope's values starting at 100 * its position + 1, and the loss
// model's own "temperature".
std::vector<std::pair<std::string, Tensor>> training(const std::vector<std::string>& scopes) {
  std::vector<std::pair<std::string, Tensor>> out{{"temperature", counting({}, -1)}};
  for (std::size_t k = 0; k < scopes.size(); ++k) {
    const float base = 100.0f * static_cast<float>(k) + 1.0f;
    out.emplace_back(scopes[k] + ".W1", counting({2, 3}, base));
    out.emplace_back(scopes[k] + "/linear_0.W", counting({3, 2}, base + 10));
    out.emplace_back(scopes[k] + "/linear_0.b", counting({2}, base + 20));
  }
  return out;
}

std::vector<float> expected_values(float base) {
  std::vector<float> out;
  for (int i = 0; i < 6; ++i) out.push_back(base + static_cast<float>(i));
  for (int i = 0; i < 6; ++i) out.push_back(base + 10 + static_cast<float>(i));
  for (int i = 0; i < 2; ++i) out.push_back(base + 20 + static_cast<float>(i));
  return out;
}

void save(const fs::path& file, const std::vector<std::pair<std::string, Tensor>>& params) {
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  for (const auto& [n, t] : params) names.push_back(n), tensors.push_back(t);
  rt::save_parameters(file.string(), names, tensors);
}

// Loading `params` from a file and copying them in memory both fail with
// `text` and change nothing.
void expect_mismatch(const fs::path& file, const std::vector<std::pair<std::string, Tensor>>& params, const std::string& scope,
                     const std::string& text) {
  save(file, params);
  Builds b;
  REQUIRE_RT_ERROR(rt::load_parameters(file.string(), b.infer, b.tensors, scope), ErrorCode::BadParameterFile,
                   "parameter file " + file.string() + ": " + text);
  // The same words, of a model instead of a file.
  std::string in_memory = text;
  for (auto [from, to] : {std::pair<std::string, std::string>{"the file", "the source model"}, {"load_parameters", "copy_parameters_from"}}) {
    if (auto at = in_memory.find(from); at != std::string::npos) in_memory.replace(at, from.size(), to);
  }
  REQUIRE_RT_ERROR(rt::copy_parameters(params, b.infer, b.tensors, scope), ErrorCode::InvalidArgument,
                   "copy_parameters_from: " + in_memory);
  CHECK(b.values() == std::vector<float>(14, 0.0f));
}

}  // namespace

TEST_CASE("parameter files: matched by name, at the top level or under the scope of a build that calls the model", "[params]") {
  TempDir dir;
  const fs::path file = dir.path / "train.wfp";
  SECTION("a training build's file, found under its one scope, in any order") {
    auto params = training({"classifier_0"});
    std::swap(params[1], params[3]);
    save(file, params);
    Builds b;
    rt::load_parameters(file.string(), b.infer, b.tensors);
    CHECK(b.values() == expected_values(1));
    Builds c;
    rt::copy_parameters(params, c.infer, c.tensors);
    CHECK(c.values() == expected_values(1));
  }
  SECTION("the scope named explicitly, with or without its separator") {
    save(file, training({"classifier_0"}));
    for (const char* scope : {"classifier_0", "classifier_0/"}) {
      Builds b;
      rt::load_parameters(file.string(), b.infer, b.tensors, scope);
      CHECK(b.values() == expected_values(1));
    }
  }
  SECTION("two scopes that both fit: an error, unless one is named") {
    const auto params = training({"classifier_0", "classifier_1"});
    expect_mismatch(file, params, "",
                    "the file holds this model's parameters under 2 scopes, 'classifier_0', 'classifier_1': name the one to take, "
                    "e.g. load_parameters(..., \"classifier_0\")");
    Builds b;
    rt::load_parameters(file.string(), b.infer, b.tensors, "classifier_1");
    CHECK(b.values() == expected_values(101));
    Builds c;
    rt::copy_parameters(params, c.infer, c.tensors, "classifier_1");
    CHECK(c.values() == expected_values(101));
  }
  SECTION("a scope that holds none of them") {
    expect_mismatch(file, training({"classifier_0"}), "head_0",
                    "the model's parameters 'W1', 'linear_0.W', 'linear_0.b' are not in the file under the scope 'head_0'; "
                    "it holds 4 parameters: 'temperature', 'classifier_0.W1', 'classifier_0/linear_0.W', 'classifier_0/linear_0.b'");
  }
  SECTION("a parameter missing under the scope") {
    auto params = training({"classifier_0"});
    params.pop_back();
    expect_mismatch(file, params, "", "the model's parameter 'linear_0.b' is not in the file under the scope 'classifier_0'");
  }
  SECTION("a parameter left over under the scope: another model") {
    auto params = training({"classifier_0"});
    params.emplace_back("classifier_0/linear_1.W", counting({2, 2}, 0));
    expect_mismatch(file, params, "",
                    "the file's parameter 'classifier_0/linear_1.W' is not one of the model's under the scope 'classifier_0' "
                    "(the model has 3 parameters)");
  }
  SECTION("a shape or dtype that differs names both names") {
    auto params = training({"classifier_0"});
    params[2].second = counting({2, 3}, 0);
    expect_mismatch(file, params, "", "parameter 'linear_0.W' (taken from 'classifier_0/linear_0.W') has shape (2 3), expected (3 2)");
    params = training({"classifier_0"});
    params[3].second = Tensor::zeros(DType::f64, {2});
    expect_mismatch(file, params, "", "parameter 'linear_0.b' (taken from 'classifier_0/linear_0.b') has dtype f64, expected f32");
  }
  SECTION("a build used as a node keeps its parameters' names in every build") {
    // rnn_train: "sequence_classifier_0/linear_0.W" and the node's "elman_cell.Wx"; rnn_predict: "linear_0.W", "elman_cell.Wx".
    const std::vector<std::pair<std::string, Tensor>> params{{"elman_cell.Wx", counting({2}, 1)},
                                                             {"sequence_classifier_0/linear_0.W", counting({2}, 3)}};
    save(file, params);
    std::vector<std::string> names{"linear_0.W", "elman_cell.Wx"};
    std::vector<Tensor> tensors{Tensor::zeros(DType::f32, {2}), Tensor::zeros(DType::f32, {2})};
    rt::load_parameters(file.string(), names, tensors);
    CHECK(tensors[0].at<float>({1}) == 4.0f);
    CHECK(tensors[1].at<float>({1}) == 2.0f);
    // A model's own parameter ("scale", no '.') is never taken from outside the scope.
    names = {"linear_0.W", "temperature"};
    tensors[1] = Tensor::zeros(DType::f32, {});
    save(file, training({"classifier_0"}));
    REQUIRE_RT_ERROR(rt::load_parameters(file.string(), names, tensors), ErrorCode::BadParameterFile,
                     "the model's parameter 'temperature' is not in the file under the scope 'classifier_0'");
  }
  SECTION("the other way round: an inference build's file into the training build, to train on from there") {
    // The file has the model at the top level; the training build names the same parameters under classifier_0.
    const std::vector<std::pair<std::string, Tensor>> file_params{
        {"W1", counting({2, 3}, 1)}, {"linear_0.W", counting({3, 2}, 11)}, {"linear_0.b", counting({2}, 21)}, {"cell.Wx", counting({2}, 31)}};
    save(file, file_params);
    std::vector<std::string> names{"classifier_0.W1", "classifier_0/linear_0.W", "classifier_0/linear_0.b", "cell.Wx"};
    std::vector<Tensor> tensors{Tensor::zeros(DType::f32, {2, 3}), Tensor::zeros(DType::f32, {3, 2}), Tensor::zeros(DType::f32, {2}),
                                Tensor::zeros(DType::f32, {2})};
    rt::load_parameters(file.string(), names, tensors);
    CHECK(tensors[0].at<float>({1, 2}) == 6.0f);
    CHECK(tensors[1].at<float>({2, 1}) == 16.0f);
    CHECK(tensors[2].at<float>({1}) == 22.0f);
    CHECK(tensors[3].at<float>({0}) == 31.0f);
    // The training build's own parameter ("temperature") is not in the file: an error that names it.
    names.push_back("temperature");
    tensors.push_back(Tensor::zeros(DType::f32, {}));
    REQUIRE_RT_ERROR(rt::load_parameters(file.string(), names, tensors), ErrorCode::BadParameterFile,
                     "'classifier_0/linear_0.b', 'temperature' are not in the file; it holds 4 parameters");
  }
  SECTION("a name twice") {
    auto params = training({"classifier_0"});
    params.push_back(params[1]);
    expect_mismatch(file, params, "", "the file holds the parameter 'classifier_0.W1' twice");
  }
}
