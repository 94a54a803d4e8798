// The tracer's expressions (tracer.hpp): the body language's operators on
// numbers and tensors, calls of nodes, models and built-ins, methods and
// views (reshape, permute, narrow, ...), subscripts, and reductions over axes.
#include "wfgen/trace/tracer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "wfgen/body/body.hpp"
#include "wfgen/expr/expr.hpp"
#include "wfgen/lower/kernel_plan.hpp"
#include "wfgen/support/names.hpp"
#include "wfgen/trace/trace.hpp"

namespace wfgen::trace::detail {

TValue Tracer::size_binary(const body::Expr& e, const TValue& l, const TValue& r) {
  for (const TValue* v : {&l, &r}) {
    if (v->kind == TValue::Kind::Sym || v->kind == TValue::Kind::Int) continue;
    if (v->is_symbolic()) not_known(e, *v, "'" + e.str() + "'");
    fail_at(e, "'" + e.op + "' between " + kind_word(l.kind) + " and " + kind_word(r.kind) + " is not defined");
  }
  const Dim a = l.kind == TValue::Kind::Sym ? l.dim : Dim(l.i), b = r.kind == TValue::Kind::Sym ? r.dim : Dim(r.i);
  const std::string& op = e.op;
  try {
    if (op == "+" || op == "-" || op == "*") return TValue::size(Dim::binary(op[0], a, b));
    if (op == "%") return TValue::size(Dim::binary('-', a, Dim::binary('*', Dim::binary('/', a, b), b)));
  } catch (const std::exception& err) {
    fail_at(e, std::string("in ") + e.str() + ": " + err.what());
  }
  if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=") {
    TValue c;
    c.kind = TValue::Kind::Cond;
    c.conds.push_back({a, op, b});
    return c;
  }
  not_known(e, l.kind == TValue::Kind::Sym ? l : r, "'" + e.str() + "'");
}

std::int64_t Tracer::int_of(Frame& frame, const body::Expr& e, const std::string& what) {
  TValue v = eval(frame, e);
  if (v.is_symbolic()) not_known(e, v, "the " + what);
  if (v.kind != TValue::Kind::Int) fail_at(e, what + " must be an integer, but this is " + std::string(kind_word(v.kind)));
  return v.i;
}

TValue Tracer::eval(Frame& frame, const body::Expr& e) {
  using K = body::Expr::Kind;
  switch (e.kind) {
    case K::Int: return TValue::of_int(e.ivalue);
    case K::Float: return TValue::of_float(e.fvalue);
    case K::Bool: return TValue::of_bool(e.ivalue != 0);
    case K::Name: {
      auto it = frame.env.find(e.name);
      if (it != frame.env.end()) return it->second;
      std::vector<std::string> names;
      for (const auto& [k, v] : frame.env) names.push_back(k);
      fail_at(e, "unknown name '" + e.name + "'" + did_you_mean(e.name, names));
    }
    case K::Tuple:
    case K::List: {
      std::vector<TValue> items;
      for (const auto& o : e.operands) items.push_back(eval(frame, *o));
      return TValue::list(std::move(items));
    }
    case K::Unary: {
      TValue v = eval(frame, *e.operands[0]);
      if (v.is_symbolic() && !(e.op == "-" && v.kind == TValue::Kind::Sym)) not_known(e, v, "'" + e.str() + "'");
      if (v.kind == TValue::Kind::Sym) return TValue::size(Dim::binary('-', Dim(0), v.dim));
      if (e.op == "not") {
        if (!v.is_number()) fail_at(e, "'not' needs a bool, but got " + std::string(kind_word(v.kind)));
        return TValue::of_bool(v.number() == 0);
      }
      if (v.kind == TValue::Kind::Tensor) return call_node_simple(e, "neg", {v.id}, {});
      if (v.kind == TValue::Kind::Int) return TValue::of_int(-v.i);
      if (v.kind == TValue::Kind::Float) return TValue::of_float(-v.f);
      fail_at(e, "cannot negate " + std::string(kind_word(v.kind)));
    }
    case K::Binary: return binary(frame, e);
    case K::Attribute: {
      TValue obj = eval(frame, *e.operands[0]);
      if (obj.kind != TValue::Kind::Tensor) fail_at(e, "'." + e.name + "' needs a tensor, but got " + std::string(kind_word(obj.kind)));
      const Value& v = val(obj.id);
      if (e.name == "T") {
        if (v.shape.size() < 2) fail_at(e, "x.T swaps the last two axes, but this tensor has rank " + std::to_string(v.shape.size()));
        std::vector<int> perm(v.shape.size());
        for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int>(k);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        return TValue::tensor(permute(obj.id, perm, e));
      }
      if (e.name == "shape") {
        std::vector<TValue> dims;
        for (const auto& d : v.shape) {
          if (!d.is_known() && (symbolic_ || in_assert_)) {
            dims.push_back(TValue::size(d));
            continue;
          }
          if (!d.is_known()) fail_at(e, "x.shape has the run-time dim '" + d.str() + "', which is not known while tracing");
          dims.push_back(TValue::of_int(d.value()));
        }
        return TValue::list(std::move(dims));
      }
      if (e.name == "ndim") return TValue::of_int(static_cast<std::int64_t>(v.shape.size()));
      fail_at(e, "unknown attribute '" + e.name + "' of a tensor (known: T, shape, ndim; methods: reshape, permute, transpose, "
                 "unsqueeze, squeeze, broadcast_to)");
    }
    case K::Subscript: return subscript(frame, e);
    case K::Call: return call(frame, e);
  }
  fail_at(e, "unsupported expression");
}

