// View operations: each result is checked element by element against index
// arithmetic on the original row-major data, and must share its storage.
#include <cstdint>
#include <optional>
#include <vector>

#include "test_util.hpp"

using rt::DType;
using rt::ErrorCode;
using rt::Shape;
using rt::Tensor;

TEST_CASE("slice with positive steps", "[views]") {
  Tensor t = iota({5, 6});
  Tensor s = t.slice(1, 1, 5, 2);  // columns 1, 3
  CHECK(s.shape() == Shape{5, 2});
  CHECK(s.strides() == Shape{6, 2});
  CHECK(s.offset() == 1);
  CHECK(s.storage() == t.storage());
  CHECK_FALSE(s.is_contiguous());
  check_elements(s, [](const Shape& i) { return double(i[0] * 6 + 1 + 2 * i[1]); });

  Tensor rows = t.slice(0, 2, 4);
  CHECK(rows.is_contiguous());
  CHECK(rows.offset() == 12);
  check_elements(rows, [](const Shape& i) { return double((i[0] + 2) * 6 + i[1]); });
}

TEST_CASE("slice with negative steps reverses", "[views]") {
  Tensor t = iota({7});
  Tensor r = t.slice(0, std::nullopt, std::nullopt, -1);
  CHECK(r.shape() == Shape{7});
  CHECK(r.strides() == Shape{-1});
  CHECK(r.offset() == 6);
  check_elements(r, [](const Shape& i) { return double(6 - i[0]); });

  Tensor r2 = t.slice(0, 5, 0, -2);  // 5, 3, 1
  CHECK(r2.shape() == Shape{3});
  check_elements(r2, [](const Shape& i) { return double(5 - 2 * i[0]); });

  Tensor r3 = t.slice(0, -1, -4, -1);  // 6, 5, 4
  check_elements(r3, [](const Shape& i) { return double(6 - i[0]); });

  // Reversing twice is the identity.
  Tensor rr = r.slice(0, std::nullopt, std::nullopt, -1);
  check_elements(rr, [](const Shape& i) { return double(i[0]); });

  SECTION("2-D: reverse rows of a transposed matrix") {
    Tensor m = iota({3, 4}).T().slice(0, std::nullopt, std::nullopt, -1);  // (4 3)
    CHECK(m.shape() == Shape{4, 3});
    check_elements(m, [](const Shape& i) { return double(i[1] * 4 + (3 - i[0])); });
  }
}

TEST_CASE("slice bounds follow Python: negatives count from the end, out of range clamps",
          "[views]") {
  const std::int64_t n = 6;
  Tensor t = iota({n});
  struct Case {
    std::optional<std::int64_t> start, stop;
    std::int64_t step;
    std::vector<std::int64_t> expected;  // as Python computes list(range(6))[start:stop:step]
  };
  const std::vector<Case> cases = {
      {std::nullopt, std::nullopt, 1, {0, 1, 2, 3, 4, 5}},
      {-2, std::nullopt, 1, {4, 5}},
      {std::nullopt, -2, 1, {0, 1, 2, 3}},
      {-100, 100, 1, {0, 1, 2, 3, 4, 5}},
      {100, std::nullopt, 1, {}},
      {4, 2, 1, {}},
      {1, 100, 3, {1, 4}},
      {100, std::nullopt, -1, {5, 4, 3, 2, 1, 0}},
      {std::nullopt, -100, -2, {5, 3, 1}},
      {-100, std::nullopt, -1, {}},
      {2, 4, -1, {}},
      {0, std::nullopt, -1, {0}},
      {std::nullopt, 0, -1, {5, 4, 3, 2, 1}},
      {-1, -7, -3, {5, 2}},
  };
  for (const Case& c : cases) {
    Tensor s = t.slice(0, c.start, c.stop, c.step);
    INFO("start " << (c.start ? std::to_string(*c.start) : "None") << " stop "
                  << (c.stop ? std::to_string(*c.stop) : "None") << " step " << c.step);
    REQUIRE(s.numel() == static_cast<std::int64_t>(c.expected.size()));
    for (std::size_t k = 0; k < c.expected.size(); ++k) {
      CHECK(s.at<double>({static_cast<std::int64_t>(k)}) == double(c.expected[k]));
    }
  }
}

TEST_CASE("slice of a slice composes offsets and steps", "[views]") {
  Tensor t = iota({20});
  Tensor s = t.slice(0, 2, 18, 3).slice(0, std::nullopt, std::nullopt, -2);
  // t[2:18:3] = 2 5 8 11 14 17, then [::-2] = 17 11 5
  const std::vector<double> expected = {17, 11, 5};
  REQUIRE(s.numel() == 3);
  for (std::int64_t k = 0; k < 3; ++k) CHECK(s.at<double>({k}) == expected[k]);
}

