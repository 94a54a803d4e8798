#include "wfgen/emit/builtin_softmax.hpp"

#include <cstdint>
#include <string>

#include "wfgen/emit/builtin_support.hpp"

namespace wfgen::emit {

using lower::KernelPlan;

namespace {

using builtin::elem;
using builtin::num;
using builtin::open_row_nest;
using builtin::scalar;

}  // namespace

// OUT[..., i, :] = softmax(scale * X[..., i, :]) over the columns j <= i
// (causal) or every column, 0 in the columns a causal row leaves out:
// attention's scale, mask and softmax as one pass over a row instead of
// three kernels (and the mask's -1e30 never stored). Rows are split across
// the threads; a contiguous row runs through rt::math::scaled_softmax_row
// (vectorised, a short row held in registers; the same max_row and exp as
// the fused softmax kernels), any other layout through a scalar loop in
// double.
void emit_scaled_softmax(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  std::string t = elem(p.dtype);
  const std::string rows_axis = num(r - 2), last = num(r - 1);
  w.comment(o.name + "[..., i, :] = softmax(scale * " + x.name + "[..., i, :]) over j <= i when causal (0 after), else over every j");
  w.line("const std::int64_t wf_rows = " + o.cpp + ".shape[" + rows_axis + "], wf_cols = " + o.cpp + ".shape[" + last + "];");
  w.line("std::int64_t wf_mats = 1;");
  if (r > 2) w.line("for (int wf_d = 0; wf_d < " + num(r - 2) + "; ++wf_d) wf_mats *= " + o.cpp + ".shape[wf_d];");
  w.line("const std::int64_t wf_sx = " + x.cpp + ".strides[" + last + "], wf_so = " + o.cpp + ".strides[" + last + "];");
  w.line("const " + t + " wf_scale = static_cast<" + t + ">(" + scalar(p, "scale") + ");");
  w.line("const bool wf_causal = " + scalar(p, "causal") + ";");
  w.open("wfgen::rt::parallel_for(0, wf_mats * wf_rows, " + builtin::rows_grain(16384, "wf_cols") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  // Rows walked matrix by matrix: the matrix's offsets are computed once
  // for its rows (a division and a remainder per row and batch axis were
  // 4.3 of the 18.8 us of the tiny LM's 16 x 64 rows of 64).
  w.open("for (std::int64_t wf_q = wf_lo; wf_q < wf_hi;)");
  w.line("const std::int64_t wf_m = wf_q / wf_rows, wf_end = std::min(wf_hi, (wf_m + 1) * wf_rows);");
  w.line("std::int64_t wf_mx = 0, wf_mo = 0;");
  builtin::add_batch_offsets(w, r, "wf_m", x, o, "wf_mx", "wf_mo");
  w.open("for (std::int64_t wf_i = wf_q - wf_m * wf_rows; wf_q < wf_end; ++wf_q, ++wf_i)");
  w.line("const " + t + "* wf_src = " + x.cpp + ".data + wf_mx + wf_i * " + x.cpp + ".strides[" + rows_axis + "];");
  w.line(t + "* wf_dst = " + o.cpp + ".data + wf_mo + wf_i * " + o.cpp + ".strides[" + rows_axis + "];");
  w.line("const std::int64_t wf_n = wf_causal ? std::min(wf_i + 1, wf_cols) : wf_cols;  // the columns the row keeps");
  w.line("if (wf_n <= 0) continue;");
  w.open("if (wf_sx == 1 && wf_so == 1)");
  w.line("wfgen::rt::math::scaled_softmax_row(wf_dst, wf_src, wf_scale, wf_n, wf_cols);");
  w.line("continue;");
  w.close();
  w.line("double wf_max = -std::numeric_limits<double>::infinity();");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_n; ++wf_j) wf_max = std::max(wf_max, static_cast<double>(wf_scale * wf_src[wf_j * wf_sx]));");
  w.line("double wf_sum = 0;");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_n; ++wf_j) wf_sum += std::exp(static_cast<double>(wf_scale * wf_src[wf_j * wf_sx]) - wf_max);");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_cols; ++wf_j)");
  w.line("  wf_dst[wf_j * wf_so] = wf_j < wf_n ? static_cast<" + t + ">(std::exp(static_cast<double>(wf_scale * wf_src[wf_j * wf_sx]) - wf_max) / wf_sum) : " + t + "(0);");
  w.close();
  w.close();
  w.close(");");
}

