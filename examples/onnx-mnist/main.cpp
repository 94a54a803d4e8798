// The Fashion-MNIST CNN of examples/cnn-training, exported to ONNX by
// make_onnx.py and imported back with `wfgen import` (issue 21), run on the
// 10000 test images next to the model it came from: the CNN example's own
// `cnn_predict` class with the same trained weights. The two must agree: the
// same accuracy, the same class for every image, and scores within float
// rounding (they compute the same sums in different orders: the import's
// std-only GEMM on the cpu device, the source's OpenBLAS).
//
// Data: Debian's dataset-fashion-mnist, or the folder given as argv[1].
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "cnn_predict.hpp"
#include "fashion_cnn.hpp"
#include "fashion_mnist.hpp"
#include "wfgen/runtime.hpp"

using wfgen::rt::Tensor;

int main(int argc, char** argv) {
  try {
    const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    const fashion_mnist::Dataset test = fashion_mnist::load(dir, "t10k");
    const std::int64_t n = test.images.dim(0);

    imported::fashion_cnn onnx_model;  // takes raw pixels: the ONNX graph standardises them
    onnx_model.load_parameters(IMPORTED_PARAMS);
    source::cnn_predict source_model;  // takes standardised pixels, as the CNN example feeds it
    source_model.load_parameters(SOURCE_PARAMS);
    std::printf("imported model: %s\n\n%s\n", IMPORTED_PARAMS, onnx_model.summary().c_str());

    Tensor standardised = Tensor::empty(wfgen::rt::DType::f32, {n, 784});
    for (std::int64_t i = 0; i < n * 784; ++i)
      standardised.data<float>()[i] = (test.images.data<float>()[i] - 0.2860f) / 0.3530f;

    std::int64_t right_onnx = 0, right_source = 0, same = 0;
    double max_diff = 0, seconds_onnx = 0, seconds_source = 0;
    const std::int64_t batch = 500;
    for (std::int64_t i = 0; i < n; i += batch) {
      const std::int64_t b = std::min(batch, n - i);
      auto t0 = std::chrono::steady_clock::now();
      const Tensor a = onnx_model.forward(test.images.slice(0, i, i + b).reshape({b, 1, 28, 28}))[0];
      auto t1 = std::chrono::steady_clock::now();
      const Tensor s = source_model.forward(standardised.slice(0, i, i + b).reshape({b, 1, 28, 28}))[0];
      auto t2 = std::chrono::steady_clock::now();
      seconds_onnx += std::chrono::duration<double>(t1 - t0).count();
      seconds_source += std::chrono::duration<double>(t2 - t1).count();
      for (std::int64_t r = 0; r < b; ++r) {
        int best_a = 0, best_s = 0;
        for (int c = 0; c < 10; ++c) {
          max_diff = std::max(max_diff, static_cast<double>(std::fabs(a.at<float>({r, c}) - s.at<float>({r, c}))));
          if (a.at<float>({r, c}) > a.at<float>({r, best_a})) best_a = c;
          if (s.at<float>({r, c}) > s.at<float>({r, best_s})) best_s = c;
        }
        const int label = test.labels[static_cast<std::size_t>(i + r)];
        right_onnx += best_a == label;
        right_source += best_s == label;
        same += best_a == best_s;
      }
    }
    const double acc_onnx = static_cast<double>(right_onnx) / static_cast<double>(n);
    const double acc_source = static_cast<double>(right_source) / static_cast<double>(n);
    std::printf("test images: %lld\n", static_cast<long long>(n));
    std::printf("imported from ONNX:  accuracy %.4f  (%.3f s)\n", acc_onnx, seconds_onnx);
    std::printf("source cnn_predict:  accuracy %.4f  (%.3f s)\n", acc_source, seconds_source);
    std::printf("same class for %lld of %lld images; largest score difference %.3g\n", static_cast<long long>(same),
                static_cast<long long>(n), max_diff);
    const bool ok = right_onnx == right_source && same == n && max_diff < 1e-3;
    if (!ok) std::printf("the imported model does not match its source\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
