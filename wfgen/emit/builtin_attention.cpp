#include "wfgen/emit/builtin_attention.hpp"

#include <string>

#include "wfgen/emit/builtin_support.hpp"

namespace wfgen::emit {

using lower::KernelPlan;
using builtin::elem;
using builtin::num;
using builtin::scalar;

// OUT[..., i, :] = softmax(scale * Q[..., i, :] KT[..., :, j] over j <= i
// when causal, else every j) V[..., j, :]: attention's product, softmax and
// product in one pass (rt::attention_rows, wfgen/attention.hpp), the scores
// of a block of rows in L1 and never stored, a causal row's columns j > i
// never computed. The (matrix, block of kBlockRows rows) pairs are split
// across the threads; each row's result is the same whoever computes it.
void emit_attention(CodeWriter& w, const KernelPlan& p) {
  const auto& q = p.tensors[0];
  const auto& kt = p.tensors[1];
  const auto& v = p.tensors[2];
  const auto& o = p.tensors[3];
  const int r = p.rank;
  const std::string t = elem(p.dtype), row = num(r - 2), col = num(r - 1);
  w.comment(o.name + "[..., i, :] = softmax(scale * " + q.name + "[..., i, :] " + kt.name + "[..., :, j]) " + v.name +
            "[..., j, :], over j <= i when causal, else every j (the scores of a block of rows in L1, never stored)");
  w.line("const wfgen::rt::AttentionShape wf_shape{" + o.cpp + ".shape[" + row + "], " + kt.cpp + ".shape[" + col + "], " + q.cpp +
         ".shape[" + col + "], " + o.cpp + ".shape[" + col + "], " + scalar(p, "causal") + "};");
  w.line("const " + t + " wf_scale = static_cast<" + t + ">(" + scalar(p, "scale") + ");");
  w.line("std::int64_t wf_mats = 1;");
  if (r > 2) w.line("for (int wf_d = 0; wf_d < " + num(r - 2) + "; ++wf_d) wf_mats *= " + o.cpp + ".shape[wf_d];");
  w.line("constexpr std::int64_t wf_block = wfgen::rt::AttentionTile<" + t + ">::kBlockRows;");
  w.line("const std::int64_t wf_blocks = (wf_shape.n + wf_block - 1) / wf_block;");
  // A task of about 65536 multiply-adds (a block's rows times the keys times d + dv).
  w.open("wfgen::rt::parallel_for(0, wf_mats * wf_blocks, " +
             builtin::rows_grain(65536, "wf_block * wf_shape.m * (wf_shape.d + wf_shape.dv)") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  w.open("for (std::int64_t wf_t = wf_lo; wf_t < wf_hi; ++wf_t)");
  w.line("const std::int64_t wf_m = wf_t / wf_blocks, wf_b = wf_t % wf_blocks;");
  w.line("std::int64_t wf_oq = 0, wf_ok = 0, wf_ov = 0, wf_oo = 0;  // the matrix's offsets in " + q.name + ", " + kt.name + ", " +
         v.name + ", " + o.name);
  if (r > 2) {
    w.line("std::int64_t wf_rest = wf_m;");
    w.open("for (int wf_d = " + num(r - 3) + "; wf_d >= 0; --wf_d)");
    w.line("const std::int64_t wf_k = wf_rest % " + o.cpp + ".shape[wf_d];");
    w.line("wf_rest /= " + o.cpp + ".shape[wf_d];");
    w.line("wf_oq += wf_k * " + q.cpp + ".strides[wf_d];");
    w.line("wf_ok += wf_k * " + kt.cpp + ".strides[wf_d];");
    w.line("wf_ov += wf_k * " + v.cpp + ".strides[wf_d];");
    w.line("wf_oo += wf_k * " + o.cpp + ".strides[wf_d];");
    w.close();
  }
  auto matrix = [&](const lower::TensorParam& x, const std::string& off) {
    return x.cpp + ".data + " + off + ", " + x.cpp + ".strides[" + row + "], " + x.cpp + ".strides[" + col + "]";
  };
  w.line("const wfgen::rt::AttentionMatrices<" + t + "> wf_a{" + matrix(q, "wf_oq") + ", " + matrix(kt, "wf_ok") + ",");
  w.line("                                              " + matrix(v, "wf_ov") + ", " + matrix(o, "wf_oo") + "};");
  w.line("wfgen::rt::attention_rows(wf_a, wf_shape, wf_scale, wf_b * wf_block, std::min(wf_shape.n, (wf_b + 1) * wf_block));");
  w.close();
  w.close(");");
}

}  // namespace wfgen::emit
