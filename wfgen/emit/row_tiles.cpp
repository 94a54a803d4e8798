// Rows shorter than two sets of lanes (the rows the row path reduces in a
// plain scalar loop, such as softmax over 10 classes or layernorm over 32
// features): a tile of as many rows as a 64-byte vector has lanes (16
// floats, 8 doubles) at a time, one row per lane. Each input's rows are
// copied into a column-major tile (column c of the tile's rows contiguous),
// every reduction and element-wise step runs over the columns as vector
// operations across the rows, and the output tile is copied back row by
// row. The tile reads every input element before it writes an output one,
// so an output over its own input (in place) is fine. Emitted inside the
// nest's chunk, before the row loop, which takes the rows left over
// (wf_r counts the rows done). See row_parts.hpp.
#include <algorithm>
#include <functional>

#include "wfgen/emit/row_kernels.hpp"
#include "wfgen/emit/row_parts.hpp"
#include "wfgen/emit/vector_lanes.hpp"

namespace wfgen::emit::rows {

namespace {

// Whether expression e reads the name `name`.
bool reads(const expr::Expr& e, const std::string& name) {
  if (e.op == expr::Op::Name && e.binding.kind != expr::Binding::Kind::Constant && e.text == name) return true;
  for (const auto& a : e.args)
    if (reads(a, name)) return true;
  return false;
}

// The tile path of one fused kernel: its expressions read the tiles (and
// row values) of the lane wf_l, at the column `col_`.
class RowTiles : RowKernel {
 public:
  RowTiles(CodeWriter& w, const KernelPlan& p, const RowCache& cache)
      : RowKernel(w, p, cache),
        max_len_(2 * partial_sum_lanes(p.dtype)), T_(num(vector_lanes(p.dtype))), cap_(num(max_len_ * vector_lanes(p.dtype))),
        per_lane_("for (int wf_l = 0; wf_l < " + T_ + "; ++wf_l) "),
        ctx_(emit_context(p, [this](const std::string& name) { return name_of(name); })) {
    plan_tiles();
  }
  RowTiles(const RowTiles&) = delete;
  RowTiles& operator=(const RowTiles&) = delete;

  void emit() {
    w_.open("if (wf_unit && wf_len < " + num(max_len_) + ")");
    w_.comment("rows shorter than " + num(max_len_) + ": " + T_ + " rows at a time, one per lane (column c of a tile at [c * " + T_ + "])");
    declare_tiles();
    w_.open("for (; wf_r + " + T_ + " <= wf_rows; wf_r += " + T_ + ")");
    load_tiles();
    for (std::size_t k = 0; k < f_.rows.size(); ++k) row_value(k);
    output();
    w_.close();
    w_.close();
  }

 private:
  // The output goes through a tile only when it reads the cached element
  // (softmax: exp is computed once, in the tile); otherwise the last loop
  // runs along each row, reading the inputs where they are (a broadcast
  // gamma needs no tile) and writing the output row-major, with the row's
  // values from its lane. Inputs get a tile when a reduction reads them (or
  // a tiled output does).
  void plan_tiles() {
    out_expr_ = cache_.row >= 0 ? &cache_.out : &f_.out;
    tile_out_ = !f_.out_per_row && cache_.row >= 0;
    tiled_.assign(out_, false);
    for (std::size_t k = 0; k < out_; ++k) {
      if (f_.row_input[k]) continue;
      for (const auto& rv : f_.rows)
        if (rv.reduce && reads(rv.element, p_.tensors[k].name)) tiled_[k] = true;
      if (tile_out_ && reads(*out_expr_, p_.tensors[k].name)) tiled_[k] = true;
    }
  }

  std::string name_of(const std::string& name) const {
    if (name == "acc") return acc_;
    if (name == "n") return "wf_len";
    if (name == "cached") return "wf_tile_cache[" + col_ + " * " + T_ + " + wf_l]";
    if (name.rfind("row", 0) == 0 || name.rfind("inv", 0) == 0) return "wf_" + name + "[wf_l]";
    for (std::size_t k = 0; k < out_; ++k) {
      if (p_.tensors[k].name != name) continue;
      if (f_.row_input[k]) return "wf_tile_" + p_.tensors[k].cpp + "[wf_l]";
      if (along_rows_ || !tiled_[k]) return "wf_" + p_.tensors[k].cpp + "[wf_l * wf_step[" + num(static_cast<std::int64_t>(k)) + "] + " + col_ + "]";
      return "wf_tile_" + p_.tensors[k].cpp + "[" + col_ + " * " + T_ + " + wf_l]";
    }
    return name;
  }

  void declare_tiles() {
    for (std::size_t k = 0; k < out_; ++k)
      if (tiled_[k]) w_.line("alignas(64) " + t_ + " wf_tile_" + p_.tensors[k].cpp + "[" + cap_ + "];");
    if (tile_out_) w_.line("alignas(64) " + t_ + " wf_tile_" + p_.tensors[out_].cpp + "[" + cap_ + "];");
    if (cache_.row >= 0) w_.line("alignas(64) " + t_ + " wf_tile_cache[" + cap_ + "];");
  }

