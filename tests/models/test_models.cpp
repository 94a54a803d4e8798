// The example models of tests/models/models.yaml, generated at build time by
// wfgen and compiled into this test, checked against naive references
// written here (plain loops in double over the parameters read through
// parameter(name)). Also: parameter files, run-time input errors, memory
// planning of a deep chain, and bad model specs run through wfgen::cli::gen().
//
// Tolerance: every output element satisfies |got - ref| <= kAbs + kRel * |ref|
// (f32 kernels against a double reference).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "block_post.hpp"
#include "block_pre.hpp"
#include "chain.hpp"
#include "cnn.hpp"
#include "heads.hpp"
#include "mlp.hpp"
#include "res_predict.hpp"
#include "res_train.hpp"
#include "softmax_model.hpp"
#include "tests/listed_outputs.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/model_support.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::DType;
using wfgen::rt::Error;
using wfgen::rt::ErrorCode;
using wfgen::rt::Rng;
using wfgen::rt::Shape;
using wfgen::rt::Tensor;

namespace {

constexpr double kAbs = 1e-4;
constexpr double kRel = 1e-4;

// --- a tiny dense array in double for the references ----------------------------

struct Arr {
  Shape shape;
  std::vector<double> v;
  Arr() = default;
  explicit Arr(Shape s) : shape(std::move(s)) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    v.assign(static_cast<std::size_t>(n), 0.0);
  }
  std::int64_t dim(int k) const { return shape[static_cast<std::size_t>(k)]; }
  double& operator()(std::int64_t i) { return v[static_cast<std::size_t>(i)]; }
  double& operator()(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * dim(1) + j)]; }
  double& operator()(std::int64_t i, std::int64_t j, std::int64_t k) {
    return v[static_cast<std::size_t>((i * dim(1) + j) * dim(2) + k)];
  }
  double& operator()(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t l) {
    return v[static_cast<std::size_t>(((i * dim(1) + j) * dim(2) + k) * dim(3) + l)];
  }
};

Arr to_arr(const Tensor& t) {
  REQUIRE(t.dtype() == DType::f32);
  Tensor c = t.contiguous();
  Arr a(c.shape());
  const float* p = c.data<float>();
  for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] = p[i];
  return a;
}

Tensor random_tensor(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(DType::f32, shape);
  Rng rng(seed);
  wfgen::rt::fill_uniform(t, lo, hi, rng);
  return t;
}

// Gives every parameter of a model random values (so zero biases and unit
// gammas do not hide mistakes).
template <class M>
void randomise_parameters(M& m, std::uint64_t seed) {
  Rng rng(seed);
  for (auto& [name, t] : m.parameters()) wfgen::rt::fill_uniform(t, -0.5, 0.5, rng);
}

void require_close(const Tensor& got, const Arr& ref, double abs_tol = kAbs, double rel_tol = kRel) {
  REQUIRE(got.shape() == ref.shape);
  Arr g = to_arr(got);
  // The element that exceeds its tolerance the most (NaN counts as infinitely far).
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < ref.v.size(); ++i) {
    double err = std::abs(g.v[i] - ref.v[i]);
    double excess = std::isnan(err) ? 1e300 : err - (abs_tol + rel_tol * std::abs(ref.v[i]));
    if (excess > worst) {
      worst = excess;
      at = i;
    }
  }
  INFO("element " << at << ": got " << (ref.v.empty() ? 0 : g.v[at]) << ", expected " << (ref.v.empty() ? 0 : ref.v[at]));
  REQUIRE(worst <= 0);
}

// --- naive references -------------------------------------------------------------

// y[..., o] = sum_i x[..., i] W[i, o] + b[o], x seen as rows.
Arr linear(const Arr& x, const Arr& W, const Arr* b) {
  std::int64_t in = W.dim(0), out = W.dim(1), rows = static_cast<std::int64_t>(x.v.size()) / in;
  Shape s = x.shape;
  s.back() = out;
  Arr y(s);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = b ? b->v[static_cast<std::size_t>(o)] : 0.0;
      for (std::int64_t i = 0; i < in; ++i) acc += x.v[static_cast<std::size_t>(r * in + i)] * W.v[static_cast<std::size_t>(i * out + o)];
      y.v[static_cast<std::size_t>(r * out + o)] = acc;
    }
  return y;
}

template <class F>
Arr map(Arr a, F f) {
  for (auto& x : a.v) x = f(x);
  return a;
}

