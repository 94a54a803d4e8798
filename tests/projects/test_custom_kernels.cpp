// A user project (tests/projects/custom_kernels): a node with a C++ kernel
// read by Clang, a node with an element-wise expression and a fixed-rank
// C++ kernel, generated at build time, compiled, and compared here with
// naive loops. Then the bad versions of such a project, each with the
// file:line:col error it must produce.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "custom_kernels/gen/kernels.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::Tensor;

namespace {

Tensor random_tensor(const wfgen::rt::Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(wfgen::rt::DType::f32, shape);
  wfgen::rt::Rng rng(seed);
  wfgen::rt::fill_uniform(t, -3.0, 3.0, rng);
  return t;
}

}  // namespace

TEST_CASE("user C++ kernel ScaleShift matches a naive loop on a transposed view") {
  Tensor x = random_tensor({5, 7}, 1);
  Tensor xt = x.T();  // non-contiguous input
  Tensor out = Tensor::zeros(wfgen::rt::DType::f32, {7, 5});
  wfgen_custom::scaleshift_f32_r2(xt.cview<float, 2>(), out.view<float, 2>(), 1.5f, -0.25f);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) REQUIRE(out.at<float>({i, j}) == Approx(1.5f * x.at<float>({j, i}) - 0.25f).epsilon(1e-6));
}

TEST_CASE("element-wise SoftClip matches a naive loop, f32 and f64") {
  Tensor x = random_tensor({4, 3, 6}, 2);
  Tensor out = Tensor::zeros(wfgen::rt::DType::f32, {4, 3, 6});
  wfgen_custom::softclip_f32_r3(x.cview<float, 3>(), out.view<float, 3>(), 2.0f);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 6; ++c) {
        double v = x.at<float>({a, b, c});
        REQUIRE(out.at<float>({a, b, c}) == Approx(2.0 * std::tanh(v / 2.0)).epsilon(1e-5));
      }
  Tensor xd = Tensor::from_data<double>({3}, {-10.0, 0.5, 10.0});
  Tensor od = Tensor::zeros(wfgen::rt::DType::f64, {3});
  wfgen_custom::softclip_f64_r1(xd.cview<double, 1>(), od.view<double, 1>(), 1.0);
  REQUIRE(od.at<double>({0}) == Approx(std::tanh(-10.0)).epsilon(1e-12));
  REQUIRE(od.at<double>({1}) == Approx(std::tanh(0.5)).epsilon(1e-12));
}

TEST_CASE("element-wise Blend: tensors named step, off, n, row and an argument i, on transposed blocks") {
  // The names of the generated kernel's own locals (wf_step, wf_n, wf_off,
  // wf_row, wf_i) must not collide with the spec's; `off` is a transposed
  // view larger than one 64 x 64 block, so the blocked path runs too.
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3, 5}, {70, 131}}) {
    INFO(rows << " x " << cols);
    Tensor step = random_tensor({rows, cols}, 3), off = random_tensor({cols, rows}, 4), n = random_tensor({1, cols}, 5);
    Tensor off_t = off.T();
    Tensor n_rows = n.broadcast_to({rows, cols});
    Tensor row = Tensor::zeros(wfgen::rt::DType::f32, {rows, cols});
    wfgen_custom::blend_f32_r2(step.cview<float, 2>(), off_t.cview<float, 2>(), n_rows.cview<float, 2>(), row.view<float, 2>(), 0.5f);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const double want = double(step.at<float>({i, j})) + double(off.at<float>({j, i})) * n.at<float>({0, j}) + 0.5;
        REQUIRE(row.at<float>({i, j}) == Approx(want).epsilon(1e-5).margin(1e-5));
      }
  }
}

TEST_CASE("fixed-rank C++ kernel RowScale through the kernel table") {
  Tensor x = random_tensor({3, 4}, 3);
  Tensor s = random_tensor({3, 1}, 4);
  Tensor out = Tensor::zeros(wfgen::rt::DType::f32, {3, 4});
  const wfgen::rt::KernelEntry* entry = nullptr;
  for (const auto& e : wfgen_custom::kernel_table())
    if (std::string(e.name) == "rowscale_f32_r2") entry = &e;
  REQUIRE(entry != nullptr);
  wfgen::rt::TensorRef refs[] = {x.ref(), s.ref(), out.ref()};
  entry->fn(refs, nullptr);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) REQUIRE(out.at<float>({i, j}) == x.at<float>({i, j}) * s.at<float>({i, 0}));
}

TEST_CASE("bad user kernels fail with file:line:col errors and write nothing") {
  fs::path dir = fs::path(WFGEN_TEST_DATA) / "projects/custom_kernels/bad";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++cases;
    std::ifstream in(entry.path());
    std::string line, expect;
    std::vector<std::string> words;
    while (std::getline(in, line)) {
      if (line.rfind("# expect: ", 0) == 0) expect = line.substr(10);
      if (line.rfind("# expect-words: ", 0) == 0) {
        std::istringstream ws(line.substr(16));
        for (std::string w; ws >> w;) words.push_back(w);
      }
    }
    INFO(entry.path().string());
    REQUIRE(!expect.empty());
    fs::path out = fs::temp_directory_path() / ("wfgen-bad-" + entry.path().stem().string());
    fs::remove_all(out);
    wfgen::cli::GenOptions o;
    o.specs = {entry.path()};
    o.output = out;
    std::ostringstream sout, serr;
    int code = wfgen::cli::gen(o, {sout, serr, false});
    INFO(serr.str());
    CHECK(code == wfgen::cli::kBadInput);
    CHECK(serr.str().find(expect) != std::string::npos);
    for (const auto& w : words) CHECK(serr.str().find(w) != std::string::npos);
    CHECK(!fs::exists(out));
  }
  REQUIRE(cases >= 5);
}
