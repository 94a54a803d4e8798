// Workload 4 (issue 9): GEMM 512^3 and 1024^3 f32 (C = A B, row-major),
// wfgen's std-only gemm (matmul, cpu device) and its blas-device kernel,
// against cblas_sgemm called directly. 2 M N K flops per call.
#include <cblas.h>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <string>

#include "bench_main.hpp"
#include "std/kernels.hpp"
#include "wfgen/runtime.hpp"

extern "C" {
// Declared here too: Debian's cblas.h alternative may be the netlib one.
char* openblas_get_config(void);
void openblas_set_num_threads(int num_threads);
}

namespace bench {

std::string openblas_version() { return openblas_get_config(); }

namespace {

// The machine's own ceiling for the scaling target: multiply-adds on
// registers alone (no memory, no shared cache), a fixed amount split over the
// runtime's threads in 64 parts taken as they come, as a GEMM's blocks are.
// Its time at 2 threads against 1 is the most any kernel can scale in the
// same run; on this shared VM it moves with the neighbours (1.72-1.98x over
// the sessions). 12 independent chains cover the FMA latency on two ports.
constexpr int kFmaChains = 12;
constexpr std::int64_t kFmaParts = 64;
constexpr std::int64_t kFmaStepsPerPart = 1 << 15;
#if defined(__AVX512F__)
constexpr int kFmaLanes = 16;
#elif defined(__FMA__)
constexpr int kFmaLanes = 8;
#else
constexpr int kFmaLanes = 1;
#endif

// kFmaChains chains of multiply-adds on vectors V (set1 broadcasts a float,
// fma(a, b, c) is a * b + c in one instruction), summed at the end so that
// none is dead code.
template <class V, class Set1, class Fma>
float fma_chains_of(float seed, Set1 set1, Fma fma) {
  V acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = set1(seed + static_cast<float>(c));
  const V mul = set1(0.999999f), add = set1(1e-7f);
  for (std::int64_t s = 0; s < kFmaStepsPerPart; ++s)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = fma(acc[c], mul, add);
  float sum = 0;
  for (const V& a : acc) {  // (_mm512_reduce_add_ps: g++ 12 warns inside it)
    float lanes[sizeof(V) / sizeof(float)];
    std::memcpy(lanes, &a, sizeof(V));
    for (float l : lanes) sum += l;
  }
  return sum;
}

float fma_part(float seed) {
#if defined(__AVX512F__)
  return fma_chains_of<__m512>(seed, [](float x) { return _mm512_set1_ps(x); },
                               [](__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); });
#elif defined(__FMA__)
  return fma_chains_of<__m256>(seed, [](float x) { return _mm256_set1_ps(x); },
                               [](__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); });
#else
  return fma_chains_of<float>(seed, [](float x) { return x; }, [](float a, float b, float c) { return std::fma(a, b, c); });
#endif
}

// Flops of one call of the ceiling.
constexpr double kFmaFlops = 2.0 * kFmaChains * kFmaLanes * static_cast<double>(kFmaStepsPerPart * kFmaParts);

void fma_ceiling(Report& report, const std::vector<int>& threads) {
  const std::string wl = "fma_registers";
  std::vector<float> part_sums(static_cast<std::size_t>(kFmaParts));
  volatile float sink = 0;
  for (int t : threads) {
    wfgen::rt::set_num_threads(t);
    std::vector<Impl> impls = {{"fma_chains", [&] {
                                  wfgen::rt::parallel_for(0, kFmaParts, 1, [&](std::int64_t lo, std::int64_t hi) {
                                    for (std::int64_t p = lo; p < hi; ++p)
                                      part_sums[static_cast<std::size_t>(p)] = fma_part(static_cast<float>(p));
                                  });
                                  sink = sink + part_sums[0];
                                }}};
    const std::vector<Stats> st = time_round_robin(impls, passes());
    report.add({wl, "fma_chains", t, st[0], kFmaFlops, "GFLOP/s", 1e9, ""});
    if (t != 1) report.ratio({wl, "fma_chains", t, wl, "fma_chains", 1});
  }
  wfgen::rt::set_num_threads(1);
}

void gemm_workload(Report& report, std::int64_t size, const std::vector<int>& threads) {
  const std::int64_t m = size, n = size, k = size;
  const std::string wl = "gemm_" + std::to_string(size) + "^3";
  Buffer a(m * k), b(k * n), c(m * n), ref(m * n);
  fill_random(a.data, m * k, 6, -1, 1);
  fill_random(b.data, k * n, 7, -1, 1);
  // Naive reference in double.
  for (std::int64_t i = 0; i < m; ++i) {
    std::vector<double> row(static_cast<std::size_t>(n), 0.0);
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = a.data[i * k + p];
      const float* brow = b.data + p * n;
      for (std::int64_t j = 0; j < n; ++j) row[static_cast<std::size_t>(j)] += av * brow[j];
    }
    for (std::int64_t j = 0; j < n; ++j) ref.data[i * n + j] = static_cast<float>(row[static_cast<std::size_t>(j)]);
  }
  const wfgen::rt::View<const float, 2> A{a.data, {m, k}, {k, 1}}, B{b.data, {k, n}, {n, 1}};
  const wfgen::rt::View<float, 2> C{c.data, {m, n}, {n, 1}};

  for (int t : threads) {
    wfgen::rt::set_num_threads(t);
    openblas_set_num_threads(t);
    std::vector<Impl> impls = {
        {"wfgen_std", [&] { bench_std::matmul_f32_r2(A, B, C); }},
        {"wfgen_blas", [&] { bench_std::matmul_blas_f32_r2(A, B, C); }},
        {"cblas_sgemm", [&] {
           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                       1.0f, a.data, static_cast<int>(k), b.data, static_cast<int>(n), 0.0f, c.data, static_cast<int>(n));
         }},
    };
    for (Impl& impl : impls) {
      std::fill(c.data, c.data + m * n, -1.0f);
      impl.call();
      // K = 512 or 1024 products of values in [-1, 1): sums are O(10-30); float error O(1e-4).
      check_close(impl.name + " " + wl + " at " + std::to_string(t) + " thread(s)", c.data, ref.data, m * n, 1e-3f, 1e-3f);
    }
    const std::vector<Stats> st = time_round_robin(impls, passes());
    for (std::size_t i = 0; i < impls.size(); ++i)
      report.add({wl, impls[i].name, t, st[i], 2.0 * static_cast<double>(m * n * k), "GFLOP/s", 1e9, ""});
    report.ratio({wl, "wfgen_std", t, wl, "cblas_sgemm", t});
    report.ratio({wl, "wfgen_blas", t, wl, "cblas_sgemm", t});
    if (t != 1) {
      report.ratio({wl, "wfgen_std", t, wl, "wfgen_std", 1});
      report.ratio({wl, "cblas_sgemm", t, wl, "cblas_sgemm", 1});
    }
  }
  wfgen::rt::set_num_threads(1);
  openblas_set_num_threads(1);
}

}  // namespace

void run_gemm(Report& report, const std::vector<int>& threads) {
  fma_ceiling(report, threads);
  gemm_workload(report, 512, threads);
  gemm_workload(report, 1024, threads);
}

}  // namespace bench
