// The RNN example of issue 18 (examples/rnn/rnn.yaml): an Elman cell built
// as a differentiable node (`as: node`, `backward: true`) and applied at
// every time step of a loop the tracer unrolls. Checked here:
//   - the unrolled forward against naive loops, with the cell's one set of
//     parameters at every step (rnn_grad, f64, 5 steps);
//   - every gradient against central finite differences: backpropagation
//     through time sums each step's contribution into the shared Wx, Wh, b;
//   - a forward-only build of the same models has the same parameters (the
//     node's are `grad_cell.*` in both) and, with the trained values copied,
//     the same scores;
//   - the example's own build (12 steps, a state of 16) trains: 1500 Adam
//     steps on sequences this test draws, the loss falls and the held-out
//     accuracy reaches 0.9;
//   - the example's spec with a wrong feature count or a wrong sequence
//     length: Shape-Error reports at the spec line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rnn_grad.hpp"
#include "rnn_grad_predict.hpp"
#include "rnn_predict.hpp"
#include "rnn_train.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::DType;
using wfgen::rt::Tensor;

namespace {

constexpr int kSteps = 5, kIn = 2, kHidden = 3, kClasses = 3;

// rnn_grad's scores, naively: h_t = tanh(x_t Wx + h_{t-1} Wh + b), logits = h_5 W + c.
std::vector<double> reference_logits(const gc_rnn::rnn_grad& m, const Tensor& X, const Tensor& H0) {
  const double* Wx = m.parameter("grad_cell.Wx").data<double>();
  const double* Wh = m.parameter("grad_cell.Wh").data<double>();
  const double* b = m.parameter("grad_cell.b").data<double>();
  const double* W = m.parameter("check_classifier_0/linear_0.W").data<double>();
  const double* c = m.parameter("check_classifier_0/linear_0.b").data<double>();
  const std::int64_t batch = X.dim(0);
  std::vector<double> logits(static_cast<std::size_t>(batch * kClasses));
  for (std::int64_t n = 0; n < batch; ++n) {
    std::vector<double> h(H0.data<double>() + n * kHidden, H0.data<double>() + (n + 1) * kHidden);
    for (int t = 0; t < kSteps; ++t) {
      std::vector<double> next(kHidden);
      for (int j = 0; j < kHidden; ++j) {
        double s = b[j];
        for (int i = 0; i < kIn; ++i) s += X.data<double>()[(n * kSteps + t) * kIn + i] * Wx[i * kHidden + j];
        for (int i = 0; i < kHidden; ++i) s += h[static_cast<std::size_t>(i)] * Wh[i * kHidden + j];
        next[static_cast<std::size_t>(j)] = std::tanh(s);
      }
      h = next;
    }
    for (int k = 0; k < kClasses; ++k) {
      double s = c[k];
      for (int j = 0; j < kHidden; ++j) s += h[static_cast<std::size_t>(j)] * W[j * kClasses + k];
      logits[static_cast<std::size_t>(n * kClasses + k)] = s;
    }
  }
  return logits;
}

double reference_loss(const std::vector<double>& logits, const Tensor& labels) {
  const std::int64_t batch = labels.dim(0);
  double total = 0;
  for (std::int64_t n = 0; n < batch; ++n) {
    const double* z = logits.data() + n * kClasses;
    const double mx = std::max({z[0], z[1], z[2]});
    double s = 0;
    for (int k = 0; k < kClasses; ++k) s += std::exp(z[k] - mx);
    total -= z[labels.data<std::int64_t>()[n]] - mx - std::log(s);
  }
  return total / static_cast<double>(batch);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The example's spec with `from` replaced by `to`: its path and the line of the change.
std::pair<fs::path, int> edited_example(const std::string& from, const std::string& to, const std::string& tag) {
  std::string spec = read(fs::path(WFGEN_SOURCE_DIR) / "examples" / "rnn" / "rnn.yaml");
  const auto at = spec.find(from);
  REQUIRE(at != std::string::npos);
  spec.replace(at, from.size(), to);
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += spec[i] == '\n';
  const fs::path bad = fs::temp_directory_path() / ("wfgen_rnn_" + tag + "_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(bad) << spec;
  return {bad, line};
}

}  // namespace

TEST_CASE("the unrolled RNN matches naive loops and its gradients through time match finite differences", "[rnn]") {
  gc_rnn::rnn_grad m;
  const std::int64_t batch = 4;
  Tensor X = Tensor::empty(DType::f64, {batch, kSteps, kIn}), H0 = Tensor::empty(DType::f64, {batch, kHidden});
  Tensor labels = Tensor::from_data<std::int64_t>({batch}, {0, 2, 1, 2});
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::int64_t i = 0; i < X.numel(); ++i) X.data<double>()[i] = u(rng);
  for (std::int64_t i = 0; i < H0.numel(); ++i) H0.data<double>()[i] = 0.5 * u(rng);  // a state carried in
  // Non-zero biases, so that no gradient is alike by symmetry.
  for (const char* b : {"grad_cell.b", "check_classifier_0/linear_0.b"}) {
    Tensor t = m.parameter(b);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = 0.3 * u(rng);
  }
  // One set of cell parameters, however many steps use it.
  std::vector<std::string> names;
  for (const auto& [name, t] : m.parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"grad_cell.Wx", "grad_cell.Wh", "grad_cell.b", "check_classifier_0/linear_0.W",
                                          "check_classifier_0/linear_0.b"});

