// Small helpers the builtin kernels' writers share (builtins.cpp,
// builtin_softmax.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "wfgen/expr/expr.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit::builtin {

inline std::string num(std::int64_t v) { return std::to_string(v); }

inline std::string elem(rt::DType d) { return expr::cpp_type(d); }

// The name of a constructor argument's C++ parameter (checked by kernel_plan).
inline std::string scalar(const lower::KernelPlan& p, const char* name) {
  for (const auto& s : p.scalars)
    if (s.name == name) return s.cpp;
  return name;
}

}  // namespace wfgen::emit::builtin
