// A fused row kernel (passes/fuse.cpp): per row of the iteration space, the
// row values in order (each reduction one loop over the row, which stays in
// cache), then one loop writing the output. Short contiguous rows go
// through tiles first (row_tiles.cpp); the expressions' rewrites are in
// row_rewrites.cpp (row_parts.hpp).
//
// When the output expression repeats a costly reduction element (softmax:
// out = exp(x - max) / sum, with sum = sum(exp(x - max))), the contiguous
// path first stores that element in the output row, reduces it from there,
// and the final loop reads it back: exp once per element, not twice. It
// does so only when the output row overlaps no input row.
#include "wfgen/emit/row_kernels.hpp"

#include <algorithm>
#include <functional>

#include "wfgen/emit/row_parts.hpp"
#include "wfgen/emit/vector_lanes.hpp"

namespace wfgen::emit {

std::string math_namespace(const lower::KernelPlan& p) { return p.fast_math ? "wfgen::rt::math::fast" : "wfgen::rt::math"; }

namespace {

using namespace rows;

// A large output is written past the caches (rt::stream_store), from a
// row of scratch on the stack (this many elements at most) when the output
// row would cache an element.
constexpr std::int64_t kScratch = 4096;

// a <- a combined with v; for max and min NaN wins, as in the reduce kernels.
std::string combine(spec::ReduceOp op, const std::string& a, const std::string& v) {
  switch (op) {
    // | and & on bools, not || and &&: no branches, so the loop vectorises.
    case spec::ReduceOp::Max: return a + " = ((" + v + " > " + a + ") | ((" + v + " != " + v + ") & (" + a + " == " + a + "))) ? " + v + " : " + a + ";";
    case spec::ReduceOp::Min: return a + " = ((" + v + " < " + a + ") | ((" + v + " != " + v + ") & (" + a + " == " + a + "))) ? " + v + " : " + a + ";";
    default: return a + " += " + v + ";";
  }
}

// One path over a row: contiguous (unit_stride: the row values' passes in
// lanes, the cached element, streamed output) or strided (plain loops).
// Its expressions read the column `col_` of the current row.
class RowPath : RowKernel {
 public:
  RowPath(CodeWriter& w, const KernelPlan& p, const RowCache& cache, bool unit_stride)
      : RowKernel(w, p, cache), unit_stride_(unit_stride),
        caching_(unit_stride && cache.row >= 0), streaming_(unit_stride && !f_.out_per_row), out_row_("wf_" + p.tensors[out_].cpp),
        // Where the cached element is stored: the output row, or (wf_cache)
        // the scratch row when the output is streamed.
        cache_row_(streaming_ ? "wf_cache" : out_row_),
        ctx_(emit_context(p, [this](const std::string& name) { return name_of(name); })) {}
  RowPath(const RowPath&) = delete;
  RowPath& operator=(const RowPath&) = delete;

  void emit() {
    if (unit_stride_) prefetch();
    if (streaming_) stream_check();
    // Row values summed in the pass of the mean before them (spread_rows), once that pass is written.
    in_mean_pass_.assign(f_.rows.size(), false);
    spread_ = unit_stride_ ? spread_rows(f_) : std::vector<int>(f_.rows.size(), -1);
    for (std::size_t k = 0; k < f_.rows.size(); ++k) row_value(k);
    output();
  }

 private:
  std::string name_of(const std::string& name) const {
    if (name == "acc") return acc_;
    if (name == "n") return "wf_len";
    if (name == "cached") return cache_row_ + "[" + col_ + "]";
    if (name.rfind("row", 0) == 0 || name.rfind("inv", 0) == 0) return "wf_" + name;
    for (std::size_t k = 0; k < out_; ++k) {
      if (p_.tensors[k].name != name) continue;
      if (f_.row_input[k]) return "wf_" + name + "[0]";
      return "wf_" + name + (unit_stride_ ? "[" + col_ + "]" : "[" + col_ + " * wf_s" + num(static_cast<std::int64_t>(k)) + "]");
    }
    return name;
  }

