// Plain helpers of the tracer (trace.cpp): values and arguments, shapes,
// the text of a statement.
#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "wfgen/body/body.hpp"
#include "wfgen/trace/tvalue.hpp"

namespace wfgen::trace::detail {

using shape::Dim;
using shape::Shape;

TValue from_arg(const spec::ArgValue& v) {
  return std::visit(
      [](const auto& x) -> TValue {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return TValue::of_bool(x);
        else if constexpr (std::is_same_v<T, std::int64_t>) return TValue::of_int(x);
        else if constexpr (std::is_same_v<T, double>) return TValue::of_float(x);
        else {
          std::vector<TValue> items;
          for (auto e : x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, double>) items.push_back(TValue::of_float(e));
            else items.push_back(TValue::of_int(e));
          }
          return TValue::list(std::move(items));
        }
      },
      v);
}

// Converts a traced value to a constructor argument of `type`; nullopt if it does not fit.
std::optional<spec::ArgValue> to_arg(const TValue& v, spec::ArgType type) {
  switch (type) {
    case spec::ArgType::Int:
      if (v.kind == TValue::Kind::Int) return spec::ArgValue(v.i);
      return std::nullopt;
    case spec::ArgType::Float:
      if (v.kind == TValue::Kind::Int || v.kind == TValue::Kind::Float) return spec::ArgValue(v.number());
      return std::nullopt;
    case spec::ArgType::Bool:
      if (v.kind == TValue::Kind::Bool) return spec::ArgValue(v.i != 0);
      return std::nullopt;
    case spec::ArgType::Ints: {
      if (v.kind != TValue::Kind::List) return std::nullopt;
      std::vector<std::int64_t> out;
      for (const auto& e : v.items) {
        if (e.kind != TValue::Kind::Int) return std::nullopt;
        out.push_back(e.i);
      }
      return spec::ArgValue(out);
    }
    case spec::ArgType::Floats: {
      if (v.kind != TValue::Kind::List) return std::nullopt;
      std::vector<double> out;
      for (const auto& e : v.items) {
        if (!e.is_number()) return std::nullopt;
        out.push_back(e.number());
      }
      return spec::ArgValue(out);
    }
  }
  return std::nullopt;
}

// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t k = 0; k < n; ++k) {
    const Dim* x = k + a.size() >= n ? &a[k + a.size() - n] : nullptr;
    const Dim* y = k + b.size() >= n ? &b[k + b.size() - n] : nullptr;
    if (!x) out[k] = *y;
    else if (!y) out[k] = *x;
    else if (*x == *y) out[k] = *x;
    else if (x->is_known() && x->value() == 1) out[k] = *y;
    else if (y->is_known() && y->value() == 1) out[k] = *x;
    else return std::nullopt;
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string number_str(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The statement as the parser understood it (comments dropped, spacing
// normalised): this text reaches generated comments, so it is never the
// raw spec line.
std::string statement_text(const body::Stmt& s) {
  std::string out;
  auto join_exprs = [](const std::vector<body::ExprPtr>& v) {
    std::string r;
    for (const auto& e : v) r += (r.empty() ? "" : ", ") + e->str();
    return r;
  };
  switch (s.kind) {
    case body::Stmt::Kind::Assign:
      for (const auto& t : s.targets) out += (out.empty() ? "" : ", ") + t;
      out += " = " + s.value->str();
      break;
    case body::Stmt::Kind::Return: out = "return " + join_exprs(s.results); break;
    case body::Stmt::Kind::If: out = "if " + s.value->str() + ":"; break;
    case body::Stmt::Kind::For:
      out = "for " + s.targets[0] + " in range(" + (s.range_start ? s.range_start->str() + ", " : "") + s.value->str() + "):";
      break;
    case body::Stmt::Kind::Pass: out = "pass"; break;
    case body::Stmt::Kind::Assert: out = "assert " + s.value->str(); break;
  }
  return out;
}

}  // namespace wfgen::trace::detail
