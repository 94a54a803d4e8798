// What generated kernels call in kernel_support.hpp, against naive loops:
// the std-only GEMM (remainders of every block size, strided operands,
// accumulation, the bias + relu epilogue, split across threads by rows and
// by columns) and LoopNest's tiles for operands that disagree on the
// fastest dim (a transposed add, an NCHW -> NHWC permute), at 1 and 2
// threads.
#include <atomic>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "test_util.hpp"
#include "wfgen/kernel_math.hpp"
#include "wfgen/kernel_support.hpp"
#include "wfgen/vm.hpp"

namespace {

struct ThreadCountGuard {
  int saved = rt::num_threads();
  ~ThreadCountGuard() { rt::set_num_threads(saved); }
};

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  // Integers: small values in [-3, 3], so that every product is exact.
  for (auto& x : v) x = std::is_integral_v<T> ? static_cast<T>(std::lround(3 * u(rng))) : static_cast<T>(u(rng));
  return v;
}

// How a matrix is laid out in check_gemm: rows of stride `cols` (plain),
// stored transposed (columns of stride `rows`), or every other element of
// every other row (neither stride 1, as a sliced view).
enum class Layout { Plain, Transposed, Spread };

struct Strides {
  std::int64_t rs, cs, size;
};
Strides layout_strides(Layout l, std::int64_t rows, std::int64_t cols) {
  switch (l) {
    case Layout::Plain: return {cols, 1, rows * cols};
    case Layout::Transposed: return {1, rows, rows * cols};
    case Layout::Spread: return {4 * cols, 2, 4 * rows * cols};
  }
  return {};
}

// The std-only gemm's driver with a tile and cache blocks of the test's
// choosing: small blocks reach every remainder (of K, of B's column blocks,
// of A's row blocks) with small matrices.
template <class T>
using GemmFn = void (*)(const rt::detail::GemmArgs<T>&);
template <class T>
void default_gemm(const rt::detail::GemmArgs<T>& g) {
  rt::gemm<T>(g.M, g.N, g.K, g.A, g.rsa, g.csa, g.B, g.rsb, g.csb, g.C, g.rsc, g.csc, g.accumulate, *g.ep);
}
template <class T, int MR_, int NV_, std::int64_t KC_, std::int64_t MC_, std::int64_t NC_PANELS>
struct SmallTile {
  static constexpr int VL = rt::detail::GemmTile<T>::VL, NV = NV_, NR = VL * NV, MR = MR_;
  static constexpr std::int64_t KC = KC_, MC = MC_, NC = NC_PANELS * NR;
};

// C = A B (+ C0) (+ bias) (relu) in double, A, B and C laid out as asked.
template <class T>
void check_gemm(std::int64_t M, std::int64_t N, std::int64_t K, Layout la, Layout lb, Layout lc, bool accumulate,
                bool bias, bool relu, double tol, GemmFn<T> fn = &default_gemm<T>) {
  INFO("M " << M << " N " << N << " K " << K << " layouts A " << int(la) << " B " << int(lb) << " C " << int(lc)
            << (accumulate ? " +=" : "") << (bias ? " bias" : "") << (relu ? " relu" : "") << " threads "
            << rt::num_threads());
  const Strides sa = layout_strides(la, M, K), sb = layout_strides(lb, K, N), sc = layout_strides(lc, M, N);
  const std::vector<T> A = random_values<T>(static_cast<std::size_t>(sa.size), 1 + M);
  const std::vector<T> B = random_values<T>(static_cast<std::size_t>(sb.size), 2 + N);
  const std::vector<T> bv = random_values<T>(static_cast<std::size_t>(2 * N), 3 + K);
  std::vector<T> C = random_values<T>(static_cast<std::size_t>(sc.size), 4);
  const std::vector<T> C0 = C;
  rt::GemmEpilogue<T> ep;
  if (bias) {
    ep.bias = bv.data();
    ep.bias_stride = 2;
  }
  ep.relu = relu;
  fn({M, N, K, A.data(), sa.rs, sa.cs, B.data(), sb.rs, sb.cs, C.data(), sc.rs, sc.cs, accumulate, &ep});
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      const auto at = [&](std::int64_t ii, std::int64_t jj) { return static_cast<std::size_t>(ii * sc.rs + jj * sc.cs); };
      double s = accumulate ? static_cast<double>(C0[at(i, j)]) : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        s += static_cast<double>(A[static_cast<std::size_t>(i * sa.rs + k * sa.cs)]) *
             static_cast<double>(B[static_cast<std::size_t>(k * sb.rs + j * sb.cs)]);
      if (bias) s += static_cast<double>(bv[static_cast<std::size_t>(2 * j)]);
      if (relu) s = s > 0 ? s : 0;
      const double got = static_cast<double>(C[at(i, j)]);
      if (!(std::fabs(got - s) <= tol * (1 + std::sqrt(static_cast<double>(K))))) {
        if (bad++ < 3) UNSCOPED_INFO("C(" << i << ", " << j << ") = " << got << ", expected " << s);
      }
    }
  }
  CHECK(bad == 0);
  // Elements of a spread C between the matrix's own are untouched.
  if (lc == Layout::Spread) {
    std::int64_t touched = 0;
    for (std::int64_t e = 0; e < sc.size; ++e) {
      const std::int64_t i = e / sc.rs, j = (e % sc.rs) / sc.cs;
      const bool own = e % sc.rs % sc.cs == 0 && j < N;
      if (!own && C[static_cast<std::size_t>(e)] != C0[static_cast<std::size_t>(e)] && i < M) ++touched;
    }
    CHECK(touched == 0);
  }
}

}  // namespace

