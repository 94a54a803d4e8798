// Workloads 2 and 3 (issue 9): row kernels through models over the standard
// library, against hand-written loops and the STREAM triad, in the same run.
//
//  softmax_NxC    Y = softmax(X) over the rows of X[N C], f32: the
//                 standard-library model `softmax` (max, subtract, exp, sum,
//                 divide) in the build softmax_model of bench/specs/models.yaml
//                 (N and C run-time dims).
//  layernorm_NxC  Y = layernorm(X) over rows of 1024 features (32 in
//                 layernorm_64x32), f32: the standard-library model
//                 `layernorm` (gamma and beta set to random values) in the
//                 builds layernorm_model and layernorm32_model (N a run-time dim).
//
// Implementations:
//    wfgen            <build>::forward(X), as a user calls it (input binding
//                     check, the instruction sequence; the output is a tensor
//                     the model allocated once and hands out without a copy)
//    wfgen_into       <build>::forward_into(Y, X) on another model object,
//                     into a caller-owned Y (forward()'s baseline)
//    wfgen_vm         the instruction sequence alone, vm().run(Section::Forward),
//                     on the input bound by the checked forward()
//    wfgen_nofuse_vm  the same with the model generated with --no-fuse
//    wfgen_fastmath_vm  softmax only: the instructions of softmax_fast_model, the
//                     same model built with `math: fast` (rt::math::fast::exp, 6 ulp)
//    hand             a plain loop, three passes per row (bench/hand_rows.inc), -O3 -march=native
//    hand_fastmath    the same source compiled with -ffast-math as well
//    triad, triad_nt  STREAM triad a = b + s*c on arrays of N*C floats, plain
//                     and non-temporal stores
// Work: 8 bytes per element for softmax and layernorm (read X, write Y: the
// least traffic a row kernel needs; gamma and beta are 8 KB), 12 for the
// triads as STREAM counts, so the ratio to a triad is the ratio of bandwidths.
// softmax_32x1024 and layernorm_32x1024 are the same kernels on data that
// stays in the L2 cache: their time per element is the arithmetic's floor,
// and "vs softmax_32x1024/wfgen_vm" rows compare the large workload with it.
// Two threads: wfgen with set_num_threads(2); the hand loops and triads split
// the rows (elements) in two with bench::Split when the matrix has at least
// 65536 elements (the grain of wfgen's element-wise kernels) and run on the
// calling thread below that, as a hand-written program would (waking a
// second thread costs more than 64 x 10 softmax).
#include <cmath>
#include <string>

#include "bench_main.hpp"
#include "hand_loops.hpp"
#include "models/layernorm32_model.hpp"
#include "models/layernorm_model.hpp"
#include "models/softmax_fast_model.hpp"
#include "models/softmax_model.hpp"
#include "models_nofuse/layernorm32_model.hpp"
#include "models_nofuse/layernorm_model.hpp"
#include "models_nofuse/softmax_model.hpp"
#include "wfgen/runtime.hpp"

namespace bench {

namespace {

using wfgen::rt::Tensor;

// Hand loops and triads use a second thread from this many elements on.
constexpr std::int64_t kSplitGrain = 65536;

void softmax_reference(const float* x, float* ref, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double m = xr[0], s = 0;
    for (std::int64_t j = 1; j < cols; ++j) m = std::max(m, static_cast<double>(xr[j]));
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (std::int64_t j = 0; j < cols; ++j) ref[r * cols + j] = static_cast<float>(std::exp(xr[j] - m) / s);
  }
}

void layernorm_reference(const float* x, const float* gamma, const float* beta, float* ref, std::int64_t rows,
                         std::int64_t cols, double eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += xr[j];
    mean /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < cols; ++j) ref[r * cols + j] = static_cast<float>((xr[j] - mean) * inv * gamma[j] + beta[j]);
  }
}

// A model parameter by the suffix of its name (".gamma" finds "layernorm_0.gamma").
template <class Model>
Tensor parameter_ending(const Model& m, const std::string& suffix) {
  for (const auto& [name, t] : m.parameters())
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return t;
  fail("the model has no parameter named *" + suffix);
}

