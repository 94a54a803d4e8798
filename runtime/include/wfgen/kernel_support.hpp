// What generated kernels use at run time: loop planning over strided views
// (call-with-view at build time), the std-only GEMM (gemm.hpp), and the type-erased
// kernel table the VM dispatches through. Std-only, header-only.
// The kernel layer: it includes error.hpp, parallel.hpp and
// runtime_types.hpp, never the model API (runtime.hpp).
//
// A generated kernel writes only the innermost loop of its body; LoopNest
// decides everything that depends on run-time strides:
//  - dims of size 1 are dropped, the rest are ordered by the strides of one
//    operand (the output), largest outside, so the inner loop is the one
//    that walks memory contiguously when there is such a dim;
//  - adjacent dims that are contiguous in every operand are merged, so a
//    contiguous 100x100 tensor is one loop of 10000;
//  - with a grain > 0, the iteration space is split across the runtime's
//    threads in chunks of at least `grain` elements;
//  - with `tiles` (element-wise kernels, whose elements are independent),
//    when an operand walks the inner dim with a stride (a transposed
//    operand, an NCHW <-> NHWC permute) and has a dim of smaller stride, that
//    dim becomes the second innermost and the two inner dims run in
//    kTileSide x kTileSide blocks: the strided operand is then read a few cache
//    lines at a time, each line reused by the block's rows, instead of one
//    cache line (and often one TLB entry) per element.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "wfgen/attention.hpp"
#include "wfgen/depthwise.hpp"
#include "wfgen/winograd.hpp"
#include "wfgen/pooling.hpp"
#include "wfgen/transpose.hpp"
#include "wfgen/error.hpp"
#include "wfgen/gemm.hpp"
#include "wfgen/order_key.hpp"
#include "wfgen/parallel.hpp"
#include "wfgen/runtime_types.hpp"

#if defined(__SSE2__)
#include <immintrin.h>  // stream_store's non-temporal stores
#endif

namespace wfgen::rt {

// Rows and columns of a block when a LoopNest runs in tiles: 64 x 64, so a
// transposed f32 operand is read 256 bytes (four cache lines) at a time and
// its copy (TileOperand) takes 16 KiB of L1. (32 x 32 blocks read two lines
// at a time: 1.7x slower on add_2048x2048_transposed_a, bench/.)
inline constexpr std::int64_t kTileSide = 64;

namespace detail {
inline std::int64_t abs64(std::int64_t v) { return v < 0 ? -v : v; }
}  // namespace detail

template <int R, int N>
class LoopNest {
 public:
  using Strides = std::array<std::int64_t, R>;

  // `order_by` is the operand whose strides decide the loop order; `tiles`
  // allows blocking the two inner dims (see above).
  LoopNest(const std::array<std::int64_t, R>& shape, const std::array<Strides, N>& strides, int order_by = N - 1,
           bool tiles = false) {
    std::array<int, R> dims{};
    int kept = 0;
    total_ = 1;
    for (int d = 0; d < R; ++d) {
      total_ *= shape[d];
      if (shape[d] != 1) dims[kept++] = d;
    }
    // Largest stride outermost; stable, so equal strides keep their order.
    // Insertion sort: R is at most 8, and std::stable_sort allocates a
    // buffer on every call (most of the cost of a kernel on 16 elements).
    for (int i = 1; i < kept; ++i) {
      const int d = dims[i];
      int j = i;
      for (; j > 0 && detail::abs64(strides[order_by][dims[j - 1]]) < detail::abs64(strides[order_by][d]); --j) dims[j] = dims[j - 1];
      dims[j] = d;
    }
    rank_ = 0;
    for (int i = 0; i < kept; ++i) {
      int d = dims[i];
      if (rank_ > 0 && mergeable(rank_ - 1, shape[d], d, strides)) {
        // The previous (outer) dim steps exactly over this one in every operand.
        shape_[rank_ - 1] *= shape[d];
        for (int k = 0; k < N; ++k) strides_[k][rank_ - 1] = strides[k][d];
        continue;
      }
      shape_[rank_] = shape[d];
      for (int k = 0; k < N; ++k) strides_[k][rank_] = strides[k][d];
      ++rank_;
    }
    if (tiles) plan_tiles();
  }

