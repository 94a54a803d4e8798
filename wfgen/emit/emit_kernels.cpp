#include "wfgen/emit/emit_kernels.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>

#include "wfgen/emit/builtins.hpp"
#include "wfgen/emit/code_writer.hpp"
#include "wfgen/support/names.hpp"
#include "wfgen/support/parallel.hpp"

namespace wfgen::emit {

namespace {

using lower::KernelPlan;
using lower::TensorParam;
using spec::ArgType;
using spec::BodyKind;

std::string num(std::int64_t v) { return std::to_string(v); }

std::string elem(rt::DType d) { return expr::cpp_type(d); }

bool is_float(rt::DType d) { return d == rt::DType::f32 || d == rt::DType::f64; }

std::string float_type(rt::DType d) { return d == rt::DType::f32 ? "float" : "double"; }

std::string view_type(const KernelPlan& p, const TensorParam& t) {
  return "wfgen::rt::View<" + std::string(t.written ? "" : "const ") + elem(p.dtype) + ", " + num(t.rank) + ">";
}

std::string scalar_type(const KernelPlan& p, ArgType t) {
  switch (t) {
    case ArgType::Int: return "std::int64_t";
    case ArgType::Float: return float_type(p.dtype);
    case ArgType::Bool: return "bool";
    case ArgType::Ints: return "std::span<const std::int64_t>";
    case ArgType::Floats: return "std::span<const double>";
  }
  return "?";
}

std::string return_type(const KernelPlan& p) {
  if (p.impl->kind == BodyKind::View) return "wfgen::rt::View<" + elem(p.dtype) + ", " + num(p.rank) + ">";
  return "void";
}

std::string signature(const KernelPlan& p) {
  std::string s = return_type(p) + " " + p.function + "(";
  bool first = true;
  for (const auto& t : p.tensors) {
    s += (first ? "" : ", ");
    if (p.impl->kind == BodyKind::View) s += "wfgen::rt::View<" + elem(p.dtype) + ", " + num(t.rank) + "> " + t.cpp;
    else s += view_type(p, t) + " " + t.cpp;
    first = false;
  }
  for (const auto& sc : p.scalars) {
    s += (first ? "" : ", ") + scalar_type(p, sc.type) + " " + sc.cpp;
    first = false;
  }
  return s + ")";
}

// "{A.strides, B.strides, OUT.strides}"
std::string strides_list(const KernelPlan& p, const std::string& wrap_before = "", const std::string& wrap_after = "") {
  std::string s = "{";
  for (std::size_t i = 0; i < p.tensors.size(); ++i)
    s += (i ? ", " : "") + wrap_before + p.tensors[i].cpp + ".strides" + wrap_after;
  return s + "}";
}

std::size_t written_index(const KernelPlan& p) {
  for (std::size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].written) return i;
  return p.tensors.size() - 1;
}

// The helpers the kernel's expressions call: a kernel fusion made for a
// build with `math: fast` gets rt::math::fast (its faster exp).
std::string math_namespace(const KernelPlan& p) { return p.fast_math ? "wfgen::rt::math::fast" : "wfgen::rt::math"; }

// How a row of an element-wise kernel indexes its tensors: all with step 1
// (Unit), each with its run-time step (Strided), or the output with step 1
// and the inputs with their steps held in locals wf_s<k> (UnitOutput: the
// compiler then knows the output's writes are consecutive and keeps the
// inputs' steps in registers, which a transposed operand's tiles need).
enum class Indexing { Unit, Strided, UnitOutput };

// The C++ for a name of a kernel expression: tensors are read through their
// row pointers, scalars are parameters.
expr::EmitContext context(const KernelPlan& p, const std::string& index_suffix_unit, Indexing indexing) {
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  ctx.name = [&p, index_suffix_unit, indexing](const std::string& name) -> std::string {
    for (std::size_t k = 0; k < p.tensors.size(); ++k) {
      if (p.tensors[k].name != name) continue;
      const std::string ks = num(static_cast<std::int64_t>(k));
      std::string index = index_suffix_unit;
      if (indexing == Indexing::Strided) index = "wf_i * wf_step[" + ks + "]";
      if (indexing == Indexing::UnitOutput && !p.tensors[k].written) index = "wf_i * wf_s" + ks;
      return "wf_" + p.tensors[k].cpp + "[" + index + "]";
    }
    for (const auto& s : p.scalars)
      if (s.name == name) return s.cpp;
    return name;
  };
  return ctx;
}

void row_pointers(CodeWriter& w, const KernelPlan& p, const std::string& extra = "") {
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    const auto& t = p.tensors[k];
    w.line(std::string(t.written ? "" : "const ") + elem(p.dtype) + "* wf_" + t.cpp + " = " + t.cpp + ".data + wf_off[" +
           num(static_cast<std::int64_t>(k)) + "]" + extra + ";");
  }
}

