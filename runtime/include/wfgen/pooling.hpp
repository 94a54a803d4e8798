// Max pooling whose windows tile the input: the stride equals the window and
// there is no padding (the 2 x 2 / 2 pool of LeNet-style CNNs, 3 x 3 / 3).
// Part of the kernel layer, included by kernel_support.hpp: the generated
// kernels of max_pool, max_pool_grad and max_pool_pick split the (n, c)
// planes across the threads and call MaxPoolTiles on each plane whose rows
// are contiguous; other pools (padding, overlapping windows, strided rows)
// they walk window by window themselves.
//
// Why a class of the runtime and not emitted loops: a row of a small plane
// holds few windows (14 on a 28-wide plane, 6 on a 12-wide one), so a
// compiler's vector loop over them runs one vector or none and leaves the
// rest to its scalar remainder, where the NaN test of each element became
// two mispredicted branches: the CNN's max_pool 64x16x28x28 took 290 us and
// its gradient 410 us at one thread (Zen 5), 6-9x the element-wise pass
// over the same tensor. Here a row's windows go through vectors of the
// target's width, then of half, a quarter..., down to one lane, every
// element a compare and a select (no branch), and a 2-wide window's two
// columns are split from two loads by a shuffle.
//
// The winner of a window is its first NaN, else its first largest element
// in (i, then j) order: max_pool's value is the largest (NaN if one is NaN),
// max_pool_grad routes the window's gradient to the winner, max_pool_pick
// reads D there. The windows of a plane never overlap, so each element of
// the gradient's plane is written once (0 where no window's winner is),
// and the results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "wfgen/order_key.hpp"

namespace wfgen::rt {

// The geometry of a tiled pool, as the node's arguments and the tensors'
// shapes and row strides (elements; every row's columns are contiguous).
struct PoolTiles {
  std::int64_t h, w;    // X's plane (and the gradient's)
  std::int64_t ho, wo;  // the windows' plane: OUT's (DOUT's for the gradient)
  std::int64_t kh, kw;  // the window, and the stride
  std::int64_t xs_row;  // X's row stride
  std::int64_t ws_row;  // the windows' tensor's row stride: OUT (max_pool, max_pool_pick), DOUT (max_pool_grad)
  std::int64_t ts_row;  // the row stride of the plane the winners index: the gradient (max_pool_grad), D (max_pool_pick)
};

namespace detail {
// Bytes of the widest vector the target keeps in a register (so vectors are
// never passed in memory): AVX-512, AVX, else 16 (SSE, NEON, wasm simd128;
// lowered to scalars where the target has none).
#if defined(__AVX512F__)
inline constexpr int kPoolVectorBytes = 64;
#elif defined(__AVX__)
inline constexpr int kPoolVectorBytes = 32;
#else
inline constexpr int kPoolVectorBytes = 16;
#endif
}  // namespace detail

template <class T>
class MaxPoolTiles {
  static_assert(std::is_floating_point_v<T> || std::is_integral_v<T>);

 public:
  explicit MaxPoolTiles(const PoolTiles& g) noexcept : g_(g) {}

  // out[y x] = the largest element of window (y, x) of x, NaN if one is.
  void value(const T* x, T* out) const noexcept { rows<Mode::Value>(x, nullptr, out); }
  // The gradient's plane: dout[y x] at the winner of window (y, x), + 0 (a
  // sum over no other window), 0 everywhere else.
  void grad(const T* dout, const T* x, T* image) const noexcept {
    for (std::int64_t r = g_.kh * g_.ho; r < g_.h; ++r) std::fill_n(image + r * g_.ts_row, g_.w, T(0));  // rows no window covers
    rows<Mode::Grad>(x, dout, image);
  }
  // out[y x] = d at the winner of window (y, x).
  void pick(const T* d, const T* x, T* out) const noexcept { rows<Mode::Pick>(x, d, out); }