double relu(double x) { return x > 0 ? x : 0; }
double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// Row-wise (last axis) functions.
template <class F>
Arr rows(const Arr& x, F f) {
  Arr y(x.shape);
  std::int64_t n = x.shape.back(), r = static_cast<std::int64_t>(x.v.size()) / n;
  for (std::int64_t i = 0; i < r; ++i) f(&x.v[static_cast<std::size_t>(i * n)], &y.v[static_cast<std::size_t>(i * n)], n);
  return y;
}

Arr softmax(const Arr& x) {
  return rows(x, [](const double* in, double* out, std::int64_t n) {
    double m = *std::max_element(in, in + n), s = 0;
    for (std::int64_t k = 0; k < n; ++k) s += std::exp(in[k] - m);
    for (std::int64_t k = 0; k < n; ++k) out[k] = std::exp(in[k] - m) / s;
  });
}

Arr log_softmax(const Arr& x) {
  return rows(x, [](const double* in, double* out, std::int64_t n) {
    double m = *std::max_element(in, in + n), s = 0;
    for (std::int64_t k = 0; k < n; ++k) s += std::exp(in[k] - m);
    for (std::int64_t k = 0; k < n; ++k) out[k] = in[k] - m - std::log(s);
  });
}

Arr layernorm(const Arr& x, const Arr& gamma, const Arr& beta, double eps) {
  return rows(x, [&](const double* in, double* out, std::int64_t n) {
    double mu = 0, var = 0;
    for (std::int64_t k = 0; k < n; ++k) mu += in[k];
    mu /= static_cast<double>(n);
    for (std::int64_t k = 0; k < n; ++k) var += (in[k] - mu) * (in[k] - mu);
    var /= static_cast<double>(n);
    for (std::int64_t k = 0; k < n; ++k) out[k] = (in[k] - mu) / std::sqrt(var + eps) * gamma.v[static_cast<std::size_t>(k)] + beta.v[static_cast<std::size_t>(k)];
  });
}

Arr add(Arr a, const Arr& b) {
  for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i];
  return a;
}

// Y[n o y x] = b[o] + sum_{c,i,j} W[o, (c kh + i) kw + j] X[n c (y s - p + i) (x s - p + j)]
Arr conv2d(Arr& X, Arr& W, Arr& b, std::int64_t kh, std::int64_t kw, std::int64_t stride, std::int64_t pad) {
  std::int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), Wd = X.dim(3), O = W.dim(0);
  std::int64_t ho = (H + 2 * pad - kh) / stride + 1, wo = (Wd + 2 * pad - kw) / stride + 1;
  Arr Y({N, O, ho, wo});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t y = 0; y < ho; ++y)
        for (std::int64_t x = 0; x < wo; ++x) {
          double acc = b(o);
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                std::int64_t yy = y * stride - pad + i, xx = x * stride - pad + j;
                if (yy < 0 || yy >= H || xx < 0 || xx >= Wd) continue;
                acc += W(o, (c * kh + i) * kw + j) * X(n, c, yy, xx);
              }
          Y(n, o, y, x) = acc;
        }
  return Y;
}

Arr max_pool2d(Arr& X, std::int64_t k) {
  std::int64_t N = X.dim(0), C = X.dim(1), ho = X.dim(2) / k, wo = X.dim(3) / k;
  Arr Y({N, C, ho, wo});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t y = 0; y < ho; ++y)
        for (std::int64_t x = 0; x < wo; ++x) {
          double m = -1e300;
          for (std::int64_t i = 0; i < k; ++i)
            for (std::int64_t j = 0; j < k; ++j) m = std::max(m, X(n, c, y * k + i, x * k + j));
          Y(n, c, y, x) = m;
        }
  return Y;
}