  // "wf_<input>" when e names an input read along the row (not a spec
  // constant, not a per-row input), else "".
  std::string input_row_of(const expr::Expr& e) const {
    if (e.op != expr::Op::Name || e.binding.kind == expr::Binding::Kind::Constant || e.type != expr::Type::Float) return "";
    for (std::size_t in = 0; in < out_; ++in)
      if (!f_.row_input[in] && p_.tensors[in].name == e.text) return "wf_" + p_.tensors[in].cpp;
    return "";
  }

  static std::string step(std::size_t k) { return "wf_step[" + num(static_cast<std::int64_t>(k)) + "]"; }

  // The inputs of a row ahead on their way from memory while this row
  // computes. A kernel whose cached row is an exp (its arithmetic, most
  // of the row's time) has its first input's row 4 ahead prefetched a
  // line per vector inside that pass (`ahead` of rt::math::exp_shifted),
  // as a whole row of prefetches at once (64 for 1024 floats) queues
  // before the row's own loads: softmax 4096x1024, 1 thread, 1.07-1.14
  // ms with the row after next prefetched at once against 0.83-0.88 ms
  // paced (0.77 ms with every row in cache). The other inputs, and every
  // input of other kernels, come a row after next, at the start of the
  // row (rt::prefetch_row). An input whose row step is 0 (gamma and
  // beta of a layernorm, broadcast over the rows) is the same row every
  // time, in L1 after the first: it is not prefetched, since 64 prefetch
  // instructions a row for lines already there made layernorm 4096x1024
  // 17-22 % slower (1 thread, rows from memory 0.85-0.89 ms against 0.71-0.75).
  void prefetch() {
    std::size_t paced = out_;
    if (caching_ && exp_argument(f_.rows[static_cast<std::size_t>(cache_.row)].element))
      for (std::size_t k = 0; k < out_ && paced == out_; ++k)
        if (!f_.row_input[k]) paced = k;
    if (paced < out_) {
      ahead_ = ", wf_ahead";
      w_.line("const " + t_ + "* const wf_ahead = wf_r + 4 < wf_rows && " + step(paced) + " != 0 ? wf_" + p_.tensors[paced].cpp + " + 4 * " +
              step(paced) + " : nullptr;");
    }
    std::string next;
    for (std::size_t k = 0; k < out_; ++k)
      if (!f_.row_input[k] && k != paced)
        next += " if (" + step(k) + " != 0) wfgen::rt::prefetch_row(wf_" + p_.tensors[k].cpp + " + 2 * " + step(k) + ", wf_len);";
    if (!next.empty()) w_.line("if (wf_r + 2 < wf_rows) {" + next + " }");
  }

  // The streamed stores compute a block before storing it: only an output
  // row apart from every input row gives the same result.
  void stream_check() {
    std::string apart = "wf_stream";
    if (!caching_) {  // (the caching path checked this already)
      for (std::size_t k = 0; k < out_; ++k)
        apart += " && wfgen::rt::disjoint(" + out_row_ + ", wf_len, wf_" + p_.tensors[k].cpp + ", " + (f_.row_input[k] ? "1" : "wf_len") + ")";
    }
    w_.line("const bool wf_stream_row = " + apart + ";");
    if (caching_) w_.line(t_ + "* const wf_cache = wf_stream_row ? wf_scratch : " + out_row_ + ";");
  }

  // The loop expression `e` with its divisions by row values hoisted: the
  // reciprocals it adds are declared before the loop.
  expr::Expr loop_expr(const expr::Expr& e) {
    const std::size_t before = divisors_.size();
    expr::Expr hoisted = hoist_divisors(e, [this](const expr::Expr& x) { return row_invariant(p_, x); }, divisors_, p_.dtype);
    for (std::size_t k = before; k < divisors_.size(); ++k)
      w_.line("const " + t_ + " wf_inv" + num(static_cast<std::int64_t>(k)) + " = " + t_ + "(1) / " + expr::to_cpp(divisors_[k], ctx_) + ";");
    return hoisted;
  }

  // The row value `var` from `acc` (a mean already divided), through the row's epilogue if it has one.
  void declare_row(const std::string& var, const lower::RowValue& rv) {
    w_.line("const " + t_ + " " + var + " = " + (rv.epilogue ? "static_cast<" + t_ + ">(" + expr::to_cpp(*rv.epilogue, ctx_) + ")" : acc_) + ";");
  }

