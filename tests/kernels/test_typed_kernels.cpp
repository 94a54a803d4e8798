// Kernels of the standard library called through their typed signatures
// (View<T, R> arguments, as generated models call them) on hand-picked cases
// whose results are written out in the test: transposed and broadcast
// operands, NaN in windows of rows side by side, integer semantics, GEMMs
// that accumulate, and the view kernels. test_kernels.cpp holds the random
// cases over every entry of the kernel table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "kernels.hpp"
#include "references.hpp"
#include "wfgen/attention.hpp"
#include "wfgen/blas_support.hpp"

namespace {

using namespace kt;
using wfgen::rt::KernelEntry;
using wfgen::rt::ScalarArg;
using wfgen::rt::TensorRef;

}  // namespace

TEST_CASE("typed kernels: add_f32_r2 on a transposed and a broadcast operand", "[kernels][typed]") {
  Tensor a = Tensor::from_data<float>({3, 2}, {1, 2, 3, 4, 5, 6}).T();  // (2 3): 1 3 5 / 2 4 6
  Tensor b = Tensor::from_data<float>({3}, {10, 20, 30}).broadcast_to({2, 3});
  Tensor out = Tensor::zeros(DType::f32, {2, 3});
  wfgen_kernels::add_f32_r2(a.cview<float, 2>(), b.cview<float, 2>(), out.view<float, 2>());
  const std::vector<float> want = {11, 23, 35, 12, 24, 36};
  for (int k = 0; k < 6; ++k) CHECK(out.at<float>({k / 3, k % 3}) == want[static_cast<std::size_t>(k)]);
}

TEST_CASE("typed kernels: max and min over a window of rows side by side keep NaN per row", "[kernels][typed]") {
  // X (20 4) transposed from a (4 20) buffer: 16 rows in lanes, 4 left over.
  std::vector<float> data(80);
  for (int k = 0; k < 80; ++k) data[static_cast<std::size_t>(k)] = static_cast<float>((k * 37) % 23) - 11.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  data[2 * 20 + 3] = nan;   // row 3 (in the lanes)
  data[1 * 20 + 18] = nan;  // row 18 (left over)
  Tensor x = Tensor::from_data<float>({4, 20}, data).T();
  Tensor mx = Tensor::zeros(DType::f32, {20, 1}), mn = Tensor::zeros(DType::f32, {20, 1});
  wfgen_kernels::max_f32_r2(x.cview<float, 2>(), mx.view<float, 2>());
  wfgen_kernels::min_f32_r2(x.cview<float, 2>(), mn.view<float, 2>());
  for (int r = 0; r < 20; ++r) {
    INFO("row " << r);
    if (r == 3 || r == 18) {
      CHECK(std::isnan(mx.at<float>({r, 0})));
      CHECK(std::isnan(mn.at<float>({r, 0})));
      continue;
    }
    float hi = -1e30f, lo = 1e30f;
    for (int i = 0; i < 4; ++i) {
      hi = std::max(hi, data[static_cast<std::size_t>(i * 20 + r)]);
      lo = std::min(lo, data[static_cast<std::size_t>(i * 20 + r)]);
    }
    CHECK(mx.at<float>({r, 0}) == hi);
    CHECK(mn.at<float>({r, 0}) == lo);
  }
}

TEST_CASE("typed kernels: integer division and u8 arithmetic follow the expression semantics", "[kernels][typed]") {
  const std::int32_t mn = std::numeric_limits<std::int32_t>::min();
  Tensor a = Tensor::from_data<std::int32_t>({5}, {7, -7, mn, 5, mn});
  Tensor b = Tensor::from_data<std::int32_t>({5}, {0, 2, -1, -3, 1});
  Tensor q = Tensor::zeros(DType::i32, {5});
  wfgen_kernels::div_i32_r1(a.cview<std::int32_t, 1>(), b.cview<std::int32_t, 1>(), q.view<std::int32_t, 1>());
  const std::vector<std::int32_t> want = {0, -3, mn, -1, mn};
  for (int k = 0; k < 5; ++k) CHECK(q.at<std::int32_t>({k}) == want[static_cast<std::size_t>(k)]);

  Tensor x = Tensor::from_data<std::uint8_t>({3}, {250, 3, 16});
  Tensor y = Tensor::from_data<std::uint8_t>({3}, {10, 5, 16});
  Tensor o = Tensor::zeros(DType::u8, {3});
  wfgen_kernels::add_u8_r1(x.cview<std::uint8_t, 1>(), y.cview<std::uint8_t, 1>(), o.view<std::uint8_t, 1>());
  CHECK(o.at<std::uint8_t>({0}) == 4);  // 260 mod 256
  wfgen_kernels::sub_u8_r1(x.cview<std::uint8_t, 1>(), y.cview<std::uint8_t, 1>(), o.view<std::uint8_t, 1>());
  CHECK(o.at<std::uint8_t>({1}) == 254);  // -2 mod 256
  wfgen_kernels::mul_u8_r1(x.cview<std::uint8_t, 1>(), y.cview<std::uint8_t, 1>(), o.view<std::uint8_t, 1>());
  CHECK(o.at<std::uint8_t>({2}) == 0);  // 256 mod 256
  // A float argument makes the expression a double, converted back with saturation.
  wfgen_kernels::sub_scalar_u8_r1(x.cview<std::uint8_t, 1>(), o.view<std::uint8_t, 1>(), 4.5);
  CHECK(o.at<std::uint8_t>({0}) == 245);
  CHECK(o.at<std::uint8_t>({1}) == 0);  // -1.5 saturates at 0
  wfgen_kernels::fill_u8_r1(o.view<std::uint8_t, 1>(), 300.0);
  CHECK(o.at<std::uint8_t>({2}) == 255);
  wfgen_kernels::fill_i32_r1(q.view<std::int32_t, 1>(), std::numeric_limits<double>::quiet_NaN());
  CHECK(q.at<std::int32_t>({0}) == 0);
}

TEST_CASE("typed kernels: matmul (cpu and blas) and sum", "[kernels][typed]") {
  Tensor a = Tensor::from_data<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_data<double>({2, 3}, {1, 0, -1, 2, 1, 0}).T();  // (3 2), column-major
  Tensor c = Tensor::zeros(DType::f64, {2, 2});
  const std::vector<double> want = {1 * 1 + 2 * 0 + 3 * -1, 1 * 2 + 2 * 1 + 3 * 0, 4 * 1 + 5 * 0 + 6 * -1, 4 * 2 + 5 * 1 + 6 * 0};
  wfgen_kernels::matmul_f64_r2(a.cview<double, 2>(), b.cview<double, 2>(), c.view<double, 2>());
  for (int k = 0; k < 4; ++k) CHECK(c.at<double>({k / 2, k % 2}) == want[static_cast<std::size_t>(k)]);
  Tensor c2 = Tensor::zeros(DType::f64, {2, 2});
  wfgen_kernels::matmul_blas_f64_r2(a.cview<double, 2>(), b.cview<double, 2>(), c2.view<double, 2>());
  for (int k = 0; k < 4; ++k) CHECK(c2.at<double>({k / 2, k % 2}) == want[static_cast<std::size_t>(k)]);

  Tensor x = Tensor::from_data<std::int32_t>({2, 3}, {1, 2, 3, std::numeric_limits<std::int32_t>::max(), 1, 0});
  Tensor s = Tensor::zeros(DType::i32, {2, 1});
  wfgen_kernels::sum_i32_r2(x.cview<std::int32_t, 2>(), s.view<std::int32_t, 2>());
  CHECK(s.at<std::int32_t>({0, 0}) == 6);
  CHECK(s.at<std::int32_t>({1, 0}) == std::numeric_limits<std::int32_t>::min());  // wraps
}

namespace {

// blas_gemm's OpenBLAS path whatever the size (blas_gemm itself sends small
// products to rt::gemm, rt::own_gemm_is_faster); on a cross build
// without OpenBLAS (WFGEN_NO_BLAS), blas_gemm, which is rt::gemm there.
template <class... Args>
void openblas_path(Args... args) {
#if defined(WFGEN_NO_BLAS)
  wfgen::rt::blas_gemm<double>(args...);
#else
  wfgen::rt::openblas_gemm<double>(args...);
#endif
}

}  // namespace

TEST_CASE("GEMM that accumulates: C += A B, std-only and through cblas, with C row-major and transposed", "[kernels][gemm]") {
  // Sizes that cross the std-only GEMM's tile edges (MR/NR remainders and
  // more than one KC block), so every partial tile adds into C.
  const std::int64_t M = 13, N = 37, K = 300;
  std::vector<double> A(static_cast<std::size_t>(M * K)), B(static_cast<std::size_t>(K * N)), C0(static_cast<std::size_t>(M * N));
  for (std::size_t i = 0; i < A.size(); ++i) A[i] = static_cast<double>((i * 7) % 11) - 5;
  for (std::size_t i = 0; i < B.size(); ++i) B[i] = static_cast<double>((i * 5) % 13) - 6;
  for (std::size_t i = 0; i < C0.size(); ++i) C0[i] = static_cast<double>(i % 17) - 8;
  std::vector<double> want = C0;  // C0 + A B: small integers, exact in double
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t k = 0; k < K; ++k) want[static_cast<std::size_t>(i * N + j)] += A[static_cast<std::size_t>(i * K + k)] * B[static_cast<std::size_t>(k * N + j)];
  for (bool blas : {false, true}) {
    for (bool transposed_c : {false, true}) {
      // C stored row-major (strides N, 1) or column-major (strides 1, M).
      const std::int64_t rsc = transposed_c ? 1 : N, csc = transposed_c ? M : 1;
      std::vector<double> C(C0.size());
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) C[static_cast<std::size_t>(i * rsc + j * csc)] = C0[static_cast<std::size_t>(i * N + j)];
      if (blas) openblas_path(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), rsc, csc, true);
      else wfgen::rt::gemm<double>(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), rsc, csc, true);
      int bad = 0;
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j)
          bad += C[static_cast<std::size_t>(i * rsc + j * csc)] != want[static_cast<std::size_t>(i * N + j)];
      INFO((blas ? "blas" : "std-only") << (transposed_c ? ", C column-major" : ", C row-major"));
      CHECK(bad == 0);
    }
    // K = 0: the product is empty, C stays as it was.
    std::vector<double> C = C0;
    if (blas) openblas_path(M, N, 0, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1, true);
    else wfgen::rt::gemm<double>(M, N, 0, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1, true);
    CHECK(C == C0);
  }
}