// One row of the loss per row of the logits: log-sum-exp with the row's max
// subtracted (so exp never overflows), accumulated in double.
void emit_softmax_cross_entropy(CodeWriter& w, const KernelPlan& p) {
  const auto& z = p.tensors[0];
  const auto& t = p.tensors[1];
  const auto& o = p.tensors[2];
  const int r = p.rank;
  std::string ty = elem(p.dtype);
  w.comment(o.name + " = -sum(" + t.name + " * log_softmax(" + z.name + ")) along the last axis: sum(" + t.name + " * (lse - " +
            z.name + ")), lse = max + log(sum(exp(" + z.name + " - max)))");
  w.line("const std::int64_t wf_c = " + z.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const std::int64_t wf_sz = " + z.cpp + ".strides[" + num(r - 1) + "], wf_st = " + t.cpp + ".strides[" + num(r - 1) + "];");
  open_row_nest(w, r, z, {&z, &t, &o}, "wf_c", 4096);
  // Contiguous rows: the max and the exps through rt::math's row helpers,
  // which vectorise (scalar std::exp in double was 6 % of a language
  // model's training step); the sum of the exps in the element type, the
  // log and the target terms in double as below. The exps are only summed:
  // a chunk at a time in a buffer on the stack (a kernel allocates nothing,
  // so forward_into does not: tests/models/test_into.cpp).
  w.open("if (wf_sz == 1 && wf_st == 1)");
  w.line(ty + " wf_e[256];");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("const " + ty + "* wf_z = " + z.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  w.line("const " + ty + "* wf_t = " + t.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line("const " + ty + " wf_max = wfgen::rt::math::max_row(wf_z, wf_c);");
  w.line("double wf_sum = 0;");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_c; wf_j += 256)");
  w.line("  wf_sum += static_cast<double>(wfgen::rt::math::exp_minus_max(wf_e, wf_z + wf_j, wf_max, std::min<std::int64_t>(256, wf_c - wf_j)));");
  w.line("double wf_tsum = 0, wf_tz = 0;");
  w.open("for (std::int64_t wf_i = 0; wf_i < wf_c; ++wf_i)");
  w.line("const double wf_ti = static_cast<double>(wf_t[wf_i]);");
  w.line("wf_tsum += wf_ti;");
  w.line("if (wf_ti != 0) wf_tz += wf_ti * static_cast<double>(wf_z[wf_i]);");
  w.close();
  w.line("const double wf_lse = static_cast<double>(wf_max) + std::log(wf_sum);");
  w.line(o.cpp + ".data[wf_off[2] + wf_r * wf_step[2]] = static_cast<" + ty + ">(wf_tsum * wf_lse - wf_tz);");
  w.close();
  w.line("return;");
  w.close();
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("const " + ty + "* wf_z = " + z.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  w.line("const " + ty + "* wf_t = " + t.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line("double wf_max = -std::numeric_limits<double>::infinity();");
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_c; ++wf_i) wf_max = std::max(wf_max, static_cast<double>(wf_z[wf_i * wf_sz]));");
  w.line("double wf_sum = 0, wf_tsum = 0, wf_tz = 0;");
  w.open("for (std::int64_t wf_i = 0; wf_i < wf_c; ++wf_i)");
  w.line("const double wf_zi = static_cast<double>(wf_z[wf_i * wf_sz]), wf_ti = static_cast<double>(wf_t[wf_i * wf_st]);");
  w.line("wf_sum += std::exp(wf_zi - wf_max);");
  w.line("wf_tsum += wf_ti;");
  w.line("if (wf_ti != 0) wf_tz += wf_ti * wf_zi;");
  w.close();
  w.line("const double wf_lse = wf_max + std::log(wf_sum);");
  w.line(o.cpp + ".data[wf_off[2] + wf_r * wf_step[2]] = static_cast<" + ty + ">(wf_tsum * wf_lse - wf_tz);");
  w.close();
  w.close(");");
}

}  // namespace wfgen::emit
