#include "wfgen/emit/builtins.hpp"

#include <functional>
#include <initializer_list>
#include <string>

#include "wfgen/emit/builtin_attention.hpp"
#include "wfgen/emit/builtin_layer_norm.hpp"
#include "wfgen/emit/builtin_softmax.hpp"
#include "wfgen/emit/builtin_support.hpp"
#include "wfgen/emit/row_kernels.hpp"
#include "wfgen/emit/vector_lanes.hpp"

namespace wfgen::emit {

namespace {

using lower::KernelPlan;
using lower::TensorParam;
using spec::ArgType;

using builtin::elem;
using builtin::num;
using builtin::open_row_nest;
using builtin::rows_grain;
using builtin::scalar;

void emit_gather(CodeWriter& w, const KernelPlan& p) {
  const auto& wt = p.tensors[0];
  const auto& idx = p.tensors[1];
  const auto& o = p.tensors[2];
  const int r = p.rank;
  std::string t = elem(p.dtype);
  w.comment(o.name + "[..., :] = " + wt.name + "[" + idx.name + "[...], :]; an index out of range gives a row of zeros");
  w.line("const std::int64_t wf_rows = " + wt.cpp + ".shape[0], wf_d = " + wt.cpp + ".shape[1];");
  w.line("const std::int64_t wf_so = " + o.cpp + ".strides[" + num(r - 1) + "];");
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", 2> wf_nest(" + idx.cpp + ".shape, {" + idx.cpp +
         ".strides, wfgen::rt::head<1>(" + o.cpp + ".strides)}, 1);");
  w.open("wf_nest.run(0, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n)");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_n; ++wf_r)");
  w.line("const std::int64_t wf_k = wfgen::rt::index_of(" + idx.cpp + ".data[wf_off[0] + wf_r * wf_step[0]]);");
  w.line(t + "* wf_dst = " + o.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.open("if (wf_k >= 0 && wf_k < wf_rows)");
  w.line("const " + t + "* wf_src = " + wt.cpp + ".data + wf_k * " + wt.cpp + ".strides[0];");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_d; ++wf_j) wf_dst[wf_j * wf_so] = wf_src[wf_j * " + wt.cpp + ".strides[1]];");
  w.otherwise();
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_d; ++wf_j) wf_dst[wf_j * wf_so] = " + t + "(0);");
  w.close();
  w.close();
  w.close(");");
}

// OUT = X in another dtype (builtin cast). Float to integer (to_u8 too):
// toward zero, saturated
// at the integer's range, NaN to 0 (C++ leaves those undefined, ONNX
// unspecified). Between integers: modulo 2^bits (C++20); integer or f64 to
// float: the nearest.
// The builtin cast_bool (to_bool, a u8): 1 where X != 0 (NaN too), as ONNX's
// Cast to BOOL; not a conversion of the number, so a builtin of its own.
void emit_cast(CodeWriter& w, const KernelPlan& p, bool to_bool) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const rt::DType to = o.dtype.value_or(p.dtype);
  const std::string from_t = elem(p.dtype), to_t = elem(to);
  const bool float_from = rt::dtype_is_float(p.dtype);
  const bool float_to = rt::dtype_is_float(to);
  w.comment(o.name + " = " + x.name + " as " + rt::dtype_name(to));
  if (to_bool) {
    w.line("auto wf_cast = [](" + from_t + " wf_v) { return static_cast<" + to_t + ">(wf_v != " + from_t + "(0) ? 1 : 0); };");
  } else if (float_from && !float_to) {
    // The bounds as floats: the largest one rounds up to 2^(bits-1), itself out of range.
    w.line("constexpr " + from_t + " wf_lo = static_cast<" + from_t + ">(std::numeric_limits<" + to_t + ">::min());");
    w.line("constexpr " + from_t + " wf_hi = static_cast<" + from_t + ">(std::numeric_limits<" + to_t + ">::max());");
    w.open("auto wf_cast = [&](" + from_t + " wf_v)");
    w.line("if (!(wf_v == wf_v)) return " + to_t + "(0);");
    w.line("if (wf_v <= wf_lo) return std::numeric_limits<" + to_t + ">::min();");
    w.line("if (wf_v >= wf_hi) return std::numeric_limits<" + to_t + ">::max();");
    w.line("return static_cast<" + to_t + ">(wf_v);");
    w.close(";");
  } else {
    w.line("auto wf_cast = [](" + from_t + " wf_v) { return static_cast<" + to_t + ">(wf_v); };");
  }
  w.line("const wfgen::rt::LoopNest<" + num(p.rank) + ", 2> wf_nest(" + x.cpp + ".shape, {" + x.cpp + ".strides, " + o.cpp +
         ".strides});");
  w.open("wf_nest.run(0, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n)");
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) " + o.cpp + ".data[wf_off[1] + wf_i * wf_step[1]] = wf_cast(" + x.cpp +
         ".data[wf_off[0] + wf_i * wf_step[0]]);");
  w.close(");");
}

void emit_one_hot(CodeWriter& w, const KernelPlan& p) {
  const auto& idx = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  std::string t = elem(p.dtype);
  w.comment(o.name + "[..., k] = 1 where " + idx.name + "[...] = k, else 0");
  w.line("const std::int64_t wf_classes = " + o.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const std::int64_t wf_so = " + o.cpp + ".strides[" + num(r - 1) + "];");
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", 2> wf_nest(" + idx.cpp + ".shape, {" + idx.cpp +
         ".strides, wfgen::rt::head<1>(" + o.cpp + ".strides)}, 1);");
  // Rows split across the threads by about 65536 output elements (a
  // language model's targets, 1024 rows of 256 classes: 16 us on one
  // thread); a contiguous row is zeroed by a loop g++ vectorises, then its
  // one 1 written.
  w.open("wf_nest.run(" + builtin::rows_grain(65536, "wf_classes") + ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n)");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_n; ++wf_r)");
  w.line("const std::int64_t wf_k = wfgen::rt::index_of(" + idx.cpp + ".data[wf_off[0] + wf_r * wf_step[0]]);");
  w.line(t + "* wf_dst = " + o.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.open("if (wf_so == 1)");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_classes; ++wf_j) wf_dst[wf_j] = " + t + "(0);");
  w.line("if (wf_k >= 0 && wf_k < wf_classes) wf_dst[wf_k] = " + t + "(1);");
  w.line("continue;");
  w.close();
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_classes; ++wf_j) wf_dst[wf_j * wf_so] = " + t + "(wf_j == wf_k ? 1 : 0);");
  w.close();
  w.close(");");
}

// The columns [x_lo, x_hi) of an output row whose input column
// x*stride - pad + kw*dilation falls inside [0, width): the other columns are
// padding. Shared by im2col and col2im so that their inner loops have no
// branch (and vectorise when the strides are 1); on plane_locals' names.
void emit_inside_columns(CodeWriter& w) {
  w.line("const std::int64_t wf_shift = wf_pw - wf_kw * wf_dw;  // ix = x*stride - shift");
  w.line("std::int64_t wf_x_lo = wf_shift > 0 ? (wf_shift + wf_sw - 1) / wf_sw : 0;");
  w.line("std::int64_t wf_x_hi = wf_w + wf_shift > 0 ? (wf_w + wf_shift + wf_sw - 1) / wf_sw : 0;");
  w.line("wf_x_hi = std::min<std::int64_t>(wf_x_hi, wf_wo);");
  w.line("wf_x_lo = std::min<std::int64_t>(wf_x_lo, wf_x_hi);");
}