// The std-only GEMM with a transposed B (each column contiguous: a weight
// gradient's col.T), which it packs by blocks transposed in registers (16 x
// 16 floats, 8 x 8 doubles with AVX-512) and the rest one by one: sizes
// with whole blocks, a K block that is not a multiple of the block (K = 300:
// two blocks of 150), panels narrower than the tile and columns left over.
// Small integers: exact in float and double.
template <class T>
int transposed_b_errors(std::int64_t M, std::int64_t N, std::int64_t K) {
  std::vector<T> A(static_cast<std::size_t>(M * K)), Bt(static_cast<std::size_t>(N * K)), C(static_cast<std::size_t>(M * N), T(7));
  for (std::size_t i = 0; i < A.size(); ++i) A[i] = static_cast<T>(static_cast<int>((i * 7) % 11) - 5);
  for (std::size_t i = 0; i < Bt.size(); ++i) Bt[i] = static_cast<T>(static_cast<int>((i * 5) % 13) - 6);
  // B = Bt viewed transposed: B[k, j] = Bt[j * K + k] (strides 1, K).
  wfgen::rt::gemm<T>(M, N, K, A.data(), K, 1, Bt.data(), 1, K, C.data(), N, 1);
  int bad = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      T want = 0;
      for (std::int64_t k = 0; k < K; ++k) want += A[static_cast<std::size_t>(i * K + k)] * Bt[static_cast<std::size_t>(j * K + k)];
      bad += C[static_cast<std::size_t>(i * N + j)] != want;
    }
  return bad;
}

TEST_CASE("std-only GEMM with a transposed B: blocks transposed in registers and the columns and rows left over", "[kernels][gemm]") {
  for (auto [M, N, K] : {std::array<std::int64_t, 3>{13, 37, 300}, {8, 64, 16}, {3, 80, 47}, {17, 16, 144}, {9, 15, 40}, {32, 144, 144}}) {
    INFO("M " << M << " N " << N << " K " << K);
    CHECK(transposed_b_errors<float>(M, N, K) == 0);
    CHECK(transposed_b_errors<double>(M, N, K) == 0);
  }
}

// GEMMs above kGemmParallelWork on two threads: blas_gemm splits C's rows
// (or columns, when there are more) over wfgen's pool with OpenBLAS on one
// thread in each block, and a batch of products too small to split shares
// its matrices out (gemm_batch_grain). Small integers: exact in double, so
// any block written twice, skipped or offset shows.
namespace {

struct GemmCase {
  std::int64_t M, N, K;
  bool ta, tb, tc, acc;
};

std::vector<double> small_ints(std::size_t n, int mul, int mod) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<int>((i * static_cast<std::size_t>(mul)) % static_cast<std::size_t>(mod)) - mod / 2);
  return v;
}

// Mismatches of OpenBLAS's path (openblas_path), of blas_gemm (`dispatch`)
// or of gemm on one case against the loop here. A is
// stored (M K) or, when `ta`, (K M) and read transposed; likewise B and C.
std::int64_t gemm_mismatches(const GemmCase& g, bool blas, bool dispatch = false) {
  const auto A = small_ints(static_cast<std::size_t>(g.M * g.K), 7, 11), B = small_ints(static_cast<std::size_t>(g.K * g.N), 5, 13);
  const auto C0 = small_ints(static_cast<std::size_t>(g.M * g.N), 3, 17);
  const std::int64_t rsa = g.ta ? 1 : g.K, csa = g.ta ? g.M : 1, rsb = g.tb ? 1 : g.N, csb = g.tb ? g.K : 1;
  const std::int64_t rsc = g.tc ? 1 : g.N, csc = g.tc ? g.M : 1;
  std::vector<double> C = C0;
  if (dispatch) wfgen::rt::blas_gemm<double>(g.M, g.N, g.K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), rsc, csc, g.acc);
  else if (blas) openblas_path(g.M, g.N, g.K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), rsc, csc, g.acc);
  else wfgen::rt::gemm<double>(g.M, g.N, g.K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), rsc, csc, g.acc);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < g.M; ++i) {
    for (std::int64_t j = 0; j < g.N; ++j) {
      const auto at_c = static_cast<std::size_t>(i * rsc + j * csc);
      double want = g.acc ? C0[at_c] : 0.0;
      for (std::int64_t k = 0; k < g.K; ++k)
        want += A[static_cast<std::size_t>(i * rsa + k * csa)] * B[static_cast<std::size_t>(k * rsb + j * csb)];
      bad += C[at_c] != want;
    }
  }
  return bad;
}

// A batch of `count` products (count M K) x (count K N) through a rank-3
// matmul kernel, against the loop here.
template <class Kernel>
std::int64_t batch_mismatches(Kernel kernel, std::int64_t count, std::int64_t M, std::int64_t N, std::int64_t K) {
  Tensor a = Tensor::from_data<double>({count, M, K}, small_ints(static_cast<std::size_t>(count * M * K), 7, 11));
  Tensor b = Tensor::from_data<double>({count, N, K}, small_ints(static_cast<std::size_t>(count * K * N), 5, 13)).transpose(1, 2);
  Tensor c = Tensor::zeros(DType::f64, {count, M, N});
  kernel(a.cview<double, 3>(), b.cview<double, 3>(), c.view<double, 3>());
  std::int64_t bad = 0;
  for (std::int64_t r = 0; r < count; ++r) {
    for (std::int64_t i = 0; i < M; ++i) {
      for (std::int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (std::int64_t k = 0; k < K; ++k) want += a.at<double>({r, i, k}) * b.at<double>({r, k, j});
        bad += c.at<double>({r, i, j}) != want;
      }
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("GEMMs split over two threads: blas_gemm's row and column blocks, and batches shared out", "[kernels][gemm][threads]") {
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(2);
#if !defined(WFGEN_NO_BLAS)  // a cross build without OpenBLAS (tests/cross): blas_gemm is rt::gemm there
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(2);
#endif

  SECTION("which batches are shared out") {
    using A1 = std::array<std::int64_t, 1>;
    using A2 = std::array<std::int64_t, 2>;
    CHECK(wfgen::rt::gemm_batch_grain(A1{64}, A1{4608}, 32, 144, 144) == 1);  // the CNN's conv2: small products
    CHECK(wfgen::rt::gemm_batch_grain(A2{8, 8}, A2{36864, 4608}, 32, 144, 144) == 1);
    CHECK(wfgen::rt::gemm_batch_grain(A1{2}, A1{10500}, 150, 70, 220) == 0);  // two large ones: each splits itself
    CHECK(wfgen::rt::gemm_batch_grain(A1{8}, A1{10500}, 150, 70, 220) == 1);  // enough large ones for every thread
    CHECK(wfgen::rt::gemm_batch_grain(A1{4}, A1{64}, 8, 8, 8) == 0);          // not worth waking the pool
    CHECK(wfgen::rt::gemm_batch_grain(A1{1}, A1{0}, 1024, 1024, 1024) == 0);
    CHECK(wfgen::rt::gemm_batch_grain(A1{64}, A1{0}, 32, 144, 144) == 0);     // every product writes the same C
    CHECK(wfgen::rt::gemm_batch_grain(A2{8, 8}, A2{4608, 0}, 32, 144, 144) == 0);
  }
  SECTION("blas_gemm and gemm in blocks of rows and of columns, every layout") {
    // 150 x 70 x 220 = 2.3 M multiply-adds, above kGemmParallelWork: rows
    // in two blocks (0-80, 80-150); 70 x 150 splits its columns instead.
    for (const auto& [M, N] : {std::pair<std::int64_t, std::int64_t>{150, 70}, {70, 150}, {33, 1000}}) {
      for (int layout = 0; layout < 16; ++layout) {
        const GemmCase g{M, N, 220, (layout & 1) != 0, (layout & 2) != 0, (layout & 4) != 0, (layout & 8) != 0};
        INFO(M << " x " << N << " x 220" << (g.ta ? ", A transposed" : "") << (g.tb ? ", B transposed" : "")
                << (g.tc ? ", C column-major" : "") << (g.acc ? ", accumulating" : ""));
        CHECK(gemm_mismatches(g, true) == 0);
        CHECK(gemm_mismatches(g, false) == 0);
      }
    }
  }
  SECTION("rank-3 matmul kernels: a batch shared out, and a batch of products that split") {
    CHECK(batch_mismatches(wfgen_kernels::matmul_blas_f64_r3, 64, 32, 40, 40) == 0);
    CHECK(batch_mismatches(wfgen_kernels::matmul_f64_r3, 64, 32, 40, 40) == 0);
    CHECK(batch_mismatches(wfgen_kernels::matmul_blas_f64_r3, 2, 150, 70, 220) == 0);
    CHECK(batch_mismatches(wfgen_kernels::matmul_f64_r3, 2, 150, 70, 220) == 0);
  }
#if !defined(WFGEN_NO_BLAS)
  SECTION("blas_gemm sends small products to rt::gemm, long K and large products to OpenBLAS") {
    using wfgen::rt::own_gemm_is_faster;
    CHECK(own_gemm_is_faster(64, 64, 16));      // attention's scores, a head
    CHECK(own_gemm_is_faster(1024, 256, 64));   // the tiny LM's MLP, 2^24 multiply-adds
    CHECK(own_gemm_is_faster(1024, 64, 256));
    CHECK_FALSE(own_gemm_is_faster(64, 256, 1024));  // a weight gradient: K 1024
    CHECK_FALSE(own_gemm_is_faster(64, 64, 257));
    CHECK_FALSE(own_gemm_is_faster(1025, 256, 64));  // above 2^24
    CHECK_FALSE(own_gemm_is_faster(64, 3136, 576));
    // Both paths of blas_gemm against the loop, every layout: 150 x 70 x
    // 220 goes to rt::gemm, 40 x 30 x 300 to OpenBLAS.
    for (const GemmCase& g : {GemmCase{150, 70, 220, true, false, true, true}, GemmCase{150, 70, 220, false, true, false, false},
                              GemmCase{40, 30, 300, true, true, false, true}, GemmCase{40, 30, 300, false, false, true, false}}) {
      INFO(g.M << " x " << g.N << " x " << g.K);
      CHECK(gemm_mismatches(g, true, /*dispatch=*/true) == 0);
      CHECK(gemm_mismatches(g, true) == 0);
    }
  }
  SECTION("OpenBLAS's thread count is back after the calls, also after concurrent ones") {
    const GemmCase g{150, 70, 220, false, false, false, false};
    CHECK(gemm_mismatches(g, true) == 0);
    CHECK(openblas_get_num_threads() == 2);
    std::int64_t bad[2] = {0, 0};
    std::thread other([&] {
      for (int r = 0; r < 10; ++r) bad[1] += gemm_mismatches(g, true);
    });
    for (int r = 0; r < 10; ++r) bad[0] += gemm_mismatches(g, true);
    other.join();
    CHECK(bad[0] == 0);
    CHECK(bad[1] == 0);
    CHECK(openblas_get_num_threads() == 2);
  }
  openblas_set_num_threads(blas_threads);
#endif
  wfgen::rt::set_num_threads(saved);
}

namespace {

// C = A B (+ C0 when g.acc) in float through rt::gemm or (`blas`)
// OpenBLAS's path at `threads`, A, B and C laid out as in gemm_mismatches,
// with a bias and relu epilogue when `epilogue`; values in [-1, 1).
std::vector<float> float_product(const GemmCase& g, bool blas, int threads, bool epilogue) {
  wfgen::rt::Rng rng(static_cast<std::uint64_t>(g.M * 31 + g.N * 7 + g.K));
  auto values = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
    return v;
  };
  const std::vector<float> A = values(g.M * g.K), B = values(g.K * g.N), bias = values(g.N);
  std::vector<float> C = values(g.M * g.N);
  const std::int64_t rsa = g.ta ? 1 : g.K, csa = g.ta ? g.M : 1, rsb = g.tb ? 1 : g.N, csb = g.tb ? g.K : 1;
  const std::int64_t rsc = g.tc ? 1 : g.N, csc = g.tc ? g.M : 1;
  wfgen::rt::GemmEpilogue<float> ep;
  if (epilogue) {
    ep.bias = bias.data();
    ep.relu = true;
  }
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(threads);
#if !defined(WFGEN_NO_BLAS)
  if (blas) wfgen::rt::openblas_gemm<float>(g.M, g.N, g.K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), rsc, csc, g.acc, ep);
#endif
  if (!blas) wfgen::rt::gemm<float>(g.M, g.N, g.K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), rsc, csc, g.acc, ep);
  wfgen::rt::set_num_threads(saved);
  // Against the sums in double (C's old values drawn again from the seed).
  wfgen::rt::Rng again(static_cast<std::uint64_t>(g.M * 31 + g.N * 7 + g.K));
  for (std::int64_t n = 0; n < g.M * g.K + g.K * g.N + g.N; ++n) (void)again.uniform(-1, 1);
  std::int64_t wrong = 0;
  std::vector<double> C0(static_cast<std::size_t>(g.M * g.N));
  for (auto& x : C0) x = static_cast<double>(static_cast<float>(again.uniform(-1, 1)));
  for (std::int64_t i = 0; i < g.M; ++i)
    for (std::int64_t j = 0; j < g.N; ++j) {
      const auto at_c = static_cast<std::size_t>(i * rsc + j * csc);
      double want = g.acc ? C0[at_c] : 0.0;
      for (std::int64_t k = 0; k < g.K; ++k)
        want += double(A[static_cast<std::size_t>(i * rsa + k * csa)]) * double(B[static_cast<std::size_t>(k * rsb + j * csb)]);
      if (epilogue) want = std::max(want + double(bias[static_cast<std::size_t>(j)]), 0.0);
      wrong += !(std::fabs(double(C[at_c]) - want) <= 2e-5 * (1 + std::sqrt(double(g.K))));
    }
  CHECK(wrong == 0);
  return C;
}

}  // namespace

