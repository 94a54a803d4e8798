// Arena: tensors that borrow slices of one aligned block.
#include <cstdint>

#include "test_util.hpp"

using rt::Arena;
using rt::DType;
using rt::ErrorCode;
using rt::Shape;
using rt::Tensor;

TEST_CASE("arena tensors borrow slices of one aligned block", "[arena]") {
  Arena arena(256);
  CHECK(arena.capacity() == 256);
  CHECK(reinterpret_cast<std::uintptr_t>(arena.data()) % rt::kAlignment == 0);
  for (std::size_t i = 0; i < arena.capacity(); ++i) REQUIRE(arena.data()[i] == std::byte{0});

  Tensor a = arena.tensor(DType::f32, {4, 4}, 0);     // bytes [0, 64)
  Tensor b = arena.tensor(DType::f64, {8}, 64);       // bytes [64, 128)
  Tensor c = arena.tensor(DType::i32, {2, 2}, 120);   // bytes [120, 136): overlaps b's last
  CHECK(a.shape() == Shape{4, 4});
  CHECK(a.is_contiguous());
  CHECK_FALSE(a.storage()->owned());
  CHECK(static_cast<std::byte*>(a.raw_data()) == arena.data());
  CHECK(static_cast<std::byte*>(b.raw_data()) == arena.data() + 64);
  CHECK(static_cast<std::byte*>(c.raw_data()) == arena.data() + 120);
  CHECK_FALSE(rt::may_alias(a, b));
  CHECK(rt::may_alias(b, c));

  a.at<float>({3, 3}) = 2.5f;
  float f = 0;
  std::memcpy(&f, arena.data() + 15 * 4, 4);
  CHECK(f == 2.5f);
  c.at<std::int32_t>({0, 0}) = -1;  // writes bytes 120..123: the low half of b[7]
  std::int32_t low = 0;
  std::memcpy(&low, reinterpret_cast<const std::byte*>(&b.at<double>({7})), 4);
  CHECK(low == -1);

  // Views of arena tensors work as usual.
  b.fill(1.0);
  b.slice(0, std::nullopt, std::nullopt, 2).fill(3.0);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(b.at<double>({i}) == (i % 2 == 0 ? 3.0 : 1.0));
}

TEST_CASE("arena checks offsets and sizes", "[arena]") {
  Arena arena(100);
  CHECK(arena.tensor(DType::u8, {100}, 0).numel() == 100);
  CHECK(arena.tensor(DType::f32, {0}, 100).numel() == 0);
  REQUIRE_RT_ERROR(arena.tensor(DType::f32, {2}, 2), ErrorCode::InvalidArgument,
                   "arena byte offset 2 is not a multiple of 4");
  REQUIRE_RT_ERROR(arena.tensor(DType::f32, {25}, 4), ErrorCode::OutOfBounds,
                   "arena tensor of shape (25) needs bytes [4, 104), but the arena holds 100 bytes");
  REQUIRE_RT_ERROR(arena.tensor(DType::u8, {1}, 1000), ErrorCode::OutOfBounds, "needs bytes");
  REQUIRE_RT_ERROR(arena.tensor(DType::u8, {-1}, 0), ErrorCode::InvalidArgument, "sizes >= 0");
  Arena none;
  CHECK(none.capacity() == 0);
  REQUIRE_RT_ERROR(none.tensor(DType::u8, {1}, 0), ErrorCode::OutOfBounds, "holds 0 bytes");
}

TEST_CASE("arena reserve grows, keeps contents and old tensors alive", "[arena]") {
  Arena arena(64);
  Tensor old = arena.tensor(DType::i64, {8}, 0);
  for (std::int64_t i = 0; i < 8; ++i) old.at<std::int64_t>({i}) = i * i;

  arena.reserve(32);  // smaller: no change
  CHECK(arena.capacity() == 64);
  CHECK(static_cast<std::byte*>(old.raw_data()) == arena.data());

  arena.reserve(4096);
  CHECK(arena.capacity() == 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(arena.data()) % rt::kAlignment == 0);
  Tensor fresh = arena.tensor(DType::i64, {8}, 0);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(fresh.at<std::int64_t>({i}) == i * i);
  Tensor tail = arena.tensor(DType::i64, {8}, 4096 - 64);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(tail.at<std::int64_t>({i}) == 0);

  // The old tensor still points at the old block, which it keeps alive.
  CHECK(static_cast<std::byte*>(old.raw_data()) != arena.data());
  old.at<std::int64_t>({0}) = 123;
  CHECK(fresh.at<std::int64_t>({0}) == 0);
  CHECK(old.at<std::int64_t>({0}) == 123);
}

TEST_CASE("arena tensors outlive the arena", "[arena]") {
  Tensor t;
  {
    Arena arena(128);
    t = arena.tensor(DType::f32, {32}, 0);
    t.fill(4.0);
  }
  for (std::int64_t i = 0; i < 32; ++i) CHECK(t.at<float>({i}) == 4.0f);
}