void emit_elementwise(CodeWriter& w, const KernelPlan& p) {
  std::size_t out = written_index(p);
  const auto& o = p.tensors[out];
  w.comment(o.name + " = " + p.body->str());
  // Elements are independent: the nest may run a transposed operand in tiles (rt::LoopNest).
  w.line("const wfgen::rt::LoopNest<" + num(p.rank) + ", " + num(static_cast<std::int64_t>(p.tensors.size())) + "> wf_nest(" +
         o.cpp + ".shape, " + strides_list(p) + ", " + num(static_cast<std::int64_t>(out)) + (p.rank >= 2 ? ", true" : "") + ");");
  w.line("const bool wf_contiguous = wf_nest.inner_contiguous();");
  const std::string run = "wf_nest.run(" + num(p.impl->parallel_grain) +
                          ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n)";
  const std::string value = expr::to_cpp(*p.body, context(p, "wf_i", Indexing::Unit));
  const std::string plain = "for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) wf_" + o.cpp + "[wf_i] = " + value + ";";
  // A large contiguous output is written past the caches (rt::stream_store),
  // unless it partly overlaps an input: the streamed blocks are computed
  // before they are stored, which only an exact in-place call tolerates. It
  // is a loop of its own, out of line: in the other one, its code would keep
  // the compiler from inlining that loop's rows (6 ns more per call of a
  // 16-element add).
  w.open("if (wf_contiguous && wfgen::rt::streams_output<" + elem(p.dtype) + ">(wf_nest.total()))");
  w.open("wfgen::rt::out_of_line([&]");
  w.open(run);
  w.line("(void)wf_step;  // contiguous: every step is 1");
  row_pointers(w, p);
  std::string apart;
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    if (k == out) continue;
    const std::string in = "wf_" + p.tensors[k].cpp, dst = "wf_" + o.cpp;
    apart += (apart.empty() ? "" : " && ") + std::string("(") + in + " == " + dst + " || wfgen::rt::disjoint(" + dst + ", wf_n, " + in + ", wf_n))";
  }
  w.open("if (" + (apart.empty() ? std::string("true") : apart) + ")");
  w.line("wfgen::rt::stream_store(wf_" + o.cpp + ", wf_n, [&](std::int64_t wf_i) { return " + elem(p.dtype) + "(" + value + "); });");
  w.otherwise();
  w.line(plain);
  w.close();
  w.close(");");
  w.close(");");
  w.line("return;");
  w.close();
  w.open(run);
  row_pointers(w, p);
  w.open("if (wf_contiguous)");
  w.line(plain);
  // The output walks its row with step 1 (LoopNest orders the loops by the
  // output's strides, so this is the usual strided case: a transposed or
  // broadcast input): the inputs' steps in locals, the output's known.
  w.otherwise_if("wf_step[" + num(static_cast<std::int64_t>(out)) + "] == 1");
  std::string steps;
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    if (k == out) continue;
    const std::string ks = num(static_cast<std::int64_t>(k));
    steps += (steps.empty() ? "const std::int64_t " : ", ") + std::string("wf_s") + ks + " = wf_step[" + ks + "]";
  }
  if (!steps.empty()) w.line(steps + ";");
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) wf_" + o.cpp + "[wf_i] = " +
         expr::to_cpp(*p.body, context(p, "wf_i", Indexing::UnitOutput)) + ";");
  w.otherwise();
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) wf_" + o.cpp + "[wf_i * wf_step[" +
         num(static_cast<std::int64_t>(out)) + "]] = " + expr::to_cpp(*p.body, context(p, "", Indexing::Strided)) + ";");
  w.close();
  w.close(");");
}