  // When tiled(): calls tile(off, row_step, col_step, n_rows, n_cols) for
  // each block, off[k] being operand k's element offset of the block's
  // first element and row_step[k] / col_step[k] its strides along the
  // block's rows and columns (the kernel can then copy a transposed
  // operand's block once, TileOperand). Requires tiled().
  template <class F>
  void run_tiles(std::int64_t grain, F&& tile) const {
    if (total_ != 0) for_each_tile(grain, tile);
  }

  std::int64_t total() const { return total_; }
  int rank() const { return rank_; }
  // Whether run() goes in kTileSide x kTileSide blocks of the two inner dims.
  bool tiled() const { return tiled_; }
  std::int64_t inner_size() const { return rank_ == 0 ? 1 : shape_[rank_ - 1]; }

  // True when every operand walks the inner loop with stride 1.
  bool inner_contiguous() const {
    if (rank_ == 0) return true;
    for (int k = 0; k < N; ++k)
      if (strides_[k][rank_ - 1] != 1) return false;
    return true;
  }

  // Calls row(off, step, n) for runs of n elements along the inner dim;
  // off[k] is operand k's element offset of the run's first element and
  // step[k] its inner stride. grain 0 keeps everything on this thread.
  template <class F>
  void run(std::int64_t grain, F&& row) const {
    if (total_ == 0) return;
    if (tiled_) {
      auto rows = [&](const std::int64_t* off, const std::int64_t* row_step, const std::int64_t* col_step, std::int64_t n_rows,
                      std::int64_t n_cols) {
        std::array<std::int64_t, N> at{};
        for (std::int64_t r = 0; r < n_rows; ++r) {
          for (int k = 0; k < N; ++k) at[k] = off[k] + r * row_step[k];
          row(at.data(), col_step, n_cols);
        }
      };
      for_each_tile(grain, rows);
      return;
    }
    if (grain <= 0 || total_ <= grain) {
      chunk(0, total_, row);
      return;
    }
    parallel_for(0, total_, grain, [&](std::int64_t lo, std::int64_t hi) { chunk(lo, hi, row); });
  }

 private:
  // The first operand that walks the inner dim with a stride (not 0 or 1)
  // and has an outer dim of smaller stride: that dim moves next to the
  // inner one (the order of the outer dims does not matter to the result)
  // and the two run in tiles.
  void plan_tiles() {
    if (rank_ < 2) return;
    const int inner = rank_ - 1;
    for (int k = 0; k < N; ++k) {
      const std::int64_t s = detail::abs64(strides_[k][inner]);
      if (s <= 1) continue;
      int best = -1;
      for (int d = 0; d < inner; ++d) {
        const std::int64_t sd = detail::abs64(strides_[k][d]);
        if (sd != 0 && sd < s && (best < 0 || sd < detail::abs64(strides_[k][best]))) best = d;
      }
      if (best < 0) continue;
      for (int d = best; d < inner - 1; ++d) {
        std::swap(shape_[d], shape_[d + 1]);
        for (int j = 0; j < N; ++j) std::swap(strides_[j][d], strides_[j][d + 1]);
      }
      tiled_ = true;
      return;
    }
  }

  // Tiles: rows (dim rank_ - 2) and columns (the inner dim) in kTileSide x kTileSide
  // blocks. A work item is one block of kTileSide rows across every column
  // block, for one index of the outer dims; items are what the threads
  // share.
  template <class F>
  void for_each_tile(std::int64_t grain, F& tile) const {
    const int inner = rank_ - 1;
    const std::int64_t rows = shape_[inner - 1], cols = shape_[inner];
    const std::int64_t row_blocks = (rows + kTileSide - 1) / kTileSide;
    std::int64_t outer = 1;
    for (int d = 0; d < inner - 1; ++d) outer *= shape_[d];
    const std::int64_t items = outer * row_blocks;
    auto work = [&](std::int64_t lo, std::int64_t hi) {
      std::array<std::int64_t, N> off{}, row_step{}, col_step{};
      for (int k = 0; k < N; ++k) {
        row_step[k] = strides_[k][inner - 1];
        col_step[k] = strides_[k][inner];
      }
      for (std::int64_t it = lo; it < hi; ++it) {
        std::int64_t rest = it / row_blocks;
        const std::int64_t r0 = (it % row_blocks) * kTileSide, n_rows = std::min(kTileSide, rows - r0);
        std::array<std::int64_t, N> base{};
        for (int d = inner - 2; d >= 0; --d) {
          const std::int64_t i = rest % shape_[d];
          rest /= shape_[d];
          for (int k = 0; k < N; ++k) base[k] += i * strides_[k][d];
        }
        for (std::int64_t c0 = 0; c0 < cols; c0 += kTileSide) {
          for (int k = 0; k < N; ++k) off[k] = base[k] + r0 * row_step[k] + c0 * col_step[k];
          tile(off.data(), row_step.data(), col_step.data(), n_rows, std::min(kTileSide, cols - c0));
        }
      }
    };
    const std::int64_t per_item = std::min(kTileSide, rows) * cols;
    if (grain <= 0 || total_ <= grain) {
      work(0, items);
      return;
    }
    parallel_for(0, items, std::max<std::int64_t>(1, grain / std::max<std::int64_t>(per_item, 1)), work);
  }