TEST_CASE("std-only gemm: remainders, strides, accumulation, the epilogue, threads", "[gemm]") {
  ThreadCountGuard guard;
  struct Size {
    std::int64_t m, n, k;
  };
  using L = Layout;
  // MR 6 or 8, NR two vectors, KC up to 512 (K in equal blocks), MC 96, NC
  // 4096. Tiles with mr < MR and nr < NR, M or N smaller than a tile, K = 0,
  // K over KC; from 2^21 multiply-adds the product is split across threads:
  // by rows (130 x 90 x 200), by rows and columns when C has few rows
  // (8 x 600 x 500, 20 x 4200 x 30, the latter over two blocks of NC).
  const Size sizes[] = {{1, 1, 1},     {5, 7, 3},       {6, 16, 256},  {7, 17, 257},   {97, 33, 300},
                        {13, 40, 0},   {130, 90, 200},  {40, 300, 200}, {131, 129, 130}, {20, 37, 1100},
                        {70, 50, 1100}, {8, 600, 500}, {20, 4200, 30}};
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    for (const Size& s : sizes) {
      check_gemm<float>(s.m, s.n, s.k, L::Plain, L::Plain, L::Plain, false, false, false, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, L::Transposed, L::Transposed, L::Plain, true, false, false, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, L::Plain, L::Transposed, L::Transposed, false, true, true, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, L::Transposed, L::Plain, L::Spread, true, true, false, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, L::Spread, L::Spread, L::Plain, true, false, true, 2e-5);
      check_gemm<double>(s.m, s.n, s.k, L::Plain, L::Plain, L::Plain, true, true, true, 1e-12);
      check_gemm<double>(s.m, s.n, s.k, L::Transposed, L::Spread, L::Plain, false, false, false, 1e-12);
      check_gemm<std::int32_t>(s.m, s.n, s.k, L::Plain, L::Plain, L::Plain, true, true, true, 0);
      check_gemm<std::int64_t>(s.m, s.n, s.k, L::Transposed, L::Plain, L::Plain, false, false, false, 0);
    }
  }
}

TEST_CASE("std-only gemm with small blocks: every block remainder, other tile shapes", "[gemm]") {
  ThreadCountGuard guard;
  using L = Layout;
  // KC 24 or 40, MC 16 or 24, NC 1 or 3 panels: K, A's rows and B's
  // columns run over several blocks with remainders; tiles of 8 x 2 vectors
  // (the AVX-512 shape), 4 x 3 and 6 x 1 of the target's vectors.
  const GemmFn<float> fns[] = {&rt::detail::gemm_impl<float, SmallTile<float, 8, 2, 24, 16, 3>>,
                               &rt::detail::gemm_impl<float, SmallTile<float, 4, 3, 24, 24, 3>>,
                               &rt::detail::gemm_impl<float, SmallTile<float, 6, 1, 40, 24, 1>>};
  const GemmFn<double> dfn = &rt::detail::gemm_impl<double, SmallTile<double, 8, 2, 24, 16, 3>>;
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{1, 1, 1}, {9, 13, 25}, {33, 70, 49}, {64, 96, 48}, {150, 140, 130}}) {
      for (GemmFn<float> fn : fns) {
        check_gemm<float>(m, n, k, L::Plain, L::Plain, L::Plain, false, false, false, 2e-5, fn);
        check_gemm<float>(m, n, k, L::Transposed, L::Spread, L::Transposed, true, true, true, 2e-5, fn);
      }
      check_gemm<double>(m, n, k, L::Spread, L::Transposed, L::Plain, true, true, false, 1e-12, dfn);
    }
  }
}

