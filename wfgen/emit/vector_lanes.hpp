// How many elements of a dtype the emitted loops put side by side. The
// kernels are written for 64-byte vectors (AVX-512; a narrower target
// splits them), so these are properties of the generated code, fixed at
// generation time, not of the machine that compiles it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "wfgen/runtime_types.hpp"

namespace wfgen::emit {

// Elements in one 64-byte vector: 16 floats, 8 doubles (the rows of a
// fused row kernel's tile, the columns col2im builds at a time).
inline std::int64_t vector_lanes(rt::DType dtype) { return 64 / static_cast<std::int64_t>(rt::dtype_size(dtype)); }

// Partial sums of a sum split into independent chains: 128 bytes of them
// (32 floats, 16 doubles; at most 32), so the loop vectorises into chains
// of vector adds that do not wait on each other's latency. Their order
// differs from a sequential sum by rounding only.
inline std::int64_t partial_sum_lanes(rt::DType dtype) {
  return std::min<std::int64_t>(32, 128 / static_cast<std::int64_t>(rt::dtype_size(dtype)));
}

}  // namespace wfgen::emit