  bool mergeable(int outer, std::int64_t inner_size, int inner_dim, const std::array<Strides, N>& strides) const {
    for (int k = 0; k < N; ++k)
      if (strides_[k][outer] != strides[k][inner_dim] * inner_size) return false;
    return true;
  }

  // Elements [lo, hi) in loop order.
  template <class F>
  void chunk(std::int64_t lo, std::int64_t hi, F& row) const {
    std::array<std::int64_t, N> step{};
    if (rank_ == 0) {
      std::array<std::int64_t, N> off{};
      row(off.data(), step.data(), std::int64_t{1});
      return;
    }
    const int inner = rank_ - 1;
    const std::int64_t n = shape_[inner];
    for (int k = 0; k < N; ++k) step[k] = strides_[k][inner];
    // Start position: outer index of element lo, then walk rows as an odometer.
    std::array<std::int64_t, R + 1> idx{};
    std::int64_t rest = lo / n;
    std::int64_t col = lo % n;
    for (int d = inner - 1; d >= 0; --d) {
      idx[d] = rest % shape_[d];
      rest /= shape_[d];
    }
    std::array<std::int64_t, N> base{};
    for (int k = 0; k < N; ++k) {
      std::int64_t o = 0;
      for (int d = 0; d < inner; ++d) o += idx[d] * strides_[k][d];
      base[k] = o;
    }
    std::int64_t pos = lo;
    while (pos < hi) {
      std::int64_t len = std::min(n - col, hi - pos);
      std::array<std::int64_t, N> off;
      for (int k = 0; k < N; ++k) off[k] = base[k] + col * step[k];
      row(off.data(), step.data(), len);
      pos += len;
      col = 0;
      // Next row: increment the odometer of outer dims.
      for (int d = inner - 1; d >= 0; --d) {
        ++idx[d];
        for (int k = 0; k < N; ++k) base[k] += strides_[k][d];
        if (idx[d] < shape_[d]) break;
        for (int k = 0; k < N; ++k) base[k] -= strides_[k][d] * shape_[d];
        idx[d] = 0;
      }
    }
  }

  int rank_ = 0;
  bool tiled_ = false;
  std::int64_t total_ = 1;
  std::array<std::int64_t, R + 1> shape_{};
  std::array<std::array<std::int64_t, R + 1>, N> strides_{};
};

// The first R - K entries of a shape or strides array (the batch dims).
template <std::size_t K, std::size_t R>
std::array<std::int64_t, R - K> head(const std::array<std::int64_t, R>& a) {
  static_assert(K <= R, "head<K> of a shorter array");
  std::array<std::int64_t, R - K> out{};
  for (std::size_t d = 0; d < R - K; ++d) out[d] = a[d];
  return out;
}

// An element used as an index (gather, one_hot): -1 when it is not a whole
// number in range, so a kernel never converts NaN or a huge value (UB).
template <class T>
std::int64_t index_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!(v >= T(0)) || v >= T(9.0e18) || v != static_cast<T>(static_cast<std::int64_t>(v))) return -1;
  }
  return static_cast<std::int64_t>(v);
}

// One input of a block of LoopNest::run_tiles, read row by row. An input
// that walks the block's columns with a stride (a transposed operand) is
// copied first into a block of its own, reading the source along its
// smaller stride (whole cache lines of a transposed operand), so that each
// row then reads it with step 1 and the kernel's row loop vectorises as for
// contiguous operands. Inputs with column step 0 (broadcast) or 1 are read
// in place.
template <class T>
class TileOperand {
  static_assert(std::is_const_v<T>, "only inputs are copied: the kernel writes its output in place");