// What the softmax and layernorm workloads share: the implementations other
// than the model's (hand, hand_fastmath, triads), the checks, the timing and
// the rows. `model_call`/`vm_call`/`nofuse_vm_call` run the models;
// `model_out` is the last forward()'s output, `check_nofuse` runs and checks
// the --no-fuse model's forward().
struct RowWorkload {
  std::string name;
  std::int64_t rows, cols;
  const float* ref;
  float rtol, atol;
  std::function<void()> model_call, into_call, vm_call, nofuse_vm_call;
  std::function<const Tensor&()> model_out, into_out;
  std::function<void(const std::string& tag)> check_nofuse;
  std::function<void(float* out, std::int64_t lo, std::int64_t hi)> hand, hand_fast;
  // Optional: the same model built with `math: fast` (its fused kernel calls
  // rt::math::fast::exp): `fast_check` runs and checks its forward(),
  // `fast_vm_call` its instructions (the row `wfgen_fastmath_vm`).
  std::function<void(const std::string& tag)> fast_check;
  std::function<void()> fast_vm_call;
};

void run_row_workload(Report& report, const RowWorkload& w, const std::vector<int>& threads) {
  const std::int64_t n = w.rows * w.cols;
  Buffer out_hand(n), out_fast(n), tout(n), tb(n), tc(n), tref(n);
  fill_random(tb.data, n, 31, -1, 1);
  fill_random(tc.data, n, 32, -1, 1);
  const float s = 3.0f;
  for (std::int64_t i = 0; i < n; ++i) tref.data[i] = static_cast<float>(tb.data[i] + static_cast<double>(s) * tc.data[i]);

  for (int t : threads) {
    wfgen::rt::set_num_threads(t);
    Split split(n >= kSplitGrain ? t : 1);
    std::vector<Impl> impls = {
        {"wfgen", w.model_call},
        {"wfgen_into", w.into_call},
        {"wfgen_vm", w.vm_call},
        {"wfgen_nofuse_vm", w.nofuse_vm_call},
        {"hand", [&] { split.run(w.rows, [&](std::int64_t lo, std::int64_t hi) { w.hand(out_hand.data, lo, hi); }); }},
        {"hand_fastmath", [&] { split.run(w.rows, [&](std::int64_t lo, std::int64_t hi) { w.hand_fast(out_fast.data, lo, hi); }); }},
        {"triad", [&] { split.run(n, [&](std::int64_t lo, std::int64_t hi) { hand::triad(tout.data, tb.data, tc.data, s, lo, hi); }); }},
    };
    if (hand::has_triad_nt())
      impls.push_back({"triad_nt", [&] { split.run(n, [&](std::int64_t lo, std::int64_t hi) { hand::triad_nt(tout.data, tb.data, tc.data, s, lo, hi); }); }});
    const std::size_t triads_end = impls.size();
    if (w.fast_vm_call) impls.push_back({"wfgen_fastmath_vm", w.fast_vm_call});

    // Check every implementation before it is timed. The *_vm rows rerun the
    // instructions of the checked forward() on the same bound input.
    const std::string tag = w.name + " at " + std::to_string(t) + " thread(s)";
    impls[0].call();
    const Tensor& y = w.model_out();
    if (y.numel() != n) fail("wfgen " + tag + ": forward() returned " + std::to_string(y.numel()) + " elements");
    check_close("wfgen " + tag, y.data<float>(), w.ref, n, w.rtol, w.atol);
    impls[1].call();
    check_close("wfgen_into " + tag, w.into_out().data<float>(), w.ref, n, w.rtol, w.atol);
    w.check_nofuse(tag);
    std::fill(out_hand.data, out_hand.data + n, -1.0f);
    impls[4].call();
    check_close("hand " + tag, out_hand.data, w.ref, n, w.rtol, w.atol);
    std::fill(out_fast.data, out_fast.data + n, -1.0f);
    impls[5].call();
    check_close("hand_fastmath " + tag, out_fast.data, w.ref, n, w.rtol, w.atol);
    if (w.fast_check) w.fast_check(tag);
    for (std::size_t k = 6; k < triads_end; ++k) {
      std::fill(tout.data, tout.data + n, -1.0f);
      impls[k].call();
      check_close(impls[k].name + " " + tag, tout.data, tref.data, n, 1e-5f, 1e-6f);
    }

    const std::vector<Stats> st = time_round_robin(impls, passes());
    for (std::size_t k = 0; k < impls.size(); ++k) {
      const bool is_triad = impls[k].name.rfind("triad", 0) == 0;
      report.add({w.name, impls[k].name, t, st[k], static_cast<double>(n) * (is_triad ? 12 : 8), "GB/s", 1e9, ""});
    }
    const std::string& wl = w.name;
    for (const char* impl : {"wfgen", "wfgen_vm", "wfgen_nofuse_vm"})
      for (const char* base : {"hand", "hand_fastmath", "triad", "triad_nt"}) report.ratio({wl, impl, t, wl, base, t});
    report.ratio({wl, "wfgen_vm", t, wl, "wfgen_nofuse_vm", t});
    report.ratio({wl, "wfgen", t, wl, "wfgen_into", t});
    if (w.fast_vm_call) {
      for (const char* base : {"hand", "hand_fastmath", "triad", "triad_nt", "wfgen_vm"}) report.ratio({wl, "wfgen_fastmath_vm", t, wl, base, t});
      if (t != 1) report.ratio({wl, "wfgen_fastmath_vm", t, wl, "wfgen_fastmath_vm", 1});
    }
    for (const char* impl : {"hand", "hand_fastmath"})
      for (const char* base : {"triad", "triad_nt"}) report.ratio({wl, impl, t, wl, base, t});
    if (t != 1)
      for (const char* impl : {"wfgen", "wfgen_vm", "hand", "hand_fastmath"}) report.ratio({wl, impl, t, wl, impl, 1});
  }
  wfgen::rt::set_num_threads(1);
}

