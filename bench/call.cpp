// Workload 6 (issue 9): the fixed cost of a generated model call. A model
// whose body is `A + B` over 16 floats (the build add16_model of
// bench/specs/models.yaml), called through the generated class, against the
// generated kernel called directly and a hand-written 16-element loop.
//
//  add16_call
//    wfgen        add16_model::forward_into(y, A, B), the allocation-free
//                 call: A, B and y are the tensors of the last call (a few
//                 compares of their pointers, shapes and strides), so it
//                 runs the VM's one instruction, whose kernel writes y
//                 directly (y is contiguous and overlaps no input)
//    wfgen_alloc  y = add16_model::forward(A, B)[0]: the same binding check,
//                 the kernel writing the model's own result, returned by
//                 reference in an rt::Results and copied into y (no
//                 allocation; no reference count changes, as y already
//                 shares its storage)
//    wfgen_vm     vm().run(Section::Forward) alone on the model of `wfgen`
//    kernel       the standard library's add_f32_r1 kernel (bench_std), called
//                 directly with View arguments
//    hand         bench::hand::add on [0, 16), a plain loop in another
//                 translation unit (not inlined)
// Each timed call runs the implementation kInner times and the times are
// divided by kInner, so a pass is long enough for the clock; the reported
// median, p10 and p90 are per model call. Throughput: millions of calls per
// second. wfgen and wfgen_alloc use two instances of the model: alternating
// forward() and forward_into() on one would bind it again on every switch.
#include <string>

#include "bench_main.hpp"
#include "hand_loops.hpp"
#include "models/add16_model.hpp"
#include "std/kernels.hpp"
#include "wfgen/runtime.hpp"

namespace bench {

void run_call(Report& report, const std::vector<int>& threads) {
  constexpr std::int64_t n = 16;
  constexpr int kInner = 1000;
  const std::string wl = "add16_call";
  Buffer a(n), b(n), out(n), ref(n);
  fill_random(a.data, n, 41, -1, 1);
  fill_random(b.data, n, 42, -1, 1);
  for (std::int64_t i = 0; i < n; ++i) ref.data[i] = a.data[i] + b.data[i];
  const wfgen::rt::Tensor A = wfgen::rt::Tensor::borrow(a.data, {n}), B = wfgen::rt::Tensor::borrow(b.data, {n});
  const wfgen::rt::View<const float, 1> VA{a.data, {n}, {1}}, VB{b.data, {n}, {1}};
  const wfgen::rt::View<float, 1> VO{out.data, {n}, {1}};
  bench_models::add16_model model, model_alloc;
  wfgen::rt::Tensor y, y_alloc;

  for (int t : threads) {
    wfgen::rt::set_num_threads(t);
    std::vector<Impl> impls = {
        {"wfgen", [&] { for (int r = 0; r < kInner; ++r) model.forward_into(y, A, B); }},
        {"wfgen_alloc", [&] { for (int r = 0; r < kInner; ++r) y_alloc = model_alloc.forward(A, B)[0]; }},
        {"wfgen_vm", [&] { for (int r = 0; r < kInner; ++r) model.vm().run(wfgen::rt::Section::Forward); }},
        {"kernel", [&] { for (int r = 0; r < kInner; ++r) bench_std::add_f32_r1(VA, VB, VO); }},
        {"hand", [&] { for (int r = 0; r < kInner; ++r) hand::add(a.data, b.data, out.data, 0, n); }},
    };
    // One float add: exact. wfgen_vm reruns the instruction of the checked
    // forward_into(), which writes y.
    const std::string tag = wl + " at " + std::to_string(t) + " thread(s)";
    model.forward_into(y, A, B);
    if (y.numel() != n) fail("wfgen " + tag + ": forward_into() gave " + std::to_string(y.numel()) + " elements");
    check_close("wfgen " + tag, y.data<float>(), ref.data, n, 0, 0);
    y_alloc = model_alloc.forward(A, B)[0];
    if (y_alloc.numel() != n) fail("wfgen_alloc " + tag + ": forward() returned " + std::to_string(y_alloc.numel()) + " elements");
    check_close("wfgen_alloc " + tag, y_alloc.data<float>(), ref.data, n, 0, 0);
    std::fill(out.data, out.data + n, -7.0f);
    bench_std::add_f32_r1(VA, VB, VO);
    check_close("kernel " + tag, out.data, ref.data, n, 0, 0);
    std::fill(out.data, out.data + n, -7.0f);
    hand::add(a.data, b.data, out.data, 0, n);
    check_close("hand " + tag, out.data, ref.data, n, 0, 0);

    const std::vector<Stats> st = time_round_robin(impls, passes());
    for (std::size_t k = 0; k < impls.size(); ++k) {
      const Stats per_call{st[k].median / kInner, st[k].p10 / kInner, st[k].p90 / kInner};
      report.add({wl, impls[k].name, t, per_call, 1, "M calls/s", 1e6, ""});
    }
    for (const char* impl : {"wfgen", "wfgen_alloc", "wfgen_vm", "kernel"}) report.ratio({wl, impl, t, wl, "hand", t});
    report.ratio({wl, "wfgen", t, wl, "wfgen_vm", t});
    report.ratio({wl, "wfgen_alloc", t, wl, "wfgen", t});
  }
  wfgen::rt::set_num_threads(1);
}

}  // namespace bench