// Self-attention over X[B S D] with `heads` heads, as the textbook writes it:
// split Q K V into heads, softmax(Q K^T / sqrt(dh)) V, concatenate, project.
template <class M>
Arr attention(const Arr& X, const M& m, const std::string& p, std::int64_t heads) {
  auto P = [&](const std::string& n) { return to_arr(m.parameter(p + n)); };
  Arr Wq = P("Wq"), bq = P("bq"), Wk = P("Wk"), bk = P("bk"), Wv = P("Wv"), bv = P("bv"), Wo = P("Wo"), bo = P("bo");
  Arr q = linear(X, Wq, &bq), k = linear(X, Wk, &bk), v = linear(X, Wv, &bv);
  std::int64_t B = X.dim(0), S = X.dim(1), D = X.dim(2), dh = D / heads;
  Arr concat({B, S, D});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < S; ++i) {
        std::vector<double> w(static_cast<std::size_t>(S));
        double mx = -1e300, sum = 0;
        for (std::int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (std::int64_t d = 0; d < dh; ++d) s += q(b, i, h * dh + d) * k(b, j, h * dh + d);
          w[static_cast<std::size_t>(j)] = s / std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, w[static_cast<std::size_t>(j)]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (std::int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < S; ++j) acc += w[static_cast<std::size_t>(j)] / sum * v(b, j, h * dh + d);
          concat(b, i, h * dh + d) = acc;
        }
      }
  return linear(concat, Wo, &bo);
}

template <class M>
Arr transformer_block(const Arr& X, const M& m, std::int64_t heads, bool pre_norm) {
  const std::string p = "transformer_block_0/";
  auto P = [&](const std::string& n) { return to_arr(m.parameter(p + n)); };
  Arr g0 = P("layernorm_0.gamma"), b0 = P("layernorm_0.beta"), g1 = P("layernorm_1.gamma"), b1 = P("layernorm_1.beta");
  Arr W1 = P("linear_0.W"), c1 = P("linear_0.b"), W2 = P("linear_1.W"), c2 = P("linear_1.b");
  auto mlp = [&](const Arr& x) { return linear(map(linear(x, W1, &c1), gelu), W2, &c2); };
  const std::string a = p + "multi_head_attention_0.";
  if (pre_norm) {
    Arr h = add(X, attention(layernorm(X, g0, b0, 1e-5), m, a, heads));
    return add(h, mlp(layernorm(h, g1, b1, 1e-5)));
  }
  Arr h = layernorm(add(X, attention(X, m, a, heads)), g0, b0, 1e-5);
  return layernorm(add(h, mlp(h)), g1, b1, 1e-5);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("wfgen_test_models_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

template <class F>
std::string error_of(F f, ErrorCode expected) {
  try {
    f();
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == expected);
    return e.what();
  }
  FAIL("no error was raised");
  return {};
}

}  // namespace

// --- the example models --------------------------------------------------------------

TEST_CASE("the reference's Softmax-Model matches exp(x - mean) / sum, at several run-time shapes") {
  wfgen_models::softmax_model m;
  for (auto [batch, n] : {std::pair<std::int64_t, std::int64_t>{3, 10}, {5, 4}, {1, 10}}) {
    Tensor X = random_tensor({batch, n}, 11 + static_cast<std::uint64_t>(batch), -3, 3);
    Arr x = to_arr(X), ref(x.shape);
    for (std::int64_t i = 0; i < batch; ++i) {
      double mean = 0, z = 0;
      for (std::int64_t k = 0; k < n; ++k) mean += x(i, k) / static_cast<double>(n);
      for (std::int64_t k = 0; k < n; ++k) z += std::exp(x(i, k) - mean);
      for (std::int64_t k = 0; k < n; ++k) ref(i, k) = std::exp(x(i, k) - mean) / z;
    }
    require_close(m.forward(X)[0], ref);
  }
}

TEST_CASE("MLP (linear, relu, linear) and its cross-entropy loss, at two batch sizes") {
  wfgen_models::mlp m;
  randomise_parameters(m, 21);
  Arr W0 = to_arr(m.parameter("linear_0.W")), b0 = to_arr(m.parameter("linear_0.b"));
  Arr W1 = to_arr(m.parameter("linear_1.W")), b1 = to_arr(m.parameter("linear_1.b"));
  for (std::int64_t batch : {4, 7}) {
    Tensor X = random_tensor({batch, 20}, 30 + static_cast<std::uint64_t>(batch));
    // Targets: one-hot rows, and for the odd batch probability rows.
    Arr t({batch, 5});
    for (std::int64_t i = 0; i < batch; ++i) {
      if (batch % 2 == 0) {
        t(i, (i * 3) % 5) = 1;
      } else {
        double s = 0;
        for (std::int64_t k = 0; k < 5; ++k) s += (t(i, k) = 1.0 + static_cast<double>((i + k) % 3));
        for (std::int64_t k = 0; k < 5; ++k) t(i, k) /= s;
      }
    }
    std::vector<float> tv(t.v.begin(), t.v.end());
    Tensor T = Tensor::from_data<float>({batch, 5}, tv);
    auto out = m.forward(X, T);
    REQUIRE(out.size() == 2);
    Arr logits = linear(map(linear(to_arr(X), W0, &b0), relu), W1, &b1);
    require_close(out[0], logits);
    Arr lp = log_softmax(logits), loss({1});
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t k = 0; k < 5; ++k) loss(0) -= t(i, k) * lp(i, k) / static_cast<double>(batch);
    require_close(out[1], loss);
  }
}