TEST_CASE("std-only gemm with a narrow C (one vector of columns at most): every width, strided operands", "[gemm]") {
  ThreadCountGuard guard;
  using L = Layout;
  // N <= one vector runs on GemmNarrowTile (16 x 1 vector with 32
  // registers); N = 17 is the first width back on GemmTile. The attention's
  // products: 64 x 64 by 64 x 16 (s v, dS k; s.T dO with A transposed),
  // and rows around the tile's height.
  for (std::int64_t n = 1; n <= 17; ++n) {
    for (std::int64_t m : {1, 7, 15, 16, 17, 33, 64, 70}) {
      for (std::int64_t k : {1, 16, 64, 100}) {
        check_gemm<float>(m, n, k, L::Plain, L::Plain, L::Plain, false, false, false, 2e-5);
        check_gemm<float>(m, n, k, L::Transposed, L::Spread, L::Transposed, true, true, true, 2e-5);
      }
    }
    check_gemm<float>(64, n, 64, L::Spread, L::Transposed, L::Spread, false, true, false, 2e-5);
    check_gemm<double>(70, n, 64, L::Plain, L::Transposed, L::Plain, true, false, true, 1e-12);
  }
  // Split across threads: by bands of rows (8200 x 16 x 16) and, with few
  // rows, by blocks of C (40 x 16 x 3300; K over several blocks of KC).
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    check_gemm<float>(8200, 16, 16, L::Plain, L::Plain, L::Plain, true, true, false, 2e-5);
    check_gemm<float>(40, 16, 3300, L::Plain, L::Transposed, L::Plain, false, false, true, 2e-5);
  }
}

// GemmWideTile's shape with small blocks: KC 24 (K's blocks end inside a
// vector: the tail's last columns of A through zeroed lanes), MC 16, NC two
// panels (C's columns over several blocks, the tail after the last).
template <class T>
struct SmallWideTile {
  static constexpr int VL = rt::detail::GemmTile<T>::VL, NV = 3, NR = 3 * VL, MR = 8;
  static constexpr std::int64_t KC = 24, MC = 16, NC = 2 * NR;
  static constexpr int kTail = 4;
};

