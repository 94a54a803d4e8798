#include "wfgen/emit/builtin_layer_norm.hpp"

#include <string>
#include <vector>

#include "wfgen/emit/builtin_support.hpp"

namespace wfgen::emit {

using lower::KernelPlan;

namespace {

using builtin::elem;
using builtin::scalar;

// The rows of OUT [~ n] (and of the operands `rowed` walks alongside, X
// and DOUT, each of OUT's shape) through a loop nest over the leading axes
// in blocks of about 16384 elements a task of the pool: `row` writes the
// statement for the row wf_r of a run (operand k's row at wf_off[k] + wf_r
// * wf_step[k], OUT last).
template <class Row>
void over_rows(CodeWriter& w, const KernelPlan& p, const std::vector<const lower::TensorParam*>& rowed, Row row) {
  const lower::TensorParam& o = *rowed.back();
  w.line("const std::int64_t wf_n = " + o.cpp + ".shape[" + builtin::num(p.rank - 1) + "];");
  builtin::open_row_nest(w, p.rank, o, rowed, "wf_n", 16384);
  w.line("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("  " + row());
  w.close(");");
}

// Operand k's row (its pointer, then its stride along the row).
std::string row_of(const KernelPlan& p, const lower::TensorParam& t, int k) {
  const std::string ks = builtin::num(k);
  return t.cpp + ".data + wf_off[" + ks + "] + wf_r * wf_step[" + ks + "], " + t.cpp + ".strides[" + builtin::num(p.rank - 1) + "]";
}

std::string vec_of(const lower::TensorParam& t) { return t.cpp + ".data, " + t.cpp + ".strides[0]"; }

std::string eps_of(const KernelPlan& p) { return "static_cast<" + elem(p.dtype) + ">(" + scalar(p, "eps") + ")"; }

}  // namespace

// OUT[..., :] = (X[..., :] - mean) / sqrt(var + eps) * G + B: the mean, the
// biased variance, the normalisation, the scale and the shift of a row in
// one pass over it (rt::math::layer_norm::forward_row, wfgen/layer_norm.hpp),
// rows split across the threads.
void emit_layer_norm(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& g = p.tensors[1];
  const auto& b = p.tensors[2];
  const auto& o = p.tensors[3];
  w.comment(o.name + "[r, :] = (" + x.name + "[r, :] - mean) / sqrt(var + eps) * " + g.name + " + " + b.name + " (biased variance), a row at a time");
  over_rows(w, p, {&x, &o}, [&] {
    return "wfgen::rt::math::layer_norm::forward_row(" + row_of(p, o, 1) + ", " + row_of(p, x, 0) + ", " + vec_of(g) + ", " + vec_of(b) + ", wf_n, " +
           eps_of(p) + ");";
  });
}

// OUT[r, :] = rstd * (G DOUT - mean(G DOUT) - xhat mean(G DOUT xhat)), the
// gradient in X through the mean and the variance in closed form, one pass
// over a row of DOUT and X (rt::math::layer_norm::grad_row).
void emit_layer_norm_grad(CodeWriter& w, const KernelPlan& p) {
  const auto& dy = p.tensors[0];
  const auto& x = p.tensors[1];
  const auto& g = p.tensors[2];
  const auto& o = p.tensors[3];
  w.comment(o.name + "[r, :] = rstd * (" + g.name + " " + dy.name + " - mean(" + g.name + " " + dy.name + ") - xhat mean(" + g.name + " " +
            dy.name + " xhat)), xhat = (" + x.name + "[r, :] - mean) * rstd");
  over_rows(w, p, {&dy, &x, &o}, [&] {
    return "wfgen::rt::math::layer_norm::grad_row(" + row_of(p, o, 2) + ", " + row_of(p, dy, 0) + ", " + row_of(p, x, 1) + ", " + vec_of(g) +
           ", wf_n, " + eps_of(p) + ");";
  });
}

// OUT[c] = sum over the rows of DOUT[r, c] * xhat[r, c], or of DOUT[r, c]
// when beta: the gradients in G and B. The rows in blocks fixed by the
// shape (rt::math::layer_norm::param_grad_block_rows), a block's sums into
// its own partial sums, blocks split across the threads; then the partial
// sums added in the order of the blocks, columns split across the threads
// when there are many: the same bits at any thread count.
void emit_layer_norm_param_grad(CodeWriter& w, const KernelPlan& p) {
  const auto& dy = p.tensors[0];
  const auto& x = p.tensors[1];
  const auto& o = p.tensors[2];
  const std::string e = elem(p.dtype);
  w.comment(o.name + "[c] = sum over r of " + dy.name + "[r, c] * xhat[r, c] (beta: of " + dy.name + "[r, c]), xhat = (" + x.name +
            "[r, :] - mean) * rstd");
  w.line("const std::int64_t wf_rows = " + x.cpp + ".shape[0], wf_n = " + x.cpp + ".shape[1];");
  w.line("const std::int64_t wf_block = wfgen::rt::math::layer_norm::param_grad_block_rows(wf_rows, wf_n);");
  w.line("const std::int64_t wf_blocks = (wf_rows + wf_block - 1) / wf_block;");
  w.line("std::vector<" + e + "> wf_part(static_cast<std::size_t>(wf_blocks * wf_n));");
  w.open("wfgen::rt::parallel_for(0, wf_blocks, 1, [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  w.line("for (std::int64_t wf_b = wf_lo; wf_b < wf_hi; ++wf_b)");
  w.line("  wfgen::rt::math::layer_norm::param_grad_rows(wf_part.data() + wf_b * wf_n, " + dy.cpp + ".data, " + dy.cpp + ".strides[0], " +
         dy.cpp + ".strides[1], " + x.cpp + ".data, " + x.cpp + ".strides[0], " + x.cpp + ".strides[1], wf_b * wf_block, std::min(wf_rows, (wf_b + 1) * wf_block), wf_n, " +
         eps_of(p) + ", " + scalar(p, "beta") + ");");
  w.close(");");
  w.open("wfgen::rt::parallel_for(0, wf_n, " + builtin::rows_grain(16384, "wf_blocks") + ", [&](std::int64_t wf_lo, std::int64_t wf_hi)");
  w.line("wfgen::rt::math::layer_norm::fold_blocks(" + vec_of(o) + ", wf_part.data(), wf_blocks, wf_n, wf_lo, wf_hi);");
  w.close(");");
}

}  // namespace wfgen::emit
