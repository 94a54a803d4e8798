// The reference interpreter of the expression language: runs a checked
// tree with the semantics of the C++ that to_cpp prints (the kernel's float
// type for every operation, integers wrapping to its Int type, the same
// math functions), so tests compare generated kernels against it.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "wfgen/expr/expr.hpp"
#include "wfgen/expr/language.hpp"
#include "wfgen/kernel_math.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::expr {

using namespace detail;

namespace {

namespace M = wfgen::rt::math;

std::int64_t saturate_i64(double x) { return M::to_int<std::int64_t>(x); }

class Interpreter {
 public:
  Interpreter(rt::DType dtype, const std::map<std::string, Value>& values)
      : dtype_(dtype), f32_(dtype == rt::DType::f32), bits_(int_bits(dtype)), values_(values) {}

  // Wraps an integer to the kernel's Int type (two's complement).
  std::int64_t wrap(std::uint64_t v) const {
    if (bits_ == 32) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    return static_cast<std::int64_t>(v);
  }
  double round(double x) const { return f32_ ? static_cast<double>(static_cast<float>(x)) : x; }

  Value eval(const Expr& e) {
    WFGEN_ASSERT(e.checked_for == dtype_, "evaluate() of an expression not checked for this dtype");
    switch (e.op) {
      case Op::BoolLit: return Value::of_bool(e.ivalue != 0);
      case Op::IntLit: return Value::of_int(e.ivalue);
      case Op::FloatLit: return Value::of_float(float_value(e, dtype_));
      case Op::Name: return name(e);
      case Op::Neg: {
        Value x = eval(e.args[0]);
        if (x.type == Type::Int) return Value::of_int(wrap(std::uint64_t{0} - static_cast<std::uint64_t>(x.i)));
        return Value::of_float(-x.f);
      }
      case Op::Not: return Value::of_bool(eval(e.args[0]).i == 0);
      case Op::And: {
        if (eval(e.args[0]).i == 0) return Value::of_bool(false);
        return Value::of_bool(eval(e.args[1]).i != 0);
      }
      case Op::Or: {
        if (eval(e.args[0]).i != 0) return Value::of_bool(true);
        return Value::of_bool(eval(e.args[1]).i != 0);
      }
      case Op::Cond: return eval(e.args[0]).i != 0 ? eval(e.args[1]) : eval(e.args[2]);
      case Op::Convert: {
        Value x = eval(e.args[0]);
        return Value::of_float(f32_ ? static_cast<double>(static_cast<float>(x.i)) : static_cast<double>(x.i));
      }
      case Op::Call: return call(e);
      default: return binary(e.op, eval(e.args[0]), eval(e.args[1]));
    }
  }

  Value finish(const Expr& e) {
    Value v = eval(e);
    rt::DType d = dtype_;
    if (rt::dtype_is_float(d)) {
      double x = v.type == Type::Float ? v.f : f32_ ? static_cast<double>(static_cast<float>(v.i))
                                                    : static_cast<double>(v.i);
      return Value::of_float(x);
    }
    std::int64_t i = v.type == Type::Float ? to_dtype_saturating(v.f, d) : v.i;
    return Value::of_int(narrow(i, d));
  }

 private:
  static std::int64_t to_dtype_saturating(double x, rt::DType d) {
    switch (d) {
      case rt::DType::i32: return M::to_int<std::int32_t>(x);
      case rt::DType::u8: return M::to_int<std::uint8_t>(x);
      default: return M::to_int<std::int64_t>(x);
    }
  }

  // An integer converted to an integer dtype as C++20 static_cast does (modulo 2^bits).
  static std::int64_t narrow(std::int64_t v, rt::DType d) {
    switch (d) {
      case rt::DType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
      case rt::DType::u8: return static_cast<std::uint8_t>(v);
      default: return v;
    }
  }

