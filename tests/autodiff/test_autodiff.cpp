// Autodiff: the pullbacks wfgen derives, checked against finite differences,
// and training steps checked against naive references written here.
//
// grad_check.yaml: every differentiable standard node at ranks 1..4 (with
// broadcasting), matmul (blas and cpu, batched, transposed, sliced), views,
// the standard models and a transformer block, all in f64; and the
// recurrent layers of an imported ONNX graph (onnx_recurrent_check.yaml). For every element
// x of every grad input and parameter, the central difference
//   (L(x + h) - L(x - h)) / 2h,  h = 1e-6
// must match the gradient within 1e-6 + 1e-5 |g| (f64: the difference's
// error is O(h^2) + O(eps / h) ~ 1e-10).
//
// training.yaml: the main job's MLP (784-... shapes shrunk) in f32, trained a
// few steps with SGD (momentum, weight decay, nesterov), Adam and AdamW by
// the generated code and by the loops below (in double from the same f32
// initial weights): the weights must agree within 1e-5.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention.hpp"
#include "causal_attention.hpp"
#include "conv_pool.hpp"
#include "embedding.hpp"
#include "imported_ops.hpp"
#include "joins.hpp"
#include "linalg.hpp"
#include "linalg_cpu.hpp"
#include "onnx_recurrent_grad.hpp"
#include "ops_r1.hpp"
#include "ops_r2.hpp"
#include "ops_r3.hpp"
#include "ops_r4.hpp"
#include "std_models.hpp"
#include "tiny_mlp.hpp"
#include "train_adam.hpp"
#include "train_adamw.hpp"
#include "train_sgd.hpp"
#include "views.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::DType;
using wfgen::rt::Shape;
using wfgen::rt::Tensor;

namespace {

// Input shapes from the class's summary() ("    name double (3 4)").
std::vector<std::pair<std::string, Shape>> input_shapes(const std::string& summary) {
  std::vector<std::pair<std::string, Shape>> out;
  std::istringstream in(summary);
  bool inputs = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "  inputs:") {
      inputs = true;
      continue;
    }
    if (line.rfind("    ", 0) != 0) {
      inputs = false;
      continue;
    }
    if (!inputs) continue;
    std::istringstream l(line);
    std::string name, dtype;
    l >> name >> dtype;
    Shape s;
    std::string dims = line.substr(line.find('(') + 1);
    dims = dims.substr(0, dims.find(')'));
    std::istringstream d(dims);
    for (std::string v; d >> v;) s.push_back(std::isdigit(static_cast<unsigned char>(v[0])) ? std::stoll(v) : 4);  // run-time dims: 4
    out.emplace_back(name, s);
  }
  return out;
}

// Fills an input as its name says: p_ positive, k_ 0/1, c any, x_ +-(0.5..1.5).
Tensor make_input(const std::string& name, const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::f64, shape);
  std::uniform_real_distribution<double> mag(0.5, 1.5), any(-1.0, 1.0);
  std::bernoulli_distribution coin(0.5);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (name.rfind("p_", 0) == 0) p[i] = mag(rng);
    else if (name.rfind("k_", 0) == 0) p[i] = coin(rng) ? 1.0 : 0.0;
    else if (name.rfind("c", 0) == 0) p[i] = any(rng);
    else p[i] = (coin(rng) ? 1.0 : -1.0) * mag(rng);
  }
  return t;
}

struct Mismatch {
  std::string what;
  double numeric, analytic;
};

