// The layer normalisation builtins (stdlib/nodes.yaml's layer_norm,
// layer_norm_grad and layer_norm_param_grad): a row's mean, variance,
// normalisation, scale and shift in one pass over it, and its backward in
// X (one pass a row) and in G and B (blocks of rows' partial sums, added in
// a fixed order).
#pragma once

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

void emit_layer_norm(CodeWriter& w, const lower::KernelPlan& p);
void emit_layer_norm_grad(CodeWriter& w, const lower::KernelPlan& p);
void emit_layer_norm_param_grad(CodeWriter& w, const lower::KernelPlan& p);

}  // namespace wfgen::emit