// rt::gemm (float, A row-major) with an epilogue on finished blocks:
// every element of C is handed to it once, with its final value.
void check_gemm_block_epilogue(std::int64_t M, std::int64_t N, std::int64_t K) {
  INFO("M " << M << " N " << N << " K " << K << " threads " << rt::num_threads());
  const std::vector<float> A = random_values<float>(static_cast<std::size_t>(M * K), 5 + M);
  const std::vector<float> B = random_values<float>(static_cast<std::size_t>(K * N), 6 + N);
  std::vector<float> C(static_cast<std::size_t>(M * N)), seen(C.size(), 0.0f);
  std::vector<int> calls(C.size(), 0);
  auto block = [&](std::int64_t i0, std::int64_t j0, std::int64_t rows, std::int64_t cols) {
    for (std::int64_t i = i0; i < i0 + rows; ++i)
      for (std::int64_t j = j0; j < j0 + cols; ++j) {
        ++calls[static_cast<std::size_t>(i * N + j)];
        seen[static_cast<std::size_t>(i * N + j)] = C[static_cast<std::size_t>(i * N + j)];
      }
  };
  rt::gemm<float>(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1, false, rt::gemm_epilogue<float>(block));
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k)
        s += static_cast<double>(A[static_cast<std::size_t>(i * K + k)]) * static_cast<double>(B[static_cast<std::size_t>(k * N + j)]);
      const std::size_t e = static_cast<std::size_t>(i * N + j);
      if (calls[e] != 1 || !(std::fabs(seen[e] - s) <= 2e-5 * (1 + std::sqrt(static_cast<double>(K))))) {
        if (bad++ < 3) UNSCOPED_INFO("C(" << i << ", " << j << "): " << calls[e] << " calls, saw " << seen[e] << ", expected " << s);
      }
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("std-only gemm on the three-vector tile: N mod 48 <= 4 columns of dot products, threads", "[gemm]") {
  ThreadCountGuard guard;
  using L = Layout;
  // The shapes rt::gemm sends to GemmWideTile (own_gemm_wide_tile_fits:
  // at least 64 rows, N = 48 q + t, t <= 4, where 32-column panels pad 8 or
  // more): a 7 x 7 plane's N = 49, 14 x 14's 196, 48 + 4 and 96 + 2; K with
  // and without a partial vector (15, 17, 300) and over several blocks of
  // KC (600). A not row-major (transposed, spread) runs on GemmTile.
  CHECK(rt::own_gemm_wide_tile_fits(512, 49));
  CHECK(rt::own_gemm_wide_tile_fits(256, 196));
  CHECK_FALSE(rt::own_gemm_wide_tile_fits(512, 64));   // whole 32-column panels
  CHECK_FALSE(rt::own_gemm_wide_tile_fits(512, 53));   // 5 columns past 48
  CHECK_FALSE(rt::own_gemm_wide_tile_fits(63, 49));    // too few rows to split into bands
  CHECK(rt::own_gemm_is_faster(512, 49, 4608));
  CHECK_FALSE(rt::own_gemm_is_faster(512, 64, 4608));
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    for (std::int64_t n : {49, 52, 98, 196}) {
      for (std::int64_t m : {64, 70, 131}) {
        for (std::int64_t k : {1, 15, 17, 300}) {
          check_gemm<float>(m, n, k, L::Plain, L::Plain, L::Plain, false, false, false, 2e-5);
          check_gemm<float>(m, n, k, L::Plain, L::Transposed, L::Spread, true, true, true, 2e-5);
        }
      }
      check_gemm<float>(64, n, 600, L::Plain, L::Spread, L::Transposed, true, true, false, 2e-5);
      check_gemm<float>(70, n, 33, L::Transposed, L::Plain, L::Plain, false, true, true, 2e-5);
      check_gemm_block_epilogue(70, n, 300);
    }
    // K split across threads (64 x 49 by K 2100: a small C, a long K), each
    // block of K with its own tail columns, then added in order.
    check_gemm<float>(64, 49, 2100, L::Plain, L::Plain, L::Plain, true, true, true, 2e-5);
    check_gemm_block_epilogue(64, 49, 2100);
    // Small blocks: every remainder, C's columns over several blocks of NC,
    // and few rows (9, 17: the split that shares B's panels pads the tail).
    const GemmFn<float> fn = &rt::detail::gemm_impl<float, SmallWideTile<float>>;
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{9, 49, 25}, {17, 148, 49}, {70, 147, 100}, {130, 194, 23}}) {
      check_gemm<float>(m, n, k, L::Plain, L::Plain, L::Plain, false, false, false, 2e-5, fn);
      check_gemm<float>(m, n, k, L::Plain, L::Transposed, L::Spread, true, true, true, 2e-5, fn);
    }
  }
}