// Central differences of the model's scalar loss against its gradients.
template <class Model>
void check_gradients(const char* build) {
  INFO("build " << build);
  Model m;
  std::mt19937_64 rng(42);
  for (const auto& [name, shape] : input_shapes(m.summary())) m.set_input(name, make_input(name, shape, rng));
  auto loss = [&] { return m.run()[0].template data<double>()[0]; };
  const double l0 = loss();
  REQUIRE(std::isfinite(l0));
  m.zero_grad();
  m.backward();
  const auto grads = m.gradients();
  REQUIRE(!grads.empty());
  std::vector<Mismatch> bad;
  std::size_t checked = 0, nonzero = 0;
  const double h = 1e-6;
  for (const auto& [name, g] : grads) {
    bool is_input = false;
    for (const auto& in : m.input_names()) is_input = is_input || in == name;
    Tensor x = is_input ? m.get_input(name) : m.parameter(name);
    REQUIRE(x.numel() == g.numel());
    double* xp = x.template data<double>();
    const double* gp = g.template data<double>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double saved = xp[i];
      xp[i] = saved + h;
      const double up = loss();
      xp[i] = saved - h;
      const double down = loss();
      xp[i] = saved;
      const double numeric = (up - down) / (2 * h);
      ++checked;
      if (gp[i] != 0) ++nonzero;
      if (!(std::fabs(numeric - gp[i]) <= 1e-6 + 1e-5 * std::fabs(gp[i]))) {
        bad.push_back({name + "[" + std::to_string(i) + "]", numeric, gp[i]});
      }
    }
  }
  for (std::size_t k = 0; k < bad.size() && k < 20; ++k)
    UNSCOPED_INFO(bad[k].what << ": finite difference " << bad[k].numeric << ", backward " << bad[k].analytic);
  CHECK(bad.empty());
  CHECK(checked > 0);
  CHECK(nonzero * 2 > checked);  // most gradients are not zero: the check is not vacuous
}

}  // namespace

TEST_CASE("element-wise nodes and reductions, rank 1") { check_gradients<gc::ops_r1>("ops_r1"); }
TEST_CASE("element-wise nodes and reductions, rank 2") { check_gradients<gc::ops_r2>("ops_r2"); }
TEST_CASE("element-wise nodes and reductions, rank 3") { check_gradients<gc::ops_r3>("ops_r3"); }
TEST_CASE("element-wise nodes and reductions, rank 4") { check_gradients<gc::ops_r4>("ops_r4"); }
TEST_CASE("matmul through BLAS: batched, broadcast, transposed, sliced") { check_gradients<gc::linalg>("linalg"); }
TEST_CASE("matmul with the std-only GEMM") { check_gradients<gc::linalg_cpu>("linalg_cpu"); }
TEST_CASE("views: slices, indexing, transpose, reshape, permute, broadcasts") { check_gradients<gc::views>("views"); }
TEST_CASE("concat along any axis, chained, and narrow views") { check_gradients<gc::joins>("joins"); }
TEST_CASE("the main job's MLP with cross-entropy, parameters included") { check_gradients<gc::tiny_mlp>("tiny_mlp"); }
TEST_CASE("standard models: softmax, log_softmax, layernorm, linear, mse, cross_entropy") {
  check_gradients<gc::std_models>("std_models");
}
TEST_CASE("a transformer block: attention heads, layernorm, gelu, residuals") { check_gradients<gc::attention>("attention"); }
TEST_CASE("convolutions and max pooling: im2col, col2im, padding, stride") { check_gradients<gc::conv_pool>("conv_pool"); }
TEST_CASE("embeddings: gather's backward adds repeated rows (scatter_add)") { check_gradients<gc::embedding>("embedding"); }
TEST_CASE("what the ONNX import writes for ConvTranspose, the scatters, TopK and CumSum: col2im, scatter_add, gather of a concat, cumsum") {
  check_gradients<gc::imported_ops>("imported_ops");
}
TEST_CASE("a causal transformer block: masked scores in every head") { check_gradients<gc::causal_attention>("causal_attention"); }

TEST_CASE("an imported ONNX LSTM, GRU and RNN: backpropagation through the unrolled steps") {
  check_gradients<gc::onnx_recurrent_grad>("onnx_recurrent_grad");
}