  void load_tiles() {
    for (std::size_t k = 0; k <= out_; ++k) {
      const auto& tp = p_.tensors[k];
      const std::string ks = num(static_cast<std::int64_t>(k));
      // (maybe_unused: an input that only a row value reads is read through its tile.)
      w_.line(std::string("[[maybe_unused]] ") + (tp.written ? "" : "const ") + t_ + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" + ks +
              "] + wf_r * wf_step[" + ks + "];");
    }
    for (std::size_t k = 0; k < out_; ++k) {
      const auto& tp = p_.tensors[k];
      const std::string ks = num(static_cast<std::int64_t>(k));
      if (f_.row_input[k]) {
        w_.line(t_ + " wf_tile_" + tp.cpp + "[" + T_ + "];");
        w_.line("for (int wf_l = 0; wf_l < " + T_ + "; ++wf_l) wf_tile_" + tp.cpp + "[wf_l] = wf_" + tp.cpp + "[wf_l * wf_step[" + ks + "]];");
        continue;
      }
      if (!tiled_[k]) continue;
      // Blocks of the rows transposed in registers (a scalar copy, column by
      // column, took 0.4 of layernorm 64 x 32).
      w_.line("wfgen::rt::rows_to_lanes<" + T_ + ">(wf_" + tp.cpp + ", wf_step[" + ks + "], wf_len, wf_tile_" + tp.cpp + ");");
    }
  }

  // `e` with its divisions by row values hoisted: the reciprocals it adds
  // are computed per lane before the loop.
  expr::Expr loop_expr(const expr::Expr& e) {
    const std::size_t before = divisors_.size();
    expr::Expr hoisted = hoist_divisors(e, [this](const expr::Expr& x) { return row_invariant(p_, x); }, divisors_, p_.dtype);
    for (std::size_t k = before; k < divisors_.size(); ++k) {
      const std::string inv = "wf_inv" + num(static_cast<std::int64_t>(k));
      w_.line(t_ + " " + inv + "[" + T_ + "];");
      w_.line(per_lane_ + inv + "[wf_l] = " + t_ + "(1) / " + expr::to_cpp(divisors_[k], ctx_) + ";");
    }
    return hoisted;
  }

  void columns(const std::string& statement) {
    w_.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    w_.line(per_lane_ + statement);
    w_.close();
  }

  void row_value(std::size_t k) {
    const auto& rv = f_.rows[k];
    const std::string var = "wf_row" + num(static_cast<std::int64_t>(k));
    if (!rv.reduce) {
      w_.line(t_ + " " + var + "[" + T_ + "];");
      // A square root (layernorm's standard deviation): all lanes in one vector instruction
      // (rt::math::sqrt_lanes; a loop of std::sqrt does not vectorise while it may set errno).
      if (rv.element.op == expr::Op::Call && rv.element.fn == expr::Fn::Sqrt) {
        w_.line(per_lane_ + var + "[wf_l] = " + expr::to_cpp(rv.element.args[0], ctx_) + ";");
        w_.line("wfgen::rt::math::sqrt_lanes<" + T_ + ">(" + var + ");");
        return;
      }
      w_.line(per_lane_ + var + "[wf_l] = " + expr::to_cpp(rv.element, ctx_) + ";");
      return;
    }
    expr::Expr element = loop_expr(rv.element);
    if (static_cast<int>(k) == cache_.row) {
      // As in the row path: exp(a) stores a, then exp_in_place over the tile.
      const expr::Expr* exponent = exp_argument(element);
      columns("wf_tile_cache[wf_c * " + T_ + " + wf_l] = " + expr::to_cpp(exponent ? *exponent : element, ctx_) + ";");
      if (exponent) w_.line(ctx_.math + "::exp_in_place(wf_tile_cache, wf_len * " + T_ + ");");
      element = kernel_name("cached", expr::Type::Float, p_.dtype);
    }
    reduction(k, element);
    w_.line(t_ + " " + var + "[" + T_ + "];");
    w_.line(per_lane_ + var + "[wf_l] = " + (rv.epilogue ? "static_cast<" + t_ + ">(" + expr::to_cpp(*rv.epilogue, ctx_) + ")" : acc_) + ";");
  }

