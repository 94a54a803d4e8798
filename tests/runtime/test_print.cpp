// to_string / operator<<: the cl-waffe2 print layout.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

using rt::DType;
using rt::Tensor;

TEST_CASE("small matrices print in full", "[print]") {
  Tensor t = Tensor::from_data<float>({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(t.to_string() ==
        "{CPUTENSOR[float] :shape (3 3)\n"
        "  ((0.0 1.0 2.0)\n"
        "   (3.0 4.0 5.0)\n"
        "   (6.0 7.0 8.0))\n"
        "  :storage :owned}");
  std::ostringstream os;
  os << t;
  CHECK(os.str() == t.to_string());
}

TEST_CASE("long axes elide their middle with ~ and ...", "[print]") {
  Tensor t = Tensor::full(DType::f32, {10, 10}, 1.0);
  const std::string row = "(1.0 1.0 1.0 ~ 1.0 1.0 1.0)";
  CHECK(t.to_string() ==
        "{CPUTENSOR[float] :shape (10 10)\n"
        "  (" + row + "\n"
        "   " + row + "\n"
        "   " + row + "\n"
        "   ...\n"
        "   " + row + "\n"
        "   " + row + "\n"
        "   " + row + ")\n"
        "  :storage :owned}");

  std::vector<std::int64_t> v(8);
  for (std::int64_t i = 0; i < 8; ++i) v[static_cast<std::size_t>(i)] = i * 10;
  CHECK(Tensor::from_data<std::int64_t>({8}, v).to_string() ==
        "{CPUTENSOR[int64] :shape (8)\n"
        "  (0  10 20 ~ 50 60 70)\n"
        "  :storage :owned}");
}

TEST_CASE("columns are padded to one width", "[print]") {
  Tensor t = Tensor::from_data<float>({2, 2}, {1.5f, -2.0f, 10.0f, 0.25f});
  CHECK(t.to_string() ==
        "{CPUTENSOR[float] :shape (2 2)\n"
        "  ((1.5  -2.0)\n"
        "   (10.0 0.25))\n"
        "  :storage :owned}");
  CHECK(Tensor::from_data<float>({2}, {0.1f, 1e20f}).to_string() ==
        "{CPUTENSOR[float] :shape (2)\n"
        "  (0.1   1e+20)\n"
        "  :storage :owned}");
}

TEST_CASE("rank 3, views, scalars and special tensors", "[print]") {
  Tensor t = Tensor::from_data<std::int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(t.to_string() ==
        "{CPUTENSOR[int32] :shape (2 2 2)\n"
        "  (((0 1)\n"
        "    (2 3))\n"
        "   ((4 5)\n"
        "    (6 7)))\n"
        "  :storage :owned}");

  // A view prints its own elements, and says how it sits in the storage.
  Tensor m = Tensor::from_data<std::uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(m.T().slice(0, 1, std::nullopt).to_string() ==
        "{CPUTENSOR[uint8] :shape (2 2) :strides (1 3) :offset 1\n"
        "  ((2 5)\n"
        "   (3 6))\n"
        "  :storage :owned}");

  CHECK(Tensor::scalar(2.5).to_string() ==
        "{CPUTENSOR[double] :shape ()\n"
        "  2.5\n"
        "  :storage :owned}");

  double buf[2] = {7, 8};
  CHECK(Tensor::borrow(buf, {2}).to_string() ==
        "{CPUTENSOR[double] :shape (2)\n"
        "  (7.0 8.0)\n"
        "  :storage :borrowed}");

  CHECK(Tensor::zeros(DType::f32, {2, 0}).to_string() ==
        "{CPUTENSOR[float] :shape (2 0)\n"
        "  <no elements>\n"
        "  :storage :owned}");
  CHECK(Tensor().to_string() == "{CPUTENSOR :undefined}");
}