TEST_CASE("gradients accumulate until zero_grad, and backward needs a forward") {
  gc::tiny_mlp m;
  std::mt19937_64 rng(1);
  for (const auto& [name, shape] : input_shapes(m.summary())) m.set_input(name, make_input(name, shape, rng));
  m.run();
  m.backward();
  Tensor once = m.grad("W1").clone();
  m.run();
  m.backward();
  Tensor twice = m.grad("W1");
  for (std::int64_t i = 0; i < once.numel(); ++i) CHECK(twice.data<double>()[i] == Approx(2 * once.data<double>()[i]));
  m.zero_grad();
  for (std::int64_t i = 0; i < once.numel(); ++i) CHECK(m.grad("W1").data<double>()[i] == 0.0);
  // Each forward allows one backward: the pullback reuses the forward's memory.
  CHECK_THROWS_WITH(m.backward(), Catch::Contains("needs a forward pass first"));
  CHECK_THROWS_WITH(m.grad("W3"), Catch::Contains("has no gradient of 'W3'"));
  // A model with several outputs (or a non-scalar one) takes the output gradients.
  m.run();
  CHECK_THROWS_WITH(m.backward({}), Catch::Contains("expected 1 output gradients, got 0"));
  Tensor seed = Tensor::full(DType::f64, {1}, 2.0);
  m.backward({seed});
  for (std::int64_t i = 0; i < once.numel(); ++i) CHECK(m.grad("W1").data<double>()[i] == Approx(2 * once.data<double>()[i]));
}

// --- zero_grad() without a pass over the gradients --------------------------------

namespace {

std::map<std::string, std::vector<double>> gradient_values(const std::vector<std::pair<std::string, Tensor>>& grads) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, g] : grads) out[name].assign(g.data<double>(), g.data<double>() + g.numel());
  return out;
}

// zero_grad() only marks the gradients; the next backward() runs the
// pullback that stores what a GEMM computes and clears the other buffers.
// Against a model that never ran zero_grad() (its buffers start at zero,
// its backward() adds into them): after zero_grad() and one backward() on
// buffers full of accumulated gradients and of values a caller wrote (those
// no gradient reaches included), the same gradients; a second backward()
// without zero_grad() adds (2x); a read right after zero_grad() sees zeros.
template <class Model>
void check_lazy_zero_grad(int threads) {
  INFO(threads << " threads");
  wfgen::rt::set_num_threads(threads);
  Model ref, m;
  std::mt19937_64 rng(5);
  for (const auto& [name, shape] : input_shapes(ref.summary())) {
    Tensor t = make_input(name, shape, rng);
    ref.set_input(name, t);
    m.set_input(name, t.clone());
  }
  ref.run();
  ref.backward();
  const auto want = gradient_values(ref.gradients());
  std::size_t nonzero = 0;
  for (const auto& [name, v] : want) nonzero += static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](double x) { return x != 0; }));
  REQUIRE(nonzero > 0);
  auto check_times = [&](double k) {
    for (const auto& [name, v] : gradient_values(m.gradients())) {
      INFO(name << " x" << k);
      for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(k * want.at(name)[i]).margin(1e-12));
    }
  };
  m.run();
  m.backward();
  m.run();
  m.backward();
  check_times(2);
  for (const auto& [name, g] : m.gradients()) g.fill(7.0);
  m.zero_grad();
  check_times(0);  // materialised on read
  for (const auto& [name, g] : m.gradients()) g.fill(7.0);
  m.zero_grad();
  m.run();
  m.backward();
  CHECK(gradient_values(m.gradients()) == want);  // exactly: a stored product, or a sum added into zeros
  m.run();
  m.backward();
  check_times(2);
  wfgen::rt::set_num_threads(2);
}

// step() right after zero_grad(), with no backward() between: the step of a
// model whose gradients are zero, parameter for parameter.
template <class Model>
void check_step_after_zero_grad() {
  Model stale, zero;  // the same seed: the same parameters
  std::vector<float> X(8 * 20), T(8 * 5, 0.0f);
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (int b = 0; b < 8; ++b) T[static_cast<std::size_t>(b * 5 + b % 5)] = 1;
  stale.forward(Tensor::from_data<float>({8, 20}, X), Tensor::from_data<float>({8, 5}, T));
  stale.backward();
  const Tensor w1 = stale.grad("W1");
  REQUIRE(std::any_of(w1.data<float>(), w1.data<float>() + w1.numel(), [](float x) { return x != 0; }));
  stale.zero_grad();
  stale.step();
  zero.step();
  for (const auto& [name, p] : zero.parameters()) {
    INFO(name);
    const Tensor q = stale.parameter(name);
    CHECK(std::memcmp(p.raw_data(), q.raw_data(), p.nbytes()) == 0);
  }
  for (const auto& [name, g] : stale.gradients())
    CHECK(std::all_of(g.template data<float>(), g.template data<float>() + g.numel(), [](float x) { return x == 0; }));
}

}  // namespace

