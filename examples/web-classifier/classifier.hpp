// The classifier the page and the command line share: the CNN of
// classifier.yaml on raw Fashion-MNIST pixels (0..1, 28 x 28 a image),
// standardised as the CNN example trained it. Errors come back as a
// wfgen::rt::Status (the model's try_ API), so the WebAssembly module needs
// no C++ exceptions to report them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fashion_cnn.hpp"
#include "wfgen/runtime.hpp"

namespace webcnn {

inline constexpr int kClasses = 10;
inline constexpr int kPixels = 28 * 28;
inline constexpr const char* kClassNames[kClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

class Classifier {
 public:
  wfgen::rt::Status load(const std::string& params_path) { return model_.try_load_parameters(params_path); }

  // scores[i * kClasses + c] = the logit of class c for image i of `n`
  // (pixels[i * kPixels ...], row by row).
  wfgen::rt::Status classify(const float* pixels, std::int64_t n, float* scores) {
    using wfgen::rt::Tensor;
    Tensor x = Tensor::empty(wfgen::rt::DType::f32, {n, 1, 28, 28});
    float* to = x.data<float>();
    for (std::int64_t i = 0; i < n * kPixels; ++i) to[i] = (pixels[i] - kMean) / kDeviation;
    std::vector<Tensor> out;
    if (wfgen::rt::Status s = model_.try_forward(out, x); !s) return s;
    const float* logits = out[0].data<float>();
    for (std::int64_t i = 0; i < n * kClasses; ++i) scores[i] = logits[i];
    return {};
  }

  // The index of the largest score (the first of equal ones).
  static int best(const float* scores) {
    int b = 0;
    for (int c = 1; c < kClasses; ++c)
      if (scores[c] > scores[b]) b = c;
    return b;
  }

 private:
  // The mean and deviation of the training pixels (examples/cnn-training).
  static constexpr float kMean = 0.2860f, kDeviation = 0.3530f;
  fashion_cnn model_;
};

}  // namespace webcnn