 public:
  TileOperand(T* data, std::int64_t row_step, std::int64_t col_step, std::int64_t rows, std::int64_t cols) noexcept {
    if (col_step == 0 || col_step == 1) {
      data_ = data;
      row_step_ = row_step;
      step_ = col_step;
      return;
    }
    if (detail::abs64(row_step) <= detail::abs64(col_step)) {
      for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t r = 0; r < rows; ++r) block_[r * kTileSide + c] = data[r * row_step + c * col_step];
    } else {
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) block_[r * kTileSide + c] = data[r * row_step + c * col_step];
    }
    data_ = block_;
    row_step_ = kTileSide;
    step_ = 1;
  }
  TileOperand(const TileOperand&) = delete;
  TileOperand& operator=(const TileOperand&) = delete;

  // Row r's first element; the row's elements are step() apart.
  T* row(std::int64_t r) const noexcept { return data_ + r * row_step_; }
  std::int64_t step() const noexcept { return step_; }

 private:
  alignas(64) std::remove_const_t<T> block_[kTileSide * kTileSide];
  T* data_;
  std::int64_t row_step_, step_;
};

// --- rows <-> lanes: the tiles of the fused row kernels ---------------------
//
// A fused row kernel on rows shorter than a few vectors works on `Lanes`
// rows at a time, one per lane of a 64-byte vector, in a column-major tile:
// tile[c * Lanes + l] is element c of row l. These copy rows into such a
// tile and back. Blocks of Lanes columns are transposed in registers
// (transpose.hpp); the columns left over are copied one by one.

// tile[c * Lanes + l] = rows[l * row_stride + c] for l < Lanes, c < len.
// (The tile is the kernel's own array: __restrict lets the copy of the
// columns left over build each column as one vector.)
template <int Lanes, class T>
void rows_to_lanes(const T* __restrict rows, std::int64_t row_stride, std::int64_t len, T* __restrict tile) {
  std::int64_t c = 0;
#if defined(__AVX512F__)
  if constexpr (detail::transposes_in_registers<T, Lanes>)
    for (; c + Lanes <= len; c += Lanes) detail::transpose_block<T, Lanes>(rows + c, row_stride, tile + c * Lanes, Lanes);
#endif
  for (; c < len; ++c)
    for (int l = 0; l < Lanes; ++l) tile[c * Lanes + l] = rows[l * row_stride + c];
}

// rows[l * row_stride + c] = tile[c * Lanes + l]: the inverse of rows_to_lanes.
template <int Lanes, class T>
void lanes_to_rows(const T* __restrict tile, std::int64_t len, T* __restrict rows, std::int64_t row_stride) {
  std::int64_t c = 0;
#if defined(__AVX512F__)
  if constexpr (detail::transposes_in_registers<T, Lanes>)
    for (; c + Lanes <= len; c += Lanes) detail::transpose_block<T, Lanes>(tile + c * Lanes, Lanes, rows + c, row_stride);
#endif
  // Column by column: one vector load of the tile, then a store per row.
  for (; c < len; ++c)
    for (int l = 0; l < Lanes; ++l) rows[l * row_stride + c] = tile[c * Lanes + l];
}

