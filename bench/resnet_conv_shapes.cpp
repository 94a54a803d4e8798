// ResNet-18's convolutions (torchvision, one 1 x 3 x 224 x 224 image), each
// timed as the parts wfgen's imported model runs and against the GEMM
// limits: im2col into the [C kh kw] x pixels matrix (a plain loop, what the
// IM2COL kernel does), OpenBLAS's sgemm on it (the MATMUL-BLAS kernel),
// wfgen's std-only rt::gemm on it, and an implicit GEMM: rt::gemm's
// micro-kernel with B's panels packed straight from the image (no im2col
// matrix), the "blocked convolution" of issue 38 item 3. One thread, CPU
// time (the machine is shared), best of 7; the last column is the GFLOP/s
// of the fastest way. Issue 38 item 3: where the limit of the convolutions
// is (docs/performance-history.md).
//
// Build and run (not part of ctest; ~20 s):
//   g++ -O3 -march=native -fno-trapping-math -std=c++20 -Iruntime/include \
//       bench/resnet_conv_shapes.cpp -o /tmp/resnet_conv_shapes build/runtime/libwfgen_runtime.a \
//       -lopenblas -lpthread && /tmp/resnet_conv_shapes
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "wfgen/blas_support.hpp"
#include "wfgen/kernel_support.hpp"

namespace {

struct Conv {
  const char* name;
  int count;  // how many of this shape the forward runs
  std::int64_t cin, h, w, cout, k, stride, pad;
  std::int64_t ho() const { return (h + 2 * pad - k) / stride + 1; }
  std::int64_t wo() const { return (w + 2 * pad - k) / stride + 1; }
  std::int64_t rows() const { return cin * k * k; }  // K of the GEMM
  std::int64_t pixels() const { return ho() * wo(); }  // N of the GEMM
};

double cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

template <class F>
double best_us(F&& f, int reps) {
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    const double t0 = cpu_us();
    for (int i = 0; i < reps; ++i) f();
    best = std::min(best, (cpu_us() - t0) / reps);
  }
  return best;
}

// col[(c kh kw), (y x)] = X[c, y s - p + kh, x s - p + kw], 0 outside.
void im2col(const Conv& s, const float* x, float* col) {
  const std::int64_t ho = s.ho(), wo = s.wo();
  for (std::int64_t c = 0; c < s.cin; ++c)
    for (std::int64_t i = 0; i < s.k; ++i)
      for (std::int64_t j = 0; j < s.k; ++j) {
        float* row = col + ((c * s.k + i) * s.k + j) * ho * wo;
        for (std::int64_t y = 0; y < ho; ++y) {
          const std::int64_t iy = y * s.stride - s.pad + i;
          float* o = row + y * wo;
          if (iy < 0 || iy >= s.h) {
            std::fill(o, o + wo, 0.0f);
            continue;
          }
          const float* src = x + (c * s.h + iy) * s.w;
          for (std::int64_t xo = 0; xo < wo; ++xo) {
            const std::int64_t ix = xo * s.stride - s.pad + j;
            o[xo] = ix >= 0 && ix < s.w ? src[ix] : 0.0f;
          }
        }
      }
}

