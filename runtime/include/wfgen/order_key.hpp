// Integer keys that order floating-point values as max pooling chooses its
// winner. Part of the kernel layer: rt::order_key (kernel_support.hpp's
// max_pool_grad / max_pool_pick loops) and rt::MaxPoolTiles (pooling.hpp,
// a window per vector lane) share the one formula here.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

namespace wfgen::rt {

// The integer type of a float's bits.
template <class T>
using OrderKey = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;

// order_key on the bits of floats of type T, given as one integer
// (K = OrderKey<T>) or a vector of them (a GCC vector type of OrderKey<T>
// lanes). Integer operations only, no compare that a compiler turns into a
// branch: |v|'s bits, negated for a negative v (-0 and +0 both 0), every NaN
// above +inf. A vector compare gives all ones for true where a scalar one
// gives 1, hence the negation in the scalar case.
template <class T, class K>
K order_key_of_bits(K bits) noexcept {
  using I = OrderKey<T>;
  constexpr I kMagnitude = std::numeric_limits<I>::max();
  constexpr I kInfinity = sizeof(T) == 4 ? I(0x7f800000) : I(0x7ff0000000000000);
  const K magnitude = bits & kMagnitude;
  const K negative = bits >> (8 * sizeof(I) - 1);   // all ones for a negative v (arithmetic shift)
  const K key = (magnitude ^ negative) - negative;  // -magnitude when negative
  K nan;
  if constexpr (std::is_integral_v<K>) {
    nan = -K(magnitude > kInfinity);
  } else {
    nan = magnitude > kInfinity;
  }
  return (key & ~nan) | (kMagnitude & nan);
}

// An integer that orders floating-point values as max_pool's winner is
// chosen: by value (-0 and +0 equal), every NaN above +inf and equal to the
// others. max_pool_grad and max_pool_pick compare these instead of the
// floats: integer compares and selects, which the compiler vectorises and
// never turns into branches (a float compare with a NaN test became two
// mispredicted branches per element on random windows).
template <class T>
OrderKey<T> order_key(T v) noexcept {
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));
  // std::bit_cast, which emscripten 3.1.6's libc++ lacks
  return order_key_of_bits<T>(__builtin_bit_cast(OrderKey<T>, v));
}

}  // namespace wfgen::rt
