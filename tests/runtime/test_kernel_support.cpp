// What generated kernels call in kernel_support.hpp, against naive loops:
// the std-only GEMM (remainders of every block size, strided operands,
// accumulation, the bias + relu epilogue, split across threads by rows and
// by columns) and LoopNest's tiles for operands that disagree on the
// fastest dim (a transposed add, an NCHW -> NHWC permute), at 1 and 2
// threads.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "test_util.hpp"
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
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

// C = A B (+ C0) (+ bias) (relu) in double, A and B given by strides.
template <class T>
void check_gemm(std::int64_t M, std::int64_t N, std::int64_t K, bool transpose_a, bool transpose_b, bool accumulate,
                bool bias, bool relu, double tol) {
  INFO("M " << M << " N " << N << " K " << K << (transpose_a ? " A^T" : "") << (transpose_b ? " B^T" : "")
            << (accumulate ? " +=" : "") << (bias ? " bias" : "") << (relu ? " relu" : "") << " threads "
            << rt::num_threads());
  const std::vector<T> A = random_values<T>(static_cast<std::size_t>(M * K), 1 + M);
  const std::vector<T> B = random_values<T>(static_cast<std::size_t>(K * N), 2 + N);
  const std::vector<T> bv = random_values<T>(static_cast<std::size_t>(2 * N), 3 + K);
  std::vector<T> C = random_values<T>(static_cast<std::size_t>(M * N), 4);
  const std::vector<T> C0 = C;
  // A stored K x M when transposed (element (i, k) at k * M + i), likewise B.
  const std::int64_t rsa = transpose_a ? 1 : K, csa = transpose_a ? M : 1;
  const std::int64_t rsb = transpose_b ? 1 : N, csb = transpose_b ? K : 1;
  rt::GemmEpilogue<T> ep;
  if (bias) {
    ep.bias = bv.data();
    ep.bias_stride = 2;
  }
  ep.relu = relu;
  rt::gemm<T>(M, N, K, A.data(), rsa, csa, B.data(), rsb, csb, C.data(), N, 1, accumulate, ep);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      double s = accumulate ? static_cast<double>(C0[static_cast<std::size_t>(i * N + j)]) : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        s += static_cast<double>(A[static_cast<std::size_t>(i * rsa + k * csa)]) * static_cast<double>(B[static_cast<std::size_t>(k * rsb + j * csb)]);
      if (bias) s += static_cast<double>(bv[static_cast<std::size_t>(2 * j)]);
      if (relu) s = s > 0 ? s : 0;
      const double got = static_cast<double>(C[static_cast<std::size_t>(i * N + j)]);
      if (!(std::fabs(got - s) <= tol * (1 + std::sqrt(static_cast<double>(K))))) {
        if (bad++ < 3) UNSCOPED_INFO("C(" << i << ", " << j << ") = " << got << ", expected " << s);
      }
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("std-only gemm: remainders, strides, accumulation, the epilogue, threads", "[gemm]") {
  ThreadCountGuard guard;
  struct Size {
    std::int64_t m, n, k;
  };
  // MR 6, NR 16 (f32), KC 256, MC 96; the last ones are large enough to be
  // split across threads (2^21 multiply-adds), by rows (M >= N) and by columns.
  const Size sizes[] = {{1, 1, 1}, {5, 7, 3}, {6, 16, 256}, {7, 17, 257}, {97, 33, 300}, {13, 40, 0},
                        {130, 90, 200}, {40, 300, 200}, {131, 129, 130}};
  for (int threads : {1, 2}) {
    rt::set_num_threads(threads);
    for (const Size& s : sizes) {
      check_gemm<float>(s.m, s.n, s.k, false, false, false, false, false, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, true, true, true, false, false, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, false, true, false, true, true, 2e-5);
      check_gemm<float>(s.m, s.n, s.k, true, false, true, true, false, 2e-5);
      check_gemm<double>(s.m, s.n, s.k, false, false, true, true, true, 1e-12);
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