void softmax_workload(Report& report, std::int64_t rows, std::int64_t cols, const std::vector<int>& threads) {
  const std::int64_t n = rows * cols;
  Buffer x(n), ref(n);
  fill_random(x.data, n, 21, -4, 4);
  softmax_reference(x.data, ref.data, rows, cols);
  const Tensor X = Tensor::borrow(x.data, {rows, cols});
  bench_models::softmax_model model, model_into;
  bench_models::softmax_fast_model model_fast;
  bench_models_nofuse::softmax_model model_nofuse;
  Tensor y, y_into;

  RowWorkload w;
  w.name = "softmax_" + std::to_string(rows) + "x" + std::to_string(cols);
  w.rows = rows;
  w.cols = cols;
  w.ref = ref.data;
  w.rtol = 1e-4f;  // float exp and a float sum of up to 1024 terms
  w.atol = 1e-9f;
  w.model_call = [&] { y = model.forward(X)[0]; };
  w.vm_call = [&] { model.vm().run(wfgen::rt::Section::Forward); };
  w.nofuse_vm_call = [&] { model_nofuse.vm().run(wfgen::rt::Section::Forward); };
  w.model_out = [&]() -> const Tensor& { return y; };
  w.into_call = [&] { model_into.forward_into(y_into, X); };
  w.into_out = [&]() -> const Tensor& { return y_into; };
  w.check_nofuse = [&](const std::string& tag) {
    const Tensor yn = model_nofuse.forward(X)[0];
    check_close("wfgen (--no-fuse) " + tag, yn.data<float>(), ref.data, n, w.rtol, w.atol);
  };
  w.hand = [&](float* out, std::int64_t lo, std::int64_t hi) { hand::softmax_rows(x.data, out, cols, lo, hi); };
  w.hand_fast = [&](float* out, std::int64_t lo, std::int64_t hi) { hand_fast::softmax_rows(x.data, out, cols, lo, hi); };
  w.fast_check = [&](const std::string& tag) {
    const Tensor yf = model_fast.forward(X)[0];
    check_close("wfgen (math: fast) " + tag, yf.data<float>(), ref.data, n, w.rtol, w.atol);
  };
  w.fast_vm_call = [&] { model_fast.vm().run(wfgen::rt::Section::Forward); };
  run_row_workload(report, w, threads);
}