// A product with a small C and a long K (a weight gradient X^T dY) is split
// along K: blocks of K side by side into scratch, added to C in the order
// of the blocks, then the epilogue. The blocks depend on the shape only, so
// C is the same bits at one and at two threads (and rt::gemm's are its own
// blocks of K: the same bits as before the split).
TEST_CASE("GEMM split along K: small C, long K, against the loop, the same bits at 1 and 2 threads", "[kernels][gemm][threads]") {
  using wfgen::rt::gemm_k_splits;
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(2);  // gemm_mismatches' products split
  CHECK(gemm_k_splits(64, 64, 1024));  // the tiny LM's weight gradients
  CHECK(gemm_k_splits(256, 64, 1024));
  CHECK(gemm_k_splits(16, 64, 1024));
  CHECK_FALSE(gemm_k_splits(16, 16, 1024));   // too little work to split
  CHECK_FALSE(gemm_k_splits(1024, 64, 64));   // K short
  CHECK_FALSE(gemm_k_splits(300, 300, 1024)); // C large next to K
  CHECK_FALSE(gemm_k_splits(64, 3136, 576));
  CHECK_FALSE(gemm_k_splits(512, 49, 4608));  // a convolution's C: too large to split K
  // K a multiple of the blocks (32 x 32 x 1024), not (40 x 30 x 1100, 48 x
  // 48 x 513: three blocks of 171), and below two blocks (64 x 64 x 300:
  // no split), a narrow C (64 x 16: rt::gemm's GemmNarrowTile, blocks of
  // 512); A and B transposed, C column-major (OpenBLAS then computes
  // into a copy), accumulating or not, with bias and relu or not: a third
  // of the 16 layouts a size, each layout in some size.
  const std::pair<std::int64_t, std::int64_t> sizes[] = {{32, 32}, {40, 30}, {48, 48}, {64, 16}, {64, 64}};
  const std::int64_t ks[] = {1024, 1100, 513, 1024, 300};
  for (int s = 0; s < 5; ++s) {
    for (int layout = 0; layout < 16; ++layout) {
      if ((layout + s) % 3 != 0) continue;
      const GemmCase g{sizes[s].first, sizes[s].second, ks[s], (layout & 1) != 0, (layout & 2) != 0, (layout & 4) != 0, (layout & 8) != 0};
      for (bool blas : {false, true}) {
#if defined(WFGEN_NO_BLAS)  // a cross build without OpenBLAS (tests/cross): no openblas_gemm to call
        if (blas) continue;
#endif
        const bool epilogue = layout % 2 == 0;
        INFO((blas ? "OpenBLAS " : "rt::gemm ") << g.M << " x " << g.N << " x " << g.K << (g.ta ? ", A transposed" : "")
                                                << (g.tb ? ", B transposed" : "") << (g.tc ? ", C column-major" : "")
                                                << (g.acc ? ", accumulating" : "") << (epilogue ? ", bias and relu" : ""));
        const std::vector<float> one = float_product(g, blas, 1, epilogue), two = float_product(g, blas, 2, epilogue);
        // (OpenBLAS split along C's rows, K 300, need not give the same bits.)
        if (!blas || gemm_k_splits(g.M, g.N, g.K)) CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
      }
      // Exact in double (small integers): a block added twice or missed shows.
      CHECK(gemm_mismatches(g, false) == 0);
      CHECK(gemm_mismatches(g, true) == 0);
    }
  }
  wfgen::rt::set_num_threads(saved);
}

TEST_CASE("view kernels: transpose and permute, typed, and invalid permutations", "[kernels][views]") {
  Tensor t = Tensor::from_data<std::int64_t>({2, 3, 4}, std::vector<std::int64_t>(24, 0));
  const auto v = t.view<std::int64_t, 3>();
  const auto tr = wfgen_kernels::transpose_i64_r3(v);
  CHECK(tr.data == v.data);
  CHECK(tr.shape == std::array<std::int64_t, 3>{2, 4, 3});
  CHECK(tr.strides == std::array<std::int64_t, 3>{12, 1, 4});

  const std::int64_t perm[] = {2, 0, 1};
  const auto p = wfgen_kernels::permute_i64_r3(v, perm);
  CHECK(p.shape == std::array<std::int64_t, 3>{4, 2, 3});
  CHECK(p.strides == std::array<std::int64_t, 3>{1, 12, 4});

  const std::vector<std::vector<std::int64_t>> bad = {{0, 1}, {0, 1, 2, 3}, {0, 0, 1}, {0, 1, 3}, {-1, 0, 1}, {}};
  for (const auto& b : bad) {
    INFO("perm " << str(b));
    try {
      (void)wfgen_kernels::permute_i64_r3(v, b);
      FAIL_CHECK("permute_i64_r3 accepted an invalid permutation");
    } catch (const wfgen::rt::Error& err) {
      CHECK(err.code() == wfgen::rt::ErrorCode::InvalidArgument);
      CHECK(std::string(err.what()).find("permute_i64_r3") != std::string::npos);
    }
  }
  // Through the erased entry as well.
  for (const KernelEntry& e : wfgen_kernels::kernel_table()) {
    if (std::string(e.node) != "permute" || e.rank != 2 || e.dtype != DType::f32) continue;
    Tensor m = Tensor::zeros(DType::f32, {2, 3});
    TensorRef refs[2] = {m.ref(), {}};
    const std::int64_t dup[] = {1, 1};
    ScalarArg arg;
    arg.ints = dup;
    arg.count = 2;
    CHECK_THROWS_AS(e.fn(refs, &arg), wfgen::rt::Error);
  }
}

TEST_CASE("gather and one_hot: out-of-range and non-numeric indices give zeros", "[kernels][indices]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor w = Tensor::from_data<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor idx = Tensor::from_data<float>({7}, {0, 2, -0.5f, 3, nan, 1e30f, 1});
  Tensor out = Tensor::full(DType::f32, {7, 2}, 99);
  wfgen_kernels::gather_f32_r2(w.cview<float, 2>(), idx.cview<float, 1>(), out.view<float, 2>());
  const std::vector<float> want = {1, 2, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 3, 4};
  for (int k = 0; k < 14; ++k) {
    INFO("OUT(" << k / 2 << " " << k % 2 << ")");
    CHECK(out.at<float>({k / 2, k % 2}) == want[static_cast<std::size_t>(k)]);
  }

  Tensor ii = Tensor::from_data<std::int32_t>({5}, {0, 2, -1, 3, 5});
  Tensor oh = Tensor::full(DType::i32, {5, 4}, 7);
  wfgen_kernels::one_hot_i32_r2(ii.cview<std::int32_t, 1>(), oh.view<std::int32_t, 2>(), 4);
  for (int r = 0; r < 5; ++r)
    for (int k = 0; k < 4; ++k) {
      INFO("OUT(" << r << " " << k << ")");
      CHECK(oh.at<std::int32_t>({r, k}) == ((r == 0 && k == 0) || (r == 1 && k == 2) || (r == 3 && k == 3) ? 1 : 0));
    }

  Tensor iu = Tensor::from_data<std::uint8_t>({2}, {255, 1});
  Tensor wu = Tensor::from_data<std::uint8_t>({2, 1}, {7, 9});
  Tensor ou = Tensor::full(DType::u8, {2, 1}, 3);
  wfgen_kernels::gather_u8_r2(wu.cview<std::uint8_t, 2>(), iu.cview<std::uint8_t, 1>(), ou.view<std::uint8_t, 2>());
  CHECK(ou.at<std::uint8_t>({0, 0}) == 0);
  CHECK(ou.at<std::uint8_t>({1, 0}) == 9);
}

