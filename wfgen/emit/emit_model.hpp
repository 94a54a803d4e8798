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

#include <cstdint>
#include <string>
#include <vector>

#include "wfgen/emit/emit_kernels.hpp"
#include "wfgen/graph/graph.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/passes/passes.hpp"

namespace wfgen::emit {

// One instruction of a generated model: a kernel call on tensor-table
// entries (value ids of the graph), in execution order.
struct ModelInstruction {
  std::string op;      // "MATMUL-BLAS"
  std::string kernel;  // "matmul_blas_f32_r2"
  std::string source;  // the body statement and its file:line:col
  std::vector<int> operands;
  std::uint32_t written = 0;          // bit k: operand k is written
  std::vector<std::string> scalars;   // C++ initialisers of the ScalarArgs
  std::vector<std::string> specs;     // C++ initialisers of the OperandSpecs
  bool backward = false;              // part of the pullback
  // In the pullback after zero_grad() (Program::backward_fresh), when it
  // differs there: the GEMM that stores the gradient instead of adding it.
  std::string fresh_op, fresh_kernel;
};

// The instructions of a planned graph (a copy first where a call writes in
// place on a caller's tensor). `list_consts` receives the static arrays
// that list arguments refer to.
std::vector<ModelInstruction> plan_instructions(const graph::Graph& g, std::vector<std::string>* list_consts);

// The instruction sequence in the layout of disassemble-waffe2-ir, with the
// symbolic shapes of the build (what `wfgen disasm` prints, offline).
std::string disassemble(const graph::Graph& g);

// The kernels a traced graph calls (for lower::plan_kernels), and the
// optimizer kernels of step() for a build with an optimizer.
std::vector<lower::KernelRequest> kernels_needed(const spec::Spec& spec, const spec::Build& build, const graph::Graph& g);

std::vector<OutputFile> emit_model(const spec::Spec& spec, const spec::Build& build, const graph::Graph& g,
                                   const passes::MemoryPlan& plan, const KernelEmitOptions& options);

}  // namespace wfgen::emit
