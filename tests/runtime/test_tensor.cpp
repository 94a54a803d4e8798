// Tensor factories, queries, element access, borrowed memory, typed views.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_util.hpp"

using rt::DType;
using rt::Shape;
using rt::Tensor;

TEST_CASE("empty and zeros are contiguous, aligned and zero-filled", "[tensor]") {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {
    Tensor t = Tensor::empty(dt, {3, 5, 2});
    CHECK(t.defined());
    CHECK(t.dtype() == dt);
    CHECK(t.rank() == 3);
    CHECK(t.shape() == Shape{3, 5, 2});
    CHECK(t.strides() == Shape{10, 2, 1});
    CHECK(t.offset() == 0);
    CHECK(t.numel() == 30);
    CHECK(t.nbytes() == 30 * rt::dtype_size(dt));
    CHECK(t.is_contiguous());
    CHECK(t.storage()->owned());
    CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % rt::kAlignment == 0);
    const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
    for (std::size_t i = 0; i < t.nbytes(); ++i) REQUIRE(bytes[i] == 0);
  }
  Tensor z = Tensor::zeros(DType::f32, {4});
  for (std::int64_t i = 0; i < 4; ++i) CHECK(z.at<float>({i}) == 0.0f);
}


TEST_CASE("large buffers are zero-filled, aligned and reusable, around the mapped-allocation threshold",
          "[tensor]") {
  // Buffers of 4 MiB and more come from mmap (runtime/src/tensor.cpp): each
  // size on both sides of that threshold, of a huge page and of their
  // rounding, written to its last byte, freed, and allocated again (the
  // second one must be zeroed as well, whatever memory it reuses).
  const std::int64_t mib = std::int64_t{1} << 20;
  for (std::int64_t bytes : {4 * mib - 64, 4 * mib - 1, 4 * mib, 4 * mib + 1, 6 * mib - 3, 6 * mib + 64, 33 * mib + 7}) {
    for (int round = 0; round < 2; ++round) {
      Tensor t = Tensor::empty(DType::u8, {bytes});
      REQUIRE(t.nbytes() == static_cast<std::size_t>(bytes));
      CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % rt::kAlignment == 0);
      auto* p = static_cast<unsigned char*>(t.raw_data());
      std::int64_t nonzero = 0;
      for (std::int64_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
      CHECK(nonzero == 0);
      std::memset(p, 0xA5, static_cast<std::size_t>(bytes));
      CHECK(p[bytes - 1] == 0xA5);
      Tensor copy = t.clone();  // a second large buffer, alive with the first
      CHECK(static_cast<unsigned char*>(copy.raw_data())[bytes - 1] == 0xA5);
      CHECK(std::memcmp(copy.raw_data(), p, static_cast<std::size_t>(bytes)) == 0);
    }
  }
}
TEST_CASE("tensors with a zero-sized axis have no elements", "[tensor]") {
  Tensor t = Tensor::zeros(DType::f32, {3, 0, 2});
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.is_contiguous());
  CHECK(t.clone().numel() == 0);
  CHECK(t.reshape({0, 7}).shape() == Shape{0, 7});
}

TEST_CASE("full converts the value to the dtype", "[tensor]") {
  Tensor f = Tensor::full(DType::f32, {2, 3}, 1.5);
  Tensor i = Tensor::full(DType::i64, {2}, -7.9);  // truncates toward zero
  Tensor u = Tensor::full(DType::u8, {3}, 255.0);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 3; ++c) CHECK(f.at<float>({r, c}) == 1.5f);
  CHECK(i.at<std::int64_t>({1}) == -7);
  CHECK(u.at<std::uint8_t>({2}) == 255);
  REQUIRE_RT_ERROR(Tensor::full(DType::u8, {3}, 256.0), rt::ErrorCode::InvalidArgument,
                   "does not fit dtype u8");
  REQUIRE_RT_ERROR(Tensor::full(DType::i32, {1}, std::nan("")), rt::ErrorCode::InvalidArgument,
                   "does not fit dtype i32");
}