TEST_CASE("erased kernels reject operands of the wrong dtype or rank", "[kernels][erased]") {
  const KernelEntry* add = nullptr;
  for (const KernelEntry& e : wfgen_kernels::kernel_table())
    if (std::string(e.name) == "add_f32_r2") add = &e;
  REQUIRE(add != nullptr);
  Tensor a = Tensor::zeros(DType::f32, {2, 2}), b = Tensor::zeros(DType::f64, {2, 2}), c = Tensor::zeros(DType::f32, {4});
  ScalarArg none;
  TensorRef wrong_dtype[] = {a.ref(), b.ref(), a.ref()};
  try {
    add->fn(wrong_dtype, &none);
    FAIL_CHECK("no error for an f64 operand");
  } catch (const wfgen::rt::Error& err) {
    CHECK(err.code() == wfgen::rt::ErrorCode::DTypeMismatch);
    CHECK_THAT(err.what(), Catch::Matchers::Contains("add_f32_r2") && Catch::Matchers::Contains("B"));
  }
  TensorRef wrong_rank[] = {a.ref(), a.ref(), c.ref()};
  try {
    add->fn(wrong_rank, &none);
    FAIL_CHECK("no error for a rank-1 output");
  } catch (const wfgen::rt::Error& err) {
    CHECK(err.code() == wfgen::rt::ErrorCode::RankMismatch);
    CHECK_THAT(err.what(), Catch::Matchers::Contains("OUT"));
  }
}

// Element-wise stdlib kernels split across threads above their grain (65536
// elements): the parallel path must cover every element exactly once, also
// with a transposed operand and a strided output.
TEST_CASE("element-wise kernels above their grain run on several threads", "[kernels][threads]") {
  using wfgen::rt::Tensor;
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(2);
  Tensor a = Tensor::empty(wfgen::rt::DType::f32, {600, 700});
  Tensor b = Tensor::empty(wfgen::rt::DType::f32, {700, 600});
  wfgen::rt::Rng rng(11);
  wfgen::rt::fill_uniform(a, -1, 1, rng);
  wfgen::rt::fill_uniform(b, -1, 1, rng);
  Tensor big = Tensor::zeros(wfgen::rt::DType::f32, {600, 1400});
  Tensor out = big.slice(1, 0, 1400, 2);  // every other column
  wfgen_kernels::add_f32_r2(a.cview<float, 2>(), b.T().cview<float, 2>(), out.view<float, 2>());
  wfgen::rt::set_num_threads(saved);
  std::int64_t wrong = 0;
  for (int i = 0; i < 600; ++i)
    for (int j = 0; j < 700; ++j) {
      wrong += out.at<float>({i, j}) != a.at<float>({i, j}) + b.at<float>({j, i});
      wrong += big.at<float>({i, 2 * j + 1}) != 0.0f;
    }
  REQUIRE(wrong == 0);
}

// Reductions split their rows across the threads from 65536 elements
// (stdlib's `parallel: {grain: 65536}`, in elements): each row is reduced
// by one thread in its own order, so two threads give one thread's bits,
// for rows read along their length and rows side by side (a transposed X:
// 16 rows a vector, the lanes path).
TEST_CASE("reductions above their grain split by rows and give one thread's bits", "[kernels][threads]") {
  using wfgen::rt::Tensor;
  const int saved = wfgen::rt::num_threads();
  Tensor x = Tensor::empty(wfgen::rt::DType::f32, {4099, 67});
  wfgen::rt::Rng rng(5);
  wfgen::rt::fill_uniform(x, -1, 1, rng);
  Tensor xt = Tensor::empty(wfgen::rt::DType::f32, {67, 4099});
  wfgen::rt::fill_uniform(xt, -1, 1, rng);
  for (bool transposed : {false, true}) {
    const Tensor in = transposed ? xt.T() : x;
    std::vector<Tensor> sums, args;
    for (int threads : {1, 2}) {
      wfgen::rt::set_num_threads(threads);
      sums.push_back(Tensor::zeros(wfgen::rt::DType::f32, {4099, 1}));
      args.push_back(Tensor::zeros(wfgen::rt::DType::f32, {4099, 1}));
      wfgen_kernels::sum_f32_r2(in.cview<float, 2>(), sums.back().view<float, 2>());
      wfgen_kernels::argmax_f32_r2(in.cview<float, 2>(), args.back().view<float, 2>());
    }
    wfgen::rt::set_num_threads(saved);
    INFO((transposed ? "rows side by side" : "rows along their length"));
    std::int64_t differ = 0, wrong = 0;
    for (int i = 0; i < 4099; ++i) {
      differ += sums[0].at<float>({i, 0}) != sums[1].at<float>({i, 0}) || args[0].at<float>({i, 0}) != args[1].at<float>({i, 0});
      double want = 0;
      for (int j = 0; j < 67; ++j) want += in.at<float>({i, j});
      wrong += std::abs(sums[1].at<float>({i, 0}) - want) > 1e-4;
    }
    CHECK(differ == 0);
    CHECK(wrong == 0);
  }
}

// scaled_softmax splits its rows (of all matrices) across the threads, in
// chunks of 16384 / cols rows that start inside a matrix: each chunk's
// first row must get its matrix's offsets and its causal length from its
// own index. Two threads against one (the same bits: each row is one
// thread's) and against softmax in double here, for contiguous rows and
// for rows read with a stride (X transposed: the scalar loop).
TEST_CASE("scaled_softmax split across threads mid-matrix", "[kernels][threads]") {
  using wfgen::rt::Tensor;
  const int saved = wfgen::rt::num_threads();
  Tensor x = Tensor::empty(wfgen::rt::DType::f32, {2, 3, 100, 100});
  wfgen::rt::Rng rng(17);
  wfgen::rt::fill_uniform(x, -4, 4, rng);
  for (bool transposed : {false, true}) {
    const Tensor in = transposed ? x.transpose(2, 3) : x;
    std::vector<Tensor> outs;
    for (int threads : {1, 2}) {
      wfgen::rt::set_num_threads(threads);
      outs.push_back(Tensor::zeros(wfgen::rt::DType::f32, {2, 3, 100, 100}));
      wfgen_kernels::scaled_softmax_f32_r4(in.cview<float, 4>(), outs.back().view<float, 4>(), 0.5f, true);
    }
    wfgen::rt::set_num_threads(saved);
    INFO((transposed ? "X transposed" : "contiguous rows"));
    std::int64_t differ = 0, wrong = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        for (int i = 0; i < 100; ++i) {
          double mx = -1e300, sum = 0;
          for (int j = 0; j <= i; ++j) mx = std::max(mx, 0.5 * in.at<float>({a, b, i, j}));
          for (int j = 0; j <= i; ++j) sum += std::exp(0.5 * in.at<float>({a, b, i, j}) - mx);
          for (int j = 0; j < 100; ++j) {
            const double want = j <= i ? std::exp(0.5 * in.at<float>({a, b, i, j}) - mx) / sum : 0.0;
            differ += outs[0].at<float>({a, b, i, j}) != outs[1].at<float>({a, b, i, j});
            wrong += std::abs(outs[1].at<float>({a, b, i, j}) - want) > 1e-6 + 1e-5 * want;
          }
        }
    CHECK(differ == 0);
    CHECK(wrong == 0);
  }
}

namespace {

// rt::attention_rows (the kernel fusion makes of matmul -> scaled_softmax ->
// matmul) on `batch` matrices against softmax(scale Q K^T) V in double:
// Q a column window of a wider matrix (the heads of a q projection), K^T a
// transposed view of K's rows (column stride = K's row stride), V a window
// too, O strided by rows; rows handed out in uneven pieces (37 then the
// rest) on one thread and split by rt::parallel_for on two, the same bits.
// `spread`: every third row of Q (from row 1) times it, so that rows of one
// register tile have maxes far apart (a row given another's max
// underflows: its sum 0, or overflows); their scores are then large, and
// `tol` is relative to that.
template <class T>
void check_attention(std::int64_t batch, std::int64_t n, std::int64_t m, std::int64_t d, std::int64_t dv, bool causal, double spread = 1,
                     double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12) {
  const std::int64_t qw = 2 * d + 3, kw = d + 1, vw = dv + 2, ow = dv + 1;  // the row strides: windows of wider rows
  std::vector<T> q(static_cast<std::size_t>(batch * n * qw)), k(static_cast<std::size_t>(batch * m * kw)),
      v(static_cast<std::size_t>(batch * m * vw));
  wfgen::rt::Rng rng(static_cast<std::uint64_t>(n * 1000 + d * 10 + (causal ? 1 : 0)));
  for (auto* x : {&q, &k, &v})
    for (T& e : *x) e = static_cast<T>(rng.uniform(-2.0, 2.0));
  for (std::int64_t r = 1; r < batch * n; r += 3)
    for (std::int64_t c = 0; c < qw; ++c) q[static_cast<std::size_t>(r * qw + c)] *= static_cast<T>(spread);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(d, 1))));
  const wfgen::rt::AttentionShape shape{n, m, d, dv, causal};
  auto matrices = [&](std::vector<T>& o, std::int64_t b) {
    return wfgen::rt::AttentionMatrices<T>{q.data() + b * n * qw + 1, qw, 1,  k.data() + b * m * kw, 1, kw,
                                           v.data() + b * m * vw + 2, vw, 1, o.data() + b * n * ow, ow, 1};
  };
  const std::size_t size = static_cast<std::size_t>(batch * n * ow);
  std::vector<T> one(size, T(-7)), two(size, T(-7));
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(1);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t cut = std::min<std::int64_t>(37, n);
    wfgen::rt::attention_rows(matrices(one, b), shape, scale, 0, cut);
    wfgen::rt::attention_rows(matrices(one, b), shape, scale, cut, n);
  }
  wfgen::rt::set_num_threads(2);
  wfgen::rt::parallel_for(0, batch * n, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) wfgen::rt::attention_rows(matrices(two, r / n), shape, scale, r % n, r % n + 1);
  });
  wfgen::rt::set_num_threads(saved);
  std::int64_t differ = 0, wrong = 0, untouched = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t kept = causal ? std::min(i + 1, m) : m;
      std::vector<double> p(static_cast<std::size_t>(kept));
      double mx = -1e300, sum = 0;
      for (std::int64_t j = 0; j < kept; ++j) {
        double s = 0;
        for (std::int64_t c = 0; c < d; ++c) s += double(q[std::size_t(b * n * qw + i * qw + 1 + c)]) * double(k[std::size_t(b * m * kw + j * kw + c)]);
        p[std::size_t(j)] = double(scale) * s;
        mx = std::max(mx, p[std::size_t(j)]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (std::int64_t e = 0; e < ow; ++e) {
        const std::size_t at = static_cast<std::size_t>(b * n * ow + i * ow + e);
        differ += std::memcmp(&one[at], &two[at], sizeof(T)) != 0;
        if (e == dv) {  // past O's window: not written
          untouched += one[at] == T(-7);
          continue;
        }
        double want = 0;
        for (std::int64_t j = 0; j < kept; ++j) want += p[std::size_t(j)] / sum * double(v[std::size_t(b * m * vw + j * vw + 2 + e)]);
        wrong += !(std::fabs(double(one[at]) - want) <= tol * (1 + std::fabs(want)));
      }
    }
  INFO("batch " << batch << ", n " << n << ", m " << m << ", d " << d << ", dv " << dv << (causal ? ", causal" : ""));
  CHECK(differ == 0);
  CHECK(wrong == 0);
  CHECK(untouched == batch * n);
}

}  // namespace

