// The CNN example (examples/cnn-training, issue 18) built small from its own
// models (cnn_check.yaml):
//
// - cnn_grad (f64, 8x8 images, channels 2 and 3): the forward against naive
//   loops written here (convolution, relu, 2x2 max pool, linear, mean
//   cross-entropy), and every gradient wfgen derives -- through col2im, the
//   pools' max routing and the GEMMs -- against central finite differences
//   (L(x + h) - L(x - h)) / 2h, h = 1e-6, within 1e-6 + 1e-5 |g|.
// - cnn_small_train (f32, Fashion-MNIST pooled to 14x14, channels 4 and 8,
//   Adam lr 0.01): 300 seeded steps of 32 over 2000 training images; the mean
//   loss of the last 30 steps must be under half that of the first 10, and the
//   classifier (cnn_small_predict, the trained weights copied in) must reach
//   0.65 on 1000 test images (chance is 0.1).
// - The example's spec with a wrong channel count: an error at its line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cnn_grad.hpp"
#include "cnn_small_predict.hpp"
#include "cnn_small_train.hpp"
#include "fashion_mnist.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::DType;
using wfgen::rt::Tensor;

namespace {

// Naive loops in double: conv 3x3 (stride 1, padding pad) + bias, relu, 2x2 max pool.
std::vector<double> conv_relu(const std::vector<double>& in, int c_in, int s, const double* W, const double* b, int c_out,
                              int pad) {
  const int so = s + 2 * pad - 2;
  std::vector<double> out(static_cast<std::size_t>(c_out * so * so));
  for (int o = 0; o < c_out; ++o)
    for (int y = 0; y < so; ++y)
      for (int x = 0; x < so; ++x) {
        double v = b[o];
        for (int c = 0; c < c_in; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int yy = y - pad + i, xx = x - pad + j;
              if (yy >= 0 && yy < s && xx >= 0 && xx < s) v += W[(o * c_in + c) * 9 + i * 3 + j] * in[(c * s + yy) * s + xx];
            }
        out[(o * so + y) * so + x] = v > 0 ? v : 0;
      }
  return out;
}

std::vector<double> pool2(const std::vector<double>& in, int c, int s) {
  const int so = s / 2;
  std::vector<double> out(static_cast<std::size_t>(c * so * so));
  for (int p = 0; p < c; ++p)
    for (int y = 0; y < so; ++y)
      for (int x = 0; x < so; ++x) {
        double m = -1e300;
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) m = std::max(m, in[(p * s + 2 * y + i) * s + 2 * x + j]);
        out[(p * so + y) * so + x] = m;
      }
  return out;
}

const double* param(const gc_cnn::cnn_grad& m, const char* name) { return m.parameter(name).data<double>(); }

// The mean cross-entropy of cnn_grad's net (side 8, channels 2 and 3, 3 classes), naively.
double reference_loss(const gc_cnn::cnn_grad& m, const Tensor& X, const Tensor& T) {
  const int batch = static_cast<int>(X.dim(0)), classes = 3;
  double total = 0;
  for (int n = 0; n < batch; ++n) {
    std::vector<double> img(X.data<double>() + n * 64, X.data<double>() + (n + 1) * 64);
    auto h = pool2(conv_relu(img, 1, 8, param(m, "classifier_0/conv2d_0.W"), param(m, "classifier_0/conv2d_0.b"), 2, 1), 2, 8);
    h = pool2(conv_relu(h, 2, 4, param(m, "classifier_0/conv2d_1.W"), param(m, "classifier_0/conv2d_1.b"), 3, 0), 3, 2);
    REQUIRE(h.size() == 3);  // 3 channels of 1x1
    const double *W = param(m, "classifier_0/linear_0.W"), *b = param(m, "classifier_0/linear_0.b");
    std::vector<double> z(classes);
    double mx = -1e300;
    for (int k = 0; k < classes; ++k) {
      z[k] = b[k];
      for (int f = 0; f < 3; ++f) z[k] += h[f] * W[f * classes + k];
      mx = std::max(mx, z[k]);
    }
    double s = 0;
    for (double v : z) s += std::exp(v - mx);
    for (int k = 0; k < classes; ++k) total -= T.data<double>()[n * classes + k] * (z[k] - mx - std::log(s));
  }
  return total / batch;
}

}  // namespace