  // The reduced value `acc` read from `sum` (a Sum, or a Mean's sum), then the row value.
  void declare_from_sum(const std::string& var, const lower::RowValue& rv, const std::string& sum) {
    acc_ = rv.op == spec::ReduceOp::Mean ? "(" + sum + " / static_cast<" + t_ + ">(wf_len))" : sum;
    declare_row(var, rv);
  }

  void row_value(std::size_t k) {
    const auto& rv = f_.rows[k];
    const std::string var = "wf_row" + num(static_cast<std::int64_t>(k));
    if (!rv.reduce) {
      w_.line("const " + t_ + " " + var + " = " + expr::to_cpp(rv.element, ctx_) + ";");
      return;
    }
    if (in_mean_pass_[k]) {
      declare_from_sum(var, rv, "wf_sum" + num(static_cast<std::int64_t>(k)));
      return;
    }
    const int spread = spread_[k];
    if (spread >= 0 && cache_.row != static_cast<int>(k) && cache_.row != spread) {
      mean_and_spread(static_cast<int>(k), spread);
      in_mean_pass_[static_cast<std::size_t>(spread)] = true;
      declare_row(var, rv);
      spread_check(spread);
      return;
    }
    expr::Expr element = loop_expr(rv.element);
    if (caching_ && static_cast<int>(k) == cache_.row && cache_element(k, var, element)) return;
    if (extreme_of_input(k, var, element)) return;
    if (unit_stride_) {
      lane_reduction(k, element);
    } else {
      const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
      w_.line(t_ + " " + a + " = " + reduce_init(rv.op, t_) + ";");
      w_.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
      w_.line("const " + t_ + " wf_v = " + expr::to_cpp(element, ctx_) + ";");
      w_.line(combine(rv.op, a, "wf_v"));
      w_.close();
      acc_ = a;
    }
    if (rv.op == spec::ReduceOp::Mean) acc_ = "(" + acc_ + " / static_cast<" + t_ + ">(wf_len))";
    declare_row(var, rv);
  }

  // The cached element: a loop that only stores it in the output row
  // (a plain map, which vectorises at the machine's full width), then
  // the reduction reads it back from there. An element exp(a) goes
  // through rt::math::exp_shifted, a vector at a time (on AVX-512 with
  // instructions the compiler does not reach from the scalar exp: 0.19
  // against 0.24 ns an element of softmax in cache): exp(x - s), x an
  // input's row and s the same along the row, straight from the input
  // row (exp_minus_max when s is that row's max: softmax); any other a
  // stored first, then exp_in_place.
  // Either returns the sum of the row it wrote: a sum of the element
  // (softmax's, log-sum-exp's) takes it instead of another pass (then true:
  // the row value is declared); otherwise `element` becomes the cache.
  bool cache_element(std::size_t k, const std::string& var, expr::Expr& element) {
    const auto& rv = f_.rows[k];
    const bool sums = rv.op == spec::ReduceOp::Sum || rv.op == spec::ReduceOp::Mean;
    const expr::Expr* exponent = exp_argument(element);
    const expr::Expr* x = exponent && exponent->op == expr::Op::Sub ? &exponent->args[0] : nullptr;
    const std::string input_row = x && row_invariant(p_, exponent->args[1]) ? input_row_of(*x) : std::string();
    const std::string exp_sum = "wf_exp_sum" + num(static_cast<std::int64_t>(k));
    const std::string keep_sum = sums ? "const " + t_ + " " + exp_sum + " = " : std::string();
    if (!input_row.empty()) {
      const char* helper = is_row_max_of(f_, exponent->args[1], *x) ? "::exp_minus_max(" : "::exp_shifted(";
      w_.line(keep_sum + ctx_.math + helper + cache_row_ + ", " + input_row + ", " + t_ + "(" + expr::to_cpp(exponent->args[1], ctx_) +
              "), wf_len" + ahead_ + ");");
    } else {
      w_.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + cache_row_ + "[wf_c] = " + expr::to_cpp(exponent ? *exponent : element, ctx_) +
              ";");
      if (exponent) w_.line((sums ? keep_sum : std::string()) + ctx_.math + "::exp_in_place(" + cache_row_ + ", wf_len" + ahead_ + ");");
    }
    if (exponent && sums) {
      declare_from_sum(var, rv, exp_sum);
      return true;
    }
    element = kernel_name("cached", expr::Type::Float, p_.dtype);
    return false;
  }

