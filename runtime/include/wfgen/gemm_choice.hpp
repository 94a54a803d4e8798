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

// Whether C's N columns are whole panels of `wide` columns and at most
// `tail` more, where panels of `narrow` columns would pad at least 8, and C
// has at least `min_rows` rows: the shapes of rt::gemm's three-vector tile
// (GemmWideTile: wide 48, narrow 32, tail 4 and 64 rows for float with
// 16-lane vectors), whose last N mod 48 columns are dot products instead of
// a panel of zero padding: N = 49 (a 7 x 7 plane) and 196 (14 x 14), not
// 64 or 3136.
constexpr bool gemm_wide_panels_fit(std::int64_t M, std::int64_t N, std::int64_t wide, std::int64_t narrow,
                                    std::int64_t tail, std::int64_t min_rows) {
  return M >= min_rows && N >= wide && N % wide <= tail && (narrow - N % narrow) % narrow >= 8;
}

// gemm_wide_panels_fit with float's panels on 16-lane vectors (rt::gemm's
// GemmWideTile with AVX-512): the shapes own_gemm_is_faster sends to it.
constexpr bool own_gemm_wide_tile_fits(std::int64_t M, std::int64_t N) { return gemm_wide_panels_fit(M, N, 48, 32, 4, 64); }

// Whether a product of M x K by K x N goes to wfgen's own GEMM (rt::gemm)
// rather than to OpenBLAS: when K <= 256 and the product is at most 2^24
// multiply-adds, or at any size when C's columns fit rt::gemm's
// three-vector tile (own_gemm_wide_tile_fits). Why: at those sizes
// OpenBLAS's sgemm spends a third of its time outside its micro-kernel
// (packing both operands on every call, then a separate pass zeroing C for
// beta = 0: sgemm_beta + the *copy routines took 24 % of the tiny LM's
// training step under perf), where rt::gemm packs into
// L1/L2 and writes C once. Measured one thread (bench/lm_gemm_shapes.cpp, the
// LM's shapes with the strides the generated kernels pass; time of rt::gemm /
// OpenBLAS): 0.35-0.41 for attention's 64x64x16 products (k.T read in place),
// 0.5-0.84 for 1024x64x16 and 1024x64x64, 0.8 for 1024x256x64, 0.94-1.0 for
// 1024x64x256; OpenBLAS wins with a long K (the weight gradients'
// 64x256x1024: 1.08-1.18) and on large products (64x3136x576: 1.6), which
// stay with it. On the three-vector tile's shapes OpenBLAS pads N's
// columns to its register tile and packs A (a convolution's weights) on
// every call where rt::gemm reads it in place: one thread, Zen 5, the
// weights cold (us, OpenBLAS / rt::gemm on GemmTile / on the wide tile):
// ResNet-18's 512x4608 by 4608x49 1550-1700 / 1470 / 1040, 512x2304 by
// 2304x49 800 / 690 / 515, 256x2304 by 2304x196 1120 / 1100 / 970,
// MobileNetV2's 1280x320 by 320x49 218 / 233 / 182, 96x576 by 576x196 98
// / 107 / 95. Deterministic: the choice depends on the shape only. (With
// a batch folded into rows, choose_gemms asks with the batch's rows: the
// small rule then holds for one matrix too, and one matrix under 64 rows of
// a wide-tile shape runs on GemmTile, about as fast as OpenBLAS.)
constexpr bool own_gemm_is_faster(std::int64_t M, std::int64_t N, std::int64_t K) {
  constexpr double kMaxWork = static_cast<double>(std::int64_t{1} << 24);
  if (own_gemm_wide_tile_fits(M, N)) return true;
  return K <= 256 && static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) <= kMaxWork;
}

}  // namespace wfgen::rt