// The (n, c) planes of col2im are independent: split across the runtime's
// threads, each plane computed by one thread in a fixed order (im2col's
// loop, the same but by (n, c, kh), is emit_im2col's own).
// `locals` are declared inside the threads' function, before the loop: what
// the loop reads there is in registers, where fields read through the
// function's captured references would be loaded again after every store
// the compiler cannot tell apart from them.
void open_plane_loop(CodeWriter& w, const TensorParam& planes, const TensorParam& col, const std::vector<std::string>& locals = {}) {
  w.line("const std::int64_t wf_channels = " + planes.cpp + ".shape[1];");
  w.line("const std::int64_t wf_plane = " + col.cpp + ".shape[2] * " + col.cpp + ".shape[3] * " + col.cpp + ".shape[4] * " + col.cpp +
         ".shape[5];");
  w.open("wfgen::rt::parallel_for(0, " + planes.cpp + ".shape[0] * wf_channels, " + rows_grain(32768, "wf_plane") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  for (const auto& l : locals) w.line(l);
  w.open("for (std::int64_t wf_bc = wf_lo; wf_bc < wf_hi; ++wf_bc)");
  w.line("const std::int64_t wf_b = wf_bc / wf_channels, wf_c = wf_bc % wf_channels;");
}

// The locals of im2col and col2im's threads: the data, strides, height and
// width of `image` (X of im2col, OUT of col2im; named `name` + d, s0..s3:
// wf_xd, wf_xs0.. or wf_od, wf_os0..), the data and strides of `col` (wf_cd,
// wf_cs0..wf_cs5), the block sizes and the scalars.
std::vector<std::string> plane_locals(const KernelPlan& p, const TensorParam& image, const std::string& name, const TensorParam& col) {
  auto data_and_strides = [&](const TensorParam& v, const std::string& n) {
    std::string s = "const std::int64_t ";
    for (int d = 0; d < v.rank; ++d) s += (d ? ", " : "") + n + "s" + num(d) + " = " + v.cpp + ".strides[" + num(d) + "]";
    return std::vector<std::string>{std::string(v.written ? "" : "const ") + elem(p.dtype) + "* const " + n + "d = " + v.cpp + ".data;",
                                    s + ";"};
  };
  std::vector<std::string> locals = data_and_strides(image, name);
  for (auto& l : data_and_strides(col, "wf_c")) locals.push_back(std::move(l));
  for (std::string l : {"const std::int64_t wf_h = " + image.cpp + ".shape[2], wf_w = " + image.cpp + ".shape[3];",
                        "const std::int64_t wf_kh_n = " + col.cpp + ".shape[2], wf_kw_n = " + col.cpp + ".shape[3], wf_ho = " +
                            col.cpp + ".shape[4], wf_wo = " + col.cpp + ".shape[5];",
                        "const std::int64_t wf_sh = " + scalar(p, "stride_h") + ", wf_ph = " + scalar(p, "pad_h") + ", wf_dh = " +
                            scalar(p, "dilation_h") + ";",
                        "const std::int64_t wf_sw = " + scalar(p, "stride_w") + ", wf_pw = " + scalar(p, "pad_w") + ", wf_dw = " +
                            scalar(p, "dilation_w") + ";"})
    locals.push_back(std::move(l));
  return locals;
}

void emit_im2col(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& c = p.tensors[1];
  std::string t = elem(p.dtype);
  w.comment(c.name + "[n c kh kw y x] = " + x.name +
            "[n c (y*stride_h - pad_h + kh*dilation_h) (x*stride_w - pad_w + kw*dilation_w)], 0 outside");
  // Split across threads by (n, c, kh), each unit kw x h_out x w_out of
  // COL: by planes, a first layer's 3 channels made 2 units on one thread
  // and 1 on the other. A thread's units are a range of kh in each plane.
  w.line("const std::int64_t wf_channels = " + x.cpp + ".shape[1], wf_kh_count = " + c.cpp + ".shape[2];");
  w.line("const std::int64_t wf_block = " + c.cpp + ".shape[3] * " + c.cpp + ".shape[4] * " + c.cpp + ".shape[5];");
  w.open("wfgen::rt::parallel_for(0, " + x.cpp + ".shape[0] * wf_channels * wf_kh_count, " + rows_grain(32768, "wf_block") +
         ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  for (const auto& l : plane_locals(p, x, "wf_x", c)) w.line(l);
  w.open("for (std::int64_t wf_bc = wf_lo / wf_kh_n; wf_bc * wf_kh_n < wf_hi; ++wf_bc)");
  w.line("const std::int64_t wf_b = wf_bc / wf_channels, wf_c = wf_bc % wf_channels;");
  w.line("const std::int64_t wf_kh_lo = std::max<std::int64_t>(0, wf_lo - wf_bc * wf_kh_n), wf_kh_hi = std::min<std::int64_t>(wf_kh_n, wf_hi - wf_bc * wf_kh_n);");
  w.line("const " + t + "* wf_src = wf_xd + wf_b * wf_xs0 + wf_c * wf_xs1;");
  w.line(t + "* const wf_plane_col = wf_cd + wf_b * wf_cs0 + wf_c * wf_cs1;");
  auto open_blocks = [&] {
    w.open("for (std::int64_t wf_kh = wf_kh_lo; wf_kh < wf_kh_hi; ++wf_kh)");
    w.open("for (std::int64_t wf_kw = 0; wf_kw < wf_kw_n; ++wf_kw)");
    emit_inside_columns(w);
  };
  // Rows of stride 1 on both sides, stride_w 1 or 2: each (kh, kw) block
  // by rt::im2col_block, the padding's zeros then one short fixed-size copy
  // (stride_w 1: rt::PaddedRows, where a copy loop shorter than a vector,
  // the CNN's rows of 12, ran scalar) or the even elements of the image's
  // row (stride_w 2: two vectors shuffled into one, where the loop below is
  // a scalar gather). The strides as variables would make it a gather.
  w.open("if (wf_cs5 == 1 && wf_xs3 == 1 && wf_sw <= 2)");
  open_blocks();
  w.line("wfgen::rt::im2col_block(wf_plane_col + wf_kh * wf_cs2 + wf_kw * wf_cs3, wf_cs4, wf_src, wf_xs2, wf_ho, wf_h, wf_kh * wf_dh - wf_ph, wf_sh, wf_wo, wf_shift, wf_x_lo, wf_x_hi, wf_sw);");
  w.close();
  w.close();
  w.line("continue;");
  w.close();
  open_blocks();
  w.line(t + "* wf_dst = wf_plane_col + wf_kh * wf_cs2 + wf_kw * wf_cs3;");
  w.open("for (std::int64_t wf_y = 0; wf_y < wf_ho; ++wf_y, wf_dst += wf_cs4)");
  w.line("const std::int64_t wf_iy = wf_y * wf_sh - wf_ph + wf_kh * wf_dh;");
  w.open("if (wf_iy < 0 || wf_iy >= wf_h)");
  w.line("for (std::int64_t wf_x = 0; wf_x < wf_wo; ++wf_x) wf_dst[wf_x * wf_cs5] = " + t + "(0);");
  w.line("continue;");
  w.close();
  w.line("const " + t + "* wf_row = wf_src + wf_iy * wf_xs2;");
  w.line("for (std::int64_t wf_x = 0; wf_x < wf_x_lo; ++wf_x) wf_dst[wf_x * wf_cs5] = " + t + "(0);");
  w.line("for (std::int64_t wf_x = wf_x_lo; wf_x < wf_x_hi; ++wf_x) wf_dst[wf_x * wf_cs5] = wf_row[(wf_x * wf_sw - wf_shift) * wf_xs3];");
  w.line("for (std::int64_t wf_x = wf_x_hi; wf_x < wf_wo; ++wf_x) wf_dst[wf_x * wf_cs5] = " + t + "(0);");
  for (int i = 0; i < 4; ++i) w.close();
  w.close(");");
}

// OUT[k, :] += DOUT[p, :] for each p with IDX[p] = k in range: one pass over
// the indices in order, so rows named twice add up in a fixed order
// (deterministic sums; never split across threads, which would race on a row).
void emit_scatter_add(CodeWriter& w, const KernelPlan& p) {
  const auto& d = p.tensors[0];
  const auto& idx = p.tensors[1];
  const auto& o = p.tensors[3];
  std::string t = elem(p.dtype);
  w.comment(o.name + "[k, :] = the sum of " + d.name + "[p, :] over every p with " + idx.name + "[p] = k");
  w.line("const std::int64_t wf_rows = " + o.cpp + ".shape[0], wf_d = " + o.cpp + ".shape[1];");
  w.open("for (std::int64_t wf_k = 0; wf_k < wf_rows; ++wf_k)");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_d; ++wf_j) " + o.cpp + ".data[wf_k * " + o.cpp + ".strides[0] + wf_j * " + o.cpp +
         ".strides[1]] = " + t + "(0);");
  w.close();
  w.open("for (std::int64_t wf_p = 0; wf_p < " + idx.cpp + ".shape[0]; ++wf_p)");
  w.line("const std::int64_t wf_k = wfgen::rt::index_of(" + idx.cpp + ".data[wf_p * " + idx.cpp + ".strides[0]]);");
  w.line("if (wf_k < 0 || wf_k >= wf_rows) continue;");
  w.line(t + "* wf_dst = " + o.cpp + ".data + wf_k * " + o.cpp + ".strides[0];");
  w.line("const " + t + "* wf_src = " + d.cpp + ".data + wf_p * " + d.cpp + ".strides[0];");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_d; ++wf_j) wf_dst[wf_j * " + o.cpp + ".strides[1]] += wf_src[wf_j * " + d.cpp +
         ".strides[1]];");
  w.close();
}