template <class Model, class NofuseModel>
void layernorm_workload(Report& report, std::int64_t rows, std::int64_t cols, const std::vector<int>& threads) {
  const std::int64_t n = rows * cols;
  const float eps = 1e-5f;  // the default of the standard-library layernorm
  Buffer x(n), ref(n), gamma(cols), beta(cols);
  fill_random(x.data, n, 22, -1, 1);
  for (std::int64_t r = 0; r < rows; ++r)  // a different mean and scale per row
    for (std::int64_t j = 0; j < cols; ++j) x.data[r * cols + j] = x.data[r * cols + j] * (1 + r % 3) + static_cast<float>(r % 7) - 3;
  fill_random(gamma.data, cols, 23, 0.5f, 1.5f);
  fill_random(beta.data, cols, 24, -0.5f, 0.5f);
  layernorm_reference(x.data, gamma.data, beta.data, ref.data, rows, cols, eps);
  const Tensor X = Tensor::borrow(x.data, {rows, cols});
  Model model, model_into;
  NofuseModel model_nofuse;
  for (Tensor p : {parameter_ending(model, ".gamma"), parameter_ending(model_into, ".gamma"), parameter_ending(model_nofuse, ".gamma")}) {
    if (p.numel() != cols) fail("layernorm_model: gamma has " + std::to_string(p.numel()) + " elements");
    std::copy(gamma.data, gamma.data + cols, p.data<float>());
  }
  for (Tensor p : {parameter_ending(model, ".beta"), parameter_ending(model_into, ".beta"), parameter_ending(model_nofuse, ".beta")}) {
    if (p.numel() != cols) fail("layernorm_model: beta has " + std::to_string(p.numel()) + " elements");
    std::copy(beta.data, beta.data + cols, p.data<float>());
  }
  Tensor y, y_into;

  RowWorkload w;
  w.name = "layernorm_" + std::to_string(rows) + "x" + std::to_string(cols);
  w.rows = rows;
  w.cols = cols;
  w.ref = ref.data;
  w.rtol = 1e-4f;
  w.atol = 1e-5f;
  w.model_call = [&] { y = model.forward(X)[0]; };
  w.vm_call = [&] { model.vm().run(wfgen::rt::Section::Forward); };
  w.nofuse_vm_call = [&] { model_nofuse.vm().run(wfgen::rt::Section::Forward); };
  w.model_out = [&]() -> const Tensor& { return y; };
  w.into_call = [&] { model_into.forward_into(y_into, X); };
  w.into_out = [&]() -> const Tensor& { return y_into; };
  w.check_nofuse = [&](const std::string& tag) {
    const Tensor yn = model_nofuse.forward(X)[0];
    check_close("wfgen (--no-fuse) " + tag, yn.data<float>(), ref.data, n, w.rtol, w.atol);
  };
  w.hand = [&](float* out, std::int64_t lo, std::int64_t hi) {
    hand::layernorm_rows(x.data, gamma.data, beta.data, out, cols, eps, lo, hi);
  };
  w.hand_fast = [&](float* out, std::int64_t lo, std::int64_t hi) {
    hand_fast::layernorm_rows(x.data, gamma.data, beta.data, out, cols, eps, lo, hi);
  };
  run_row_workload(report, w, threads);
}

}  // namespace

// The same rows, 32 of them: 128 KiB in and out, which stay in the L2
// cache between calls. Per element, the time there is what the kernel costs
// when memory is not the limit: the ratio of the large workload to it tells
// whether the large one waits on memory (ratio well above 1) or on its own
// arithmetic (ratio near 1), which no store or prefetch strategy changes.
void in_cache_ratios(Report& report, const std::string& large, const std::string& small, const std::vector<int>& threads) {
  for (int t : threads)
    for (const char* impl : {"wfgen_vm", "hand_fastmath"}) report.ratio({large, impl, t, small, impl, t});
}

void run_softmax(Report& report, const std::vector<int>& threads) {
  softmax_workload(report, 4096, 1024, threads);
  softmax_workload(report, 32, 1024, threads);
  in_cache_ratios(report, "softmax_4096x1024", "softmax_32x1024", threads);
  run_softmax_small(report, threads);
}

void run_softmax_small(Report& report, const std::vector<int>& threads) { softmax_workload(report, 64, 10, threads); }

void run_layernorm(Report& report, const std::vector<int>& threads) {
  layernorm_workload<bench_models::layernorm_model, bench_models_nofuse::layernorm_model>(report, 4096, 1024, threads);
  layernorm_workload<bench_models::layernorm_model, bench_models_nofuse::layernorm_model>(report, 32, 1024, threads);
  in_cache_ratios(report, "layernorm_4096x1024", "layernorm_32x1024", threads);
  run_layernorm_small(report, threads);
}

void run_layernorm_small(Report& report, const std::vector<int>& threads) {
  layernorm_workload<bench_models::layernorm32_model, bench_models_nofuse::layernorm32_model>(report, 64, 32, threads);
}

}  // namespace bench
