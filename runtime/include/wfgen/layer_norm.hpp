// Layer normalisation of a row: the helpers of the stdlib's layer_norm,
// layer_norm_grad and layer_norm_param_grad builtins (their kernel files
// include it; a header of its own, not kernel_math.hpp, which every kernel
// file precompiles). A contiguous row is read from memory once: its sums go
// through 16 running sums (loops g++ vectorises without -ffast-math) on the
// row the first pass brought into L1. Rows of other layouts take scalar
// loops in double. The variance is that of x - mean (two passes), not
// E[x^2] - mean^2, which cancels for rows far from 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "wfgen/kernel_math.hpp"

namespace wfgen::rt::math::layer_norm {

// N running sums folded in halves into one (as rt::math's sum_row).
template <KernelFloat T, int N>
inline T fold_lanes(T (&acc)[N]) {
  for (int half = N / 2; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
  return acc[0];
}

// The sum of (x[c] - mean)^2 for c < n, contiguous: 64 running sums (four
// AVX-512 vectors of floats) over the row's blocks of 64, then 16 over its
// blocks of 16, then one: four chains of fmas instead of the one of 16
// sums, whose latency bounded a long row (layernorm 32x1024 at one thread:
// 5.2 -> 4.1 us, 0.95 of the -ffast-math loop; docs/performance.md "Issue
// 38: layernorm 64x32"). (The mean's sum_row, adds of half the latency,
// gained nothing so.)
template <KernelFloat T>
inline T squared_deviations(const T* x, std::int64_t n, T mean) {
  T acc[64] = {};
  std::int64_t c = 0;
  for (; c + 64 <= n; c += 64)
    for (int l = 0; l < 64; ++l) acc[l] += (x[c + l] - mean) * (x[c + l] - mean);
  for (; c + 16 <= n; c += 16)
    for (int l = 0; l < 16; ++l) acc[l] += (x[c + l] - mean) * (x[c + l] - mean);
  for (; c < n; ++c) acc[0] += (x[c] - mean) * (x[c] - mean);
  return fold_lanes(acc);
}

// 1 / sqrt(x) without std::sqrt's errno check (a compare and, for a
// negative x, a call to the library's sqrt): the same result (NaN for a
// negative x). With no call in it, g++ keeps a kernel's row loop in
// registers (layernorm 64x32: 565 -> 530 ns a call; docs/performance.md
// "Issue 38: layernorm 64x32").
inline float inverse_sqrt(float x) {
#if defined(__SSE2__)
  return 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x)));
#else
  return 1.0f / std::sqrt(x);
#endif
}
inline double inverse_sqrt(double x) {
#if defined(__SSE2__)
  return 1.0 / _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(x)));
#else
  return 1.0 / std::sqrt(x);
#endif
}

// The mean of a row and 1 / sqrt(its biased variance + eps).
template <KernelFloat T>
struct RowMoments {
  T mean, rstd;
};

#if defined(__AVX512F__)
// (g++ 12's -Wmaybe-uninitialized inside _mm512_reduce_add_ps: see
// kernel_math.hpp's row helpers.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// row_moments of a contiguous row of 16, 32, ... 128 floats, held in
// vectors: the same sums in the same order (each lane's running sum, folded
// in halves: _mm512_reduce_add_ps's order; the same bits as the loops
// below as g++ compiles them, but for the variance of rows of 64 and more,
// which the loops sum in 64 lanes), without the loops' tails and the folds
// through memory. The tiny LM's layernorm over 1024 rows of 64: 21 -> 14 us
// (one thread, Zen 5). (A grad_row on the same vectors, one pass instead
// of two, took the same time as the loops: not kept.) The sums are scaled
// by 1 / n, not divided by n: the same bits for n a power of two, within
// an ulp for 48, 80, 96 and 112, and two divisions fewer on each row's
// critical path (layernorm 64x32: 620 -> 565 ns a call; docs/performance.md
// "Issue 38: layernorm 64x32").
inline bool is_short_row(std::int64_t n) { return n > 0 && n % 16 == 0 && n <= 128; }
inline RowMoments<float> short_row_moments(const float* x, std::int64_t n, float eps) {
  __m512 v[8];
  __m512 s = _mm512_setzero_ps();
  const int nv = static_cast<int>(n / 16);
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) {
    if (q >= nv) break;
    v[q] = _mm512_loadu_ps(x + 16 * q);
    s = _mm512_add_ps(s, v[q]);
  }
  const float inv_n = 1.0f / static_cast<float>(n);  // out of the row loop: no division on the critical path
  const float mean = _mm512_reduce_add_ps(s) * inv_n;
  const __m512 m = _mm512_set1_ps(mean);
  __m512 a = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) {
    if (q >= nv) break;
    const __m512 d = _mm512_sub_ps(v[q], m);
    a = _mm512_fmadd_ps(d, d, a);
  }
  return {mean, inverse_sqrt(_mm512_reduce_add_ps(a) * inv_n + eps)};
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