  Value name(const Expr& e) {
    const Binding& b = e.binding;
    if (b.kind == Binding::Kind::Constant) return Value::of_float(round(e.fvalue));
    auto it = values_.find(e.text);
    if (it == values_.end()) throw std::out_of_range("evaluate: no value for name '" + e.text + "'");
    const Value& v = it->second;
    if (e.type == Type::Bool) return Value::of_bool(v.type == Type::Float ? v.f != 0 : v.i != 0);
    if (b.kind == Binding::Kind::Element) {
      if (rt::dtype_is_float(b.dtype)) {
        double x = v.as_double();
        if (b.dtype == rt::DType::f32) x = static_cast<double>(static_cast<float>(x));
        return Value::of_float(round(x));
      }
      std::int64_t i = narrow(v.type == Type::Float ? saturate_i64(v.f) : v.i, b.dtype);
      return Value::of_int(wrap(static_cast<std::uint64_t>(i)));
    }
    if (e.type == Type::Int) {
      return Value::of_int(wrap(static_cast<std::uint64_t>(v.type == Type::Float ? saturate_i64(v.f) : v.i)));
    }
    return Value::of_float(round(v.as_double()));
  }

  Value binary(Op op, const Value& a, const Value& b) {
    if (a.type == Type::Int && b.type == Type::Int) {
      std::uint64_t x = static_cast<std::uint64_t>(a.i), y = static_cast<std::uint64_t>(b.i);
      switch (op) {
        case Op::Add: return Value::of_int(wrap(x + y));
        case Op::Sub: return Value::of_int(wrap(x - y));
        case Op::Mul: return Value::of_int(wrap(x * y));
        case Op::Div:
          if (b.i == 0) return Value::of_int(0);
          if (b.i == -1) return Value::of_int(wrap(std::uint64_t{0} - x));
          return Value::of_int(a.i / b.i);
        case Op::Mod:
          if (b.i == 0 || b.i == -1) return Value::of_int(0);
          return Value::of_int(a.i % b.i);
        default: break;
      }
    }
    if (a.type == Type::Float) {
      double x[3] = {a.f, b.f, 0};
      switch (op) {
        case Op::Add: return Value::of_float(real_call(x, f32_, [](auto p, auto q, auto) { return p + q; }));
        case Op::Sub: return Value::of_float(real_call(x, f32_, [](auto p, auto q, auto) { return p - q; }));
        case Op::Mul: return Value::of_float(real_call(x, f32_, [](auto p, auto q, auto) { return p * q; }));
        case Op::Div: return Value::of_float(real_call(x, f32_, [](auto p, auto q, auto) { return p / q; }));
        default: break;
      }
    }
    // Comparisons: both operands have the same type here (check() promoted them).
    auto cmp = [&](auto x, auto y) {
      switch (op) {
        case Op::Lt: return x < y;
        case Op::Le: return x <= y;
        case Op::Gt: return x > y;
        case Op::Ge: return x >= y;
        case Op::Eq: return x == y;
        case Op::Ne: return x != y;
        default: WFGEN_ASSERT(false, "not a comparison"); return false;
      }
    };
    if (a.type == Type::Float) return Value::of_bool(cmp(a.f, b.f));
    return Value::of_bool(cmp(a.i, b.i));
  }

  Value call(const Expr& e) {
    const FnInfo& f = info(e.fn);
    if (f.rule == Rule::Select) return eval(e.args[0]).i != 0 ? eval(e.args[1]) : eval(e.args[2]);
    std::vector<Value> args;
    for (const auto& a : e.args) args.push_back(eval(a));
    if ((f.rule == Rule::Numeric || f.rule == Rule::Integer) && e.type == Type::Int) {
      std::int64_t x[3] = {0, 0, 0};
      for (std::size_t i = 0; i < args.size(); ++i) x[i] = args[i].i;
      return Value::of_int(wrap(static_cast<std::uint64_t>(f.integer(x))));
    }
    double x[3] = {0, 0, 0};
    for (std::size_t i = 0; i < args.size(); ++i) x[i] = args[i].f;
    double r = f.real(x, f32_);
    if (f.rule == Rule::Predicate) return Value::of_bool(r != 0);
    return Value::of_float(r);
  }

  rt::DType dtype_;
  bool f32_;
  int bits_;
  const std::map<std::string, Value>& values_;
};

}  // namespace

Value evaluate_exact(const Expr& e, rt::DType dtype, const std::map<std::string, Value>& values) {
  return Interpreter(dtype, values).finish(e);
}

double evaluate(const Expr& e, rt::DType dtype, const std::map<std::string, double>& values) {
  std::map<std::string, Value> vs;
  for (const auto& [k, v] : values) vs[k] = Value::of_float(v);
  return evaluate_exact(e, dtype, vs).as_double();
}

}  // namespace wfgen::expr