// Row k of im2col's matrix over pixels j0 .. j0 + nr, from the image into
// dst: zeros and copies (a strided gather at stride 2) an output row at a
// time.
void image_row(const Conv& s, const float* x, std::int64_t k, std::int64_t j0, int nr, float* dst) {
  const std::int64_t c = k / (s.k * s.k), i = k / s.k % s.k, j = k % s.k, wo = s.wo();
  const float* plane = x + c * s.h * s.w;
  std::int64_t y = j0 / wo, xo = j0 % wo;
  for (int q = 0; q < nr;) {
    const int run = static_cast<int>(std::min<std::int64_t>(nr - q, wo - xo));  // this output row's pixels
    const std::int64_t iy = y * s.stride - s.pad + i;
    float* d = dst + q;
    if (iy < 0 || iy >= s.h) {
      std::fill(d, d + run, 0.0f);
    } else {
      // The run's columns inside the image, [t0, t1): zeros either side,
      // a copy (stride 1) or a strided gather between.
      const std::int64_t first = xo * s.stride - s.pad + j;  // ix of t = 0
      const std::int64_t t0 = std::clamp<std::int64_t>(first >= 0 ? 0 : (-first + s.stride - 1) / s.stride, 0, run);
      const std::int64_t t1 = std::clamp<std::int64_t>(s.w - first <= 0 ? 0 : (s.w - first + s.stride - 1) / s.stride, t0, run);
      const float* src = plane + iy * s.w + first;
      std::fill(d, d + t0, 0.0f);
      if (s.stride == 1) std::memcpy(d + t0, src + t0, sizeof(float) * static_cast<std::size_t>(t1 - t0));
      else
        for (std::int64_t t = t0; t < t1; ++t) d[t] = src[t * s.stride];
      std::fill(d + t1, d + run, 0.0f);
    }
    q += run;
    xo = 0;
    ++y;
  }
}

// OUT[cout, pixels] = W[cout, (c kh kw)] B, B's blocks packed from the image
// and run through rt::gemm's own blocking (gemm_rows) on one thread.
void implicit_gemm(const Conv& s, const float* x, const float* wt, float* out) {
  using Tile = wfgen::rt::detail::GemmTile<float>;
  constexpr int NR = Tile::NR;
  const std::int64_t M = s.cout, N = s.pixels(), K = s.rows();
  static wfgen::rt::detail::GemmBuffer<float> buf;
  alignas(64) static float rowbuf[Tile::NC];
  const wfgen::rt::GemmEpilogue<float> ep{};
  const wfgen::rt::detail::GemmArgs<float> g{M, N, K, wt, K, 1, nullptr, N, 1, out, N, 1, false, &ep};
  const std::int64_t kblock = wfgen::rt::detail::gemm_kblock<Tile>(K);
  const std::int64_t ncmax = std::min<std::int64_t>(Tile::NC, N);
  float* bpack = buf.get(static_cast<std::size_t>((ncmax + NR - 1) / NR * NR * kblock));
  for (std::int64_t jc = 0; jc < N; jc += Tile::NC) {
    const std::int64_t npanels = (std::min<std::int64_t>(Tile::NC, N - jc) + NR - 1) / NR;
    for (std::int64_t pc = 0; pc < K; pc += kblock) {
      const std::int64_t kc = std::min(kblock, K - pc);
      // Row k of the block as a contiguous run over its pixels (in L1),
      // then cut into the panels: the bookkeeping of zeros and copies is
      // per output row (wo pixels), not per piece of NR (an image row
      // straight into the panels took ~1.7x the packing time).
      const std::int64_t nc = std::min<std::int64_t>(Tile::NC, N - jc);
      for (std::int64_t k = 0; k < kc; ++k) {
        image_row(s, x, pc + k, jc, static_cast<int>(nc), rowbuf);
        for (std::int64_t p = 0; p < npanels; ++p) {
          const std::int64_t n0 = p * NR;
          float* d = bpack + p * kc * NR + k * NR;
          if (n0 + NR <= nc) std::memcpy(d, rowbuf + n0, sizeof(float) * NR);
          else {
            std::memcpy(d, rowbuf + n0, sizeof(float) * static_cast<std::size_t>(nc - n0));
            std::fill(d + (nc - n0), d + NR, 0.0f);
          }
        }
      }
      wfgen::rt::detail::gemm_rows<float, Tile>(g, pc, kc, jc, bpack, 0, npanels, 0, M);
    }
  }
}

}  // namespace

