// The passes over a traced graph, in order. One line per pass.
#include <algorithm>
#include <chrono>

#include "wfgen/passes/passes.hpp"
#include "wfgen/trace/trace.hpp"

namespace wfgen::passes {

MemoryPlan run_pipeline(const spec::Spec& spec, const spec::Build& build, graph::Graph& g, const PipelineOptions& options,
                        std::string* log) {
  auto step = [&](const char* name, auto&& pass) {
    auto start = std::chrono::steady_clock::now();
    std::string before = g.dump();
    pass();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!log) return;
    if (options.time_passes) *log += std::string("pass ") + name + ": " + std::to_string(ms) + " ms\n";
    if (std::find(options.dump_after.begin(), options.dump_after.end(), name) != options.dump_after.end()) {
      std::string after = g.dump();
      *log += std::string("--- after ") + name + (after == before ? " (unchanged)\n" : "\n") + after;
    }
  };
  if (log && std::find(options.dump_after.begin(), options.dump_after.end(), "trace") != options.dump_after.end()) {
    *log += "--- after trace\n" + g.dump();
  }
  step("dead-code", [&] { eliminate_dead_code(g); });  // drop values no output needs
  if (options.fusion && !spec.paths.empty()) {
    step("paths", [&] { apply_paths(spec, build, g, options.rewrites); });  // symbolic paths, bypasses, fusion paths
    step("dead-code", [&] { eliminate_dead_code(g); });                     // drop what they replaced
  }
  if (build.backward) {
    step("autodiff", [&] { trace::derive_backward(spec, build, g); });  // append the pullback
    step("dead-code", [&] { eliminate_dead_code(g); });                // drop what no gradient needs
  }
  // Before fusion, which may give a product an epilogue (its kernel then
  // one of its own): the GEMM chosen here is the one that runs it.
  step("choose-gemms", [&] { choose_gemms(spec, build, g, options.rewrites); });  // small known products: wfgen's GEMM
  if (options.fusion) {
    step("fuse", [&] { fuse_kernels(g, *options.fusion, options.build_index, options.rewrites, build.fast_math); });  // element-wise chains and row kernels
    step("dead-code", [&] { eliminate_dead_code(g); });        // drop the calls fusion replaced
    if (g.has_backward) {
      step("accumulate", [&] { accumulate_products(g); });  // grad += A B as one accumulating GEMM
      step("dead-code", [&] { eliminate_dead_code(g); });    // drop the adds it replaced
    }
  }
  if (g.has_backward) {
    step("windows", [&] { write_into_windows(g); });    // slice gradients written into their windows by their kernels
    step("dead-code", [&] { eliminate_dead_code(g); });  // drop the copies it replaced
  }
  MemoryPlan plan;
  step("plan-memory", [&] { plan = plan_memory(g); });  // arena slots by liveness
  return plan;
}

}  // namespace wfgen::passes