TEST_CASE("attention_rows: causal and not, any length and head size, windows, threads", "[kernels][attention][threads]") {
  for (bool causal : {true, false}) {
    for (std::int64_t n : {1, 7, 64, 100})
      for (std::int64_t d : {1, 16, 24}) {
        check_attention<float>(2, n, n, d, d, causal);
        check_attention<double>(1, n, n, d, d, causal);
      }
    check_attention<float>(3, 5, 9, 4, 20, causal);   // more keys than rows, dv past a vector
    check_attention<float>(1, 9, 3, 4, 5, causal);    // fewer keys than rows
    check_attention<float>(1, 70, 300, 16, 16, causal);  // keys over several tiles: the online softmax
    check_attention<double>(1, 20, 600, 8, 3, causal);
    check_attention<float>(1, 3, 40, 700, 2, causal);    // a head wider than the tile buffer holds at its usual width
  }
}

TEST_CASE("attention_rows: each row of a register tile its own max and sum", "[kernels][attention]") {
  // Rows 1, 4, 7, ... with scores ~100 times the others' (maxes ~300 apart):
  // a row shifted by another's max, or summed with another's exps, is far off.
  for (bool causal : {true, false}) {
    check_attention<float>(2, 64, 64, 16, 16, causal, 100.0, 1e-3);
    check_attention<float>(1, 70, 300, 16, 16, causal, 100.0, 1e-3);  // several tiles: the online rescale
    check_attention<float>(1, 13, 20, 5, 7, causal, 100.0, 1e-3);
    check_attention<double>(1, 64, 64, 16, 16, causal, 100.0, 1e-10);
  }
}

TEST_CASE("attention_rows: no keys gives zeros", "[kernels][attention]") {
  std::vector<float> q(6, 1.0f), o(6, 5.0f);
  const wfgen::rt::AttentionMatrices<float> a{q.data(), 2, 1, nullptr, 0, 1, nullptr, 3, 1, o.data(), 3, 1};
  wfgen::rt::attention_rows(a, wfgen::rt::AttentionShape{2, 0, 2, 3, false}, 1.0f, 0, 2);
  for (float x : o) CHECK(x == 0.0f);
}

// one_hot splits its rows across the threads from 65536 output elements:
// 1500 rows of 100 classes at 2 threads, a contiguous output and one read
// with a stride (its transpose), every row against its index, some out of
// range (a row of zeros).
TEST_CASE("one_hot split across threads, contiguous and strided rows", "[kernels][threads]") {
  using wfgen::rt::Tensor;
  const int saved = wfgen::rt::num_threads();
  const std::int64_t rows = 1500, classes = 100;
  std::vector<float> ids(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) ids[static_cast<std::size_t>(r)] = static_cast<float>((r * 37) % 113 - 5);  // -5 .. 107
  Tensor idx = Tensor::from_data<float>({rows}, ids);
  wfgen::rt::set_num_threads(2);
  Tensor out = Tensor::full(DType::f32, {rows, classes}, 7);
  Tensor outt = Tensor::full(DType::f32, {classes, rows}, 7);
  wfgen_kernels::one_hot_f32_r2(idx.cview<float, 1>(), out.view<float, 2>(), classes);
  wfgen_kernels::one_hot_f32_r2(idx.cview<float, 1>(), outt.T().view<float, 2>(), classes);
  wfgen::rt::set_num_threads(saved);
  std::int64_t wrong = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < classes; ++k) {
      const float want = static_cast<float>(ids[static_cast<std::size_t>(r)]) == static_cast<float>(k) ? 1.0f : 0.0f;
      wrong += out.at<float>({r, k}) != want;
      wrong += outt.at<float>({k, r}) != want;
    }
  CHECK(wrong == 0);
}

// layer_norm_param_grad sums down the rows in blocks of rows fixed by the
// shape (each block's partial sums, then the blocks added in their order):
// two threads give one thread's bits, G's gradient and B's (beta), rows
// along their length and transposed operands (the strided loops), a row
// count no block size divides; against the definition in double.
TEST_CASE("layer_norm_param_grad splits its rows into blocks and gives one thread's bits", "[kernels][threads]") {
  using wfgen::rt::Tensor;
  const int saved = wfgen::rt::num_threads();
  const std::int64_t rows = 3001, n = 67;
  wfgen::rt::Rng rng(7);
  Tensor dy = Tensor::empty(wfgen::rt::DType::f32, {rows, n}), x = Tensor::empty(wfgen::rt::DType::f32, {rows, n});
  Tensor dyt = Tensor::empty(wfgen::rt::DType::f32, {n, rows}), xt = Tensor::empty(wfgen::rt::DType::f32, {n, rows});
  for (Tensor* t : {&dy, &x, &dyt, &xt}) wfgen::rt::fill_uniform(*t, -1, 1, rng);
  for (bool transposed : {false, true})
    for (bool beta : {false, true}) {
      const Tensor d = transposed ? dyt.T() : dy, xs = transposed ? xt.T() : x;
      std::vector<Tensor> outs;
      for (int threads : {1, 2}) {
        wfgen::rt::set_num_threads(threads);
        outs.push_back(Tensor::zeros(wfgen::rt::DType::f32, {n}));
        wfgen_kernels::layer_norm_param_grad_f32_r1(d.cview<float, 2>(), xs.cview<float, 2>(), outs.back().view<float, 1>(), 1e-5f, beta);
      }
      wfgen::rt::set_num_threads(saved);
      std::vector<double> want(static_cast<std::size_t>(n), 0.0);
      for (std::int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (std::int64_t c = 0; c < n; ++c) mean += xs.at<float>({r, c}) / static_cast<double>(n);
        for (std::int64_t c = 0; c < n; ++c) var += (xs.at<float>({r, c}) - mean) * (xs.at<float>({r, c}) - mean) / static_cast<double>(n);
        for (std::int64_t c = 0; c < n; ++c) {
          const double xhat = (xs.at<float>({r, c}) - mean) / std::sqrt(var + 1e-5);
          want[static_cast<std::size_t>(c)] += d.at<float>({r, c}) * (beta ? 1.0 : xhat);
        }
      }
      INFO((transposed ? "transposed" : "rows along their length") << (beta ? ", beta" : ", gamma"));
      std::int64_t differ = 0, wrong = 0;
      for (std::int64_t c = 0; c < n; ++c) {
        differ += outs[0].at<float>({c}) != outs[1].at<float>({c});
        wrong += std::abs(outs[1].at<float>({c}) - want[static_cast<std::size_t>(c)]) > 2e-3;
      }
      CHECK(differ == 0);
      CHECK(wrong == 0);
    }
}

// ---------------------------------------------------------------------------
// Streaming stores (rt::stream_store): a contiguous output at least
// rt::streaming_store_bytes() large is written in 256-byte blocks with
// non-temporal stores, after plain stores up to the first 64-byte boundary
// and before plain stores of the tail. Every length and misalignment around
// those edges must give what the loop gives, touch nothing else, and be left
// out when the output partly overlaps an input.

namespace {

template <class T>
wfgen::rt::View<const T, 1> cview1(const T* p, std::int64_t n) { return {p, {n}, {1}}; }
template <class T>
wfgen::rt::View<T, 1> view1(T* p, std::int64_t n) { return {p, {n}, {1}}; }

// out = a + b through the typed rank-1 add kernel, streamed, against the sum
// computed here (T's own wrap-around for u8), with guard elements around.
template <class T, class Add>
std::int64_t streamed_add_mismatches(Add add, std::int64_t n, std::int64_t offset) {
  const std::int64_t pad = 16;
  std::vector<T> a(static_cast<std::size_t>(n + 2 * pad)), b(a.size()), out(a.size(), T(77));
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(static_cast<int>(i * 7 % 251) - 100);
    b[i] = static_cast<T>(static_cast<int>(i * 13 % 241) - 50);
  }
  // Inputs and output at different misalignments from each other.
  const T* pa = a.data() + pad + (offset + 1) % 4;
  const T* pb = b.data() + pad;
  T* po = out.data() + pad + offset;
  add(cview1(pa, n), cview1(pb, n), view1(po, n));
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.size()); ++i) {
    const std::int64_t k = i - (pad + offset);
    const T want = k >= 0 && k < n ? static_cast<T>(pa[k] + pb[k]) : T(77);
    bad += out[static_cast<std::size_t>(i)] != want;
  }
  return bad;
}

}  // namespace