TValue Tracer::binary(Frame& frame, const body::Expr& e) {
  const std::string& op = e.op;
  if (op == "and" || op == "or") {
    TValue l = eval(frame, *e.operands[0]);
    if (op == "and" && (l.kind == TValue::Kind::Cond || (l.is_number() && l.number() != 0))) {
      // A conjunction of comparisons of run-time sizes stays a condition (an assert checked at run time).
      TValue r = eval(frame, *e.operands[1]);
      if (r.kind == TValue::Kind::Cond || l.kind == TValue::Kind::Cond) {
        if (r.is_number() && r.number() == 0) return TValue::of_bool(false);
        if (r.is_symbolic() && r.kind != TValue::Kind::Cond) not_known(*e.operands[1], r, "'" + e.str() + "'");
        if (!r.is_number() && r.kind != TValue::Kind::Cond) fail_at(*e.operands[1], "'and' needs bools, but got " + std::string(kind_word(r.kind)));
        TValue c = l.kind == TValue::Kind::Cond ? l : r;
        if (l.kind == TValue::Kind::Cond && r.kind == TValue::Kind::Cond) c.conds.insert(c.conds.end(), r.conds.begin(), r.conds.end());
        return c;
      }
      if (r.is_symbolic()) not_known(*e.operands[1], r, "'" + e.str() + "'");
      if (!r.is_number()) fail_at(*e.operands[1], "'" + op + "' needs bools, but got " + std::string(kind_word(r.kind)));
      return TValue::of_bool(r.number() != 0);
    }
    if ((l.kind == TValue::Kind::Cond || l.kind == TValue::Kind::Sym) && in_assert_ && !symbolic_) {
      fail_at(e, "an assert on sizes known only at run time takes comparisons joined by 'and'; '" + op +
                     "' needs sizes known while tracing");
    }
    if (l.is_symbolic()) not_known(*e.operands[0], l, "'" + e.str() + "'");
    if (!l.is_number()) fail_at(*e.operands[0], "'" + op + "' needs bools, but got " + std::string(kind_word(l.kind)));
    bool lv = l.number() != 0;
    if (op == "and" && !lv) return TValue::of_bool(false);
    if (op == "or" && lv) return TValue::of_bool(true);
    TValue r = eval(frame, *e.operands[1]);
    if (r.is_symbolic()) not_known(*e.operands[1], r, "'" + e.str() + "'");
    if (!r.is_number()) fail_at(*e.operands[1], "'" + op + "' needs bools, but got " + std::string(kind_word(r.kind)));
    return TValue::of_bool(r.number() != 0);
  }
  TValue l = eval(frame, *e.operands[0]);
  TValue r = eval(frame, *e.operands[1]);
  bool lt = l.kind == TValue::Kind::Tensor, rt_ = r.kind == TValue::Kind::Tensor;
  if (!lt && !rt_ && (l.is_symbolic() || r.is_symbolic())) return size_binary(e, l, r);
  if (!lt && !rt_) return constant_binary(e, l, r);
  if (op == "@") {
    if (!lt || !rt_) fail_at(e, "'@' multiplies two tensors");
    return matmul(e, l.id, r.id);
  }
  if (tensor_operator_node(op).empty()) fail_at(e, "'" + op + "' is not defined on tensors");
  if (lt && rt_) return broadcast_binary(e, std::string(tensor_operator_node(op)), l.id, r.id);
  // A tensor and a number: the scalar variants.
  int t = lt ? l.id : r.id;
  const TValue& num = lt ? r : l;
  if (num.is_symbolic()) not_known(e, num, "'" + e.str() + "'");
  if (!num.is_number()) fail_at(e, "cannot combine a tensor with " + std::string(kind_word(num.kind)));
  double x = num.number();
  if (op == "+") return call_node_simple(e, "add_scalar", {t}, {spec::ArgValue(x)});
  if (op == "*") return call_node_simple(e, "mul_scalar", {t}, {spec::ArgValue(x)});
  if (op == "-") return call_node_simple(e, lt ? "sub_scalar" : "rsub_scalar", {t}, {spec::ArgValue(x)});
  if (op == "/" && lt) return call_node_simple(e, "div_scalar", {t}, {spec::ArgValue(x)});
  if (op == "**" && lt) {
    if (x == 2.0) return call_node_simple(e, "square", {t}, {});
    return call_node_simple(e, "pow_scalar", {t}, {spec::ArgValue(x)});
  }
  // Comparisons and the rest: the number becomes a broadcast constant tensor.
  fail_at(e, "'" + op + "' between " + (lt ? "a tensor and a number" : "a number and a tensor") +
                 " is not supported; write it with tensors");
}

