// Classifies Fashion-MNIST test images with the web page's CNN, on any
// target: natively, under qemu-aarch64, or as WebAssembly under node (its
// files through NODERAWFS). Prints the accuracy and the time per image and
// writes the predicted classes, one digit per image, for the cross tests to
// compare between targets.
//
//   fashion_classify --params FILE [--data DIR] [--limit N] [--classes OUT]
//
// DIR holds the IDX files (t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte);
// gzip-compressed ones are read through `gzip -dc`, which a WebAssembly
// build cannot run: give it uncompressed files there.
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "classifier.hpp"
#include "fashion_mnist.hpp"

int main(int argc, char** argv) {
  try {
    std::string params, classes_out, dir = "/usr/share/datasets/fashion-mnist";
    std::int64_t limit = -1;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--params") params = value();
      else if (a == "--data") dir = value();
      else if (a == "--limit") limit = std::stoll(value());
      else if (a == "--classes") classes_out = value();
      else throw std::runtime_error("unknown argument " + a + " (usage: fashion_classify --params FILE [--data DIR] [--limit N] [--classes OUT])");
    }
    if (params.empty()) throw std::runtime_error("--params FILE is required (the trained weights)");

    const fashion_mnist::Dataset test = fashion_mnist::load(dir, "t10k", limit);
    const std::int64_t n = test.images.dim(0);
    webcnn::Classifier classifier;
    if (wfgen::rt::Status s = classifier.load(params); !s) throw std::runtime_error(s.to_string());

    std::vector<float> scores(static_cast<std::size_t>(n) * webcnn::kClasses);
    std::string classes;
    std::int64_t correct = 0;
    double seconds = 0;
    const std::int64_t batch = 100;  // the page's batch
    for (std::int64_t i = 0; i < n; i += batch) {
      const std::int64_t b = std::min(batch, n - i);
      const auto t0 = std::chrono::steady_clock::now();
      float* s = scores.data() + i * webcnn::kClasses;
      if (wfgen::rt::Status st = classifier.classify(test.images.data<float>() + i * webcnn::kPixels, b, s); !st)
        throw std::runtime_error(st.to_string());
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (std::int64_t r = 0; r < b; ++r) {
        const int best = webcnn::Classifier::best(s + r * webcnn::kClasses);
        classes += static_cast<char>('0' + best);
        correct += best == test.labels[static_cast<std::size_t>(i + r)];
      }
    }
    std::printf("classified %lld test images: accuracy %.4f, %.1f us per image\n", static_cast<long long>(n),
                n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0, n ? seconds * 1e6 / static_cast<double>(n) : 0.0);
    if (!classes_out.empty()) {
      std::ofstream out(classes_out);
      out << classes << "\n";
      if (!out) throw std::runtime_error("cannot write " + classes_out);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