TEST_CASE("LoopNest tiles a transposed operand and covers every element once", "[loopnest]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {31, 33}, {32, 32}, {65, 70}, {2, 100},
                              {100, 2}, {300, 257}}) {
      INFO(rows << " x " << cols << ", threads " << threads);
      // out[i, j] = a[j, i] + b[i, j]: a is read transposed.
      const std::vector<double> a = random_values<double>(static_cast<std::size_t>(rows * cols), 5);
      const std::vector<double> b = random_values<double>(static_cast<std::size_t>(rows * cols), 6);
      std::vector<double> out(static_cast<std::size_t>(rows * cols), -1.0);
      std::vector<int> hits(out.size(), 0);
      const rt::LoopNest<2, 3> nest({rows, cols}, {std::array<std::int64_t, 2>{1, rows}, {cols, 1}, {cols, 1}}, 2, true);
      CHECK(nest.tiled() == (rows > 1 && cols > 1));
      CHECK(!nest.inner_contiguous() == (rows > 1 && cols > 1));
      for (std::int64_t grain : {0, 64, 100000}) {
        nest.run(grain, [&](const std::int64_t* off, const std::int64_t* step, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i) {
            out[static_cast<std::size_t>(off[2] + i * step[2])] = a[static_cast<std::size_t>(off[0] + i * step[0])] + b[static_cast<std::size_t>(off[1] + i * step[1])];
            if (grain == 0) hits[static_cast<std::size_t>(off[2] + i * step[2])]++;
          }
        });
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j)
            REQUIRE(out[static_cast<std::size_t>(i * cols + j)] == a[static_cast<std::size_t>(j * rows + i)] + b[static_cast<std::size_t>(i * cols + j)]);
      }
      for (int h : hits) REQUIRE(h == 1);
    }
    // NCHW -> NHWC: out[n, h, w, c] = in[n, c, h, w]; in's fastest dim (w)
    // becomes the second innermost, next to c.
    const std::int64_t N = 2, C = 35, H = 5, W = 40;
    std::vector<double> in(static_cast<std::size_t>(N * C * H * W));
    for (std::size_t k = 0; k < in.size(); ++k) in[k] = static_cast<double>(k);
    std::vector<double> out(in.size(), -1.0);
    const std::array<std::int64_t, 4> in_strides{C * H * W, W, 1, H * W};  // in viewed as [n h w c]
    const std::array<std::int64_t, 4> out_strides{H * W * C, W * C, C, 1};
    const rt::LoopNest<4, 2> nest({N, H, W, C}, {in_strides, out_strides}, 1, true);
    CHECK(nest.tiled());
    nest.run(256, [&](const std::int64_t* off, const std::int64_t* step, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(off[1] + i * step[1])] = in[static_cast<std::size_t>(off[0] + i * step[0])];
    });
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w)
          for (std::int64_t c = 0; c < C; ++c)
            REQUIRE(out[static_cast<std::size_t>(((n * H + h) * W + w) * C + c)] == in[static_cast<std::size_t>(((n * C + c) * H + h) * W + w)]);
  }
  // Without `tiles`, or with every operand contiguous, or a broadcast one: no tiles.
  CHECK(!rt::LoopNest<2, 2>({64, 64}, {std::array<std::int64_t, 2>{1, 64}, {64, 1}}, 1).tiled());
  CHECK(!rt::LoopNest<2, 2>({64, 64}, {std::array<std::int64_t, 2>{64, 1}, {64, 1}}, 1, true).tiled());
  CHECK(!rt::LoopNest<2, 2>({64, 64}, {std::array<std::int64_t, 2>{0, 1}, {64, 1}}, 1, true).tiled());
}