 private:
  enum class Mode { Value, Grad, Pick };
  using Key = std::conditional_t<sizeof(T) == 8, std::int64_t, std::conditional_t<sizeof(T) == 4, std::int32_t, T>>;
  static constexpr int kLanes = std::max<int>(1, detail::kPoolVectorBytes / static_cast<int>(sizeof(T)));

  // The usual windows with their size as constants: the loops over a
  // window's elements unroll and the vectors stay in registers (2x2 took
  // 2.4x as long with the size a variable).
  template <Mode M>
  void rows(const T* x, const T* other, T* out) const noexcept {
    if (g_.kh == 2 && g_.kw == 2) rows<M, 2, 2>(x, other, out);
    else if (g_.kh == 3 && g_.kw == 3) rows<M, 3, 3>(x, other, out);
    else rows<M, 0, 0>(x, other, out);
  }

  // KH, KW: the window's size, 0 for g_'s.
  template <Mode M, int KH, int KW>
  void rows(const T* x, const T* other, T* out) const noexcept {
    for (std::int64_t y = 0; y < g_.ho; ++y) {
      row<M, kLanes, KH, KW>(x + y * g_.kh * g_.xs_row, other, out, y, 0);
      if (M == Mode::Grad && g_.kw * g_.wo < g_.w)  // columns no window covers
        for (std::int64_t i = 0; i < g_.kh; ++i)
          std::fill(out + (y * g_.kh + i) * g_.ts_row + g_.kw * g_.wo, out + (y * g_.kh + i) * g_.ts_row + g_.w, T(0));
    }
  }

  // Windows [x0, wo) of output row y, L at a time, the rest with L / 2 lanes.
  template <Mode M, int L, int KH, int KW>
  void row(const T* xrow, const T* other, T* out, std::int64_t y, std::int64_t x0) const noexcept {
    for (; x0 + L <= g_.wo; x0 += L) windows<M, L, KH, KW>(xrow, other, out, y, x0);
    if constexpr (L > 1) row<M, L / 2, KH, KW>(xrow, other, out, y, x0);
  }

  // An integer that orders the elements as the winner is chosen (strictly
  // greater replaces, so the first of equals stays): rt::order_key's for
  // floating point, lane-wise; the value itself for integers.
  template <class K, class V>
  static K keys(V v) noexcept {
    if constexpr (std::is_integral_v<T>) {
      return v;
    } else {
      K bits;
      std::memcpy(&bits, &v, sizeof(K));
      return order_key_of_bits<T>(bits);
    }
  }

  template <class K, class V>
  static V select(K take, V a, V b) noexcept {
    K ia, ib;
    std::memcpy(&ia, &a, sizeof(V));
    std::memcpy(&ib, &b, sizeof(V));
    const K r = (ia & take) | (ib & ~take);
    V v;
    std::memcpy(&v, &r, sizeof(V));
    return v;
  }

  // Element j of L consecutive windows of a row starting at p (window l's
  // columns at p[l kw ...]): 2-wide windows split from two loads by a
  // shuffle, wider ones gathered.
  template <int L, class V, std::size_t... P>
  static V column(const T* p, std::int64_t kw, std::int64_t j, std::index_sequence<P...>) noexcept {
    if (kw == 2) {
      V lo, hi;
      std::memcpy(&lo, p, sizeof(V));
      std::memcpy(&hi, p + L, sizeof(V));
      if (j == 0) return __builtin_shufflevector(lo, hi, int(2 * P)...);
      return __builtin_shufflevector(lo, hi, int(2 * P + 1)...);
    }
    const T lanes[L] = {p[std::int64_t(P) * kw + j]...};
    V v;
    std::memcpy(&v, lanes, sizeof(V));
    return v;
  }