// OUT = 0, then every element of COL inside the image added to the pixel its
// patch read: im2col's adjoint. The (n, c) planes are independent (split
// across threads), and the order of the sums within a plane is fixed (kh, kw,
// y, x), so the result does not depend on the number of threads.
void emit_col2im(CodeWriter& w, const KernelPlan& p) {
  const auto& c = p.tensors[0];
  const auto& o = p.tensors[2];
  std::string t = elem(p.dtype);
  w.comment(o.name + "[n c (y*stride_h - pad_h + kh*dilation_h) (x*stride_w - pad_w + kw*dilation_w)] += " + c.name +
            "[n c kh kw y x], from 0; outside the image nothing");
  open_plane_loop(w, o, c, plane_locals(p, o, "wf_o", c));
  w.line(t + "* wf_img = wf_od + wf_b * wf_os0 + wf_c * wf_os1;");
  w.line("const " + t + "* wf_plane_col = wf_cd + wf_b * wf_cs0 + wf_c * wf_cs1;");
  // Stride 1 along the rows, rows of stride 1: each row of the image built in
  // registers, `lanes` columns at a time, from every (kh, kw) that reaches
  // it, then stored once. (Adding each (kh, kw) into the image row by row,
  // the loop below, makes every vector load wait on the overlapping stores
  // of the previous kw: 4x slower on the CNN's 16x14x14 planes.) The sums
  // run in the same (kh, kw) order from the same 0, so the results are the
  // same to the bit.
  const std::string lanes = num(vector_lanes(p.dtype));
  w.open("if (wf_cs5 == 1 && wf_os3 == 1 && wf_sw == 1)");
  w.open("for (std::int64_t wf_iy = 0; wf_iy < wf_h; ++wf_iy)");
  w.open("for (std::int64_t wf_x0 = 0; wf_x0 < wf_w; wf_x0 += " + lanes + ")");
  w.line("wfgen::rt::LaneRow<" + t + ", " + lanes + "> wf_acc;  // zeros");
  w.open("for (std::int64_t wf_kh = 0; wf_kh < wf_kh_n; ++wf_kh)");
  w.line("const std::int64_t wf_ty = wf_iy + wf_ph - wf_kh * wf_dh;  // y * stride_h");
  // No division for stride 1 (the usual convolution): two per (row, kh)
  // were a third of the kernel.
  w.line("if (wf_ty < 0 || (wf_sh != 1 && wf_ty % wf_sh != 0)) continue;");
  w.line("const std::int64_t wf_y = wf_sh == 1 ? wf_ty : wf_ty / wf_sh;");
  w.line("if (wf_y >= wf_ho) continue;");
  w.open("for (std::int64_t wf_kw = 0; wf_kw < wf_kw_n; ++wf_kw)");
  w.line("const " + t + "* wf_src = wf_plane_col + wf_kh * wf_cs2 + wf_kw * wf_cs3 + wf_y * wf_cs4;");
  w.line("const std::int64_t wf_at = wf_x0 + wf_pw - wf_kw * wf_dw;  // the column of COL that lane 0 reads");
  w.line("const std::int64_t wf_lo = std::clamp<std::int64_t>(-wf_at, 0, " + lanes + "), wf_hi = std::clamp<std::int64_t>(wf_wo - wf_at, wf_lo, " + lanes + ");");
  w.line("wf_acc.add(wf_src, wf_at, wf_lo, wf_hi);  // lanes outside [wf_lo, wf_hi) add 0");
  w.close();
  w.close();
  w.line("wf_acc.store(wf_img + wf_iy * wf_os2 + wf_x0, std::min<std::int64_t>(" + lanes + ", wf_w - wf_x0));");
  w.close();
  w.close();
  w.line("continue;");
  w.close();
  w.line("for (std::int64_t wf_iy = 0; wf_iy < wf_h; ++wf_iy)");
  w.line("  for (std::int64_t wf_ix = 0; wf_ix < wf_w; ++wf_ix) wf_img[wf_iy * wf_os2 + wf_ix * wf_os3] = " + t + "(0);");
  w.open("for (std::int64_t wf_kh = 0; wf_kh < wf_kh_n; ++wf_kh)");
  w.open("for (std::int64_t wf_kw = 0; wf_kw < wf_kw_n; ++wf_kw)");
  emit_inside_columns(w);
  w.open("for (std::int64_t wf_y = 0; wf_y < wf_ho; ++wf_y)");
  w.line("const std::int64_t wf_iy = wf_y * wf_sh - wf_ph + wf_kh * wf_dh;");
  w.line("if (wf_iy < 0 || wf_iy >= wf_h) continue;");
  w.line("const " + t + "* wf_src = wf_plane_col + wf_kh * wf_cs2 + wf_kw * wf_cs3 + wf_y * wf_cs4;");
  w.line(t + "* wf_row = wf_img + wf_iy * wf_os2;");
  w.line("for (std::int64_t wf_x = wf_x_lo; wf_x < wf_x_hi; ++wf_x) wf_row[(wf_x * wf_sw - wf_shift) * wf_os3] += wf_src[wf_x * wf_cs5];");
  for (int i = 0; i < 4; ++i) w.close();
  w.close(");");
}

// How a builtin's epilogue (plan_with_epilogue) names its values in the
// generated code: the sum `acc` wf_acc, input in<k> (tensor k + 2) wf_e<k>.
expr::EmitContext epilogue_context(const KernelPlan& p) {
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  ctx.name = [&p](const std::string& name) -> std::string {
    if (name == "acc") return "wf_acc";
    for (std::size_t k = 2; k + 1 < p.tensors.size(); ++k)
      if (p.tensors[k].name == name) return "wf_e" + num(static_cast<std::int64_t>(k - 2));
    return name;
  };
  return ctx;
}

// The epilogue fusion gave a depthwise convolution (plan_with_epilogue):
// a lambda from the sum `wf_acc` of an output element to the element
// stored, its inputs in0, in1... read once per plane (constant over it, as
// fuse.cpp checked) into wf_e0, wf_e1...
void emit_plane_epilogue(CodeWriter& w, const KernelPlan& p) {
  const std::string t = elem(p.dtype);
  for (std::size_t k = 2; k + 1 < p.tensors.size(); ++k) {
    const auto& in = p.tensors[k];
    w.line("const " + t + " wf_e" + num(static_cast<std::int64_t>(k - 2)) + " = " + in.cpp + ".data[wf_b * " + in.cpp +
           ".strides[0] + wf_c * " + in.cpp + ".strides[1]];");
  }
  const expr::EmitContext ctx = epilogue_context(p);
  w.line("const auto wf_epilogue = [=](" + t + " wf_acc) { return " + t + "(" + expr::to_cpp(*p.epilogue, ctx) + "); };");
}