TEST_CASE("the CNN's forward matches naive loops and its gradients match finite differences", "[cnn]") {
  gc_cnn::cnn_grad m;
  const std::int64_t batch = 4;
  Tensor X = Tensor::empty(DType::f64, {batch, 1, 8, 8}), T = Tensor::zeros(DType::f64, {batch, 3});
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> pixel(0.0, 1.0), bias(-0.2, 0.2);
  for (std::int64_t i = 0; i < X.numel(); ++i) X.data<double>()[i] = pixel(rng);
  for (std::int64_t n = 0; n < batch; ++n) T.data<double>()[n * 3 + n % 3] = 1.0;
  // Non-zero biases, so that their gradients and those of the relus are not all alike.
  for (const char* b : {"classifier_0/conv2d_0.b", "classifier_0/conv2d_1.b", "classifier_0/linear_0.b"}) {
    Tensor t = m.parameter(b);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = bias(rng);
  }
  m.set_input("X", X);
  m.set_input("T", T);
  auto loss = [&] { return m.run()[0].data<double>()[0]; };
  const double l0 = loss();
  CHECK(l0 == Approx(reference_loss(m, X, T)).epsilon(1e-12));

  m.zero_grad();
  m.backward();
  const auto grads = m.gradients();
  REQUIRE(grads.size() == 6);  // the parameters only (no grad_inputs)
  const double h = 1e-6;
  std::size_t checked = 0, nonzero = 0, bad = 0;
  for (const auto& [name, g] : grads) {
    Tensor x = m.parameter(name);
    REQUIRE(x.numel() == g.numel());
    double* xp = x.data<double>();
    const double* gp = g.data<double>();
    std::size_t nonzero_here = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double saved = xp[i];
      xp[i] = saved + h;
      const double up = loss();
      xp[i] = saved - h;
      const double down = loss();
      xp[i] = saved;
      const double numeric = (up - down) / (2 * h);
      ++checked;
      nonzero_here += gp[i] != 0;
      if (!(std::fabs(numeric - gp[i]) <= 1e-6 + 1e-5 * std::fabs(gp[i]))) {
        if (++bad <= 20) UNSCOPED_INFO(name << "[" << i << "]: finite difference " << numeric << ", backward " << gp[i]);
      }
    }
    INFO(name);
    // Every parameter tensor gets a gradient that is not all zero; the
    // convolutions' W are what this test is for.
    CHECK(nonzero_here > 0);
    nonzero += nonzero_here;
  }
  CHECK(bad == 0);
  CHECK(checked == 2 * 9 + 2 + 3 * 18 + 3 + 3 * 3 + 3);
  CHECK(nonzero * 4 > checked * 3);
}

