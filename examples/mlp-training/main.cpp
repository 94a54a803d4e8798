// Fashion-MNIST with a wfgen-generated MLP (784-256-10, relu), trained with
// cross-entropy and Adam.
//
// Everything the model computes runs in code wfgen generated from mlp.yaml:
// the forward pass, the loss, the backward pass wfgen derived from the
// nodes' backward expressions, and the Adam step. This file reads the data,
// shuffles it, copies batches in and reports.
//
// Data: Debian's dataset-fashion-mnist (../common/fashion_mnist.hpp) under
// /usr/share/datasets/fashion-mnist, or the folder given as argv[1].
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fashion_mnist.hpp"
#include "fashion_predict.hpp"
#include "fashion_train.hpp"
#include "wfgen/runtime.hpp"

namespace {

using wfgen::rt::DType;
using wfgen::rt::Tensor;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using fashion_mnist::Dataset;

// A progress bar on a terminal; only the finished line otherwise.
void progress(const char* what, std::int64_t done, std::int64_t total, double secs) {
  static const bool tty = isatty(STDOUT_FILENO) != 0;
  if (!tty && done != total) return;
  int width = 30, filled = static_cast<int>(width * done / std::max<std::int64_t>(total, 1));
  if (tty) std::printf("\r");
  std::printf("%-10s [%s%s] %6lld/%lld  %.1fs", what, std::string(static_cast<std::size_t>(filled), '#').c_str(),
              std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<long long>(done),
              static_cast<long long>(total), secs);
  std::fflush(stdout);
  if (done == total) std::printf("\n");
}

// Test accuracy of the prediction class (its weights copied from training).
double accuracy(fashion::fashion_predict& model, const Dataset& test, std::int64_t batch) {
  std::int64_t n = test.images.dim(0), correct = 0;
  for (std::int64_t i = 0; i < n; i += batch) {
    std::int64_t b = std::min(batch, n - i);
    const Tensor scores = model.forward(test.images.slice(0, i, i + b))[0];
    for (std::int64_t r = 0; r < b; ++r) {
      int best = 0;
      for (int c = 1; c < 10; ++c)
        if (scores.at<float>({r, c}) > scores.at<float>({r, best})) best = c;
      correct += best == test.labels[static_cast<std::size_t>(i + r)];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

// Options: [data folder] [--epochs N] [--batch N] [--lr X] [--seed N]
//          [--limit N] (training images used) [--test-limit N] (test images used)
//          [--min-accuracy X] (exit 1 below it)
struct Options {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  std::int64_t batch = 64;
  double lr = 0.001;
  unsigned seed = 1;
  std::int64_t limit = -1;
  std::int64_t test_limit = -1;
  double min_accuracy = 0.87;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--lr") o.lr = std::stod(value());
    else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--limit") o.limit = std::stoll(value());
    else if (a == "--test-limit") o.test_limit = std::stoll(value());
    else if (a == "--min-accuracy") o.min_accuracy = std::stod(value());
    else if (!a.empty() && a[0] == '-')
      throw std::runtime_error("unknown option " + a + " (options: --epochs --batch --lr --seed --limit --test-limit --min-accuracy)");
    else o.dir = a;
  }
  if (o.epochs < 1 || o.batch < 1 || !(o.lr > 0)) throw std::runtime_error("--epochs, --batch and --lr must be positive");
  return o;
}

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    auto t0 = Clock::now();
    Dataset train = fashion_mnist::load(opt.dir, "train", opt.limit), test = fashion_mnist::load(opt.dir, "t10k", opt.test_limit);
    const std::int64_t n = train.images.dim(0), pixels = train.images.dim(1);
    std::printf("Fashion-MNIST: %lld training and %lld test images from %s (%.2fs)\n\n", static_cast<long long>(n),
                static_cast<long long>(test.images.dim(0)), opt.dir.c_str(), seconds_since(t0));

    fashion::fashion_train model;
    fashion::fashion_predict predict;
    model.set_learning_rate(opt.lr);
    std::cout << model.summary() << "\n";
    std::printf("training: %d epochs, batch %lld, Adam lr %g, shuffled with seed %u\n\n", opt.epochs,
                static_cast<long long>(opt.batch), opt.lr, opt.seed);

    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(opt.seed);
    Tensor X = Tensor::empty(DType::f32, {opt.batch, pixels}), T = Tensor::zeros(DType::f32, {opt.batch, 10});
    double acc = 0, train_seconds = 0;
    for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      auto start = Clock::now();
      double loss_sum = 0;
      std::int64_t batches = 0;
      char label[32];
      std::snprintf(label, sizeof label, "epoch %d/%d", epoch, opt.epochs);
      for (std::int64_t i = 0; i < n; i += opt.batch) {
        const std::int64_t b = std::min(opt.batch, n - i);
        // The last batch is smaller: the batch dim is symbolic, so the same class runs it.
        Tensor xb = b == opt.batch ? X : X.slice(0, 0, b), tb = b == opt.batch ? T : T.slice(0, 0, b);
        T.fill(0.0);
        for (std::int64_t r = 0; r < b; ++r) {
          const std::int64_t k = order[static_cast<std::size_t>(i + r)];
          std::memcpy(X.data<float>() + r * pixels, train.images.data<float>() + k * pixels, sizeof(float) * pixels);
          T.at<float>({r, train.labels[static_cast<std::size_t>(k)]}) = 1.0f;
        }
        loss_sum += model.forward(xb, tb)[0].data<float>()[0];
        ++batches;
        model.zero_grad();
        model.backward();
        model.step();
        progress(label, i + b, n, seconds_since(start));
      }
      const double secs = seconds_since(start);
      train_seconds += secs;
      // The training class names the classifier's parameters "classifier_0.W1",
      // the prediction class "W1": matched by name (docs/runtime-api.md).
      predict.copy_parameters_from(model);
      acc = accuracy(predict, test, 1000);
      std::printf("           loss %.4f  test accuracy %.4f  %.2fs/epoch (%.2f ms/step)\n", loss_sum / static_cast<double>(batches),
                  acc, secs, 1000.0 * secs / static_cast<double>(batches));
    }
    std::printf("\ntest accuracy after %d epochs: %.4f (%.1fs of training)\n\n", opt.epochs, acc, train_seconds);

    // The trained parameters survive a save/load round trip into a fresh instance.
    std::string path = (std::filesystem::temp_directory_path() / "fashion_predict.wfparams").string();
    predict.save_parameters(path);
    fashion::fashion_predict reloaded;
    reloaded.load_parameters(path);
    std::printf("reloaded from %s: test accuracy %.4f (batch 64)\n\n", path.c_str(), accuracy(reloaded, test, 64));

    std::cout << model.disassemble() << "\n" << model.profile(20, 5);
    if (acc < opt.min_accuracy) std::printf("test accuracy %.4f is below %.2f\n", acc, opt.min_accuracy);
    return acc >= opt.min_accuracy ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