void emit_reduce(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  spec::ReduceOp op = p.impl->reduce_op;
  bool arg = op == spec::ReduceOp::ArgMax || op == spec::ReduceOp::ArgMin;
  bool additive = op == spec::ReduceOp::Sum || op == spec::ReduceOp::Mean;
  std::string t = elem(p.dtype);
  std::string acc_t = additive && !is_float(p.dtype) ? "std::int64_t" : t;
  w.comment(o.name + " = " + spec::reduce_op_name(op) + " of " + x.name + " along its last axis" +
            (p.prologue ? ", of " + p.prologue->str() : "") + (p.epilogue ? ", then " + p.epilogue->str() : ""));
  w.line("const std::int64_t wf_len = " + x.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const std::int64_t wf_stride = " + x.cpp + ".strides[" + num(r - 1) + "];");
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", 2> wf_nest(wfgen::rt::head<1>(" + x.cpp +
         ".shape), {wfgen::rt::head<1>(" + x.cpp + ".strides), wfgen::rt::head<1>(" + o.cpp + ".strides)}, 1);");
  w.open("wf_nest.run(" + num(p.impl->parallel_grain) +
         ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_rows)");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r)");
  w.line("const " + t + "* wf_" + x.cpp + " = " + x.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
  std::string init;
  switch (op) {
    case spec::ReduceOp::Sum:
    case spec::ReduceOp::Mean: init = acc_t + "(0)"; break;
    case spec::ReduceOp::Max:
    case spec::ReduceOp::ArgMax: init = "wfgen::rt::lowest_value<" + t + ">()"; break;
    case spec::ReduceOp::Min:
    case spec::ReduceOp::ArgMin: init = "wfgen::rt::highest_value<" + t + ">()"; break;
  }
  w.line(acc_t + " wf_acc = " + init + ";");
  if (arg) w.line("std::int64_t wf_arg = 0;");
  auto loop = [&](bool unit) {
    std::string element = "wf_" + x.cpp + "[" + std::string(unit ? "wf_i" : "wf_i * wf_stride") + "]";
    std::string value = element;
    if (p.prologue) {
      expr::EmitContext ctx;
      ctx.dtype = p.dtype;
      ctx.math = math_namespace(p);
      ctx.name = [&](const std::string& n) -> std::string {
        if (n == x.name) return element;
        for (const auto& s : p.scalars)
          if (s.name == n) return s.cpp;
        return n;
      };
      value = expr::to_cpp(*p.prologue, ctx);
    }
    w.open("for (std::int64_t wf_i = 0; wf_i < wf_len; ++wf_i)");
    w.line("const " + t + " wf_v = " + value + ";");
    switch (op) {
      case spec::ReduceOp::Sum:
      case spec::ReduceOp::Mean: w.line("wf_acc += wf_v;"); break;
      // NaN wins, as in numpy: once wf_acc is NaN no comparison replaces it.
      case spec::ReduceOp::Max: w.line("if (wf_v > wf_acc || (wf_v != wf_v && wf_acc == wf_acc)) wf_acc = wf_v;"); break;
      case spec::ReduceOp::Min: w.line("if (wf_v < wf_acc || (wf_v != wf_v && wf_acc == wf_acc)) wf_acc = wf_v;"); break;
      case spec::ReduceOp::ArgMax:
        w.open("if (wf_v > wf_acc || (wf_v != wf_v && wf_acc == wf_acc) || wf_i == 0)");
        w.line("wf_acc = wf_v;").line("wf_arg = wf_i;");
        w.close();
        break;
      case spec::ReduceOp::ArgMin:
        w.open("if (wf_v < wf_acc || (wf_v != wf_v && wf_acc == wf_acc) || wf_i == 0)");
        w.line("wf_acc = wf_v;").line("wf_arg = wf_i;");
        w.close();
        break;
    }
    w.close();
  };
  w.open("if (wf_stride == 1)");
  loop(true);
  w.otherwise();
  loop(false);
  w.close();
  std::string result = arg ? "wf_arg" : "wf_acc";
  if (op == spec::ReduceOp::Mean) {
    result = is_float(p.dtype) ? "wf_acc / static_cast<" + t + ">(wf_len)" : "(wf_len > 0 ? wf_acc / wf_len : 0)";
  }
  if (p.epilogue) {
    expr::EmitContext ctx;
    ctx.dtype = p.dtype;
    ctx.math = math_namespace(p);
    std::string reduced = "static_cast<" + t + ">(" + result + ")";
    ctx.name = [&](const std::string& n) -> std::string {
      if (n == "acc") return reduced;
      if (n == "n") return "wf_len";
      for (const auto& s : p.scalars)
        if (s.name == n) return s.cpp;
      return n;
    };
    result = expr::to_cpp(*p.epilogue, ctx);
  }
  w.line(o.cpp + ".data[wf_off[1] + wf_r * wf_step[1]] = static_cast<" + t + ">(" + result + ");");
  w.close();
  w.close(");");
}

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
  const std::int64_t size = static_cast<std::int64_t>(rt::dtype_size(p.dtype));
  const std::int64_t lanes = 64 / size;
  const std::int64_t max_len = 2 * std::min<std::int64_t>(32, 128 / size);
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
    w.line(std::string(tp.written ? "" : "const ") + t + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" + ks + "] + wf_r * wf_step[" + ks + "];");
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
    w.open("for (int wf_l = 0; wf_l < " + T + "; ++wf_l)");
    w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) wf_tile_" + tp.cpp + "[wf_c * " + T + " + wf_l] = wf_" + tp.cpp + "[wf_l * wf_step[" + ks + "] + wf_c];");
    w.close();
  }
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  std::string acc;
  bool along_rows = false;  // the last loop of a row-major output: inputs read in place
  ctx.name = [&](const std::string& name) -> std::string {
    if (name == "acc") return acc;
    if (name == "n") return "wf_len";
    if (name == "cached") return "wf_tile_cache[wf_c * " + T + " + wf_l]";
    if (name.rfind("row", 0) == 0 || name.rfind("inv", 0) == 0) return "wf_" + name + "[wf_l]";
    for (std::size_t k = 0; k < out; ++k) {
      if (p.tensors[k].name != name) continue;
      if (f.row_input[k]) return "wf_tile_" + p.tensors[k].cpp + "[wf_l]";
      if (along_rows || !tiled[k]) return "wf_" + p.tensors[k].cpp + "[wf_l * wf_step[" + num(static_cast<std::int64_t>(k)) + "] + wf_c]";
      return "wf_tile_" + p.tensors[k].cpp + "[wf_c * " + T + " + wf_l]";
    }
    return name;
  };
  std::function<bool(const expr::Expr&)> invariant = [&](const expr::Expr& e) {
    if (e.op == expr::Op::Name && e.binding.kind != expr::Binding::Kind::Constant) {
      if (e.text == "n" || e.text.rfind("row", 0) == 0 || e.text.rfind("inv", 0) == 0) return true;
      for (std::size_t k = 0; k < out; ++k)
        if (p.tensors[k].name == e.text) return static_cast<bool>(f.row_input[k]);
      return false;
    }
    for (const auto& a : e.args)
      if (!invariant(a)) return false;
    return true;
  };
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
      w.line(per_lane + var + "[wf_l] = " + expr::to_cpp(rv.element, ctx) + ";");
      continue;
    }
    expr::Expr element = loop_expr(rv.element);
    if (static_cast<int>(k) == cache) {
      columns("wf_tile_cache[wf_c * " + T + " + wf_l] = " + expr::to_cpp(element, ctx) + ";");
      element = kernel_name("cached", expr::Type::Float, p.dtype);
    }
    const std::string init = rv.op == spec::ReduceOp::Max   ? "wfgen::rt::lowest_value<" + t + ">()"
                             : rv.op == spec::ReduceOp::Min ? "wfgen::rt::highest_value<" + t + ">()"
                                                            : t + "(0)";
    const std::string a = "wf_acc" + num(static_cast<std::int64_t>(k));
    w.line(t + " " + a + "[" + T + "];");
    w.line(per_lane + a + "[wf_l] = " + init + ";");
    const std::string al = a + "[wf_l]", v = "wf_v";
    // a <- a combined with v, branch-free; for max and min NaN wins, as in the reduce kernels.
    std::string combine;
    switch (rv.op) {
      case spec::ReduceOp::Max: combine = al + " = ((" + v + " > " + al + ") | ((" + v + " != " + v + ") & (" + al + " == " + al + "))) ? " + v + " : " + al + ";"; break;
      case spec::ReduceOp::Min: combine = al + " = ((" + v + " < " + al + ") | ((" + v + " != " + v + ") & (" + al + " == " + al + "))) ? " + v + " : " + al + ";"; break;
      default: combine = al + " += " + v + ";"; break;
    }
    w.open("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c)");
    w.open("for (int wf_l = 0; wf_l < " + T + "; ++wf_l)");
    w.line("const " + t + " wf_v = " + expr::to_cpp(element, ctx) + ";");
    w.line(combine);
    w.close();
    w.close();
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
      w.open("for (int wf_l = 0; wf_l < " + T + "; ++wf_l)");
      w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + out_ptr + "[wf_l * " + os + " + wf_c] = " + tile + "[wf_c * " + T + " + wf_l];");
      w.close();
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
    w.line(std::string(tp.written ? "" : "const ") + t + "* wf_" + tp.cpp + " = " + tp.cpp + ".data + wf_off[" +
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
    // Names whose value is the same along the row: row values, divisors'
    // reciprocals, row inputs, the row length and constants.
    std::function<bool(const expr::Expr&)> invariant = [&](const expr::Expr& e) {
      if (e.op == expr::Op::Name && e.binding.kind != expr::Binding::Kind::Constant) {
        if (e.text == "n" || e.text.rfind("row", 0) == 0 || e.text.rfind("inv", 0) == 0) return true;
        for (std::size_t k = 0; k < out; ++k)
          if (p.tensors[k].name == e.text) return static_cast<bool>(f.row_input[k]);
        return false;
      }
      for (const auto& a : e.args)
        if (!invariant(a)) return false;
      return true;
    };
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
    for (std::size_t k = 0; k < f.rows.size(); ++k) {
      const auto& rv = f.rows[k];
      const std::string var = "wf_row" + num(static_cast<std::int64_t>(k));
      if (!rv.reduce) {
        w.line("const " + t + " " + var + " = " + expr::to_cpp(rv.element, ctx) + ";");
        continue;
      }
      expr::Expr element = loop_expr(rv.element);
      // The cached element: a loop that only stores it in the output row
      // (a plain map, which vectorises at the machine's full width), then
      // the reduction reads it back from there.
      if (caching && static_cast<int>(k) == cache) {
        w.line("for (std::int64_t wf_c = 0; wf_c < wf_len; ++wf_c) " + cache_row + "[wf_c] = " +
               expr::to_cpp(element, ctx) + ";");
        element = kernel_name("cached", expr::Type::Float, p.dtype);
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
        // Independent accumulators, 128 bytes of them (32 floats, 16
        // doubles), so the loop vectorises into four chains of vector
        // operations that do not wait on each other (one chain is bound by
        // the latency of an add). The sum's order differs from a sequential
        // one by rounding only.
        const std::int64_t lane_count = std::min<std::int64_t>(32, 128 / static_cast<std::int64_t>(rt::dtype_size(p.dtype)));
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
        const bool extreme = rv.op == spec::ReduceOp::Max || rv.op == spec::ReduceOp::Min;
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
      w.line("const " + t + " " + var + " = " + (rv.epilogue ? "static_cast<" + t + ">(" + expr::to_cpp(*rv.epilogue, ctx) + ")" : acc) + ";");
    }
    if (f.out_per_row) {
      w.line(out_row + "[0] = " + expr::to_cpp(f.out, ctx) + ";");
    } else {
      const expr::Expr value = loop_expr(caching ? cached_out : f.out);
      if (streaming) {
        w.open("if (wf_stream_row)");
        w.line("wfgen::rt::stream_store(" + out_row + ", wf_len, [&](std::int64_t wf_c) { return " + t + "(" + expr::to_cpp(value, ctx) + "); });");
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
  w.close(");");
}

void emit_gemm(CodeWriter& w, const KernelPlan& p) {
  const auto& a = p.tensors[0];
  const auto& b = p.tensors[1];
  const auto& c = p.tensors[2];
  const int r = p.rank;
  std::string fn = p.impl->device == "blas" ? "wfgen::rt::blas_gemm" : "wfgen::rt::gemm";
  w.comment(c.name + (p.accumulate ? " += " : " = ") + a.name + " " + b.name +
            (p.impl->device == "blas" ? ", through cblas" : ", std-only blocked GEMM") + (r > 2 ? ", for each matrix of the batch dims" : ""));
  w.line("const std::int64_t wf_m = " + c.cpp + ".shape[" + num(r - 2) + "], wf_n = " + c.cpp + ".shape[" + num(r - 1) +
         "], wf_k = " + a.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const wfgen::rt::LoopNest<" + num(r - 2) + ", 3> wf_batch(wfgen::rt::head<2>(" + c.cpp + ".shape), " +
         strides_list(p, "wfgen::rt::head<2>(", ")") + ", 2);");
  w.open("wf_batch.run(0, [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_count)");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_count; ++wf_r)");
  auto operand = [&](const TensorParam& t, int k) {
    return t.cpp + ".data + wf_off[" + num(k) + "] + wf_r * wf_step[" + num(k) + "], " + t.cpp + ".strides[" + num(r - 2) +
           "], " + t.cpp + ".strides[" + num(r - 1) + "]";
  };
  w.line(fn + "<" + elem(p.dtype) + ">(wf_m, wf_n, wf_k, " + operand(a, 0) + ",");
  w.line("    " + operand(b, 1) + ", " + operand(c, 2) + (p.accumulate ? ", /*accumulate=*/true" : "") + ");");
  w.close();
  w.close(");");
}

void emit_view(CodeWriter& w, const KernelPlan& p) {
  const std::string& v = p.impl->view;
  const int r = p.rank;
  if (v == "transpose") {
    w.comment("the last two axes swap; no data moves");
    w.line("std::swap(A.shape[" + num(r - 2) + "], A.shape[" + num(r - 1) + "]);");
    w.line("std::swap(A.strides[" + num(r - 2) + "], A.strides[" + num(r - 1) + "]);");
    w.line("return A;");
    return;
  }
  // permute: perm must be a permutation of 0..R-1.
  const std::string& perm = p.scalars.front().cpp;
  w.line("wfgen::rt::View<" + elem(p.dtype) + ", " + num(r) + "> wf_out = A;");
  w.line("bool wf_seen[" + num(r) + "] = {};");
  w.open("if (" + perm + ".size() != " + num(r) + ")");
  w.line("wfgen::rt::fail(wfgen::rt::ErrorCode::InvalidArgument, \"" + p.function + ": perm has \" + std::to_string(" +
         perm + ".size()) + \" entries, expected " + num(r) + "\");");
  w.close();
  w.open("for (int wf_d = 0; wf_d < " + num(r) + "; ++wf_d)");
  w.line("const std::int64_t wf_from = " + perm + "[static_cast<std::size_t>(wf_d)];");
  w.open("if (wf_from < 0 || wf_from >= " + num(r) + " || wf_seen[wf_from])");
  w.line("wfgen::rt::fail(wfgen::rt::ErrorCode::InvalidArgument, \"" + p.function +
         ": perm is not a permutation of 0.." + num(r - 1) + "\");");
  w.close();
  w.line("wf_seen[wf_from] = true;");
  w.line("wf_out.shape[wf_d] = A.shape[wf_from];");
  w.line("wf_out.strides[wf_d] = A.strides[wf_from];");
  w.close();
  w.line("return wf_out;");
}

void emit_kernel(CodeWriter& w, const KernelPlan& p) {
  w.comment(p.node->name + ": " + p.node->where.str());
  if (!p.node->doc.empty()) w.comment(quote(p.node->doc, 200));
  w.open(signature(p));
  switch (p.impl->kind) {
    case BodyKind::Elementwise: emit_elementwise(w, p); break;
    case BodyKind::Reduce: emit_reduce(w, p); break;
    case BodyKind::Gemm: emit_gemm(w, p); break;
    case BodyKind::View: emit_view(w, p); break;
    case BodyKind::Builtin:
      emit_builtin(w, p);
      break;
    case BodyKind::Fused: emit_fused_rows(w, p); break;
    case BodyKind::Build: {
      w.comment("runs the generated class of build '" + p.impl->build + "' (one instance per thread, with its seeded parameters)");
      w.line("thread_local " + p.impl->build + " wf_model;");
      std::string args;
      for (const auto& t : p.tensors) {
        if (t.written) continue;
        args += (args.empty() ? "" : ", ") + std::string("wfgen::rt::Tensor::borrow(const_cast<") + elem(p.dtype) + "*>(" + t.cpp +
                ".data), wfgen::rt::Shape(" + t.cpp + ".shape.begin(), " + t.cpp + ".shape.end()), wfgen::rt::Shape(" + t.cpp +
                ".strides.begin(), " + t.cpp + ".strides.end()))";
      }
      w.line("const std::vector<wfgen::rt::Tensor> wf_out = wf_model.forward(" + args + ");");
      std::size_t k = 0;
      for (const auto& t : p.tensors) {
        if (!t.written) continue;
        w.line("wfgen::rt::Tensor::borrow(" + t.cpp + ".data, wfgen::rt::Shape(" + t.cpp + ".shape.begin(), " + t.cpp +
               ".shape.end()), wfgen::rt::Shape(" + t.cpp + ".strides.begin(), " + t.cpp + ".strides.end())).copy_from(wf_out[" +
               num(static_cast<std::int64_t>(k++)) + "]);");
      }
      break;
    }
    case BodyKind::Cpp: {
      w.comment("the user's kernel " + p.cpp_call + " from " + p.cpp_include + ", checked by wfgen against the node");
      std::string args;
      for (const auto& t : p.tensors) args += (args.empty() ? "" : ", ") + t.cpp;
      for (const auto& s : p.scalars) {
        std::string v = s.cpp;
        // Lists go as std::vector lvalues, which bind to both forms a kernel may take.
        if (s.type == ArgType::Ints || s.type == ArgType::Floats) {
          std::string vt = s.type == ArgType::Ints ? "std::vector<std::int64_t>" : "std::vector<double>";
          w.line("const " + vt + " wf_" + s.cpp + "(" + s.cpp + ".begin(), " + s.cpp + ".end());");
          v = "wf_" + s.cpp;
        }
        args += (args.empty() ? "" : ", ") + v;
      }
      w.line(p.cpp_call + "(" + args + ");");
      break;
    }
  }
  w.close();
}

// The type-erased entry point of a kernel, for the kernel table.
void emit_erased(CodeWriter& w, const KernelPlan& p) {
  w.open("void " + p.function + "_erased(wfgen::rt::TensorRef* wf_t, const wfgen::rt::ScalarArg* wf_s)");
  w.line("(void)wf_s;");
  std::string call = p.function + "(";
  bool view = p.impl->kind == BodyKind::View;
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    const auto& t = p.tensors[k];
    std::string ty = std::string(t.written || view ? "" : "const ") + elem(p.dtype);
    call += std::string(k ? ", " : "") + "wfgen::rt::view_of<" + ty + ", " + num(t.rank) + ">(wf_t[" +
            num(static_cast<std::int64_t>(k)) + "], \"" + p.function + "\", \"" + t.name + "\")";
  }
  for (std::size_t k = 0; k < p.scalars.size(); ++k) {
    std::string s = "wf_s[" + num(static_cast<std::int64_t>(k)) + "]";
    std::string v;
    switch (p.scalars[k].type) {
      case ArgType::Int: v = s + ".i"; break;
      case ArgType::Float: v = "static_cast<" + float_type(p.dtype) + ">(" + s + ".f)"; break;
      case ArgType::Bool: v = s + ".b"; break;
      case ArgType::Ints: v = "std::span<const std::int64_t>(" + s + ".ints, static_cast<std::size_t>(" + s + ".count))"; break;
      case ArgType::Floats: v = "std::span<const double>(" + s + ".floats, static_cast<std::size_t>(" + s + ".count))"; break;
    }
    call += (p.tensors.empty() && k == 0 ? "" : ", ") + v;
  }
  call += ")";
  if (view) {
    w.line("const auto wf_v = " + call + ";");
    w.line("wf_t[1] = wf_t[0];");
    w.line("wf_t[1].data = wf_v.data;");
    w.open("for (int wf_d = 0; wf_d < " + num(p.rank) + "; ++wf_d)");
    w.line("wf_t[1].shape[wf_d] = wf_v.shape[wf_d];");
    w.line("wf_t[1].strides[wf_d] = wf_v.strides[wf_d];");
    w.close();
  } else {
    w.line(call + ";");
  }
  w.close();
}

std::string file_of(const KernelPlan& p) {
  if (p.node->fused) return "fused.cpp";
  std::string base = lower_name(p.node->name);
  // The build's own class is <build>.cpp: its node kernel goes next to it.
  if (p.impl->kind == BodyKind::Build) return base + "_node.cpp";
  if (p.impl->device != "cpu") base += "_" + p.impl->device;
  return base + ".cpp";
}

const char* kHeaderBanner =
    "// Generated by wfgen from the specs; do not edit. Regenerate with `wfgen gen`.\n";

}  // namespace

std::vector<OutputFile> emit_kernels(const std::vector<lower::KernelPlan>& plans, const KernelEmitOptions& options) {
  std::vector<OutputFile> files;
  // kernels.hpp
  {
    CodeWriter w;
    w.block(kHeaderBanner);
    w.line("#pragma once").line();
    w.line("#include <cstdint>").line("#include <span>").line();
    w.line("#include \"wfgen/kernel_support.hpp\"").line("#include \"wfgen/runtime_types.hpp\"").line();
    w.line("namespace " + options.ns + " {").line();
    for (const auto& p : plans) {
      w.comment(p.node->name + ": " + p.node->where.str());
      w.line(signature(p) + ";");
      w.line("void " + p.function + "_erased(wfgen::rt::TensorRef* tensors, const wfgen::rt::ScalarArg* scalars);");
      w.line();
    }
    w.comment("Every kernel above, type-erased, in the order of the specs.");
    w.line("std::span<const wfgen::rt::KernelEntry> kernel_table();").line();
    w.line("}  // namespace " + options.ns);
    files.push_back({"kernels.hpp", w.str()});
  }
  // One source per node and device, in first-appearance order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const KernelPlan*>> by_file;
  for (const auto& p : plans) {
    std::string f = file_of(p);
    if (!by_file.count(f)) order.push_back(f);
    by_file[f].push_back(&p);
  }
  // The node files do not depend on each other: written by options.jobs threads.
  std::vector<OutputFile> node_files(order.size());
  parallel_for(order.size(), options.jobs, [&](std::size_t i) {
    const std::string& f = order[i];
    const auto& ps = by_file.at(f);
    CodeWriter w;
    w.block(kHeaderBanner);
    const spec::Node* node = ps.front()->node;
    if (node->fused) w.comment("Kernels made by fusion: each runs several calls of a build in one pass (see `wfgen explain`).");
    else w.comment("Kernels of node '" + node->name + "' on the " + ps.front()->impl->device + " device (" + node->loc.str() + ").");
    w.line("#include <cmath>").line("#include <cstdint>").line("#include <limits>").line("#include <span>").line("#include <string>").line("#include <utility>").line("#include <vector>").line();
    w.line("#include \"kernels.hpp\"");
    if (ps.front()->impl->device == "blas") w.line("#include \"wfgen/blas_support.hpp\"");
    w.line("#include \"wfgen/kernel_math.hpp\"").line("#include \"wfgen/kernel_support.hpp\"");
    if (!ps.front()->cpp_include.empty()) w.line("#include \"" + ps.front()->cpp_include + "\"");
    if (ps.front()->impl->kind == BodyKind::Build) w.line("#include \"" + ps.front()->impl->build + ".hpp\"").line("#include \"wfgen/runtime.hpp\"");
    w.line().line("namespace " + options.ns + " {").line();
    for (const auto* p : ps) {
      emit_kernel(w, *p);
      w.line();
      emit_erased(w, *p);
      w.line();
    }
    w.line("}  // namespace " + options.ns);
    node_files[i] = {f, w.str()};
  });
  files.insert(files.end(), std::make_move_iterator(node_files.begin()), std::make_move_iterator(node_files.end()));
  // kernel_table.cpp
  {
    CodeWriter w;
    w.block(kHeaderBanner);
    w.line("#include \"kernels.hpp\"").line();
    w.line("namespace " + options.ns + " {").line();
    w.open("namespace");
    w.open("const wfgen::rt::KernelEntry kTable[] =");
    for (const auto& p : plans) {
      w.line("{\"" + p.function + "\", \"" + p.node->name + "\", \"" + p.impl->device + "\", wfgen::rt::DType::" +
             rt::dtype_name(p.dtype) + ", " + num(p.rank) + ", " +
             // A view kernel also writes its result view into the slot after its input.
             num(static_cast<std::int64_t>(p.tensors.size() + (p.impl->kind == BodyKind::View ? 1 : 0))) + ", " +
             num(static_cast<std::int64_t>(p.scalars.size())) + ", &" + p.function + "_erased},");
    }
    if (plans.empty()) w.line("{nullptr, nullptr, nullptr, wfgen::rt::DType::f32, 0, 0, 0, nullptr},");
    w.close(";");
    w.close("  // namespace");
    w.line();
    w.open("std::span<const wfgen::rt::KernelEntry> kernel_table()");
    w.line(plans.empty() ? "return {};" : "return kTable;");
    w.close();
    w.line().line("}  // namespace " + options.ns);
    files.push_back({"kernel_table.cpp", w.str()});
  }
  return files;
}

}  // namespace wfgen::emit
