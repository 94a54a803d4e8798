// A build with `as: node` (cl-waffe2's defmodel-as :asif :node) is a node
// other models call: its kernel runs the build's generated class. Compared
// with a naive loop over the node build's own parameters.
#include <catch2/catch.hpp>

#include <cmath>

#include "affine_node.hpp"
#include "outer.hpp"
#include "wfgen/runtime.hpp"

using wfgen::rt::Tensor;

TEST_CASE("a model calls a build as a node, at two batch sizes") {
  wfgen_as_node::outer outer;
  wfgen_as_node::affine_node affine;  // same seed: the same parameters as the node's instance
  Tensor W = affine.parameter("W"), b = affine.parameter("b");
  for (int batch : {2, 5}) {
    Tensor X = Tensor::empty(wfgen::rt::DType::f32, {batch, 3});
    wfgen::rt::Rng rng(static_cast<std::uint64_t>(batch));
    wfgen::rt::fill_uniform(X, -2.0, 2.0, rng);
    Tensor y = outer.forward(X)[0];
    REQUIRE(y.shape() == wfgen::rt::Shape{batch, 2});
    for (int r = 0; r < batch; ++r)
      for (int j = 0; j < 2; ++j) {
        double s = b.at<float>({j});
        for (int i = 0; i < 3; ++i) s += 2.0 * X.at<float>({r, i}) * W.at<float>({i, j});
        REQUIRE(y.at<float>({r, j}) == Approx(s > 0 ? s : 0.0).margin(1e-5));
      }
  }
  const std::string listing = outer.disassemble();
  CHECK(listing.find("AFFINE-NODE-CPU") != std::string::npos);
  // Scale(alpha=0.5) runs on `fast`; Scale(alpha=4.0) is rejected there and runs on cpu.
  CHECK(listing.find("SCALE-FAST") != std::string::npos);
  CHECK(listing.find("SCALE-CPU") != std::string::npos);
}