TEST_CASE("slice rejects a zero step and bad axes", "[views]") {
  Tensor t = iota({3, 3});
  REQUIRE_RT_ERROR(t.slice(0, 0, 2, 0), ErrorCode::InvalidArgument, "slice step 0");
  REQUIRE_RT_ERROR(t.slice(2, 0, 1), ErrorCode::OutOfBounds, "slice axis 2 is out of range");
  REQUIRE_RT_ERROR(t.slice(-3, 0, 1), ErrorCode::OutOfBounds, "expected -2..1");
}

TEST_CASE("broadcast_to repeats size-1 and missing axes with stride 0", "[views]") {
  Tensor row = iota({1, 4});
  Tensor b = row.broadcast_to({3, 4});
  CHECK(b.shape() == Shape{3, 4});
  CHECK(b.strides() == Shape{0, 1});
  CHECK(b.storage() == row.storage());
  check_elements(b, [](const Shape& i) { return double(i[1]); });

  Tensor col = iota({3, 1});
  Tensor c = col.broadcast_to({2, 3, 5});
  CHECK(c.strides() == Shape{0, 1, 0});
  check_elements(c, [](const Shape& i) { return double(i[1]); });

  Tensor vec = iota({4});
  Tensor v = vec.broadcast_to({2, 3, 4});
  CHECK(v.strides() == Shape{0, 0, 1});
  check_elements(v, [](const Shape& i) { return double(i[2]); });

  // Broadcasting a non-contiguous view keeps its strides.
  Tensor tcol = iota({4, 3}).T().slice(0, 1, 2);  // shape (1 4), stride (1 3)
  Tensor tb = tcol.broadcast_to({2, 4});
  CHECK(tb.strides() == Shape{0, 3});
  check_elements(tb, [](const Shape& i) { return double(i[1] * 3 + 1); });

  // Scalars broadcast to anything.
  Tensor s = Tensor::scalar(7.0).broadcast_to({2, 2});
  check_elements(s, [](const Shape&) { return 7.0; });

  // Writing through a broadcast view writes the shared element.
  b.at<double>({2, 1}) = 100.0;
  CHECK(row.at<double>({0, 1}) == 100.0);
}

TEST_CASE("broadcast_to rejects incompatible shapes", "[views]") {
  Tensor t = iota({2, 3});
  REQUIRE_RT_ERROR(t.broadcast_to({4, 3}), ErrorCode::ShapeMismatch,
                   "cannot broadcast shape (2 3) to (4 3): axis 0 has size 2, expected 1 or 4");
  REQUIRE_RT_ERROR(t.broadcast_to({3}), ErrorCode::ShapeMismatch, "expected a target of rank 2");
  REQUIRE_RT_ERROR(t.broadcast_to({1, 1, 1, 1, 1, 1, 1, 2, 3}), ErrorCode::RankMismatch,
                   "expected at most rank 8");
}

