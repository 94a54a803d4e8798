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
    expect_bad(bad, saved(dir.path / "x.wfp", a.names, t), "parameter 'W' has shape axis 0 = 4, expected (3 4)");
  }
  {
    auto t = a.tensors;
    t[3] = Tensor::zeros(DType::u8, {4});
    expect_bad(bad, saved(dir.path / "x.wfp", a.names, t), "parameter 'mask' has rank 1, expected 3");
  }
  {
    auto n = a.names;
    n[2] = "index\n\x01";
    expect_bad(bad, saved(dir.path / "x.wfp", n, a.tensors), "parameter 2 is 'index\\x0a\\x01', expected 'idx'");
  }
  {
    std::vector<std::string> n(a.names.begin(), a.names.end() - 1);
    std::vector<Tensor> t(a.tensors.begin(), a.tensors.end() - 1);
    expect_bad(bad, saved(dir.path / "x.wfp", n, t), "it has 4 parameters, the model has 5");
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
