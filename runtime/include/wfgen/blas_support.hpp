// GEMM through OpenBLAS's cblas, for kernels of the blas device. Only
// generated files of blas implementations include this header, so binaries
// without BLAS kernels do not depend on OpenBLAS.
//
// WFGEN_NO_BLAS (defined by wfgen_add_library for a target without a BLAS,
// e.g. a cross build for aarch64 or WebAssembly that finds none): the same
// kernels run wfgen's std-only GEMM instead, so a spec whose builds list
// the blas device still builds there (docs/cross-compiling.md).
#pragma once

#if defined(WFGEN_NO_BLAS)

#include <cstdint>

#include "wfgen/kernel_support.hpp"

namespace wfgen::rt {

// C = A * B (C += A * B when `accumulate`), then the epilogue, through
// rt::gemm: blas_gemm's contract, on a target without cblas.
template <class T>
void blas_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa,
               const T* B, std::int64_t rsb, std::int64_t csb, T* C, std::int64_t rsc, std::int64_t csc,
               bool accumulate = false, const GemmEpilogue<T>& ep = {}) {
  gemm(M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, ep);
}

}  // namespace wfgen::rt

#else

#include <cblas.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "wfgen/gemm_choice.hpp"
#include "wfgen/kernel_support.hpp"

// OpenBLAS's thread count, declared weak: with another BLAS (or a static
// OpenBLAS that left them out) they are null and blas_gemm leaves the
// library's threads alone.
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}
#pragma weak openblas_set_num_threads
#pragma weak openblas_get_num_threads

namespace wfgen::rt {

namespace detail {

// OpenBLAS on one thread while wfgen's kernels call it; the previous count
// back when the last of them returns (the process-wide count, so nested and
// concurrent kernels share one saved value).
//
// Why: a blas-device model runs wfgen's threads (set_num_threads) for its
// element-wise kernels and for its GEMMs, which blas_gemm splits over them.
// OpenBLAS's own threads spin for about 0.1 s after each call it threads;
// spinning beside the pool's workers on as many cores, they made a CNN's
// training step at 2 threads run at 4.9 or 9.7 ms from one run to the next
// (steady 4.9 ms with OpenBLAS on one thread).
class BlasOnOneThread {
 public:
  BlasOnOneThread() {
    if (openblas_set_num_threads == nullptr || openblas_get_num_threads == nullptr) return;
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.depth++ == 0) {
      s.saved = openblas_get_num_threads();
      if (s.saved != 1) openblas_set_num_threads(1);
    }
  }
  ~BlasOnOneThread() {
    if (openblas_set_num_threads == nullptr || openblas_get_num_threads == nullptr) return;
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (--s.depth == 0 && s.saved != 1) openblas_set_num_threads(s.saved);
  }
  BlasOnOneThread(const BlasOnOneThread&) = delete;
  BlasOnOneThread& operator=(const BlasOnOneThread&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int depth = 0;
    int saved = 1;
  };
  static State& state() {
    static State s;
    return s;
  }
};

// How BLAS can read a strided matrix without copying: row-major (unit
// column stride), column-major (unit row stride, read as transposed), or
// not at all (both strides non-unit, or a broadcast stride 0).
struct BlasOperand {
  bool ok = false;
  bool trans = false;
  std::int64_t ld = 0;
};

inline BlasOperand blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  if (cs == 1 && (rs >= std::max<std::int64_t>(1, cols) || rows == 1)) return {true, false, std::max<std::int64_t>({rs, cols, 1})};
  if (rs == 1 && (cs >= std::max<std::int64_t>(1, rows) || cols == 1)) return {true, true, std::max<std::int64_t>({cs, rows, 1})};
  return {};
}

template <class T>
void cblas_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
                std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), 1.0f, A,
                static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), 1.0, A,
                static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
  }
}

// A contiguous row-major copy of a strided matrix.
template <class T>
std::vector<T> packed(std::int64_t rows, std::int64_t cols, const T* p, std::int64_t rs, std::int64_t cs) {
  std::vector<T> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) out[static_cast<std::size_t>(i * cols + j)] = p[i * rs + j * cs];
  return out;
}

}  // namespace detail

