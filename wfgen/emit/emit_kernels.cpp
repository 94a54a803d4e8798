#include "wfgen/emit/emit_kernels.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "wfgen/emit/builtin_support.hpp"
#include "wfgen/emit/builtins.hpp"
#include "wfgen/emit/code_writer.hpp"
#include "wfgen/emit/row_kernels.hpp"
#include "wfgen/emit/vector_lanes.hpp"
#include "wfgen/support/names.hpp"
#include "wfgen/support/parallel.hpp"

namespace wfgen::emit {

namespace {

using lower::KernelPlan;
using lower::TensorParam;
using spec::ArgType;
using spec::BodyKind;
using builtin::num;

std::string elem(rt::DType d) { return expr::cpp_type(d); }


std::string float_type(rt::DType d) { return d == rt::DType::f32 ? "float" : "double"; }

std::string view_type(const KernelPlan& p, const TensorParam& t) {
  return "wfgen::rt::View<" + std::string(t.written ? "" : "const ") + elem(t.dtype.value_or(p.dtype)) + ", " + num(t.rank) + ">";
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

// How a row of an element-wise kernel indexes its tensors: all with step 1
// (Unit), each with its run-time step (Strided), or the output with step 1
// and the inputs with their steps held in locals wf_s<k> (UnitOutput: the
// compiler then knows the output's writes are consecutive and keeps the
// inputs' steps in registers, which a transposed operand's tiles need), or
// the output with step 1 and each input with step 1 or 0, a value repeated
// along the row (UnitOrRepeated: `wf_s<k> != 0 ? wf_i : 0`, which the
// compiler unswitches into loops it vectorises, where a step in a variable
// would make every load of a broadcast input a gather).
enum class Indexing { Unit, Strided, UnitOutput, UnitOrRepeated };

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
      if (indexing == Indexing::UnitOrRepeated && !p.tensors[k].written) index = "wf_s" + ks + " != 0 ? wf_i : 0";
      return p.tensors[k].local() + "[" + index + "]";
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
    w.line(std::string(t.written ? "" : "const ") + elem(p.dtype) + "* " + t.local() + " = " + t.cpp + ".data + wf_off[" +
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
  const std::string plain = "for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) " + o.local() + "[wf_i] = " + value + ";";
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
    const std::string in = p.tensors[k].local(), dst = o.local();
    apart += (apart.empty() ? "" : " && ") + std::string("(") + in + " == " + dst + " || wfgen::rt::disjoint(" + dst + ", wf_n, " + in + ", wf_n))";
  }
  w.open("if (" + (apart.empty() ? std::string("true") : apart) + ")");
  w.line("wfgen::rt::stream_store(" + o.local() + ", wf_n, [&](std::int64_t wf_i) { return " + elem(p.dtype) + "(" + value + "); });");
  w.otherwise();
  w.line(plain);
  w.close();
  w.close(");");
  w.close(");");
  w.line("return;");
  w.close();
  // One run of wf_n elements along the nest's inner dim, operand k's elements wf_step[k] apart.
  std::string params, steps_of_tiles, tile_rows, run_rows;
  std::vector<std::string> tiles;
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    const auto& t = p.tensors[k];
    const std::string ks = num(static_cast<std::int64_t>(k)), sep = k ? ", " : "";
    params += sep + (t.written ? "" : "const ") + elem(p.dtype) + "* " + t.local();
    run_rows += sep + t.cpp + ".data + wf_off[" + ks + "]";
    if (k == out) {
      steps_of_tiles += sep + "wf_col_step[" + ks + "]";
      tile_rows += sep + t.cpp + ".data + wf_off[" + ks + "] + wf_r * wf_row_step[" + ks + "]";
      continue;
    }
    const std::string tile = t.block();
    tiles.push_back("const wfgen::rt::TileOperand<const " + elem(p.dtype) + "> " + tile + "(" + t.cpp + ".data + wf_off[" + ks + "], wf_row_step[" +
                    ks + "], wf_col_step[" + ks + "], wf_rows, wf_cols);");
    steps_of_tiles += sep + tile + ".step()";
    tile_rows += sep + tile + ".row(wf_r)";
  }
  w.open("auto wf_row = [&](" + params + ", const std::int64_t* wf_step, std::int64_t wf_n)");
  w.open("if (wf_contiguous)");
  w.line(plain);
  // The output walks its row with step 1 (LoopNest orders the loops by the
  // output's strides, so this is the usual strided case: a transposed or
  // broadcast input): the inputs' steps in locals, the output's known.
  w.otherwise_if("wf_step[" + num(static_cast<std::int64_t>(out)) + "] == 1");
  std::string steps, repeated;
  for (std::size_t k = 0; k < p.tensors.size(); ++k) {
    if (k == out) continue;
    const std::string ks = num(static_cast<std::int64_t>(k));
    steps += (steps.empty() ? "const std::int64_t " : ", ") + std::string("wf_s") + ks + " = wf_step[" + ks + "]";
    repeated += (repeated.empty() ? "" : " && ") + std::string("(wf_s") + ks + " | 1) == 1";
  }
  if (!steps.empty()) w.line(steps + ";");
  auto unit_output_row = [&](Indexing indexing) {
    return "for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) " + o.local() + "[wf_i] = " +
           expr::to_cpp(*p.body, context(p, "wf_i", indexing)) + ";";
  };
  if (repeated.empty()) {
    w.line(unit_output_row(Indexing::UnitOutput));
  } else {
    // A broadcast input (a bias along a row): each input's step 1 or 0.
    w.open("if (" + repeated + ")");
    w.line(unit_output_row(Indexing::UnitOrRepeated));
    w.otherwise();
    w.line(unit_output_row(Indexing::UnitOutput));
    w.close();
  }
  w.otherwise();
  w.line("for (std::int64_t wf_i = 0; wf_i < wf_n; ++wf_i) " + o.local() + "[wf_i * wf_step[" +
         num(static_cast<std::int64_t>(out)) + "]] = " + expr::to_cpp(*p.body, context(p, "", Indexing::Strided)) + ";");
  w.close();
  w.close(";");
  if (p.rank >= 2) {
    // A transposed input (the nest is tiled): 64 x 64 blocks, each such
    // input copied once per block, so that every row reads it with step 1.
    w.open("if (wf_nest.tiled())");
    w.open("wf_nest.run_tiles(" + num(p.impl->parallel_grain) +
           ", [&](const std::int64_t* wf_off, const std::int64_t* wf_row_step, const std::int64_t* wf_col_step, std::int64_t wf_rows, "
           "std::int64_t wf_cols)");
    for (const std::string& line : tiles) w.line(line);
    w.line("const std::int64_t wf_step[] = {" + steps_of_tiles + "};");
    w.line("for (std::int64_t wf_r = 0; wf_r < wf_rows; ++wf_r) wf_row(" + tile_rows + ", wf_step, wf_cols);");
    w.close(");");
    w.line("return;");
    w.close();
  }
  w.line("wf_nest.run(" + num(p.impl->parallel_grain) + ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_n) { wf_row(" +
         run_rows + ", wf_step, wf_n); });");
}

// The C++ of a reduce kernel's value for `element` (its prologue, if any).
std::string reduce_value(const KernelPlan& p, const std::string& element) {
  if (!p.prologue) return element;
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  ctx.name = [&](const std::string& n) -> std::string {
    if (n == p.tensors[0].name) return element;
    for (const auto& s : p.scalars)
      if (s.name == n) return s.cpp;
    return n;
  };
  return expr::to_cpp(*p.prologue, ctx);
}

// The reduce kernel's result from `result` (the accumulator, mean divided): the epilogue, if any.
std::string reduce_result(const KernelPlan& p, const std::string& result) {
  if (!p.epilogue) return result;
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  const std::string reduced = "static_cast<" + elem(p.dtype) + ">(" + result + ")";
  ctx.name = [&](const std::string& n) -> std::string {
    if (n == "acc") return reduced;
    if (n == "n") return "wf_len";
    for (const auto& s : p.scalars)
      if (s.name == n) return s.cpp;
    return n;
  };
  return expr::to_cpp(*p.epilogue, ctx);
}

// Rows of the input side by side in memory (step 1 from one output to the
// next) and their reduced axis strided, as a pool's window through im2col
// is: 16 outputs at a time, one per lane, each step of the reduction one
// vector load across them. Sums add in the same order as one row alone;
// max and min compare per lane with a NaN flag per lane (a NaN anywhere
// makes the result NaN). The rows left over take the loop after it.
void emit_reduce_lanes(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const spec::ReduceOp op = p.impl->reduce_op;
  const bool additive = op == spec::ReduceOp::Sum || op == spec::ReduceOp::Mean;
  const std::string t = elem(p.dtype), acc_t = additive && !rt::dtype_is_float(p.dtype) ? "std::int64_t" : t;
  constexpr int kLanes = 16;
  const std::string lanes = num(kLanes), per_lane = "for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l) ";
  w.open("if (wf_step[0] == 1 && wf_stride != 1)");
  w.comment("rows side by side: " + lanes + " at a time, one per lane");
  w.open("for (; wf_r + " + lanes + " <= wf_rows; wf_r += " + lanes + ")");
  w.line("const " + t + "* " + x.local() + " = " + x.cpp + ".data + wf_off[0] + wf_r;");
  const std::string init = additive                       ? acc_t + "(0)"
                           : op == spec::ReduceOp::Max    ? "wfgen::rt::lowest_value<" + t + ">()"
                                                          : "wfgen::rt::highest_value<" + t + ">()";
  w.line(acc_t + " wf_acc[" + lanes + "];");
  w.line(per_lane + "wf_acc[wf_l] = " + init + ";");
  if (!additive) w.line("int wf_nan[" + lanes + "] = {};");
  w.open("for (std::int64_t wf_i = 0; wf_i < wf_len; ++wf_i)");
  w.open("for (int wf_l = 0; wf_l < " + lanes + "; ++wf_l)");
  w.line("const " + t + " wf_v = " + reduce_value(p, x.local() + "[wf_l + wf_i * wf_stride]") + ";");
  if (additive) {
    w.line("wf_acc[wf_l] += wf_v;");
  } else {
    w.line(std::string("wf_acc[wf_l] = wf_v ") + (op == spec::ReduceOp::Max ? ">" : "<") + " wf_acc[wf_l] ? wf_v : wf_acc[wf_l];");
    w.line("wf_nan[wf_l] |= wf_v != wf_v;");
  }
  w.close();
  w.close();
  if (!additive) w.line(per_lane + "if (wf_nan[wf_l]) wf_acc[wf_l] = std::numeric_limits<" + t + ">::quiet_NaN();");
  std::string result = "wf_acc[wf_l]";
  if (op == spec::ReduceOp::Mean)
    result = rt::dtype_is_float(p.dtype) ? result + " / static_cast<" + t + ">(wf_len)" : "(wf_len > 0 ? " + result + " / wf_len : 0)";
  w.line(per_lane + o.cpp + ".data[wf_off[1] + (wf_r + wf_l) * wf_step[1]] = static_cast<" + t + ">(" + reduce_result(p, result) + ");");
  w.close();
  w.close();
}

void emit_reduce(CodeWriter& w, const KernelPlan& p) {
  const auto& x = p.tensors[0];
  const auto& o = p.tensors[1];
  const int r = p.rank;
  spec::ReduceOp op = p.impl->reduce_op;
  bool arg = op == spec::ReduceOp::ArgMax || op == spec::ReduceOp::ArgMin;
  bool additive = op == spec::ReduceOp::Sum || op == spec::ReduceOp::Mean;
  std::string t = elem(p.dtype);
  std::string acc_t = additive && !rt::dtype_is_float(p.dtype) ? "std::int64_t" : t;
  w.comment(o.name + " = " + spec::reduce_op_name(op) + " of " + x.name + " along its last axis" +
            (p.prologue ? ", of " + p.prologue->str() : "") + (p.epilogue ? ", then " + p.epilogue->str() : ""));
  w.line("const std::int64_t wf_len = " + x.cpp + ".shape[" + num(r - 1) + "];");
  w.line("const std::int64_t wf_stride = " + x.cpp + ".strides[" + num(r - 1) + "];");
  w.line("const wfgen::rt::LoopNest<" + num(r - 1) + ", 2> wf_nest(wfgen::rt::head<1>(" + x.cpp +
         ".shape), {wfgen::rt::head<1>(" + x.cpp + ".strides), wfgen::rt::head<1>(" + o.cpp + ".strides)}, 1);");
  // The grain is in elements (docs/specs.md), the nest's in rows. Each row
  // is reduced by one thread in its own order, so a split changes no bit.
  const std::string grain = p.impl->parallel_grain > 0 ? builtin::rows_grain(p.impl->parallel_grain, "wf_len") : "0";
  w.open("wf_nest.run(" + grain + ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_rows)");
  w.line("std::int64_t wf_r = 0;");
  if (!arg) emit_reduce_lanes(w, p);
  w.open("for (; wf_r < wf_rows; ++wf_r)");
  w.line("const " + t + "* " + x.local() + " = " + x.cpp + ".data + wf_off[0] + wf_r * wf_step[0];");
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
    const std::string value = reduce_value(p, x.local() + "[" + std::string(unit ? "wf_i" : "wf_i * wf_stride") + "]");
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
  if (additive && rt::dtype_is_float(p.dtype)) {
    // Independent partial sums (partial_sum_lanes), folded in halves: one
    // chain of adds waits on the add's latency for every element (the bias
    // gradient of the CNN, sum over 784, ran at 1.3 G elements/s).
    const std::int64_t lanes = partial_sum_lanes(p.dtype);
    const std::string ls = num(lanes);
    w.open("if (wf_len >= " + num(2 * lanes) + ")");
    w.line(t + " wf_part[" + ls + "];");
    w.line("for (int wf_l = 0; wf_l < " + ls + "; ++wf_l) wf_part[wf_l] = " + t + "(0);");
    w.line("std::int64_t wf_i = 0;");
    w.open("for (; wf_i + " + ls + " <= wf_len; wf_i += " + ls + ")");
    w.line("for (int wf_l = 0; wf_l < " + ls + "; ++wf_l) wf_part[wf_l] += " + reduce_value(p, x.local() + "[wf_i + wf_l]") + ";");
    w.close();
    for (std::int64_t half = lanes / 2; half >= 1; half /= 2)
      w.line("for (int wf_l = 0; wf_l < " + num(half) + "; ++wf_l) wf_part[wf_l] += wf_part[wf_l + " + num(half) + "];");
    w.line("wf_acc = wf_part[0];");
    w.line("for (; wf_i < wf_len; ++wf_i) wf_acc += " + reduce_value(p, x.local() + "[wf_i]") + ";");
    w.otherwise();
    loop(true);
    w.close();
  } else {
    loop(true);
  }
  w.otherwise();
  loop(false);
  w.close();
  std::string result = arg ? "wf_arg" : "wf_acc";
  if (op == spec::ReduceOp::Mean) {
    result = rt::dtype_is_float(p.dtype) ? "wf_acc / static_cast<" + t + ">(wf_len)" : "(wf_len > 0 ? wf_acc / wf_len : 0)";
  }
  w.line(o.cpp + ".data[wf_off[1] + wf_r * wf_step[1]] = static_cast<" + t + ">(" + reduce_result(p, result) + ");");
  w.close();
  w.close(");");
}


// The epilogue fusion gave a GEMM (plan_with_epilogue): wf_epilogue, called
// by the GEMM on each block of C whose sums are final (rows x cols from row
// wf_i0, column wf_j0 of the matrix; rt::GemmEpilogue), replaces each
// element by the epilogue of it (`acc`) and of the inputs in0, in1... at
// the same place (the same expression the unfused element-wise kernel
// computes). `base(k)`: tensor k's first element of the matrix. A row
// whose every step is 1 (a bias per column, a residual) is indexed plainly;
// when C's row has step 1 and each input's step 1 or 0 (a value repeated
// along the row: a bias per row), the inputs are indexed `wf_s<k> != 0 ?
// wf_j : 0`, which the compiler unswitches into vectorised loops; otherwise
// with the steps. (The plain loop is the one that vectorises a GELU's erf:
// in the unswitched one it stayed scalar, 10 times slower.)
void emit_gemm_epilogue(CodeWriter& w, const KernelPlan& p, const std::function<std::string(std::size_t)>& base) {
  const std::string t = elem(p.dtype), last = num(p.rank - 1), row = num(p.rank - 2);
  const std::size_t out = p.tensors.size() - 1;
  const TensorParam& o = p.tensors[out];
  w.open("const auto wf_epilogue = [&](std::int64_t wf_i0, std::int64_t wf_j0, std::int64_t wf_nrows, std::int64_t wf_ncols)");
  std::string steps, unit = "wf_s" + num(static_cast<std::int64_t>(out)) + " == 1", plain = unit;
  for (std::size_t k = 2; k <= out; ++k) {
    const std::string s = "wf_s" + num(static_cast<std::int64_t>(k));
    steps += (k == 2 ? "const std::int64_t " : ", ") + s + " = " + p.tensors[k].cpp + ".strides[" + last + "]";
    if (k < out) unit += " && (" + s + " | 1) == 1";
    if (k < out) plain += " && " + s + " == 1";
  }
  w.line(steps + ";");
  w.open("for (std::int64_t wf_i = wf_i0; wf_i < wf_i0 + wf_nrows; ++wf_i)");
  for (std::size_t k = 2; k <= out; ++k) {
    const TensorParam& x = p.tensors[k];
    w.line(std::string(k == out ? "" : "const ") + t + "* " + x.local() + " = " + base(k) + " + wf_i * " + x.cpp + ".strides[" + row +
           "] + wf_j0 * wf_s" + num(static_cast<std::int64_t>(k)) + ";");
  }
  enum class Steps { Plain, UnitOrRepeated, Strided };
  auto loop = [&](Steps steps_of) {
    const bool unit_steps = steps_of != Steps::Strided;
    expr::EmitContext ctx;
    ctx.dtype = p.dtype;
    ctx.math = math_namespace(p);
    ctx.name = [&](const std::string& name) -> std::string {
      if (name == "acc") return "wf_acc";
      for (std::size_t k = 2; k < out; ++k) {
        if (p.tensors[k].name != name) continue;
        const std::string s = "wf_s" + num(static_cast<std::int64_t>(k));
        const std::string index = steps_of == Steps::Plain ? "wf_j" : steps_of == Steps::UnitOrRepeated ? s + " != 0 ? wf_j : 0" : "wf_j * " + s;
        return p.tensors[k].local() + "[" + index + "]";
      }
      return name;
    };
    const std::string c = o.local() + "[" + (unit_steps ? std::string("wf_j") : "wf_j * wf_s" + num(static_cast<std::int64_t>(out))) + "]";
    w.open("for (std::int64_t wf_j = 0; wf_j < wf_ncols; ++wf_j)");
    w.line("const " + t + " wf_acc = " + c + ";");
    w.line(c + " = " + t + "(" + expr::to_cpp(*p.epilogue, ctx) + ");");
    w.close();
  };
  w.open("if (" + plain + ")");
  loop(Steps::Plain);
  if (out > 2) {  // inputs, which may repeat along the row
    w.otherwise_if(unit);
    loop(Steps::UnitOrRepeated);
  }
  w.otherwise();
  loop(Steps::Strided);
  w.close();
  w.close();
  w.close(";");
}

// A GEMM (rt::gemm, or rt::blas_gemm for the blas device) per matrix of the
// batch; with an epilogue (fusion's: the tensors between B and C are its
// inputs), the GEMM applies it to each block of C it finishes.
void emit_gemm(CodeWriter& w, const KernelPlan& p) {
  const auto& a = p.tensors[0];
  const auto& b = p.tensors[1];
  const std::size_t out = p.tensors.size() - 1;
  const auto& c = p.tensors[out];
  const int r = p.rank;
  const std::string t = elem(p.dtype);
  std::string fn = p.impl->device == "blas" ? "wfgen::rt::blas_gemm" : "wfgen::rt::gemm";
  w.comment(c.name + (p.accumulate ? " += " : " = ") + a.name + " " + b.name +
            (p.impl->device == "blas" ? ", through cblas" : ", std-only blocked GEMM") + (r > 2 ? ", for each matrix of the batch dims" : ""));
  if (p.epilogue)
    w.comment("then, on each block of " + c.name + " the GEMM finishes (in the cache), " + c.name + " = " + p.epilogue->str() +
              " of its element acc");
  const std::string tail = p.epilogue ? std::string(p.accumulate ? ", true" : ", false") + ", wfgen::rt::gemm_epilogue<" + t + ">(wf_epilogue)"
                                      : p.accumulate ? ", /*accumulate=*/true" : "";
  w.line("const std::int64_t wf_m = " + c.cpp + ".shape[" + num(r - 2) + "], wf_n = " + c.cpp + ".shape[" + num(r - 1) +
         "], wf_k = " + a.cpp + ".shape[" + num(r - 1) + "];");
  if (r > 2) {
    // A B whose B the batch shares (a linear layer's weight): one GEMM of
    // every row of the batch when A's and C's batch dims continue their rows
    // (and the epilogue's inputs' too).
    const std::string head = "wfgen::rt::head<2>(";
    std::string inputs_fold;
    for (std::size_t k = 2; k < out; ++k) {
      const auto& x = p.tensors[k];
      inputs_fold += " && wfgen::rt::gemm_rows_continue(" + head + c.cpp + ".shape), " + head + x.cpp + ".strides), wf_m, " + x.cpp +
                     ".strides[" + num(r - 2) + "])";
    }
    w.open("if (const std::int64_t wf_rows = wfgen::rt::gemm_folded_rows(" + head + c.cpp + ".shape), " + head + a.cpp +
           ".strides), " + head + b.cpp + ".strides), " + head + c.cpp + ".strides), wf_m, " + a.cpp + ".strides[" +
           num(r - 2) + "], " + c.cpp + ".strides[" + num(r - 2) + "]); wf_rows > 0" + inputs_fold + ")");
    auto whole = [&](const TensorParam& x) {
      return x.cpp + ".data, " + x.cpp + ".strides[" + num(r - 2) + "], " + x.cpp + ".strides[" + num(r - 1) + "]";
    };
    if (p.epilogue) emit_gemm_epilogue(w, p, [&](std::size_t k) { return p.tensors[k].cpp + ".data"; });
    w.line(fn + "<" + t + ">(wf_rows, wf_n, wf_k, " + whole(a) + ", " + whole(b) + ", " + whole(c) + tail + ");");
    w.line("return;");
    w.close();
  }
  w.line("const wfgen::rt::LoopNest<" + num(r - 2) + ", " + num(static_cast<std::int64_t>(p.tensors.size())) +
         "> wf_batch(wfgen::rt::head<2>(" + c.cpp + ".shape), " + strides_list(p, "wfgen::rt::head<2>(", ")") + ", " +
         num(static_cast<std::int64_t>(out)) + ");");
  // A batch of products small enough not to split themselves is shared out
  // among the threads (gemm_batch_grain); rank 2 is a batch of one.
  const std::string grain = r > 2 ? "wfgen::rt::gemm_batch_grain(wfgen::rt::head<2>(" + c.cpp + ".shape), wfgen::rt::head<2>(" +
                                         c.cpp + ".strides), wf_m, wf_n, wf_k)"
                                   : "0";
  w.open("wf_batch.run(" + grain + ", [&](const std::int64_t* wf_off, const std::int64_t* wf_step, std::int64_t wf_count)");
  w.open("for (std::int64_t wf_r = 0; wf_r < wf_count; ++wf_r)");
  auto at = [&](std::size_t k) {
    return p.tensors[k].cpp + ".data + wf_off[" + num(static_cast<std::int64_t>(k)) + "] + wf_r * wf_step[" +
           num(static_cast<std::int64_t>(k)) + "]";
  };
  auto operand = [&](std::size_t k) {
    return at(k) + ", " + p.tensors[k].cpp + ".strides[" + num(r - 2) + "], " + p.tensors[k].cpp + ".strides[" + num(r - 1) + "]";
  };
  if (p.epilogue) emit_gemm_epilogue(w, p, at);
  w.line(fn + "<" + t + ">(wf_m, wf_n, wf_k, " + operand(0) + ",");
  w.line("    " + operand(1) + ", " + operand(out) + tail + ");");
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
          w.line("const " + vt + " " + s.local() + "(" + s.cpp + ".begin(), " + s.cpp + ".end());");
          v = s.local();
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
    std::string ty = std::string(t.written || view ? "" : "const ") + elem(t.dtype.value_or(p.dtype));
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
  // Fused kernels of another device (a blas GEMM with an epilogue) in a file
  // of their own, fused_blas.cpp: wfgen_add_library links BLAS when a
  // generated file is named *_blas*.cpp.
  if (p.node->fused) return p.impl->device == "cpu" ? "fused.cpp" : "fused_" + p.impl->device + ".cpp";
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
    // These headers (but kernels.hpp and blas_support.hpp) are the ones
    // wfgen_add_library precompiles, WFGEN_KERNEL_HEADERS in
    // cmake/wfgenAddLibrary.cmake: the test cmake.kernel_headers compares them.
    w.line("#include <cmath>").line("#include <cstdint>").line("#include <limits>").line("#include <span>").line("#include <string>").line("#include <utility>").line("#include <vector>").line();
    w.line("#include \"kernels.hpp\"");
    if (ps.front()->impl->device == "blas") w.line("#include \"wfgen/blas_support.hpp\"");
    w.line("#include \"wfgen/kernel_math.hpp\"").line("#include \"wfgen/kernel_support.hpp\"");
    // The layer_norm builtins' row helpers: a header of their own (outside the precompiled set).
    if (ps.front()->impl->builtin.starts_with("layer_norm")) w.line("#include \"wfgen/layer_norm.hpp\"");
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