// rt::LaneRow, col2im's row accumulator: add() (one masked AVX-512 load
// where there is one) and add_portable() against the lanes written out here,
// for every shift of a row of `wo` columns the kernel can ask for; the
// columns around the row hold NaN, so a lane read outside [lo, hi) shows.
// store(n) must write n lanes and nothing after them.
namespace {

template <class T, int Lanes>
std::int64_t lane_row_mismatches() {
  std::int64_t bad = 0;
  for (std::int64_t wo : {1, 5, 12, 14, Lanes, Lanes + 3, 40}) {
    std::vector<T> buf(static_cast<std::size_t>(wo + 2 * Lanes + 8), std::numeric_limits<T>::quiet_NaN());
    T* row = buf.data() + Lanes + 4;
    for (std::int64_t x = 0; x < wo; ++x) row[x] = static_cast<T>(x * 3 - 7);
    for (std::int64_t at = -Lanes - 2; at <= wo + 2; ++at) {
      const std::int64_t lo = std::clamp<std::int64_t>(-at, 0, Lanes), hi = std::clamp<std::int64_t>(wo - at, lo, Lanes);
      wfgen::rt::LaneRow<T, Lanes> fast, portable;
      for (int twice = 0; twice < 2; ++twice) {
        fast.add(row, at, lo, hi);
        portable.add_portable(row, at, lo, hi);
      }
      for (int l = 0; l < Lanes; ++l) {
        const T want = l >= lo && l < hi ? T(2) * row[at + l] : T(0);
        bad += !(fast.v[l] == want) + !(portable.v[l] == want);
      }
      for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{Lanes - 1}, std::int64_t{Lanes}}) {
        std::vector<T> out(static_cast<std::size_t>(Lanes + 1), T(-99));
        fast.store(out.data(), n);
        for (std::int64_t l = 0; l <= Lanes; ++l) bad += !(out[static_cast<std::size_t>(l)] == (l < n ? fast.v[l] : T(-99)));
      }
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("LaneRow: col2im's masked row adds read only their lanes, and store(n) writes n", "[kernels][col2im]") {
  CHECK(lane_row_mismatches<float, 16>() == 0);
  CHECK(lane_row_mismatches<double, 8>() == 0);
}

TEST_CASE("streamed outputs: element-wise kernels write what plain stores write", "[kernels][streaming]") {
  const StreamingStores stores(0);  // stream every contiguous output
  for (std::int64_t n : {0, 1, 3, 15, 16, 17, 63, 64, 65, 100, 255, 256, 257, 1000, 4099}) {
    for (std::int64_t offset : {0, 1, 2, 3, 5, 13}) {
      INFO("n " << n << ", output offset " << offset << " elements");
      CHECK(streamed_add_mismatches<float>(wfgen_kernels::add_f32_r1, n, offset) == 0);
      CHECK(streamed_add_mismatches<double>(wfgen_kernels::add_f64_r1, n, offset) == 0);
      CHECK(streamed_add_mismatches<std::int32_t>(wfgen_kernels::add_i32_r1, n, offset) == 0);
      CHECK(streamed_add_mismatches<std::int64_t>(wfgen_kernels::add_i64_r1, n, offset) == 0);
      CHECK(streamed_add_mismatches<std::uint8_t>(wfgen_kernels::add_u8_r1, n, offset) == 0);
    }
  }
  SECTION("on two threads, in chunks of the kernel's grain") {
    const int saved = wfgen::rt::num_threads();
    wfgen::rt::set_num_threads(2);
    const std::int64_t mismatches = streamed_add_mismatches<float>(wfgen_kernels::add_f32_r1, 300001, 3);
    wfgen::rt::set_num_threads(saved);
    CHECK(mismatches == 0);
  }
  SECTION("exactly in place: out is a") {
    std::vector<float> a(1000), b(1000), want(1000);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i) * 0.5f;
      b[i] = 3.0f - static_cast<float>(i);
      want[i] = a[i] + b[i];
    }
    wfgen_kernels::add_f32_r1(cview1(a.data(), 1000), cview1(b.data(), 1000), view1(a.data(), 1000));
    CHECK(a == want);
  }
  SECTION("an output one element past its input is not streamed: the loop's order shows") {
    // out[i] = a[i] + b[i] with out = a + 1: the loop reads each a[i] after
    // the previous iteration wrote it (a running sum); blocks computed
    // before they are stored would read the old values.
    std::vector<float> a(601, 1.0f), b(600, 1.0f), want(601, 1.0f);
    for (std::size_t i = 0; i < 600; ++i) want[i + 1] = want[i] + b[i];
    wfgen_kernels::add_f32_r1(cview1(a.data(), 600), cview1(b.data(), 600), view1(a.data() + 1, 600));
    CHECK(a == want);
  }
}

TEST_CASE("the streaming-store threshold is validated", "[kernels][streaming]") {
  const StreamingStores stores(-1);
  CHECK(wfgen::rt::streaming_store_bytes() == -1);
  CHECK_THROWS_AS(wfgen::rt::set_streaming_store_bytes(-2), wfgen::rt::Error);
  CHECK(wfgen::rt::streaming_store_bytes() == -1);
  CHECK(wfgen::rt::streams_output<float>(std::int64_t{1} << 40) == false);
  wfgen::rt::set_streaming_store_bytes(1024);
  CHECK(wfgen::rt::streams_output<float>(255) == false);
  CHECK(wfgen::rt::streams_output<float>(256) == true);
  CHECK(wfgen::rt::streams_output<double>(128) == true);
  wfgen::rt::set_streaming_store_bytes(0);  // still never less than one 256-byte block
  CHECK(wfgen::rt::streams_output<float>(63) == false);
  CHECK(wfgen::rt::streams_output<float>(64) == true);
  CHECK(wfgen::rt::streams_output<std::uint8_t>(256) == true);
}

// A batch that shares B (a linear layer's weight broadcast over [batch
// context d]) runs as one GEMM of every row when A's and C's batch dims
// continue their rows (gemm_folded_rows); anything else keeps the loop over
// the batch. Both paths against the loop here, on 1 and 2 threads (the
// accumulating variant passes the same flag to the same call).
TEST_CASE("rank-4 matmul kernels with B shared by the batch: one GEMM over the batch's rows, or the loop", "[kernels][gemm]") {
  using A2 = std::array<std::int64_t, 2>;
  SECTION("when the batch folds into the rows") {
    CHECK(wfgen::rt::gemm_folded_rows(A2{2, 3}, A2{60, 20}, A2{0, 0}, A2{84, 28}, 4, 5, 7) == 24);  // contiguous A, C
    CHECK(wfgen::rt::gemm_folded_rows(A2{1, 3}, A2{0, 20}, A2{9, 0}, A2{0, 28}, 4, 5, 7) == 12);     // extent-1 dims ignored
    CHECK(wfgen::rt::gemm_folded_rows(A2{2, 3}, A2{60, 20}, A2{0, 8}, A2{84, 28}, 4, 5, 7) == 0);   // B not shared
    CHECK(wfgen::rt::gemm_folded_rows(A2{2, 3}, A2{64, 20}, A2{0, 0}, A2{84, 28}, 4, 5, 7) == 0);   // a gap between A's matrices
    CHECK(wfgen::rt::gemm_folded_rows(A2{2, 3}, A2{60, 20}, A2{0, 0}, A2{84, 0}, 4, 5, 7) == 0);    // C written by several products
    CHECK(wfgen::rt::gemm_folded_rows(A2{2, 3}, A2{60, 1}, A2{0, 0}, A2{84, 28}, 4, 1, 7) == 0);    // A transposed
    CHECK(wfgen::rt::gemm_folded_rows(A2{1, 1}, A2{0, 0}, A2{0, 0}, A2{0, 0}, 4, 5, 7) == 0);       // a batch of one
  }
  const int saved = wfgen::rt::num_threads();
  for (int threads : {1, 2}) {
    wfgen::rt::set_num_threads(threads);
    // (2 3 M K) by a (K N) weight, A contiguous (folds) or every matrix of A
    // transposed (does not); small integers, exact.
    for (const auto& mnk : {std::array<std::int64_t, 3>{5, 7, 4}, {64, 96, 80}}) {
      // Plain variables, not a structured binding: the lambdas below use
      // them, which Clang 14 refuses for bindings (C++20's P1091).
      const std::int64_t M = mnk[0], N = mnk[1], K = mnk[2];
      for (const bool ta : {false, true}) {
        INFO(threads << " threads, " << M << " x " << N << " x " << K << (ta ? ", A transposed" : ""));
        const auto a_data = small_ints(static_cast<std::size_t>(6 * M * K), 7, 11);
        Tensor a = ta ? Tensor::from_data<double>({2, 3, K, M}, a_data).transpose(2, 3) : Tensor::from_data<double>({2, 3, M, K}, a_data);
        Tensor b = Tensor::from_data<double>({K, N}, small_ints(static_cast<std::size_t>(K * N), 5, 13)).broadcast_to({2, 3, K, N});
        Tensor c = Tensor::zeros(DType::f64, {2, 3, M, N});
        auto check = [&](auto kernel) {
          c.copy_from(Tensor::from_data<double>({2, 3, M, N}, small_ints(static_cast<std::size_t>(6 * M * N), 3, 17)));
          kernel(a.cview<double, 4>(), b.cview<double, 4>(), c.view<double, 4>());
          std::int64_t bad = 0;
          for (std::int64_t p = 0; p < 2; ++p)
            for (std::int64_t q = 0; q < 3; ++q)
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < N; ++j) {
                  double want = 0;
                  for (std::int64_t k = 0; k < K; ++k) want += a.at<double>({p, q, i, k}) * b.at<double>({p, q, k, j});
                  bad += c.at<double>({p, q, i, j}) != want;
                }
          return bad;
        };
        CHECK(check(wfgen_kernels::matmul_blas_f64_r4) == 0);  // C starts as other values: every element written
        CHECK(check(wfgen_kernels::matmul_f64_r4) == 0);
      }
    }
  }
  wfgen::rt::set_num_threads(saved);
}

namespace {

// The depthwise convolution's output (n, c, y, xo), summed in double by the
// definition: taps outside X skipped.
template <class T>
double naive_depthwise(const Tensor& x, const Tensor& f, std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t xo,
                       const std::array<std::int64_t, 8>& a) {  // k_h k_w stride_h stride_w pad_h pad_w dilation_h dilation_w
  const std::int64_t H = x.shape()[2], W = x.shape()[3];
  double want = 0;
  for (std::int64_t i = 0; i < a[0]; ++i)
    for (std::int64_t j = 0; j < a[1]; ++j) {
      const std::int64_t iy = y * a[2] - a[4] + i * a[6], ix = xo * a[3] - a[5] + j * a[7];
      if (iy >= 0 && iy < H && ix >= 0 && ix < W) want += double(f.at<T>({c, i, j})) * double(x.at<T>({n, c, iy, ix}));
    }
  return want;
}

}  // namespace

// depthwise_conv2d on planes large enough to be split across the threads
// (80 planes, several per thread) and to have vectorised interiors: the same
// bits on 1 and 2 threads (each plane summed by one thread in a fixed order)
// and, on both, the naive loop's sums. 23 x 29 planes take the padded copy
// (rt::DepthwiseConv::padded, at stride 1 one run over the plane), 71 x 67
// ones are too large for it: the interior / checked border split.
TEST_CASE("depthwise_conv2d splits its planes across threads: 1 and 2 threads against the naive loop", "[kernels][threads]") {
  const std::int64_t H = GENERATE(23, 71), W = H == 23 ? 29 : 67;
  const std::int64_t N = 2, C = 40;
  INFO("plane " << H << " x " << W);
  Tensor x = Tensor::empty(DType::f32, {N, C, H, W});
  wfgen::rt::Rng rng(38);
  wfgen::rt::fill_uniform(x, -1, 1, rng);
  const int saved = wfgen::rt::num_threads();
  struct Geometry {
    std::int64_t k, stride, pad;
  };
  for (const Geometry g : {Geometry{3, 1, 1}, Geometry{3, 2, 1}, Geometry{5, 1, 2}, Geometry{5, 2, 2}}) {
    INFO("k " << g.k << " stride " << g.stride << " pad " << g.pad);
    Tensor f = Tensor::empty(DType::f32, {C, g.k, g.k});
    wfgen::rt::fill_uniform(f, -1, 1, rng);
    const std::int64_t ho = (H + 2 * g.pad - g.k) / g.stride + 1, wo = (W + 2 * g.pad - g.k) / g.stride + 1;
    std::vector<Tensor> outs;
    for (int threads : {1, 2}) {
      wfgen::rt::set_num_threads(threads);
      outs.push_back(Tensor::zeros(DType::f32, {N, C, ho, wo}));
      wfgen_kernels::depthwise_conv2d_f32_r4(x.cview<float, 4>(), f.cview<float, 3>(), outs.back().view<float, 4>(), g.k, g.k, g.stride,
                                             g.stride, g.pad, g.pad, 1, 1);
    }
    wfgen::rt::set_num_threads(saved);
    std::int64_t differ = 0, wrong = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t y = 0; y < ho; ++y)
          for (std::int64_t xo = 0; xo < wo; ++xo) {
            const double want = naive_depthwise<float>(x, f, n, c, y, xo, {g.k, g.k, g.stride, g.stride, g.pad, g.pad, 1, 1});
            const float one = outs[0].at<float>({n, c, y, xo});
            differ += one != outs[1].at<float>({n, c, y, xo});
            wrong += std::fabs(one - want) > 1e-5;
          }
    CHECK(differ == 0);
    CHECK(wrong == 0);
  }
}

