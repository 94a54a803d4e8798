// The transformer language model of issue 18 (examples/tiny-lm/tiny_lm.yaml):
//   - its next-token scores against a naive transformer written here
//     (embeddings, causal multi-head attention, erf GELU MLP, layernorms, the
//     tied head), lm_grad_logits in f64;
//   - every gradient of lm_grad (both embeddings, each block's attention,
//     MLP and layernorm parameters, the final layernorm) against central
//     finite differences;
//   - a short training run (300 AdamW steps at small size on the GPL, the
//     example's text) whose loss must fall below the unigram entropy;
//   - the run-time check of a wrong sequence length, and the Shape-Errors of
//     the example's spec with a head count that does not divide d_model and
//     with a sequence length the embeddings do not have.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lm_grad.hpp"
#include "lm_grad_logits.hpp"
#include "lm_small_train.hpp"
#include "wfgen/cli/commands.hpp"
#include "wfgen/runtime.hpp"

namespace fs = std::filesystem;
using wfgen::rt::DType;
using wfgen::rt::Tensor;

namespace {

constexpr int V = 7, T = 5, D = 4, H = 2, F = 16;  // lm_grad's sizes (d_ff = 4 * d_model)
using Mat = std::vector<std::vector<double>>;      // [rows][cols]

struct Params {
  const gc_lm::lm_grad_logits& m;
  const double* p(const std::string& name) const { return m.parameter(name).data<double>(); }
};

Mat layernorm(const Mat& x, const double* gamma, const double* beta) {
  Mat y = x;
  for (auto& row : y) {
    double mean = 0, var = 0;
    for (double v : row) mean += v / D;
    for (double v : row) var += (v - mean) * (v - mean) / D;
    for (int j = 0; j < D; ++j) row[j] = (row[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
  }
  return y;
}

// x [rows n] @ W [n m] + b
Mat affine(const Mat& x, const double* W, const double* b, int n, int m) {
  Mat y(x.size(), std::vector<double>(m));
  for (std::size_t r = 0; r < x.size(); ++r)
    for (int j = 0; j < m; ++j) {
      double s = b[j];
      for (int i = 0; i < n; ++i) s += x[r][i] * W[i * m + j];
      y[r][j] = s;
    }
  return y;
}

Mat attention(const Mat& x, const Params& P, const std::string& at) {
  const Mat q = affine(x, P.p(at + ".Wq"), P.p(at + ".bq"), D, D), k = affine(x, P.p(at + ".Wk"), P.p(at + ".bk"), D, D),
            v = affine(x, P.p(at + ".Wv"), P.p(at + ".bv"), D, D);
  const int dh = D / H;
  Mat concat(T, std::vector<double>(D, 0.0));
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < T; ++i) {
      std::vector<double> w(i + 1);
      double mx = -1e300, sum = 0;
      for (int j = 0; j <= i; ++j) {  // causal: position i sees 0..i
        double s = 0;
        for (int c = 0; c < dh; ++c) s += q[i][h * dh + c] * k[j][h * dh + c];
        w[j] = s / std::sqrt(static_cast<double>(dh));
        mx = std::max(mx, w[j]);
      }
      for (double& e : w) sum += e = std::exp(e - mx);
      for (int j = 0; j <= i; ++j)
        for (int c = 0; c < dh; ++c) concat[i][h * dh + c] += w[j] / sum * v[j][h * dh + c];
    }
  return affine(concat, P.p(at + ".Wo"), P.p(at + ".bo"), D, D);
}

// The scores [T][V] of one sequence.
Mat reference_logits(const Params& P, const std::int64_t* ids) {
  Mat x(T, std::vector<double>(D));
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < D; ++j) x[t][j] = P.p("token_embedding")[ids[t] * D + j] + P.p("position_embedding")[t * D + j];
  for (int b = 0; b < 2; ++b) {
    const std::string blk = "transformer_block_" + std::to_string(b) + "/", ln = blk + "layernorm_";
    const Mat a = attention(layernorm(x, P.p(ln + std::to_string(2 * b) + ".gamma"), P.p(ln + std::to_string(2 * b) + ".beta")), P,
                            blk + "multi_head_attention_" + std::to_string(b));
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < D; ++j) x[t][j] += a[t][j];
    Mat u = affine(layernorm(x, P.p(ln + std::to_string(2 * b + 1) + ".gamma"), P.p(ln + std::to_string(2 * b + 1) + ".beta")),
                   P.p(blk + "linear_" + std::to_string(2 * b) + ".W"), P.p(blk + "linear_" + std::to_string(2 * b) + ".b"), D, F);
    for (auto& row : u)
      for (double& e : row) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
    const Mat m = affine(u, P.p(blk + "linear_" + std::to_string(2 * b + 1) + ".W"), P.p(blk + "linear_" + std::to_string(2 * b + 1) + ".b"), F, D);
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < D; ++j) x[t][j] += m[t][j];
  }
  const Mat y = layernorm(x, P.p("layernorm_4.gamma"), P.p("layernorm_4.beta"));
  Mat logits(T, std::vector<double>(V));
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v)
      for (int j = 0; j < D; ++j) logits[t][v] += y[t][j] * P.p("token_embedding")[v * D + j];  // tied head
  return logits;
}

