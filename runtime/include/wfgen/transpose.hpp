// Blocks of a matrix transposed in registers: log2(Lanes) rounds of
// two-vector shuffles (64 shuffles for 16 x 16 floats, where a scalar copy
// moves 256 elements one by one). Used by the fused row kernels' tiles
// (kernel_support.hpp: rows_to_lanes) and by rt::gemm's packing of a
// transposed B (gemm.hpp). Part of the kernel layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace wfgen::rt::detail {

// Only where a 64-byte vector is a register (AVX-512): elsewhere such a
// vector would be passed in memory (and GCC warns of the ABI change).
#if defined(__AVX512F__)
// One round of the transpose: swaps the off-diagonal B x B blocks of each
// 2B x 2B block (row i with row i + B, for the i with bit B clear).
template <class V, int B, std::size_t... P>
inline V block_swap_low(V a, V b, std::index_sequence<P...>) {
  return __builtin_shufflevector(a, b, ((P & B) == 0 ? int(P) : int(P + sizeof...(P) - B))...);
}
template <class V, int B, std::size_t... P>
inline V block_swap_high(V a, V b, std::index_sequence<P...>) {
  return __builtin_shufflevector(a, b, ((P & B) == 0 ? int(P + B) : int(P + sizeof...(P)))...);
}
template <class V, int N, int B>
inline void transpose_round(V (&r)[N]) {
  if constexpr (B >= 1) {
    for (int i = 0; i < N; ++i) {
      if ((i & B) != 0) continue;
      const V low = block_swap_low<V, B>(r[i], r[i + B], std::make_index_sequence<N>{});
      const V high = block_swap_high<V, B>(r[i], r[i + B], std::make_index_sequence<N>{});
      r[i] = low;
      r[i + B] = high;
    }
    transpose_round<V, N, B / 2>(r);
  }
}

// Transposes the Lanes x Lanes block whose row i starts at from + i * from_stride
// into the block whose row i starts at to + i * to_stride.
template <class T, int Lanes>
inline void transpose_block(const T* from, std::int64_t from_stride, T* to, std::int64_t to_stride) {
  typedef T V __attribute__((vector_size(Lanes * sizeof(T))));
  V r[Lanes];
  for (int i = 0; i < Lanes; ++i) std::memcpy(&r[i], from + i * from_stride, sizeof(V));
  transpose_round<V, Lanes, Lanes / 2>(r);
  for (int i = 0; i < Lanes; ++i) std::memcpy(to + i * to_stride, &r[i], sizeof(V));
}

// Blocks of 4- and 8-byte elements that fill a 64-byte vector.
template <class T, int Lanes>
inline constexpr bool transposes_in_registers = (sizeof(T) == 4 || sizeof(T) == 8) && Lanes * sizeof(T) == 64;
#endif

}  // namespace wfgen::rt::detail