TValue Tracer::constant_binary(const body::Expr& e, const TValue& l, const TValue& r) {
  if (!l.is_number() || !r.is_number()) {
    if (e.op == "+" && l.kind == TValue::Kind::List && r.kind == TValue::Kind::List) {
      std::vector<TValue> items = l.items;
      items.insert(items.end(), r.items.begin(), r.items.end());
      return TValue::list(std::move(items));
    }
    fail_at(e, "'" + e.op + "' between " + kind_word(l.kind) + " and " + kind_word(r.kind) + " is not defined");
  }
  const std::string& op = e.op;
  bool ints = l.kind != TValue::Kind::Float && r.kind != TValue::Kind::Float;
  if (op == "==") return TValue::of_bool(l.number() == r.number());
  if (op == "!=") return TValue::of_bool(l.number() != r.number());
  if (op == "<") return TValue::of_bool(l.number() < r.number());
  if (op == "<=") return TValue::of_bool(l.number() <= r.number());
  if (op == ">") return TValue::of_bool(l.number() > r.number());
  if (op == ">=") return TValue::of_bool(l.number() >= r.number());
  if (ints) {
    std::int64_t a = l.i, b = r.i, out = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(a, b, &out);
    else if (op == "-") overflow = __builtin_sub_overflow(a, b, &out);
    else if (op == "*") overflow = __builtin_mul_overflow(a, b, &out);
    else if (op == "/" || op == "%") {
      if (b == 0) fail_at(e, "division by zero");
      if (op == "/") return TValue::of_float(static_cast<double>(a) / static_cast<double>(b));
      out = ((a % b) + b) % b;
    } else if (op == "**") {
      if (b < 0) return TValue::of_float(std::pow(static_cast<double>(a), static_cast<double>(b)));
      out = 1;
      for (std::int64_t k = 0; k < b && !overflow; ++k) overflow = __builtin_mul_overflow(out, a, &out);
    } else {
      fail_at(e, "'" + op + "' is not defined on integers");
    }
    if (overflow) fail_at(e, "integer overflow in " + e.str());
    return TValue::of_int(out);
  }
  double a = l.number(), b = r.number();
  if (op == "+") return TValue::of_float(a + b);
  if (op == "-") return TValue::of_float(a - b);
  if (op == "*") return TValue::of_float(a * b);
  if (op == "/") return TValue::of_float(a / b);
  if (op == "**") return TValue::of_float(std::pow(a, b));
  fail_at(e, "'" + op + "' is not defined on floats");
}

