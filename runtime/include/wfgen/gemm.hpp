// Std-only GEMM: C = A * B for one matrix, any strides (elements).
// Included by kernel_support.hpp; header-only, portable C++ with GCC/Clang
// vector extensions (no intrinsics).
//
// A is M x K, B is K x N, C is M x N. Blocked for the caches as in GotoBLAS /
// BLIS: for each block of B (KC rows x NC columns), B is packed into NR-wide
// panels, then each block of A (MC rows x KC) is packed into MR-high panels,
// and the micro-kernel multiplies one A panel by one B panel into an MR x NR
// tile of C held in registers. An epilogue (a bias along the columns, then
// relu) is applied to the tile while it is in registers, after the last
// block of K; a general one (GemmEpilogue::block, any element-wise function
// of C and of other tensors: generated code's fused epilogues) on each
// block of C's rows just finished, while it is in L2.
//
// Threads: when C has at least two tiles of rows per thread, each thread
// takes one band of C's rows and runs the whole product on it, packing its
// own rows of A and its own copy of B's blocks: no thread reads what another
// wrote and none waits for another until the end. Otherwise (a short C) B's
// block is packed once, its panels shared out among the threads, and the
// threads take blocks of C's rows x columns, each packing its own rows of A.
// No thread waits for another inside a parallel_for (the pool may run every
// chunk on one thread).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "wfgen/gemm_choice.hpp"
#include "wfgen/parallel.hpp"
#include "wfgen/transpose.hpp"