template <KernelFloat T>
inline RowMoments<T> row_moments(const T* x, std::int64_t sx, std::int64_t n, T eps) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (sx == 1 && is_short_row(n)) return short_row_moments(x, n, eps);
  }
#endif
  if (sx != 1) {
    double s = 0, q = 0;
    for (std::int64_t c = 0; c < n; ++c) s += static_cast<double>(x[c * sx]);
    const double mean = s / static_cast<double>(n);
    for (std::int64_t c = 0; c < n; ++c) q += (static_cast<double>(x[c * sx]) - mean) * (static_cast<double>(x[c * sx]) - mean);
    return {static_cast<T>(mean), static_cast<T>(inverse_sqrt(q / static_cast<double>(n) + static_cast<double>(eps)))};
  }
  const T mean = detail::sum_row(x, n) / static_cast<T>(n);
  return {mean, inverse_sqrt(squared_deviations(x, n, mean) / static_cast<T>(n) + eps)};
}

// out[c] = (x[c] - mean) * rstd * g[c] + b[c] for c < n (strides sx, so,
// sg, sb): layer_norm's forward of one row. `out` may be `x`.
template <KernelFloat T>
inline void forward_row(T* out, std::int64_t so, const T* x, std::int64_t sx, const T* g, std::int64_t sg, const T* b, std::int64_t sb,
                        std::int64_t n, T eps) {
  const RowMoments<T> m = row_moments(x, sx, n, eps);
  if (so == 1 && sx == 1 && sg == 1 && sb == 1) {
    for (std::int64_t c = 0; c < n; ++c) out[c] = (x[c] - m.mean) * m.rstd * g[c] + b[c];
    return;
  }
  for (std::int64_t c = 0; c < n; ++c) out[c * so] = (x[c * sx] - m.mean) * m.rstd * g[c * sg] + b[c * sb];
}

// dx = rstd * (g dy - mean(g dy) - xhat mean(g dy xhat)), xhat = (x - mean)
// * rstd: layer_norm's backward in X of one row (the gradient through the
// mean and the variance in closed form). `dx` may be `dy` or `x`.
template <KernelFloat T>
inline void grad_row(T* dx, std::int64_t sdx, const T* dy, std::int64_t sdy, const T* x, std::int64_t sx, const T* g, std::int64_t sg,
                     std::int64_t n, T eps) {
  const RowMoments<T> m = row_moments(x, sx, n, eps);
  const T inv_n = T(1) / static_cast<T>(n);
  if (sdx == 1 && sdy == 1 && sx == 1 && sg == 1) {
    T a[16] = {}, p[16] = {};  // sum(g dy), sum(g dy xhat)
    std::int64_t c = 0;
    for (; c + 16 <= n; c += 16)
      for (int l = 0; l < 16; ++l) {
        const T gd = g[c + l] * dy[c + l];
        a[l] += gd;
        p[l] += gd * ((x[c + l] - m.mean) * m.rstd);
      }
    for (; c < n; ++c) {
      const T gd = g[c] * dy[c];
      a[0] += gd;
      p[0] += gd * ((x[c] - m.mean) * m.rstd);
    }
    const T mean_a = fold_lanes(a) * inv_n, mean_p = fold_lanes(p) * inv_n;
    for (c = 0; c < n; ++c) dx[c] = m.rstd * (g[c] * dy[c] - mean_a - (x[c] - m.mean) * m.rstd * mean_p);
    return;
  }
  double a = 0, p = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    const double gd = static_cast<double>(g[c * sg]) * static_cast<double>(dy[c * sdy]);
    a += gd;
    p += gd * static_cast<double>((x[c * sx] - m.mean) * m.rstd);
  }
  const T mean_a = static_cast<T>(a / static_cast<double>(n)), mean_p = static_cast<T>(p / static_cast<double>(n));
  for (std::int64_t c = 0; c < n; ++c)
    dx[c * sdx] = m.rstd * (g[c * sg] * dy[c * sdy] - mean_a - (x[c * sx] - m.mean) * m.rstd * mean_p);
}