TValue Tracer::reduce(Frame& frame, const body::Expr& e, const std::string& op, const std::vector<TValue>& pos,
              const std::map<std::string, TValue>& kw) {
  (void)frame;
  if (pos.size() != 1 || pos[0].kind != TValue::Kind::Tensor) fail_at(e, op + "(x, axis=..., keepdims=...) takes one tensor");
  for (const auto& [k, v] : kw)
    if (k != "axis" && k != "keepdims") fail_at(e, op + " has no argument '" + k + "'" + did_you_mean(k, {"axis", "keepdims"}));
  int x = pos[0].id;
  int rank = static_cast<int>(val(x).shape.size());
  bool keepdims = kw.count("keepdims") && kw.at("keepdims").number() != 0;
  std::vector<int> axes;
  if (!kw.count("axis") || kw.at("axis").kind == TValue::Kind::None) {
    for (int k = 0; k < rank; ++k) axes.push_back(k);
  } else {
    const TValue& a = kw.at("axis");
    std::vector<TValue> items = a.kind == TValue::Kind::List ? a.items : std::vector<TValue>{a};
    for (const auto& it : items) {
      if (it.is_symbolic()) not_known(e, it, "the axis of " + op);
      if (it.kind != TValue::Kind::Int) fail_at(e, "axis must be an integer or a list of integers");
      std::int64_t ax = it.i < 0 ? it.i + rank : it.i;
      if (ax < 0 || ax >= rank) fail_at(e, "axis " + std::to_string(it.i) + " is out of range for rank " + std::to_string(rank));
      if (std::find(axes.begin(), axes.end(), static_cast<int>(ax)) != axes.end()) fail_at(e, "axis " + std::to_string(it.i) + " is given twice");
      axes.push_back(static_cast<int>(ax));
    }
  }
  if (rank == 0) fail_at(e, op + " of a rank-0 tensor");
  if ((op == "argmax" || op == "argmin") && axes.size() != 1) fail_at(e, op + " reduces exactly one axis; give axis=k");
  std::sort(axes.rbegin(), axes.rend());
  int cur = x;
  for (int ax : axes) {
    // Move the axis last, reduce it into size 1, and move the 1 back.
    std::vector<int> perm;
    for (int k = 0; k < rank; ++k)
      if (k != ax) perm.push_back(k);
    perm.push_back(ax);
    int moved = ax == rank - 1 ? cur : permute(cur, perm, e);
    int reduced = call_node_simple(e, op, {moved}, {}).id;
    if (ax == rank - 1) {
      cur = reduced;
    } else {
      std::vector<int> back(static_cast<std::size_t>(rank));
      for (int k = 0; k < rank; ++k) back[static_cast<std::size_t>(perm[static_cast<std::size_t>(k)])] = k;
      cur = permute(reduced, back, e);
    }
  }
  if (!keepdims) {
    Shape s;
    const Shape& full = val(cur).shape;
    for (int k = 0; k < rank; ++k)
      if (std::find(axes.begin(), axes.end(), k) == axes.end()) s.push_back(full[static_cast<std::size_t>(k)]);
    cur = reshape(cur, s, e);
  }
  return TValue::tensor(cur);
}

