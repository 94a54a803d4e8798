#include "wfgen/emit/row_kernels.hpp"

#include <algorithm>
#include <functional>

#include "wfgen/emit/vector_lanes.hpp"

namespace wfgen::emit {

std::string math_namespace(const lower::KernelPlan& p) { return p.fast_math ? "wfgen::rt::math::fast" : "wfgen::rt::math"; }

namespace {

using lower::KernelPlan;

std::string num(std::int64_t v) { return std::to_string(v); }

std::string elem(rt::DType d) { return expr::cpp_type(d); }

bool is_float(rt::DType d) { return d == rt::DType::f32 || d == rt::DType::f64; }

// --- rewrites of a fused row kernel's expressions ---------------------------------------

// Structural equality of two checked expressions.
bool same_tree(const expr::Expr& a, const expr::Expr& b) {
  if (a.op != b.op || a.type != b.type || a.args.size() != b.args.size()) return false;
  switch (a.op) {
    case expr::Op::Name: if (a.text != b.text) return false; break;
    case expr::Op::BoolLit:
    case expr::Op::IntLit: if (a.ivalue != b.ivalue) return false; break;
    case expr::Op::FloatLit: if (a.fvalue != b.fvalue || a.text != b.text) return false; break;
    case expr::Op::Call: if (a.fn != b.fn) return false; break;
    default: break;
  }
  for (std::size_t k = 0; k < a.args.size(); ++k)
    if (!same_tree(a.args[k], b.args[k])) return false;
  return true;
}

// Whether computing `e` costs more than a load: a call (exp, tanh...) or a division.
bool costly(const expr::Expr& e) {
  if (e.op == expr::Op::Call || e.op == expr::Op::Div || e.op == expr::Op::Mod) return true;
  for (const auto& a : e.args)
    if (costly(a)) return true;
  return false;
}

// a when `e` is exp(a) of a floating a: the cached rows go through
// rt::math::exp_shifted or exp_in_place, faster than a loop of exp.
const expr::Expr* exp_argument(const expr::Expr& e) {
  if (e.op != expr::Op::Call || e.fn != expr::Fn::Exp || e.args[0].type != expr::Type::Float) return nullptr;
  return &e.args[0];
}

// Whether `shift` names a row value that is the max of `x` over the row
// (softmax's max): then every x - shift is <= 0 or NaN, and the cached
// exp row goes through rt::math::exp_minus_max, one clamp a vector fewer.
bool is_row_max_of(const lower::FusedBody& f, const expr::Expr& shift, const expr::Expr& x) {
  if (shift.op != expr::Op::Name || shift.binding.kind == expr::Binding::Kind::Constant || shift.text.rfind("row", 0) != 0) return false;
  const std::string index = shift.text.substr(3);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 6) return false;
  const std::size_t j = static_cast<std::size_t>(std::stoi(index));
  if (j >= f.rows.size()) return false;
  const auto& rv = f.rows[j];
  return rv.reduce && rv.op == spec::ReduceOp::Max && !rv.epilogue && same_tree(rv.element, x);
}

// A name the emitter adds to a checked expression: a value of `type`
// computed elsewhere in the kernel (printed through EmitContext::name).
expr::Expr kernel_name(const std::string& text, expr::Type type, rt::DType dtype) {
  expr::Expr e;
  e.op = expr::Op::Name;
  e.text = text;
  e.type = type;
  e.checked_for = dtype;
  e.binding.kind = expr::Binding::Kind::Scalar;
  e.binding.type = type;
  return e;
}

// `e` with every subtree equal to `target` replaced by `with`; counts the replacements.
expr::Expr replace_tree(const expr::Expr& e, const expr::Expr& target, const expr::Expr& with, int& count) {
  if (same_tree(e, target)) {
    ++count;
    return with;
  }
  expr::Expr copy = e;
  for (auto& a : copy.args) a = replace_tree(a, target, with, count);
  return copy;
}

// `e` with each floating division by a value that is the same along the row
// (`invariant`) turned into a product with its reciprocal, computed once per
// row: `x / s` becomes `x * inv0`, with inv0 = 1 / s in `divisors`. A
// division costs several multiplications and stops nothing from
// vectorising, so a row of softmax or layernorm is then bound by its loads;
// the result differs from the division by at most an ulp or so.
expr::Expr hoist_divisors(const expr::Expr& e, const std::function<bool(const expr::Expr&)>& invariant,
                          std::vector<expr::Expr>& divisors, rt::DType dtype) {
  expr::Expr copy = e;
  for (auto& a : copy.args) a = hoist_divisors(a, invariant, divisors, dtype);
  if (e.op != expr::Op::Div || e.type != expr::Type::Float || !invariant(e.args[1]) || invariant(e.args[0])) return copy;
  std::size_t k = 0;
  while (k < divisors.size() && !same_tree(divisors[k], e.args[1])) ++k;
  if (k == divisors.size()) divisors.push_back(e.args[1]);
  expr::Expr mul = copy;
  mul.op = expr::Op::Mul;
  mul.args[1] = kernel_name("inv" + num(static_cast<std::int64_t>(k)), expr::Type::Float, dtype);
  return mul;
}

// Whether `e` has the same value all along a row of the fused kernel `p`:
// it reads only row values (rowK), divisors' reciprocals (invK), the row
// length n, constants and inputs with one element per row.
bool row_invariant(const KernelPlan& p, const expr::Expr& e) {
  if (e.op == expr::Op::Name && e.binding.kind != expr::Binding::Kind::Constant) {
    if (e.text == "n" || e.text.rfind("row", 0) == 0 || e.text.rfind("inv", 0) == 0) return true;
    for (std::size_t k = 0; k + 1 < p.tensors.size(); ++k)
      if (p.tensors[k].name == e.text) return static_cast<bool>(p.fused->row_input[k]);
    return false;
  }
  for (const auto& a : e.args)
    if (!row_invariant(p, a)) return false;
  return true;
}

// For each row value j, the row value k > j that is the spread of the
// elements around it, or -1: row j = mean(E) and row k = sum or mean of
// (E - row j) * (E - row j), as in layernorm's variance. The contiguous row
// path computes both in one pass over the row (shifted sums).
std::vector<int> spread_rows(const lower::FusedBody& f) {
  std::vector<int> spread(f.rows.size(), -1);
  std::vector<bool> taken(f.rows.size(), false);
  for (std::size_t j = 0; j < f.rows.size(); ++j) {
    const auto& mean = f.rows[j];
    if (!mean.reduce || mean.op != spec::ReduceOp::Mean || mean.element.type != expr::Type::Float) continue;
    const std::string row = "row" + num(static_cast<std::int64_t>(j));
    for (std::size_t k = j + 1; k < f.rows.size() && spread[j] < 0; ++k) {
      const auto& rv = f.rows[k];
      if (taken[k] || !rv.reduce || (rv.op != spec::ReduceOp::Sum && rv.op != spec::ReduceOp::Mean)) continue;
      const expr::Expr& e = rv.element;
      if (e.op != expr::Op::Mul || !same_tree(e.args[0], e.args[1])) continue;
      const expr::Expr& d = e.args[0];
      if (d.op != expr::Op::Sub || d.args[1].op != expr::Op::Name || d.args[1].text != row || !same_tree(d.args[0], mean.element)) continue;
      spread[j] = static_cast<int>(k);
      taken[k] = true;
    }
  }
  return spread;
}

// Rows shorter than two sets of lanes (the rows the row path below reduces
// in a plain scalar loop, such as softmax over 10 classes or layernorm over
// 32 features): a tile of as many rows as a 64-byte vector has lanes (16
// floats, 8 doubles) at a time, one row per lane. Each input's rows are
// copied into a column-major tile (column c of the tile's rows contiguous),
// every reduction and element-wise step runs over the columns as vector
// operations across the rows, and the output tile is copied back row by
// row. The tile reads every input element before it writes an output one,
// so an output over its own input (in place) is fine. Emitted inside the
// nest's chunk, before the row loop, which takes the rows left over
// (wf_r counts the rows done).
void emit_row_tiles(CodeWriter& w, const KernelPlan& p, int cache, const expr::Expr& cached_out) {
  const lower::FusedBody& f = *p.fused;
  const std::size_t n = p.tensors.size();
  const std::size_t out = n - 1;
  const std::string t = elem(p.dtype);
  const std::int64_t lanes = vector_lanes(p.dtype);
  const std::int64_t max_len = 2 * partial_sum_lanes(p.dtype);
  const std::string T = num(lanes);
  const std::string cap = num(max_len * lanes);
  // Whether expression e reads the name `name`.
  std::function<bool(const expr::Expr&, const std::string&)> reads = [&](const expr::Expr& e, const std::string& name) {
    if (e.op == expr::Op::Name && e.binding.kind != expr::Binding::Kind::Constant && e.text == name) return true;
    for (const auto& a : e.args)
      if (reads(a, name)) return true;
    return false;
  };
  // The output goes through a tile only when it reads the cached element
  // (softmax: exp is computed once, in the tile); otherwise the last loop
  // runs along each row, reading the inputs where they are (a broadcast
  // gamma needs no tile) and writing the output row-major, with the row's
  // values from its lane. Inputs get a tile when a reduction reads them (or
  // a tiled output does).
  const expr::Expr& out_expr = cache >= 0 ? cached_out : f.out;
  const bool tile_out = !f.out_per_row && cache >= 0;
  std::vector<bool> tiled(out, false);
  for (std::size_t k = 0; k < out; ++k) {
    if (f.row_input[k]) continue;
    for (const auto& rv : f.rows)
      if (rv.reduce && reads(rv.element, p.tensors[k].name)) tiled[k] = true;
    if (tile_out && reads(out_expr, p.tensors[k].name)) tiled[k] = true;
  }
  w.open("if (wf_unit && wf_len < " + num(max_len) + ")");
  w.comment("rows shorter than " + num(max_len) + ": " + T + " rows at a time, one per lane (column c of a tile at [c * " + T + "])");
  for (std::size_t k = 0; k < out; ++k)
    if (tiled[k]) w.line("alignas(64) " + t + " wf_tile_" + p.tensors[k].cpp + "[" + cap + "];");
  if (tile_out) w.line("alignas(64) " + t + " wf_tile_" + p.tensors[out].cpp + "[" + cap + "];");
  if (cache >= 0) w.line("alignas(64) " + t + " wf_tile_cache[" + cap + "];");
  w.open("for (; wf_r + " + T + " <= wf_rows; wf_r += " + T + ")");
  for (std::size_t k = 0; k < n; ++k) {
    const auto& tp = p.tensors[k];
    const std::string ks = num(static_cast<std::int64_t>(k));
    // (maybe_unused: an input that only a row value reads is read through its tile.)
    w.line(std::string("[[maybe_unused]] ") + (tp.written ? "" : "const ") + t + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" + ks + "] + wf_r * wf_step[" + ks + "];");
  }
  for (std::size_t k = 0; k < out; ++k) {
    const auto& tp = p.tensors[k];
    const std::string ks = num(static_cast<std::int64_t>(k));
    if (f.row_input[k]) {
      w.line(t + " wf_tile_" + tp.cpp + "[" + T + "];");
      w.line("for (int wf_l = 0; wf_l < " + T + "; ++wf_l) wf_tile_" + tp.cpp + "[wf_l] = wf_" + tp.cpp + "[wf_l * wf_step[" + ks + "]];");
      continue;
    }
    if (!tiled[k]) continue;
    // Blocks of the rows transposed in registers (a scalar copy, column by
    // column, took 0.4 of layernorm 64 x 32).
    w.line("wfgen::rt::rows_to_lanes<" + T + ">(wf_" + tp.cpp + ", wf_step[" + ks + "], wf_len, wf_tile_" + tp.cpp + ");");
  }
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  std::string acc;
  std::string col = "wf_c";  // the column the expressions read
  bool along_rows = false;  // the last loop of a row-major output: inputs read in place
  ctx.name = [&](const std::string& name) -> std::string {
    if (name == "acc") return acc;
    if (name == "n") return "wf_len";
    if (name == "cached") return "wf_tile_cache[" + col + " * " + T + " + wf_l]";
    if (name.rfind("row", 0) == 0 || name.rfind("inv", 0) == 0) return "wf_" + name + "[wf_l]";
    for (std::size_t k = 0; k < out; ++k) {
      if (p.tensors[k].name != name) continue;
      if (f.row_input[k]) return "wf_tile_" + p.tensors[k].cpp + "[wf_l]";
      if (along_rows || !tiled[k]) return "wf_" + p.tensors[k].cpp + "[wf_l * wf_step[" + num(static_cast<std::int64_t>(k)) + "] + " + col + "]";
      return "wf_tile_" + p.tensors[k].cpp + "[" + col + " * " + T + " + wf_l]";
    }
    return name;
  };
  const auto invariant = [&p](const expr::Expr& e) { return row_invariant(p, e); };
  const std::string per_lane = "for (int wf_l = 0; wf_l < " + T + "; ++wf_l) ";
  std::vector<expr::Expr> divisors;
  auto loop_expr = [&](const expr::Expr& e) {
    const std::size_t before = divisors.size();
    expr::Expr hoisted = hoist_divisors(e, invariant, divisors, p.dtype);
    for (std::size_t k = before; k < divisors.size(); ++k) {
      const std::string inv = "wf_inv" + num(static_cast<std::int64_t>(k));
      w.line(t + " " + inv + "[" + T + "];");
      w.line(per_lane + inv + "[wf_l] = " + t + "(1) / " + expr::to_cpp(divisors[k], ctx) + ";");
    }
    return hoisted;
  };
  auto columns = [&](const std::string& statement) {
    w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    w.line(per_lane + statement);
    w.close();
  };
  for (std::size_t k = 0; k < f.rows.size(); ++k) {
    const auto& rv = f.rows[k];
    const std::string var = "wf_row" + num(static_cast<std::int64_t>(k));
    if (!rv.reduce) {
      w.line(t + " " + var + "[" + T + "];");
      // A square root (layernorm's standard deviation): all lanes in one vector instruction
      // (rt::math::sqrt_lanes; a loop of std::sqrt does not vectorise while it may set errno).
      if (rv.element.op == expr::Op::Call && rv.element.fn == expr::Fn::Sqrt) {
        w.line(per_lane + var + "[wf_l] = " + expr::to_cpp(rv.element.args[0], ctx) + ";");
        w.line("wfgen::rt::math::sqrt_lanes<" + T + ">(" + var + ");");
        continue;
      }
      w.line(per_lane + var + "[wf_l] = " + expr::to_cpp(rv.element, ctx) + ";");
      continue;
    }
    expr::Expr element = loop_expr(rv.element);
    if (static_cast<int>(k) == cache) {
      // As in the row path: exp(a) stores a, then exp_in_place over the tile.
      const expr::Expr* exponent = exp_argument(element);
      columns("wf_tile_cache[wf_c * " + T + " + wf_l] = " + expr::to_cpp(exponent ? *exponent : element, ctx) + ";");
      if (exponent) w.line(ctx.math + "::exp_in_place(wf_tile_cache, wf_len * " + T + ");");
      element = kernel_name("cached", expr::Type::Float, p.dtype);
    }
    const std::string init = rv.op == spec::ReduceOp::Max   ? "wfgen::rt::lowest_value<" + t + ">()"
                             : rv.op == spec::ReduceOp::Min ? "wfgen::rt::highest_value<" + t + ">()"
                                                            : t + "(0)";
    const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
    w.line(t + " " + a + "[" + T + "];");
    w.line(per_lane + a + "[wf_l] = " + init + ";");
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
    if (extreme) w.line("int " + nan + "[" + T + "] = {};");
    if (!extreme) {
      // Sums: four chains of vector adds, columns c, c + 1, c + 2 and c + 3
      // (one chain waits on the add's latency for every column: 0.45 of
      // layernorm 64 x 32 went to its two sums), added at the end.
      for (const char* part : {"_1", "_2", "_3"}) w.line(t + " " + a + part + "[" + T + "];");
      w.line(per_lane + a + "_1[wf_l] = " + a + "_2[wf_l] = " + a + "_3[wf_l] = " + init + ";");
      const std::string c4 = a + "_c";  // the first of the four columns
      w.line("std::int64_t " + c4 + " = 0;");
      w.open("for (; " + c4 + " + 4 <= wf_len; " + c4 + " += 4)");
      for (int part = 0; part < 4; ++part) {
        const std::string into = part == 0 ? al : a + "_" + num(part) + "[wf_l]";
        col = part == 0 ? c4 : "(" + c4 + " + " + num(part) + ")";
        w.line(per_lane + into + " += " + expr::to_cpp(element, ctx) + ";");
      }
      col = "wf_c";
      w.close();
      w.open("for (std::int64_t wf_c = " + c4 + "; wf_c < wf_len; ++wf_c)");
    } else {
      w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    }
    w.open("for (int wf_l = 0; wf_l < " + T + "; ++wf_l)");
    w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
    w.line(combine);
    if (extreme) w.line(nan + "[wf_l] |= " + v + " != " + v + ";");
    w.close();
    w.close();
    if (!extreme) w.line(per_lane + al + " += (" + a + "_1[wf_l] + " + a + "_2[wf_l]) + " + a + "_3[wf_l];");
    if (extreme) w.line(per_lane + "if (" + nan + "[wf_l]) " + al + " = std::numeric_limits<" + t + ">::quiet_NaN();");
    acc = rv.op == spec::ReduceOp::Mean ? "(" + al + " / static_cast<" + t + ">(wf_len))" : al;
    w.line(t + " " + var + "[" + T + "];");
    w.line(per_lane + var + "[wf_l] = " + (rv.epilogue ? "static_cast<" + t + ">(" + expr::to_cpp(*rv.epilogue, ctx) + ")" : acc) + ";");
  }
  const std::string os = "wf_step[" + num(static_cast<std::int64_t>(out)) + "]";
  const std::string out_ptr = "wf_" + p.tensors[out].cpp;
  if (f.out_per_row) {
    w.line(per_lane + out_ptr + "[wf_l * " + os + "] = " + expr::to_cpp(f.out, ctx) + ";");
  } else {
    const expr::Expr value = loop_expr(out_expr);
    if (tile_out) {
      const std::string tile = "wf_tile_" + p.tensors[out].cpp;
      columns(tile + "[wf_c * " + T + " + wf_l] = " + expr::to_cpp(value, ctx) + ";");
      w.line("wfgen::rt::lanes_to_rows<" + T + ">(" + tile + ", wf_len, " + out_ptr + ", " + os + ");");
    } else {
      along_rows = true;
      w.open("for (int wf_l = 0; wf_l < " + T + "; ++wf_l)");
      w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + out_ptr + "[wf_l * " + os + " + wf_c] = " + expr::to_cpp(value, ctx) + ";");
      w.close();
    }
  }
  w.close();
  w.close();
}

