// Attention of one head in one pass: O = softmax(scale * Q K^T, causal) V
// without the n x m scores in memory. The kernel of the fusion
// passes/fuse_attention.cpp makes of matmul -> scaled_softmax -> matmul when
// the scores have no other reader (inference; a training step's backward
// reads them). Part of the kernel layer, included by kernel_support.hpp; the
// generated kernel splits (matrix, block of rows) pairs across the threads
// and calls attention_rows on each.
//
// Per block of up to kBlockRows rows of Q, the keys are visited in tiles of
// columns (all m of them in one tile for short sequences): K^T's tile is
// copied once into a contiguous buffer, then for each group of kRows rows
// their scores (a kRows x tile register tile, only the columns j <= i a
// causal row keeps), the softmax's exps, and their product with V's rows
// (again only j <= i), added into O. Tiles after the first rescale what O
// and the row's sum hold to the new running max (the online softmax), and
// each row is divided by its sum at the end. Plain loops over fixed-size
// register tiles, which g++ vectorises for every target (as gemm.hpp's
// micro-kernel); the exps through rt::math::exp_minus_max.
//
// Each row's result depends only on the shapes (the tile width is a
// function of d), not on which rows a call gets: the same bits at any
// thread count. They differ from the three unfused kernels' in rounding
// (the products sum in another order, and the division by the sum comes
// after the product with V).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "wfgen/gemm.hpp"  // kGemmVectorBytes, kGemmVectorRegisters (the target's vectors), detail::GemmBuffer
#include "wfgen/kernel_math.hpp"
#include "wfgen/transpose.hpp"

