// Rewrites of a fused row kernel's expressions (row_parts.hpp).
#include "wfgen/emit/row_parts.hpp"

#include <utility>

#include "wfgen/emit/row_kernels.hpp"

namespace wfgen::emit::rows {

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

expr::EmitContext emit_context(const KernelPlan& p, std::function<std::string(const std::string&)> name) {
  expr::EmitContext ctx;
  ctx.dtype = p.dtype;
  ctx.math = math_namespace(p);
  ctx.name = std::move(name);
  return ctx;
}

std::string reduce_init(spec::ReduceOp op, const std::string& t) {
  return op == spec::ReduceOp::Max   ? "wfgen::rt::lowest_value<" + t + ">()"
         : op == spec::ReduceOp::Min ? "wfgen::rt::highest_value<" + t + ">()"
                                     : t + "(0)";
}

RowCache plan_row_cache(const KernelPlan& p) {
  const lower::FusedBody& f = *p.fused;
  RowCache cache;
  if (f.out_per_row || !rt::dtype_is_float(p.dtype)) return cache;
  for (std::size_t k = f.rows.size(); k-- > 0 && cache.row < 0;) {
    const auto& rv = f.rows[k];
    if (!rv.reduce || rv.element.type != expr::Type::Float || !costly(rv.element)) continue;
    int uses = 0;
    expr::Expr e = replace_tree(f.out, rv.element, kernel_name("cached", expr::Type::Float, p.dtype), uses);
    if (uses == 0) continue;
    cache.row = static_cast<int>(k);
    cache.out = std::move(e);
  }
  return cache;
}

}  // namespace wfgen::emit::rows
