// Helpers that generated element-wise kernels call. Header-only, std-only.
//
// The expression language (docs/expressions.md) promises that every
// expression is defined for every input: integer overflow wraps, integer
// division and remainder by zero give 0, float-to-integer conversion
// saturates. Plain C++ operators do not promise that (signed overflow and
// division by zero are undefined behaviour), so wfgen emits calls to these
// functions instead. Each one is small enough to inline and vectorise.
//
// Integer helpers take std::int32_t or std::int64_t (wfgen never emits them
// for other types); floating helpers take float or double and stay in that
// type (no promotion of float to double).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace wfgen::rt::math {

template <class T>
concept KernelInt = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

template <class T>
concept KernelFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;

// --- integers: two's complement wrap-around, no undefined behaviour ---------

template <KernelInt T>
constexpr T add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

template <KernelInt T>
constexpr T sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}

template <KernelInt T>
constexpr T mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

template <KernelInt T>
constexpr T neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(a));
}

// Truncating division; x / 0 == 0 and MIN / -1 == MIN (wraps).
template <KernelInt T>
constexpr T idiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return neg(a);
  return static_cast<T>(a / b);
}

// Remainder with the sign of the dividend (C's %); x % 0 == 0, x % -1 == 0.
template <KernelInt T>
constexpr T imod(T a, T b) {
  if (b == 0 || b == -1) return 0;
  return static_cast<T>(a % b);
}

// |a|; abs(MIN) == MIN (wraps).
template <KernelInt T>
constexpr T iabs(T a) {
  return a < 0 ? neg(a) : a;
}

// Float to an integer element type: truncates toward zero, saturates at the
// type's limits, NaN gives 0.
template <class I, KernelFloat F>
constexpr I to_int(F x) {
  static_assert(std::is_integral_v<I>);
  if (!(x == x)) return 0;
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());
  constexpr F hi = static_cast<F>(std::numeric_limits<I>::max());
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// --- any number type ---------------------------------------------------------

// std::min/std::max without <algorithm>: min(a, b) is (b < a ? b : a), so a
// NaN in `a` is returned and a NaN in `b` is not.
template <class T>
constexpr T min(T a, T b) {
  return b < a ? b : a;
}

template <class T>
constexpr T max(T a, T b) {
  return a < b ? b : a;
}

template <class T>
constexpr T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}

// -1, 0 or 1; for floats sign(-0.0) == -0.0 and sign(NaN) is NaN.
template <class T>
constexpr T sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// --- floating point -------------------------------------------------------------

template <KernelFloat T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <KernelFloat T>
inline T rsqrt(T x) {
  return T(1) / std::sqrt(x);
}

}  // namespace wfgen::rt::math
