// The C++ printer of the expression language: a checked tree to the C++
// expression of a kernel (to_cpp), and a tree back to its source text
// (Expr::str). Every name comes from the EmitContext's callback, every
// literal is reprinted from its value: no spec text reaches the C++.
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "wfgen/expr/expr.hpp"
#include "wfgen/expr/language.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::expr {

using namespace detail;

namespace {

struct Out {
  std::string s;
  int prec = kPrimary;
};

bool is_relational(int prec) { return prec == kRel || prec == kEq; }

std::string paren(const Out& o, bool need) { return need ? "(" + o.s + ")" : o.s; }

// a OP b, minimal parentheses plus a few for clarity (comparisons inside
// comparisons, && inside ||, nested ?:), as compilers suggest with -Wparentheses.
Out infix(Op op, const Out& l, const Out& r) {
  int p = info(op).prec;
  auto clarity = [&](int child) {
    return (is_relational(p) && is_relational(child)) || (p == kOr && child == kAnd) || child == kCond;
  };
  bool pl = l.prec < p || clarity(l.prec);
  bool pr = r.prec <= p || clarity(r.prec);
  return {paren(l, pl) + " " + info(op).spelling + " " + paren(r, pr), p};
}

Out prefix(const char* op, const Out& x) {
  bool need = x.prec < kUnary || (op[0] == '-' && !x.s.empty() && x.s[0] == '-');
  return {std::string(op) + paren(x, need), kUnary};
}

Out conditional(const Out& c, const Out& a, const Out& b) {
  return {paren(c, c.prec <= kCond) + " ? " + paren(a, a.prec <= kCond) + " : " + paren(b, b.prec <= kCond), kCond};
}

Out source(const Expr& e) {
  switch (e.op) {
    case Op::BoolLit: return {e.ivalue ? "true" : "false"};
    case Op::IntLit: return {std::to_string(e.ivalue)};
    case Op::FloatLit: return {e.text};
    case Op::Name: return {e.text};
    case Op::Neg:
    case Op::Not: return prefix(info(e.op).spelling, source(e.args[0]));
    case Op::Cond: return conditional(source(e.args[0]), source(e.args[1]), source(e.args[2]));
    case Op::Call: {
      std::string s = std::string(fn_name(e.fn)) + "(";
      for (std::size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + source(e.args[i]).s;
      return {s + ")"};
    }
    case Op::Convert: return source(e.args[0]);
    default: return infix(e.op, source(e.args[0]), source(e.args[1]));
  }
}

// Shortest text that reads back as the same float (or double), with a
// decimal point or exponent so C++ sees a floating literal. Locale-free.
std::string float_literal(double v, bool f32) {
  const char* t = f32 ? "float" : "double";
  if (std::isnan(v)) return std::string("std::numeric_limits<") + t + ">::quiet_NaN()";
  if (std::isinf(v)) {
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  }
  char buf[64];
  auto r = f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v)) : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return f32 ? s + "f" : s;
}

// A C++ expression from a callback that is a postfix expression (a name,
// member, subscript or call: `a`, `p.x`, `wf_a[wf_i * s]`, `f(x, y)`) needs no
// parentheses; anything else gets them.
bool simple_cpp(const std::string& s) {
  if (s.empty() || !ident_start(s[0])) return false;
  int nesting = 0;
  for (char c : s) {
    if (c == '[' || c == '(') {
      ++nesting;
    } else if (c == ']' || c == ')') {
      if (--nesting < 0) return false;
    } else if (nesting == 0 && !(ident_char(c) || c == '.' || c == ':')) {
      return false;
    }
  }
  return nesting == 0;
}

class CppPrinter {
 public:
  explicit CppPrinter(const EmitContext& ctx)
      : ctx_(ctx), f32_(ctx.dtype == rt::DType::f32), ns_(ctx.math + "::") {}

  std::string int_type() const { return int_bits(ctx_.dtype) == 32 ? "std::int32_t" : "std::int64_t"; }
  std::string float_type() const { return f32_ ? "float" : "double"; }
  std::string repr(Type t) const {
    return t == Type::Bool ? "bool" : t == Type::Int ? int_type() : float_type();
  }

