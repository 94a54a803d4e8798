// Runs the model compiled from the committed sources in generated/.
#include <iostream>

#include "tanh_net.hpp"
#include "wfgen/runtime.hpp"

int main() {
  using wfgen::rt::Tensor;
  committed::tanh_net model;
  std::cout << model.summary() << "\n";
  Tensor x = Tensor::from_data<float>({2, 3}, {0.5f, -1.0f, 2.0f, 0.0f, 0.25f, -0.75f});
  Tensor y = model.forward(x)[0];
  std::cout << "Y = " << y << "\n";
  // sigmoid outputs lie in (0, 1)
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      if (!(y.at<float>({i, j}) > 0.0f && y.at<float>({i, j}) < 1.0f)) return 1;
  return 0;
}