TEST_CASE("from_data copies row-major values", "[tensor]") {
  std::vector<std::int32_t> values = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_data<std::int32_t>({2, 3}, values);
  values[0] = 100;  // the tensor owns a copy
  CHECK(t.dtype() == DType::i32);
  CHECK(t.at<std::int32_t>({0, 0}) == 1);
  CHECK(t.at<std::int32_t>({0, 2}) == 3);
  CHECK(t.at<std::int32_t>({1, 0}) == 4);
  CHECK(t.at<std::int32_t>({1, 2}) == 6);
  CHECK(t.data<std::int32_t>()[4] == 5);
  t.at<std::int32_t>({1, 1}) = -5;
  CHECK(t.data<std::int32_t>()[4] == -5);
}

TEST_CASE("scalar is a rank-0 tensor with one element", "[tensor]") {
  Tensor s = Tensor::scalar<double>(2.25);
  CHECK(s.rank() == 0);
  CHECK(s.shape().empty());
  CHECK(s.numel() == 1);
  CHECK(s.item<double>() == 2.25);
  CHECK(s.at<double>({}) == 2.25);
  CHECK(s.is_contiguous());
  Tensor one = Tensor::full(DType::i64, {1, 1, 1}, 9);
  CHECK(one.item<std::int64_t>() == 9);
}

TEST_CASE("dim and stride accept negative axes", "[tensor]") {
  Tensor t = Tensor::zeros(DType::f32, {2, 3, 4});
  CHECK(t.dim(0) == 2);
  CHECK(t.dim(-1) == 4);
  CHECK(t.dim(-3) == 2);
  CHECK(t.stride(1) == 4);
  CHECK(t.stride(-1) == 1);
}

TEST_CASE("borrow wraps user memory without copying", "[tensor]") {
  std::vector<float> buf = {0, 1, 2, 3, 4, 5};
  Tensor t = Tensor::borrow(buf.data(), {2, 3});
  CHECK_FALSE(t.storage()->owned());
  CHECK(t.data<float>() == buf.data());
  CHECK(t.at<float>({1, 2}) == 5.0f);
  t.at<float>({0, 1}) = 42.0f;
  CHECK(buf[1] == 42.0f);
  buf[3] = -1.0f;
  CHECK(t.at<float>({1, 0}) == -1.0f);

  SECTION("with explicit strides: a column-major view") {
    Tensor c = Tensor::borrow(buf.data(), {3, 2}, {1, 3});
    CHECK_FALSE(c.is_contiguous());
    CHECK(c.data<float>() == buf.data());
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 2; ++j) CHECK(c.at<float>({i, j}) == buf[i + 3 * j]);
  }
  SECTION("with a negative stride the first element is the pointer") {
    Tensor r = Tensor::borrow(buf.data() + 5, {6}, {-1});
    CHECK(r.data<float>() == buf.data() + 5);
    CHECK(r.offset() == 5);
    CHECK(r.storage()->data() == reinterpret_cast<std::byte*>(buf.data()));
    for (std::int64_t i = 0; i < 6; ++i) CHECK(r.at<float>({i}) == buf[5 - i]);
  }
  SECTION("a pointer to const is accepted for inputs") {
    const std::vector<float>& cbuf = buf;
    Tensor ct = Tensor::borrow(cbuf.data(), {6});
    CHECK(ct.at<float>({4}) == 4.0f);
  }
}

TEST_CASE("copying a tensor copies the handle, not the data", "[tensor]") {
  Tensor a = Tensor::zeros(DType::f64, {4});
  Tensor b = a;  // handle copy
  b.at<double>({2}) = 3.0;
  CHECK(a.at<double>({2}) == 3.0);
  CHECK(a.storage() == b.storage());
  CHECK(a.storage().use_count() == 2);
}

TEST_CASE("view and cview give typed strided views", "[tensor]") {
  Tensor t = iota({3, 4});
  rt::View<double, 2> v = t.view<double, 2>();
  CHECK(v.data == t.data<double>());
  CHECK(v.shape == std::array<std::int64_t, 2>{3, 4});
  CHECK(v.strides == std::array<std::int64_t, 2>{4, 1});
  CHECK(v.size() == 12);
  v.data[1 * 4 + 2] = -1.0;
  CHECK(t.at<double>({1, 2}) == -1.0);

  rt::View<const double, 2> cv = t.T().cview<double, 2>();
  CHECK(cv.shape == std::array<std::int64_t, 2>{4, 3});
  CHECK(cv.strides == std::array<std::int64_t, 2>{1, 4});
  CHECK(cv.data[2 * cv.strides[0] + 1 * cv.strides[1]] == -1.0);

  // Views do not own memory: the tensor must outlive them.
  Tensor scalar = Tensor::scalar(1.25);
  rt::View<const double, 0> s = scalar.cview<double, 0>();
  CHECK(*s.data == 1.25);
}