// A depthwise convolution (rt::DepthwiseConv, depthwise.hpp): the (n, c)
// planes are independent, split across the threads, each summed by one
// thread in a fixed order (the result does not depend on the thread count).
// With an epilogue (fusion's), each element goes through it as it is
// stored: no second pass over the output.
void emit_depthwise_conv2d(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& f = p.tensors[1];
  const auto& o = p.tensors.back();
  const std::string t = elem(p.dtype);
  w.comment(o.name + "[n c y x] = the sum over kh, kw of " + f.name + "[c kh kw] * " + x.name +
            "[n c (y*stride_h - pad_h + kh*dilation_h) (x*stride_w - pad_w + kw*dilation_w)], 0 outside " + x.name);
  if (p.epilogue) w.comment("then, as each is stored, " + o.name + " = " + p.epilogue->str() + " of that sum acc (in0... per plane)");
  auto dims = [](const TensorParam& v, int a, int b) { return v.cpp + ".shape[" + num(a) + "], " + v.cpp + ".shape[" + num(b) + "]"; };
  auto strides = [](const TensorParam& v, int a, int b) {
    return v.cpp + ".strides[" + num(a) + "], " + v.cpp + ".strides[" + num(b) + "]";
  };
  w.line("const wfgen::rt::DepthwiseConv<" + t + "> wf_conv({" + dims(x, 2, 3) + ", " + dims(o, 2, 3) + ", " + dims(f, 1, 2) + ",");
  w.line("    " + scalar(p, "stride_h") + ", " + scalar(p, "stride_w") + ", " + scalar(p, "pad_h") + ", " + scalar(p, "pad_w") + ", " +
         scalar(p, "dilation_h") + ", " + scalar(p, "dilation_w") + ",");
  w.line("    " + strides(x, 2, 3) + ", " + strides(f, 1, 2) + ", " + strides(o, 2, 3) + "});");
  w.line("const std::int64_t wf_channels = " + o.cpp + ".shape[1];");
  w.line("const std::int64_t wf_work = " + o.cpp + ".shape[2] * " + o.cpp + ".shape[3] * " + f.cpp + ".shape[1] * " + f.cpp +
         ".shape[2];  // multiply-adds of a plane");
  w.open("wfgen::rt::parallel_for(0, " + o.cpp + ".shape[0] * wf_channels, " + rows_grain(32768, "wf_work") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  w.open("for (std::int64_t wf_bc = wf_lo; wf_bc < wf_hi; ++wf_bc)");
  w.line("const std::int64_t wf_b = wf_bc / wf_channels, wf_c = wf_bc % wf_channels;");
  if (p.epilogue) emit_plane_epilogue(w, p);
  w.line("wf_conv.plane(" + x.cpp + ".data + wf_b * " + x.cpp + ".strides[0] + wf_c * " + x.cpp + ".strides[1], " + f.cpp + ".data + wf_c * " +
         f.cpp + ".strides[0],");
  w.line("              " + o.cpp + ".data + wf_b * " + o.cpp + ".strides[0] + wf_c * " + o.cpp + ".strides[1]" +
         (p.epilogue ? ", wf_epilogue" : "") + ");");
  w.close();
  w.close(");");
}

// The epilogue fusion gave a Winograd convolution: a lambda from the sum
// `wf_acc` of output element (n, m, y, x) to the element stored, its inputs
// in0, in1... (shaped as the output: a per-channel bias is a broadcast, a
// residual a tensor) read at that element.
void emit_element_epilogue(CodeWriter& w, const KernelPlan& p) {
  const std::string t = elem(p.dtype);
  w.open("const auto wf_epilogue = [&](" + t + " wf_acc, std::int64_t wf_n, std::int64_t wf_m, std::int64_t wf_y, std::int64_t wf_x)");
  for (std::size_t k = 2; k + 1 < p.tensors.size(); ++k) {
    const auto& in = p.tensors[k];
    w.line("const " + t + " wf_e" + num(static_cast<std::int64_t>(k - 2)) + " = " + in.cpp + ".data[wf_n * " + in.cpp + ".strides[0] + wf_m * " +
           in.cpp + ".strides[1] + wf_y * " + in.cpp + ".strides[2] + wf_x * " + in.cpp + ".strides[3]];");
  }
  const expr::EmitContext ctx = epilogue_context(p);
  w.line("return " + t + "(" + expr::to_cpp(*p.epilogue, ctx) + ");");
  w.close(";");
}

// A 3 x 3 stride-1 convolution by Winograd's minimal filtering
// (rt::WinogradConv, winograd.hpp), its alpha^2 products through the
// device's GEMM (rt::gemm; the blas device's blas_gemm). With an epilogue
// (fusion's), each output element goes through it as it is stored.
void emit_winograd_conv2d(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& f = p.tensors[1];
  const auto& o = p.tensors.back();
  const std::string t = elem(p.dtype);
  const std::string gemm = p.impl->device == "blas" ? "wfgen::rt::blas_gemm<" + t + ">" : "wfgen::rt::gemm<" + t + ">";
  w.comment(o.name + "[n m y x] = the sum over c, kh, kw of " + f.name + "[m c kh kw] * " + x.name + "[n c (y - pad_h + kh) (x - pad_w + kw)], 0 outside " +
            x.name + ": Winograd's F(t x t, 3 x 3) (t = rt::winograd_tile), its products through " + gemm);
  if (p.epilogue) w.comment("then, as each is stored, " + o.name + " = " + p.epilogue->str() + " of that sum acc (in0... at the element)");
  auto four = [](const TensorParam& v, const char* what) {
    std::string s;
    for (int k = 0; k < 4; ++k) s += (k ? ", " : "") + v.cpp + "." + what + "[" + num(k) + "]";
    return s;
  };
  w.line("const wfgen::rt::WinogradConv<" + t + "> wf_conv({" + four(x, "shape") + ", " + o.cpp + ".shape[1], " + o.cpp + ".shape[2], " + o.cpp +
         ".shape[3], " + scalar(p, "pad_h") + ", " + scalar(p, "pad_w") + ",");
  w.line("    {" + four(x, "strides") + "}, {" + four(f, "strides") + "}, {" + four(o, "strides") + "}});");
  if (p.epilogue) emit_element_epilogue(w, p);
  w.line("wf_conv.run(" + x.cpp + ".data, " + f.cpp + ".data, " + o.cpp + ".data, " + gemm + (p.epilogue ? ", wf_epilogue" : "") + ");");
}

// OUT[..., i, j] = X[..., i, j] for j <= i, else value, matrix by matrix
// over the leading axes (any strides: the offsets are computed per matrix).
void emit_causal_mask(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  std::string t = elem(p.dtype);
  const std::string value = scalar(p, "value");
  w.comment(o.name + "[..., i, j] = " + x.name + "[..., i, j] where j <= i, else " + value);
  w.line("const std::int64_t wf_rows = " + o.cpp + ".shape[" + num(r - 2) + "], wf_cols = " + o.cpp + ".shape[" + num(r - 1) + "];");
  w.line("std::int64_t wf_mats = 1;");
  if (r > 2) w.line("for (int wf_d = 0; wf_d < " + num(r - 2) + "; ++wf_d) wf_mats *= " + o.cpp + ".shape[wf_d];");
  w.open("for (std::int64_t wf_m = 0; wf_m < wf_mats; ++wf_m)");
  w.line("std::int64_t wf_ox = 0, wf_oo = 0;");
  builtin::add_batch_offsets(w, r, "wf_m", x, o, "wf_ox", "wf_oo");
  w.open("for (std::int64_t wf_i = 0; wf_i < wf_rows; ++wf_i)");
  w.line("const " + t + "* wf_src = " + x.cpp + ".data + wf_ox + wf_i * " + x.cpp + ".strides[" + num(r - 2) + "];");
  w.line(t + "* wf_dst = " + o.cpp + ".data + wf_oo + wf_i * " + o.cpp + ".strides[" + num(r - 2) + "];");
  w.line("for (std::int64_t wf_j = 0; wf_j < wf_cols; ++wf_j)");
  w.line("  wf_dst[wf_j * " + o.cpp + ".strides[" + num(r - 1) + "]] = wf_j <= wf_i ? wf_src[wf_j * " + x.cpp + ".strides[" + num(r - 1) +
         "]] : static_cast<" + t + ">(" + value + ");");
  w.close();
  w.close();
}

// OUT[..., :i] = A, OUT[..., i:] = B, row by row over the leading axes
// (any strides: the rows of A, B and OUT are walked by one loop nest).
void emit_concat_last(CodeWriter& w, const KernelPlan& p) {
  const auto& a = p.tensors[0];
  const auto& b = p.tensors[1];
  const auto& o = p.tensors[2];
  const int r = p.rank;
  std::string t = elem(p.dtype);
  const std::string last = num(r - 1);
  w.comment(o.name + "[..., :i] = " + a.name + ", " + o.name + "[..., i:] = " + b.name + " (joined along the last axis)");
  w.line("const std::int64_t wf_i = " + a.cpp + ".shape[" + last + "], wf_j = " + b.cpp + ".shape[" + last + "];");
  w.line("const std::int64_t wf_sa = " + a.cpp + ".strides[" + last + "], wf_sb = " + b.cpp + ".strides[" + last + "], wf_so = " +
         o.cpp + ".strides[" + last + "];");
  open_row_nest(w, r, o, {&a, &b, &o}, "wf_i + wf_j", 65536);
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("const " + t + "* wf_a = " + a.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  w.line("const " + t + "* wf_b = " + b.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line(t + "* wf_o = " + o.cpp + ".data + wf_off[2] + wf_r * wf_step[2];");
  w.line("for (std::int64_t wf_c = 0; wf_c < wf_i; ++wf_c) wf_o[wf_c * wf_so] = wf_a[wf_c * wf_sa];");
  w.line("for (std::int64_t wf_c = 0; wf_c < wf_j; ++wf_c) wf_o[(wf_i + wf_c) * wf_so] = wf_b[wf_c * wf_sb];");
  w.close();
  w.close(");");
}

// The rows of X and OUT along their last axis, of length wf_c (strides
// wf_sx, wf_so), walked by one loop nest over the leading axes, about 4096
// elements a task: the nest's run is left open for the row loop.
void open_last_axis_rows(CodeWriter& w, const TensorParam& x, const TensorParam& o, int r) {
  w.line("const std::int64_t wf_c = " + x.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const std::int64_t wf_sx = " + x.cpp + ".strides[" + num(r - 1) + "], wf_so = " + o.cpp + ".strides[" + num(r - 1) + "];");
  open_row_nest(w, r, x, {&x, &o}, "wf_c", 4096);
}

// OUT[..., j] = the running sum of each row of X along its last axis, from
// the end when reverse, each element before its own when exclusive. The sum
// runs in the row's order in the dtype (numpy's cumsum), integers in
// uint64_t so that an overflow wraps around instead of being undefined. An
// element is read before its output is written: OUT may be X's buffer.
void emit_cumsum(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  const std::string t = elem(p.dtype);
  const bool integer = p.dtype != rt::DType::f32 && p.dtype != rt::DType::f64;
  const std::string acc = integer ? "std::uint64_t" : t;
  const std::string exclusive = scalar(p, "exclusive"), reverse = scalar(p, "reverse");
  w.comment(o.name + "[..., j] = the sum of " + x.name + "[..., k] over k <= j (k < j when " + exclusive + "; from the end when " +
            reverse + ")");
  open_last_axis_rows(w, x, o, r);
  // Walked from its first element to its last, or back: the start and the step of each row.
  w.line("const std::int64_t wf_first = " + reverse + " ? wf_c - 1 : 0, wf_dir = " + reverse + " ? -1 : 1;");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("const " + t + "* wf_x = " + x.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  w.line(t + "* wf_o = " + o.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line(acc + " wf_acc = 0;");
  w.open("for (std::int64_t wf_k = 0, wf_j = wf_first; wf_k < wf_c; ++wf_k, wf_j += wf_dir)");
  w.line("const " + acc + " wf_v = static_cast<" + acc + ">(wf_x[wf_j * wf_sx]);");
  w.line("if (!" + exclusive + ") wf_acc += wf_v;");
  w.line("wf_o[wf_j * wf_so] = static_cast<" + t + ">(wf_acc);");
  w.line("if (" + exclusive + ") wf_acc += wf_v;");
  w.close();
  w.close();
  w.close(");");
}

// OUT[..., j] = 1 at the first largest (largest = true) or smallest element
// of each row of X, else 0: where max's and min's backward send a row's
// gradient (one element per row, as argmax picks it, never every tie).
void emit_extreme_mask(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  std::string ty = elem(p.dtype);
  const std::string largest = scalar(p, "largest");
  w.comment(o.name + "[..., j] = 1 where j is the first largest (" + largest + ") or smallest element of the row of " + x.name +
            ", else 0");
  open_last_axis_rows(w, x, o, r);
  w.line("std::int64_t wf_r = 0;");
  // Rows side by side in X (a pool's windows after im2col): 16 rows
  // at a time, one per lane, the comparisons as selects (a branch per
  // element mispredicted on every other element of random windows).
  w.open("if (wf_step[0] == 1 && wf_sx != 1 && wf_c > 0)");
  w.open("for (; wf_r + 16 <= wf_rows; wf_r += 16)");
  w.line("const " + ty + "* wf_x = " + x.cpp + ".data + wf_off[0] + wf_r;");
  w.line(ty + "* wf_o = " + o.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line(ty + " wf_bv[16];");
  w.line("std::int64_t wf_bi[16];");
  w.line("for (int wf_l = 0; wf_l < 16; ++wf_l) wf_bv[wf_l] = wf_x[wf_l], wf_bi[wf_l] = 0;");
  w.open("for (std::int64_t wf_i = 1; wf_i < wf_c; ++wf_i)");
  w.open("for (int wf_l = 0; wf_l < 16; ++wf_l)");
  w.line("const " + ty + " wf_v = wf_x[wf_l + wf_i * wf_sx];");
  w.line("const bool wf_take = " + largest + " ? wf_v > wf_bv[wf_l] : wf_v < wf_bv[wf_l];");
  w.line("wf_bv[wf_l] = wf_take ? wf_v : wf_bv[wf_l];");
  w.line("wf_bi[wf_l] = wf_take ? wf_i : wf_bi[wf_l];");
  w.close();
  w.close();
  w.open("for (int wf_l = 0; wf_l < 16; ++wf_l)");
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_c; ++wf_i) wf_o[wf_l * wf_step[1] + wf_i * wf_so] = " + ty + "(wf_bi[wf_l] == wf_i ? 1 : 0);");
  w.close();
  w.close();
  w.close();
  w.open("for (; wf_r < wf_rows; ++wf_r)");
  w.line("const " + ty + "* wf_x = " + x.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  w.line(ty + "* wf_o = " + o.cpp + ".data + wf_off[1] + wf_r * wf_step[1];");
  w.line("std::int64_t wf_best = 0;");
  w.open("for (std::int64_t wf_i = 1; wf_i < wf_c; ++wf_i)");
  w.line("const " + ty + " wf_v = wf_x[wf_i * wf_sx], wf_b = wf_x[wf_best * wf_sx];");
  w.line("if (" + largest + " ? wf_v > wf_b : wf_v < wf_b) wf_best = wf_i;");
  w.close();
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_c; ++wf_i) wf_o[wf_i * wf_so] = " + ty + "(wf_i == wf_best ? 1 : 0);");
  w.close();
  w.close(");");
}

// max_pool and its two adjoints, one walk over the windows shared by all
// three. Each (n, c) plane is independent (split across threads; a plane's
// windows are visited in a fixed order, so max_pool_grad's sums do not
// depend on the number of threads). Windows that tile X (stride = window,
// no padding) on planes with contiguous rows go to rt::MaxPoolTiles
// (pooling.hpp), vectorised over a row's windows. Otherwise a window's best
// so far stays in a register; the windows wholly inside X run without
// bounds checks (2x2/2, 3x3/3 and 3x3/2 written out with constants, so the
// loop over windows vectorises), the few over the padding check each
// column. The winner is
// the first NaN, else the first largest (i, then j), the element
// max_pool_grad routes the window's gradient to. (docs/performance-history.md,
// "What changed", says what each of these choices was worth.)
enum class PoolMode { Value, Grad, Pick };

// max_pool, max_pool_grad and max_pool_pick: per plane (n c), per output
// row, blocks of 64 windows, each window's best (or winner) over its rows
// and columns.
class MaxPool {
 public:
  MaxPool(CodeWriter& w, const KernelPlan& p, PoolMode mode)
      : w_(w), p_(p), mode_(mode), value_(mode == PoolMode::Value), x_(p.tensors[value_ ? 0 : 1]), o_(p.tensors[value_ ? 1 : 2]),
        // The tensor of the windows' shape [N C h_out w_out], and the one the
        // winners' offsets index (grad: the output image; pick: D).
        win_(mode == PoolMode::Grad ? p.tensors[0] : o_), target_(mode == PoolMode::Grad ? o_ : p.tensors[0]), t_(elem(p.dtype)),
        is_float_(rt::dtype_is_float(p.dtype)),
        // max_pool_grad and max_pool_pick compare order keys (kernel_support.hpp):
        // integer selects, vectorised, never branches.
        key_(p.dtype == rt::DType::f64 ? "std::int64_t" : "std::int32_t"), keyed_(!value_ && is_float_),
        lowest_(is_float_ ? "-std::numeric_limits<" + t_ + ">::infinity()" : "std::numeric_limits<" + t_ + ">::lowest()") {}

  void emit() {
    const std::string window = "[n c (y*stride_h - pad_h + i) (x*stride_w - pad_w + j)] over i < k_h, j < k_w inside " + x_.name;
    if (value_) w_.comment(o_.name + "[n c y x] = max of " + x_.name + window + " (NaN if one is NaN)");
    else if (mode_ == PoolMode::Grad)
      w_.comment(o_.name + "[n c h w] = sum of " + win_.name + "[n c y x] over the windows whose winner in " + x_.name + window + " is (h w)");
    else w_.comment(o_.name + "[n c y x] = " + target_.name + " at the winner in " + x_.name + window);
    w_.open("wfgen::rt::parallel_for(0, " + x_.cpp + ".shape[0] * " + x_.cpp + ".shape[1], " +
            rows_grain(32768, x_.cpp + ".shape[2] * " + x_.cpp + ".shape[3]") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
    sizes();
    tiles();
    w_.open("for (std::int64_t wf_bc = wf_lo; wf_bc < wf_hi; ++wf_bc)");
    planes();
    w_.open("for (std::int64_t wf_y = 0; wf_y < wf_ho; ++wf_y)");
    w_.line("const std::int64_t wf_iy0 = wf_y * wf_sh - wf_ph;");
    w_.line("const std::int64_t wf_i_lo = std::max<std::int64_t>(0, -wf_iy0), wf_i_hi = std::min<std::int64_t>(wf_kh, wf_h - wf_iy0);");
    if (!value_) {
      // (Offsets can be negative: a view with a reversed axis.)
      w_.line("constexpr std::int64_t wf_none = std::numeric_limits<std::int64_t>::min();");
    }
    block_of_windows();
    w_.close();
    w_.close();
    w_.close(");");
  }

 private:
  // The sizes as locals of the body, not captured: the compiler would reload
  // a captured one after every store into the int64 offsets below.
  void sizes() {
    w_.line("const std::int64_t wf_h = " + x_.cpp + ".shape[2], wf_w = " + x_.cpp + ".shape[3], wf_channels = " + x_.cpp + ".shape[1];");
    w_.line("const std::int64_t wf_ho = " + win_.cpp + ".shape[2], wf_wo = " + win_.cpp + ".shape[3];");
    w_.line("const std::int64_t wf_kh = " + scalar(p_, "k_h") + ", wf_kw = " + scalar(p_, "k_w") + ", wf_sh = " + scalar(p_, "stride_h") +
            ", wf_sw = " + scalar(p_, "stride_w") + ", wf_ph = " + scalar(p_, "pad_h") + ", wf_pw = " + scalar(p_, "pad_w") + ";");
    w_.line("const std::int64_t wf_xs2 = " + x_.cpp + ".strides[2], wf_xs3 = " + x_.cpp + ".strides[3];");
    w_.line("const std::int64_t wf_ws2 = " + win_.cpp + ".strides[2], wf_ws3 = " + win_.cpp + ".strides[3];");
    if (!value_) w_.line("const std::int64_t wf_ts2 = " + target_.cpp + ".strides[2], wf_ts3 = " + target_.cpp + ".strides[3];");
    w_.comment("the windows x in [wf_inner_lo, wf_inner_hi) have every column x*stride_w - pad_w + j inside [0, w)");
    w_.line("const std::int64_t wf_inner_hi = wf_w - wf_kw + wf_pw >= 0 ? std::min<std::int64_t>((wf_w - wf_kw + wf_pw) / wf_sw + 1, wf_wo) : 0;");
    w_.line("const std::int64_t wf_inner_lo = std::min<std::int64_t>((wf_pw + wf_sw - 1) / wf_sw, wf_inner_hi);");
  }

  // Windows that tile X (stride = window, no padding) on planes whose rows
  // are contiguous: rt::MaxPoolTiles (pooling.hpp) does each plane.
  void tiles() {
    const std::string target_stride = value_ ? "0" : "wf_ts2";
    w_.line("const bool wf_tiled = wf_sh == wf_kh && wf_sw == wf_kw && wf_ph == 0 && wf_pw == 0 && wf_xs3 == 1 && wf_ws3 == 1" +
            std::string(value_ ? "" : " && wf_ts3 == 1") + ";");
    w_.line("const wfgen::rt::MaxPoolTiles<" + t_ + "> wf_tiles({wf_h, wf_w, wf_ho, wf_wo, wf_kh, wf_kw, wf_xs2, wf_ws2, " + target_stride + "});");
  }

  // The plane (n c) of each tensor; max_pool_grad zeroes its output image's
  // (the tiled pools write every element of it).
  void planes() {
    w_.line("const std::int64_t wf_b = wf_bc / wf_channels, wf_c = wf_bc % wf_channels;");
    auto plane = [](const TensorParam& tp) { return tp.cpp + ".data + wf_b * " + tp.cpp + ".strides[0] + wf_c * " + tp.cpp + ".strides[1]"; };
    w_.line("const " + t_ + "* wf_src = " + plane(x_) + ";");
    if (mode_ == PoolMode::Grad) {
      w_.line(t_ + "* wf_img = " + plane(o_) + ";");
      w_.line("const " + t_ + "* wf_win = " + plane(win_) + ";");
      tiled_plane("wf_tiles.grad(wf_win, wf_src, wf_img);");
      w_.open("for (std::int64_t wf_iy = 0; wf_iy < wf_h; ++wf_iy)");
      w_.line("if (wf_ts3 == 1) std::fill(wf_img + wf_iy * wf_ts2, wf_img + wf_iy * wf_ts2 + wf_w, " + t_ + "(0));");
      w_.line("else for (std::int64_t wf_ix = 0; wf_ix < wf_w; ++wf_ix) wf_img[wf_iy * wf_ts2 + wf_ix * wf_ts3] = " + t_ + "(0);");
      w_.close();
    } else {
      w_.line(t_ + "* wf_dst = " + plane(o_) + ";");
      if (mode_ == PoolMode::Pick) w_.line("const " + t_ + "* wf_from = " + plane(target_) + ";");
      tiled_plane(value_ ? "wf_tiles.value(wf_src, wf_dst);" : "wf_tiles.pick(wf_from, wf_src, wf_dst);");
    }
  }

  void tiled_plane(const std::string& call) {
    w_.open("if (wf_tiled)");
    w_.line(call);
    w_.line("continue;");
    w_.close();
  }

  // One element of window x: `row` (a pointer to row i of the window) at
  // `offset`; `at` its offset in the target; `n` tells the names of one
  // element from the next when a window is written out.
  void element(const std::string& row, const std::string& offset, const std::string& at, const std::string& n = "") {
    const std::string v = "wf_v" + n, k = "wf_k" + n, take = "wf_take" + n;
    w_.line("const " + t_ + " " + v + " = " + row + "[" + offset + "];");
    // Every step a compare, a max or a select: a branch here would be
    // mispredicted on every other element of random windows.
    if (value_) {
      w_.line("wf_best = " + v + " > wf_best ? " + v + " : wf_best;" + (n.empty() || n == "0" ? "  // NaNs left out: v > best is false for them" : ""));
      if (is_float_) w_.line("wf_nan = wf_nan | (" + v + " != " + v + ");");
      return;
    }
    if (keyed_) {
      w_.line("const " + key_ + " " + k + " = wfgen::rt::order_key(" + v + ");" + (n.empty() || n == "0" ? "  // NaNs: the largest key" : ""));
      w_.line("const bool " + take + " = " + k + " > wf_best;");
      w_.line("wf_best = " + take + " ? " + k + " : wf_best;");
    } else {
      w_.line("const bool " + take + " = (wf_at == wf_none) | (" + v + " > wf_best);");
      w_.line("wf_best = " + take + " ? " + v + " : wf_best;");
    }
    w_.line("wf_at = " + take + " ? " + at + " : wf_at;");
  }

  // Windows x of `lanes`: each one's best over its rows and columns (`k`
  // > 0: a k x k window wholly inside X, written out element by element so
  // that the loop over windows is innermost and vectorises; 0: loops over
  // the window, `checked` for the columns outside X), then the output
  // (max_pool, into wf_maxes) or the winner's offset (the adjoints, into
  // wf_ats), used after the loop.
  void window_loop(const std::string& lanes, int k, int stride, bool checked) {
    w_.open("for (std::int64_t wf_x = " + lanes + ")");
    w_.line("const std::int64_t wf_ix0 = wf_x * " + (k > 0 ? num(stride) : std::string("wf_sw")) + " - wf_pw;");
    if (keyed_) w_.line(key_ + " wf_best = std::numeric_limits<" + key_ + ">::min();  // below every key");
    else w_.line(t_ + " wf_best = " + lowest_ + ";");
    if (value_ && is_float_) w_.line("bool wf_nan = false;");
    if (!value_) w_.line("std::int64_t wf_at = wf_none;");
    if (k > 0) {
      for (int i = 0; i < k; ++i) {
        w_.line("const " + t_ + "* wf_row" + num(i) + " = wf_src + (wf_iy0 + " + num(i) + ") * wf_xs2;");
        for (int j = 0; j < k; ++j)
          element("wf_row" + num(i), "wf_ix0 + " + num(j),  // a row of stride 1
                  "(wf_iy0 + " + num(i) + ") * wf_ts2 + (wf_ix0 + " + num(j) + ") * wf_ts3", num(i * k + j));
      }
    } else {
      w_.open("for (std::int64_t wf_i = wf_i_lo; wf_i < wf_i_hi; ++wf_i)");
      w_.line("const " + t_ + "* wf_row = wf_src + (wf_iy0 + wf_i) * wf_xs2;");
      w_.open("for (std::int64_t wf_j = 0; wf_j < wf_kw; ++wf_j)");
      if (checked) w_.line("if (wf_ix0 + wf_j < 0 || wf_ix0 + wf_j >= wf_w) continue;");
      element("wf_row", "(wf_ix0 + wf_j) * wf_xs3", "(wf_iy0 + wf_i) * wf_ts2 + (wf_ix0 + wf_j) * wf_ts3");
      w_.close();
      w_.close();
    }
    if (value_) {
      w_.line("wf_maxes[wf_x - wf_x0] = " + std::string(is_float_ ? "wf_nan ? std::numeric_limits<" + t_ + ">::quiet_NaN() : wf_best;" : "wf_best;"));
    } else {
      w_.line("wf_ats[wf_x - wf_x0] = wf_at;");
    }
    w_.close();
  }

  // Blocks of 64 windows of an output row: the windows over the left
  // padding, those inside X, those over the right padding, then the block's
  // results stored.
  void block_of_windows() {
    w_.open("for (std::int64_t wf_x0 = 0; wf_x0 < wf_wo; wf_x0 += 64)");
    w_.line("const std::int64_t wf_x1 = std::min<std::int64_t>(wf_x0 + 64, wf_wo);");
    // The loops over windows store into these arrays of the stack, never into
    // a tensor the compiler must assume they read (which stops it vectorising).
    if (value_) w_.line(t_ + " wf_maxes[64];");
    else w_.line("std::int64_t wf_ats[64];  // the winners' offsets in " + target_.name + "'s plane, wf_none for none");
    const std::string inner = "std::max(wf_x0, wf_inner_lo); wf_x < std::min(wf_x1, wf_inner_hi); ++wf_x";
    w_.comment("windows over the left padding, those inside X, windows over the right padding");
    window_loop("wf_x0; wf_x < std::min(wf_x1, wf_inner_lo); ++wf_x", 0, 0, true);
    // The usual pools (2x2 stride 2, 3x3 stride 3 and 2) on rows of stride 1,
    // windows wholly inside X: the kernel and stride as constants, so that the
    // loop over windows vectorises.
    bool first = true;
    for (auto [k, stride] : {std::pair{2, 2}, std::pair{3, 3}, std::pair{3, 2}}) {
      const std::string ks = num(k), condition = "wf_xs3 == 1 && wf_kh == " + ks + " && wf_kw == " + ks + " && wf_sw == " + num(stride) +
                                                    " && wf_i_lo == 0 && wf_i_hi == " + ks;
      if (first) w_.open("if (" + condition + ")");
      else w_.otherwise_if(condition);
      first = false;
      window_loop(inner, k, stride, false);
    }
    w_.otherwise();
    window_loop(inner, 0, 0, false);
    w_.close();
    window_loop("std::max(wf_x0, std::max(wf_inner_lo, wf_inner_hi)); wf_x < wf_x1; ++wf_x", 0, 0, true);
    store_block();
    w_.close();
  }

  void store_block() {
    if (value_) {
      w_.line("for (std::int64_t wf_x = wf_x0; wf_x < wf_x1; ++wf_x) wf_dst[wf_y * wf_ws2 + wf_x * wf_ws3] = wf_maxes[wf_x - wf_x0];");
    } else if (mode_ == PoolMode::Grad) {
      w_.open("for (std::int64_t wf_x = wf_x0; wf_x < wf_x1; ++wf_x)");
      w_.line("if (wf_ats[wf_x - wf_x0] != wf_none) wf_img[wf_ats[wf_x - wf_x0]] += wf_win[wf_y * wf_ws2 + wf_x * wf_ws3];");
      w_.close();
    } else if (mode_ == PoolMode::Pick) {
      w_.open("for (std::int64_t wf_x = wf_x0; wf_x < wf_x1; ++wf_x)");
      w_.line("wf_dst[wf_y * wf_ws2 + wf_x * wf_ws3] = wf_ats[wf_x - wf_x0] != wf_none ? wf_from[wf_ats[wf_x - wf_x0]] : " + t_ + "(0);");
      w_.close();
    }
  }

  CodeWriter& w_;
  const KernelPlan& p_;
  const PoolMode mode_;
  const bool value_;  // max_pool (else an adjoint: the winners' offsets)
  const TensorParam& x_;
  const TensorParam& o_;
  const TensorParam& win_;
  const TensorParam& target_;
  const std::string t_;
  const bool is_float_;
  const std::string key_;
  const bool keyed_;
  const std::string lowest_;
};

void emit_max_pool(CodeWriter& w, const KernelPlan& p, PoolMode mode) { MaxPool(w, p, mode).emit(); }

// The one writer of Adam's and AdamW's update lines (torch.optim's
// formulas, stdlib/nodes.yaml), for the blocked contiguous runs and the
// strided loop alike. at(k) is the element of tensor k (0 the parameter,
// 1 its gradient, 2 and 3 the moments). First the weight decay, the
// gradient wf_g and the two moments:
template <class Arg, class At>
void emit_adam_moments(CodeWriter& w, const std::string& ty, bool decoupled, const Arg& arg, const At& at) {
  if (decoupled) w.line(at(0) + " *= 1 - " + arg("lr") + " * " + arg("weight_decay") + ";");
  w.line("const " + ty + " wf_g = " + at(1) + (decoupled ? "" : " + " + arg("weight_decay") + " * " + at(0)) + ";");
  w.line(at(2) + " = " + arg("beta1") + " * " + at(2) + " + (1 - " + arg("beta1") + ") * wf_g;");
  w.line(at(3) + " = " + arg("beta2") + " * " + at(3) + " + (1 - " + arg("beta2") + ") * wf_g * wf_g;");
}
// then the parameter, `root` being the second moment's square root.
template <class Arg, class At>
void emit_adam_parameter(CodeWriter& w, const Arg& arg, const At& at, const std::string& root) {
  w.line(at(0) + " -= wf_step_size * " + at(2) + " / (" + root + " / wf_root_c2 + " + arg("eps") + ");");
}

// Adam's and AdamW's contiguous runs, in blocks of 64 elements: the moments
// first, the square roots of the second ones a vector at a time
// (rt::math::sqrt_lanes), then the parameters. Why: with errno on (GCC's
// default) a loop of std::sqrt does not vectorise, and the one loop ran
// scalar (vsqrtss, vdivss): the tiny LM's step() took 1.0 ms for 132k
// parameters. The same operations in the same order, so the same results.
template <class Arg>
void emit_adam_blocks(CodeWriter& w, const KernelPlan& p, bool decoupled, const Arg& arg) {
  const std::string ty = elem(p.dtype);
  auto at = [&](std::size_t k) { return p.tensors[k].local() + "[wf_b + wf_l]"; };
  w.open("for (std::int64_t wf_b = 0; wf_b < wf_n; wf_b += 64)");
  w.line("const std::int64_t wf_len = std::min<std::int64_t>(64, wf_n - wf_b);");
  w.line("alignas(64) " + ty + " wf_root[64];");
  w.open("for (std::int64_t wf_l = 0; wf_l < wf_len; ++wf_l)");
  emit_adam_moments(w, ty, decoupled, arg, at);
  w.line("wf_root[wf_l] = " + at(3) + ";");
  w.close();
  w.line("if (wf_len == 64) wfgen::rt::math::sqrt_lanes<64>(wf_root);");
  w.line("else for (std::int64_t wf_l = 0; wf_l < wf_len; ++wf_l) wf_root[wf_l] = std::sqrt(wf_root[wf_l]);");
  w.open("for (std::int64_t wf_l = 0; wf_l < wf_len; ++wf_l)");
  emit_adam_parameter(w, arg, at, "wf_root[wf_l]");
  w.close();
  w.close();
}

// One optimizer step over a parameter, as torch.optim's SGD, Adam and AdamW
// (single-tensor, not foreach; see stdlib/nodes.yaml for the formulas).
void emit_optimizer(CodeWriter& w, const KernelPlan& p) {
  const std::string& kind = p.impl->builtin;
  const bool sgd = kind == "sgd";
  const int r = p.rank;
  const std::size_t n = p.tensors.size();
  std::string ty = elem(p.dtype);
  auto arg = [&](const char* name) {
    for (const auto& s : p.scalars)
      if (s.name == name) return s.cpp;
    return std::string(name);
  };
  const auto& P = p.tensors[0];
  w.comment(p.node->where.str() + ": one " + kind + " step");
  if (!sgd) {
    w.comment("bias corrections in double: beta^step underflows gracefully");
    w.line("const double wf_c1 = 1.0 - std::pow(static_cast<double>(" + arg("beta1") + "), static_cast<double>(" + arg("step") + "));");
    w.line("const double wf_c2 = 1.0 - std::pow(static_cast<double>(" + arg("beta2") + "), static_cast<double>(" + arg("step") + "));");
    w.line("const " + ty + " wf_step_size = static_cast<" + ty + ">(static_cast<double>(" + arg("lr") + ") / wf_c1);");
    w.line("const " + ty + " wf_root_c2 = static_cast<" + ty + ">(std::sqrt(wf_c2));");
  }
  std::string strides = "{";
  for (std::size_t k = 0; k < n; ++k) strides += (k ? ", " : "") + p.tensors[k].cpp + ".strides";
  strides += "}";
  w.line("const wfgen::rt::LoopNest<" + num(r) + ", " + num(static_cast<std::int64_t>(n)) + "> wf_nest(" + P.cpp + ".shape, " + strides +
         ", 0);");
  // Contiguous runs get loops without strides or branches (so they
  // vectorize); the hyper-parameters are the same for every element.
  w.line("const bool wf_unit = wf_nest.inner_contiguous();");
  w.open("wf_nest.run(" + num(kOptimizerGrain) + ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n)");
  for (std::size_t k = 0; k < n; ++k) {
    const auto& t = p.tensors[k];
    w.line(std::string(t.written ? "" : "const ") + ty + "* " + t.local() + " = " + t.cpp + ".data + wf_off[" + num(static_cast<std::int64_t>(k)) + "];");
  }
  auto element = [&](bool unit) {
    return [&p, unit](std::size_t k) {
      return p.tensors[k].local() + "[" + (unit ? std::string("wf_i") : "wf_i * wf_step[" + num(static_cast<std::int64_t>(k)) + "]") + "]";
    };
  };
  auto sgd_loop = [&](bool unit) {
    const auto at = element(unit);
    w.open("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i)");
    w.line(ty + "& wf_p = " + at(0) + ";");
    w.line(ty + "& wf_m = " + at(2) + ";");
    w.line(ty + " wf_g = " + at(1) + " + " + arg("weight_decay") + " * wf_p;");
    w.open("if (" + arg("momentum") + " != 0)");
    w.line("wf_m = " + arg("step") + " <= 1 ? wf_g : " + arg("momentum") + " * wf_m + (1 - " + arg("dampening") + ") * wf_g;");
    w.line("wf_g = " + arg("nesterov") + " ? wf_g + " + arg("momentum") + " * wf_m : wf_m;");
    w.close();
    w.line("wf_p -= " + arg("lr") + " * wf_g;");
    w.close();
  };
  if (sgd) {
    // Plain SGD (no momentum) needs neither the buffer nor a branch.
    w.open("if (wf_unit && " + arg("momentum") + " == 0)");
    w.line(ty + "* wf_p = " + P.local() + ";");
    w.line("const " + ty + "* wf_g = " + p.tensors[1].local() + ";");
    w.line("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) wf_p[wf_i] -= " + arg("lr") + " * (wf_g[wf_i] + " + arg("weight_decay") +
           " * wf_p[wf_i]);");
    w.line("return;");
    w.close();
  }
  w.open("if (wf_unit)");
  if (sgd) sgd_loop(true);
  else emit_adam_blocks(w, p, kind == "adamw", arg);
  w.otherwise();
  if (sgd) {
    sgd_loop(false);
  } else {
    const auto strided = element(false);
    w.open("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i)");
    w.line(ty + "& wf_p = " + strided(0) + ";");
    w.line(ty + "& wf_m = " + strided(2) + ";");
    w.line(ty + "& wf_v = " + strided(3) + ";");
    const char* const named[] = {"wf_p", "", "wf_m", "wf_v"};
    auto at = [&](std::size_t k) { return k == 1 ? strided(1) : std::string(named[k]); };
    emit_adam_moments(w, ty, kind == "adamw", arg, at);
    emit_adam_parameter(w, arg, at, "std::sqrt(wf_v)");
    w.close();
  }
  w.close();
  w.close(");");
}

}  // namespace

void emit_builtin(CodeWriter& w, const KernelPlan& p) {
  const std::string& b = p.impl->builtin;
  if (b == "cast") emit_cast(w, p, false);
  else if (b == "cast_bool") emit_cast(w, p, true);
  else if (b == "gather") emit_gather(w, p);
  else if (b == "scatter_add") emit_scatter_add(w, p);
  else if (b == "one_hot") emit_one_hot(w, p);
  else if (b == "im2col") emit_im2col(w, p);
  else if (b == "col2im") emit_col2im(w, p);
  else if (b == "depthwise_conv2d") emit_depthwise_conv2d(w, p);
  else if (b == "winograd_conv2d") emit_winograd_conv2d(w, p);
  else if (b == "causal_mask") emit_causal_mask(w, p);
  else if (b == "scaled_softmax") emit_scaled_softmax(w, p);  // builtin_softmax.cpp
  else if (b == "attention") emit_attention(w, p);  // builtin_attention.cpp (made by fusion only)
  else if (b == "layer_norm") emit_layer_norm(w, p);  // builtin_layer_norm.cpp
  else if (b == "layer_norm_grad") emit_layer_norm_grad(w, p);
  else if (b == "layer_norm_param_grad") emit_layer_norm_param_grad(w, p);
  else if (b == "extreme_mask") emit_extreme_mask(w, p);
  else if (b == "max_pool") emit_max_pool(w, p, PoolMode::Value);
  else if (b == "max_pool_grad") emit_max_pool(w, p, PoolMode::Grad);
  else if (b == "max_pool_pick") emit_max_pool(w, p, PoolMode::Pick);
  else if (b == "concat_last") emit_concat_last(w, p);
  else if (b == "cumsum") emit_cumsum(w, p);
  else if (b == "softmax_cross_entropy") emit_softmax_cross_entropy(w, p);  // builtin_softmax.cpp
  else emit_optimizer(w, p);  // sgd, adam, adamw (kernel_plan accepts no other builtin)
}

}  // namespace wfgen::emit