// layer_norm's backward in G (in B): out[c] = sum over the rows r of dy[r,
// c] * xhat[r, c] (beta: of dy[r, c]), in two steps. The rows are cut into
// blocks of param_grad_block_rows(rows, n) rows, a block's sums go into its
// own row of partial sums (param_grad_rows: each row's moments computed
// once, by the thread that takes its block), and fold_blocks adds the
// blocks' partial sums in the order of the blocks. The blocks depend on the
// shape only, not on the threads: the same bits at any thread count. (A
// block of columns a thread, as before, had every thread compute every
// row's moments: the tiny LM's 10 of them took ~79 us at 1 and at 2 threads.)

// Rows a block: at least 8192 elements (a block's sums stay in L1 and
// outweigh the fold), at most 64 blocks (the fold, blocks x n additions,
// stays small next to the rows x n of the sums).
inline std::int64_t param_grad_block_rows(std::int64_t rows, std::int64_t n) {
  const std::int64_t by_size = n > 0 ? (8192 + n - 1) / n : rows;
  return std::max<std::int64_t>({1, by_size, (rows + 63) / 64});
}

// part[c] = the sum over the rows r0 <= r < r1, in order, of dy[r, c] *
// xhat[r, c] (beta: of dy[r, c]) for c < n (row strides rdy, rx; column
// strides sdy, sx; part contiguous).
template <KernelFloat T>
inline void param_grad_rows(T* part, const T* dy, std::int64_t rdy, std::int64_t sdy, const T* x, std::int64_t rx, std::int64_t sx,
                            std::int64_t r0, std::int64_t r1, std::int64_t n, T eps, bool beta) {
  for (std::int64_t c = 0; c < n; ++c) part[c] = T(0);
  const bool unit = sdy == 1 && sx == 1;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* d = dy + r * rdy;
    if (beta) {
      if (unit)
        for (std::int64_t c = 0; c < n; ++c) part[c] += d[c];
      else
        for (std::int64_t c = 0; c < n; ++c) part[c] += d[c * sdy];
      continue;
    }
    const T* xr = x + r * rx;
    const RowMoments<T> m = row_moments(xr, sx, n, eps);
    if (unit)
      for (std::int64_t c = 0; c < n; ++c) part[c] += d[c] * ((xr[c] - m.mean) * m.rstd);
    else
      for (std::int64_t c = 0; c < n; ++c) part[c] += d[c * sdy] * ((xr[c * sx] - m.mean) * m.rstd);
  }
}

// out[c] = part[0 * n + c] + part[1 * n + c] + ... (blocks rows of partial
// sums, added in that order) for lo <= c < hi; 0 when there are no blocks.
template <KernelFloat T>
inline void fold_blocks(T* out, std::int64_t so, const T* part, std::int64_t blocks, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  if (so == 1) {  // a block at a time down the columns: loops g++ vectorises, each column's sum in the same order
    for (std::int64_t c = lo; c < hi; ++c) out[c] = T(0);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t c = lo; c < hi; ++c) out[c] += part[b * n + c];
    return;
  }
  for (std::int64_t c = lo; c < hi; ++c) {
    T s = T(0);
    for (std::int64_t b = 0; b < blocks; ++b) s += part[b * n + c];
    out[c * so] = s;
  }
}

}  // namespace wfgen::rt::math::layer_norm
