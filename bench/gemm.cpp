// Workload 4 (issue 9): GEMM 512^3 and 1024^3 f32 (C = A B, row-major),
// wfgen's std-only gemm (matmul, cpu device) and its blas-device kernel,
// against cblas_sgemm called directly. 2 M N K flops per call.
#include <cblas.h>

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
  gemm_workload(report, 512, threads);
  gemm_workload(report, 1024, threads);
}

}  // namespace bench
