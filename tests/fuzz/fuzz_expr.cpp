// Fuzz target: the element-wise expression language of kernel bodies.
//
// Every input is parsed; what parses is printed back (str() must parse to
// the same text), type-checked for every dtype, printed as C++ and run by the
// reference interpreter with fixed values. expr::Error (parse or type error)
// is the expected way to refuse input; anything else escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "wfgen/expr/expr.hpp"

namespace {

using namespace wfgen;

expr::Env env_for(rt::DType d) {
  return {{"a", expr::Binding::element(d)},         {"b", expr::Binding::element(d)},
          {"m", expr::Binding::element(rt::DType::u8)}, {"x", expr::Binding::element(rt::DType::f64)},
          {"alpha", expr::Binding::scalar(expr::Type::Float)}, {"n", expr::Binding::scalar(expr::Type::Int)},
          {"flag", expr::Binding::scalar(expr::Type::Bool)}};
}

const std::map<std::string, expr::Value> kValues = {
    {"a", expr::Value::of_float(1.5)},  {"b", expr::Value::of_float(-2.0)}, {"m", expr::Value::of_int(200)},
    {"x", expr::Value::of_float(0.25)}, {"alpha", expr::Value::of_float(3.0)}, {"n", expr::Value::of_int(-7)},
    {"flag", expr::Value::of_bool(true)}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  expr::Expr parsed;
  try {
    parsed = expr::parse(text);
  } catch (const expr::Error&) {
    return 0;
  }
  // The printed form parses back to itself.
  std::string printed = parsed.str();
  expr::Expr reparsed;
  try {
    reparsed = expr::parse(printed);
  } catch (const expr::Error& e) {
    // Printing adds parentheses (--a prints as -(-a)), so an input just
    // under the nesting limit may print past it; nothing else may fail.
    if (std::string_view(e.what()).find("nested too deeply") != std::string_view::npos) return 0;
    std::abort();
  }
  if (reparsed.str() != printed) std::abort();
  for (rt::DType d : {rt::DType::f32, rt::DType::f64, rt::DType::i32, rt::DType::i64, rt::DType::u8}) {
    expr::Expr typed;
    try {
      typed = expr::check(parsed, d, env_for(d));
    } catch (const expr::Error&) {
      continue;
    }
    expr::EmitContext ctx{d, [](const std::string& name) { return name + "[i]"; }};
    (void)expr::to_cpp(typed, ctx);
    (void)expr::evaluate_exact(typed, d, kValues);
    (void)expr::cost(typed);
    (void)expr::depth(typed);
  }
  return 0;
}
