// Classifies the Fashion-MNIST test images with a wfgen-generated MLP.
//
//   mlp_inference [--params FILE] [--data DIR] [--limit N] [--save FILE]
//
// The weights come from FILE (written by save_parameters(), e.g. by a
// training run) or, without --params, from the seeded initialisation of the
// build in mlp.yaml: then the accuracy is chance level (about 10%); the
// point is the workflow. --save writes the parameters the model holds.
// Data: ../common/fashion_mnist.hpp (Debian's dataset-fashion-mnist).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "mlp_classifier.hpp"
#include "wfgen/runtime.hpp"

using wfgen::rt::DType;
using wfgen::rt::Tensor;

int main(int argc, char** argv) {
  try {
    std::string params, save, dir = "/usr/share/datasets/fashion-mnist";
    std::int64_t limit = -1;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--params") params = value();
      else if (a == "--save") save = value();
      else if (a == "--data") dir = value();
      else if (a == "--limit") limit = std::stoll(value());
      else throw std::runtime_error("unknown argument " + a + " (usage: mlp_inference [--params FILE] [--data DIR] [--limit N] [--save FILE])");
    }

    const fashion_mnist::Dataset test = fashion_mnist::load(dir, "t10k", limit);
    const std::int64_t n = test.images.dim(0);
    const Tensor& images = test.images;

    mlp::mlp_classifier model;
    if (!params.empty()) model.load_parameters(params);
    std::cout << model.summary() << "\n";
    std::cout << "parameters: " << (params.empty() ? "seeded initialisation (no --params)" : params) << "\n";

    const std::int64_t batch = 256;
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; i += batch) {
      std::int64_t b = std::min(batch, n - i);
      Tensor scores = model.forward(images.slice(0, i, i + b))[0];
      for (std::int64_t r = 0; r < b; ++r) {
        int best = 0;
        for (int c = 1; c < 10; ++c)
          if (scores.at<float>({r, c}) > scores.at<float>({r, best})) best = c;
        correct += best == test.labels[static_cast<std::size_t>(i + r)];
      }
    }
    std::printf("classified %lld test images: accuracy %.4f\n", static_cast<long long>(n),
                n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0);
    if (!save.empty()) {
      model.save_parameters(save);
      std::printf("saved the parameters to %s\n", save.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