TValue Tracer::call(Frame& frame, const body::Expr& e) {
  const body::Expr& callee = *e.operands[0];
  std::vector<TValue> pos;
  std::map<std::string, TValue> kw;
  std::vector<std::pair<std::string, TValue>> kw_ordered;
  for (const auto& a : e.args) {
    TValue v = eval(frame, *a.value);
    if (a.keyword) {
      kw[*a.keyword] = v;
      kw_ordered.emplace_back(*a.keyword, v);
    } else {
      pos.push_back(v);
    }
  }
  if (callee.kind == body::Expr::Kind::Attribute) return method(frame, e, callee, pos, kw);
  if (callee.kind != body::Expr::Kind::Name) fail_at(callee, "only names and methods can be called");
  const std::string& name = callee.name;
  static const std::set<std::string> reductions = {"sum", "mean", "max", "min", "argmax", "argmin"};
  if (reductions.count(name) && spec_.find_node(name)) return reduce(frame, e, name, pos, kw);
  if (name == "reshape" || name == "permute" || name == "transpose" || name == "unsqueeze" || name == "squeeze" ||
      name == "broadcast_to" || name == "expand_as") {
    if (pos.empty() || pos[0].kind != TValue::Kind::Tensor) fail_at(e, name + " takes a tensor first");
    std::vector<TValue> rest(pos.begin() + 1, pos.end());
    return tensor_method(e, name, pos[0].id, rest, kw);
  }
  if (const spec::Model* m = spec_.find_model(name)) return call_model(frame, e, *m, pos, kw_ordered);
  if (const spec::Build* b = differentiated_build_node(name)) return call_build_node(frame, e, *b, pos, kw_ordered);
  if (const spec::Node* n = spec_.find_node(name)) {
    std::vector<int> tensors;
    std::vector<std::pair<std::string, TValue>> named;
    std::size_t k = 0;
    for (; k < pos.size() && pos[k].kind == TValue::Kind::Tensor; ++k) tensors.push_back(pos[k].id);
    // Positional non-tensor arguments follow the tensors, in the node's argument order.
    for (std::size_t j = 0; k < pos.size(); ++k, ++j) {
      if (pos[k].kind == TValue::Kind::Tensor) fail_at(e, "tensors come before the other arguments of '" + name + "'");
      if (j >= n->args.size()) fail_at(e, "node '" + name + "' takes " + std::to_string(n->args.size()) + " non-tensor arguments");
      named.emplace_back(n->args[j].name, pos[k]);
    }
    for (const auto& kv : kw_ordered) {
      for (const auto& p : named)
        if (p.first == kv.first) fail_at(e, "argument '" + kv.first + "' of '" + name + "' is given twice");
      named.push_back(kv);
    }
    return call_node(e, *n, tensors, named);
  }
  if (name == "int") {
    // int(x): a number of the arguments truncated towards zero, as in Python (int(d_model / heads)).
    if (pos.size() == 1 && pos[0].is_symbolic()) not_known(e, pos[0], "'" + e.str() + "'");
    if (pos.size() != 1 || !kw.empty() || !pos[0].is_number()) fail_at(e, "int(x) takes one number");
    double x = pos[0].number();
    if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) fail_at(e, "int(x) of a value out of range");
    if (x != std::trunc(x)) {
      warn(e, "int(" + e.args[0].value->str() + ") truncates " + number_str(x) + " to " +
                  std::to_string(static_cast<std::int64_t>(x)) + (stack_.empty() ? "" : " in model '" + stack_.back()->name + "'") +
                  "; the division is not exact",
           "truncation");
    }
    return TValue::of_int(static_cast<std::int64_t>(x));
  }
  std::vector<std::string> names;
  for (const auto& n : spec_.nodes) names.push_back(n.name);
  for (const auto& m : spec_.models) names.push_back(m.name);
  fail_at(callee, "unknown node or model '" + name + "'" + did_you_mean(name, names));
}

TValue Tracer::method(Frame& frame, const body::Expr& e, const body::Expr& callee, const std::vector<TValue>& pos,
              const std::map<std::string, TValue>& kw) {
  TValue obj = eval(frame, *callee.operands[0]);
  if (obj.kind != TValue::Kind::Tensor) fail_at(callee, "methods are called on tensors, but this is " + std::string(kind_word(obj.kind)));
  return tensor_method(e, callee.name, obj.id, pos, kw);
}

