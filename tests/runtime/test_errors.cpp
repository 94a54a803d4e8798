// Error codes and messages for bad inputs.
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.hpp"

using rt::DType;
using rt::ErrorCode;
using rt::Shape;
using rt::Tensor;

TEST_CASE("error codes have names and Error carries its code", "[errors]") {
  CHECK(std::string(rt::error_code_name(ErrorCode::ShapeMismatch)) == "shape mismatch");
  CHECK(std::string(rt::error_code_name(ErrorCode::BadParameterFile)) == "bad parameter file");
  CHECK(std::string(rt::error_code_name(ErrorCode::InvalidArgument)) == "invalid argument");
  rt::Error e(ErrorCode::AliasedBuffer, "output aliases input x");
  CHECK(e.code() == ErrorCode::AliasedBuffer);
  CHECK(std::string(e.what()) == "output aliases input x");
  const std::runtime_error& base = e;  // catchable as std::runtime_error
  CHECK(std::string(base.what()) == "output aliases input x");
}

TEST_CASE("element access checks dtype, rank and bounds", "[errors]") {
  Tensor t = Tensor::zeros(DType::f32, {2, 3});
  REQUIRE_RT_ERROR(t.data<double>(), ErrorCode::DTypeMismatch,
                   "data asked for dtype f64 of a tensor of dtype f32, expected f32");
  REQUIRE_RT_ERROR(t.at<float>({1, 3}), ErrorCode::OutOfBounds,
                   "index 3 is out of bounds for axis 1 of shape (2 3), expected 0..2");
  REQUIRE_RT_ERROR(t.at<float>({-1, 0}), ErrorCode::OutOfBounds, "index -1 is out of bounds");
  REQUIRE_RT_ERROR(t.at<float>({1}), ErrorCode::RankMismatch,
                   "at got 1 indices for a tensor of shape (2 3), expected 2");
  REQUIRE_RT_ERROR(t.at<std::int32_t>({0, 0}), ErrorCode::DTypeMismatch, "dtype i32");
  REQUIRE_RT_ERROR(t.item<float>(), ErrorCode::ShapeMismatch,
                   "item needs a tensor with one element, got shape (2 3)");
  REQUIRE_RT_ERROR((t.view<float, 3>()), ErrorCode::RankMismatch,
                   "view asked for rank 3 of a tensor of shape (2 3), expected rank 2");
  REQUIRE_RT_ERROR((t.view<double, 2>()), ErrorCode::DTypeMismatch, "dtype f64");
  REQUIRE_RT_ERROR((t.cview<std::uint8_t, 2>()), ErrorCode::DTypeMismatch, "dtype u8");
  REQUIRE_RT_ERROR(t.dim(2), ErrorCode::OutOfBounds, "dim axis 2 is out of range for rank 2");
  REQUIRE_RT_ERROR(t.stride(-3), ErrorCode::OutOfBounds, "stride axis -3");
}

TEST_CASE("undefined tensors and null pointers report NullBuffer", "[errors]") {
  Tensor u;
  CHECK_FALSE(u.defined());
  REQUIRE_RT_ERROR(u.data<float>(), ErrorCode::NullBuffer, "tensor is undefined");
  REQUIRE_RT_ERROR(u.raw_data(), ErrorCode::NullBuffer, "tensor is undefined");
  REQUIRE_RT_ERROR(u.clone(), ErrorCode::NullBuffer, "tensor is undefined");
  REQUIRE_RT_ERROR(u.ref(), ErrorCode::NullBuffer, "tensor is undefined");
  REQUIRE_RT_ERROR(Tensor::borrow(static_cast<float*>(nullptr), {3}), ErrorCode::NullBuffer,
                   "borrow got a null pointer for shape (3)");
  REQUIRE_RT_ERROR(rt::Storage::borrow(nullptr, 16), ErrorCode::NullBuffer,
                   "cannot borrow a null pointer for 16 bytes");
  // No elements, nothing to point at: a null pointer is fine.
  CHECK(Tensor::borrow(static_cast<float*>(nullptr), {0, 3}).numel() == 0);
}

TEST_CASE("factories validate shapes", "[errors]") {
  REQUIRE_RT_ERROR(Tensor::empty(DType::f32, {2, -1}), ErrorCode::InvalidArgument,
                   "empty got shape (2 -1), expected sizes >= 0");
  REQUIRE_RT_ERROR(Tensor::zeros(DType::f32, Shape(9, 1)), ErrorCode::RankMismatch,
                   "zeros got shape (1 1 1 1 1 1 1 1 1) of rank 9, expected at most rank 8");
  REQUIRE_RT_ERROR(Tensor::empty(DType::f64, {std::int64_t{1} << 40, std::int64_t{1} << 40}),
                   ErrorCode::SizeOverflow, "overflows int64");
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer aborts on huge allocations instead
  REQUIRE_RT_ERROR(Tensor::empty(DType::u8, {std::int64_t{1} << 62}), ErrorCode::OutOfMemory,
                   "cannot allocate 4611686018427387904 bytes");
#endif
  REQUIRE_RT_ERROR((Tensor::from_data<float>({2, 2}, {1, 2, 3})), ErrorCode::ShapeMismatch,
                   "from_data got 3 values for shape (2 2), expected 4");
  std::vector<float> buf(4);
  REQUIRE_RT_ERROR(Tensor::borrow(buf.data(), {2, 2}, {1}), ErrorCode::RankMismatch,
                   "borrow got strides (1) for shape (2 2), expected 2 strides");
}

TEST_CASE("messages start lowercase and end without a period", "[errors]") {
  std::vector<std::string> messages;
  auto collect = [&](auto&& f) {
    try {
      f();
    } catch (const rt::Error& e) {
      messages.push_back(e.what());
    }
  };
  Tensor t = Tensor::zeros(DType::f32, {2, 3});
  collect([&] { (void)t.data<double>(); });
  collect([&] { (void)t.at<float>({5, 0}); });
  collect([&] { (void)t.reshape({7}); });
  collect([&] { (void)t.T().reshape({6}); });
  collect([&] { (void)t.broadcast_to({3, 3}); });
  collect([&] { (void)t.slice(0, 0, 1, 0); });
  collect([&] { (void)t.squeeze(0); });
  collect([&] { rt::set_num_threads(0); });
  collect([&] { (void)Tensor().data<float>(); });
  REQUIRE(messages.size() == 9);
  for (const std::string& m : messages) {
    INFO(m);
    CHECK(std::islower(static_cast<unsigned char>(m.front())));
    CHECK(m.back() != '.');
  }
}