namespace wfgen::rt {

// What gemm() applies to each element of C = A B (+ C) before storing it:
// c + bias[j * bias_stride] when `bias` is set, then max(c, 0) with `relu`.
// Then, when `block` is set, block(context, i, j, rows, cols) on each block
// of C (rows x cols from C[i][j], in the product's own rows and columns)
// whose sums are final (after the last block of K, after C's own values
// when accumulating): once per element, from any thread of the split, the
// block of rows just finished and still in L2 (rt::gemm: up to MC rows by
// a thread's columns) or the rows a thread's OpenBLAS call wrote
// (openblas_gemm). Made from a function object by
// gemm_epilogue(); called through a pointer, so the GEMM is not compiled
// again for each epilogue.
template <class T>
struct GemmEpilogue {
  const T* bias = nullptr;
  std::int64_t bias_stride = 1;
  bool relu = false;
  void (*block)(const void* context, std::int64_t i, std::int64_t j, std::int64_t rows, std::int64_t cols) = nullptr;
  const void* context = nullptr;
  bool any() const { return bias != nullptr || relu; }  // the part applied in registers
  // The bias and relu on one element of C's column j, outside the micro-kernel.
  T apply(T v, std::int64_t j) const {
    if (bias != nullptr) v += bias[j * bias_stride];
    if (relu) v = v > T(0) ? v : T(0);
    return v;
  }
};

// A GemmEpilogue that calls `f(i, j, rows, cols)` on each finished block of
// C; `f` must outlive the GEMM's call.
template <class T, class F>
GemmEpilogue<T> gemm_epilogue(const F& f) {
  GemmEpilogue<T> ep;
  ep.context = &f;
  ep.block = [](const void* context, std::int64_t i, std::int64_t j, std::int64_t rows, std::int64_t cols) {
    (*static_cast<const F*>(context))(i, j, rows, cols);
  };
  return ep;
}

// Below this many multiply-adds a product stays on one thread. 2^20 is
// 12-18 us of one core of the AVX-512 machine of docs/performance.md (the
// tiny LM's per-head output projections, 1024 x 16 x 64 forward and
// backward and their weight gradients 16 x 64 x 1024: 24 products, ~0.35 ms
// a step that did not scale at 2^21), against the pool's 0.2 us hand-off.
inline constexpr std::int64_t kGemmParallelWork = std::int64_t{1} << 20;
// Below this many in all a batch of products stays on one thread. Sharing a
// batch out costs the pool's hand-off (0.2 us with its workers spinning,
// bench/pool_handoff.cpp) and each product runs whole on one thread, so it
// pays from a few us of work: 2^18 multiply-adds of the small products are
// ~3.5 us on one core of the AVX-512 machine of docs/performance-history.md (the
// tiny LM's 16 per-head products of 64 x 16 x 64, 2^20: 14 us).
inline constexpr std::int64_t kGemmBatchParallelWork = std::int64_t{1} << 18;

// Whether one product of M x K by K x N is split across the threads: more
// than one thread, enough work, and not already inside a parallel_for
// (gemm and blas_gemm alike).
inline bool gemm_splits(std::int64_t M, std::int64_t N, std::int64_t K) {
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  return num_threads() > 1 && work >= static_cast<double>(kGemmParallelWork) && !detail::in_parallel_region();
}

// Whether a product of M x K by K x N is split across the threads along K
// (detail::gemm_split_k: blocks of K side by side, then added in order)
// rather than along C's rows or columns: enough work to split, a small C
// (at most kGemmSplitKMaxC elements: it and the blocks' partial products
// stay in L2) and a long K (at least 4 times each of M and N, and two
// blocks of kGemmSplitKBlock), as a weight gradient X^T dY over a batch's
// rows (the tiny LM's 64 x 64, 256 x 64 and 16 x 64 by K 1024). Split
// along C's rows, each thread packed the whole of the other operand for a
// part of little work. Measured (Zen 5, us at 1 -> 2 threads, chrt -f 1
// under load): OpenBLAS 64 x 64 x 1024 44 -> 33.5 (1.3x) before, 26.5
// after; rt::gemm 40 -> 24.4, and 64 x 256 x 1024 156 -> 124 before, 82
// after. A ResNet convolution's 256 x 196 x 2304 and 512 x 49 x 4608
// (OpenBLAS) lost 5-8 % split along K: C too large. The shape decides,
// not the threads: the blocks are the same at any thread count.
inline constexpr std::int64_t kGemmSplitKBlock = 256;
inline constexpr std::int64_t kGemmSplitKMaxC = 16384;
inline bool gemm_k_splits(std::int64_t M, std::int64_t N, std::int64_t K) {
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  return work >= static_cast<double>(kGemmParallelWork) && M * N <= kGemmSplitKMaxC && K >= 2 * kGemmSplitKBlock &&
         K >= 4 * std::max(M, N);
}

// The grain of a batch of products of M x K by K x N (a matmul over its
// batch dims, LoopNest::run), C's batch dims being `c_shape` / `c_strides`:
// 1 shares the matrices out among the threads, each product then on the
// thread that takes it; 0 keeps the batch on this thread and lets each
// product split itself (gemm, blas_gemm). The batch is shared when it is
// worth waking the pool for and each product alone is too small to split
// (a CNN's 64 per-image products of 32 x 144 x 144), or when there are
// enough products to keep every thread busy; never when two products write
// the same C (a batch stride 0), which then run one after the other.
template <std::size_t B>
std::int64_t gemm_batch_grain(const std::array<std::int64_t, B>& c_shape, const std::array<std::int64_t, B>& c_strides,
                              std::int64_t M, std::int64_t N, std::int64_t K) {
  std::int64_t count = 1;
  for (std::size_t d = 0; d < B; ++d) {
    if (c_shape[d] > 1 && c_strides[d] == 0) return 0;
    count *= c_shape[d];
  }
  const double one = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const std::int64_t threads = num_threads();
  if (count < 2 || threads < 2 || one * static_cast<double>(count) < static_cast<double>(kGemmBatchParallelWork)) return 0;
  return one < static_cast<double>(kGemmParallelWork) || count >= 2 * threads ? 1 : 0;
}

// Whether a tensor's batch dims (`strides`, over C's batch `c_shape`)
// continue its row dim (M rows `rs` apart): each batch stride is the
// extent times the stride of the dim inside it, so that row i of the batch
// folded into rows (gemm_folded_rows) is at i * rs. Dims of extent 1 do
// not count.
template <std::size_t B>
bool gemm_rows_continue(const std::array<std::int64_t, B>& c_shape, const std::array<std::int64_t, B>& strides, std::int64_t M,
                        std::int64_t rs) {
  std::int64_t next = M * rs;
  for (std::size_t d = B; d-- > 0;) {
    if (c_shape[d] == 1) continue;
    if (strides[d] != next) return false;
    next *= c_shape[d];
  }
  return true;
}

// The rows of one product that does the work of a whole batch, or 0. When
// B is shared by the batch (every batch stride of B 0, as a linear layer's
// weight broadcast over [batch context d]) and the batch dims of A and C
// continue their row dim (each batch stride is the extent times the stride
// of the dim inside it), the batch's products are the row blocks of one
// (count * M) x K by K x N product: one GEMM instead of `count` small ones
// (OpenBLAS packs B once, and the split over threads gets count * M rows).
// A and C keep their row and column strides, so no layout changes.
template <std::size_t B>
std::int64_t gemm_folded_rows(const std::array<std::int64_t, B>& c_shape, const std::array<std::int64_t, B>& a_strides,
                              const std::array<std::int64_t, B>& b_strides, const std::array<std::int64_t, B>& c_strides,
                              std::int64_t M, std::int64_t rsa, std::int64_t rsc) {
  if (M <= 0 || !gemm_rows_continue(c_shape, a_strides, M, rsa) || !gemm_rows_continue(c_shape, c_strides, M, rsc)) return 0;
  std::int64_t rows = M;
  for (std::size_t d = 0; d < B; ++d) {
    if (c_shape[d] == 1) continue;
    if (c_shape[d] <= 0 || b_strides[d] != 0) return 0;
    rows *= c_shape[d];
  }
  return rows > M ? rows : 0;
}

namespace detail {

// The target's vector registers (GCC/Clang vector extensions compile to
// them): their width and how many there are.
#if defined(__AVX512F__)
inline constexpr int kGemmVectorBytes = 64, kGemmVectorRegisters = 32;
#elif defined(__AVX__)
inline constexpr int kGemmVectorBytes = 32, kGemmVectorRegisters = 16;
#elif defined(__aarch64__)
inline constexpr int kGemmVectorBytes = 16, kGemmVectorRegisters = 32;
#else
inline constexpr int kGemmVectorBytes = 16, kGemmVectorRegisters = 16;
#endif

// Register tile and cache blocks. Floating point: a tile row is two vectors
// (NR = 2 VL) and the MR x 2 accumulators take 12 of 16 registers (6 x 16
// floats with AVX2) or 16 of 32 (8 x 32 floats with AVX-512): enough
// independent multiply-adds to cover the FMA latency on two ports, the rest
// for B's two vectors and the broadcasts of A. (6 x 32 and 12 x 32 with
// AVX-512 ran within 3 % of 8 x 32 on Zen 4.) Integers keep a narrower
// tile (no FMA; not performance-tuned).
// Cache blocks (elements): B's panel (KC x NR, at most 32 KB) stays in L1
// while the block of A (MC x KC) passes under it from L2; B's block (KC x
// NC, packed once and shared by the threads) is in L3. A larger KC means
// fewer passes over C and fewer calls of the micro-kernel: KC 512 was 4-7 %
// faster than 256 with AVX2 (f32, 512^3 and 1024^3).
template <class T>
struct GemmTile {
  static constexpr bool kFloat = std::is_floating_point_v<T>;
  static constexpr int kLanes = kGemmVectorBytes / static_cast<int>(sizeof(T)) > 0
                                    ? kGemmVectorBytes / static_cast<int>(sizeof(T))
                                    : 1;
  static constexpr int NR = kFloat ? 2 * kLanes : (64 / static_cast<int>(sizeof(T)) >= 16 ? 16 : 64 / static_cast<int>(sizeof(T)));
  static constexpr int VL = kLanes < NR ? kLanes : NR;
  static constexpr int NV = NR / VL;
  static constexpr int MR = kFloat && kGemmVectorRegisters >= 32 ? 8 : 6;
  static constexpr std::int64_t KC = std::min<std::int64_t>(512, 32768 / (NR * static_cast<std::int64_t>(sizeof(T))));
  static constexpr std::int64_t MC = 96;
  static constexpr std::int64_t NC = 4096;
};

// The tile of products with a narrow C (N at most one vector, as the tiny
// LM's attention `scores @ v`: 64 x 64 by 64 x 16 per head): a tile row is
// one vector and the tile is taller (16 rows with 32 registers, 12 with 16),
// where GemmTile's two-vector rows would leave half of every tile's
// multiply-adds on zero padding. Each step of k: one load of B, MR
// broadcasts of A, MR multiply-adds. Floating point only; the same cache
// blocks (KC: B's panel at most 32 KB). Measured (bench/lm_gemm_shapes.cpp,
// one thread, Zen 5, AVX-512): the LM's 16 x (64 x 64 by 64 x 16) products
// 27.5 -> 13.8 us (OpenBLAS 12.8), 1.07-1.1 of OpenBLAS where GemmTile took
// 2.1-2.4; a tile of 8 rows took 15.5 us, of 24 or 32 rows 34 us.
template <class T>
struct GemmNarrowTile {
  using Wide = GemmTile<T>;
  static constexpr int VL = Wide::VL, NV = 1, NR = VL;
  static constexpr int MR = kGemmVectorRegisters >= 32 ? 16 : 12;
  static constexpr std::int64_t KC = std::min<std::int64_t>(512, 32768 / (NR * static_cast<std::int64_t>(sizeof(T))));
  static constexpr std::int64_t MC = 96;
  static constexpr std::int64_t NC = 4096;
  // Whether a product of N columns runs on this tile: C at most one vector
  // wide (and more than one lane), for floating point.
  static bool fits(std::int64_t N) { return Wide::kFloat && Wide::NV > 1 && N <= NR; }
};

// The tile of products whose N is a little over a multiple of three
// vectors and whose A is row-major (a ResNet convolution's 512 x 4608 by
// 4608 x 49 on 7 x 7 planes, 256 x 2304 by 2304 x 196): a tile row is three
// vectors (8 x 48 floats with AVX-512, 24 accumulators), and the last N mod
// 48 columns (at most kTail) are dot products along K of A's rows, read in
// place, with B's columns (gemm_tail_columns), instead of a panel of zero
// padding: GemmTile's two-vector panels made N = 49 64 columns of work (77 %
// of the multiply-adds useful) and N = 196 224. Floating point only, for
// targets with 32 vector registers (the 24 accumulators). KC 256: B's
// panel (256 x 48, 48 KB) fills L1, but the 512 x 4608 by 4608 x 49 took
// 1040 us against 1150 with 170 (a 32 KB panel) and 1120 with 384 (one
// thread, Zen 5); the tail's dot products (kTail columns) cost ~2 % there.
template <class T>
struct GemmWideTile {
  using Wide = GemmTile<T>;
  static constexpr int VL = Wide::VL, NV = 3, NR = 3 * VL;
  static constexpr int MR = 8;
  static constexpr std::int64_t KC = 256;
  static constexpr std::int64_t MC = 96;
  static constexpr std::int64_t NC = 4096 / NR * NR;
  static constexpr int kTail = 4;
  // Whether a product of N columns with A's column stride csa and at least
  // M rows runs on this tile: N mod NR at most kTail columns, where
  // GemmTile's panels would pad at least 8 columns, A row-major, and enough
  // rows for rt::gemm to split them into bands (the tail columns are done
  // by gemm_serial, which the path sharing B's panels does not run).
  static bool fits(std::int64_t M, std::int64_t N, std::int64_t csa) {
    return Wide::kFloat && Wide::NV == 2 && kGemmVectorRegisters >= 32 && csa == 1 &&
           gemm_wide_panels_fit(M, N, NR, Wide::NR, kTail, 8 * MR);
  }
};

// At most this many of B's panels pass under a block of A read in place
// (gemm_rows).
inline constexpr std::int64_t kGemmDirectAPanels = 8;

// A buffer for packed panels, aligned to a cache line (a 64-byte vector load
// from a packed panel never straddles two lines), grown as needed and kept.
template <class T>
class GemmBuffer {
 public:
  GemmBuffer() = default;
  GemmBuffer(const GemmBuffer&) = delete;
  GemmBuffer& operator=(const GemmBuffer&) = delete;
  ~GemmBuffer() { release(); }
  T* get(std::size_t n) {
    if (n > size_) {
      release();
      data_ = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
      size_ = n;
    }
    return data_;
  }