TEST_CASE("LoopNest::run_tiles hands out blocks that cover every element once, and TileOperand reads them", "[loopnest]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    // Blocks of kTileSide and remainders; a batch dim outside the block.
    for (auto [batch, rows, cols] : {std::array<std::int64_t, 3>{1, 2, 2}, {1, 64, 64}, {1, 65, 129}, {3, 70, 7}, {2, 130, 66}}) {
      INFO(batch << " x " << rows << " x " << cols << ", threads " << threads);
      const std::int64_t count = batch * rows * cols;
      // out[b, i, j] = a[b, j, i] (transposed) + b[b, i, j] + c[j] (broadcast along rows) + d[b, i, cols - 1 - j] (reversed).
      const std::vector<double> a = random_values<double>(static_cast<std::size_t>(count), 7);
      const std::vector<double> b = random_values<double>(static_cast<std::size_t>(count), 8);
      const std::vector<double> c = random_values<double>(static_cast<std::size_t>(cols), 9);
      const std::vector<double> d = random_values<double>(static_cast<std::size_t>(count), 10);
      std::vector<double> out(static_cast<std::size_t>(count), -1.0);
      std::vector<int> hits(out.size(), 0);
      using S = std::array<std::int64_t, 3>;
      const std::int64_t d_start = cols - 1;  // d's element (0, 0, 0) is its first row's last
      const rt::LoopNest<3, 5> nest({batch, rows, cols},
                                    {S{rows * cols, 1, rows}, S{rows * cols, cols, 1}, S{0, 0, 1}, S{rows * cols, cols, -1}, S{rows * cols, cols, 1}}, 4,
                                    true);
      REQUIRE(nest.tiled() == (rows > 1 && cols > 1));
      if (!nest.tiled()) continue;
      for (std::int64_t grain : {0, 100, 1000000}) {
        std::fill(hits.begin(), hits.end(), 0);
        std::atomic<int> wrong{0};
        nest.run_tiles(grain, [&](const std::int64_t* off, const std::int64_t* row_step, const std::int64_t* col_step, std::int64_t n_rows, std::int64_t n_cols) {
          // (Catch2's assertions are for the test's thread: workers count what is wrong.)
          if (n_rows < 1 || n_rows > rt::kTileSide || n_cols < 1 || n_cols > rt::kTileSide) ++wrong;
          const rt::TileOperand<const double> ta(a.data() + off[0], row_step[0], col_step[0], n_rows, n_cols);
          const rt::TileOperand<const double> tb(b.data() + off[1], row_step[1], col_step[1], n_rows, n_cols);
          const rt::TileOperand<const double> tc(c.data() + off[2], row_step[2], col_step[2], n_rows, n_cols);
          const rt::TileOperand<const double> td(d.data() + d_start + off[3], row_step[3], col_step[3], n_rows, n_cols);
          // a copied (column step rows), b read in place, c copied (step 0 along rows, 1 along columns: in place), d copied (step -1)
          if (ta.step() != 1 || ta.row(0) == a.data() + off[0] || tb.row(0) != b.data() + off[1] || tc.row(0) != c.data() + off[2] ||
              td.step() != 1)
            ++wrong;
          for (std::int64_t r = 0; r < n_rows; ++r) {
            for (std::int64_t j = 0; j < n_cols; ++j) {
              const auto at = static_cast<std::size_t>(off[4] + r * row_step[4] + j * col_step[4]);
              out[at] = ta.row(r)[j * ta.step()] + tb.row(r)[j * tb.step()] + tc.row(r)[j * tc.step()] + td.row(r)[j * td.step()];
              if (grain == 0) hits[at]++;
            }
          }
        });
        REQUIRE(wrong == 0);
        for (std::int64_t n = 0; n < batch; ++n)
          for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
              const auto o = static_cast<std::size_t>((n * rows + i) * cols + j);
              const double want = a[static_cast<std::size_t>((n * cols + j) * rows + i)] + b[o] + c[static_cast<std::size_t>(j)] +
                                  d[static_cast<std::size_t>((n * rows + i) * cols + (cols - 1 - j))];
              REQUIRE(out[o] == want);
            }
        if (grain == 0)
          for (int h : hits) REQUIRE(h == 1);
      }
    }
  }
  // A column step of 0 or 1 is read in place; a broadcast row (row step 0) too.
  const std::vector<float> v{1, 2, 3, 4};
  const rt::TileOperand<const float> same(v.data(), 0, 1, 5, 4);
  CHECK(same.row(3) == v.data());
  CHECK(same.step() == 1);
  const rt::TileOperand<const float> scalar(v.data() + 2, 0, 0, 3, 3);
  CHECK(scalar.step() == 0);
  CHECK(*scalar.row(2) == 3.0f);
}