int main() {
  wfgen::rt::set_num_threads(1);
  openblas_set_num_threads(1);
  const std::vector<Conv> convs = {
      {"conv1 7x7/2 3->64 @224", 1, 3, 224, 224, 64, 7, 2, 3},
      {"layer1 3x3 64->64 @56", 4, 64, 56, 56, 64, 3, 1, 1},
      {"layer2.0 3x3/2 64->128 @56", 1, 64, 56, 56, 128, 3, 2, 1},
      {"layer2 ds 1x1/2 64->128", 1, 64, 56, 56, 128, 1, 2, 0},
      {"layer2 3x3 128->128 @28", 3, 128, 28, 28, 128, 3, 1, 1},
      {"layer3.0 3x3/2 128->256 @28", 1, 128, 28, 28, 256, 3, 2, 1},
      {"layer3 ds 1x1/2 128->256", 1, 128, 28, 28, 256, 1, 2, 0},
      {"layer3 3x3 256->256 @14", 3, 256, 14, 14, 256, 3, 1, 1},
      {"layer4.0 3x3/2 256->512 @14", 1, 256, 14, 14, 512, 3, 2, 1},
      {"layer4 ds 1x1/2 256->512", 1, 256, 14, 14, 512, 1, 2, 0},
      {"layer4 3x3 512->512 @7", 3, 512, 7, 7, 512, 3, 1, 1},
  };
  std::printf("%-30s %3s %16s %8s %8s %8s %8s %8s %6s\n", "conv (M x N x K)", "n", "", "im2col", "openblas", "rt::gemm",
              "implicit", "err", "GF/s");
  double sum_im2col = 0, sum_blas = 0, sum_own = 0, sum_implicit = 0, flops_all = 0;
  for (const Conv& s : convs) {
    const std::int64_t M = s.cout, N = s.pixels(), K = s.rows();
    std::vector<float> x(static_cast<std::size_t>(s.cin * s.h * s.w)), wt(static_cast<std::size_t>(M * K));
    std::vector<float> col(static_cast<std::size_t>(K * N)), c1(static_cast<std::size_t>(M * N)), c2(c1.size()), c3(c1.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
    for (std::size_t i = 0; i < wt.size(); ++i) wt[i] = static_cast<float>((i * 53) % 97) / 97.0f - 0.5f;
    const double flops = 2.0 * static_cast<double>(M * N * K);
    const int reps = std::max(3, static_cast<int>(3e8 / flops));
    const double t_im2col = best_us([&] { im2col(s, x.data(), col.data()); }, reps);
    const double t_blas = best_us(
        [&] { wfgen::rt::openblas_gemm<float>(M, N, K, wt.data(), K, 1, col.data(), N, 1, c1.data(), N, 1, false); }, reps);
    const double t_own =
        best_us([&] { wfgen::rt::gemm<float>(M, N, K, wt.data(), K, 1, col.data(), N, 1, c2.data(), N, 1, false); }, reps);
    const double t_implicit = best_us([&] { implicit_gemm(s, x.data(), wt.data(), c3.data()); }, reps);
    double err = 0;
    for (std::size_t i = 0; i < c1.size(); ++i) err = std::max<double>(err, std::fabs(c1[i] - c3[i]));
    const double best = std::min({t_im2col + t_blas, t_im2col + t_own, t_implicit});
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", static_cast<long long>(M), static_cast<long long>(N),
                  static_cast<long long>(K));
    std::printf("%-30s %3d %16s %8.1f %8.1f %8.1f %8.1f %8.1e %6.1f\n", s.name, s.count, dims, t_im2col, t_blas, t_own,
                t_implicit, err, flops / best / 1e3);
    sum_im2col += s.count * t_im2col;
    sum_blas += s.count * t_blas;
    sum_own += s.count * t_own;
    sum_implicit += s.count * t_implicit;
    flops_all += s.count * flops;
  }
  std::printf("forward's convolutions (us): im2col %.0f, openblas %.0f, rt::gemm %.0f, implicit %.0f; %.2f GFLOP\n",
              sum_im2col, sum_blas, sum_own, sum_implicit, flops_all / 1e9);
  std::printf("im2col + openblas %.0f us (%.1f GFLOP/s), implicit %.0f us (%.1f GFLOP/s)\n", sum_im2col + sum_blas,
              flops_all / (sum_im2col + sum_blas) / 1e3, sum_implicit, flops_all / sum_implicit / 1e3);
  return 0;
}
