// Helpers shared by the runtime tests. Expectations are computed here from
// index arithmetic, independently of the runtime's own stride bookkeeping.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "wfgen/runtime.hpp"

namespace rt = wfgen::rt;

// A contiguous f64 tensor whose element at row-major position k holds k.
inline rt::Tensor iota(const rt::Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) v[static_cast<std::size_t>(k)] = static_cast<double>(k);
  return rt::Tensor::from_data<double>(shape, v);
}

// Row-major position of `index` in a contiguous tensor of `shape`.
inline std::int64_t linear(const rt::Shape& shape, const rt::Shape& index) {
  std::int64_t k = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) k = k * shape[i] + index[i];
  return k;
}

// Calls f(index) for every index of `shape`, in row-major order.
inline void for_each_index(const rt::Shape& shape, const std::function<void(const rt::Shape&)>& f) {
  for (auto d : shape) {
    if (d == 0) return;
  }
  rt::Shape idx(shape.size(), 0);
  for (;;) {
    f(idx);
    int a = static_cast<int>(shape.size()) - 1;
    while (a >= 0 && ++idx[a] == shape[a]) idx[a--] = 0;
    if (a < 0) return;
  }
}

// Every element of f64 tensor `t` equals expected(index), checked both with
// at<>() and with raw pointer + strides arithmetic.
inline void check_elements(const rt::Tensor& t,
                           const std::function<double(const rt::Shape&)>& expected) {
  const rt::Shape shape = t.shape(), strides = t.strides();
  const double* base = t.data<double>();
  std::int64_t visited = 0;
  for_each_index(shape, [&](const rt::Shape& idx) {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
    INFO("index " << rt::shape_to_string(idx));
    REQUIRE(t.at<double>(std::span<const std::int64_t>(idx)) == expected(idx));
    REQUIRE(base[off] == expected(idx));
    ++visited;
  });
  REQUIRE(visited == t.numel());
}

// Runs `expr`, requires it to throw rt::Error with `code_` and a message
// containing `text`.
#define REQUIRE_RT_ERROR(expr, code_, text)                                  \
  do {                                                                       \
    bool thrown_ = false;                                                    \
    try {                                                                    \
      (void)(expr);                                                          \
    } catch (const rt::Error& e_) {                                          \
      thrown_ = true;                                                        \
      INFO("message: " << e_.what());                                        \
      CHECK(e_.code() == (code_));                                           \
      CHECK(std::string(e_.what()).find(text) != std::string::npos);         \
    }                                                                        \
    CHECK(thrown_);                                                          \
  } while (0)