namespace wfgen::rt {

// One matrix of each operand, as element pointers and strides (elements):
// Q [n x d], K^T [d x m] (row c, column j: a transposed view of K's rows),
// V [m x dv], O [n x dv].
template <class T>
struct AttentionMatrices {
  const T* q;
  std::int64_t q_row, q_col;
  const T* kt;
  std::int64_t kt_row, kt_col;
  const T* v;
  std::int64_t v_row, v_col;
  T* o;
  std::int64_t o_row, o_col;
};

struct AttentionShape {
  std::int64_t n, m, d, dv;  // query rows, keys, head size (of Q and K), V's columns
  bool causal;               // row i attends to the columns j <= i only
};

template <class T>
struct AttentionTile {
  // Lanes of a vector, and rows per register tile: kRows accumulators of
  // one vector (8 of 32 registers with AVX-512, 4 of 16 with AVX2).
  static constexpr int kLanes = detail::kGemmVectorBytes / static_cast<int>(sizeof(T)) > 0 ? detail::kGemmVectorBytes / static_cast<int>(sizeof(T)) : 1;
  static constexpr int kRows = detail::kGemmVectorRegisters >= 32 ? 8 : 4;
  static constexpr std::int64_t kBlockRows = 64;  // rows sharing one copy of a K^T tile
  static constexpr std::int64_t kMaxCols = 256;   // columns of a tile at most
  static constexpr std::int64_t kPack = 8192;     // elements of the K^T tile buffer (32 KB of floats)
  // The tile's width for head size d: d rows of it fit kPack elements (a
  // vector's width at least); a multiple of the vector width.
  static std::int64_t cols(std::int64_t d) {
    const std::int64_t fit = kPack / std::max<std::int64_t>(d, 1);
    const std::int64_t w = std::min(kMaxCols, fit) / kLanes * kLanes;
    return std::max<std::int64_t>(w, kLanes);
  }
};

namespace detail {

// Scores of rows r0 .. r0 + rows of Q (rows <= kRows) against the tile's
// columns [0, cols) (cols whole vectors, the copy zero past its last
// column): s[r][j] = scale * sum_c q[r][c] kt[c][j]. A register tile of
// kRows x one vector (GCC vector extensions, as gemm.hpp's micro-kernel):
// each step of c one load of K^T, kRows broadcasts of Q, kRows FMAs.
template <class T>
inline void attention_scores(const AttentionMatrices<T>& a, std::int64_t d, std::int64_t r0, int rows, const T* kt,
                             std::int64_t width, std::int64_t cols, T scale, T (*s)[AttentionTile<T>::kMaxCols]) {
  constexpr int R = AttentionTile<T>::kRows, L = AttentionTile<T>::kLanes;
  typedef T Vec __attribute__((vector_size(L * sizeof(T))));
  const T* q[R];
  for (int r = 0; r < R; ++r) q[r] = a.q + (r0 + std::min(r, rows - 1)) * a.q_row;  // past the last row: a copy of it
  for (std::int64_t j = 0; j < cols; j += L) {
    Vec acc[R] = {};
#pragma GCC unroll 4
    for (std::int64_t c = 0; c < d; ++c) {
      Vec k;
      std::memcpy(&k, kt + c * width + j, sizeof k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] += q[r][c * a.q_col] * k;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Vec v = scale * acc[r];
      std::memcpy(s[r] + j, &v, sizeof v);
    }
  }
}

// o[r][e] = alpha[r] o[r][e] + sum_{j < cols} p[r][j] v[j0 + j][e] for rows
// r0 .. r0 + rows (first: o[r][e] = the sum, O not read before). V's rows
// a vector of columns at a time: each step of j one load of V, kRows
// broadcasts of p, kRows FMAs.
template <class T>
inline void attention_values(const AttentionMatrices<T>& a, std::int64_t dv, std::int64_t r0, int rows, std::int64_t j0,
                             std::int64_t cols, const T (*p)[AttentionTile<T>::kMaxCols], const T* alpha, bool first) {
  constexpr int R = AttentionTile<T>::kRows, L = AttentionTile<T>::kLanes;
  typedef T Vec __attribute__((vector_size(L * sizeof(T))));
  for (std::int64_t e = 0; e < dv; e += L) {
    const int lanes = static_cast<int>(std::min<std::int64_t>(L, dv - e));
    Vec acc[R] = {};
    const T* v = a.v + j0 * a.v_row + e * a.v_col;
    const bool whole = lanes == L && a.v_col == 1;  // whole vectors of contiguous V rows
#pragma GCC unroll 4
    for (std::int64_t j = 0; j < cols; ++j, v += a.v_row) {
      Vec vj;
      if (whole) {
        std::memcpy(&vj, v, sizeof vj);
      } else {
        T part[L] = {};
        for (int l = 0; l < lanes; ++l) part[l] = v[l * a.v_col];
        std::memcpy(&vj, part, sizeof vj);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] += p[r][j] * vj;
    }
    for (int r = 0; r < rows; ++r) {
      T* o = a.o + (r0 + r) * a.o_row + e * a.o_col;
      if (lanes == L && a.o_col == 1) {
        // A whole vector of a contiguous row in one store: the loops below
        // became a variable-length copy (rep movs, ~30 cycles to start; a
        // ninth of the tiny LM's heads).
        Vec prev;
        if (!first) std::memcpy(&prev, o, sizeof prev);
        const Vec sum = first ? acc[r] : alpha[r] * prev + acc[r];
        std::memcpy(o, &sum, sizeof sum);
        continue;
      }
      T out[L];
      std::memcpy(out, &acc[r], sizeof out);
      if (first) {
        for (int l = 0; l < lanes; ++l) o[l * a.o_col] = out[l];
      } else {
        for (int l = 0; l < lanes; ++l) o[l * a.o_col] = alpha[r] * o[l * a.o_col] + out[l];
      }
    }
  }
}

// K^T's columns [j0, j0 + cols) into kt (row c at kt + c * width),
// contiguous, zero from cols to padded. K^T is usually a transposed view of
// K's rows (kt_row 1): blocks of kLanes keys by kLanes of their elements
// transposed in registers where the target's vectors allow (transpose.hpp,
// as the GEMM packs a transposed B; read down and written across one by
// one it took a seventh of the tiny LM's heads), the rest one by one.
template <class T>
inline void pack_keys(const AttentionMatrices<T>& a, std::int64_t d, std::int64_t j0, std::int64_t cols, std::int64_t padded, T* kt,
                      std::int64_t width) {
  const T* src = a.kt + j0 * a.kt_col;
  std::int64_t done = 0;  // the columns packed in whole blocks
#if defined(__AVX512F__)
  constexpr int L = 64 / static_cast<int>(sizeof(T));
  if constexpr (transposes_in_registers<T, L>) {
    if (a.kt_row == 1 && d % L == 0) {
      for (; done + L <= cols; done += L)
        for (std::int64_t c = 0; c < d; c += L) transpose_block<T, L>(src + done * a.kt_col + c, a.kt_col, kt + c * width + done, width);
    }
  }
#endif
  for (std::int64_t c = 0; c < d; ++c) {
    T* dst = kt + c * width;
    const T* row = src + c * a.kt_row;
    for (std::int64_t j = done; j < cols; ++j) dst[j] = row[j * a.kt_col];
    std::fill(dst + cols, dst + padded, T(0));
  }
}

#if defined(__AVX512F__)
// The softmax step of a register tile of 8 float rows (AttentionTile's
// kRows on AVX-512) over the scores s[r][0, 16 V) (V > 0: that many
// vectors, a constant, so that the loops unroll into straight code; 0: the
// runtime count `vectors`): row r keeps kept[r] columns (0: none; its p is
// 0). As the portable loop in attention_softmax_rows (the row's max,
// exp(s - max) by the same exp_vector, the online rescale alpha), but the
// eight rows side by side: their maxes and sums folded together
// (math::detail::fold_rows8_max, _add) instead of a horizontal reduction
// a row, each a call, loops that branch on the row's length and a chain of
// dependent shuffles. The same sums in the same order as exp_minus_max's
// (a lane the row leaves out adds +0), so the same bits.
template <int V>
inline void attention_softmax_rows8(float (*s)[AttentionTile<float>::kMaxCols], const std::int64_t* kept, int vectors, bool first,
                                    float* row_max, float* row_sum, float* alpha) {
  const int nv = V > 0 ? V : vectors;
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __mmask16 keep[8][V > 0 ? V : AttentionTile<float>::kMaxCols / 16];  // the lanes of vector q row r keeps
  __m512 acc[8];
  for (int r = 0; r < 8; ++r) {
    const __m512i left = _mm512_set1_epi32(static_cast<int>(kept[r]));
    acc[r] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) {
      keep[r][q] = _mm512_cmpgt_epi32_mask(left, _mm512_add_epi32(iota, _mm512_set1_epi32(16 * q)));
      acc[r] = _mm512_mask_max_ps(acc[r], keep[r][q], _mm512_loadu_ps(s[r] + 16 * q), acc[r]);
    }
  }
  alignas(64) float folded[16];
  _mm512_store_ps(folded, math::detail::fold_rows8_max(acc));
  float shift[8];
  for (int r = 0; r < 8; ++r) {
    const float tile_max = folded[r < 4 ? 4 * r : 4 * (r - 4) + 2];
    alpha[r] = 1.0f;
    shift[r] = 0.0f;  // a row that keeps nothing: every lane masked out
    if (kept[r] <= 0) continue;
    if (!first) {
      const float next = std::max(row_max[r], tile_max);
      alpha[r] = math::exp(row_max[r] - next);
      row_max[r] = next;
    } else {
      row_max[r] = tile_max;
    }
    shift[r] = row_max[r];
  }
  for (int r = 0; r < 8; ++r) {
    const __m512 sh = _mm512_set1_ps(shift[r]);
    acc[r] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) {
      const __m512 e = _mm512_maskz_mov_ps(keep[r][q], math::detail::exp_vector<false, true>(_mm512_sub_ps(_mm512_loadu_ps(s[r] + 16 * q), sh)));
      _mm512_storeu_ps(s[r] + 16 * q, e);  // columns the row leaves out: 0, they add nothing
      acc[r] = _mm512_add_ps(acc[r], e);
    }
  }
  _mm512_store_ps(folded, math::detail::fold_rows8_add(acc));
  for (int r = 0; r < 8; ++r) {
    if (kept[r] <= 0) continue;
    const float tile_sum = folded[r < 4 ? 4 * r : 4 * (r - 4) + 2];
    row_sum[r] = first ? tile_sum : alpha[r] * row_sum[r] + tile_sum;
  }
}
#endif