// depthwise_conv2d with stride_h != stride_w (and pad_h != pad_w, dilation
// along H) on fixed small planes, f32 and f64, 1 and 2 threads, against the
// naive loop: planes that take the padded copy (rt::DepthwiseConv::padded,
// rows of either length class), one too large for it (the interior / border
// split), and dilation along W (the checked loop). The random cases of
// test_kernels.cpp draw such strides only by chance; a version that read
// stride_w for the rows passed them on the host.
template <class T, class Kernel>
void check_depthwise_strides(Kernel kernel, double tol) {
  struct Plane {
    std::int64_t h, w;
  };
  using Args = std::array<std::int64_t, 8>;  // k_h k_w stride_h stride_w pad_h pad_w dilation_h dilation_w
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  wfgen::rt::Rng rng(3838);
  const int saved = wfgen::rt::num_threads();
  for (const Plane pl : {Plane{7, 9}, Plane{12, 5}, Plane{9, 40}, Plane{40, 21}, Plane{90, 70}})
    for (const Args a : {Args{3, 3, 1, 2, 1, 1, 1, 1}, Args{3, 3, 2, 1, 1, 1, 1, 1}, Args{5, 5, 1, 2, 2, 2, 1, 1},
                         Args{5, 5, 2, 1, 2, 1, 1, 1}, Args{3, 3, 2, 1, 0, 1, 2, 1}, Args{3, 3, 1, 2, 1, 0, 1, 2}}) {
      const std::int64_t eh = pl.h + 2 * a[4] - a[6] * (a[0] - 1) - 1, ew = pl.w + 2 * a[5] - a[7] * (a[1] - 1) - 1;
      if (eh < 0 || ew < 0) continue;
      const std::int64_t ho = eh / a[2] + 1, wo = ew / a[3] + 1, N = 2, C = 3;
      INFO("plane " << pl.h << " x " << pl.w << ", k " << a[0] << " stride " << a[2] << " x " << a[3] << " pad " << a[4] << " x "
                    << a[5] << " dilation " << a[6] << " x " << a[7]);
      Tensor x = Tensor::empty(dt, {N, C, pl.h, pl.w});
      Tensor f = Tensor::empty(dt, {C, a[0], a[1]});
      wfgen::rt::fill_uniform(x, -1, 1, rng);
      wfgen::rt::fill_uniform(f, -1, 1, rng);
      for (int threads : {1, 2}) {
        INFO(threads << " threads");
        wfgen::rt::set_num_threads(threads);
        Tensor out = Tensor::full(dt, {N, C, ho, wo}, 1e6);  // every element must be written
        kernel(x.cview<T, 4>(), f.cview<T, 3>(), out.view<T, 4>(), a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        std::int64_t wrong = 0;
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t y = 0; y < ho; ++y)
              for (std::int64_t xo = 0; xo < wo; ++xo)
                wrong += std::fabs(double(out.at<T>({n, c, y, xo})) - naive_depthwise<T>(x, f, n, c, y, xo, a)) > tol;
        CHECK(wrong == 0);
      }
    }
  wfgen::rt::set_num_threads(saved);
}

TEST_CASE("depthwise_conv2d with stride_h != stride_w on small planes: the naive loop's sums", "[kernels][threads]") {
  check_depthwise_strides<float>(wfgen_kernels::depthwise_conv2d_f32_r4, 1e-5);
  check_depthwise_strides<double>(wfgen_kernels::depthwise_conv2d_f64_r4, 1e-12);
}

// rt::DepthwiseConv::plane with an epilogue, as the kernels fusion makes
// call it (fuse.cpp's epilogues: `fused_depthwise_conv2d_add_...`, a bias
// and a clip on each element as it is stored): every path of the plane
// (the padded copy with its stride-1 run and its row loop, the interior /
// border split of large planes, the checked loop of dilation along W) gives
// the naive convolution, then + bias[c], then clip(0, 6), written as plain
// loops here; f32 and f64; the planes split across 1 and 2 threads as the
// generated kernel splits them; the output filled with NaN first.
template <class T>
void check_depthwise_epilogue(double tol) {
  using Args = std::array<std::int64_t, 8>;  // k_h k_w stride_h stride_w pad_h pad_w dilation_h dilation_w
  struct Plane {
    std::int64_t h, w;
  };
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  wfgen::rt::Rng rng(3839);
  const int saved = wfgen::rt::num_threads();
  for (const Plane pl : {Plane{14, 14}, Plane{9, 40}, Plane{70, 66}})
    for (const Args a : {Args{3, 3, 1, 1, 1, 1, 1, 1}, Args{3, 3, 2, 2, 1, 1, 1, 1}, Args{5, 5, 1, 2, 2, 2, 1, 1},
                         Args{3, 3, 1, 1, 2, 2, 2, 2}}) {
      const std::int64_t ho = (pl.h + 2 * a[4] - a[6] * (a[0] - 1) - 1) / a[2] + 1;
      const std::int64_t wo = (pl.w + 2 * a[5] - a[7] * (a[1] - 1) - 1) / a[3] + 1, N = 2, C = 3;
      INFO("plane " << pl.h << " x " << pl.w << ", k " << a[0] << " stride " << a[2] << " x " << a[3] << " pad " << a[4]
                    << " dilation " << a[6]);
      Tensor x = Tensor::empty(dt, {N, C, pl.h, pl.w});
      Tensor f = Tensor::empty(dt, {C, a[0], a[1]});
      Tensor bias = Tensor::empty(dt, {C});
      wfgen::rt::fill_uniform(x, -2, 2, rng);
      wfgen::rt::fill_uniform(f, -1, 1, rng);
      wfgen::rt::fill_uniform(bias, -3, 9, rng);  // some planes mostly clipped at 0, some at 6
      const wfgen::rt::DepthwiseConv<T> conv({pl.h, pl.w, ho, wo, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], pl.w, 1, a[1], 1, wo, 1});
      for (int threads : {1, 2}) {
        INFO(threads << " threads");
        wfgen::rt::set_num_threads(threads);
        Tensor out = Tensor::full(dt, {N, C, ho, wo}, std::numeric_limits<double>::quiet_NaN());
        wfgen::rt::parallel_for(0, N * C, 1, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t bc = lo; bc < hi; ++bc) {
            const T b = bias.data<T>()[bc % C];
            conv.plane(x.data<T>() + bc * pl.h * pl.w, f.data<T>() + (bc % C) * a[0] * a[1], out.data<T>() + bc * ho * wo,
                       [=](T acc) { return std::min(std::max(acc + b, T(0)), T(6)); });
          }
        });
        std::int64_t wrong = 0, clipped = 0;
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t y = 0; y < ho; ++y)
              for (std::int64_t xo = 0; xo < wo; ++xo) {
                double want = naive_depthwise<T>(x, f, n, c, y, xo, a) + double(bias.data<T>()[c]);
                want = want < 0 ? 0 : want > 6 ? 6 : want;
                clipped += want == 0 || want == 6;
                const double got = double(out.at<T>({n, c, y, xo}));
                wrong += !(std::fabs(got - want) <= tol);  // NaN (an element not written) counts
              }
        CHECK(wrong == 0);
        CHECK(clipped > 0);
        CHECK(clipped < N * C * ho * wo);
      }
    }
  wfgen::rt::set_num_threads(saved);
}

TEST_CASE("depthwise_conv2d with a bias + clip epilogue applied as each element is stored: the naive loops'", "[kernels][threads]") {
  check_depthwise_epilogue<float>(1e-5);
  check_depthwise_epilogue<double>(1e-12);
}