  // The max (min) of an input's row: rt::math::max_row (min_row), on
  // AVX-512 two vectors a step with one NaN compare for both (the loop
  // of lane_reduction: a compare and a flag update each). True when it was.
  bool extreme_of_input(std::size_t k, const std::string& var, const expr::Expr& element) {
    const auto& rv = f_.rows[k];
    const bool extreme = rv.op == spec::ReduceOp::Max || rv.op == spec::ReduceOp::Min;
    if (!unit_stride_ || !extreme || !rt::dtype_is_float(p_.dtype) || (caching_ && static_cast<int>(k) == cache_.row)) return false;
    const std::string input_row = input_row_of(element);
    if (input_row.empty()) return false;
    acc_ = "wf_acc" + num(static_cast<std::int64_t>(k)) + "_row";
    w_.line("const " + t_ + " " + acc_ + " = wfgen::rt::math::" + (rv.op == spec::ReduceOp::Max ? "max_row(" : "min_row(") + input_row + ", wf_len);");
    declare_row(var, rv);
    return true;
  }

  // Row value k reduced over a contiguous row in independent accumulators
  // (partial_sum_lanes: one chain is bound by the latency of an add); sets
  // `acc_`. Short rows take a plain loop here: setting up and folding the
  // lanes would cost more than the row (contiguous rows shorter than two
  // sets of lanes went through the tiles; measured on 64 x 32 layernorm,
  // 16 lanes here took 1.9 us against 1.5 us in tiles).
  void lane_reduction(std::size_t k, const expr::Expr& element) {
    const auto& rv = f_.rows[k];
    const bool extreme = rv.op == spec::ReduceOp::Max || rv.op == spec::ReduceOp::Min;
    const std::string init = reduce_init(rv.op, t_);
    const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
    const std::int64_t lane_count = partial_sum_lanes(p_.dtype);
    const std::string lanes = num(lane_count);
    const std::string result = a + "_row";
    w_.line(t_ + " " + result + " = " + init + ";");
    w_.open("if (wf_len >= " + num(2 * lane_count) + ")");
    w_.line(t_ + " " + a + "[" + lanes + "];");
    w_.line("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l) " + a + "[wf_l] = " + init + ";");
    // max/min: a plain comparison per lane (it vectorises) and a NaN
    // flag per lane; a NaN anywhere makes the result NaN, as in the reduce kernels.
    const std::string nan = "wf_nan" + num(static_cast<std::int64_t>(k));
    const std::string cmp = rv.op == spec::ReduceOp::Max ? " > " : " < ";
    if (extreme) w_.line("int " + nan + "[" + lanes + "] = {};");
    const std::string j = "wf_j" + num(static_cast<std::int64_t>(k));
    w_.line("std::int64_t " + j + " = 0;");
    w_.open("for (; " + j + " + " + lanes + " <= wf_len; " + j + " += " + lanes + ")");
    w_.open("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l)");
    col_ = j + " + wf_l";
    w_.line("const " + t_ + " wf_v = " + expr::to_cpp(element, ctx_) + ";");
    if (extreme) {
      w_.line(a + "[wf_l] = wf_v" + cmp + a + "[wf_l] ? wf_v : " + a + "[wf_l];");
      w_.line(nan + "[wf_l] |= wf_v != wf_v;");
    } else {
      w_.line(combine(rv.op, a + "[wf_l]", "wf_v"));
    }
    w_.close();
    w_.close();
    col_ = j;
    w_.open("for (; " + j + " < wf_len; ++" + j + ")");
    w_.line("const " + t_ + " wf_v = " + expr::to_cpp(element, ctx_) + ";");
    w_.line(combine(rv.op, a + "[0]", "wf_v"));
    w_.close();
    col_ = "wf_c";
    // Fold the lanes in halves, each half one vector operation: a chain
    // of 31 scalar steps (with NaN tests) took a fifth of a row of 1024.
    // Only lane 0 can hold a NaN here (from the tail loop) and it stays
    // there; the lanes' NaN flags are or-ed the same way.
    for (std::int64_t half = lane_count / 2; half >= 1; half /= 2) {
      const std::string other = a + "[wf_l + " + num(half) + "]";
      w_.line("for (int wf_l = 0; wf_l < " + num(half) + "; ++wf_l) " +
              (extreme ? a + "[wf_l] = " + other + cmp + a + "[wf_l] ? " + other + " : " + a + "[wf_l];" : combine(rv.op, a + "[wf_l]", other)));
      if (extreme) w_.line("for (int wf_l = 0; wf_l < " + num(half) + "; ++wf_l) " + nan + "[wf_l] |= " + nan + "[wf_l + " + num(half) + "];");
    }
    if (extreme) w_.line("if (" + nan + "[0]) " + a + "[0] = std::numeric_limits<" + t_ + ">::quiet_NaN();");
    w_.line(result + " = " + a + "[0];");
    w_.otherwise();
    w_.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    w_.line("const " + t_ + " wf_v = " + expr::to_cpp(element, ctx_) + ";");
    w_.line(combine(rv.op, result, "wf_v"));
    w_.close();
    w_.close();
    acc_ = result;
  }

