// Runs the generated ClampedAffine model and compares it with the same
// computation written naively here: the user's C++ kernel (kernels/clamp.cpp)
// runs inside the generated code. Exits 1 on a mismatch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "clamped_affine.hpp"
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
  return worst <= 1e-5 && clamped > 0 ? 0 : 1;
}
