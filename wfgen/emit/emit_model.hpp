// Emission of one build (a traced, planned model) as a C++ class:
// <build>.hpp and <build>.cpp, next to the kernels it calls.
//
// The generated class is data over the runtime VM: a tensor table (inputs,
// parameters, arena slices, views), instruction tables (one line per kernel
// call, commented with the body line it came from), the shape code that
// binds run-time dims from the inputs, and the Compiled-Composite API:
// forward(), set_input()/get_input(), parameters(), save/load of parameter
// files, summary(), disassemble(), profile().
#pragma once

#include <string>
#include <vector>

#include "wfgen/emit/emit_kernels.hpp"
#include "wfgen/graph/graph.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/passes/passes.hpp"

namespace wfgen::emit {

// The kernels a traced graph calls (for lower::plan_kernels).
std::vector<lower::KernelRequest> kernels_needed(const spec::Spec& spec, const graph::Graph& g);

std::vector<OutputFile> emit_model(const spec::Spec& spec, const spec::Build& build, const graph::Graph& g,
                                   const passes::MemoryPlan& plan, const KernelEmitOptions& options);

}  // namespace wfgen::emit