  // Row j = mean(E) and the sum of (E - row j)^2 of row k in one pass over
  // the row, as sums of d = E - s and of d * d with the shift s = E at
  // column 0: sum((E - mean)^2) = sum(d * d) - sum(d)^2 / n. Such a sum
  // loses to cancellation only what the shift's distance from the mean
  // adds to sum(d * d); when that is more than seven eighths of it (s more
  // than 2.6 standard deviations from the mean, or a NaN), a second pass
  // over the row, which is in cache, sums (E - row j)^2 as written
  // (spread_check). As the shift is one of the elements, n (mean - s)^2 <=
  // (n - 1) sum((E - mean)^2), so even without that pass at most log2(n)
  // bits cancel. Sets `acc` to the mean; row k's sum is left in wf_sum<k>.
  void mean_and_spread(int j, int k) {
    const std::string js = num(j), ks = num(k);
    const std::string shift = "wf_shift" + js, a = "wf_acc" + js, q = "wf_sq" + ks, sum = "wf_sum" + ks;
    const std::int64_t lane_count = partial_sum_lanes(p_.dtype);
    const std::string lanes = num(lane_count);
    w_.comment("row" + js + " and the sum of row" + ks + " in one pass: shifted sums (d = element - shift)");
    const expr::Expr element = loop_expr(f_.rows[static_cast<std::size_t>(j)].element);
    col_ = "0";
    w_.line("const " + t_ + " " + shift + " = wf_len > 0 ? " + t_ + "(" + expr::to_cpp(element, ctx_) + ") : " + t_ + "(0);");
    w_.line(t_ + " " + a + "_row = " + t_ + "(0), " + q + "_row = " + t_ + "(0);");
    const auto shifted = [&](const std::string& column, const std::string& into_a, const std::string& into_q) {
      col_ = column;
      w_.line("const " + t_ + " wf_d = " + t_ + "(" + expr::to_cpp(element, ctx_) + ") - " + shift + ";");
      w_.line(into_a + " += wf_d;");
      w_.line(into_q + " += wf_d * wf_d;");
    };
    w_.open("if (wf_len >= " + num(2 * lane_count) + ")");
    w_.line(t_ + " " + a + "[" + lanes + "], " + q + "[" + lanes + "];");
    w_.line("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l) " + a + "[wf_l] = " + q + "[wf_l] = " + t_ + "(0);");
    const std::string jv = "wf_j" + js;
    w_.line("std::int64_t " + jv + " = 0;");
    w_.open("for (; " + jv + " + " + lanes + " <= wf_len; " + jv + " += " + lanes + ")");
    w_.open("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l)");
    shifted(jv + " + wf_l", a + "[wf_l]", q + "[wf_l]");
    w_.close();
    w_.close();
    w_.open("for (; " + jv + " < wf_len; ++" + jv + ")");
    shifted(jv, a + "[0]", q + "[0]");
    w_.close();
    for (std::int64_t half = lane_count / 2; half >= 1; half /= 2) {
      const std::string hs = num(half);
      w_.line("for (int wf_l = 0; wf_l < " + hs + "; ++wf_l) " + a + "[wf_l] += " + a + "[wf_l + " + hs + "], " + q + "[wf_l] += " + q +
              "[wf_l + " + hs + "];");
    }
    w_.line(a + "_row = " + a + "[0];");
    w_.line(q + "_row = " + q + "[0];");
    w_.otherwise();
    w_.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    shifted("wf_c", a + "_row", q + "_row");
    w_.close();
    w_.close();
    col_ = "wf_c";
    acc_ = "(" + shift + " + " + a + "_row / static_cast<" + t_ + ">(wf_len))";
    w_.line(t_ + " " + sum + " = " + q + "_row - " + a + "_row * (" + a + "_row / static_cast<" + t_ + ">(wf_len));");
  }