TEST_CASE("zero_grad without a pass: the MLP, its GEMMs storing W1 and W2 and the input's gradient") {
  for (int threads : {1, 2}) check_lazy_zero_grad<gc::tiny_mlp>(threads);
}
TEST_CASE("zero_grad without a pass: batched, broadcast and transposed products") {
  for (int threads : {1, 2}) check_lazy_zero_grad<gc::linalg>(threads);
}
TEST_CASE("zero_grad without a pass: no GEMM, and an input no gradient reaches (argmax)") {
  for (int threads : {1, 2}) check_lazy_zero_grad<gc::ops_r1>(threads);
}
TEST_CASE("zero_grad without a pass: a transformer block") {
  for (int threads : {1, 2}) check_lazy_zero_grad<gc::attention>(threads);
}
TEST_CASE("zero_grad then step without backward: the step of zero gradients") {
  check_step_after_zero_grad<gc::train_sgd>();
  check_step_after_zero_grad<gc::train_adamw>();
}

TEST_CASE("the training API's try_ forms: the same gradients, errors as a Status") {
  gc::tiny_mlp a, b;
  std::mt19937_64 rng(2);
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, shape] : input_shapes(a.summary())) inputs[name] = make_input(name, shape, rng);
  for (const auto& [name, t] : inputs) {
    a.set_input(name, t);
    REQUIRE(b.try_set_input(name, t).ok());
  }
  std::vector<Tensor> out;
  // Before any forward pass: a Status, nothing thrown, nothing changed.
  wfgen::rt::Status st = b.try_backward();
  CHECK(st.code() == wfgen::rt::ErrorCode::InvalidArgument);
  CHECK(st.message().find("tiny_mlp::backward() needs a forward pass first") != std::string::npos);
  a.run();
  a.backward();
  REQUIRE(b.try_run(out).ok());
  CHECK(b.try_backward({Tensor::zeros(DType::f32, {1})}).code() == wfgen::rt::ErrorCode::DTypeMismatch);
  CHECK(b.try_backward({Tensor::zeros(DType::f64, {2})}).code() == wfgen::rt::ErrorCode::ShapeMismatch);
  CHECK(b.try_backward({Tensor(), Tensor()}).code() == wfgen::rt::ErrorCode::InvalidArgument);
  REQUIRE(b.try_backward({Tensor::full(DType::f64, {1}, 1.0)}).ok());
  for (const auto& [name, g] : a.gradients()) {
    Tensor other;
    REQUIRE(b.try_grad(name, other).ok());
    INFO(name);
    CHECK(std::memcmp(g.raw_data(), other.raw_data(), g.nbytes()) == 0);
  }
  Tensor none;
  CHECK(b.try_grad("W9", none).code() == wfgen::rt::ErrorCode::InvalidArgument);
  REQUIRE(b.try_zero_grad().ok());
  Tensor w1;
  REQUIRE(b.try_grad("W1", w1).ok());
  for (std::int64_t i = 0; i < w1.numel(); ++i) CHECK(w1.data<double>()[i] == 0.0);
}

// --- training steps against a naive reference ------------------------------------

namespace {

// The MLP of training.yaml in double: parameters, optimizer state, one step.
struct ReferenceMlp {
  int in = 0, hid = 0, cls = 0;
  std::map<std::string, std::vector<double>> p, m, v;  // parameters, first and second moments (sgd: m is the momentum)
  std::map<std::string, std::vector<double>> grad;
  std::int64_t steps = 0;

  template <class Model>
  static ReferenceMlp from(const Model& model, int in, int hid, int cls) {
    ReferenceMlp r;
    r.in = in, r.hid = hid, r.cls = cls;
    for (const auto& [name, t] : model.parameters()) {
      const float* f = t.template data<float>();
      r.p[name].assign(f, f + t.numel());
      r.m[name].assign(static_cast<std::size_t>(t.numel()), 0.0);
      r.v[name].assign(static_cast<std::size_t>(t.numel()), 0.0);
    }
    return r;
  }