TValue Tracer::tensor_method(const body::Expr& e, const std::string& name, int x, const std::vector<TValue>& args,
                     const std::map<std::string, TValue>& kw) {
  if (!kw.empty()) fail_at(e, "'" + name + "' takes no keyword arguments");
  const Shape& s = val(x).shape;
  int rank = static_cast<int>(s.size());
  std::vector<TValue> flat = args.size() == 1 && args[0].kind == TValue::Kind::List ? args[0].items : args;
  auto axis_of = [&](const TValue& v, int limit) {
    if (v.is_symbolic()) not_known(e, v, "the axis of '" + name + "'");
    if (v.kind != TValue::Kind::Int) fail_at(e, "'" + name + "' takes integer axes");
    std::int64_t a = v.i < 0 ? v.i + limit : v.i;
    if (a < 0 || a >= limit) fail_at(e, "axis " + std::to_string(v.i) + " is out of range for rank " + std::to_string(rank));
    return static_cast<int>(a);
  };
  if (name == "reshape" || name == "view") return TValue::tensor(reshape_to(x, flat, e));
  if (name == "size") {
    if (flat.size() != 1) fail_at(e, "size takes one axis: x.size(k)");
    const Dim& d = s[static_cast<std::size_t>(axis_of(flat[0], rank))];
    if (!d.is_known() && (symbolic_ || in_assert_)) return TValue::size(d);
    if (!d.is_known()) fail_at(e, "axis " + std::to_string(flat[0].i) + " has the run-time size '" + d.str() + "', which is not known while tracing");
    return TValue::of_int(d.value());
  }
  if (name == "permute") {
    if (static_cast<int>(flat.size()) != rank) fail_at(e, "permute needs " + std::to_string(rank) + " axes, got " + std::to_string(flat.size()));
    std::vector<int> perm;
    std::vector<bool> seen(static_cast<std::size_t>(rank), false);
    for (const auto& v : flat) {
      int a = axis_of(v, rank);
      if (seen[static_cast<std::size_t>(a)]) fail_at(e, "permute names axis " + std::to_string(a) + " twice");
      seen[static_cast<std::size_t>(a)] = true;
      perm.push_back(a);
    }
    return TValue::tensor(permute(x, perm, e));
  }
  if (name == "transpose") {
    if (flat.size() != 2) fail_at(e, "transpose takes two axes");
    std::vector<int> perm(static_cast<std::size_t>(rank));
    for (int k = 0; k < rank; ++k) perm[static_cast<std::size_t>(k)] = k;
    std::swap(perm[static_cast<std::size_t>(axis_of(flat[0], rank))], perm[static_cast<std::size_t>(axis_of(flat[1], rank))]);
    return TValue::tensor(permute(x, perm, e));
  }
  if (name == "unsqueeze" || name == "squeeze") {
    if (flat.size() != 1) fail_at(e, name + " takes one axis");
    Shape out = s;
    if (name == "unsqueeze") {
      int a = axis_of(flat[0], rank + 1);
      out.insert(out.begin() + a, Dim(1));
    } else {
      int a = axis_of(flat[0], rank);
      if (!(s[static_cast<std::size_t>(a)].is_known() && s[static_cast<std::size_t>(a)].value() == 1)) {
        fail_at(e, "squeeze of axis " + std::to_string(a) + " of size " + s[static_cast<std::size_t>(a)].str() + " (it must be 1)");
      }
      out.erase(out.begin() + a);
    }
    return TValue::tensor(reshape(x, out, e));
  }
  if (name == "expand_as") {
    // x.expand_as(y): x broadcast to y's shape (run-time dims included), as a view.
    if (flat.size() != 1 || flat[0].kind != TValue::Kind::Tensor) fail_at(e, "expand_as takes one tensor: x.expand_as(y)");
    const Shape to = val(flat[0].id).shape;
    auto b = broadcast_shape(s, to);
    if (!b || *b != to) fail_at(e, "cannot broadcast " + shape::shape_str(s) + " to " + shape::shape_str(to));
    return TValue::tensor(broadcast(x, to, e));
  }
  if (name == "broadcast_to") {
    Shape to;
    for (const auto& v : flat) {
      if (v.kind == TValue::Kind::Sym) {
        to.push_back(v.dim);
        continue;
      }
      if (v.is_symbolic()) not_known(e, v, "broadcast_to");
      if (v.kind != TValue::Kind::Int) fail_at(e, "broadcast_to takes sizes");
      to.push_back(Dim(v.i));
    }
    auto b = broadcast_shape(s, to);
    if (!b || *b != to) fail_at(e, "cannot broadcast " + shape::shape_str(s) + " to " + shape::shape_str(to));
    return TValue::tensor(broadcast(x, to, e));
  }
  if (name == "narrow") {
    // x.narrow(axis, start, length): x[..., start:start + length, ...] on
    // one axis of any rank (torch.narrow), as a slice view.
    if (flat.size() != 3) fail_at(e, "narrow takes an axis, a start and a length: x.narrow(axis, start, length)");
    const int a = axis_of(flat[0], rank);
    for (std::size_t k = 1; k < 3; ++k) {
      if (flat[k].is_symbolic()) not_known(e, flat[k], std::string(k == 1 ? "the start" : "the length") + " of narrow");
      if (flat[k].kind != TValue::Kind::Int) fail_at(e, "narrow takes an integer start and length");
    }
    const Dim& size = s[static_cast<std::size_t>(a)];
    if (!size.is_known()) fail_at(e, "narrow of axis " + std::to_string(a) + ", whose size " + size.str() + " is known only at run time");
    const std::int64_t n = size.value(), start = flat[1].i, length = flat[2].i;
    if (start < 0 || length < 0 || start > n || length > n - start) {
      fail_at(e, "narrow(" + std::to_string(flat[0].i) + ", " + std::to_string(start) + ", " + std::to_string(length) +
                     ") is out of range for axis " + std::to_string(a) + " of size " + std::to_string(n));
    }
    std::vector<Dim> starts, stops, steps;
    Shape out = s;
    for (int k = 0; k < rank; ++k) {
      const bool cut = k == a;
      starts.push_back(cut ? Dim(start) : Dim(0));
      stops.push_back(cut ? Dim(start + length) : s[static_cast<std::size_t>(k)]);
      steps.push_back(Dim(1));
      if (cut) out[static_cast<std::size_t>(k)] = Dim(length);
    }
    return TValue::tensor(slice(x, out, std::move(starts), std::move(stops), std::move(steps), e));
  }
  fail_at(e, "unknown method '" + name + "' (known: reshape, view, permute, transpose, unsqueeze, squeeze, broadcast_to, expand_as, size, narrow)");
}