  // After row j's declaration: the second pass for row k when the shift cancelled too much.
  void spread_check(int k) {
    const std::string ks = num(k), q = "wf_sq" + ks + "_row", sum = "wf_sum" + ks;
    const expr::Expr element = loop_expr(f_.rows[static_cast<std::size_t>(k)].element);
    w_.comment("the shift lay far from the mean: sum row" + ks + "'s elements as written");
    w_.open("if (!(" + sum + " >= " + t_ + "(0.125) * " + q + "))");
    w_.line(sum + " = " + t_ + "(0);");
    w_.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + sum + " += " + expr::to_cpp(element, ctx_) + ";");
    w_.close();
  }

  void output() {
    if (f_.out_per_row) {
      w_.line(out_row_ + "[0] = " + expr::to_cpp(f_.out, ctx_) + ";");
      return;
    }
    const expr::Expr value = loop_expr(caching_ ? cache_.out : f_.out);
    if (streaming_) {
      w_.open("if (wf_stream_row)");
      w_.line("wfgen::rt::stream_store<false>(" + out_row_ + ", wf_len, [&](std::int64_t wf_c) { return " + t_ + "(" + expr::to_cpp(value, ctx_) +
              "); });");
      w_.otherwise();
    }
    w_.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + out_row_ +
            (unit_stride_ ? "[wf_c]" : "[wf_c * wf_s" + num(static_cast<std::int64_t>(out_)) + "]") + " = " + expr::to_cpp(value, ctx_) + ";");
    if (streaming_) w_.close();
  }

  const bool unit_stride_;
  const bool caching_;    // the cached element is stored in a row (cache_.row)
  const bool streaming_;  // the output may be streamed past the caches
  const std::string out_row_;
  const std::string cache_row_;
  std::string ahead_;  // ", wf_ahead" when the cached exp paces the prefetch of a row ahead
  expr::EmitContext ctx_;
  std::string acc_;           // the reduced value an epilogue reads as `acc`
  std::string col_ = "wf_c";  // the column being read
  std::vector<expr::Expr> divisors_;  // of this path's loops, reciprocals named inv0, inv1...
  std::vector<bool> in_mean_pass_;
  std::vector<int> spread_;
};

// "per row: row0 = ...; out = ..." (the comment over the kernel's body).
std::string plan_comment(const lower::FusedBody& f) {
  std::string plan_text;
  for (std::size_t k = 0; k < f.rows.size(); ++k) {
    const auto& rv = f.rows[k];
    plan_text += "row" + num(static_cast<std::int64_t>(k)) + " = " +
                 (rv.reduce ? std::string(spec::reduce_op_name(rv.op)) + "(" + rv.element.str() + ")" : rv.element.str()) +
                 (rv.epilogue ? " then " + rv.epilogue->str() : "") + "; ";
  }
  return "per row: " + plan_text + "out = " + f.out.str();
}