// dst[0, n) = src[0, n) for arrays that do not overlap, as memcpy copies
// short runs but inline: two moves of a fixed size that overlap in the
// middle (16 floats: two 32-byte moves), a loop of 64-byte moves past 64
// bytes. A convolution's rows are short (12 columns in the CNN's second
// layer), where a vector loop does not start and its scalar remainder loop
// costs 3x the copy, and masked AVX-512 moves stall the loads behind them
// (bench/: im2col 0.73 -> 0.37 ms masked, -> 0.28 ms so).
template <class T>
inline void copy_run(T* __restrict dst, const T* __restrict src, std::int64_t n) noexcept {
  auto* d = reinterpret_cast<unsigned char*>(dst);
  const auto* s = reinterpret_cast<const unsigned char*>(src);
  const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(T));
  auto two = [&](auto size) {  // [0, size) and [bytes - size, bytes), both read before either is written
    constexpr std::int64_t k = decltype(size)::value;
    typedef unsigned char V __attribute__((vector_size(k)));  // a register, not a stack array
    V a, b;
    std::memcpy(&a, s, k);
    std::memcpy(&b, s + bytes - k, k);
    std::memcpy(d, &a, k);
    std::memcpy(d + bytes - k, &b, k);
  };
  if (bytes >= 64) {
    std::int64_t at = 0;
    for (; at + 64 <= bytes; at += 64) std::memcpy(d + at, s + at, 64);
    if (at < bytes) std::memcpy(d + bytes - 64, s + bytes - 64, 64);
  } else if (bytes >= 32) {
    two(std::integral_constant<std::int64_t, 32>{});
  } else if (bytes >= 16) {
    two(std::integral_constant<std::int64_t, 16>{});
  } else if (bytes >= 8) {
    two(std::integral_constant<std::int64_t, 8>{});
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// A row of Lanes values of T held in one vector register (64 bytes):
// col2im builds each row of its image from every (kh, kw) that reaches it,
// and those rows are short (12 and 14 columns in the CNN), each source row
// shifted by a column per kw. With AVX-512 a source row is one masked load
// (the lanes outside [lo, hi) read nothing); a lane-by-lane loop with a
// select per lane compiled to scalar adds and branches, and a division per
// (row, kh) came with it: the CNN's second layer (64 x 16 planes of 14 x 14,
// one thread) 562 -> 300 us.
template <class T, int Lanes>
struct LaneRow {
  typedef T V __attribute__((vector_size(Lanes * sizeof(T))));
  V v{};
#if defined(__AVX512F__)
  // One zmm register of floats or doubles: masked loads and stores.
  static constexpr bool kMasked = Lanes * sizeof(T) == 64 && (std::is_same_v<T, float> || std::is_same_v<T, double>);
  // Bits [lo, hi) set (hi <= Lanes <= 16).
  static std::uint32_t lane_mask(std::int64_t lo, std::int64_t hi) noexcept {
    return ((1u << hi) - 1u) & ~((1u << lo) - 1u);
  }
#endif

  // v[l] += row[at + l] for l in [lo, hi), 0 elsewhere (0 <= lo <= hi <=
  // Lanes); row[at + l] is read only for those l.
  void add(const T* row, std::int64_t at, std::int64_t lo, std::int64_t hi) noexcept {
#if defined(__AVX512F__)
    if constexpr (kMasked) {
      // The address of lane 0, computed as an integer: it may lie before
      // `row` (lo > 0 when at < 0), where no lane reads.
      const auto first = reinterpret_cast<std::uintptr_t>(row) + static_cast<std::uintptr_t>(at) * sizeof(T);
      const std::uint32_t mask = lane_mask(lo, hi);
      if constexpr (std::is_same_v<T, float>) {
        v += reinterpret_cast<V>(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), reinterpret_cast<const void*>(first)));
      } else {
        v += reinterpret_cast<V>(_mm512_maskz_loadu_pd(static_cast<__mmask8>(mask), reinterpret_cast<const void*>(first)));
      }
      return;
    }
#endif
    add_portable(row, at, lo, hi);
  }
  // add() without AVX-512: the lanes gathered into an array, then one add.
  void add_portable(const T* row, std::int64_t at, std::int64_t lo, std::int64_t hi) noexcept {
    T lanes[Lanes] = {};
    for (std::int64_t l = lo; l < hi; ++l) lanes[l] = row[at + l];
    V x;
    std::memcpy(&x, lanes, sizeof x);
    v += x;
  }

  // dst[l] = v[l] for l < n (n <= Lanes); nothing past dst + n is written.
  void store(T* dst, std::int64_t n) const noexcept {
#if defined(__AVX512F__)
    // One masked store: the loop below became a call to memmove, with the
    // register spilled to the stack first (4x the kernel's time).
    if constexpr (kMasked) {
      const std::uint32_t mask = lane_mask(0, n);
      if constexpr (std::is_same_v<T, float>) {
        _mm512_mask_storeu_ps(dst, static_cast<__mmask16>(mask), reinterpret_cast<__m512>(v));
      } else {
        _mm512_mask_storeu_pd(dst, static_cast<__mmask8>(mask), reinterpret_cast<__m512d>(v));
      }
      return;
    }
#endif
    if (n == Lanes) {
      std::memcpy(dst, &v, sizeof v);
      return;
    }
    for (std::int64_t l = 0; l < n; ++l) dst[l] = v[l];
  }
};

