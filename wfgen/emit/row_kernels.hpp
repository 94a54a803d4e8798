// Fused row kernels (passes/fuse.cpp makes them: softmax, log_softmax,
// layernorm, cross-entropy...): per row of the iteration space, the row
// values in order, then the output row. emit_kernels.cpp wraps the body in
// the kernel's signature.
#pragma once

#include <string>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

// Writes the body of the fused row kernel `p` (p.fused) into `w`.
void emit_fused_rows(CodeWriter& w, const lower::KernelPlan& p);

// The namespace of the helpers a kernel's expressions call: a kernel fusion
// made for a build with `math: fast` gets rt::math::fast (its faster exp).
std::string math_namespace(const lower::KernelPlan& p);

}  // namespace wfgen::emit