void randomize(const Tensor& t, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> n(0.0, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] += n(rng);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The example's spec with `from` replaced by `to`: the file and the line of the change.
std::pair<fs::path, int> edited_example(const std::string& from, const std::string& to, const std::string& tag) {
  std::string spec = read(fs::path(WFGEN_SOURCE_DIR) / "examples" / "tiny-lm" / "tiny_lm.yaml");
  const auto at = spec.find(from);
  REQUIRE(at != std::string::npos);
  spec.replace(at, from.size(), to);
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += spec[i] == '\n';
  const fs::path bad = fs::temp_directory_path() / ("wfgen_lm_" + tag + "_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(bad) << spec;
  return {bad, line};
}

}  // namespace

TEST_CASE("the tiny LM's scores match a naive transformer and its gradients match finite differences", "[tiny-lm]") {
  gc_lm::lm_grad m;
  gc_lm::lm_grad_logits scorer;
  std::mt19937_64 rng(11);
  // Parameters away from their initial ones (unit layernorms, zero biases),
  // so that no gradient vanishes or repeats by symmetry.
  for (const auto& [name, t] : m.parameters()) randomize(t, rng, name.find("embedding") != std::string::npos ? 0.5 : 0.3);
  for (const auto& [name, t] : scorer.parameters()) {
    t.copy_from(m.parameter(std::string("tiny_lm_0") + (name.find('.') == std::string::npos ? "." : "/") + name));
  }
  const std::int64_t batch = 3;
  const Tensor ids = Tensor::from_data<std::int64_t>({batch, T}, {0, 3, 6, 3, 1, 2, 2, 5, 4, 0, 6, 1, 0, 5, 3});
  const Tensor targets = Tensor::from_data<std::int64_t>({batch, T}, {3, 6, 3, 1, 4, 2, 5, 4, 0, 1, 1, 0, 5, 3, 2});

  // The forward against the naive transformer.
  const Tensor scores = scorer.forward(ids)[0];
  REQUIRE(scores.shape() == wfgen::rt::Shape{batch, T, V});
  double want_loss = 0;
  for (std::int64_t n = 0; n < batch; ++n) {
    const Mat want = reference_logits(Params{scorer}, ids.data<std::int64_t>() + n * T);
    for (int t = 0; t < T; ++t) {
      double mx = -1e300, sum = 0;
      for (int v = 0; v < V; ++v) {
        CHECK(scores.at<double>({n, t, v}) == Approx(want[t][v]).epsilon(1e-9).margin(1e-12));
        mx = std::max(mx, want[t][v]);
      }
      for (int v = 0; v < V; ++v) sum += std::exp(want[t][v] - mx);
      want_loss -= want[t][targets.data<std::int64_t>()[n * T + t]] - mx - std::log(sum);
    }
  }
  want_loss /= static_cast<double>(batch * T);
  auto loss = [&] { return m.forward(ids, targets)[0].item<double>(); };
  CHECK(loss() == Approx(want_loss).epsilon(1e-10));

  // Every parameter's gradient against central finite differences.
  m.zero_grad();
  m.backward();
  const double h = 1e-6;
  std::size_t checked = 0, bad = 0, blocks = 0;
  for (const auto& [name, g] : m.gradients()) {
    Tensor x = m.parameter(name);
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
      if (!(std::fabs(numeric - gp[i]) <= 1e-7 + 1e-5 * std::fabs(gp[i]))) {
        if (++bad <= 20) UNSCOPED_INFO(name << "[" << i << "]: finite difference " << numeric << ", backward " << gp[i]);
      }
    }
    INFO(name);
    CHECK(nonzero > 0);
    ++blocks;
  }
  CHECK(bad == 0);
  // 2 embeddings, 2 blocks of 8 attention + 4 MLP + 4 layernorm tensors, the final layernorm.
  CHECK(blocks == 2 + 2 * 16 + 2);
  CHECK(checked == V * D + T * D + 2 * (4 * D * D + 4 * D + D * F + F + F * D + D + 4 * D) + 2 * D);
}