 private:
  void release() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// One MR x NR tile at c (mr x nr of it inside C): acc = A panel * B panel,
// plus C when `accumulate`; the epilogue when `last` (the last block of K),
// with `bias` already at the tile's first column. A's panel is packed (k MR
// + r) or, without `PackedA`, MR whole rows of A read in place (r rsa + k).
template <class T, class Tile, bool PackedA = true>
inline void gemm_micro(std::int64_t kc, const T* __restrict ap, const T* __restrict bp, T* c, std::int64_t rsc,
                       std::int64_t csc, int mr, int nr, bool accumulate, bool last, const GemmEpilogue<T>& ep,
                       const T* bias, std::int64_t rsa = 0) {
  constexpr int MR = Tile::MR, NR = Tile::NR, VL = Tile::VL, NV = Tile::NV;
  // A tile row is NV vectors: the MR x NV accumulators stay in registers and
  // each step of k is NV loads of B, MR broadcasts of A and MR x NV
  // multiply-adds (FMAs; with AVX-512 the broadcast is the FMA's memory
  // operand). Vectors move between memory and the tile only whole (memcpy):
  // writing single lanes of `acc` would keep the tile in memory.
  typedef T Vec __attribute__((vector_size(VL * sizeof(T))));
  // C's rows are read (or written) once the sums are done: start fetching
  // them now.
  for (int r = 0; r < mr; ++r) {
    __builtin_prefetch(c + r * rsc, 1);
    __builtin_prefetch(c + r * rsc + (nr - 1) * csc, 1);
  }
  Vec acc[MR][NV] = {};
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < kc; ++k) {
    Vec b[NV];
#pragma GCC unroll 8
    for (int q = 0; q < NV; ++q) std::memcpy(&b[q], bp + k * NR + q * VL, sizeof(Vec));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const T ar = PackedA ? ap[k * MR + r] : ap[r * rsa + k];
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) acc[r][q] += ar * b[q];
    }
  }
  const bool epilogue = last && ep.any();
  const bool full = nr == NR && csc == 1;
  if (full && mr == MR && !epilogue) {
    // The usual tile: whole rows of C, contiguous, nothing to apply.
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      T* crow = c + r * rsc;
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) {
        Vec v = acc[r][q];
        if (accumulate) {
          Vec cv;
          std::memcpy(&cv, crow + q * VL, sizeof cv);
          v += cv;
        }
        std::memcpy(crow + q * VL, &v, sizeof v);
      }
    }
    return;
  }
  // The epilogue on the registers (when `last`): C's earlier partial sums
  // first, then the bias (the same vectors for every row) and relu.
  Vec bv[NV] = {};
  if (epilogue && bias != nullptr) {
    if (nr == NR && ep.bias_stride == 1) {
      std::memcpy(bv, bias, sizeof bv);
    } else {
      T lanes[NR] = {};
      for (int j = 0; j < nr; ++j) lanes[j] = bias[j * ep.bias_stride];
      std::memcpy(bv, lanes, sizeof bv);
    }
  }
  const Vec zero = {};
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    T* crow = c + r * rsc;
    Vec v[NV];