  // Loss and gradients of mean over rows of cross_entropy(relu(X W1 + b1) W2 + b2, T).
  double loss_and_grad(const std::vector<double>& X, const std::vector<double>& T, int batch) {
    const auto &W1 = p["W1"], &b1 = p["b1"], &W2 = p["W2"], &b2 = p["b2"];
    std::vector<double> z1(static_cast<std::size_t>(batch * hid)), h(z1.size()), z2(static_cast<std::size_t>(batch * cls));
    for (int b = 0; b < batch; ++b)
      for (int j = 0; j < hid; ++j) {
        double s = b1[static_cast<std::size_t>(j)];
        for (int i = 0; i < in; ++i) s += X[static_cast<std::size_t>(b * in + i)] * W1[static_cast<std::size_t>(i * hid + j)];
        z1[static_cast<std::size_t>(b * hid + j)] = s;
        h[static_cast<std::size_t>(b * hid + j)] = s > 0 ? s : 0;
      }
    for (int b = 0; b < batch; ++b)
      for (int k = 0; k < cls; ++k) {
        double s = b2[static_cast<std::size_t>(k)];
        for (int j = 0; j < hid; ++j) s += h[static_cast<std::size_t>(b * hid + j)] * W2[static_cast<std::size_t>(j * cls + k)];
        z2[static_cast<std::size_t>(b * cls + k)] = s;
      }
    double loss = 0;
    std::vector<double> dz2(z2.size());
    for (int b = 0; b < batch; ++b) {
      double mx = -1e300, sum = 0;
      for (int k = 0; k < cls; ++k) mx = std::max(mx, z2[static_cast<std::size_t>(b * cls + k)]);
      for (int k = 0; k < cls; ++k) sum += std::exp(z2[static_cast<std::size_t>(b * cls + k)] - mx);
      for (int k = 0; k < cls; ++k) {
        std::size_t at = static_cast<std::size_t>(b * cls + k);
        double logp = z2[at] - mx - std::log(sum);
        loss -= T[at] * logp / batch;
        dz2[at] = (std::exp(logp) - T[at]) / batch;
      }
    }
    grad["W1"].assign(W1.size(), 0.0), grad["b1"].assign(b1.size(), 0.0);
    grad["W2"].assign(W2.size(), 0.0), grad["b2"].assign(b2.size(), 0.0);
    std::vector<double> dz1(z1.size(), 0.0);
    for (int b = 0; b < batch; ++b)
      for (int k = 0; k < cls; ++k) {
        const double d = dz2[static_cast<std::size_t>(b * cls + k)];
        grad["b2"][static_cast<std::size_t>(k)] += d;
        for (int j = 0; j < hid; ++j) {
          grad["W2"][static_cast<std::size_t>(j * cls + k)] += h[static_cast<std::size_t>(b * hid + j)] * d;
          dz1[static_cast<std::size_t>(b * hid + j)] += W2[static_cast<std::size_t>(j * cls + k)] * d;
        }
      }
    for (int b = 0; b < batch; ++b)
      for (int j = 0; j < hid; ++j) {
        std::size_t at = static_cast<std::size_t>(b * hid + j);
        if (z1[at] <= 0) continue;
        grad["b1"][static_cast<std::size_t>(j)] += dz1[at];
        for (int i = 0; i < in; ++i) grad["W1"][static_cast<std::size_t>(i * hid + j)] += X[static_cast<std::size_t>(b * in + i)] * dz1[at];
      }
    return loss;
  }

  // torch.optim.SGD (momentum, dampening 0, weight decay, nesterov)
  void sgd(double lr, double momentum, double wd, bool nesterov) {
    ++steps;
    for (auto& [name, w] : p)
      for (std::size_t i = 0; i < w.size(); ++i) {
        double g = grad[name][i] + wd * w[i];
        double& buf = m[name][i];
        buf = steps == 1 ? g : momentum * buf + g;
        g = nesterov ? g + momentum * buf : buf;
        w[i] -= lr * g;
      }
  }

