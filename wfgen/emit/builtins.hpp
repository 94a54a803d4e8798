// The bodies of wfgen's built-in kernels (`builtin:` in an impl): gather
// and its adjoint scatter_add, one_hot, im2col and its adjoint col2im,
// depthwise_conv2d,
// causal_mask, scaled_softmax, layer_norm and its backward (builtin_layer_norm.cpp), max_pool and its adjoints max_pool_grad and max_pool_pick,
// softmax_cross_entropy and the optimizers. Each is written
// once here for every dtype and rank its plan asks for; emit_kernels.cpp
// wraps it in the kernel's signature.
#pragma once

#include <cstdint>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit {

// The elements of a parameter an optimizer kernel hands each thread at
// least (its LoopNest's grain): a step of fewer is not worth a thread.
inline constexpr std::int64_t kOptimizerGrain = 65536;
// step() runs the updates of its parameters side by side in bins of at
// least this many elements (rt::parallel_tasks): the tiny LM's 36 updates,
// 132k elements, are about 0.3 ms on one thread, and a bin of 4096 about
// 10 us, well above what handing it to a thread costs.
inline constexpr std::int64_t kOptimizerTaskGrain = 4096;

// Writes the body of the builtin kernel `p` (p.impl->builtin) into `w`.
void emit_builtin(CodeWriter& w, const lower::KernelPlan& p);

}  // namespace wfgen::emit
