// The tiny LM's GEMM shapes (examples/tiny-lm, lm_train: b16, context 64,
// d 64, 4 heads of 16, MLP 256, vocabulary 256), each timed through
// wfgen's two GEMMs: rt::openblas_gemm (OpenBLAS's sgemm) and
// rt::gemm (the std-only one, the cpu device), with the strides the
// generated kernels pass (heads are column slices of q, k, v; k.T and the
// backward's transposes are read in place). One thread. Issue 38 item 2:
// which device each shape class should use.
//
// Build and run (not part of ctest; a few seconds):
//   g++ -O3 -march=native -fno-trapping-math -std=c++20 -Iruntime/include \
//       bench/lm_gemm_shapes.cpp -o /tmp/lm_gemm_shapes build/runtime/libwfgen_runtime.a \
//       -lopenblas -lpthread && /tmp/lm_gemm_shapes
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "wfgen/blas_support.hpp"
#include "wfgen/kernel_support.hpp"

namespace {

struct Shape {
  const char* name;
  std::int64_t batch, M, N, K;
  std::int64_t rsa, csa, rsb, csb, rsc, csc;  // element strides
  std::int64_t bsa, bsb, bsc;                 // batch strides
  bool accumulate;
};

template <class F>
double best_us(F&& f, int reps) {
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return best;
}

}  // namespace

int main() {
  wfgen::rt::set_num_threads(1);
  openblas_set_num_threads(1);
  // q, k, v: [16 64 64]; a head: 16 columns of them (row stride 64).
  const std::vector<Shape> shapes = {
      {"qkv/out proj  1024x64x64   A B", 1, 1024, 64, 64, 64, 1, 64, 1, 64, 1, 0, 0, 0, false},
      {"mlp up/logits 1024x256x64  A B", 1, 1024, 256, 64, 64, 1, 256, 1, 256, 1, 0, 0, 0, false},
      {"mlp down      1024x64x256  A B", 1, 1024, 64, 256, 256, 1, 64, 1, 64, 1, 0, 0, 0, false},
      {"head out      1024x64x16   A B", 1, 1024, 64, 16, 16, 1, 64, 1, 64, 1, 0, 0, 0, false},
      {"scores  16 x 64x64x16  q k.T", 16, 64, 64, 16, 64, 1, 1, 64, 64, 1, 4096, 4096, 4096, false},
      {"o       16 x 64x16x64  s v", 16, 64, 16, 64, 64, 1, 64, 1, 16, 1, 4096, 4096, 1024, false},
      {"dS      16 x 64x64x16  dO v.T", 16, 64, 64, 16, 16, 1, 1, 64, 64, 1, 1024, 4096, 4096, false},
      {"dV      16 x 64x16x64  s.T dO", 16, 64, 16, 64, 1, 64, 16, 1, 16, 1, 4096, 1024, 1024, false},
      {"dQ      16 x 64x16x64  dS k", 16, 64, 16, 64, 64, 1, 64, 1, 16, 1, 4096, 4096, 1024, false},
      {"dX mlp  1024x64x256  dC W.T", 1, 1024, 64, 256, 256, 1, 1, 256, 64, 1, 0, 0, 0, false},
      {"dX qkv  1024x64x64   dC W.T", 1, 1024, 64, 64, 64, 1, 1, 64, 64, 1, 0, 0, 0, false},
      {"dW up   64x256x1024 += X.T dC", 1, 64, 256, 1024, 1, 64, 256, 1, 256, 1, 0, 0, 0, true},
      {"dW down 256x64x1024 += H.T dC", 1, 256, 64, 1024, 1, 256, 64, 1, 64, 1, 0, 0, 0, true},
      {"dW qkv  64x64x1024  += X.T dC", 1, 64, 64, 1024, 1, 64, 64, 1, 64, 1, 0, 0, 0, true},
      // Larger products, to see where OpenBLAS takes over (a ResNet-18
      // convolution as im2col GEMM at 56 x 56 and 14 x 14, a square 512).
      {"conv 64x3136x576", 1, 64, 3136, 576, 576, 1, 3136, 1, 3136, 1, 0, 0, 0, false},
      {"conv 256x196x2304", 1, 256, 196, 2304, 2304, 1, 196, 1, 196, 1, 0, 0, 0, false},
      {"square 512", 1, 512, 512, 512, 512, 1, 512, 1, 512, 1, 0, 0, 0, false},
      {"1024x1024x256", 1, 1024, 1024, 256, 256, 1, 1024, 1, 1024, 1, 0, 0, 0, false},
  };
  std::printf("%-34s %9s %9s %7s  (us a call, best of 7; GFLOP/s of the faster)\n", "shape", "openblas", "wfgen", "ratio");
  for (const Shape& s : shapes) {
    auto extent = [&](std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs, std::int64_t bs) {
      return (s.batch - 1) * bs + (rows - 1) * rs + (cols - 1) * cs + 1 + 4096;
    };
    std::vector<float> A(extent(s.M, s.K, s.rsa, s.csa, s.bsa)), B(extent(s.K, s.N, s.rsb, s.csb, s.bsb)),
        C(extent(s.M, s.N, s.rsc, s.csc, s.bsc)), C2(C.size());
    for (std::size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
    for (std::size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>((i * 53) % 97) / 97.0f - 0.5f;
    auto run = [&](auto gemm, std::vector<float>& out) {
      for (std::int64_t b = 0; b < s.batch; ++b)
        gemm(s.M, s.N, s.K, A.data() + b * s.bsa, s.rsa, s.csa, B.data() + b * s.bsb, s.rsb, s.csb,
             out.data() + b * s.bsc, s.rsc, s.csc, s.accumulate);
    };
    const double flops = 2.0 * static_cast<double>(s.batch * s.M * s.N * s.K);
    const int reps = std::max(3, static_cast<int>(2e8 / flops));
    const double blas = best_us([&] { run(wfgen::rt::openblas_gemm<float>, C); }, reps);
    const double own = best_us([&] { run([](auto... a) { wfgen::rt::gemm<float>(a...); }, C2); }, reps);
    std::printf("%-34s %9.1f %9.1f %7.2f  %5.1f\n", s.name, blas, own, own / blas, flops / std::min(blas, own) / 1e3);
  }
  return 0;
}
