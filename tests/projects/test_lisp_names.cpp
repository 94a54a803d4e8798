// cl-waffe2's symbol names end to end (tests/projects/lisp_names): a node
// whose output pointer is `hidden_t+1` over dims `batch-size` and
// `hidden-size`, and a model over the run-time dims `time.steps` and `n*k`,
// generated at build time, compiled, and compared here with naive loops. The
// C++ names are mangled deterministically (hidden_t_plus_1, time_dot_steps,
// n_star_k); comments and messages keep the names as written.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "flatten_steps.hpp"
#include "kernels.hpp"
#include "two_steps.hpp"
#include "wfgen/runtime.hpp"

using wfgen::rt::Tensor;

namespace {

Tensor random_tensor(const wfgen::rt::Shape& shape, std::uint64_t seed) {
  Tensor t = Tensor::empty(wfgen::rt::DType::f32, shape);
  wfgen::rt::Rng rng(seed);
  wfgen::rt::fill_uniform(t, -2.0, 2.0, rng);
  return t;
}

std::string generated(const std::string& file) {
  std::ifstream in(std::string(WFGEN_LISP_NAMES_GEN) + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a kernel whose output pointer is hidden_t+1 matches a naive loop") {
  Tensor x = random_tensor({3, 1, 5}, 1), h = random_tensor({3, 1, 5}, 2);
  Tensor out = Tensor::zeros(wfgen::rt::DType::f32, {3, 1, 5});
  // The parameter `hidden_t+1` is spelled hidden_t_plus_1 in C++.
  wfgen_lisp_names::elmanupdate_f32_r3(x.cview<float, 3>(), h.cview<float, 3>(), out.view<float, 3>());
  for (int b = 0; b < 3; ++b)
    for (int j = 0; j < 5; ++j) {
      double want = std::tanh(double(x.at<float>({b, 0, j})) + 0.5 * h.at<float>({b, 0, j}));
      REQUIRE(out.at<float>({b, 0, j}) == Approx(want).margin(1e-6));
    }
  const std::string src = generated("elmanupdate.cpp");
  CHECK(src.find("wfgen::rt::View<float, 3> hidden_t_plus_1") != std::string::npos);
  CHECK(src.find("// ElmanUpdate: X_t[batch-size one hidden-size] hidden_t[batch-size one hidden-size] -> "
                 "hidden_t+1[batch-size one hidden-size] where one = 1") != std::string::npos);
  CHECK(src.find("\"hidden_t+1\")") != std::string::npos);  // the run-time message names it as written
}

TEST_CASE("a model over batch-size and hidden-size runs two Elman steps at two batch sizes") {
  wfgen_lisp_names::two_steps model;
  for (int batch : {1, 4}) {
    Tensor x0 = random_tensor({batch, 1, 6}, 3), x1 = random_tensor({batch, 1, 6}, 4), h = random_tensor({batch, 1, 6}, 5);
    Tensor y = model.forward(x0, x1, h)[0];
    REQUIRE(y.shape() == wfgen::rt::Shape{batch, 1, 6});
    for (int b = 0; b < batch; ++b)
      for (int j = 0; j < 6; ++j) {
        double h1 = std::tanh(double(x0.at<float>({b, 0, j})) + 0.5 * h.at<float>({b, 0, j}));
        double h2 = std::tanh(double(x1.at<float>({b, 0, j})) + 0.5 * float(h1));
        REQUIRE(y.at<float>({b, 0, j}) == Approx(h2).margin(1e-5));
      }
  }
  // `one` is 1 (where one = 1): a run-time error names the input and the dim as written.
  Tensor bad = random_tensor({2, 3, 6}, 6);
  std::vector<Tensor> outs;
  wfgen::rt::Status s = model.try_forward(outs, bad, bad, bad);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("X0"));
}

TEST_CASE("run-time dims time.steps and n*k become C++ names and stay as written in messages") {
  wfgen_lisp_names::flatten_steps model;
  Tensor x = random_tensor({3, 7}, 7);
  Tensor y = model.forward(x)[0];
  REQUIRE(y.shape() == wfgen::rt::Shape{3, 7});
  for (int t = 0; t < 3; ++t)
    for (int j = 0; j < 7; ++j) REQUIRE(y.at<float>({t, j}) == Approx(2.0 * x.at<float>({t, j})));
  const std::string src = generated("flatten_steps.cpp");
  CHECK(src.find("const wfgen::rt::Size time_dot_steps = ") != std::string::npos);
  CHECK(src.find("const wfgen::rt::Size n_star_k = ") != std::string::npos);
  CHECK(model.summary().find("X float (time.steps n*k)") != std::string::npos);
  std::vector<Tensor> outs;
  wfgen::rt::Status s = model.try_forward(outs, random_tensor({3}, 8));
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("X[time.steps n*k]"));
}