// C = A * B through cblas (C += A * B when `accumulate`: beta = 1).
// Transposed operands (unit row stride) are passed as CblasTrans without a
// copy; other layouts are packed first. C must be writable row-major (unit
// column stride); otherwise the product is computed into a temporary and
// copied (or added). Threads: wfgen's (num_threads(), none inside another
// parallel_for), with OpenBLAS on one thread in each (BlasOnOneThread).
// The epilogue (GemmEpilogue) runs on each thread's block of C right after
// its OpenBLAS call wrote it (the block's last rows still in the caches).
template <class T>
void openblas_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa,
                   const T* B, std::int64_t rsb, std::int64_t csb, T* C, std::int64_t rsc, std::int64_t csc,
                   bool accumulate = false, const GemmEpilogue<T>& ep = {}) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no product: C (or 0) and the epilogue, as rt::gemm does it
    gemm(M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, ep);
    return;
  }
  std::vector<T> a_copy, b_copy, c_copy;
  detail::BlasOperand a = detail::blas_layout(M, K, rsa, csa);
  if (!a.ok) {
    a_copy = detail::packed(M, K, A, rsa, csa);
    A = a_copy.data();
    a = {true, false, K};
  }
  detail::BlasOperand b = detail::blas_layout(K, N, rsb, csb);
  if (!b.ok) {
    b_copy = detail::packed(K, N, B, rsb, csb);
    B = b_copy.data();
    b = {true, false, N};
  }
  const bool c_direct = csc == 1 && rsc >= N;
  T* out = C;
  std::int64_t ldc = rsc;
  if (!c_direct) {
    c_copy.assign(static_cast<std::size_t>(M * N), T(0));
    out = c_copy.data();
    ldc = N;
  }
  // Rows of C (or columns, when there are more of them), one block per
  // thread of wfgen's pool, each through single-threaded OpenBLAS; a block
  // starts on a multiple of 16 so that OpenBLAS's register tiles stay whole.
  const detail::BlasOnOneThread one_thread;
  const CBLAS_TRANSPOSE ta = a.trans ? CblasTrans : CblasNoTrans, tb = b.trans ? CblasTrans : CblasNoTrans;
  const T beta = accumulate && c_direct ? T(1) : T(0);
  if (gemm_k_splits(M, N, K)) {
    // Blocks of K side by side, one OpenBLAS call each, added in order
    // (gemm_k_splits): the same blocks, so the same bits, at any thread
    // count. Into C, or into the copy then added to C below. (The operands
    // reach OpenBLAS through the lambda; gemm_split_k reads C's side.)
    const std::int64_t blocks = (K + kGemmSplitKBlock - 1) / kGemmSplitKBlock, kblock = (K + blocks - 1) / blocks;
    const GemmEpilogue<T> none{};
    const detail::GemmArgs<T> g{M, N, K, A, 0, 0, B, 0, 0, out, ldc, 1, beta != T(0), c_direct ? &ep : &none};
    detail::gemm_split_k(g, kblock, [&](std::int64_t k0, std::int64_t kc, T* c, std::int64_t ldc_part, std::int64_t, bool acc) {
      const T* a0 = A + (a.trans ? k0 * a.ld : k0);  // column k0 of A
      const T* b0 = B + (b.trans ? k0 : k0 * b.ld);  // row k0 of B
      detail::cblas_call<T>(ta, tb, M, N, kc, a0, a.ld, b0, b.ld, acc ? T(1) : T(0), c, ldc_part);
    });
  } else {
    auto block = [&](std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
      const T* a0 = A + (a.trans ? i0 : i0 * a.ld);  // row i0 of A
      const T* b0 = B + (b.trans ? j0 * b.ld : j0);  // column j0 of B
      detail::cblas_call<T>(ta, tb, i1 - i0, j1 - j0, K, a0, a.ld, b0, b.ld, beta, out + i0 * ldc + j0, ldc);
      if (c_direct) detail::gemm_epilogue_rows(ep, C, rsc, csc, i0, i1, j0, j1);
    };
    const bool by_rows = M >= N;
    const std::int64_t units = ((by_rows ? M : N) + 15) / 16;
    const std::int64_t parts = std::min<std::int64_t>(num_threads(), units);
    if (parts < 2 || !gemm_splits(M, N, K)) {
      block(0, M, 0, N);
    } else {
      const std::int64_t extent = by_rows ? M : N;
      parallel_for(0, parts, 1, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t p = lo; p < hi; ++p) {
          const std::int64_t from = units * p / parts * 16, to = std::min(extent, units * (p + 1) / parts * 16);
          if (by_rows) block(from, to, 0, N);
          else block(0, M, from, to);
        }
      });
    }
  }
  if (!c_direct) {
    for (std::int64_t i = 0; i < M; ++i) {
      for (std::int64_t j = 0; j < N; ++j) {
        const T v = out[static_cast<std::size_t>(i * N + j)];
        C[i * rsc + j * csc] = accumulate ? C[i * rsc + j * csc] + v : v;
      }
    }
    detail::gemm_epilogue_rows(ep, C, rsc, csc, 0, M, 0, N);
  }
}

// The blas device's GEMM: C = A * B (C += A * B when `accumulate`) through
// OpenBLAS (openblas_gemm), or through rt::gemm for the small products
// where that is faster (own_gemm_is_faster, gemm_choice.hpp). The generator
// makes the same choice at build time where it knows the shape
// (passes::choose_gemms): what reaches here at run time is mostly products
// whose rows depend on a symbolic batch.
template <class T>
void blas_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa,
               const T* B, std::int64_t rsb, std::int64_t csb, T* C, std::int64_t rsc, std::int64_t csc,
               bool accumulate = false, const GemmEpilogue<T>& ep = {}) {
  if (own_gemm_is_faster(M, N, K)) gemm(M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, ep);
  else openblas_gemm(M, N, K, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, ep);
}

}  // namespace wfgen::rt

#endif  // WFGEN_NO_BLAS
