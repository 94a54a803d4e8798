// Hand-written baselines (bench/hand_loops.cpp). Each works on [lo, hi) so a
// two-thread run splits the range with bench::Split.
#pragma once

#include <cstdint>

namespace bench::hand {

// out = max(a * b + c, 0)
void relu_fma(const float* a, const float* b, const float* c, float* out, std::int64_t lo, std::int64_t hi);

// STREAM triad a = b + s * c, plain stores.
void triad(float* a, const float* b, const float* c, float s, std::int64_t lo, std::int64_t hi);

// The same with non-temporal (streaming) stores, _mm256_stream_ps; only when
// the compiler targets AVX (has_triad_nt()), otherwise it is the plain triad.
bool has_triad_nt();
void triad_nt(float* a, const float* b, const float* c, float s, std::int64_t lo, std::int64_t hi);

// out[i][j] = a[j][i] + b[i][j] for n x n row-major a, b, out; rows [row_lo, row_hi).
void add_transposed(const float* a, const float* b, float* out, std::int64_t n, std::int64_t row_lo, std::int64_t row_hi);
// The same in 32 x 32 tiles (a cache-aware hand loop).
void add_transposed_tiled(const float* a, const float* b, float* out, std::int64_t n, std::int64_t row_lo,
                          std::int64_t row_hi);

// out = a + b
void add(const float* a, const float* b, float* out, std::int64_t lo, std::int64_t hi);

// Row kernels (hand_rows.inc) on rows [lo, hi) of a row-major matrix with
// `cols` columns.
// softmax of each row: three passes (max; exp(x - max) and its sum; divide).
void softmax_rows(const float* x, float* out, std::int64_t cols, std::int64_t lo, std::int64_t hi);
// (x - mean) / sqrt(var + eps) * gamma + beta per row, biased variance: three passes.
void layernorm_rows(const float* x, const float* gamma, const float* beta, float* out, std::int64_t cols, float eps,
                    std::int64_t lo, std::int64_t hi);

}  // namespace bench::hand

// The same row kernels compiled with -ffast-math (hand_loops_fast.cpp).
namespace bench::hand_fast {

void softmax_rows(const float* x, float* out, std::int64_t cols, std::int64_t lo, std::int64_t hi);
void layernorm_rows(const float* x, const float* gamma, const float* beta, float* out, std::int64_t cols, float eps,
                    std::int64_t lo, std::int64_t hi);

}  // namespace bench::hand_fast