TEST_CASE("the tiny LM learns the GPL below its unigram entropy", "[tiny-lm]") {
  const std::string text = read("/usr/share/common-licenses/GPL-3");
  INFO("the test reads /usr/share/common-licenses/GPL-3 (Debian's base-files)");
  REQUIRE(text.size() > 30000);
  std::vector<double> count(256, 0.0);
  for (unsigned char c : text) count[c] += 1;
  double entropy = 0;
  for (double c : count)
    if (c > 0) entropy -= c / static_cast<double>(text.size()) * std::log(c / static_cast<double>(text.size()));

  gc_lm::lm_small_train model;
  constexpr std::int64_t batch = 16, context = 16, steps = 300;
  Tensor ids = Tensor::empty(DType::i64, {batch, context}), targets = Tensor::empty(DType::i64, {batch, context});
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::size_t> start(0, text.size() - context - 2);
  std::vector<double> losses;
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t r = 0; r < batch; ++r) {
      const std::size_t at = start(rng);
      for (std::int64_t t = 0; t < context; ++t) {
        ids.data<std::int64_t>()[r * context + t] = static_cast<unsigned char>(text[at + static_cast<std::size_t>(t)]);
        targets.data<std::int64_t>()[r * context + t] = static_cast<unsigned char>(text[at + static_cast<std::size_t>(t) + 1]);
      }
    }
    losses.push_back(model.forward(ids, targets)[0].data<float>()[0]);
    REQUIRE(std::isfinite(losses.back()));
    model.zero_grad();
    model.backward();
    model.step();
  }
  double last = 0;
  for (std::size_t i = losses.size() - 50; i < losses.size(); ++i) last += losses[i] / 50;
  INFO("first loss " << losses[0] << ", mean of the last 50 " << last << ", unigram entropy " << entropy);
  CHECK(losses[0] > 5.0);  // about ln 256 = 5.55 at the start
  CHECK(last < entropy);
}