TEST_CASE("ref describes the tensor as POD", "[tensor]") {
  Tensor t = iota({2, 3, 4}).permute({2, 0, 1}).slice(1, 1, 2);
  rt::TensorRef r = t.ref();
  CHECK(r.data == t.raw_data());
  CHECK(r.dtype == DType::f64);
  CHECK(r.rank == 3);
  CHECK(r.shape[0] == 4);
  CHECK(r.shape[1] == 1);
  CHECK(r.shape[2] == 3);
  CHECK(r.strides[0] == 1);
  CHECK(r.strides[1] == 12);
  CHECK(r.strides[2] == 4);
  for (int i = 3; i < rt::kMaxRank; ++i) {
    CHECK(r.shape[i] == 0);
    CHECK(r.strides[i] == 0);
  }
  CHECK(*static_cast<double*>(r.data) == 12.0);
}

TEST_CASE("fill writes every element of a strided view and nothing else", "[tensor]") {
  Tensor t = iota({4, 4});
  t.slice(1, 1, std::nullopt, 2).fill(-1.0);  // columns 1 and 3
  check_elements(t, [](const Shape& i) {
    return i[1] % 2 == 1 ? -1.0 : static_cast<double>(linear({4, 4}, i));
  });
}

TEST_CASE("may_alias compares reachable byte ranges", "[tensor]") {
  Tensor t = iota({4, 4});
  Tensor other = iota({4, 4});
  CHECK(rt::may_alias(t, t));
  CHECK(rt::may_alias(t, t.T()));
  CHECK_FALSE(rt::may_alias(t, other));
  CHECK_FALSE(rt::may_alias(t.slice(0, 0, 2), t.slice(0, 2, 4)));
  CHECK(rt::may_alias(t.slice(0, 0, 3), t.slice(0, 2, 4)));
  CHECK_FALSE(rt::may_alias(t, Tensor()));
}

TEST_CASE("copy assignment across ranks: the new rank's sizes and strides, whatever the old ones were", "[tensor]") {
  // Tensor::operator= copies only the first rank() sizes and strides; what
  // lies past the rank must never show through a query or a view.
  const Tensor big = Tensor::from_data<float>({2, 3, 4}, std::vector<float>(24, 1.0f));
  const Tensor row = Tensor::from_data<float>({5}, {0, 1, 2, 3, 4});
  const Tensor grid = Tensor::from_data<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor t = big.permute({2, 0, 1});  // rank 3, strides (1 12 4)
  t = row;
  CHECK(t.rank() == 1);
  CHECK(t.shape() == Shape({5}));
  CHECK(t.strides() == Shape({1}));
  CHECK(t.is_contiguous());
  CHECK(t.numel() == 5);
  const Tensor u = t.unsqueeze(0).unsqueeze(2);
  CHECK(u.shape() == Shape({1, 5, 1}));
  CHECK(u.at<float>({0, 3, 0}) == 3.0f);
  CHECK(t.reshape({5, 1}).at<float>({4, 0}) == 4.0f);
  t = grid.T();
  CHECK(t.shape() == Shape({3, 2}));
  CHECK(t.strides() == Shape({1, 3}));
  CHECK(t.at<float>({2, 1}) == 5.0f);
  const Tensor c = t.contiguous();
  CHECK(c.at<float>({2, 0}) == 2.0f);
  const Tensor& same = t;
  t = same;  // self-assignment keeps it
  CHECK(t.shape() == Shape({3, 2}));
  CHECK(t.at<float>({1, 1}) == 4.0f);
  t = Tensor();
  CHECK(!t.defined());
  CHECK(t.rank() == 0);
}