TEST_CASE("softmax, log_softmax, dropout, layernorm and mse of the standard library") {
  wfgen_models::heads m;
  randomise_parameters(m, 41);
  Arr g = to_arr(m.parameter("layernorm_0.gamma")), b = to_arr(m.parameter("layernorm_0.beta"));
  for (std::int64_t batch : {2, 6}) {
    // Large values: the max subtraction must keep exp finite.
    Tensor X = random_tensor({batch, 7}, 50 + static_cast<std::uint64_t>(batch), -80, 80);
    Tensor T = random_tensor({batch, 7}, 60 + static_cast<std::uint64_t>(batch), -80, 80);
    auto out = m.forward(X, T);
    REQUIRE(out.size() == 4);
    Arr x = to_arr(X), t = to_arr(T);
    require_close(out[0], softmax(x));
    require_close(out[1], log_softmax(x), 1e-4, 1e-5);
    require_close(out[2], layernorm(x, g, b, 1e-3));
    Arr e({1});
    for (std::size_t i = 0; i < x.v.size(); ++i) e(0) += (x.v[i] - t.v[i]) * (x.v[i] - t.v[i]) / static_cast<double>(x.v.size());
    require_close(out[3], e);
  }
}

TEST_CASE("a small CNN: conv2d (padding 1) + relu + max_pool2d + strided conv2d + linear, at two batch sizes") {
  wfgen_models::cnn m;
  randomise_parameters(m, 71);
  Arr W0 = to_arr(m.parameter("conv2d_0.W")), c0 = to_arr(m.parameter("conv2d_0.b"));
  Arr W1 = to_arr(m.parameter("conv2d_1.W")), c1 = to_arr(m.parameter("conv2d_1.b"));
  Arr L = to_arr(m.parameter("linear_0.W")), lb = to_arr(m.parameter("linear_0.b"));
  for (std::int64_t batch : {3, 1}) {
    Tensor X = random_tensor({batch, 2, 8, 8}, 80 + static_cast<std::uint64_t>(batch));
    Arr x = to_arr(X);
    Arr h = map(conv2d(x, W0, c0, 3, 3, 1, 1), relu);
    h = max_pool2d(h, 2);
    h = map(conv2d(h, W1, c1, 3, 3, 2, 1), relu);
    REQUIRE(h.shape == Shape{batch, 6, 2, 2});
    h.shape = {batch, 24};
    require_close(m.forward(X)[0], linear(h, L, &lb));
  }
}

TEST_CASE("transformer blocks (pre-norm and post-norm), at two (batch, seq) shapes") {
  wfgen_models::block_pre pre;
  wfgen_models::block_post post;
  randomise_parameters(pre, 91);
  randomise_parameters(post, 92);
  for (auto [batch, seq] : {std::pair<std::int64_t, std::int64_t>{2, 3}, {1, 5}}) {
    Tensor X = random_tensor({batch, seq, 8}, 100 + static_cast<std::uint64_t>(seq));
    Arr x = to_arr(X);
    require_close(pre.forward(X)[0], transformer_block(x, pre, 2, true), 2e-4, 2e-4);
    require_close(post.forward(X)[0], transformer_block(x, post, 2, false), 2e-4, 2e-4);
  }
}

TEST_CASE("a chain of 64 relus plans O(1) memory-pool slots") {
  wfgen_models::chain m;
  std::string s = m.summary();
  INFO(s);
  std::smatch match;
  REQUIRE(std::regex_search(s, match, std::regex("memory pool: (\\d+) slots")));
  CHECK(std::stoi(match[1]) <= 2);
  CHECK(s.find("instructions: 64") != std::string::npos);
  for (std::int64_t batch : {2, 9}) {
    Tensor X = random_tensor({batch, 13}, 120 + static_cast<std::uint64_t>(batch));
    require_close(m.forward(X)[0], map(to_arr(X), relu), 0, 0);
  }
}