// step() hands its 36 updates to the pool in bins (rt::parallel_tasks): at
// 1 and at 2 threads every parameter must end as one AdamW step written
// here (torch.optim.AdamW's first step), and both runs bit for bit alike.
TEST_CASE("step() is AdamW on every parameter, the same bits at 1 and 2 threads", "[tiny-lm]") {
  const int saved_threads = wfgen::rt::num_threads();
  constexpr std::int64_t batch = 4, context = 16;
  Tensor ids = Tensor::empty(DType::i64, {batch, context}), targets = Tensor::empty(DType::i64, {batch, context});
  for (std::int64_t i = 0; i < batch * context; ++i) {
    ids.data<std::int64_t>()[i] = (i * 37 + 11) % 256;
    targets.data<std::int64_t>()[i] = (i * 53 + 5) % 256;
  }
  std::vector<std::vector<float>> after[2];
  for (int threads : {1, 2}) {
    wfgen::rt::set_num_threads(threads);
    gc_lm::lm_small_train model;
    model.forward(ids, targets);
    model.zero_grad();
    model.backward();
    std::vector<std::vector<float>> p0, g;
    for (const auto& [name, t] : model.parameters()) p0.emplace_back(t.data<float>(), t.data<float>() + t.numel());
    for (const auto& [name, t] : model.gradients()) g.emplace_back(t.data<float>(), t.data<float>() + t.numel());
    REQUIRE(p0.size() == 36);
    REQUIRE(g.size() == p0.size());
    model.step();
    const double lr = 0.003, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    std::size_t k = 0, bad = 0;
    for (const auto& [name, t] : model.parameters()) {
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        const double gi = g[k][static_cast<std::size_t>(i)], m = (1 - b1) * gi, v = (1 - b2) * gi * gi;
        const double want = p0[k][static_cast<std::size_t>(i)] * (1 - lr * wd) - lr / (1 - b1) * m / (std::sqrt(v) / std::sqrt(1 - b2) + eps);
        if (std::fabs(t.data<float>()[i] - want) > 1e-6 + 1e-5 * std::fabs(want)) ++bad;
      }
      after[threads - 1].emplace_back(t.data<float>(), t.data<float>() + t.numel());
      ++k;
    }
    INFO(threads << " thread(s)");
    CHECK(bad == 0);
  }
  wfgen::rt::set_num_threads(saved_threads);
  CHECK(after[0] == after[1]);
}

TEST_CASE("a sequence of the wrong length is refused at run time", "[tiny-lm]") {
  gc_lm::lm_grad m;
  std::vector<Tensor> out;
  const Tensor ids = Tensor::zeros(DType::i64, {2, T + 1}), targets = Tensor::zeros(DType::i64, {2, T + 1});
  const wfgen::rt::Status s = m.try_forward(out, ids, targets);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(s.code() == wfgen::rt::ErrorCode::ShapeMismatch);
  CHECK(s.message().find("ids") != std::string::npos);
}

TEST_CASE("the example's spec with heads that do not divide d_model: the precondition at the spec line", "[tiny-lm]") {
  auto [bad, line] = edited_example("args: {vocab: 256, context: 64, d_model: 64, heads: 4, layers: 2}\n    dtype: f32\n    devices: [blas, cpu]\n    input_dtypes: {ids: i64, targets: i64}",
                                    "args: {vocab: 256, context: 64, d_model: 64, heads: 5, layers: 2}\n    dtype: f32\n    devices: [blas, cpu]\n    input_dtypes: {ids: i64, targets: i64}", "heads");
  const std::string spec = read(bad);
  const std::string call = "x = transformer_block(x, d_model, heads, 4 * d_model, causal=true)";
  int call_line = 1;
  for (std::size_t i = 0; i < spec.find(call); ++i) call_line += spec[i] == '\n';
  std::ostringstream out, err;
  const int rc = wfgen::cli::disasm({{bad}, "lm_train", false}, {out, err, false});
  INFO(err.str());
  CHECK(rc == wfgen::cli::kBadInput);
  CHECK(out.str().empty());
  CHECK(err.str().rfind(bad.string() + ":" + std::to_string(call_line) + ":", 0) == 0);
  CHECK(err.str().find("multi_head_attention: d_model must be divisible by heads") != std::string::npos);
  CHECK(err.str().find("note: in this call of model 'tiny_lm'") != std::string::npos);
  fs::remove(bad);
  (void)line;
}

TEST_CASE("the example's spec with a sequence length the embeddings do not have: a Shape-Error at the call", "[tiny-lm]") {
  const std::string call = "logits = tiny_lm(ids, vocab, context, d_model, heads, layers)";
  auto [bad, line] = edited_example(call, "logits = tiny_lm(ids, vocab, 32, d_model, heads, layers)", "length");
  std::ostringstream out, err;
  const int rc = wfgen::cli::disasm({{bad}, "lm_train", false}, {out, err, false});
  INFO(err.str());
  CHECK(rc == wfgen::cli::kBadInput);
  CHECK(out.str().empty());
  CHECK(err.str().rfind(bad.string() + ":" + std::to_string(line) + ":", 0) == 0);
  CHECK(err.str().find("shape error in a call of model 'tiny_lm'") != std::string::npos);
  CHECK(err.str().find("ids[batch context]") != std::string::npos);
  fs::remove(bad);
}