namespace {

// winograd_conv2d (rt::WinogradConv) with F(2 x 2, 3 x 3) and F(4 x 4, 3 x
// 3), on planes with partial tiles at the bottom and right edges (13 x 11,
// 9 x 16 at padding (0, 1): 7 x 16 outputs), a 1 x 1 plane (padding 1: one
// output of the centre tap), channels that are no multiple of 16, a batch of
// 2; with the epilogue fusion gives ResNet's convolutions, relu(conv + bias[m]
// + residual[n m y x]), as plain loops here, and without one through the
// generated kernel into a strided view of a larger tensor (the elements
// between untouched); 1 and 2 threads give the same bits. The error bound
// is relative to the sum of the terms' magnitudes (the transforms round
// more than the direct sum, F(4 x 4) most).
template <class T>
void check_winograd(double rtol) {
  struct Shape4 {
    std::int64_t n, c, m, h, w, ph, pw;
  };
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  wfgen::rt::Rng rng(3338);
  const int saved = wfgen::rt::num_threads();
  for (const Shape4 s : {Shape4{2, 19, 21, 13, 11, 1, 1}, Shape4{2, 5, 17, 1, 1, 1, 1}, Shape4{1, 3, 4, 9, 16, 0, 1}, Shape4{2, 17, 6, 7, 7, 1, 0}})
    for (const int tile : {2, 4}) {
      const std::int64_t ho = s.h + 2 * s.ph - 2, wo = s.w + 2 * s.pw - 2;
      INFO(s.n << " x " << s.c << " x " << s.h << " x " << s.w << " to " << s.m << " channels, padding " << s.ph << ", " << s.pw << ", tile " << tile);
      Tensor x = Tensor::empty(dt, {s.n, s.c, s.h, s.w}), f = Tensor::empty(dt, {s.m, s.c, 3, 3});
      Tensor bias = Tensor::empty(dt, {s.m}), res = Tensor::empty(dt, {s.n, s.m, ho, wo});
      wfgen::rt::fill_uniform(x, -2, 2, rng);
      wfgen::rt::fill_uniform(f, -1, 1, rng);
      wfgen::rt::fill_uniform(bias, -1, 1, rng);
      wfgen::rt::fill_uniform(res, -2, 2, rng);
      const wfgen::rt::WinogradConv<T> conv({s.n, s.c, s.h, s.w, s.m, ho, wo, s.ph, s.pw, {s.c * s.h * s.w, s.h * s.w, s.w, 1},
                                             {s.c * 9, 9, 3, 1}, {s.m * ho * wo, ho * wo, wo, 1}}, tile);
      std::vector<Tensor> outs, plain;
      for (int threads : {1, 2}) {
        wfgen::rt::set_num_threads(threads);
        outs.push_back(Tensor::full(dt, {s.n, s.m, ho, wo}, std::numeric_limits<double>::quiet_NaN()));
        conv.run(x.data<T>(), f.data<T>(), outs.back().data<T>(), wfgen::rt::gemm<T>,
                 [&](T acc, std::int64_t n, std::int64_t m, std::int64_t y, std::int64_t xo) {
                   return std::max(acc + bias.data<T>()[m] + res.data<T>()[((n * s.m + m) * ho + y) * wo + xo], T(0));
                 });
        plain.push_back(Tensor::full(dt, {s.n, s.m, ho, wo + 3}, -7.0));
        auto view = plain.back().view<T, 4>();
        view.shape[3] = wo;
        if constexpr (std::is_same_v<T, float>) wfgen_kernels::winograd_conv2d_f32_r4(x.cview<T, 4>(), f.cview<T, 4>(), view, s.ph, s.pw);
        else wfgen_kernels::winograd_conv2d_f64_r4(x.cview<T, 4>(), f.cview<T, 4>(), view, s.ph, s.pw);
      }
      wfgen::rt::set_num_threads(saved);
      std::int64_t differ = 0, wrong = 0, wrong_plain = 0, zeros = 0, touched = 0;
      for (std::int64_t n = 0; n < s.n; ++n)
        for (std::int64_t m = 0; m < s.m; ++m)
          for (std::int64_t y = 0; y < ho; ++y) {
            for (std::int64_t xo = 0; xo < wo; ++xo) {
              const auto [sum, mag] = conv3x3_sum([&](auto... i) { return double(x.at<T>({i...})); },
                                                  [&](auto... i) { return double(f.at<T>({i...})); }, s.c, s.h, s.w, n, m, y, xo, s.ph, s.pw);
              const double want = std::max(sum + double(bias.data<T>()[m]) + double(res.at<T>({n, m, y, xo})), 0.0);
              const double got = double(outs[0].at<T>({n, m, y, xo}));
              zeros += want == 0;
              differ += outs[0].at<T>({n, m, y, xo}) != outs[1].at<T>({n, m, y, xo});
              differ += plain[0].at<T>({n, m, y, xo}) != plain[1].at<T>({n, m, y, xo});
              wrong += !(std::fabs(got - want) <= rtol * (mag + 4) + 1e-300);  // NaN (an element not written) counts
              wrong_plain += !(std::fabs(double(plain[0].at<T>({n, m, y, xo})) - sum) <= rtol * mag + 1e-300);
            }
            for (std::int64_t xo = wo; xo < wo + 3; ++xo) touched += plain[0].at<T>({n, m, y, xo}) != T(-7);
          }
      CHECK(differ == 0);
      CHECK(wrong == 0);
      CHECK(wrong_plain == 0);
      CHECK(touched == 0);
      CHECK(zeros > 0);
      CHECK(zeros < s.n * s.m * ho * wo);
    }
}

}  // namespace

TEST_CASE("winograd_conv2d: F(2 x 2) and F(4 x 4) with partial tiles, padding, a bias + residual + relu epilogue, 1 and 2 threads", "[kernels][threads]") {
  check_winograd<float>(1e-5);
  check_winograd<double>(1e-13);
}

namespace {

// The GEMMs (rt::gemm, OpenBLAS's path, blas_gemm's choice) with a general
// epilogue (GemmEpilogue::block, as fused matmul kernels call them): C =
// max(acc * row[i] + col[j] + full[i, j] - 0.25, -0.5) for acc = A B (+ C),
// operands along C's rows, its columns, both and neither. Against the
// loops in double; a block applied twice or missed would not match (the
// epilogue is not idempotent), nor one applied before the last block of K.
template <class T>
void check_gemm_epilogue(int path, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate, bool c_transposed, double tol) {
  INFO("path " << path << ": " << M << " x " << N << " x " << K << (accumulate ? " +=" : "") << (c_transposed ? ", C transposed" : "")
                << ", threads " << wfgen::rt::num_threads());
  wfgen::rt::Rng rng(static_cast<std::uint64_t>(M * 131 + N * 7 + K));
  auto values = [&](std::int64_t n) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<T>(rng.uniform(-1, 1));
    return v;
  };
  const std::vector<T> A = values(M * K), B = values(K * N), row = values(M), col = values(N), full = values(M * N);
  std::vector<T> C = values(M * N);
  const std::vector<T> C0 = C;
  const std::int64_t rsc = c_transposed ? 1 : N, csc = c_transposed ? M : 1;
  const auto epilogue = [&](std::int64_t i0, std::int64_t j0, std::int64_t rows, std::int64_t cols) {
    for (std::int64_t i = i0; i < i0 + rows; ++i)
      for (std::int64_t j = j0; j < j0 + cols; ++j) {
        T& c = C[static_cast<std::size_t>(i * rsc + j * csc)];
        c = std::max(c * row[static_cast<std::size_t>(i)] + col[static_cast<std::size_t>(j)] + full[static_cast<std::size_t>(i * N + j)] - T(0.25),
                     T(-0.5));
      }
  };
  const wfgen::rt::GemmEpilogue<T> ep = wfgen::rt::gemm_epilogue<T>(epilogue);
  if (path == 0) wfgen::rt::gemm<T>(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), rsc, csc, accumulate, ep);
#if !defined(WFGEN_NO_BLAS)
  if (path == 1) wfgen::rt::openblas_gemm<T>(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), rsc, csc, accumulate, ep);
#endif
  if (path == 2) wfgen::rt::blas_gemm<T>(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), rsc, csc, accumulate, ep);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = accumulate ? double(C0[static_cast<std::size_t>(i * rsc + j * csc)]) : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        s += double(A[static_cast<std::size_t>(i * K + k)]) *
             double(B[static_cast<std::size_t>(k * N + j)]);
      const double want = std::max(s * double(row[static_cast<std::size_t>(i)]) + double(col[static_cast<std::size_t>(j)]) +
                                       double(full[static_cast<std::size_t>(i * N + j)]) - 0.25,
                                   -0.5);
      wrong += !(std::fabs(double(C[static_cast<std::size_t>(i * rsc + j * csc)]) - want) <= tol * (1 + std::sqrt(double(K))));
    }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("GEMM epilogues (fused matmul kernels): on every block of C once, after the last block of K, std-only and OpenBLAS", "[kernels][gemm][threads]") {
  const int saved = wfgen::rt::num_threads();
  struct Size {
    std::int64_t m, n, k;
  };
  // Tile remainders and K over KC (7 x 37 x 600), a narrow C (70 x 16 x 64),
  // an empty K, and from 2^21 multiply-adds split across the threads: by
  // bands of rows (130 x 90 x 200) and by blocks of C (8 x 600 x 500), and
  // along K (24 x 40 x 1100: a small C, a long K, gemm_k_splits).
  for (int threads : {1, 2}) {
    wfgen::rt::set_num_threads(threads);
    for (const Size s : {Size{1, 1, 1}, Size{7, 37, 600}, Size{70, 16, 64}, Size{13, 40, 0}, Size{130, 90, 200}, Size{8, 600, 500},
                         Size{24, 40, 1100}})
      for (int path : {0, 1, 2})
        for (bool accumulate : {false, true}) {
#if defined(WFGEN_NO_BLAS)  // a cross build without OpenBLAS (tests/cross): no openblas_gemm to call
          if (path == 1) continue;
#endif
          check_gemm_epilogue<float>(path, s.m, s.n, s.k, accumulate, false, 2e-5);
          check_gemm_epilogue<double>(path, s.m, s.n, s.k, accumulate, path == 1, 1e-12);
        }
  }
  wfgen::rt::set_num_threads(saved);
}

// Padded copies of small planes keep their zeros from one plane to the next
// of the same layout (rt::DepthwiseConv::padded): layouts of the same 9 x 9
// copy with the image in other places (7 x 7 with padding 1, 9 x 9 with
// none, 5 x 5 with padding 2), one after the other on one thread, each
// against the naive loop. Had the second plane of a layout reused the zeros
// of another, the padding would hold the last image's values.
TEST_CASE("depthwise_conv2d: padded copies of the same size with the image placed differently, one after the other", "[kernels]") {
  const int saved = wfgen::rt::num_threads();
  wfgen::rt::set_num_threads(1);
  wfgen::rt::Rng rng(939);
  struct Layout {
    std::int64_t hw, k, pad;
  };
  for (const Layout l : {Layout{7, 3, 1}, Layout{9, 3, 0}, Layout{7, 3, 1}, Layout{5, 5, 2}, Layout{7, 3, 1}, Layout{9, 3, 0}}) {
    INFO("plane " << l.hw << ", k " << l.k << ", pad " << l.pad);
    const std::int64_t N = 2, C = 3, ho = l.hw + 2 * l.pad - l.k + 1;
    Tensor x = Tensor::empty(DType::f32, {N, C, l.hw, l.hw});
    Tensor f = Tensor::empty(DType::f32, {C, l.k, l.k});
    wfgen::rt::fill_uniform(x, 1, 2, rng);  // no zeros in the image: a stale copy in the padding shows
    wfgen::rt::fill_uniform(f, -1, 1, rng);
    Tensor out = Tensor::full(DType::f32, {N, C, ho, ho}, 1e6);
    wfgen_kernels::depthwise_conv2d_f32_r4(x.cview<float, 4>(), f.cview<float, 3>(), out.view<float, 4>(), l.k, l.k, 1, 1, l.pad, l.pad, 1, 1);
    std::int64_t wrong = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t y = 0; y < ho; ++y)
          for (std::int64_t xo = 0; xo < ho; ++xo)
            wrong += std::fabs(out.at<float>({n, c, y, xo}) - naive_depthwise<float>(x, f, n, c, y, xo, {l.k, l.k, 1, 1, l.pad, l.pad, 1, 1})) > 1e-5;
    CHECK(wrong == 0);
  }
  wfgen::rt::set_num_threads(saved);
}