TEST_CASE("permute, transpose and T reorder axes", "[views]") {
  Tensor t = iota({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(p.storage() == t.storage());
  check_elements(p, [](const Shape& i) { return double(i[1] * 12 + i[2] * 4 + i[0]); });

  Tensor q = t.permute({-1, 1, 0});  // negative axes count from the end
  check_elements(q, [](const Shape& i) { return double(i[2] * 12 + i[1] * 4 + i[0]); });

  Tensor tr = t.transpose(0, 2);
  CHECK(tr.shape() == Shape{4, 3, 2});
  check_elements(tr, [](const Shape& i) { return double(i[2] * 12 + i[1] * 4 + i[0]); });

  Tensor tt = t.T();
  CHECK(tt.shape() == Shape{2, 4, 3});
  check_elements(tt, [](const Shape& i) { return double(i[0] * 12 + i[2] * 4 + i[1]); });
  check_elements(tt.T(), [](const Shape& i) { return double(linear({2, 3, 4}, i)); });

  REQUIRE_RT_ERROR(t.permute({0, 1}), ErrorCode::RankMismatch, "permute (0 1) has 2 axes");
  REQUIRE_RT_ERROR(t.permute({0, 1, 1}), ErrorCode::InvalidArgument, "repeats axis 1");
  REQUIRE_RT_ERROR(t.permute({0, 1, 3}), ErrorCode::OutOfBounds, "permute axis 3");
  REQUIRE_RT_ERROR(iota({3}).T(), ErrorCode::RankMismatch, "expected rank 2 or more");
}

TEST_CASE("reshape returns a view when the strides allow it", "[views]") {
  Tensor t = iota({2, 3, 4});
  Tensor r = t.reshape({6, 4});
  CHECK(r.storage() == t.storage());
  CHECK(r.strides() == Shape{4, 1});
  check_elements(r, [](const Shape& i) { return double(i[0] * 4 + i[1]); });

  Tensor inferred = t.reshape({4, -1});
  CHECK(inferred.shape() == Shape{4, 6});
  check_elements(inferred, [](const Shape& i) { return double(i[0] * 6 + i[1]); });

  CHECK(t.reshape({-1}).shape() == Shape{24});
  CHECK(t.reshape({1, 24, 1}).shape() == Shape{1, 24, 1});

  SECTION("splitting and merging axes of a permuted tensor where possible") {
    // (2 3 4) -> permute to (3 2 4): axes 1,2 (2 4) are strided 12, 1 —
    // the last axis can be split, but merging (2 4) is impossible.
    Tensor p = t.permute({1, 0, 2});
    Tensor split = p.reshape({3, 2, 2, 2});
    CHECK(split.storage() == t.storage());
    check_elements(split, [](const Shape& i) {
      return double(i[1] * 12 + i[0] * 4 + i[2] * 2 + i[3]);
    });
    REQUIRE_RT_ERROR(p.reshape({3, 8}), ErrorCode::InvalidView,
                     "cannot reshape shape (3 2 4) with strides (4 12 1) to (3 8) without copying");
  }
  SECTION("a sliced matrix with whole rows merges") {
    Tensor rows = iota({6, 4}).slice(0, 1, 5, 2);  // rows 1, 3: strides (8 1)
    Tensor flat_rows = rows.reshape({2, 2, 2});
    check_elements(flat_rows, [](const Shape& i) {
      return double((1 + 2 * i[0]) * 4 + i[1] * 2 + i[2]);
    });
    REQUIRE_RT_ERROR(rows.reshape({8}), ErrorCode::InvalidView, "use reshape_or_copy");
  }
  SECTION("a transposed matrix cannot be flattened without a copy") {
    Tensor m = iota({3, 4}).T();
    REQUIRE_RT_ERROR(m.reshape({12}), ErrorCode::InvalidView, "(4 3) with strides (1 4)");
    Tensor copy = m.reshape_or_copy({12});
    CHECK(copy.storage() != m.storage());
    CHECK(copy.is_contiguous());
    check_elements(copy, [](const Shape& i) { return double((i[0] % 3) * 4 + i[0] / 3); });
    // When a view works, reshape_or_copy does not copy.
    CHECK(iota({3, 4}).reshape_or_copy({12}).strides() == Shape{1});
  }
  SECTION("broadcast axes reshape as views too") {
    Tensor b = iota({4}).broadcast_to({3, 4});
    Tensor r3 = b.reshape({3, 2, 2});
    CHECK(r3.strides() == Shape{0, 2, 1});
    check_elements(r3, [](const Shape& i) { return double(i[1] * 2 + i[2]); });
  }
  SECTION("rank-0 and single elements") {
    Tensor s = Tensor::scalar(5.0);
    check_elements(s.reshape({1, 1}), [](const Shape&) { return 5.0; });
    CHECK(s.reshape({1, 1}).reshape({}).item<double>() == 5.0);
  }
}

TEST_CASE("reshape rejects bad shapes", "[views]") {
  Tensor t = iota({2, 3});
  REQUIRE_RT_ERROR(t.reshape({4, 2}), ErrorCode::ShapeMismatch,
                   "cannot reshape shape (2 3) (6 elements) to (4 2) (8 elements)");
  REQUIRE_RT_ERROR(t.reshape({-1, -1}), ErrorCode::InvalidArgument, "more than one -1");
  REQUIRE_RT_ERROR(t.reshape({4, -1}), ErrorCode::ShapeMismatch, "the -1 cannot be inferred");
  REQUIRE_RT_ERROR(t.reshape({-2, -3}), ErrorCode::InvalidArgument, "negative size");
  REQUIRE_RT_ERROR(t.reshape({1, 1, 1, 1, 1, 1, 1, 1, 6}), ErrorCode::RankMismatch,
                   "expected at most rank 8");
}

TEST_CASE("squeeze and unsqueeze", "[views]") {
  Tensor t = iota({3, 1, 4, 1});
  Tensor s1 = t.squeeze(1);
  CHECK(s1.shape() == Shape{3, 4, 1});
  check_elements(s1, [](const Shape& i) { return double(i[0] * 4 + i[1]); });
  Tensor s_last = t.squeeze(-1);
  CHECK(s_last.shape() == Shape{3, 1, 4});
  Tensor all = t.squeeze();
  CHECK(all.shape() == Shape{3, 4});
  CHECK(all.strides() == Shape{4, 1});
  check_elements(all, [](const Shape& i) { return double(i[0] * 4 + i[1]); });
  REQUIRE_RT_ERROR(t.squeeze(0), ErrorCode::ShapeMismatch, "has size 3, expected 1");

  Tensor m = iota({3, 4}).T();  // (4 3), strides (1 4)
  Tensor u0 = m.unsqueeze(0);
  CHECK(u0.shape() == Shape{1, 4, 3});
  check_elements(u0, [](const Shape& i) { return double(i[2] * 4 + i[1]); });
  Tensor u1 = m.unsqueeze(1);
  CHECK(u1.shape() == Shape{4, 1, 3});
  check_elements(u1, [](const Shape& i) { return double(i[2] * 4 + i[0]); });
  Tensor u2 = m.unsqueeze(-1);
  CHECK(u2.shape() == Shape{4, 3, 1});
  check_elements(u2, [](const Shape& i) { return double(i[1] * 4 + i[0]); });
  CHECK(iota({2, 3}).unsqueeze(1).is_contiguous());
  CHECK(Tensor::scalar(1.0).unsqueeze(0).shape() == Shape{1});

  REQUIRE_RT_ERROR(m.unsqueeze(3), ErrorCode::OutOfBounds, "unsqueeze axis 3");
  REQUIRE_RT_ERROR(iota({1, 1, 1, 1, 1, 1, 1, 1}).unsqueeze(0), ErrorCode::RankMismatch,
                   "exceeds the maximum rank 8");
}

TEST_CASE("contiguous, clone and copy_from", "[views]") {
  Tensor t = iota({3, 4});
  CHECK(t.contiguous().storage() == t.storage());  // already contiguous: no copy

  Tensor v = t.T().slice(1, std::nullopt, std::nullopt, -1);  // (4 3), reversed columns
  Tensor c = v.contiguous();
  CHECK(c.storage() != t.storage());
  CHECK(c.is_contiguous());
  CHECK(c.strides() == Shape{3, 1});
  auto expected = [](const Shape& i) { return double((2 - i[1]) * 4 + i[0]); };
  check_elements(v, expected);
  check_elements(c, expected);

  Tensor k = t.clone();
  CHECK(k.storage() != t.storage());
  k.at<double>({0, 0}) = 99;
  CHECK(t.at<double>({0, 0}) == 0);

  SECTION("copy_from into a strided destination") {
    Tensor dst = Tensor::zeros(DType::f64, {4, 6});
    dst.slice(1, 1, std::nullopt, 2).copy_from(t.T());  // columns 1, 3, 5
    check_elements(dst, [](const Shape& i) {
      return i[1] % 2 == 1 ? double((i[1] / 2) * 4 + i[0]) : 0.0;
    });
  }
  SECTION("copy_from between overlapping views of one storage") {
    Tensor x = iota({6});
    x.copy_from(x.slice(0, std::nullopt, std::nullopt, -1));
    check_elements(x, [](const Shape& i) { return double(5 - i[0]); });
    Tensor y = iota({6});
    y.slice(0, 1, 6).copy_from(y.slice(0, 0, 5));  // shift right by one, memmove-like
    check_elements(y, [](const Shape& i) { return double(i[0] == 0 ? 0 : i[0] - 1); });
  }
  SECTION("copy_from checks dtype and shape") {
    Tensor f = Tensor::zeros(DType::f32, {3, 4});
    REQUIRE_RT_ERROR(f.copy_from(t), ErrorCode::DTypeMismatch,
                     "copy_from got a source of dtype f64, expected f32");
    REQUIRE_RT_ERROR(t.copy_from(iota({4, 3})), ErrorCode::ShapeMismatch,
                     "copy_from got a source of shape (4 3), expected (3 4)");
  }
}

TEST_CASE("views of every dtype keep element values", "[views]") {
  Tensor u = Tensor::from_data<std::uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor ut = u.T().contiguous();
  const std::vector<std::uint8_t> expected = {1, 4, 2, 5, 3, 6};
  for (std::int64_t k = 0; k < 6; ++k) CHECK(ut.data<std::uint8_t>()[k] == expected[k]);

  Tensor i = Tensor::from_data<std::int64_t>({4}, {10, 20, 30, 40});
  Tensor ir = i.slice(0, std::nullopt, std::nullopt, -1).clone();
  CHECK(ir.at<std::int64_t>({0}) == 40);
  CHECK(ir.at<std::int64_t>({3}) == 10);

  Tensor f = Tensor::from_data<float>({2, 2}, {1.5f, 2.5f, 3.5f, 4.5f});
  CHECK(f.T().contiguous().data<float>()[1] == 3.5f);
}