// --- generated API: printing, inputs, parameter files --------------------------------------

TEST_CASE("Softmax-Model: summary, disassembly and profile") {
  wfgen_models::softmax_model m;
  Tensor X = random_tensor({10, 10}, 7);
  m.set_input("X", X);
  std::string sum = m.summary(), dis = m.disassemble(), prof = m.profile(100, 3);
  CHECK(sum.find("memory pool:") != std::string::npos);
  CHECK(dis.find("Instructions") != std::string::npos);
  CHECK(dis.find("<WfInst[op=") != std::string::npos);
  CHECK(prof.find("Total") != std::string::npos);
  // `WFGEN_MODELS_PRINT=1 test_models "Softmax-Model: summary*"` prints them (docs/models.md).
  if (std::getenv("WFGEN_MODELS_PRINT")) std::cout << sum << "\n" << dis << "\n" << prof << "\n";
}

// Train, then deploy: res_train (ResClassifier inside a loss model: its
// parameters are "ResClassifier_0.scale", "ResClassifier_0/linear_0.W", ...)
// trained for some Adam steps, its file loaded into res_predict (the model
// alone: "scale", "linear_0.W", ...), and copied in memory into another.
TEST_CASE("train, then deploy: the inference build takes the training build's parameters by name") {
  fs::path dir = temp_dir("transfer");
  wfgen_models::res_train train;
  wfgen_models::res_predict predict, copied;
  auto in_training = [](const std::string& name) {
    return "ResClassifier_0" + std::string(name.find('.') == std::string::npos ? "." : "/") + name;
  };
  std::set<std::string> predict_names, train_names;
  for (auto& [name, t] : predict.parameters()) predict_names.insert(in_training(name));
  for (auto& [name, t] : train.parameters()) train_names.insert(name);
  CHECK(predict_names == train_names);
  CHECK(predict_names.count("ResClassifier_0.scale"));
  CHECK(predict_names.count("ResClassifier_0/layernorm_0.gamma"));

  Tensor X = random_tensor({8, 6}, 21), T = Tensor::zeros(DType::f32, {8, 3});
  for (std::int64_t r = 0; r < 8; ++r) T.at<float>({r, r % 3}) = 1.0f;
  const float first = train.forward(X, T)[0].item<float>();
  for (int step = 0; step < 30; ++step) {
    train.forward(X, T);
    train.zero_grad();
    train.backward();
    train.step();
  }
  const float trained = train.forward(X, T)[0].item<float>();
  CHECK(trained < 0.8f * first);

  const std::string file = (dir / "res_train.wfparams").string();
  train.save_parameters(file);
  predict.load_parameters(file);
  copied.copy_parameters_from(train);
  for (auto& [name, t] : predict.parameters()) {
    INFO(name);
    require_close(t, to_arr(train.parameter(in_training(name))), 0, 0);
    require_close(copied.parameter(name), to_arr(t), 0, 0);
  }

  // The deployed logits against a naive reference on the trained
  // parameters, and their cross-entropy against the training build's loss.
  auto param = [&](const char* name) { return to_arr(predict.parameter(name)); };
  const Arr x = to_arr(X), scale = param("scale"), W0 = param("linear_0.W"), b0 = param("linear_0.b");
  Arr h = map(linear(x, W0, &b0), relu);
  for (std::size_t i = 0; i < h.v.size(); ++i) h.v[i] = x.v[i] + h.v[i] * scale.v[i % 6];
  const Arr W1 = param("linear_1.W"), b1 = param("linear_1.b");
  const Arr logits = linear(layernorm(h, param("layernorm_0.gamma"), param("layernorm_0.beta"), 1e-5), W1, &b1);
  require_close(predict.forward(X)[0], logits);
  require_close(copied.forward(X)[0], logits);
  const Arr lsm = log_softmax(logits);
  Arr loss({1});
  for (std::int64_t r = 0; r < 8; ++r) loss.v[0] -= lsm.v[static_cast<std::size_t>(r * 3 + r % 3)] / 8.0;
  require_close(train.forward(X, T)[0], loss);

  // The other way round, to train on from a deployed model: the inference
  // build's file into a fresh training build.
  const std::string predict_file = (dir / "res_predict.wfparams").string();
  predict.save_parameters(predict_file);
  wfgen_models::res_train fresh;
  fresh.load_parameters(predict_file);
  for (auto& [name, t] : predict.parameters()) require_close(fresh.parameter(in_training(name)), to_arr(t), 0, 0);
  require_close(fresh.forward(X, T)[0], loss);
  // A scope that is not there: the names say why, and nothing changes.
  wfgen_models::res_predict untouched;
  const Arr before = to_arr(untouched.parameter("scale"));
  std::string e = error_of([&] { untouched.load_parameters(file, "Classifier_0"); }, ErrorCode::BadParameterFile);
  CHECK(e.find("are not in the file under the scope 'Classifier_0'") != std::string::npos);
  require_close(untouched.parameter("scale"), before, 0, 0);
  // A different model's parameters in memory: InvalidArgument, naming them.
  wfgen_models::mlp mlp;
  e = error_of([&] { predict.copy_parameters_from(mlp); }, ErrorCode::InvalidArgument);
  CHECK(e.find("copy_parameters_from: the model's parameters 'scale', 'layernorm_0.gamma'") != std::string::npos);
  fs::remove_all(dir);
}