#pragma GCC unroll 8
    for (int q = 0; q < NV; ++q) v[q] = acc[r][q];
    if (accumulate) {
      Vec cv[NV];
      if (full) {
        std::memcpy(cv, crow, sizeof cv);
      } else {
        T lanes[NR] = {};
        for (int j = 0; j < nr; ++j) lanes[j] = crow[j * csc];
        std::memcpy(cv, lanes, sizeof cv);
      }
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) v[q] += cv[q];
    }
    if (epilogue) {
#pragma GCC unroll 8
      for (int q = 0; q < NV; ++q) v[q] += bv[q];
      if (ep.relu) {
#pragma GCC unroll 8
        for (int q = 0; q < NV; ++q) v[q] = v[q] > zero ? v[q] : zero;
      }
    }
    if (full) {
      std::memcpy(crow, v, sizeof v);
    } else {
      T lanes[NR];
      std::memcpy(lanes, v, sizeof v);
      for (int j = 0; j < nr; ++j) crow[j * csc] = lanes[j];
    }
  }
}

// Packs B's kc x nr block at b into a kc x NR panel (row k at dst + k NR),
// zero-padded to NR columns.
template <class T, class Tile>
inline void gemm_pack_b(std::int64_t kc, int nr, const T* b, std::int64_t rsb, std::int64_t csb, T* __restrict dst) {
  constexpr int NR = Tile::NR;
  if (csb == 1 && nr == NR) {
    for (std::int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, b + k * rsb, sizeof(T) * NR);
    return;
  }
  if (csb == 1) {
    for (std::int64_t k = 0; k < kc; ++k) {
      std::memcpy(dst + k * NR, b + k * rsb, sizeof(T) * static_cast<std::size_t>(nr));
      std::fill(dst + k * NR + nr, dst + (k + 1) * NR, T(0));
    }
    return;
  }
  if (rsb == 1) {
    // B transposed: each column is contiguous. Blocks of L columns by L rows
    // transposed in registers (a weight gradient's col.T, 144 x 144 a
    // product: read down and written across one by one, its packing took a
    // third of the product's time); the rest read down, written across.
    int j = 0;
#if defined(__AVX512F__)
    constexpr int L = 64 / static_cast<int>(sizeof(T));
    if constexpr (transposes_in_registers<T, L>) {
      for (; j + L <= nr; j += L) {
        std::int64_t k = 0;
        for (; k + L <= kc; k += L) transpose_block<T, L>(b + j * csb + k, csb, dst + k * NR + j, NR);
        for (; k < kc; ++k)
          for (int q = j; q < j + L; ++q) dst[k * NR + q] = b[q * csb + k];
      }
    }
#endif
    for (; j < nr; ++j) {
      const T* src = b + j * csb;
      for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + j] = src[k];
    }
  } else {
    for (std::int64_t k = 0; k < kc; ++k)
      for (int j = 0; j < nr; ++j) dst[k * NR + j] = b[k * rsb + j * csb];
  }
  if (nr < NR)
    for (std::int64_t k = 0; k < kc; ++k) std::fill(dst + k * NR + nr, dst + (k + 1) * NR, T(0));
}