  Out print(const Expr& e) {
    WFGEN_ASSERT(e.checked_for == ctx_.dtype, "to_cpp() of an expression not checked for this dtype");
    switch (e.op) {
      case Op::BoolLit: return {e.ivalue ? "true" : "false"};
      case Op::IntLit: return int_literal(e.ivalue);
      case Op::FloatLit: return {float_literal(float_value(e, ctx_.dtype), f32_)};
      case Op::Name: return name(e);
      case Op::Neg:
        if (e.args[0].op == Op::IntLit) return int_literal(-e.args[0].ivalue);  // no overflow: literals are >= 0
        if (e.type == Type::Int) return helper("neg", {print(e.args[0])});
        return prefix("-", print(e.args[0]));
      case Op::Not: return prefix("!", print(e.args[0]));
      case Op::Mul:
      case Op::Div:
      case Op::Mod:
      case Op::Add:
      case Op::Sub:
        if (e.type == Type::Int) {
          static constexpr const char* kNames[] = {"mul", "idiv", "imod", "add", "sub"};
          const char* n = kNames[static_cast<int>(e.op) - static_cast<int>(Op::Mul)];
          return helper(n, {print(e.args[0]), print(e.args[1])});
        }
        return infix(e.op, print(e.args[0]), print(e.args[1]));
      case Op::Cond: return conditional(print(e.args[0]), print(e.args[1]), print(e.args[2]));
      case Op::Call: return call(e);
      case Op::Convert: {
        // Int literals (and negated ones) become float literals: 2 -> 2.0f.
        const Expr& a = e.args[0];
        bool negated = a.op == Op::Neg && a.args[0].op == Op::IntLit;
        if (a.op == Op::IntLit || negated) {
          std::int64_t v = negated ? -a.args[0].ivalue : a.ivalue;
          double d = f32_ ? static_cast<double>(static_cast<float>(v)) : static_cast<double>(v);
          return {float_literal(d, f32_), negated ? kUnary : kPrimary};
        }
        return {"static_cast<" + float_type() + ">(" + print(a).s + ")"};
      }
      default: return infix(e.op, print(e.args[0]), print(e.args[1]));
    }
  }

  // The final conversion to the kernel's element type.
  std::string finish(const Expr& e) {
    Out o = print(e);
    rt::DType d = ctx_.dtype;
    std::string t = cpp_type(d);
    if (e.type == Type::Float && !rt::dtype_is_float(d)) return ns_ + "to_int<" + t + ">(" + o.s + ")";
    if (repr(e.type) == t) return o.s;
    return "static_cast<" + t + ">(" + o.s + ")";
  }

 private:
  Out int_literal(std::int64_t v) const {
    if (int_bits(ctx_.dtype) == 32) return {std::to_string(v), v < 0 ? kUnary : kPrimary};
    return {"std::int64_t{" + std::to_string(v) + "}"};
  }

  Out helper(const std::string& fn, const std::vector<Out>& args) {
    std::string s = ns_ + fn + "(";
    for (std::size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].s;
    return {s + ")"};
  }

  Out name(const Expr& e) {
    const Binding& b = e.binding;
    if (b.kind == Binding::Kind::Constant) return {float_literal(e.fvalue, f32_)};
    WFGEN_ASSERT(ctx_.name != nullptr, "EmitContext without a name callback");
    std::string s = ctx_.name(e.text);
    if (!simple_cpp(s)) s = "(" + s + ")";
    std::string have = b.kind == Binding::Kind::Element ? cpp_type(b.dtype)
                       : b.type == Type::Int            ? "std::int64_t"
                                                        : repr(b.type);
    std::string want = repr(e.type);
    if (have == want) return {s};
    return {"static_cast<" + want + ">(" + s + ")"};
  }

  Out call(const Expr& e) {
    const FnInfo& f = info(e.fn);
    if (f.rule == Rule::Select) return conditional(print(e.args[0]), print(e.args[1]), print(e.args[2]));
    bool int_args = (f.rule == Rule::Numeric || f.rule == Rule::Integer) && e.type == Type::Int;
    std::string_view tmpl = int_args ? f.cpp_int : f.cpp_float;
    std::vector<Out> args;
    for (const auto& a : e.args) args.push_back(print(a));
    if (tmpl == "$0") return args[0];
    std::string s;
    for (std::size_t i = 0; i < tmpl.size(); ++i) {
      char c = tmpl[i];
      if (c == '$' && i + 1 < tmpl.size()) {
        s += args[static_cast<std::size_t>(tmpl[++i] - '0')].s;
      } else if (c == '@') {
        s += ns_;
      } else {
        s += c;
      }
    }
    return {s};
  }

  const EmitContext& ctx_;
  bool f32_;
  std::string ns_;
};

}  // namespace

std::string Expr::str() const { return source(*this).s; }

std::string to_cpp(const Expr& e, const EmitContext& ctx) { return CppPrinter(ctx).finish(e); }

}  // namespace wfgen::expr
