// Integer inputs (a build's input_dtypes): token ids and class labels are
// passed as i64 / i32 tensors, read by gather and sparse_cross_entropy, and
// checked at run time. The loss is compared with naive loops written here,
// the embedding's and the head's gradients with central finite differences
// of that naive loss (scatter_add adds the rows of repeated ids).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tagger_train.hpp"
#include "wfgen/runtime.hpp"

namespace {

using wfgen::rt::DType;
using wfgen::rt::ErrorCode;
using wfgen::rt::Tensor;

constexpr int kVocab = 6, kD = 3, kClasses = 4;

// mean over rows of -log softmax(E[ids] @ W)[label]; a label out of range adds 0.
double naive_loss(const std::vector<double>& E, const std::vector<double>& W, const std::vector<std::int64_t>& ids,
                  const std::vector<std::int32_t>& labels) {
  double total = 0;
  for (std::size_t r = 0; r < ids.size(); ++r) {
    double z[kClasses] = {};
    for (int c = 0; c < kClasses; ++c)
      for (int j = 0; j < kD; ++j) z[c] += E[static_cast<std::size_t>(ids[r] * kD + j)] * W[static_cast<std::size_t>(j * kClasses + c)];
    double mx = z[0];
    for (double v : z) mx = std::max(mx, v);
    double se = 0;
    for (double v : z) se += std::exp(v - mx);
    const std::int32_t y = labels[r];
    if (y >= 0 && y < kClasses) total += mx + std::log(se) - z[y];
  }
  return total / static_cast<double>(ids.size());
}

std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

}  // namespace

TEST_CASE("integer inputs: i64 ids into gather, i32 labels into sparse_cross_entropy, gradients by finite differences") {
  wfgen_models::tagger_train m;
  // Ids repeat (1 three times, 4 twice) so the embedding's gradient must add rows.
  const std::vector<std::int64_t> ids = {1, 4, 1, 0, 5, 1, 4, 2};
  const std::vector<std::int32_t> labels = {0, 3, 2, 2, 1, 0, 3, 1};
  Tensor t_ids = Tensor::from_data<std::int64_t>({2, 4}, ids);
  Tensor t_labels = Tensor::from_data<std::int32_t>({2, 4}, labels);

  std::vector<Tensor> out = m.forward(t_ids, t_labels);
  REQUIRE(out.size() == 1);
  const std::vector<double> E = values(m.parameter("E")), W = values(m.parameter("W"));
  const double want = naive_loss(E, W, ids, labels);
  CHECK(out[0].dtype() == DType::f64);
  CHECK(out[0].item<double>() == Approx(want).epsilon(1e-12));

  m.zero_grad();
  m.backward();
  const double h = 1e-6;
  for (const char* name : {"E", "W"}) {
    const std::vector<double> grad = values(m.grad(name));
    std::vector<double> p = values(m.parameter(name));
    REQUIRE(grad.size() == p.size());
    for (std::size_t k = 0; k < p.size(); ++k) {
      const double keep = p[k];
      p[k] = keep + h;
      const double up = name[0] == 'E' ? naive_loss(p, W, ids, labels) : naive_loss(E, p, ids, labels);
      p[k] = keep - h;
      const double down = name[0] == 'E' ? naive_loss(p, W, ids, labels) : naive_loss(E, p, ids, labels);
      p[k] = keep;
      INFO(name << "[" << k << "]");
      CHECK(grad[k] == Approx((up - down) / (2 * h)).margin(1e-7));
    }
  }
  // Row 3 of E is never looked up: no gradient.
  const std::vector<double> gE = values(m.grad("E"));
  for (int j = 0; j < kD; ++j) CHECK(gE[static_cast<std::size_t>(3 * kD + j)] == 0.0);

  // New values in the same tensors are read again at the next forward.
  t_ids.data<std::int64_t>()[0] = 2;
  std::vector<std::int64_t> ids2 = ids;
  ids2[0] = 2;
  CHECK(m.forward(t_ids, t_labels)[0].item<double>() == Approx(naive_loss(E, W, ids2, labels)).epsilon(1e-12));
}

TEST_CASE("integer inputs are checked at run time: dtype, negative and inexact values") {
  wfgen_models::tagger_train m;
  Tensor labels = Tensor::from_data<std::int32_t>({1, 2}, {0, 1});
  std::vector<Tensor> out;

  // Floats where the build takes i64 ids.
  wfgen::rt::Status s = m.try_forward(out, Tensor::from_data<float>({1, 2}, {0, 1}), labels);
  CHECK(s.code() == ErrorCode::DTypeMismatch);
  CHECK_THAT(s.message(), Catch::Contains("ids has dtype f32, but the model takes i64"));

  s = m.try_forward(out, Tensor::from_data<std::int64_t>({1, 2}, {0, -3}), labels);
  CHECK(s.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("the input ids holds -3 at (0 1), but an index must be 0 or more"));
  CHECK(out.empty());

  // f64 holds integers exactly up to 2^53.
  s = m.try_forward(out, Tensor::from_data<std::int64_t>({1, 2}, {0, (std::int64_t{1} << 53) + 1}), labels);
  CHECK(s.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("at most 9007199254740992"));

  // i64 labels where the build takes i32.
  s = m.try_forward(out, Tensor::from_data<std::int64_t>({1, 2}, {0, 1}), Tensor::from_data<std::int64_t>({1, 2}, {0, 1}));
  CHECK(s.code() == ErrorCode::DTypeMismatch);
  CHECK_THAT(s.message(), Catch::Contains("labels has dtype i64, but the model takes i32"));

  // A good call after the errors works, strided ids included (a view with step 2).
  Tensor wide = Tensor::from_data<std::int64_t>({1, 4}, {1, 9, 2, 9});
  Tensor strided = Tensor::borrow(wide.data<std::int64_t>(), {1, 2}, {4, 2});
  REQUIRE(m.try_forward(out, strided, labels).ok());
  const std::vector<double> E = values(m.parameter("E")), W = values(m.parameter("W"));
  CHECK(out[0].item<double>() == Approx(naive_loss(E, W, {1, 2}, {0, 1})).epsilon(1e-12));
}