// Packs A's mr x kc block at a into a kc x MR panel (column k of the block
// at dst + k MR), zero-padded to MR rows.
template <class T, class Tile>
inline void gemm_pack_a(std::int64_t kc, int mr, const T* a, std::int64_t rsa, std::int64_t csa, T* __restrict dst) {
  constexpr int MR = Tile::MR;
  if (mr == MR && csa == 1) {
    // Row-major A: MR rows read side by side, a column of them per step.
    const T* rows[MR];
    for (int r = 0; r < MR; ++r) rows[r] = a + r * rsa;
    for (std::int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) dst[k * MR + r] = rows[r][k];
    }
    return;
  }
  if (mr == MR && rsa == 1) {
    // A transposed: a column of the block is contiguous.
    for (std::int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * MR, a + k * csa, sizeof(T) * MR);
    return;
  }
  for (std::int64_t k = 0; k < kc; ++k) {
    for (int r = 0; r < mr; ++r) dst[k * MR + r] = a[r * rsa + k * csa];
    for (int r = mr; r < MR; ++r) dst[k * MR + r] = T(0);
  }
}

template <class T>
struct GemmArgs {
  std::int64_t M, N, K;
  const T* A;
  std::int64_t rsa, csa;
  const T* B;
  std::int64_t rsb, csb;
  T* C;
  std::int64_t rsc, csc;
  bool accumulate;
  const GemmEpilogue<T>* ep;
  std::int64_t row0 = 0;  // the product's row of C's first (a thread's band): the rows ep->block is told
  // C's columns [N, N + tail): dot products (gemm_tail_columns), not panels.
  // Set by gemm_serial only; N is then the columns of the panels.
  std::int64_t tail = 0;
};

// Packs panels [p0, p1) of B's block (rows pc..pc+kc, columns from jc) into
// bpack (panel p at bpack + p kc NR).
template <class T, class Tile>
void gemm_pack_b_panels(const GemmArgs<T>& g, std::int64_t pc, std::int64_t kc, std::int64_t jc, std::int64_t p0,
                        std::int64_t p1, T* bpack) {
  constexpr int NR = Tile::NR;
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t j0 = jc + p * NR;
    const int nr = static_cast<int>(std::min<std::int64_t>(NR, g.N - j0));
    gemm_pack_b<T, Tile>(kc, nr, g.B + pc * g.rsb + j0 * g.csb, g.rsb, g.csb, bpack + p * kc * NR);
  }
}

// C's rows [i0, i1) x B's packed panels [p0, p1) (columns from jc) for the
// block of K at pc: packs those rows of A block by block (MC rows) and runs
// the micro-kernel over them.
template <class T, class Tile>
void gemm_rows(const GemmArgs<T>& g, std::int64_t pc, std::int64_t kc, std::int64_t jc, const T* bpack,
               std::int64_t p0, std::int64_t p1, std::int64_t i0, std::int64_t i1) {
  constexpr int MR = Tile::MR, NR = Tile::NR;
  thread_local GemmBuffer<T> abuf;
  T* apack = abuf.get(static_cast<std::size_t>(Tile::MC * Tile::KC));
  const bool last = pc + kc >= g.K;
  const bool accumulate = g.accumulate || pc > 0;
  const GemmEpilogue<T>& ep = *g.ep;
  // A row-major A (floating point) with few of B's panels to pass under
  // it: its whole MR-row panels are read in place by the micro-kernel (one
  // broadcast an element, as from a packed panel; the same sums) instead
  // of packed first, which took a fifth of the tiny LM's 1024 x 64 x 64
  // products. Measured one thread, Zen 5 (bench/lm_gemm_shapes.cpp, us):
  // 1024x64x64 38.5 -> 33.2, 1024x64x256 148 -> 130, 1024x64x16 10.0 ->
  // 8.7, 16 x 64x16x64 14.1 -> 12.0, 1024x256x64 136 -> 132; with many
  // panels (64 x 3136 x 576: 98) each panel reads A's rows again and
  // packing wins (1140 against 1275-2500 us): those stay packed.
  const bool direct_a = std::is_floating_point_v<T> && g.csa == 1 && p1 - p0 <= kGemmDirectAPanels;
  for (std::int64_t ic = i0; ic < i1; ic += Tile::MC) {
    const std::int64_t mc = std::min<std::int64_t>(Tile::MC, i1 - ic);
    const std::int64_t mpanels = (mc + MR - 1) / MR;
    for (std::int64_t pm = 0; pm < mpanels; ++pm) {
      const std::int64_t r0 = ic + pm * MR;
      const int mr = static_cast<int>(std::min<std::int64_t>(MR, i1 - r0));
      if (direct_a && mr == MR) continue;
      gemm_pack_a<T, Tile>(kc, mr, g.A + r0 * g.rsa + pc * g.csa, g.rsa, g.csa, apack + pm * kc * MR);
    }
    // B's panel (kc x NR) stays in the cache while the block of A (in L2)
    // passes under it.
    for (std::int64_t pn = p0; pn < p1; ++pn) {
      const std::int64_t j0 = jc + pn * NR;
      const int nr = static_cast<int>(std::min<std::int64_t>(NR, g.N - j0));
      const T* bias = ep.bias != nullptr ? ep.bias + j0 * ep.bias_stride : nullptr;
      for (std::int64_t pm = 0; pm < mpanels; ++pm) {
        const std::int64_t r0 = ic + pm * MR;
        const int mr = static_cast<int>(std::min<std::int64_t>(MR, i1 - r0));
        if (direct_a && mr == MR)
          gemm_micro<T, Tile, false>(kc, g.A + r0 * g.rsa + pc, bpack + pn * kc * NR, g.C + r0 * g.rsc + j0 * g.csc, g.rsc,
                                     g.csc, mr, nr, accumulate, last, ep, bias, g.rsa);
        else
          gemm_micro<T, Tile>(kc, apack + pm * kc * MR, bpack + pn * kc * NR, g.C + r0 * g.rsc + j0 * g.csc, g.rsc,
                              g.csc, mr, nr, accumulate, last, ep, bias);
      }
    }
    // The block of C (mc rows, these panels' columns) is final and in L2:
    // the general epilogue on it now, not in a second pass over C. Rows of
    // the block's whole width, not a tile's: per tile (8 x 32) its loops
    // were too short, and the fused kernel slower than the two passes
    // (tiny LM's bias + GELU, 1024 x 64 x 256: 267 against 246 us).
    if (last && ep.block != nullptr) {
      const std::int64_t j0 = jc + p0 * NR, j1 = std::min(g.N, jc + p1 * NR);
      ep.block(ep.context, g.row0 + ic, j0, mc, j1 - j0);
    }
  }
}