  // Writes element j of L consecutive windows (the inverse of column(), for
  // windows wider than 2).
  template <int L, class V, std::size_t... P>
  static void put_column(T* p, std::int64_t kw, std::int64_t j, V v, std::index_sequence<P...>) noexcept {
    T lanes[L];
    std::memcpy(lanes, &v, sizeof(V));
    ((p[std::int64_t(P) * kw + j] = lanes[P]), ...);
  }

  // Writes both elements of L consecutive 2-wide windows, interleaved.
  template <int L, class V, std::size_t... P>
  static void put_pair(T* p, V left, V right, std::index_sequence<P...>) noexcept {
    V lo = left, hi = right;  // one lane: the pair is the two vectors
    if constexpr (L > 1) {
      lo = __builtin_shufflevector(left, right, int(P % 2 == 0 ? P / 2 : L + P / 2)...);
      hi = __builtin_shufflevector(left, right, int(P % 2 == 0 ? (L + P) / 2 : L + (L + P) / 2)...);
    }
    std::memcpy(p, &lo, sizeof(V));
    std::memcpy(p + L, &hi, sizeof(V));
  }

  // Windows [x0, x0 + L) of output row y: each lane one window.
  template <Mode M, int L, int KH, int KW>
  void windows(const T* xrow, const T* other, T* out, std::int64_t y, std::int64_t x0) const noexcept {
    typedef T V __attribute__((vector_size(L * sizeof(T))));
    typedef Key K __attribute__((vector_size(L * sizeof(Key))));
    const auto lanes = std::make_index_sequence<L>{};
    const std::int64_t kh = KH > 0 ? KH : g_.kh, kw = KW > 0 ? KW : g_.kw;
    const std::int64_t first = x0 * kw;  // the windows' first column
    V best = column<L, V>(xrow + first, kw, 0, lanes);
    K best_key = keys<K>(best), winner = K{} + 0;
    K nan = K(best != best);
    V picked{};
    if constexpr (M == Mode::Pick) picked = column<L, V>(other + y * kh * g_.ts_row + first, kw, 0, lanes);
    for (std::int64_t i = 0; i < kh; ++i) {
      for (std::int64_t j = i == 0 ? 1 : 0; j < kw; ++j) {
        const V v = column<L, V>(xrow + i * g_.xs_row + first, kw, j, lanes);
        if constexpr (M == Mode::Value) {
          best = select(K(v > best), v, best);  // NaNs left out (v > best is false), counted in nan
          nan |= K(v != v);
        } else {
          const K key = keys<K>(v);
          const K take = K(key > best_key);
          best_key = select(take, key, best_key);
          winner = select(take, K{} + Key(i * kw + j), winner);
          if constexpr (M == Mode::Pick)
            picked = select(take, column<L, V>(other + (y * kh + i) * g_.ts_row + first, kw, j, lanes), picked);
        }
      }
    }
    if constexpr (M == Mode::Value) {
      if constexpr (std::is_floating_point_v<T>) best = select(nan, V{} + std::numeric_limits<T>::quiet_NaN(), best);
      std::memcpy(out + y * g_.ws_row + x0, &best, sizeof(V));
    } else if constexpr (M == Mode::Pick) {
      std::memcpy(out + y * g_.ws_row + x0, &picked, sizeof(V));
    } else {
      V g;
      std::memcpy(&g, other + y * g_.ws_row + x0, sizeof(V));
      g = g + T(0);  // a -0 gradient summed over one window: +0
      for (std::int64_t i = 0; i < kh; ++i) {
        T* image_row = out + (y * kh + i) * g_.ts_row + first;
        if (kw == 2) {
          put_pair<L>(image_row, select(K(winner == Key(2 * i)), g, V{}), select(K(winner == Key(2 * i + 1)), g, V{}), lanes);
          continue;
        }
        for (std::int64_t j = 0; j < kw; ++j) put_column<L>(image_row, kw, j, select(K(winner == Key(i * kw + j)), g, V{}), lanes);
      }
    }
  }

  PoolTiles g_;
};

}  // namespace wfgen::rt
