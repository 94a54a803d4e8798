// Small helpers the builtin kernels' writers share (builtins.cpp,
// builtin_softmax.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "wfgen/emit/code_writer.hpp"
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

// Writes the statements that add to `x_off` and `o_off` the offsets, in X and
// in O, of matrix number `index` of a rank-`rank` pair's leading (batch) axes,
// the last of them varying fastest (O's shape is the loop's). Nothing for a
// rank-2 pair: it is one matrix.
inline void add_batch_offsets(CodeWriter& w, int rank, const std::string& index, const lower::TensorParam& x,
                              const lower::TensorParam& o, const std::string& x_off, const std::string& o_off) {
  if (rank <= 2) return;
  w.line("std::int64_t wf_rest = " + index + ";");
  w.open("for (int wf_d = " + num(rank - 3) + "; wf_d >= 0; --wf_d)");
  w.line("const std::int64_t wf_k = wf_rest % " + o.cpp + ".shape[wf_d];");
  w.line("wf_rest /= " + o.cpp + ".shape[wf_d];");
  w.line(x_off + " += wf_k * " + x.cpp + ".strides[wf_d];");
  w.line(o_off + " += wf_k * " + o.cpp + ".strides[wf_d];");
  w.close();
}

}  // namespace wfgen::emit::builtin