// The rows of B's blocks (up to KC), all of the same size: K = 600 is
// 2 x 300, not 512 + 88.
template <class Tile>
std::int64_t gemm_kblock(std::int64_t K) {
  const std::int64_t kblocks = (K + Tile::KC - 1) / Tile::KC;
  return (K + kblocks - 1) / kblocks;
}

// Calls block(jc, npanels, pc, kc, bpack) for each block of B (columns
// from jc, npanels panels of them; rows pc..pc+kc), in order, with this
// thread's buffer for the block's packed panels.
template <class T, class Tile, class Block>
void gemm_for_each_block(const GemmArgs<T>& g, Block&& block) {
  constexpr int NR = Tile::NR;
  thread_local GemmBuffer<T> bbuf;
  const std::int64_t ncmax = std::min<std::int64_t>(Tile::NC, g.N);
  const std::int64_t kblock = gemm_kblock<Tile>(g.K);
  T* bpack = bbuf.get(static_cast<std::size_t>((ncmax + NR - 1) / NR * NR * kblock));
  for (std::int64_t jc = 0; jc < g.N; jc += Tile::NC) {
    const std::int64_t npanels = (std::min<std::int64_t>(Tile::NC, g.N - jc) + NR - 1) / NR;
    for (std::int64_t pc = 0; pc < g.K; pc += kblock) block(jc, npanels, pc, std::min<std::int64_t>(kblock, g.K - pc), bpack);
  }
}

// The epilogue on C's finished block of rows [i0, i1) x columns [j0, j1)
// (C at the product's first element), outside the micro-kernel (an empty
// product, OpenBLAS's): the bias and relu element by element, then `block`.
template <class T>
void gemm_epilogue_rows(const GemmEpilogue<T>& ep, T* C, std::int64_t rsc, std::int64_t csc, std::int64_t i0, std::int64_t i1,
                        std::int64_t j0, std::int64_t j1) {
  if (ep.any()) {
    for (std::int64_t i = i0; i < i1; ++i) {
      for (std::int64_t j = j0; j < j1; ++j) {
        C[i * rsc + j * csc] = ep.apply(C[i * rsc + j * csc], j);
      }
    }
  }
  if (ep.block != nullptr && i1 > i0 && j1 > j0) ep.block(ep.context, i0, j0, i1 - i0, j1 - j0);
}

// C's rows [i0, i1) (a whole product's: g.row0 is 0): C +=
// the partial products of K's blocks 1..blocks-1 (M x N each, contiguous,
// block b at parts + (b - 1) M N), one block after the other, then the
// epilogue (bias, relu, block) on those rows. Block 0 already wrote C (into
// its old values when accumulating). The sum of each element, (((C + p0) +
// p1) + p2)..., is the one gemm_rows makes when it runs the blocks of K one
// after another on one thread.
template <class T>
void gemm_fold_k(const GemmArgs<T>& g, const T* parts, std::int64_t blocks, std::int64_t i0, std::int64_t i1) {
  for (std::int64_t i = i0; i < i1; ++i) {
    T* c = g.C + i * g.rsc;
    for (std::int64_t b = 1; b < blocks; ++b) {
      const T* p = parts + ((b - 1) * g.M + i) * g.N;
      if (g.csc == 1)
        for (std::int64_t j = 0; j < g.N; ++j) c[j] += p[j];
      else
        for (std::int64_t j = 0; j < g.N; ++j) c[j * g.csc] += p[j];
    }
  }
  gemm_epilogue_rows(*g.ep, g.C, g.rsc, g.csc, i0, i1, 0, g.N);
}

// The product in blocks of K (`kblock` rows of B each, the last shorter)
// computed side by side: part(k0, kc, c, rsc, csc, accumulate) writes A's
// columns [k0, k0 + kc) times B's rows [k0, k0 + kc) into c, block 0 into C
// itself (added to it when g.accumulate), the others into scratch; then
// gemm_fold_k adds them to C in the order of the blocks and applies the
// epilogue. The blocks depend on the shape, not on the threads: the same
// bits at any thread count. For products whose C is small and K long (a
// weight gradient X^T dY over a batch's 1024 rows: 64 x 64 by K 1024),
// where a split of C's rows or columns had every thread pack all of the
// other operand (and read data the other core wrote).
template <class T, class Part>
void gemm_split_k(const GemmArgs<T>& g, std::int64_t kblock, Part&& part) {
  const std::int64_t blocks = (g.K + kblock - 1) / kblock;
  thread_local GemmBuffer<T> sbuf;
  T* parts = sbuf.get(static_cast<std::size_t>(std::max<std::int64_t>(1, (blocks - 1) * g.M * g.N)));
  parallel_for(0, blocks, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b) {
      const std::int64_t k0 = b * kblock, kc = std::min(kblock, g.K - k0);
      if (b == 0) part(k0, kc, g.C, g.rsc, g.csc, g.accumulate);
      else part(k0, kc, parts + (b - 1) * g.M * g.N, g.N, std::int64_t{1}, false);
    }
  });
  // The fold: a few thousand additions a chunk at least.
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, g.N * (blocks - 1)));
  parallel_for(0, g.M, grain, [&](std::int64_t lo, std::int64_t hi) { gemm_fold_k(g, parts, blocks, lo, hi); });
}