// dst[i] = src[2 i] for i < n, reading src[0 .. 2 (n - 1)] only: a
// stride-2 convolution's row of im2col. Two vectors of src make one of dst
// (the even lanes, one shuffle), the last vector placed to end at dst[n -
// 2] (overlapping the one before) and the last element alone, since its
// vector pair would read src[2 n - 1]. The scalar loop (a load and a store
// an element) took ResNet-18's first im2col (3 x 224 x 224, 7 x 7,
// stride 2: 1.8M elements) 0.64 ms.
template <class T>
inline void copy_every_other(T* __restrict dst, const T* __restrict src, std::int64_t n) noexcept {
  constexpr int L = 32 / static_cast<int>(sizeof(T));
  if constexpr ((sizeof(T) == 4 || sizeof(T) == 8) && L >= 4) {
    typedef T V __attribute__((vector_size(32)));
    auto even = [&]<std::size_t... P>(std::int64_t i, std::index_sequence<P...>) {
      V a, b;
      std::memcpy(&a, src + 2 * i, sizeof a);
      std::memcpy(&b, src + 2 * i + L, sizeof b);
      const V v = __builtin_shufflevector(a, b, static_cast<int>(2 * P)...);
      std::memcpy(dst + i, &v, sizeof v);
    };
    if (n > L) {
      std::int64_t i = 0;
      for (; i + L < n; i += L) even(i, std::make_index_sequence<L>{});
      if (i < n - 1) even(n - 1 - L, std::make_index_sequence<L>{});
      dst[n - 1] = src[2 * (n - 1)];
      return;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[2 * i];
}

// Rows of im2col: dst[x] = lo <= x < hi ? row[x Stride - shift] : 0 for x
// < n, the image's columns with padding around them, for many rows of one
// (n, shift, lo, hi): the zeros of the padding (a column or two), then one
// copy_run (Stride 1), copy_every_other (Stride 2) or a strided loop.
template <class T, int Stride = 1>
class PaddedRows {
 public:
  PaddedRows(std::int64_t n, std::int64_t shift, std::int64_t lo, std::int64_t hi) noexcept
      : n_(n), shift_(shift), lo_(std::clamp<std::int64_t>(lo, 0, n)), hi_(std::clamp<std::int64_t>(hi, lo_, n)) {}

  void copy(T* dst, const T* row) const noexcept {
    for (std::int64_t x = 0; x < lo_; ++x) dst[x] = T(0);
    const T* first = row + (lo_ * Stride - shift_);
    if constexpr (Stride == 1) {
      copy_run(dst + lo_, first, hi_ - lo_);
    } else if constexpr (Stride == 2) {
      copy_every_other(dst + lo_, first, hi_ - lo_);
    } else {
      for (std::int64_t x = lo_; x < hi_; ++x) dst[x] = first[(x - lo_) * Stride];
    }
    for (std::int64_t x = hi_; x < n_; ++x) dst[x] = T(0);
  }

 private:
  std::int64_t n_, shift_, lo_, hi_;
};

// One (kh, kw) block of im2col's COL for one (n, c) plane, rows and
// columns of stride 1 on both sides: COL's row y (at dst + y ds, n
// elements) is the image's row iy = y sh + iy0 (at src + iy xs) through
// PaddedRows<T, stride> (columns [lo, hi) inside the image, from x stride
// - shift), zeros where iy is outside [0, h). Stride 1 or 2 (the caller's
// test), chosen once for the block, not per row.
template <class T, int Stride>
void padded_rows_block(T* dst, std::int64_t ds, const T* src, std::int64_t xs, std::int64_t rows, std::int64_t h,
                       std::int64_t iy0, std::int64_t sh, const PaddedRows<T, Stride>& r, std::int64_t n) {
  for (std::int64_t y = 0; y < rows; ++y, dst += ds) {
    const std::int64_t iy = y * sh + iy0;
    if (iy >= 0 && iy < h) r.copy(dst, src + iy * xs);
    else std::fill(dst, dst + n, T(0));
  }
}
template <class T>
void im2col_block(T* dst, std::int64_t ds, const T* src, std::int64_t xs, std::int64_t rows, std::int64_t h, std::int64_t iy0,
                  std::int64_t sh, std::int64_t n, std::int64_t shift, std::int64_t lo, std::int64_t hi, std::int64_t stride) {
  if (stride == 2) padded_rows_block(dst, ds, src, xs, rows, h, iy0, sh, PaddedRows<T, 2>(n, shift, lo, hi), n);
  else padded_rows_block(dst, ds, src, xs, rows, h, iy0, sh, PaddedRows<T, 1>(n, shift, lo, hi), n);
}

// Whether the contiguous ranges [a, a + na) and [b, b + nb) share no
// element. A fused row kernel stores a value it reuses in its output row
// only when that row overlaps no input row (compared as addresses, since
// the two pointers may point into different arrays).
template <class T, class U>
bool disjoint(const T* a, std::int64_t na, const U* b, std::int64_t nb) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 + static_cast<std::uintptr_t>(na) * sizeof(T) <= b0 || b0 + static_cast<std::uintptr_t>(nb) * sizeof(U) <= a0;
}

// Whether an element-wise kernel writes its output of `elements` elements of
// T with streaming stores (set_streaming_store_bytes, or
// set_streaming_result_bytes for a model's result).
// (Outputs smaller than one 256-byte block never stream: the size test
// comes first, so a kernel on a few elements does not pay for the call.)
template <class T>
bool streams_output(std::int64_t elements) noexcept {
  if (elements < 256 / static_cast<std::int64_t>(sizeof(T))) return false;
  const std::int64_t limit = detail::streaming_limit();
  return limit >= 0 && elements >= limit / static_cast<std::int64_t>(sizeof(T));
}

// dst[i] = value(i) for i in [0, n), with non-temporal stores where the
// target has them (x86-64). The values of each 256-byte block are computed
// into an L1-resident buffer first, by a loop the compiler vectorises like
// the plain one, then streamed out whole lines at a time; the few elements
// before the first 64-byte boundary and after the last full block are
// stored plainly. The fence makes the streamed data visible to other
// threads in order, as a plain store would be, before the kernel returns.
// stream_store<false> leaves the fence out, for a kernel that streams many
// short runs (a row kernel, row by row) and fences once with stream_fence()
// at the end of each thread's share: a fence waits for the write-combining
// buffers to drain, and one per 4 KiB row made a streamed softmax 12-20 %
// slower than a cached one (docs/performance-history.md).
template <bool kFence = true, class T, class F>
void stream_store(T* dst, std::int64_t n, F&& value) {
#if defined(__SSE2__)
  constexpr std::int64_t kLine = 64, kBlock = 256 / static_cast<std::int64_t>(sizeof(T));
  std::int64_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(dst + i) % kLine != 0; ++i) dst[i] = value(i);
  if (reinterpret_cast<std::uintptr_t>(dst + i) % kLine == 0) {
    alignas(kLine) T block[kBlock];
    for (; i + kBlock <= n; i += kBlock) {
      for (std::int64_t l = 0; l < kBlock; ++l) block[l] = value(i + l);
      auto* to = reinterpret_cast<char*>(dst + i);
      const auto* from = reinterpret_cast<const char*>(block);
#if defined(__AVX512F__)
      for (int b = 0; b < 256; b += 64)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(to + b), _mm512_load_si512(reinterpret_cast<const void*>(from + b)));
#elif defined(__AVX__)
      for (int b = 0; b < 256; b += 32)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(to + b), _mm256_load_si256(reinterpret_cast<const __m256i*>(from + b)));
#else
      for (int b = 0; b < 256; b += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(to + b), _mm_load_si128(reinterpret_cast<const __m128i*>(from + b)));
#endif
    }
    if constexpr (kFence) _mm_sfence();
  }
  for (; i < n; ++i) dst[i] = value(i);