TValue Tracer::subscript(Frame& frame, const body::Expr& e) {
  TValue obj = eval(frame, *e.operands[0]);
  if (obj.kind == TValue::Kind::List) {
    if (e.items.size() != 1 || e.items[0].is_slice) fail_at(e, "lists are indexed with one integer");
    TValue i = eval(frame, *e.items[0].index);
    if (i.is_symbolic()) not_known(e, i, "a list index");
    if (i.kind != TValue::Kind::Int) fail_at(e, "a list index must be an integer");
    std::int64_t n = static_cast<std::int64_t>(obj.items.size());
    std::int64_t k = i.i < 0 ? i.i + n : i.i;
    if (k < 0 || k >= n) fail_at(e, "index " + std::to_string(i.i) + " is out of range for a list of " + std::to_string(n));
    return obj.items[static_cast<std::size_t>(k)];
  }
  if (obj.kind != TValue::Kind::Tensor) fail_at(e, "cannot index " + std::string(kind_word(obj.kind)));
  int x = obj.id;
  const Shape s = val(x).shape;
  if (e.items.size() > s.size()) fail_at(e, "too many indices (" + std::to_string(e.items.size()) + ") for rank " + std::to_string(s.size()));
  std::vector<Dim> starts, stops, steps;
  Shape out;
  std::vector<int> drop;
  for (std::size_t k = 0; k < s.size(); ++k) {
    Dim size = s[k];
    if (k >= e.items.size()) {
      starts.push_back(Dim(0));
      stops.push_back(size);
      steps.push_back(Dim(1));
      out.push_back(size);
      continue;
    }
    const body::SliceItem& it = e.items[k];
    auto int_or = [&](const body::ExprPtr& p, std::int64_t fallback) -> std::optional<std::int64_t> {
      if (!p) return fallback;
      TValue v = eval(frame, *p);
      if (v.is_symbolic()) not_known(*p, v, "a slice bound");
      if (v.kind != TValue::Kind::Int) fail_at(*p, "slice bounds must be integers");
      return v.i;
    };
    if (!size.is_known()) {
      // Run-time dims can only be taken whole.
      if ((!it.is_slice || it.start || it.stop || it.step) && symbolic_) {
        throw Undecided{at(e.offset), static_cast<int>(std::max<std::size_t>(1, e.length)),
                        "'" + quote(e.str(), 60) + "' slices axis " + std::to_string(k) + " of unknown size " + size.str()};
      }
      if (!it.is_slice || it.start || it.stop || it.step) fail_at(e, "axis " + std::to_string(k) + " has the run-time size " + size.str() + " and can only be taken whole (:)");
      starts.push_back(Dim(0));
      stops.push_back(size);
      steps.push_back(Dim(1));
      out.push_back(size);
      continue;
    }
    std::int64_t n = size.value();
    if (!it.is_slice) {
      std::int64_t i = *int_or(it.index, 0);
      std::int64_t j = i < 0 ? i + n : i;
      if (j < 0 || j >= n) fail_at(e, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(k) + " of size " + std::to_string(n));
      starts.push_back(Dim(j));
      stops.push_back(Dim(j + 1));
      steps.push_back(Dim(1));
      out.push_back(Dim(1));
      drop.push_back(static_cast<int>(k));
      continue;
    }
    std::int64_t step = *int_or(it.step, 1);
    if (step <= 0) fail_at(e, "slice steps must be positive");
    std::int64_t a = *int_or(it.start, 0), b = *int_or(it.stop, n);
    a = a < 0 ? std::max<std::int64_t>(0, a + n) : std::min(a, n);
    b = b < 0 ? std::max<std::int64_t>(0, b + n) : std::min(b, n);
    std::int64_t len = b > a ? (b - a + step - 1) / step : 0;
    starts.push_back(Dim(a));
    stops.push_back(Dim(b));
    steps.push_back(Dim(step));
    out.push_back(Dim(len));
  }
  int id = slice(x, out, std::move(starts), std::move(stops), std::move(steps), e);
  if (!drop.empty()) {
    Shape kept;
    for (std::size_t k = 0; k < out.size(); ++k)
      if (std::find(drop.begin(), drop.end(), static_cast<int>(k)) == drop.end()) kept.push_back(out[k]);
    // Dropping size-1 axes of a slice keeps its strides: a Squeeze per axis.
    int cur = id;
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
      Shape sq = val(cur).shape;
      sq.erase(sq.begin() + *it);
      int v = view(cur, ViewKind::Squeeze, sq, e);
      g_[v].axis = *it;
      cur = v;
    }
    return TValue::tensor(cur);
  }
  return TValue::tensor(id);
}

}  // namespace wfgen::trace::detail

namespace wfgen::trace {

std::string_view tensor_operator_node(std::string_view op) {
  static const std::map<std::string_view, std::string_view> nodes = {{"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"},
                                                                     {"**", "pow"}, {"==", "eq"}, {"!=", "ne"}, {"<", "lt"},
                                                                     {"<=", "le"}, {">", "gt"}, {">=", "ge"}};
  const auto it = nodes.find(op);
  return it == nodes.end() ? std::string_view() : it->second;
}

}  // namespace wfgen::trace
