// Which GEMM a product of the blas device runs: OpenBLAS's, or wfgen's own
// (rt::gemm) for the small products where that is faster. One rule, read by
// the generator (passes::choose_gemms, which picks the cpu implementation at
// build time for products whose shape it knows, so that `wfgen explain` and
// the disassembly name the GEMM that runs) and by rt::blas_gemm (for the
// products whose rows are known only at run time: a symbolic batch). Std-only
// and header-only.
#pragma once

#include <cstdint>

namespace wfgen::rt {

// Whether a product of M x K by K x N goes to wfgen's own GEMM (rt::gemm)
// rather than to OpenBLAS: when K <= 256 and the product is at most 2^24
// multiply-adds. Why: at those sizes OpenBLAS's sgemm spends a third of its
// time outside its micro-kernel (packing both operands on every call, then a
// separate pass zeroing C for beta = 0: sgemm_beta + the *copy routines took
// 24 % of the tiny LM's training step under perf), where rt::gemm packs into
// L1/L2 and writes C once. Measured one thread (bench/lm_gemm_shapes.cpp, the
// LM's shapes with the strides the generated kernels pass; time of rt::gemm /
// OpenBLAS): 0.35-0.41 for attention's 64x64x16 products (k.T read in place),
// 0.5-0.84 for 1024x64x16 and 1024x64x64, 0.8 for 1024x256x64, 0.94-1.0 for
// 1024x64x256; OpenBLAS wins with a long K (the weight gradients'
// 64x256x1024: 1.08-1.18) and on large products (64x3136x576: 1.6), which
// stay with it. Deterministic: the choice depends on the shape only, and
// neither GEMM splits K across threads. Monotonic in each of M, N and K: a
// product with more rows never turns from OpenBLAS to rt::gemm.
constexpr bool own_gemm_is_faster(std::int64_t M, std::int64_t N, std::int64_t K) {
  constexpr double kMaxWork = static_cast<double>(std::int64_t{1} << 24);
  return K <= 256 && static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) <= kMaxWork;
}

}  // namespace wfgen::rt