  // torch.optim.Adam (weight decay added to the gradient) and AdamW (decoupled).
  void adam(double lr, double b1, double b2, double eps, double wd, bool decoupled) {
    ++steps;
    const double c1 = 1 - std::pow(b1, static_cast<double>(steps)), c2 = 1 - std::pow(b2, static_cast<double>(steps));
    for (auto& [name, w] : p)
      for (std::size_t i = 0; i < w.size(); ++i) {
        double g = grad[name][i];
        if (decoupled) w[i] *= 1 - lr * wd;
        else g += wd * w[i];
        double& mi = m[name][i];
        double& vi = v[name][i];
        mi = b1 * mi + (1 - b1) * g;
        vi = b2 * vi + (1 - b2) * g * g;
        w[i] -= lr / c1 * mi / (std::sqrt(vi) / std::sqrt(c2) + eps);
      }
  }
};

template <class Model>
void train_and_compare(const std::function<void(ReferenceMlp&)>& reference_step) {
  const int in = 20, hid = 16, cls = 5, batch = 8, steps = 6;
  Model model;
  ReferenceMlp ref = ReferenceMlp::from(model, in, hid, cls);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (int s = 0; s < steps; ++s) {
    std::vector<double> X(static_cast<std::size_t>(batch * in)), T(static_cast<std::size_t>(batch * cls), 0.0);
    for (auto& x : X) x = static_cast<float>(normal(rng));  // exactly representable in f32
    for (int b = 0; b < batch; ++b) T[static_cast<std::size_t>(b * cls + static_cast<int>(rng() % cls))] = 1.0;
    std::vector<float> Xf(X.begin(), X.end()), Tf(T.begin(), T.end());
    const double want_loss = ref.loss_and_grad(X, T, batch);
    auto out = model.forward(Tensor::from_data<float>({batch, in}, Xf), Tensor::from_data<float>({batch, cls}, Tf));
    CHECK(out[0].template data<float>()[0] == Approx(want_loss).epsilon(1e-5));
    model.zero_grad();
    model.backward();
    for (const auto& [name, g] : model.gradients())
      for (std::int64_t i = 0; i < g.numel(); ++i)
        REQUIRE(std::fabs(g.template data<float>()[i] - ref.grad[name][static_cast<std::size_t>(i)]) <= 1e-5);
    model.step();
    reference_step(ref);
  }
  CHECK(model.step_count() == steps);
  double worst = 0;
  for (const auto& [name, t] : model.parameters())
    for (std::int64_t i = 0; i < t.numel(); ++i)
      worst = std::max(worst, std::fabs(t.template data<float>()[i] - ref.p[name][static_cast<std::size_t>(i)]));
  INFO("largest weight difference after " << steps << " steps: " << worst);
  CHECK(worst <= 1e-5);
}

}  // namespace

TEST_CASE("training steps match the reference: SGD with momentum, weight decay and nesterov") {
  train_and_compare<gc::train_sgd>([](ReferenceMlp& r) { r.sgd(0.1, 0.9, 0.001, true); });
}

TEST_CASE("training steps match the reference: Adam with weight decay") {
  train_and_compare<gc::train_adam>([](ReferenceMlp& r) { r.adam(0.01, 0.9, 0.999, 1e-8, 0.001, false); });
}

TEST_CASE("training steps match the reference: AdamW") {
  train_and_compare<gc::train_adamw>([](ReferenceMlp& r) { r.adam(0.01, 0.8, 0.999, 1e-8, 0.05, true); });
}

TEST_CASE("the learning rate can be changed at run time") {
  gc::train_sgd m;
  CHECK(m.learning_rate() == Approx(0.1));
  m.set_learning_rate(0.0);
  Tensor before = m.parameter("W1").clone();
  std::vector<float> X(8 * 20, 0.5f), T(8 * 5, 0.0f);
  for (int b = 0; b < 8; ++b) T[static_cast<std::size_t>(b * 5)] = 1;
  m.forward(Tensor::from_data<float>({8, 20}, X), Tensor::from_data<float>({8, 5}, T));
  m.backward();
  m.step();  // lr 0: only weight decay would move W1, and lr scales it too
  for (std::int64_t i = 0; i < before.numel(); ++i) CHECK(m.parameter("W1").data<float>()[i] == before.data<float>()[i]);
}