TEST_CASE("the CNN trains: 300 Adam steps on 2000 Fashion-MNIST images pooled to 14x14", "[cnn]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  INFO("the test needs Debian's dataset-fashion-mnist in " << dir);
  const fashion_mnist::Dataset train = fashion_mnist::load(dir, "train", 2000), test = fashion_mnist::load(dir, "t10k", 1000);
  // 28x28 -> 14x14 by 2x2 means.
  auto pooled = [](const Tensor& images) {
    const std::int64_t n = images.dim(0);
    Tensor out = Tensor::empty(DType::f32, {n, 1, 14, 14});
    for (std::int64_t k = 0; k < n; ++k)
      for (int y = 0; y < 14; ++y)
        for (int x = 0; x < 14; ++x) {
          const float* p = images.data<float>() + k * 784 + (2 * y) * 28 + 2 * x;
          out.data<float>()[k * 196 + y * 14 + x] = 0.25f * (p[0] + p[1] + p[28] + p[29]);
        }
    return out;
  };
  const Tensor train_x = pooled(train.images), test_x = pooled(test.images);

  gc_cnn::cnn_small_train model;
  const std::int64_t batch = 32, steps = 300, n = 2000;
  Tensor X = Tensor::empty(DType::f32, {batch, 1, 14, 14}), T = Tensor::zeros(DType::f32, {batch, 10});
  std::vector<double> losses;
  for (std::int64_t s = 0; s < steps; ++s) {
    T.fill(0.0);
    for (std::int64_t r = 0; r < batch; ++r) {
      const std::int64_t k = (s * batch + r) % n;  // in order: the file is already shuffled
      std::memcpy(X.data<float>() + r * 196, train_x.data<float>() + k * 196, sizeof(float) * 196);
      T.data<float>()[r * 10 + train.labels[static_cast<std::size_t>(k)]] = 1.0f;
    }
    losses.push_back(model.forward(X, T)[0].data<float>()[0]);
    REQUIRE(std::isfinite(losses.back()));
    model.zero_grad();
    model.backward();
    model.step();
  }
  auto mean = [&](std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t i = from; i < to; ++i) s += losses[i];
    return s / static_cast<double>(to - from);
  };
  const double first = mean(0, 10), last = mean(losses.size() - 30, losses.size());
  INFO("mean loss of the first 10 steps " << first << ", of the last 30 " << last);
  CHECK(first > 1.5);  // about ln 10 = 2.3 at the start
  CHECK(last < 0.5 * first);

  gc_cnn::cnn_small_predict predict;
  for (const auto& [name, t] : predict.parameters()) t.copy_from(model.parameter("classifier_0/" + name));
  const Tensor scores = predict.forward(test_x)[0];
  std::int64_t correct = 0;
  for (std::int64_t r = 0; r < test_x.dim(0); ++r) {
    int best = 0;
    for (int c = 1; c < 10; ++c)
      if (scores.at<float>({r, c}) > scores.at<float>({r, best})) best = c;
    correct += best == test.labels[static_cast<std::size_t>(r)];
  }
  const double acc = static_cast<double>(correct) / static_cast<double>(test_x.dim(0));
  INFO("held-out accuracy " << acc);
  CHECK(acc > 0.65);
}

TEST_CASE("the example's spec with a wrong channel count: an error at the spec line", "[cnn]") {
  const fs::path example = fs::path(WFGEN_SOURCE_DIR) / "examples" / "cnn-training" / "cnn.yaml";
  std::ifstream in(example);
  std::stringstream text;
  text << in.rdbuf();
  std::string spec = text.str();
  const std::string line = "h = max_pool2d(relu(conv2d(h, c1, c2, 3, 3)), 2)";
  const auto at = spec.find(line);
  REQUIRE(at != std::string::npos);
  spec.replace(at, line.size(), "h = max_pool2d(relu(conv2d(h, 8, c2, 3, 3)), 2)");  // 8 input channels, 16 arrive
  int line_no = 1;
  for (std::size_t i = 0; i < at; ++i) line_no += spec[i] == '\n';
  const fs::path bad = fs::temp_directory_path() / ("wfgen_cnn_bad_channels_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(bad) << spec;
  for (const char* build : {"cnn_predict", "cnn_train"}) {
    std::ostringstream out, err;
    const int rc = wfgen::cli::disasm({{bad}, build, false}, {out, err, false});
    INFO(build << ":\n" << err.str());
    CHECK(rc == wfgen::cli::kBadInput);
    CHECK(out.str().empty());
    // conv2d's precondition (issue 20) catches it before its where line: at
    // the user's line, with the values, then the call chain.
    CHECK(err.str().rfind(bad.string() + ":" + std::to_string(line_no) +
                              ":27: error: conv2d: X must be N x in_channels x H x W (X.ndim = 4, X.size(1) = 16, in_channels = 8)\n",
                          0) == 0);
    // cnn_train reaches the classifier through training_loss: a note for that call.
    if (std::string(build) == "cnn_train") CHECK(err.str().find("note: in this call of model 'classifier'") != std::string::npos);
    CHECK(err.str().find("note: it fails here, in model 'conv2d' of the standard library") != std::string::npos);
  }
  fs::remove(bad);
}