// docs/models.md shows the lines of this test (docs.snippets compares them).
TEST_CASE("models.md: a generated class at two batch sizes") {
  namespace my_models = wfgen_models;
  using namespace wfgen::rt;
  my_models::mlp m;                                  // parameters initialised from the build's seed
  Tensor X = Tensor::empty(DType::f32, {4, 20});
  Tensor T = Tensor::zeros(DType::f32, {4, 5});
  auto [logits, loss] = m.forward(X, T);             // rt::Results<2>: the model's own, not copied, written again by its next call
  m.forward(Tensor::empty(DType::f32, {9, 20}), Tensor::zeros(DType::f32, {9, 5}));  // another batch size
  CHECK(logits.shape() == Shape({4, 5}));
  CHECK(loss.shape() == Shape({1}));
  CHECK(m.forward(X, T)[0].shape() == Shape({4, 5}));
}

TEST_CASE("run-time input errors: wrong shape, rank, dtype, inconsistent symbols") {
  wfgen_models::mlp m;
  Tensor T = random_tensor({3, 5}, 1);
  std::string e = error_of([&] { m.forward(random_tensor({3, 19}, 1), T); }, ErrorCode::ShapeMismatch);
  CHECK(e.find("X") != std::string::npos);
  CHECK(e.find("19") != std::string::npos);
  error_of([&] { m.forward(random_tensor({20}, 1), T); }, ErrorCode::RankMismatch);
  error_of([&] { m.forward(Tensor::zeros(DType::f64, {3, 20}), T); }, ErrorCode::DTypeMismatch);
  e = error_of([&] { m.forward(random_tensor({3, 20}, 1), random_tensor({4, 5}, 1)); }, ErrorCode::ShapeMismatch);
  CHECK(e.find("batch") != std::string::npos);
  // The model still works afterwards.
  CHECK(m.forward(random_tensor({3, 20}, 1), T)[0].shape() == Shape{3, 5});
}