// A fused row kernel (passes/fuse.cpp): per row of the iteration space, the
// row values in order (each reduction one loop over the row, which stays in
// cache), then one loop writing the output.
//
// When the output expression repeats a costly reduction element (softmax:
// out = exp(x - max) / sum, with sum = sum(exp(x - max))), the contiguous
// path first stores that element in the output row, reduces it from there,
// and the final loop reads it back: exp once per element, not twice. It
// does so only when the output row overlaps no input row.
}  // namespace

void emit_fused_rows(CodeWriter& w, const KernelPlan& p) {
  const lower::FusedBody& f = *p.fused;
  const int r = p.rank;
  const std::size_t n = p.tensors.size();
  const std::size_t out = n - 1;
  const std::string t = elem(p.dtype);
  // The reduction whose element the output row caches (-1: none), and the
  // output expression reading that cache as `cached`.
  int cache = -1;
  expr::Expr cached_out;
  if (!f.out_per_row && is_float(p.dtype)) {
    for (std::size_t k = f.rows.size(); k-- > 0 && cache < 0;) {
      const auto& rv = f.rows[k];
      if (!rv.reduce || rv.element.type != expr::Type::Float || !costly(rv.element)) continue;
      int uses = 0;
      expr::Expr e = replace_tree(f.out, rv.element, kernel_name("cached", expr::Type::Float, p.dtype), uses);
      if (uses == 0) continue;
      cache = static_cast<int>(k);
      cached_out = std::move(e);
    }
  }
  std::string plan_text;
  for (std::size_t k = 0; k < f.rows.size(); ++k) {
    const auto& rv = f.rows[k];
    plan_text += "row" + num(static_cast<std::int64_t>(k)) + " = " +
                 (rv.reduce ? std::string(spec::reduce_op_name(rv.op)) + "(" + rv.element.str() + ")" : rv.element.str()) +
                 (rv.epilogue ? " then " + rv.epilogue->str() : "") + "; ";
  }
  w.comment("per row: " + plan_text + "out = " + f.out.str());
  std::size_t lead = 0;
  while (lead < out && f.row_input[lead]) ++lead;
  const std::string& len_of = lead < out ? p.tensors[lead].cpp : p.tensors[out].cpp;
  w.line("const std::int64_t wf_len = " + len_of + ".shape[" + num(r - 1) + "];");
  std::string strides = "{";
  for (std::size_t k = 0; k < n; ++k) strides += (k ? ", " : "") + std::string("wfgen::rt::head<1>(") + p.tensors[k].cpp + ".strides)";
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", " + num(static_cast<std::int64_t>(n)) + "> wf_nest(wfgen::rt::head<1>(" +
         p.tensors[out].cpp + ".shape), " + strides + "}, " + num(static_cast<std::int64_t>(out)) + ");");
  std::string unit;
  for (std::size_t k = 0; k < n; ++k) {
    if (k < out ? f.row_input[k] : f.out_per_row) continue;
    w.line("const std::int64_t wf_s" + num(static_cast<std::int64_t>(k)) + " = " + p.tensors[k].cpp + ".strides[" + num(r - 1) + "];");
    unit += (unit.empty() ? "" : " && ") + std::string("wf_s") + num(static_cast<std::int64_t>(k)) + " == 1";
  }
  w.line("const bool wf_unit = " + (unit.empty() ? std::string("true") : unit) + ";");
  // A large output is written past the caches (rt::stream_store), from a
  // row of scratch on the stack when the output row would cache an element.
  const bool may_stream = !f.out_per_row;
  constexpr std::int64_t kScratch = 4096;
  if (may_stream)
    w.line("const bool wf_stream = wf_unit && wfgen::rt::streams_output<" + t + ">(wf_nest.total() * wf_len)" +
           (cache >= 0 ? " && wf_len <= " + num(kScratch) : std::string()) + ";");
  w.open("wf_nest.run(16384 / (wf_len > 0 ? wf_len : 1) + 1, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_rows)");
  if (may_stream && cache >= 0) w.line("alignas(64) " + t + " wf_scratch[" + num(kScratch) + "];");
  w.line("std::int64_t wf_r = 0;");
  emit_row_tiles(w, p, cache, cached_out);
  w.open("for (; wf_r < wf_rows; ++wf_r)");
  for (std::size_t k = 0; k < n; ++k) {
    const auto& tp = p.tensors[k];
    // (maybe_unused: a row value may leave an input unread, e.g. a mean of ones.)
    w.line(std::string("[[maybe_unused]] ") + (tp.written ? "" : "const ") + t + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" +
           num(static_cast<std::int64_t>(k)) + "] + wf_r * wf_step[" + num(static_cast<std::int64_t>(k)) + "];");
  }
  auto body = [&](bool unit_stride) {
    const bool caching = unit_stride && cache >= 0;
    expr::EmitContext ctx;
    ctx.dtype = p.dtype;
    ctx.math = math_namespace(p);
    std::string acc;            // the reduced value an epilogue reads as `acc`
    std::string col = "wf_c";   // the column being read
    const std::string out_row = "wf_" + p.tensors[out].cpp;
    const bool streaming = unit_stride && may_stream;
    // Where the cached element is stored: the output row, or (wf_cache) the
    // scratch row when the output is streamed.
    const std::string cache_row = streaming ? "wf_cache" : out_row;
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
    std::size_t paced = out;
    if (caching && exp_argument(f.rows[static_cast<std::size_t>(cache)].element))
      for (std::size_t k = 0; k < out && paced == out; ++k)
        if (!f.row_input[k]) paced = k;
    const std::string ahead = paced < out ? ", wf_ahead" : "";
    if (unit_stride) {
      const auto step = [](std::size_t k) { return "wf_step[" + num(static_cast<std::int64_t>(k)) + "]"; };
      if (paced < out)
        w.line("const " + t + "* const wf_ahead = wf_r + 4 < wf_rows && " + step(paced) + " != 0 ? wf_" + p.tensors[paced].cpp +
               " + 4 * " + step(paced) + " : nullptr;");
      std::string next;
      for (std::size_t k = 0; k < out; ++k)
        if (!f.row_input[k] && k != paced)
          next += " if (" + step(k) + " != 0) wfgen::rt::prefetch_row(wf_" + p.tensors[k].cpp + " + 2 * " + step(k) + ", wf_len);";
      if (!next.empty()) w.line("if (wf_r + 2 < wf_rows) {" + next + " }");
    }
    if (streaming) {
      // The streamed stores compute a block before storing it: only an
      // output row apart from every input row gives the same result.
      std::string apart = "wf_stream";
      if (!caching) {  // (the caching path checked this already)
        for (std::size_t k = 0; k < out; ++k)
          apart += " && wfgen::rt::disjoint(" + out_row + ", wf_len, wf_" + p.tensors[k].cpp + ", " + (f.row_input[k] ? "1" : "wf_len") + ")";
      }
      w.line("const bool wf_stream_row = " + apart + ";");
      if (caching) w.line(t + "* const wf_cache = wf_stream_row ? wf_scratch : " + out_row + ";");
    }
    ctx.name = [&](const std::string& name) -> std::string {
      if (name == "acc") return acc;
      if (name == "n") return "wf_len";
      if (name == "cached") return cache_row + "[" + col + "]";
      if (name.rfind("row", 0) == 0 || name.rfind("inv", 0) == 0) return "wf_" + name;
      for (std::size_t k = 0; k < out; ++k) {
        if (p.tensors[k].name != name) continue;
        if (f.row_input[k]) return "wf_" + name + "[0]";
        return "wf_" + name + (unit_stride ? "[" + col + "]" : "[" + col + " * wf_s" + num(static_cast<std::int64_t>(k)) + "]");
      }
      return name;
    };
    // "wf_<input>" when e names an input read along the row (not a spec
    // constant, not a per-row input), else "".
    const auto input_row_of = [&](const expr::Expr& e) -> std::string {
      if (e.op != expr::Op::Name || e.binding.kind == expr::Binding::Kind::Constant || e.type != expr::Type::Float) return "";
      for (std::size_t in = 0; in < out; ++in)
        if (!f.row_input[in] && p.tensors[in].name == e.text) return "wf_" + p.tensors[in].cpp;
      return "";
    };
    const auto invariant = [&p](const expr::Expr& e) { return row_invariant(p, e); };
    std::vector<expr::Expr> divisors;  // of this path's loops, reciprocals named inv0, inv1...
    // The loop expression `e` with its divisions by row values hoisted: the
    // reciprocals it adds are declared before the loop.
    auto loop_expr = [&](const expr::Expr& e) {
      const std::size_t before = divisors.size();
      expr::Expr hoisted = hoist_divisors(e, invariant, divisors, p.dtype);
      for (std::size_t k = before; k < divisors.size(); ++k)
        w.line("const " + t + " wf_inv" + num(static_cast<std::int64_t>(k)) + " = " + t + "(1) / " +
               expr::to_cpp(divisors[k], ctx) + ";");
      return hoisted;
    };
    // Row j = mean(E) and the sum of (E - row j)^2 of row k in one pass over
    // the row, as sums of d = E - s and of d * d with the shift s = E at
    // column 0: sum((E - mean)^2) = sum(d * d) - sum(d)^2 / n. Such a sum
    // loses to cancellation only what the shift's distance from the mean
    // adds to sum(d * d); when that is more than seven eighths of it (s more
    // than 2.6 standard deviations from the mean, or a NaN), a second pass
    // over the row, which is in cache, sums (E - row j)^2 as written. As the
    // shift is one of the elements, n (mean - s)^2 <= (n - 1) sum((E -
    // mean)^2), so even without that pass at most log2(n) bits cancel. Sets
    // `acc` to the mean; row k's sum is left in wf_sum<k>.
    auto emit_mean_and_spread = [&](int j, int k) {
      const std::string js = num(j), ks = num(k);
      const std::string shift = "wf_shift" + js, a = "wf_acc" + js, q = "wf_sq" + ks, sum = "wf_sum" + ks;
      const std::int64_t lane_count = partial_sum_lanes(p.dtype);
      const std::string lanes = num(lane_count);
      w.comment("row" + js + " and the sum of row" + ks + " in one pass: shifted sums (d = element - shift)");
      const expr::Expr element = loop_expr(f.rows[static_cast<std::size_t>(j)].element);
      col = "0";
      w.line("const " + t + " " + shift + " = wf_len > 0 ? " + t + "(" + expr::to_cpp(element, ctx) + ") : " + t + "(0);");
      w.line(t + " " + a + "_row = " + t + "(0), " + q + "_row = " + t + "(0);");
      const auto step = [&](const std::string& column, const std::string& into_a, const std::string& into_q) {
        col = column;
        w.line("const " + t + " wf_d = " + t + "(" + expr::to_cpp(element, ctx) + ") - " + shift + ";");
        w.line(into_a + " += wf_d;");
        w.line(into_q + " += wf_d * wf_d;");
      };
      w.open("if (wf_len >= " + num(2 * lane_count) + ")");
      w.line(t + " " + a + "[" + lanes + "], " + q + "[" + lanes + "];");
      w.line("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l) " + a + "[wf_l] = " + q + "[wf_l] = " + t + "(0);");
      const std::string jv = "wf_j" + js;
      w.line("std::int64_t " + jv + " = 0;");
      w.open("for (; " + jv + " + " + lanes + " <= wf_len; " + jv + " += " + lanes + ")");
      w.open("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l)");
      step(jv + " + wf_l", a + "[wf_l]", q + "[wf_l]");
      w.close();
      w.close();
      w.open("for (; " + jv + " < wf_len; ++" + jv + ")");
      step(jv, a + "[0]", q + "[0]");
      w.close();
      for (std::int64_t half = lane_count / 2; half >= 1; half /= 2) {
        const std::string hs = num(half);
        w.line("for (int wf_l = 0; wf_l < " + hs + "; ++wf_l) " + a + "[wf_l] += " + a + "[wf_l + " + hs + "], " + q + "[wf_l] += " + q + "[wf_l + " + hs + "];");
      }
      w.line(a + "_row = " + a + "[0];");
      w.line(q + "_row = " + q + "[0];");
      w.otherwise();
      w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
      step("wf_c", a + "_row", q + "_row");
      w.close();
      w.close();
      col = "wf_c";
      acc = "(" + shift + " + " + a + "_row / static_cast<" + t + ">(wf_len))";
      w.line(t + " " + sum + " = " + q + "_row - " + a + "_row * (" + a + "_row / static_cast<" + t + ">(wf_len));");
    };
    // After row j's declaration: the second pass for row k when the shift cancelled too much.
    auto emit_spread_check = [&](int k) {
      const std::string ks = num(k), q = "wf_sq" + ks + "_row", sum = "wf_sum" + ks;
      const expr::Expr element = loop_expr(f.rows[static_cast<std::size_t>(k)].element);
      w.comment("the shift lay far from the mean: sum row" + ks + "'s elements as written");
      w.open("if (!(" + sum + " >= " + t + "(0.125) * " + q + "))");
      w.line(sum + " = " + t + "(0);");
      w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + sum + " += " + expr::to_cpp(element, ctx) + ";");
      w.close();
    };
    // The row value `var` from `acc` (a mean already divided), through the row's epilogue if it has one.
    const auto declare_row = [&](const std::string& var, const lower::RowValue& rv) {
      w.line("const " + t + " " + var + " = " + (rv.epilogue ? "static_cast<" + t + ">(" + expr::to_cpp(*rv.epilogue, ctx) + ")" : acc) + ";");
    };
    // Row values summed in the pass of the mean before them (spread_rows), once that pass is written.
    std::vector<bool> in_mean_pass(f.rows.size(), false);
    const std::vector<int> spread = unit_stride ? spread_rows(f) : std::vector<int>(f.rows.size(), -1);
    for (std::size_t k = 0; k < f.rows.size(); ++k) {
      const auto& rv = f.rows[k];
      const std::string var = "wf_row" + num(static_cast<std::int64_t>(k));
      if (!rv.reduce) {
        w.line("const " + t + " " + var + " = " + expr::to_cpp(rv.element, ctx) + ";");
        continue;
      }
      if (in_mean_pass[k]) {
        const std::string sum = "wf_sum" + num(static_cast<std::int64_t>(k));
        acc = rv.op == spec::ReduceOp::Mean ? "(" + sum + " / static_cast<" + t + ">(wf_len))" : sum;
        declare_row(var, rv);
        continue;
      }
      if (spread[k] >= 0 && cache != static_cast<int>(k) && cache != spread[k]) {
        emit_mean_and_spread(static_cast<int>(k), spread[k]);
        in_mean_pass[static_cast<std::size_t>(spread[k])] = true;
        declare_row(var, rv);
        emit_spread_check(spread[k]);
        continue;
      }
      expr::Expr element = loop_expr(rv.element);
      const bool sums = rv.op == spec::ReduceOp::Sum || rv.op == spec::ReduceOp::Mean;
      const bool extreme = rv.op == spec::ReduceOp::Max || rv.op == spec::ReduceOp::Min;
      // The reduced value `acc` read from `sum` (a Sum, or a Mean's sum), then the row value.
      const auto declare_from_sum = [&](const std::string& sum) {
        acc = rv.op == spec::ReduceOp::Mean ? "(" + sum + " / static_cast<" + t + ">(wf_len))" : sum;
        declare_row(var, rv);
      };
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
      // (softmax's, log-sum-exp's) takes it instead of another pass.
      if (caching && static_cast<int>(k) == cache) {
        const expr::Expr* exponent = exp_argument(element);
        const expr::Expr* x = exponent && exponent->op == expr::Op::Sub ? &exponent->args[0] : nullptr;
        const std::string input_row = x && row_invariant(p, exponent->args[1]) ? input_row_of(*x) : std::string();
        const std::string exp_sum = "wf_exp_sum" + num(static_cast<std::int64_t>(k));
        const std::string keep_sum = sums ? "const " + t + " " + exp_sum + " = " : std::string();
        if (!input_row.empty()) {
          const char* helper = is_row_max_of(f, exponent->args[1], *x) ? "::exp_minus_max(" : "::exp_shifted(";
          w.line(keep_sum + ctx.math + helper + cache_row + ", " + input_row + ", " + t + "(" + expr::to_cpp(exponent->args[1], ctx) + "), wf_len" + ahead + ");");
        } else {
          w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + cache_row + "[wf_c] = " +
                 expr::to_cpp(exponent ? *exponent : element, ctx) + ";");
          if (exponent) w.line((sums ? keep_sum : std::string()) + ctx.math + "::exp_in_place(" + cache_row + ", wf_len" + ahead + ");");
        }
        if (exponent && sums) {
          declare_from_sum(exp_sum);
          continue;
        }
        element = kernel_name("cached", expr::Type::Float, p.dtype);
      }
      // The max (min) of an input's row: rt::math::max_row (min_row), on
      // AVX-512 two vectors a step with one NaN compare for both (the loop
      // below: a compare and a flag update each).
      if (unit_stride && extreme && is_float(p.dtype) && !(caching && static_cast<int>(k) == cache)) {
        const std::string input_row = input_row_of(element);
        if (!input_row.empty()) {
          acc = "wf_acc" + num(static_cast<std::int64_t>(k)) + "_row";
          w.line("const " + t + " " + acc + " = wfgen::rt::math::" + (rv.op == spec::ReduceOp::Max ? "max_row(" : "min_row(") + input_row + ", wf_len);");
          declare_row(var, rv);
          continue;
        }
      }
      std::string init = rv.op == spec::ReduceOp::Max   ? "wfgen::rt::lowest_value<" + t + ">()"
                         : rv.op == spec::ReduceOp::Min ? "wfgen::rt::highest_value<" + t + ">()"
                                                        : t + "(0)";
      // a <- a combined with v; for max and min NaN wins, as in the reduce kernels.
      auto combine = [&](const std::string& a, const std::string& v) {
        switch (rv.op) {
          // | and & on bools, not || and &&: no branches, so the loop vectorises.
          case spec::ReduceOp::Max: return a + " = ((" + v + " > " + a + ") | ((" + v + " != " + v + ") & (" + a + " == " + a + "))) ? " + v + " : " + a + ";";
          case spec::ReduceOp::Min: return a + " = ((" + v + " < " + a + ") | ((" + v + " != " + v + ") & (" + a + " == " + a + "))) ? " + v + " : " + a + ";";
          default: return a + " += " + v + ";";
        }
      };
      const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
      if (unit_stride) {
        // Independent accumulators (partial_sum_lanes: one chain is bound
        // by the latency of an add).
        const std::int64_t lane_count = partial_sum_lanes(p.dtype);
        const std::string lanes = num(lane_count);
        // Short rows take a plain loop here: setting up and folding the
        // lanes would cost more than the row (contiguous rows shorter than
        // two sets of lanes went through the tiles above; measured on 64 x 32
        // layernorm, 16 lanes here took 1.9 us against 1.5 us in tiles).
        const std::string result = a + "_row";
        w.line(t + " " + result + " = " + init + ";");
        w.open("if (wf_len >= " + num(2 * lane_count) + ")");
        w.line(t + " " + a + "[" + lanes + "];");
        w.line("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l) " + a + "[wf_l] = " + init + ";");
        // max/min: a plain comparison per lane (it vectorises) and a NaN
        // flag per lane; a NaN anywhere makes the result NaN, as in the reduce kernels.
        const std::string nan = "wf_nan" + num(static_cast<std::int64_t>(k));
        const std::string cmp = rv.op == spec::ReduceOp::Max ? " > " : " < ";
        if (extreme) w.line("int " + nan + "[" + lanes + "] = {};");
        const std::string j = "wf_j" + num(static_cast<std::int64_t>(k));
        w.line("std::int64_t " + j + " = 0;");
        w.open("for (; " + j + " + " + lanes + " <= wf_len; " + j + " += " + lanes + ")");
        w.open("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l)");
        col = j + " + wf_l";
        w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
        if (extreme) {
          w.line(a + "[wf_l] = wf_v" + cmp + a + "[wf_l] ? wf_v : " + a + "[wf_l];");
          w.line(nan + "[wf_l] |= wf_v != wf_v;");
        } else {
          w.line(combine(a + "[wf_l]", "wf_v"));
        }
        w.close();
        w.close();
        col = j;
        w.open("for (; " + j + " < wf_len; ++" + j + ")");
        w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
        w.line(combine(a + "[0]", "wf_v"));
        w.close();
        col = "wf_c";
        // Fold the lanes in halves, each half one vector operation: a chain
        // of 31 scalar steps (with NaN tests) took a fifth of a row of 1024.
        // Only lane 0 can hold a NaN here (from the tail loop) and it stays
        // there; the lanes' NaN flags are or-ed the same way.
        for (std::int64_t half = lane_count / 2; half >= 1; half /= 2) {
          const std::string other = a + "[wf_l + " + num(half) + "]";
          w.line("for (int wf_l = 0; wf_l < " + num(half) + "; ++wf_l) " +
                 (extreme ? a + "[wf_l] = " + other + cmp + a + "[wf_l] ? " + other + " : " + a + "[wf_l];" : combine(a + "[wf_l]", other)));
          if (extreme) w.line("for (int wf_l = 0; wf_l < " + num(half) + "; ++wf_l) " + nan + "[wf_l] |= " + nan + "[wf_l + " + num(half) + "];");
        }
        if (extreme) w.line("if (" + nan + "[0]) " + a + "[0] = std::numeric_limits<" + t + ">::quiet_NaN();");
        w.line(result + " = " + a + "[0];");
        w.otherwise();
        w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
        w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
        w.line(combine(result, "wf_v"));
        w.close();
        w.close();
        acc = result;
      } else {
        w.line(t + " " + a + " = " + init + ";");
        w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
        w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
        w.line(combine(a, "wf_v"));
        w.close();
        acc = a;
      }
      if (rv.op == spec::ReduceOp::Mean) acc = "(" + acc + " / static_cast<" + t + ">(wf_len))";
      declare_row(var, rv);
    }
    if (f.out_per_row) {
      w.line(out_row + "[0] = " + expr::to_cpp(f.out, ctx) + ";");
    } else {
      const expr::Expr value = loop_expr(caching ? cached_out : f.out);
      if (streaming) {
        w.open("if (wf_stream_row)");
        w.line("wfgen::rt::stream_store<false>(" + out_row + ", wf_len, [&](std::int64_t wf_c) { return " + t + "(" + expr::to_cpp(value, ctx) + "); });");
        w.otherwise();
      }
      w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + out_row +
             (unit_stride ? "[wf_c]" : "[wf_c * wf_s" + num(static_cast<std::int64_t>(out)) + "]") + " = " + expr::to_cpp(value, ctx) + ";");
      if (streaming) w.close();
    }
  };
  std::string contiguous = "wf_unit";
  if (cache >= 0) {
    // The cache writes the output row before the inputs are read again.
    for (std::size_t k = 0; k < out; ++k)
      contiguous += " && wfgen::rt::disjoint(wf_" + p.tensors[out].cpp + ", wf_len, wf_" + p.tensors[k].cpp + ", " +
                    (f.row_input[k] ? "1" : "wf_len") + ")";
  }
  w.open("if (" + contiguous + ")");
  body(true);
  w.otherwise();
  body(false);
  w.close();
  w.close();
  // The rows streamed without a fence each (stream_store<false>): one for this thread's share.
  if (may_stream) w.line("if (wf_stream) wfgen::rt::stream_fence();");
  w.close(");");
}

}  // namespace wfgen::emit
