// The bodies of wfgen's built-in kernels (`builtin:` in an impl): gather
// and its adjoint scatter_add, one_hot, im2col and its adjoint col2im,
// depthwise_conv2d,
// causal_mask, scaled_softmax, layer_norm and its backward (builtin_layer_norm.cpp), max_pool and its adjoints max_pool_grad and max_pool_pick,
// softmax_cross_entropy and the optimizers. Each is written
// once here for every dtype and rank its plan asks for; emit_kernels.cpp
// wraps it in the kernel's signature.
#pragma once

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

// Writes the body of the builtin kernel `p` (p.impl->builtin) into `w`.
void emit_builtin(CodeWriter& w, const lower::KernelPlan& p);

}  // namespace wfgen::emit