// The row length, the nest over the rows, the rows' strides and whether
// every row is contiguous (wf_unit), and whether the output is streamed.
void row_nest(CodeWriter& w, const KernelPlan& p, const RowCache& cache) {
  const lower::FusedBody& f = *p.fused;
  const int r = p.rank;
  const std::size_t n = p.tensors.size();
  const std::size_t out = n - 1;
  std::size_t lead = 0;
  while (lead < out && f.row_input[lead]) ++lead;
  const std::string& len_of = lead < out ? p.tensors[lead].cpp : p.tensors[out].cpp;
  w.line("const std::int64_t wf_len = " + len_of + ".shape[" + num(r - 1) + "];");
  std::string strides = "{";
  for (std::size_t k = 0; k < n; ++k) strides += (k ? ", " : "") + std::string("wfgen::rt::head<1>(") + p.tensors[k].cpp + ".strides)";
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", " + num(static_cast<std::int64_t>(n)) + "> wf_nest(wfgen::rt::head<1>(" + p.tensors[out].cpp +
         ".shape), " + strides + "}, " + num(static_cast<std::int64_t>(out)) + ");");
  std::string unit;
  for (std::size_t k = 0; k < n; ++k) {
    if (k < out ? f.row_input[k] : f.out_per_row) continue;
    w.line("const std::int64_t wf_s" + num(static_cast<std::int64_t>(k)) + " = " + p.tensors[k].cpp + ".strides[" + num(r - 1) + "];");
    unit += (unit.empty() ? "" : " && ") + std::string("wf_s") + num(static_cast<std::int64_t>(k)) + " == 1";
  }
  w.line("const bool wf_unit = " + (unit.empty() ? std::string("true") : unit) + ";");
  if (!f.out_per_row)
    w.line("const bool wf_stream = wf_unit && wfgen::rt::streams_output<" + elem(p.dtype) + ">(wf_nest.total() * wf_len)" +
           (cache.row >= 0 ? " && wf_len <= " + num(kScratch) : std::string()) + ";");
}

}  // namespace

void emit_fused_rows(CodeWriter& w, const KernelPlan& p) {
  const lower::FusedBody& f = *p.fused;
  const std::size_t out = p.tensors.size() - 1;
  const std::string t = elem(p.dtype);
  const RowCache cache = plan_row_cache(p);
  const bool may_stream = !f.out_per_row;
  w.comment(plan_comment(f));
  row_nest(w, p, cache);
  w.open("wf_nest.run(16384 / (wf_len > 0 ? wf_len : 1) + 1, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_rows)");
  if (may_stream && cache.row >= 0) w.line("alignas(64) " + t + " wf_scratch[" + num(kScratch) + "];");
  w.line("std::int64_t wf_r = 0;");
  emit_row_tiles(w, p, cache);
  w.open("for (; wf_r < wf_rows; ++wf_r)");
  for (std::size_t k = 0; k <= out; ++k) {
    const auto& tp = p.tensors[k];
    // (maybe_unused: a row value may leave an input unread, e.g. a mean of ones.)
    w.line(std::string("[[maybe_unused]] ") + (tp.written ? "" : "const ") + t + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" +
           num(static_cast<std::int64_t>(k)) + "] + wf_r * wf_step[" + num(static_cast<std::int64_t>(k)) + "];");
  }
  std::string contiguous = "wf_unit";
  if (cache.row >= 0) {
    // The cache writes the output row before the inputs are read again.
    for (std::size_t k = 0; k < out; ++k)
      contiguous += " && wfgen::rt::disjoint(wf_" + p.tensors[out].cpp + ", wf_len, wf_" + p.tensors[k].cpp + ", " + (f.row_input[k] ? "1" : "wf_len") + ")";
  }
  w.open("if (" + contiguous + ")");
  RowPath(w, p, cache, true).emit();
  w.otherwise();
  RowPath(w, p, cache, false).emit();
  w.close();
  w.close();
  // The rows streamed without a fence each (stream_store<false>): one for this thread's share.
  if (may_stream) w.line("if (wf_stream) wfgen::rt::stream_fence();");
  w.close(");");
}

}  // namespace wfgen::emit
