// Small helpers the kernels' writers share (builtins.cpp,
// builtin_softmax.cpp, emit_kernels.cpp's reductions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/expr/expr.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit::builtin {

inline std::string num(std::int64_t v) { return std::to_string(v); }

inline std::string elem(rt::DType d) { return expr::cpp_type(d); }

// A parallel_for grain in rows (planes, matrix rows) such that a chunk
// holds about `elements` elements: the C++ expression max(1, elements /
// max(1, per_row)), `per_row` being the expression of a row's elements.
inline std::string rows_grain(std::int64_t elements, const std::string& per_row) {
  return "std::max<std::int64_t>(1, " + num(elements) + " / std::max<std::int64_t>(1, " + per_row + "))";
}

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

// Opens the loop nest of a row kernel: rows along the last axis, walked over
// the leading axes of `shape_of`'s shape with one stride set per tensor of
// `rowed` (the last one, the output, orders the nest's loops), split across
// the pool in tasks of about `grain` elements for rows of `row_length` (a C++
// expression) elements. Leaves the task's lambda open (wf_off, wf_step per
// tensor, wf_rows rows) for the caller's row loop; close it with w.close(");").
inline void open_row_nest(CodeWriter& w, int rank, const lower::TensorParam& shape_of,
                          const std::vector<const lower::TensorParam*>& rowed, const std::string& row_length, std::int64_t grain) {
  std::string strides;
  for (const auto* t : rowed) strides += (strides.empty() ? "" : ", ") + ("wfgen::rt::head<1>(" + t->cpp + ".strides)");
  const auto n = static_cast<std::int64_t>(rowed.size());
  w.line("const wfgen::rt::LoopNest<" + num(rank - 1) + ", " + num(n) + "> wf_nest(wfgen::rt::head<1>(" + shape_of.cpp + ".shape), {" + strides +
         "}, " + num(n - 1) + ");");
  w.open("wf_nest.run(" + num(grain) + " / std::max<std::int64_t>(1, " + row_length +
         ") + 1, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_rows)");
}

}  // namespace wfgen::emit::builtin
