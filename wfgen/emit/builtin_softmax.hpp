// The softmax builtins (stdlib/nodes.yaml), beside builtins.cpp's others:
// scaled_softmax (attention's scale, causal mask and softmax in one pass
// over a row) and softmax_cross_entropy (a row's loss in one pass).
#pragma once

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

void emit_scaled_softmax(CodeWriter& w, const lower::KernelPlan& p);
void emit_softmax_cross_entropy(CodeWriter& w, const lower::KernelPlan& p);

}  // namespace wfgen::emit