  auto loss = [&] { return m.forward(X, H0, labels)[0].item<double>(); };
  const double l0 = loss();
  CHECK(l0 == Approx(reference_loss(reference_logits(m, X, H0), labels)).epsilon(1e-12));

  m.zero_grad();
  m.backward();
  const double h = 1e-6;
  std::size_t checked = 0, bad = 0;
  for (const auto& [name, g] : m.gradients()) {
    Tensor x = m.parameter(name);
    REQUIRE(x.numel() == g.numel());
    double* xp = x.data<double>();
    const double* gp = g.data<double>();
    std::size_t nonzero = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double saved = xp[i];
      xp[i] = saved + h;
      const double up = loss();
      xp[i] = saved - h;
      const double down = loss();
      xp[i] = saved;
      const double numeric = (up - down) / (2 * h);
      ++checked;
      nonzero += gp[i] != 0;
      if (!(std::fabs(numeric - gp[i]) <= 1e-7 + 1e-6 * std::fabs(gp[i]))) {
        if (++bad <= 20) UNSCOPED_INFO(name << "[" << i << "]: finite difference " << numeric << ", backward " << gp[i]);
      }
    }
    INFO(name);
    CHECK(nonzero == static_cast<std::size_t>(x.numel()));
  }
  CHECK(bad == 0);
  CHECK(checked == kIn * kHidden + kHidden * kHidden + kHidden + kHidden * kClasses + kClasses);

  // The forward-only build: the same parameter names for the node, the
  // trained values copied in, the same scores as the naive loops.
  gc_rnn::rnn_grad_predict predict;
  for (const auto& [name, t] : predict.parameters()) {
    t.copy_from(m.parameter(name.rfind("grad_cell.", 0) == 0 ? name : "check_classifier_0/" + name));
  }
  const Tensor scores = predict.forward(X, H0)[0];
  const std::vector<double> want = reference_logits(m, X, H0);
  REQUIRE(scores.numel() == static_cast<std::int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(scores.data<double>()[i] == Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("the example's RNN learns the sign of a sequence's sum by BPTT", "[rnn]") {
  constexpr std::int64_t steps = 12, hidden = 16, batch = 64, iterations = 1500;
  auto make = [&](std::int64_t n, std::mt19937& rng, Tensor& X, Tensor& labels) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    X = Tensor::empty(DType::f32, {n, steps, 1});
    labels = Tensor::empty(DType::i32, {n});
    for (std::int64_t r = 0; r < n; ++r) {
      double sum = 0;
      for (std::int64_t t = 0; t < steps; ++t) sum += X.data<float>()[r * steps + t] = value(rng);
      labels.data<std::int32_t>()[r] = sum > 0;
    }
  };
  gc_rnn::rnn_train model;
  std::mt19937 rng(5);
  const Tensor H0 = Tensor::zeros(DType::f32, {batch, hidden});
  std::vector<double> losses;
  for (std::int64_t s = 0; s < iterations; ++s) {
    Tensor X, labels;
    make(batch, rng, X, labels);
    losses.push_back(model.forward(X, H0, labels)[0].data<float>()[0]);
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
  const double last = mean(losses.size() - 100, losses.size());
  INFO("loss of the first step " << losses[0] << ", mean of the last 100 " << last);
  CHECK(losses[0] > 0.5);  // about ln 2 = 0.69 at the start
  CHECK(last < 0.3 * losses[0]);

  gc_rnn::rnn_predict predict;
  for (const auto& [name, t] : predict.parameters()) {
    t.copy_from(model.parameter(name.rfind("elman_cell.", 0) == 0 ? name : "sequence_classifier_0/" + name));
  }
  Tensor X, labels;
  make(2000, rng, X, labels);
  const Tensor scores = predict.forward(X, Tensor::zeros(DType::f32, {2000, hidden}))[0];
  std::int64_t correct = 0;
  for (std::int64_t r = 0; r < 2000; ++r) {
    correct += (scores.at<float>({r, 1}) > scores.at<float>({r, 0})) == (labels.data<std::int32_t>()[r] == 1);
  }
  const double acc = static_cast<double>(correct) / 2000.0;
  INFO("held-out accuracy " << acc);
  CHECK(acc > 0.9);
}

TEST_CASE("the example's spec with a wrong feature count: a Shape-Error at the loop's line", "[rnn]") {
  // The cell node takes 1 feature per step; the model passes 3.
  auto [bad, line] = edited_example("args: {inputs: 1, hidden: 16}\n    as: node", "args: {inputs: 3, hidden: 16}\n    as: node", "features");
  const std::string body = "        h = elman_cell(X[:, t], h)";
  const std::string spec = read(bad);
  int call_line = 1;
  for (std::size_t i = 0; i < spec.find(body); ++i) call_line += spec[i] == '\n';
  std::ostringstream out, err;
  const int rc = wfgen::cli::disasm({{bad}, "rnn_train", false}, {out, err, false});
  INFO(err.str());
  CHECK(rc == wfgen::cli::kBadInput);
  CHECK(out.str().empty());
  CHECK(err.str().rfind(bad.string() + ":" + std::to_string(call_line) + ":13: error: shape error in a call of node 'elman_cell' (model 'elman')\n", 0) == 0);
  CHECK(err.str().find("[wfgen] Shape-Error") != std::string::npos);
  CHECK(err.str().find("x[batch inputs]") != std::string::npos);
  CHECK(err.str().find("note: in this call of model 'sequence_classifier'") != std::string::npos);
  fs::remove(bad);
  (void)line;
}

TEST_CASE("the example's spec with a wrong sequence length: a Shape-Error at the call", "[rnn]") {
  // training_loss hands a 12-step X to a classifier of 16 steps.
  const std::string call = "sequence_classifier(X, H0, steps, inputs, hidden, classes)";
  auto [bad, line] = edited_example(call, "sequence_classifier(X, H0, 16, inputs, hidden, classes)", "length");
  std::ostringstream out, err;
  const int rc = wfgen::cli::disasm({{bad}, "rnn_train", false}, {out, err, false});
  INFO(err.str());
  CHECK(rc == wfgen::cli::kBadInput);
  CHECK(out.str().empty());
  CHECK(err.str().rfind(bad.string() + ":" + std::to_string(line) + ":", 0) == 0);
  CHECK(err.str().find("error: shape error in a call of model 'sequence_classifier'") != std::string::npos);
  CHECK(err.str().find("X[batch steps inputs]") != std::string::npos);
  fs::remove(bad);
}