#else
  for (std::int64_t i = 0; i < n; ++i) dst[i] = value(i);
#endif
}

// Asks for the n elements from p to come into L1 ahead of their loads, a
// prefetch per 64-byte line. A fused row kernel calls it on the row after
// next before it works on the current one: the hardware prefetcher does not
// run past a 4 KiB page, a row of 1024 floats, so each row's trip from
// memory waited for the last row's arithmetic (softmax 4096 x 1024: 1.96 ms,
// 1.5-1.6 ms with it; 1.1 ms for the same rows in cache. One row ahead:
// 1.60 ms; into L2 only, prefetcht1: 2.4 ms). A kernel with an exp pass
// instead prefetches a line a vector inside it (rt::math::exp_shifted's
// `ahead`), which beats this once the exp is cheap enough for the row's
// loads to wait on a queue of 64 prefetches.
template <class T>
inline void prefetch_row(const T* p, std::int64_t n) noexcept {
#if defined(__GNUC__)
  const char* bytes = reinterpret_cast<const char*>(p);
  const std::int64_t size = n * static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t o = 0; o < size; o += 64) __builtin_prefetch(bytes + o, 0, 3);
#else
  (void)p, (void)n;
#endif
}

// Orders the stream_store<false> stores of this thread before its later
// stores (and the pool's hand-back of its share), as plain stores are.
inline void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Calls f() from a function of its own that is never inlined: a kernel's
// streamed path goes through it, so that its loops stay out of the code of
// the kernel's common path (inlined there, they stopped the compiler from
// inlining that path's rows: +6 ns per call of a 16-element add; out of
// line, +3 ns, see docs/performance-history.md).
#if defined(__GNUC__)
#define WFGEN_NOINLINE __attribute__((noinline))
#else
#define WFGEN_NOINLINE
#endif
template <class F>
WFGEN_NOINLINE void out_of_line(F&& f) {
  f();
}