TEST_CASE("parameter files: round trip, and every corruption is a clear error that changes nothing") {
  fs::path dir = temp_dir("params");
  wfgen_models::mlp a, b;
  randomise_parameters(a, 5);
  const std::string file = (dir / "mlp.wfp").string();
  a.save_parameters(file);
  b.load_parameters(file);
  for (auto& [name, t] : a.parameters()) require_close(b.parameter(name), to_arr(t), 0, 0);
  Tensor X = random_tensor({2, 20}, 3), T = random_tensor({2, 5}, 4);
  require_close(b.forward(X, T)[0], to_arr(a.forward(X, T)[0]), 0, 0);

  const std::string good = read_file(file);
  wfgen_models::mlp c;
  std::map<std::string, Arr> before;
  for (auto& [name, t] : c.parameters()) before[name] = to_arr(t);
  auto expect_bad = [&](const std::string& bytes, const std::string& message) {
    const std::string path = (dir / "bad.wfp").string();
    write_file(path, bytes);
    std::string e = error_of([&] { c.load_parameters(path); }, ErrorCode::BadParameterFile);
    INFO(e);
    CHECK(e.find(message) != std::string::npos);
    for (auto& [name, t] : c.parameters()) require_close(t, before[name], 0, 0);
  };
  SECTION("truncated") {
    expect_bad(good.substr(0, good.size() / 2), "truncated");
    expect_bad(good.substr(0, good.size() - 8), "truncated");
    expect_bad(good.substr(0, 6), "truncated");
  }
  SECTION("wrong magic") {
    std::string s = good;
    s[0] = 'X';
    expect_bad(s, "wrong magic");
  }
  SECTION("wrong version") {
    std::string s = good;
    s[8] = 2;
    expect_bad(s, "version 2 is not supported");
  }
  SECTION("wrong shape") {
    std::vector<std::string> names;
    std::vector<Tensor> tensors;
    for (auto& [name, t] : a.parameters()) {
      names.push_back(name);
      tensors.push_back(name == "linear_1.W" ? Tensor::zeros(DType::f32, {16, 6}) : t);
    }
    wfgen::rt::save_parameters(file + ".shape", names, tensors);
    expect_bad(read_file(file + ".shape"), "parameter 'linear_1.W' has shape (16 6), expected (16 5)");
  }
  SECTION("another model's file") {
    wfgen_models::cnn other;
    other.save_parameters(file + ".cnn");
    expect_bad(read_file(file + ".cnn"), "the model's parameters 'linear_1.W', 'linear_1.b' are not in the file; it holds 6 parameters: 'conv2d_0.W'");
  }
  SECTION("bad checksum") {
    std::string s = good;
    s[s.size() - 20] = static_cast<char>(s[s.size() - 20] ^ 0x40);
    expect_bad(s, "checksum does not match");
  }
  SECTION("missing file") {
    std::string e = error_of([&] { c.load_parameters((dir / "none.wfp").string()); }, ErrorCode::BadParameterFile);
    CHECK(e.find("cannot open") != std::string::npos);
  }
  fs::remove_all(dir);
}

// --- bad model specs -------------------------------------------------------------------

// Each file in bad/ starts with `# expect: LINE:COL: error: MESSAGE`; gen must
// print FILE:LINE:COL: error: MESSAGE, fail, and write nothing.
TEST_CASE("bad model specs report file:line:col and write nothing") {
  fs::path dir = temp_dir("bad");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(WFGEN_TEST_DATA) / "bad"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 10);
  std::set<std::string> seen;
  for (const auto& f : files) {
    std::string text = read_file(f);
    const std::string tag = "# expect: ";
    REQUIRE(text.rfind(tag, 0) == 0);
    std::string expect = text.substr(tag.size(), text.find('\n') - tag.size());
    fs::path out = dir / f.stem();
    std::ostringstream o, err;
    wfgen::cli::GenOptions opts;
    opts.specs = {f};
    opts.output = out;
    int rc = wfgen::cli::gen(opts, {o, err, false});
    INFO(f.filename().string() << "\n" << err.str());
    CHECK(rc != wfgen::cli::kOk);
    CHECK(rc != wfgen::cli::kInternal);
    CHECK(err.str().rfind(f.string() + ":" + expect + "\n", 0) == 0);
    CHECK((!fs::exists(out) || fs::is_empty(out)));
    // `wfgen check` reports as many errors, each once (a model's error met
    // again through a call is not a second error; called_model_shape.yaml).
    std::ostringstream check_out, check_err;
    wfgen::cli::CheckOptions check_opts;
    check_opts.specs = {f};
    CHECK(wfgen::cli::check(check_opts, {check_out, check_err, false}) == rc);
    INFO("wfgen check:\n" << check_err.str());
    auto errors = [](const std::string& text) {
      std::size_t n = 0;
      for (std::size_t at = text.find(": error: "); at != std::string::npos; at = text.find(": error: ", at + 1)) ++n;
      return n;
    };
    CHECK(errors(check_err.str()) == errors(err.str()));
    seen.insert(f.stem().string());
  }
  for (const char* kind : {"unknown_node", "wrong_argument_count", "shape_mismatch", "recursion", "cpp_keyword_build",
                           "cpp_keyword_model", "unbound_symbol_body", "unbound_symbol_param"}) {
    CHECK(seen.count(kind));
  }
  fs::remove_all(dir);
}

TEST_CASE("a shape error in a body is a Shape-Error report") {
  std::ostringstream o, err;
  wfgen::cli::GenOptions opts;
  opts.specs = {fs::path(WFGEN_TEST_DATA) / "bad" / "shape_mismatch.yaml"};
  opts.output = temp_dir("shape") / "out";
  wfgen::cli::gen(opts, {o, err, false});
  CHECK(err.str().find("Shape-Error") != std::string::npos);
  CHECK(err.str().find("Couldn't identify j") != std::string::npos);
  fs::remove_all(opts.output.parent_path());
}