namespace {

// rows_to_lanes and lanes_to_rows against the index formula, for one element type.
template <class T, int Lanes>
void check_lanes_round_trip() {
  for (std::int64_t len : {0, 1, Lanes - 1, Lanes, Lanes + 1, 2 * Lanes + 3, 70}) {
    for (std::int64_t extra : {0, 5}) {  // rows further apart than their length
      INFO("len " << len << ", row stride " << len + extra << ", lanes " << Lanes << ", element size " << sizeof(T));
      const std::int64_t stride = len + extra;
      std::vector<T> rows(static_cast<std::size_t>(Lanes * stride + 1));
      for (std::size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<T>((k * 7 + 3) % 101);
      std::vector<T> tile(static_cast<std::size_t>(Lanes * len + 1), T(-1));
      rt::rows_to_lanes<Lanes>(rows.data(), stride, len, tile.data());
      for (std::int64_t c = 0; c < len; ++c)
        for (int l = 0; l < Lanes; ++l) REQUIRE(tile[static_cast<std::size_t>(c * Lanes + l)] == rows[static_cast<std::size_t>(l * stride + c)]);
      REQUIRE(tile.back() == T(-1));  // nothing past the tile
      std::vector<T> back(rows.size(), T(-2));
      rt::lanes_to_rows<Lanes>(tile.data(), len, back.data(), stride);
      for (std::int64_t l = 0; l < Lanes; ++l)
        for (std::int64_t c = 0; c < stride; ++c) {
          const auto at = static_cast<std::size_t>(l * stride + c);
          REQUIRE(back[at] == (c < len ? rows[at] : T(-2)));  // the gaps between rows untouched
        }
    }
  }
}

}  // namespace

TEST_CASE("rows_to_lanes and lanes_to_rows: column-major tiles of rows, blocks transposed in registers", "[rowtiles]") {
  check_lanes_round_trip<float, 16>();
  check_lanes_round_trip<double, 8>();
  check_lanes_round_trip<std::int32_t, 16>();
  check_lanes_round_trip<std::int64_t, 8>();
  check_lanes_round_trip<std::uint8_t, 64>();  // copied one by one
  check_lanes_round_trip<float, 4>();          // fewer lanes than a vector: one by one
}

namespace {

// copy_run and PaddedRows (im2col's rows) against a naive loop, for every
// length up to past two 64-byte moves and every padding: each element of
// [0, n) is the row's or 0, and nothing around the row is written.
template <class T>
void check_padded_rows() {
  constexpr std::int64_t kGuard = 80;  // elements on each side that must stay untouched
  std::vector<T> src(600);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = T(10 + (i * 7) % 90);  // distinct neighbours, never 0 or 9
  for (std::int64_t n = 0; n <= 140 / static_cast<std::int64_t>(sizeof(T)) + 3; ++n) {
    std::vector<T> run(static_cast<std::size_t>(n + 2 * kGuard), T(9));
    rt::copy_run(run.data() + kGuard, src.data() + 3, n);
    for (std::int64_t i = 0; i < n + 2 * kGuard; ++i) {
      const T want = i >= kGuard && i < kGuard + n ? src[static_cast<std::size_t>(i - kGuard + 3)] : T(9);
      INFO("copy_run n=" << n << " at " << i);
      REQUIRE(run[static_cast<std::size_t>(i)] == want);
    }
    // copy_every_other from a source that ends at its last element read
    // (2 (n - 1)): nothing past it is read (the sanitizers' builds check).
    std::vector<T> every(static_cast<std::size_t>(std::max<std::int64_t>(1, 2 * n - 1)));
    for (std::size_t i = 0; i < every.size(); ++i) every[i] = src[i];
    std::vector<T> even(static_cast<std::size_t>(n + 2 * kGuard), T(9));
    rt::copy_every_other(even.data() + kGuard, every.data(), n);
    for (std::int64_t i = 0; i < n + 2 * kGuard; ++i) {
      const T want = i >= kGuard && i < kGuard + n ? src[static_cast<std::size_t>(2 * (i - kGuard))] : T(9);
      INFO("copy_every_other n=" << n << " at " << i);
      REQUIRE(even[static_cast<std::size_t>(i)] == want);
    }
    for (std::int64_t lo = 0; lo <= std::min<std::int64_t>(n, 3); ++lo) {
      for (std::int64_t hi = std::max(lo, n - 3); hi <= n; ++hi) {
        for (std::int64_t stride : {1, 2, 3}) {
          const std::int64_t shift = lo * stride - 2;  // row[x stride - shift]: the row's element 2 at x = lo
          std::vector<T> out(static_cast<std::size_t>(n + 2 * kGuard), T(9));
          T* dst = out.data() + kGuard;
          if (stride == 1) rt::PaddedRows<T>(n, shift, lo, hi).copy(dst, src.data() + 40);
          else if (stride == 2) rt::PaddedRows<T, 2>(n, shift, lo, hi).copy(dst, src.data() + 40);
          else rt::PaddedRows<T, 3>(n, shift, lo, hi).copy(dst, src.data() + 40);
          for (std::int64_t i = 0; i < n + 2 * kGuard; ++i) {
            const std::int64_t x = i - kGuard;
            const T want =
                x < 0 || x >= n ? T(9) : x >= lo && x < hi ? src[static_cast<std::size_t>(40 + x * stride - shift)] : T(0);
            INFO("PaddedRows n=" << n << " lo=" << lo << " hi=" << hi << " stride=" << stride << " at x=" << x);
            REQUIRE(out[static_cast<std::size_t>(i)] == want);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("copy_run, copy_every_other and PaddedRows (strides 1, 2, 3) copy exactly the n elements, with zeros outside the padded bounds", "[im2col]") {
  check_padded_rows<float>();
  check_padded_rows<double>();
  check_padded_rows<std::uint8_t>();
  check_padded_rows<std::int64_t>();
}

namespace {

// sqrt_lanes against std::sqrt, bit for bit (any NaN for a NaN): zeros of
// both signs, subnormals, negatives, infinities, NaN and ordinary values.
template <int N, class T>
void check_sqrt_lanes() {
  const T specials[] = {T(0), -T(0), std::numeric_limits<T>::denorm_min(), T(-1), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(), T(2), T(1e-30), T(3.5e7)};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 100);
  for (int round = 0; round < 20; ++round) {
    T v[N], want[N];
    for (int l = 0; l < N; ++l) {
      v[l] = round == 0 ? specials[l % 10] : static_cast<T>(u(rng) * u(rng));
      want[l] = std::sqrt(v[l]);
    }
    rt::math::sqrt_lanes<N>(v);
    for (int l = 0; l < N; ++l) {
      INFO("lane " << l << " of " << N << ", round " << round);
      if (std::isnan(want[l])) REQUIRE(std::isnan(v[l]));
      else REQUIRE(std::memcmp(&v[l], &want[l], sizeof(T)) == 0);
    }
  }
}

}  // namespace

TEST_CASE("sqrt_lanes is std::sqrt on every lane, in vectors where the target has them", "[rowtiles]") {
  check_sqrt_lanes<16, float>();
  check_sqrt_lanes<8, double>();
  check_sqrt_lanes<32, float>();
  check_sqrt_lanes<4, float>();  // 16 bytes
  check_sqrt_lanes<3, float>();  // no vector: std::sqrt
  check_sqrt_lanes<2, double>();
}

// rt::attention_rows here as well: this file is also built with
// -march=native, where float heads take the AVX-512 softmax of eight rows
// at once (attention_softmax_rows8; tests/kernels covers the portable
// path). Every third row of Q times 400, so that the rows of one register
// tile have maxes ~300 apart (scores ~0.3 times the factor here): a row shifted by another row's max, or given
// another row's sum, is far off (its exps underflow to a zero sum or
// overflow). Against softmax(scale Q K^T) V in double, causal and not,
// one tile of keys (64) and several (300: the online rescale).
TEST_CASE("attention_rows: each row of a register tile its own max and sum", "[attention]") {
  for (bool causal : {true, false})
    for (std::int64_t m : {64, 300, 13}) {
      const std::int64_t n = m == 300 ? 70 : m, d = m == 13 ? 5 : 16, dv = m == 13 ? 7 : 16;
      std::vector<float> q = random_values<float>(std::size_t(n * d), 1), k = random_values<float>(std::size_t(m * d), 2),
                         v = random_values<float>(std::size_t(m * dv), 3), o(std::size_t(n * dv));
      for (std::int64_t i = 1; i < n; i += 3)
        for (std::int64_t c = 0; c < d; ++c) q[std::size_t(i * d + c)] *= 400.0f;
      const float scale = 1.0f / std::sqrt(float(d));
      // K^T as a transposed view of K's rows, as the fused kernel gets it.
      const rt::AttentionMatrices<float> a{q.data(), d, 1, k.data(), 1, d, v.data(), dv, 1, o.data(), dv, 1};
      rt::attention_rows(a, rt::AttentionShape{n, m, d, dv, causal}, scale, 0, n);
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t kept = causal ? std::min(i + 1, m) : m;
        std::vector<double> p(std::size_t(kept), 0.0);
        double mx = -1e300, sum = 0;
        for (std::int64_t j = 0; j < kept; ++j) {
          for (std::int64_t c = 0; c < d; ++c) p[std::size_t(j)] += double(q[std::size_t(i * d + c)]) * double(k[std::size_t(j * d + c)]);
          mx = std::max(mx, p[std::size_t(j)] *= double(scale));
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (std::int64_t e = 0; e < dv; ++e) {
          double want = 0;
          for (std::int64_t j = 0; j < kept; ++j) want += p[std::size_t(j)] / sum * double(v[std::size_t(j * dv + e)]);
          wrong += !(std::fabs(double(o[std::size_t(i * dv + e)]) - want) <= 1e-3 * (1 + std::fabs(want)));
        }
      }
      INFO("m " << m << (causal ? ", causal" : ""));
      CHECK(wrong == 0);
    }
}