  // The reduction of row value k over the columns, a lane per row; sets `acc_`.
  void reduction(std::size_t k, const expr::Expr& element) {
    const auto& rv = f_.rows[k];
    const std::string init = reduce_init(rv.op, t_);
    const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
    w_.line(t_ + " " + a + "[" + T_ + "];");
    w_.line(per_lane_ + a + "[wf_l] = " + init + ";");
    const std::string al = a + "[wf_l]", v = "wf_v";
    // a <- a combined with v. For max and min, a plain comparison per lane
    // (it vectorises; the NaN-propagating select of the reduce kernels
    // compiled to scalar compares, 47 % of softmax 64 x 10) and a NaN flag
    // per lane: a NaN anywhere in a row makes its result NaN, as in the
    // reduce kernels.
    const bool extreme = rv.op == spec::ReduceOp::Max || rv.op == spec::ReduceOp::Min;
    const std::string nan = "wf_nan" + num(static_cast<std::int64_t>(k));
    std::string combine;
    switch (rv.op) {
      case spec::ReduceOp::Max: combine = al + " = " + v + " > " + al + " ? " + v + " : " + al + ";"; break;
      case spec::ReduceOp::Min: combine = al + " = " + v + " < " + al + " ? " + v + " : " + al + ";"; break;
      default: combine = al + " += " + v + ";"; break;
    }
    if (extreme) w_.line("int " + nan + "[" + T_ + "] = {};");
    if (!extreme) {
      four_chains(a, init, element);
      w_.open("for (std::int64_t wf_c = " + a + "_c; wf_c < wf_len; ++wf_c)");
    } else {
      w_.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    }
    w_.open("for (int wf_l = 0; wf_l < " + T_ + "; ++wf_l)");
    w_.line("const " + t_ + " wf_v = " + expr::to_cpp(element, ctx_) + ";");
    w_.line(combine);
    if (extreme) w_.line(nan + "[wf_l] |= " + v + " != " + v + ";");
    w_.close();
    w_.close();
    if (!extreme) w_.line(per_lane_ + al + " += (" + a + "_1[wf_l] + " + a + "_2[wf_l]) + " + a + "_3[wf_l];");
    if (extreme) w_.line(per_lane_ + "if (" + nan + "[wf_l]) " + al + " = std::numeric_limits<" + t_ + ">::quiet_NaN();");
    acc_ = rv.op == spec::ReduceOp::Mean ? "(" + al + " / static_cast<" + t_ + ">(wf_len))" : al;
  }

  // Sums: four chains of vector adds, columns c, c + 1, c + 2 and c + 3
  // (one chain waits on the add's latency for every column: 0.45 of
  // layernorm 64 x 32 went to its two sums), added at the end; the columns
  // left over from <a>_c on.
  void four_chains(const std::string& a, const std::string& init, const expr::Expr& element) {
    for (const char* part : {"_1", "_2", "_3"}) w_.line(t_ + " " + a + part + "[" + T_ + "];");
    w_.line(per_lane_ + a + "_1[wf_l] = " + a + "_2[wf_l] = " + a + "_3[wf_l] = " + init + ";");
    const std::string c4 = a + "_c";  // the first of the four columns
    w_.line("std::int64_t " + c4 + " = 0;");
    w_.open("for (; " + c4 + " + 4 <= wf_len; " + c4 + " += 4)");
    for (int part = 0; part < 4; ++part) {
      const std::string into = part == 0 ? a + "[wf_l]" : a + "_" + num(part) + "[wf_l]";
      col_ = part == 0 ? c4 : "(" + c4 + " + " + num(part) + ")";
      w_.line(per_lane_ + into + " += " + expr::to_cpp(element, ctx_) + ";");
    }
    col_ = "wf_c";
    w_.close();
  }

  void output() {
    const std::string os = "wf_step[" + num(static_cast<std::int64_t>(out_)) + "]";
    const std::string out_ptr = "wf_" + p_.tensors[out_].cpp;
    if (f_.out_per_row) {
      w_.line(per_lane_ + out_ptr + "[wf_l * " + os + "] = " + expr::to_cpp(f_.out, ctx_) + ";");
      return;
    }
    const expr::Expr value = loop_expr(*out_expr_);
    if (tile_out_) {
      const std::string tile = "wf_tile_" + p_.tensors[out_].cpp;
      columns(tile + "[wf_c * " + T_ + " + wf_l] = " + expr::to_cpp(value, ctx_) + ";");
      w_.line("wfgen::rt::lanes_to_rows<" + T_ + ">(" + tile + ", wf_len, " + out_ptr + ", " + os + ");");
      return;
    }
    along_rows_ = true;
    w_.open("for (int wf_l = 0; wf_l < " + T_ + "; ++wf_l)");
    w_.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + out_ptr + "[wf_l * " + os + " + wf_c] = " + expr::to_cpp(value, ctx_) + ";");
    w_.close();
  }

  const std::int64_t max_len_;
  const std::string T_;       // lanes: rows per tile
  const std::string cap_;     // elements of a tile
  const std::string per_lane_;
  const expr::Expr* out_expr_ = nullptr;
  bool tile_out_ = false;
  std::vector<bool> tiled_;   // per input: read through a tile
  expr::EmitContext ctx_;
  std::string acc_;
  std::string col_ = "wf_c";  // the column the expressions read
  bool along_rows_ = false;   // the last loop of a row-major output: inputs read in place
  std::vector<expr::Expr> divisors_;
};

}  // namespace

void emit_row_tiles(CodeWriter& w, const KernelPlan& p, const RowCache& cache) { RowTiles(w, p, cache).emit(); }

}  // namespace wfgen::emit::rows