// Rows [i, i + R) of C's TC tail columns (from column g.N) for the block of
// K at pc (kc long, kv of it in whole vectors): each element a dot product
// of A's row (read in place) with B's column packed along k (bt, column t
// at bt + t kcv, zero after kc), in vectors of k summed at the end; added to
// C unless this is the first block of K, then the epilogue's bias and relu
// on the last.
template <class T, int VL, int R, int TC>
void gemm_tail_tile(const GemmArgs<T>& g, std::int64_t i, std::int64_t pc, std::int64_t kc, const T* __restrict bt,
                    std::int64_t kcv) {
  typedef T Vec __attribute__((vector_size(VL * sizeof(T))));
  const std::int64_t kv = kc / VL * VL;
  Vec acc[R][TC] = {};
  const T* a = g.A + i * g.rsa + pc;
  auto step = [&](const Vec (&av)[R], std::int64_t k) {
#pragma GCC unroll 4
    for (int t = 0; t < TC; ++t) {
      Vec b;
      std::memcpy(&b, bt + t * kcv + k, sizeof b);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][t] += av[r] * b;
    }
  };
  for (std::int64_t k = 0; k < kv; k += VL) {
    Vec av[R];
    for (int r = 0; r < R; ++r) std::memcpy(&av[r], a + r * g.rsa + k, sizeof(Vec));
    step(av, k);
  }
  if (kv < kc) {  // A's last columns, through zeroed lanes (not past the row's end)
    Vec av[R];
    for (int r = 0; r < R; ++r) {
      T lanes[VL] = {};
      std::memcpy(lanes, a + r * g.rsa + kv, sizeof(T) * static_cast<std::size_t>(kc - kv));
      std::memcpy(&av[r], lanes, sizeof(Vec));
    }
    step(av, kv);
  }
  const GemmEpilogue<T>& ep = *g.ep;
  const bool last = pc + kc >= g.K, accumulate = g.accumulate || pc > 0;
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < TC; ++t) {
      T lanes[VL];
      std::memcpy(lanes, &acc[r][t], sizeof lanes);
      T sum = T(0);
      for (int l = 0; l < VL; ++l) sum += lanes[l];
      const std::int64_t j = g.N + t;
      T& c = g.C[(i + r) * g.rsc + j * g.csc];
      const T v = accumulate ? c + sum : sum;
      c = last ? ep.apply(v, j) : v;
    }
  }
}

template <class T, int VL, int TC>
void gemm_tail_rows(const GemmArgs<T>& g, std::int64_t pc, std::int64_t kc, const T* bt, std::int64_t kcv) {
  std::int64_t i = 0;
  for (; i + 4 <= g.M; i += 4) gemm_tail_tile<T, VL, 4, TC>(g, i, pc, kc, bt, kcv);
  for (; i < g.M; ++i) gemm_tail_tile<T, VL, 1, TC>(g, i, pc, kc, bt, kcv);
}

// C's columns [g.N, g.N + g.tail), all rows, for the block of K at pc
// (A's rows there still in the caches from gemm_rows): B's tail columns
// packed along k, then the dot products; the general epilogue on them after
// the last block of K.
template <class T, class Tile>
void gemm_tail_columns(const GemmArgs<T>& g, std::int64_t pc, std::int64_t kc) {
  constexpr int VL = Tile::VL;
  thread_local GemmBuffer<T> tbuf;
  const std::int64_t kcv = (kc + VL - 1) / VL * VL;
  T* bt = tbuf.get(static_cast<std::size_t>(g.tail * kcv));
  for (std::int64_t t = 0; t < g.tail; ++t) {
    const T* b = g.B + pc * g.rsb + (g.N + t) * g.csb;
    for (std::int64_t k = 0; k < kc; ++k) bt[t * kcv + k] = b[k * g.rsb];
    std::fill(bt + t * kcv + kc, bt + (t + 1) * kcv, T(0));
  }
  static_assert(Tile::kTail == 4, "one instantiation per count of tail columns");
  switch (g.tail) {
    case 1: gemm_tail_rows<T, VL, 1>(g, pc, kc, bt, kcv); break;
    case 2: gemm_tail_rows<T, VL, 2>(g, pc, kc, bt, kcv); break;
    case 3: gemm_tail_rows<T, VL, 3>(g, pc, kc, bt, kcv); break;
    default: gemm_tail_rows<T, VL, 4>(g, pc, kc, bt, kcv); break;
  }
  const GemmEpilogue<T>& ep = *g.ep;
  if (pc + kc >= g.K && ep.block != nullptr) ep.block(ep.context, g.row0, g.N, g.M, g.tail);
}

