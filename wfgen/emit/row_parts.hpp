// Internal to wfgen/emit: what the two paths of a fused row kernel share.
// row_kernels.cpp writes the row path (a row at a time, contiguous or
// strided), row_tiles.cpp the tiles of short rows (a row per vector lane);
// row_rewrites.cpp holds the rewrites of the kernel's expressions both make.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wfgen/emit/code_writer.hpp"
#include "wfgen/expr/expr.hpp"
#include "wfgen/lower/kernel_plan.hpp"

namespace wfgen::emit::rows {

using lower::KernelPlan;

inline std::string num(std::int64_t v) { return std::to_string(v); }
inline std::string elem(rt::DType d) { return expr::cpp_type(d); }

// Structural equality of two checked expressions.
bool same_tree(const expr::Expr& a, const expr::Expr& b);

// Whether computing `e` costs more than a load: a call (exp, tanh...) or a division.
bool costly(const expr::Expr& e);

// a when `e` is exp(a) of a floating a: the cached rows go through
// rt::math::exp_shifted or exp_in_place, faster than a loop of exp.
const expr::Expr* exp_argument(const expr::Expr& e);

// Whether `shift` names a row value that is the max of `x` over the row
// (softmax's max): then every x - shift is <= 0 or NaN, and the cached
// exp row goes through rt::math::exp_minus_max, one clamp a vector fewer.
bool is_row_max_of(const lower::FusedBody& f, const expr::Expr& shift, const expr::Expr& x);

// A name the emitter adds to a checked expression: a value of `type`
// computed elsewhere in the kernel (printed through EmitContext::name).
expr::Expr kernel_name(const std::string& text, expr::Type type, rt::DType dtype);

// `e` with every subtree equal to `target` replaced by `with`; counts the replacements.
expr::Expr replace_tree(const expr::Expr& e, const expr::Expr& target, const expr::Expr& with, int& count);

// `e` with each floating division by a value that is the same along the row
// (`invariant`) turned into a product with its reciprocal, computed once per
// row: `x / s` becomes `x * inv0`, with inv0 = 1 / s in `divisors`.
expr::Expr hoist_divisors(const expr::Expr& e, const std::function<bool(const expr::Expr&)>& invariant,
                          std::vector<expr::Expr>& divisors, rt::DType dtype);

// Whether `e` has the same value all along a row of the fused kernel `p`:
// it reads only row values (rowK), divisors' reciprocals (invK), the row
// length n, constants and inputs with one element per row.
bool row_invariant(const KernelPlan& p, const expr::Expr& e);

// For each row value j, the row value k > j that is the spread of the
// elements around it, or -1 (layernorm's variance after its mean).
std::vector<int> spread_rows(const lower::FusedBody& f);

// How a path of the kernel `p` prints its expressions: names through `name`.
expr::EmitContext emit_context(const KernelPlan& p, std::function<std::string(const std::string&)> name);

// The initial value of a reduction's accumulator of element type `t`.
std::string reduce_init(spec::ReduceOp op, const std::string& t);

// The reduction whose element the output row caches (softmax: out = exp(x -
// max) / sum, sum = sum(exp(x - max)) computes exp once), or -1, and the
// output expression reading that cache as `cached`.
struct RowCache {
  int row = -1;
  expr::Expr out;
};
RowCache plan_row_cache(const KernelPlan& p);

// What both paths of a fused kernel's emitter hold: the writer, the plan,
// its cached row, the output's index in p.tensors, the element type.
struct RowKernel {
  RowKernel(CodeWriter& w, const KernelPlan& p, const RowCache& cache)
      : w_(w), p_(p), f_(*p.fused), cache_(cache), out_(p.tensors.size() - 1), t_(elem(p.dtype)) {}
  CodeWriter& w_;
  const KernelPlan& p_;
  const lower::FusedBody& f_;
  const RowCache& cache_;
  const std::size_t out_;
  const std::string t_;
};

// The tiles of rows shorter than two sets of lanes (row_tiles.cpp),
// emitted inside the nest's chunk before the row loop.
void emit_row_tiles(CodeWriter& w, const KernelPlan& p, const RowCache& cache);

}  // namespace wfgen::emit::rows