// The softmax step of a register tile's rows, one row at a time (see attention_softmax_rows8).
template <math::KernelFloat T>
inline void attention_softmax_rows(T (*s)[AttentionTile<T>::kMaxCols], const std::int64_t* kept, std::int64_t used, bool first, T* row_max,
                                   T* row_sum, T* alpha) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && AttentionTile<T>::kRows == 8) {
    // The tiny LM's heads (64 keys): 1 to 4 vectors, each count its own straight code.
    switch (const int vectors = static_cast<int>((used + 15) / 16)) {
      case 1: attention_softmax_rows8<1>(s, kept, vectors, first, row_max, row_sum, alpha); break;
      case 2: attention_softmax_rows8<2>(s, kept, vectors, first, row_max, row_sum, alpha); break;
      case 3: attention_softmax_rows8<3>(s, kept, vectors, first, row_max, row_sum, alpha); break;
      case 4: attention_softmax_rows8<4>(s, kept, vectors, first, row_max, row_sum, alpha); break;
      default: attention_softmax_rows8<0>(s, kept, vectors, first, row_max, row_sum, alpha);
    }
    return;
  }
#endif
  for (int r = 0; r < AttentionTile<T>::kRows; ++r) {
    const std::int64_t n = kept[r];
    alpha[r] = T(1);
    if (n > 0) {
      T& mx = row_max[r];
      T& sum = row_sum[r];
      const T tile_max = math::max_row(s[r], n);
      if (first) {
        mx = tile_max;
        sum = math::exp_minus_max(s[r], s[r], mx, n);
      } else {
        const T next = std::max(mx, tile_max);
        alpha[r] = math::exp(mx - next);
        mx = next;
        sum = alpha[r] * sum + math::exp_minus_max(s[r], s[r], mx, n);
      }
    }
    std::fill(s[r] + std::max<std::int64_t>(n, 0), s[r] + used, T(0));  // columns the row leaves out add nothing
  }
}

