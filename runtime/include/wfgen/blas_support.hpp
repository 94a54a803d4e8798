// GEMM through OpenBLAS's cblas, for kernels of the blas device. Only
// generated files of blas implementations include this header, so binaries
// without BLAS kernels do not depend on OpenBLAS.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <vector>

#include "wfgen/kernel_support.hpp"

namespace wfgen::rt {

namespace detail {

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
// copied (or added).
template <class T>
void blas_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa,
               const T* B, std::int64_t rsb, std::int64_t csb, T* C, std::int64_t rsc, std::int64_t csc,
               bool accumulate = false) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (accumulate) return;
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) C[i * rsc + j * csc] = T(0);
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
  detail::cblas_call<T>(a.trans ? CblasTrans : CblasNoTrans, b.trans ? CblasTrans : CblasNoTrans, M, N, K, A, a.ld, B,
                        b.ld, accumulate && c_direct ? T(1) : T(0), out, ldc);
  if (!c_direct) {
    for (std::int64_t i = 0; i < M; ++i) {
      for (std::int64_t j = 0; j < N; ++j) {
        const T v = out[static_cast<std::size_t>(i * N + j)];
        C[i * rsc + j * csc] = accumulate ? C[i * rsc + j * csc] + v : v;
      }
    }
  }
}

}  // namespace wfgen::rt
