#include <iostream>

#include "model_a.hpp"
#include "model_b.hpp"

int main() {
  auto x = wfgen::rt::Tensor::from_data<float>({1, 2}, {1.0f, 2.0f});
  ns_a::model_a a;
  ns_b::model_b b;
  std::cout << a.forward(x)[0] << "\n" << b.forward(x)[0] << "\n";
}
