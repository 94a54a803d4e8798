// Tensors of several dtypes in one model (a build's typed_inputs,
// tests/models/models.yaml): i64 token ids held as i64, a bool (u8) mask made
// from them, argmax's indices returned as i64 and fed back to a gather, each
// change of dtype an explicit cast node. The outputs are compared with naive
// loops written here; the training build's gradients, which must ignore the
// integer side paths, with central finite differences of the naive loss.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "typed_tagger.hpp"
#include "typed_tagger_train.hpp"
#include "wfgen/runtime.hpp"

namespace {

using wfgen::rt::DType;
using wfgen::rt::ErrorCode;
using wfgen::rt::Tensor;

constexpr int kVocab = 6, kD = 3, kClasses = 4;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// What TypedTagger computes, row by row (an id out of range gathers zeros).
struct Naive {
  std::vector<double> logits, again;
  std::vector<std::int64_t> best;
  std::vector<std::uint8_t> mask;
};

Naive naive(const std::vector<double>& E, const std::vector<double>& W, const std::vector<double>& T,
            const std::vector<std::int64_t>& ids) {
  Naive n;
  for (std::int64_t id : ids) {
    const bool keep = id != 0;
    n.mask.push_back(keep ? 1 : 0);
    double x[kD] = {};
    for (int j = 0; j < kD; ++j) x[j] = (id >= 0 && id < kVocab && keep) ? E[static_cast<std::size_t>(id * kD + j)] : 0.0;
    std::int64_t arg = 0;
    double top = 0;
    for (int c = 0; c < kClasses; ++c) {
      double z = 0;
      for (int j = 0; j < kD; ++j) z += x[j] * W[static_cast<std::size_t>(j * kClasses + c)];
      n.logits.push_back(z);
      if (c == 0 || z > top) {
        top = z;
        arg = c;
      }
    }
    n.best.push_back(arg);
    for (int j = 0; j < kD; ++j) n.again.push_back(T[static_cast<std::size_t>(arg * kD + j)]);
  }
  return n;
}

// TypedTaggerLoss: mean(logits^2) + mean((again * keep)^2).
double naive_loss(const std::vector<double>& E, const std::vector<double>& W, const std::vector<double>& T,
                  const std::vector<std::int64_t>& ids) {
  const Naive n = naive(E, W, T, ids);
  double a = 0, b = 0;
  for (double v : n.logits) a += v * v;
  for (std::size_t k = 0; k < n.again.size(); ++k) {
    const double v = n.again[k] * (ids[k / kD] != 0 ? 1.0 : 0.0);
    b += v * v;
  }
  return a / static_cast<double>(n.logits.size()) + b / static_cast<double>(n.again.size());
}

}  // namespace

TEST_CASE("typed values: i64 ids, a bool mask and argmax's i64 indices feeding a gather, against naive loops") {
  wfgen_models::typed_tagger m;
  const std::vector<std::int64_t> ids = {1, 4, 0, 5, 2, 0, 3, 1};
  std::vector<Tensor> out = m.forward(Tensor::from_data<std::int64_t>({2, 4}, ids));
  REQUIRE(out.size() == 4);
  const Naive want = naive(values(m.parameter("E")), values(m.parameter("W")), values(m.parameter("T")), ids);

  REQUIRE(out[0].dtype() == DType::f64);
  const std::vector<double> logits = values(out[0]);
  REQUIRE(logits.size() == want.logits.size());
  for (std::size_t k = 0; k < logits.size(); ++k) CHECK(logits[k] == Approx(want.logits[k]).epsilon(1e-12));

  REQUIRE(out[1].dtype() == DType::i64);
  CHECK(out[1].shape() == wfgen::rt::Shape{2, 4, 1});
  Tensor best = out[1].contiguous();
  CHECK(std::vector<std::int64_t>(best.data<std::int64_t>(), best.data<std::int64_t>() + best.numel()) == want.best);

  REQUIRE(out[2].dtype() == DType::f64);
  CHECK(values(out[2]) == want.again);  // rows copied: exact

  REQUIRE(out[3].dtype() == DType::u8);
  Tensor mask = out[3].contiguous();
  CHECK(std::vector<std::uint8_t>(mask.data<std::uint8_t>(), mask.data<std::uint8_t>() + mask.numel()) == want.mask);

  // The model takes its ids as i64 values, not converted: f32 ids are refused.
  std::vector<Tensor> none;
  wfgen::rt::Status s = m.try_forward(none, Tensor::from_data<float>({1, 2}, {0, 1}));
  CHECK(s.code() == ErrorCode::DTypeMismatch);
}

TEST_CASE("typed values: gradients of a float loss with integer side paths, by finite differences") {
  wfgen_models::typed_tagger_train m;
  const std::vector<std::int64_t> ids = {1, 4, 0, 5, 2, 0, 3, 1};
  Tensor t_ids = Tensor::from_data<std::int64_t>({2, 4}, ids);
  std::vector<Tensor> out = m.forward(t_ids);
  REQUIRE(out.size() == 1);
  const std::vector<double> E = values(m.parameter("E")), W = values(m.parameter("W")), T = values(m.parameter("T"));
  CHECK(out[0].item<double>() == Approx(naive_loss(E, W, T, ids)).epsilon(1e-12));

  m.zero_grad();
  m.backward();
  const double h = 1e-6;
  for (const char* name : {"E", "W", "T"}) {
    const std::vector<double> grad = values(m.grad(name));
    std::vector<double> p = values(m.parameter(name));
    REQUIRE(grad.size() == p.size());
    auto loss = [&](const std::vector<double>& q) {
      return name[0] == 'E' ? naive_loss(q, W, T, ids) : name[0] == 'W' ? naive_loss(E, q, T, ids) : naive_loss(E, W, q, ids);
    };
    for (std::size_t k = 0; k < p.size(); ++k) {
      const double keep = p[k];
      p[k] = keep + h;
      const double up = loss(p);
      p[k] = keep - h;
      const double down = loss(p);
      p[k] = keep;
      INFO(name << "[" << k << "]");
      CHECK(grad[k] == Approx((up - down) / (2 * h)).margin(1e-7));
    }
  }
  // Row 0 of E is padding: the mask zeroes it, so it gets no gradient.
  const std::vector<double> gE = values(m.grad("E"));
  for (int j = 0; j < kD; ++j) CHECK(gE[static_cast<std::size_t>(j)] == 0.0);
}