// Rows [i0, i1) of one matrix, i1 - i0 <= kBlockRows.
template <math::KernelFloat T>
inline void attention_block(const AttentionMatrices<T>& a, const AttentionShape& sh, T scale, std::int64_t i0, std::int64_t i1) {
  using Tile = AttentionTile<T>;
  constexpr int R = Tile::kRows, L = Tile::kLanes;
  const std::int64_t width = Tile::cols(sh.d);
  // The scores of a group of rows, then K^T's tile (d x width, at most
  // kPack elements but for d > kPack / kLanes): a buffer per thread,
  // allocated at its first call (as the GEMM's packing buffers).
  thread_local GemmBuffer<T> buffer;
  T* const base = buffer.get(static_cast<std::size_t>(R * Tile::kMaxCols + std::max(sh.d, std::int64_t{1}) * width));
  T(*s)[Tile::kMaxCols] = reinterpret_cast<T(*)[Tile::kMaxCols]>(base);
  T* const kt = base + R * Tile::kMaxCols;
  T row_max[Tile::kBlockRows], row_sum[Tile::kBlockRows];
  // The columns row i keeps, and those of the block's last row (the most).
  auto kept = [&](std::int64_t i) { return sh.causal ? std::min(i + 1, sh.m) : sh.m; };
  const std::int64_t end = kept(i1 - 1);
  for (std::int64_t j0 = 0; j0 < end; j0 += width) {
    const std::int64_t cols = std::min(width, end - j0), padded = (cols + L - 1) / L * L;
    pack_keys(a, sh.d, j0, cols, padded, kt, width);
    const bool first = j0 == 0;
    for (std::int64_t r0 = i0; r0 < i1; r0 += R) {
      const int rows = static_cast<int>(std::min<std::int64_t>(R, i1 - r0));
      std::int64_t used = 0;  // the columns of this tile any of the rows keeps
      for (int r = 0; r < rows; ++r) used = std::max(used, std::min(cols, kept(r0 + r) - j0));
      if (used <= 0) continue;
      attention_scores(a, sh.d, r0, rows, kt, width, (used + L - 1) / L * L, scale, s);
      T alpha[R];
      std::int64_t row_kept[R];  // the columns of this tile row r keeps
      for (int r = 0; r < R; ++r) row_kept[r] = r < rows ? std::max<std::int64_t>(0, std::min(cols, kept(r0 + r) - j0)) : 0;
      attention_softmax_rows(s, row_kept, used, first, row_max + (r0 - i0), row_sum + (r0 - i0), alpha);
      attention_values(a, sh.dv, r0, rows, j0, used, s, alpha, first);
    }
  }
  for (std::int64_t i = i0; i < i1; ++i) {
    T* o = a.o + i * a.o_row;
    if (end <= 0) {  // no keys: the product with an empty V is 0
      for (std::int64_t e = 0; e < sh.dv; ++e) o[e * a.o_col] = T(0);
      continue;
    }
    const T inv = T(1) / row_sum[i - i0];
    for (std::int64_t e = 0; e < sh.dv; ++e) o[e * a.o_col] *= inv;
  }
}

}  // namespace detail

// O's rows [i0, i1) of one matrix: O[i, :] = sum_j softmax_j(scale * Q[i, :]
// K^T[:, j]) V[j, :] over the columns j <= i (causal) or all m.
template <math::KernelFloat T>
inline void attention_rows(const AttentionMatrices<T>& a, const AttentionShape& sh, T scale, std::int64_t i0, std::int64_t i1) {
  for (std::int64_t b = i0; b < i1; b += AttentionTile<T>::kBlockRows)
    detail::attention_block(a, sh, scale, b, std::min(i1, b + AttentionTile<T>::kBlockRows));
}

}  // namespace wfgen::rt