// The whole product on the calling thread. On GemmWideTile, C's last
// columns past whole panels (N mod NR, at most kTail) are the tail's dot
// products after each block of K.
template <class T, class Tile>
void gemm_serial(const GemmArgs<T>& g) {
  GemmArgs<T> h = g;
  if constexpr (requires { Tile::kTail; }) {
    if (g.csa == 1 && g.N > Tile::NR && g.N % Tile::NR <= Tile::kTail) {
      h.tail = g.N % Tile::NR;
      h.N = g.N - h.tail;
    }
  }
  gemm_for_each_block<T, Tile>(h, [&](std::int64_t jc, std::int64_t npanels, std::int64_t pc, std::int64_t kc, T* bpack) {
    gemm_pack_b_panels<T, Tile>(h, pc, kc, jc, 0, npanels, bpack);
    gemm_rows<T, Tile>(h, pc, kc, jc, bpack, 0, npanels, 0, h.M);
    if constexpr (requires { Tile::kTail; }) {
      if (h.tail > 0 && jc + npanels * Tile::NR >= h.N) gemm_tail_columns<T, Tile>(h, pc, kc);
    }
  });
}

template <class T, class Tile>
void gemm_impl(const GemmArgs<T>& g) {
  constexpr int MR = Tile::MR;
  static_assert(Tile::NR == Tile::VL * Tile::NV && Tile::MC % MR == 0 && Tile::NC % Tile::NR == 0,
                "blocks of whole tiles");
  const std::int64_t threads = num_threads();
  if (!gemm_splits(g.M, g.N, g.K)) {
    gemm_serial<T, Tile>(g);
    return;
  }
  if (const std::int64_t kblock = gemm_kblock<Tile>(g.K); kblock < g.K && gemm_k_splits(g.M, g.N, g.K)) {
    // gemm_rows' own blocks of K, side by side: the sums of gemm_serial.
    const GemmEpilogue<T> none{};
    gemm_split_k(g, kblock, [&](std::int64_t k0, std::int64_t kc, T* c, std::int64_t rsc, std::int64_t csc, bool accumulate) {
      gemm_serial<T, Tile>({g.M, g.N, kc, g.A + k0 * g.csa, g.rsa, g.csa, g.B + k0 * g.rsb, g.rsb, g.csb, c, rsc, csc, accumulate, &none});
    });
    return;
  }
  const std::int64_t mtiles = (g.M + MR - 1) / MR;
  if (mtiles >= 2 * threads) {
    // A band of C's rows per thread, the whole product on each (see the top
    // of the file). Sharing B's packed blocks instead, with a few parts of C
    // per thread taken as they come and a barrier after each block of K,
    // scaled 1.59-1.67x from 1 to 2 threads on the 2-vCPU VM of bench/ at
    // times when two half-size products side by side scaled 1.76-1.87x
    // (512^3); bands: the latter (docs/performance-history.md).
    parallel_for(0, threads, 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t band = lo; band < hi; ++band) {
        const std::int64_t i0 = mtiles * band / threads * MR, i1 = std::min(g.M, mtiles * (band + 1) / threads * MR);
        GemmArgs<T> part = g;
        part.M = i1 - i0;
        part.A = g.A + i0 * g.rsa;
        part.C = g.C + i0 * g.rsc;
        part.row0 = g.row0 + i0;
        gemm_serial<T, Tile>(part);
      }
    });
    return;
  }
  gemm_for_each_block<T, Tile>(g, [&](std::int64_t jc, std::int64_t npanels, std::int64_t pc, std::int64_t kc, T* bpack) {
    // B's block: its panels shared out among the threads.
    parallel_for(0, npanels, 1, [&](std::int64_t lo, std::int64_t hi) {
      gemm_pack_b_panels<T, Tile>(g, pc, kc, jc, lo, hi, bpack);
    });
    // C's block: a few parts per thread, so that the pool's threads, taking
    // them as they come, balance a thread that runs late (its core busy):
    // whole tiles of rows, and columns (each part then packs its rows of A,
    // a little more packing).
    const std::int64_t want = threads * 3;
    const std::int64_t rparts = std::min(mtiles, want);
    const std::int64_t cparts = std::min(npanels, (want + rparts - 1) / rparts);
    if (rparts * cparts <= 1) {
      gemm_rows<T, Tile>(g, pc, kc, jc, bpack, 0, npanels, 0, g.M);
      return;
    }
    parallel_for(0, rparts * cparts, 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t part = lo; part < hi; ++part) {
        const std::int64_t rp = part / cparts, cp = part % cparts;
        const std::int64_t i0 = mtiles * rp / rparts * MR, i1 = std::min(g.M, mtiles * (rp + 1) / rparts * MR);
        const std::int64_t p0 = npanels * cp / cparts, p1 = npanels * (cp + 1) / cparts;
        if (i1 > i0 && p1 > p0) gemm_rows<T, Tile>(g, pc, kc, jc, bpack, p0, p1, i0, i1);
      }
    });
  });
}

}  // namespace detail

// C = A * B (C += A * B when `accumulate`), then the epilogue, std-only:
// packed panels, a register-tiled micro kernel, and blocks of C split across
// the runtime's threads (num_threads(); none inside another parallel_for).
template <class T>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa,
          const T* B, std::int64_t rsb, std::int64_t csb, T* C, std::int64_t rsc, std::int64_t csc,
          bool accumulate = false, const GemmEpilogue<T>& ep = {}) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) C[i * rsc + j * csc] = T(0);
    detail::gemm_epilogue_rows(ep, C, rsc, csc, 0, M, 0, N);
    return;
  }
  const detail::GemmArgs<T> g{M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, &ep};
  if (detail::GemmNarrowTile<T>::fits(N)) {
    detail::gemm_impl<T, detail::GemmNarrowTile<T>>(g);
    return;
  }
  if (detail::GemmWideTile<T>::fits(M, N, csa)) {
    detail::gemm_impl<T, detail::GemmWideTile<T>>(g);
    return;
  }
  detail::gemm_impl<T, detail::GemmTile<T>>(g);
}

}  // namespace wfgen::rt