// Identity of reductions: the value an empty reduction starts from.
template <class T>
constexpr T lowest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
constexpr T highest_value() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// ---------------------------------------------------------------------------
// Type-erased kernels: what the VM and the tests dispatch through.

// A constructor-argument value passed to a kernel.
struct ScalarArg {
  std::int64_t i = 0;
  double f = 0;
  bool b = false;
  const std::int64_t* ints = nullptr;
  const double* floats = nullptr;
  std::int64_t count = 0;  // elements of ints/floats
};

// Compute kernels read and write through tensors[]; view kernels (transpose,
// permute) read tensors[0] and store the resulting view in tensors[1].
using KernelFn = void (*)(TensorRef* tensors, const ScalarArg* scalars);

struct KernelEntry {
  const char* name;    // "add_f32_r3"
  const char* node;    // "add"
  const char* device;  // "cpu"
  DType dtype;
  int rank;
  int n_tensors;
  int n_scalars;
  KernelFn fn;
};

namespace detail {

// view_of's error path, out of line and marked cold, so the check of every
// operand of every VM instruction stays a few inlined compares (this was
// most of the fixed cost of a one-kernel model call).
[[noreturn, gnu::cold, gnu::noinline]] inline void bad_operand(const TensorRef& t, DType dtype, int rank, const char* kernel,
                                                               const char* operand) {
  if (t.dtype != dtype) {
    fail(ErrorCode::DTypeMismatch, std::string(kernel) + ": operand " + operand + " has dtype " + dtype_name(t.dtype) +
                                       ", expected " + dtype_name(dtype));
  }
  if (t.rank != rank) {
    fail(ErrorCode::RankMismatch, std::string(kernel) + ": operand " + operand + " has rank " + std::to_string(t.rank) +
                                      ", expected " + std::to_string(rank));
  }
  fail(ErrorCode::NullBuffer, std::string(kernel) + ": operand " + operand + " has no data");
}

}  // namespace detail

// A typed view of a type-erased tensor; fail()s (an Error) on a dtype or
// rank mismatch, or a null pointer for a tensor that has elements.
template <class T, int R>
[[gnu::always_inline]] inline View<T, R> view_of(const TensorRef& t, const char* kernel, const char* operand) {
  if (t.dtype != dtype_of_v<T> || t.rank != R) [[unlikely]] {
    detail::bad_operand(t, dtype_of_v<T>, R, kernel, operand);
  }
  View<T, R> v;
  v.data = static_cast<T*>(t.data);
  for (int d = 0; d < R; ++d) {
    v.shape[d] = t.shape[d];
    v.strides[d] = t.strides[d];
  }
  if (v.data == nullptr) [[unlikely]] {
    bool empty = false;
    for (int d = 0; d < R; ++d) empty = empty || t.shape[d] == 0;
    if (!empty) detail::bad_operand(t, dtype_of_v<T>, R, kernel, operand);
  }
  return v;
}

}  // namespace wfgen::rt
