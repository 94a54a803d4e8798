// The attention kernel fusion makes of matmul -> scaled_softmax -> matmul
// (passes/fuse_attention.cpp; builtin "attention", which no spec names).
#pragma once

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

void emit_attention(CodeWriter& w, const lower::KernelPlan& p);

}  // namespace wfgen::emit