// The tensors a model returns are checked against the outputs of its where
// line: count, rank and every dim, with the symbols the inputs and arguments
// bind (more cases, each with its message, in tests/spec/bad/model_output_*).
TEST_CASE("a model's results are checked against its where line") {
  fs::path dir = temp_dir("outputs");
  auto gen = [&](const std::string& name, const std::string& yaml, std::string& err_text) {
    fs::path spec = dir / (name + ".yaml");
    std::ofstream(spec) << yaml;
    std::ostringstream o, err;
    wfgen::cli::GenOptions opts;
    opts.specs = {spec};
    opts.output = dir / (name + "_out");
    int rc = wfgen::cli::gen(opts, {o, err, false});
    err_text = err.str();
    return rc;
  };
  std::string err;
  SECTION("results that fit: where bindings, several outputs, nested models, dims left to the body") {
    const char* yaml = R"(models:
  - name: Flatten
    args: {c: {type: int}, h: {type: int}}
    where: "X[batch c h] -> Y[batch k] where k = c * h"
    call: |
      return X.reshape(-1, c * h)
  - name: Pair
    where: "X[batch n] -> Y[batch n] Z[n batch]"
    call: |
      return relu(X), X.T
  - name: Inner
    where: "X[~ k] -> Y[~ k]"
    call: |
      return relu(X)
  - name: Outer
    where: "X[batch s 3] -> Y[batch s 3]"
    call: |
      return Inner(X) + Inner(X * 2.0)
  - name: Late
    where: "X[batch n] -> Y[batch m]"
    call: |
      return sum(X, axis=1, keepdims=true)
builds:
  - {name: f, model: Flatten, args: {c: 3, h: 4}, dtype: f32, devices: [cpu]}
  - {name: p, model: Pair, dtype: f32, devices: [cpu]}
  - {name: o, model: Outer, dtype: f32, devices: [cpu]}
  - {name: l, model: Late, dtype: f32, devices: [cpu]}
)";
    INFO(err);
    CHECK(gen("good", yaml, err) == wfgen::cli::kOk);
  }
  SECTION("a wrong dim of a nested model: a Shape-Error report at its return line, notes at the where line and the call") {
    const char* yaml = R"(models:
  - name: Inner
    where: "X[~ k] -> Y[~ k]"
    call: |
      return sum(X, axis=-1, keepdims=true)
  - name: Outer
    where: "X[batch 3] -> Y[batch 3]"
    call: |
      return Inner(relu(X))
builds:
  - {name: m, model: Outer, dtype: f32, devices: [cpu]}
)";
    CHECK(gen("nested", yaml, err) == wfgen::cli::kBadInput);
    INFO(err);
    CHECK(err.find("nested.yaml:5:7: error: model 'Inner' returns Y with shape (batch 1), but its where line declares "
                   "Y[~ k] = (batch 3)") != std::string::npos);
    CHECK(err.find("[wfgen] Shape-Error") != std::string::npos);
    CHECK(err.find("The operation was : <Model: Inner (X[~ k] -> Y[~ k])>") != std::string::npos);
    CHECK(err.find("Predicted Output(s) : ((batch 3))") != std::string::npos);
    CHECK(err.find("Returned Output(s)  : ((batch 1))") != std::string::npos);
    CHECK(err.find("1. Couldn't identify k of the 1st output Y[~ k]: k is determined as 3") != std::string::npos);
    CHECK(err.find("nested.yaml:3:23: note: the where line of model 'Inner' declares Y[~ k] here") != std::string::npos);
    CHECK(err.find("nested.yaml:9:14: note: in this call of model 'Inner'") != std::string::npos);
    CHECK(err.find("1 error generated") != std::string::npos);
    CHECK(!fs::exists(dir / "nested_out"));
  }
  fs::remove_all(dir);
}

TEST_CASE("the generated files are the ones tests/models/CMakeLists.txt lists") {
  std::set<std::string> present;
  for (const char* f : {WFGEN_MODELS_FILES}) present.insert(f);
  CHECK(wfgen::test::listed_outputs({fs::path(WFGEN_TEST_DATA) / "models.yaml"}, WFGEN_MODELS_GEN, "wfgen_models") == present);
}
