// Runs the generated ClampedAffine model and compares it with the same
// computation written naively here: the user's C++ kernel (kernels/clamp.cpp)
// runs inside the generated code. Then trains the layer with the pullback
// wfgen derived through the user's node (its `backward:`), checking the
// gradient of b against the naive formula. Exits 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "clamped_affine.hpp"
#include "clamped_affine_train.hpp"
#include "wfgen/runtime.hpp"

int main() {
  using wfgen::rt::DType;
  using wfgen::rt::Tensor;
  ck::clamped_affine model;
  std::cout << model.summary() << "\n";

  const std::int64_t batch = 3, n = 6, m = 4;
  Tensor x = Tensor::empty(DType::f32, {batch, n});
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t k = 0; k < n; ++k) x.at<float>({i, k}) = 0.1f * static_cast<float>(i - k);
  Tensor y = model.forward(x)[0];
  std::cout << "Y = " << y << "\n";

  Tensor W = model.parameter("W"), b = model.parameter("b");
  double worst = 0;
  int clamped = 0;
  for (std::int64_t i = 0; i < batch; ++i) {
    for (std::int64_t j = 0; j < m; ++j) {
      float s = b.at<float>({j});
      for (std::int64_t k = 0; k < n; ++k) s += x.at<float>({i, k}) * W.at<float>({k, j});
      float want = std::clamp(s, -0.5f, 0.5f);
      clamped += want != s;
      worst = std::max(worst, std::abs(static_cast<double>(y.at<float>({i, j}) - want)));
    }
  }
  std::printf("max |generated - reference| = %.3g (%d of %lld values clamped)\n", worst, clamped,
              static_cast<long long>(batch * m));
  if (!(worst <= 1e-5 && clamped > 0)) return 1;

  // Training: fit the clamped layer to targets T = 0.3 (inside the clamp).
  ck::clamped_affine_train train;
  Tensor T = Tensor::full(DType::f32, {batch, m}, 0.3);
  float first = train.forward(x, T)[0].at<float>({0});
  train.zero_grad();
  train.backward();
  // d loss / d b[j] = sum_i 2 (y_ij - t_ij) [lo <= z_ij <= hi] / (batch m), z = x W + b.
  Tensor W2 = train.parameter("ClampedAffine_0.W"), b2 = train.parameter("ClampedAffine_0.b");
  Tensor gb = train.grad("ClampedAffine_0.b");
  double worst_grad = 0;
  for (std::int64_t j = 0; j < m; ++j) {
    double want = 0;
    for (std::int64_t i = 0; i < batch; ++i) {
      float z = b2.at<float>({j});
      for (std::int64_t k = 0; k < n; ++k) z += x.at<float>({i, k}) * W2.at<float>({k, j});
      float yv = std::clamp(z, -0.5f, 0.5f);
      if (z >= -0.5f && z <= 0.5f) want += 2.0 * (yv - 0.3) / static_cast<double>(batch * m);
    }
    worst_grad = std::max(worst_grad, std::abs(want - gb.at<float>({j})));
  }
  train.step();
  float last = first;
  for (int s = 0; s < 50; ++s) {
    last = train.forward(x, T)[0].at<float>({0});
    train.zero_grad();
    train.backward();
    train.step();
  }
  std::printf("max |grad b - reference| = %.3g; loss %.4f -> %.4f after 50 SGD steps\n", worst_grad, first, last);
  return worst_grad <= 1e-5 && last < first ? 0 : 1;
}
