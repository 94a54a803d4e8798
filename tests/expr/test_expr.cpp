// Tests of the element-wise expression language (wfgen/expr/expr.hpp):
// parsing, error messages with their offsets, type rules per dtype, the
// reference interpreter, and C++ emission checked by compiling and running
// the generated code against the interpreter.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "wfgen/expr/expr.hpp"

using namespace wfgen;
using namespace wfgen::expr;
using rt::DType;

namespace {

const DType kAllDTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8};

bool is_float(DType d) { return d == DType::f32 || d == DType::f64; }

// A, b, c: elements of the kernel dtype; m: a u8 element; x: an f64 element;
// alpha/n/flag: float, int and bool constructor arguments.
Env env_for(DType d) {
  return {{"a", Binding::element(d)},         {"b", Binding::element(d)},
          {"c", Binding::element(d)},         {"m", Binding::element(DType::u8)},
          {"x", Binding::element(DType::f64)}, {"alpha", Binding::scalar(Type::Float)},
          {"n", Binding::scalar(Type::Int)},  {"flag", Binding::scalar(Type::Bool)}};
}

// Fully parenthesised form of a tree, to test the parser's structure.
std::string tree(const Expr& e) {
  switch (e.op) {
    case Op::BoolLit:
    case Op::IntLit:
    case Op::FloatLit:
    case Op::Name: return e.text;
    case Op::Neg:
    case Op::Not: return std::string("(") + op_spelling(e.op) + tree(e.args[0]) + ")";
    case Op::Cond: return "(" + tree(e.args[0]) + " ? " + tree(e.args[1]) + " : " + tree(e.args[2]) + ")";
    case Op::Call: {
      std::string s = std::string(fn_name(e.fn)) + "(";
      for (std::size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + tree(e.args[i]);
      return s + ")";
    }
    case Op::Convert: return "float(" + tree(e.args[0]) + ")";
    default: return "(" + tree(e.args[0]) + " " + op_spelling(e.op) + " " + tree(e.args[1]) + ")";
  }
}

std::string cpp(const std::string& text, DType d) {
  EmitContext ctx;
  ctx.dtype = d;
  ctx.name = [](const std::string& n) { return n == "alpha" || n == "n" || n == "flag" ? n : n + "[i]"; };
  return to_cpp(compile(text, d, env_for(d)), ctx);
}

double eval(const std::string& text, DType d, const std::map<std::string, double>& values) {
  return evaluate(compile(text, d, env_for(d)), d, values);
}

}  // namespace

TEST_CASE("expr: precedence and associativity", "[expr][parse]") {
  const std::pair<const char*, const char*> cases[] = {
      {"a + b * c", "(a + (b * c))"},
      {"a * b + c", "((a * b) + c)"},
      {"a - b - c", "((a - b) - c)"},
      {"a / b / c", "((a / b) / c)"},
      {"a / b * c % d", "(((a / b) * c) % d)"},
      {"-a * b", "((-a) * b)"},
      {"- -a", "(-(-a))"},
      {"!!p", "(!(!p))"},
      {"-a - -b", "((-a) - (-b))"},
      {"a < b + c", "(a < (b + c))"},
      {"a + b < c * d", "((a + b) < (c * d))"},
      {"a < b == c >= d", "((a < b) == (c >= d))"},
      {"a == b != c", "((a == b) != c)"},
      {"p || q && r", "(p || (q && r))"},
      {"p && q || r", "((p && q) || r)"},
      {"!p && q", "((!p) && q)"},
      {"a < b && c <= d || e > f", "(((a < b) && (c <= d)) || (e > f))"},
      {"p ? a : b", "(p ? a : b)"},
      {"p ? a : q ? b : c", "(p ? a : (q ? b : c))"},
      {"p ? q ? a : b : c", "(p ? (q ? a : b) : c)"},
      {"p || q ? a + 1 : b * 2", "((p || q) ? (a + 1) : (b * 2))"},
      {"(a + b) * c", "((a + b) * c)"},
      {"((a))", "a"},
      {"a * (b - (c + d))", "(a * (b - (c + d)))"},
      {"max(a, b + 1) * 2", "(max(a, (b + 1)) * 2)"},
      {"select(a < b, a, -b)", "select((a < b), a, (-b))"},
      {"clamp(x, -1, p ? 2 : 3)", "clamp(x, (-1), (p ? 2 : 3))"},
      {" \ta\n+\r\nb ", "(a + b)"},
      {"1e-5 + .5 + 1. + 2.5E+3 + 7", "((((1e-5 + .5) + 1.) + 2.5E+3) + 7)"},
      {"true && !false", "(true && (!false))"},
      {"pi * e + inf", "((pi * e) + inf)"},
      {"_x1 + A_b2", "(_x1 + A_b2)"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    Expr e = parse(text);
    CHECK(tree(e) == expected);
    // str() reads back as the same tree.
    CHECK(tree(parse(e.str())) == expected);
  }
}

TEST_CASE("expr: str() uses minimal parentheses", "[expr][parse]") {
  const std::pair<const char*, const char*> cases[] = {
      {"((a + b)) * c", "(a + b) * c"},
      {"a + (b * c)", "a + b * c"},
      {"a - (b - c)", "a - (b - c)"},
      {"(a - b) - c", "a - b - c"},
      {"-(-a)", "-(-a)"},
      {"-(a + b)", "-(a + b)"},
      {"(a < b) == (c < d)", "(a < b) == (c < d)"},
      {"p || (q && r)", "p || (q && r)"},
      {"(p ? a : b) + 1", "(p ? a : b) + 1"},
      {"p ? a : (q ? b : c)", "p ? a : (q ? b : c)"},
      {"exp( a )", "exp(a)"},
      {"007", "7"},
      {"1e-5", "1e-5"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    CHECK(parse(text).str() == expected);
  }
}

TEST_CASE("expr: every function parses with its arity and every operator round-trips", "[expr][parse]") {
  const char* arg_names[] = {"a", "b", "c"};
  for (int i = 0; i < kFnCount; ++i) {
    Fn fn = static_cast<Fn>(i);
    std::string text = std::string(fn_name(fn)) + "(";
    for (int k = 0; k < fn_arity(fn); ++k) text += std::string(k ? ", " : "") + arg_names[k];
    text += ")";
    INFO(text);
    Expr e = parse(text);
    CHECK(e.op == Op::Call);
    CHECK(e.fn == fn);
    CHECK(e.args.size() == static_cast<std::size_t>(fn_arity(fn)));
    CHECK(e.str() == text);
    CHECK(find_function(fn_name(fn)) == fn);
  }
  CHECK_FALSE(find_function("tahn").has_value());
  for (const char* op : {"*", "/", "%", "+", "-", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}) {
    std::string text = std::string("a ") + op + " b";
    INFO(text);
    Expr e = parse(text);
    CHECK(op_spelling(e.op) == std::string(op));
    CHECK(e.str() == text);
  }
}

TEST_CASE("expr: offsets of nodes", "[expr][parse]") {
  Expr e = parse("a + exp(b * 2)");
  CHECK(e.offset == 0);
  CHECK(e.length == 14);
  const Expr& call = e.args[1];
  CHECK(call.offset == 4);
  CHECK(call.length == 10);
  CHECK(call.args[0].offset == 8);
  CHECK(call.args[0].length == 5);
}

TEST_CASE("expr: parse errors", "[expr][errors]") {
  struct Case {
    const char* text;
    const char* message;
    std::size_t offset;
    std::size_t length;
  };
  const Case cases[] = {
      {"", "empty expression", 0, 1},
      {"   ", "empty expression", 0, 3},
      {"a +", "expected an expression, found the end of the expression", 3, 1},
      {"a + * b", "expected an expression, found '*'", 4, 1},
      {"(a + b", "expected ')', found the end of the expression", 6, 1},
      {"a + b)", "expected an operator or the end of the expression, found ')'", 5, 1},
      {"a b", "expected an operator or the end of the expression, found 'b'", 2, 1},
      {"p ? a", "expected ':' of the conditional '?', found the end of the expression", 5, 1},
      {"p ? a , b", "expected ':' of the conditional '?', found ','", 6, 1},
      {"sigmod(a)", "unknown function 'sigmod'; did you mean 'sigmoid'?", 0, 6},
      {"frobnicate(a)", "unknown function 'frobnicate'", 0, 10},
      {"exp(a, b)", "exp takes 1 argument, but 2 were given", 0, 9},
      {"pow(a)", "pow takes 2 arguments, but 1 was given", 0, 6},
      {"clamp()", "clamp takes 3 arguments, but 0 were given", 0, 7},
      {"max(a b)", "expected ',' or ')' in the call to max, found 'b'", 6, 1},
      {"max(a,)", "expected an expression, found ')'", 6, 1},
      {"a = b", "'=' is not an operator; did you mean '=='?", 2, 1},
      {"a & b", "'&' is not an operator; did you mean '&&'?", 2, 1},
      {"a | b", "'|' is not an operator; did you mean '||'?", 2, 1},
      {"a[i] + 1", "unexpected '[': a name stands for the element itself and takes no index", 1, 1},
      {"a $ b", "unexpected character '$'", 2, 1},
      {"a ^ b", "unexpected character '^'", 2, 1},
      {"a + \xc3\xa9", "unexpected character '\\xc3\\xa9'", 4, 2},
      {"a; b", "unexpected character ';'", 1, 1},
      {"2x", "invalid suffix 'x' on numeric literal", 1, 1},
      {"1.5f", "invalid suffix 'f' on numeric literal", 3, 1},
      {"0x1F", "invalid suffix 'x1F' on numeric literal", 1, 3},
      {"1.2.3", "invalid suffix '.3' on numeric literal", 3, 2},
      {"1e", "exponent has no digits", 0, 2},
      {"3 * 1e+", "exponent has no digits", 4, 3},
      {"99999999999999999999", "integer literal is too large for a 64-bit integer", 0, 20},
      {"9223372036854775808", "integer literal is too large for a 64-bit integer", 0, 19},
      {"1e999", "floating-point literal is out of range", 0, 5},
      {"a.b", "unexpected character '.'", 1, 1},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    try {
      parse(c.text);
      FAIL("no error");
    } catch (const ParseError& e) {
      CHECK(std::string(e.what()) == c.message);
      CHECK(e.offset() == c.offset);
      CHECK(e.length() == c.length);
    }
  }
}

TEST_CASE("expr: untrusted input cannot nest without limit", "[expr][errors]") {
  std::string deep(5000, '(');
  deep += "a" + std::string(5000, ')');
  CHECK_THROWS_AS(parse(deep), ParseError);
  std::string negs(5000, '-');
  CHECK_THROWS_AS(parse(negs + "a"), ParseError);
  std::string chain = "a";
  for (int i = 0; i < 5000; ++i) chain += " + a";
  try {
    parse(chain);
    FAIL("no error");
  } catch (const ParseError& e) {
    CHECK(std::string(e.what()) == "expression is nested too deeply (more than 200 levels)");
  }
  // 150 terms are fine.
  std::string ok = "a";
  for (int i = 0; i < 150; ++i) ok += " + a";
  CHECK(depth(parse(ok)) == 151);
}

TEST_CASE("expr: type errors", "[expr][errors]") {
  struct Case {
    const char* text;
    DType dtype;
    const char* message;
    std::size_t offset;
    std::size_t length;
  };
  const Case cases[] = {
      {"alpa * a", DType::f32, "unknown name 'alpa'; did you mean 'alpha'?", 0, 4},
      {"a + zzz", DType::f32, "unknown name 'zzz'", 4, 3},
      {"a * p1", DType::f32, "unknown name 'p1'; did you mean 'pi'?", 4, 2},
      {"exp + a", DType::f32, "'exp' is a function; call it as exp(...)", 0, 3},
      {"exp(a)", DType::i32, "exp needs a floating-point dtype, but this kernel is for i32", 0, 3},
      {"a + tanh(b)", DType::u8, "tanh needs a floating-point dtype, but this kernel is for u8", 4, 4},
      {"sigmoid(alpha)", DType::i64, "sigmoid needs a floating-point dtype, but this kernel is for i64", 0, 7},
      {"pow(a, 2)", DType::i32, "pow needs a floating-point dtype, but this kernel is for i32", 0, 3},
      {"a % b", DType::f32, "'%' needs int operands, but the left operand is float; use fmod for floats", 0, 1},
      {"n % alpha", DType::i32, "'%' needs int operands, but the right operand is float", 4, 5},
      {"a + (b < c)", DType::f32, "'+' needs numeric operands, but the right operand is bool", 5, 5},
      {"flag * 2", DType::i32, "'*' needs numeric operands, but the left operand is bool", 0, 4},
      {"-flag", DType::f64, "'-' needs a numeric operand, but it is bool", 1, 4},
      {"!a", DType::i32, "'!' needs a bool operand, but it is int; compare it with 0", 1, 1},
      {"a && flag", DType::f32, "'&&' needs bool operands, but the left operand is float; compare it with 0", 0, 1},
      {"flag || n", DType::f32, "'||' needs bool operands, but the right operand is int; compare it with 0", 8, 1},
      {"flag < true", DType::f32, "'<' needs numeric operands, but the left operand is bool", 0, 4},
      {"flag == a", DType::f32, "'==' cannot compare bool with float", 0, 9},
      {"a ? b : c", DType::i32, "the condition of '?:' must be bool, but it is int; compare it with 0", 0, 1},
      {"flag ? a > b : c", DType::f32, "the branches of '?:' have different types: bool and float", 0, 16},
      {"select(alpha, a, b)", DType::f32, "the condition of select must be bool, but it is float; compare it with 0",
       7, 5},
      {"select(flag, flag, 1)", DType::f32, "the branches of select have different types: bool and int", 0, 21},
      {"max(a, flag)", DType::f32, "max needs numeric arguments, but argument 2 is bool", 7, 4},
      {"abs(a < b)", DType::f32, "abs needs numeric arguments, but its argument is bool", 4, 5},
      {"isnan(flag)", DType::f32, "isnan needs numeric arguments, but its argument is bool", 6, 4},
      {"shl(a, 1)", DType::f32, "shl needs int arguments, but argument 1 is float", 4, 1},
      {"shr(n, alpha)", DType::i32, "shr needs int arguments, but argument 2 is float", 7, 5},
      {"shl(n, flag)", DType::i64, "shl needs numeric arguments, but argument 2 is bool", 7, 4},
      {"a + 3000000000", DType::i32, "integer literal 3000000000 does not fit in the int32 arithmetic of i32 kernels",
       4, 10},
      {"a + 3000000000", DType::u8, "integer literal 3000000000 does not fit in the int32 arithmetic of u8 kernels",
       4, 10},
      {"a * 1e39", DType::f32, "floating-point literal 1e39 is out of range for f32", 4, 4},
  };
  for (const auto& c : cases) {
    INFO(c.text << " for " << rt::dtype_name(c.dtype));
    Expr parsed = parse(c.text);
    try {
      check(parsed, c.dtype, env_for(c.dtype));
      FAIL("no error");
    } catch (const TypeError& e) {
      CHECK(std::string(e.what()) == c.message);
      CHECK(e.offset() == c.offset);
      CHECK(e.length() == c.length);
    }
  }
  // The same literals are fine where they fit.
  CHECK_NOTHROW(compile("a + 3000000000", DType::i64, env_for(DType::i64)));
  CHECK_NOTHROW(compile("a + 3000000000", DType::f32, env_for(DType::f32)));
  CHECK_NOTHROW(compile("a * 1e39", DType::f64, env_for(DType::f64)));
  // Both kinds of error are expr::Error.
  CHECK_THROWS_AS(compile("a +", DType::f32, env_for(DType::f32)), Error);
  CHECK_THROWS_AS(compile("q", DType::f32, env_for(DType::f32)), Error);
}

TEST_CASE("expr: type rules for each dtype", "[expr][types]") {
  struct Case {
    const char* text;
    Type f;    // type on f32/f64 kernels
    Type i;    // type on i32/i64/u8 kernels
    bool int_ok;  // valid on integer kernels
  };
  const Case cases[] = {
      {"a + b", Type::Float, Type::Int, true},
      {"a / 2", Type::Float, Type::Int, true},
      {"n * 2", Type::Int, Type::Int, true},
      {"7 / 2", Type::Int, Type::Int, true},
      {"n + alpha", Type::Float, Type::Float, true},
      {"a * 0.5", Type::Float, Type::Float, true},
      {"m + 1", Type::Int, Type::Int, true},
      {"x + n", Type::Float, Type::Float, true},
      {"a < b", Type::Bool, Type::Bool, true},
      {"flag == (a > 0)", Type::Bool, Type::Bool, true},
      {"!flag && a != b", Type::Bool, Type::Bool, true},
      {"flag ? a : 1", Type::Float, Type::Int, true},
      {"flag ? n : alpha", Type::Float, Type::Float, true},
      {"select(a > b, a, b)", Type::Float, Type::Int, true},
      {"select(flag, flag, a > 0)", Type::Bool, Type::Bool, true},
      {"min(a, 0)", Type::Float, Type::Int, true},
      {"max(n, alpha)", Type::Float, Type::Float, true},
      {"clamp(n, 0, 10)", Type::Int, Type::Int, true},
      {"abs(a)", Type::Float, Type::Int, true},
      {"sign(n)", Type::Int, Type::Int, true},
      {"floor(a)", Type::Float, Type::Int, true},
      {"round(alpha)", Type::Float, Type::Float, true},
      {"isnan(a)", Type::Bool, Type::Bool, true},
      {"isinf(n)", Type::Bool, Type::Bool, true},
      {"n % 3", Type::Int, Type::Int, true},
      {"pi", Type::Float, Type::Float, true},
      {"-inf", Type::Float, Type::Float, true},
      {"exp(a)", Type::Float, Type::Float, false},
      {"exp(n)", Type::Float, Type::Float, false},
      {"pow(2, 3)", Type::Float, Type::Float, false},
      {"sigmoid(a) * 2", Type::Float, Type::Float, false},
      {"fmod(a, 2)", Type::Float, Type::Float, false},
  };
  for (DType d : kAllDTypes) {
    for (const auto& c : cases) {
      INFO(c.text << " for " << rt::dtype_name(d));
      if (is_float(d)) {
        CHECK(compile(c.text, d, env_for(d)).type == c.f);
      } else if (c.int_ok) {
        CHECK(compile(c.text, d, env_for(d)).type == c.i);
      } else {
        CHECK_THROWS_AS(compile(c.text, d, env_for(d)), TypeError);
      }
    }
  }
  // Implicit int -> float conversions are explicit in the checked tree.
  Expr e = compile("a + n * 2", DType::f32, env_for(DType::f32));
  CHECK(tree(e) == "(a + float((n * 2)))");
  CHECK(e.checked());
  CHECK(e.args[1].type == Type::Float);
  CHECK(e.args[1].args[0].type == Type::Int);
  CHECK(e.str() == "a + n * 2");
  // Environment names shadow constants.
  Env env = env_for(DType::f32);
  env["e"] = Binding::scalar(Type::Int);
  CHECK(compile("e", DType::f32, env).type == Type::Int);
}

TEST_CASE("expr: interpreter against hand-computed values", "[expr][eval]") {
  const std::map<std::string, double> v = {{"a", 7},       {"b", -2},   {"c", 0.5}, {"m", 200},
                                           {"x", 0.25},    {"alpha", 1.5}, {"n", 3}, {"flag", 1}};
  // Integer semantics: truncating division, division by zero gives 0.
  CHECK(eval("a / b", DType::i32, v) == -3);
  CHECK(eval("a % b", DType::i32, v) == 1);
  CHECK(eval("-a % 3", DType::i32, v) == -1);
  CHECK(eval("a / 0", DType::i32, v) == 0);
  CHECK(eval("a % 0", DType::i64, v) == 0);
  CHECK(eval("7 / 2 + a", DType::f32, v) == 10);  // 7 / 2 is int division
  CHECK(eval("a / b", DType::f64, v) == -3.5);
  CHECK(eval("a / 2", DType::f64, v) == 3.5);
  // INT_MIN / -1 wraps.
  CHECK(eval("a / b", DType::i32, {{"a", -2147483648.0}, {"b", -1}}) == -2147483648.0);
  CHECK(eval("abs(a)", DType::i32, {{"a", -2147483648.0}}) == -2147483648.0);
  CHECK(eval("a % b", DType::i32, {{"a", -2147483648.0}, {"b", -1}}) == 0);
  // Overflow wraps in the kernel's int type.
  CHECK(eval("a * b", DType::i32, {{"a", 65536}, {"b", 65536}}) == 0);
  CHECK(eval("a + 1", DType::i32, {{"a", 2147483647}}) == -2147483648.0);
  Value big = evaluate_exact(compile("a * 2 + 1", DType::i64, env_for(DType::i64)), DType::i64,
                             {{"a", Value::of_int(std::numeric_limits<std::int64_t>::max())}});
  CHECK(big.type == Type::Int);
  CHECK(big.i == -1);
  // u8 arithmetic is done in int32 and wraps on the final cast.
  CHECK(eval("a + b", DType::u8, {{"a", 200}, {"b", 100}}) == 44);
  CHECK(eval("a - b", DType::u8, {{"a", 1}, {"b", 2}}) == 255);
  CHECK(eval("a * b / 255", DType::u8, {{"a", 200}, {"b", 100}}) == 78);  // 20000 / 255, no wrap in between
  CHECK(eval("m + 100", DType::f32, v) == 300);
  // Float results on integer kernels truncate and saturate.
  CHECK(eval("a * alpha", DType::i32, v) == 10);
  CHECK(eval("-a * alpha", DType::i32, v) == -10);
  CHECK(eval("a * 1e30", DType::i32, v) == 2147483647);
  CHECK(eval("a * 1e30", DType::u8, v) == 255);
  CHECK(eval("-a * alpha", DType::u8, v) == 0);
  CHECK(eval("0.0 / 0", DType::i64, v) == 0);
  // Comparisons and bools convert to 0/1.
  CHECK(eval("a > b", DType::f32, v) == 1);
  CHECK(eval("a < b || flag && n == 3", DType::i32, v) == 1);
  CHECK(eval("!(a > b) ? 10 : 20", DType::f64, v) == 20);
  CHECK(eval("select(c > 0, a, b)", DType::f64, v) == 7);
  // Functions.
  CHECK(eval("min(a, b) + max(a, b)", DType::i64, v) == 5);
  CHECK(eval("clamp(a, 0, 5)", DType::i32, v) == 5);
  CHECK(eval("clamp(b, 0, 5)", DType::f32, v) == 0);
  CHECK(eval("sign(b) * 10 + sign(0)", DType::i32, v) == -10);
  CHECK(eval("abs(b)", DType::f64, v) == 2);
  CHECK(eval("floor(-c) + ceil(c) + round(2.5)", DType::f64, v) == 3);
  CHECK(eval("floor(a / b)", DType::i32, v) == -3);  // int division first, then floor of an int
  CHECK(eval("exp(0) + log(1)", DType::f64, v) == 1);
  CHECK(eval("sqrt(16) + rsqrt(4)", DType::f64, v) == 4.5);
  CHECK(eval("sigmoid(0)", DType::f32, v) == 0.5);
  CHECK(eval("pow(2, 10)", DType::f64, v) == 1024);
  CHECK(eval("fmod(7.5, 2)", DType::f64, v) == 1.5);
  CHECK(eval("tanh(0) + sin(0) + erf(0) + expm1(0) + log1p(0)", DType::f64, v) == 0);
  CHECK(eval("cos(0) + tan(0)", DType::f64, v) == 1);
  CHECK(eval("asin(0.5) + acos(0.5) + atan(1)", DType::f64, v) == Approx(std::asin(0.5) + std::acos(0.5) + std::atan(1.0)));
  CHECK(eval("sinh(0.5) + cosh(0.5)", DType::f64, v) == Approx(std::exp(0.5)));  // sinh + cosh = e^x
  CHECK(eval("asinh(0.5) + acosh(1.5) + atanh(0.5)", DType::f64, v) ==
        Approx(std::log(0.5 + std::sqrt(1.25)) + std::log(1.5 + std::sqrt(1.25)) + 0.5 * std::log(3.0)));
  // Shifts: every count defined; u8 wraps on the final cast, as + does.
  CHECK(eval("shl(a, 2)", DType::i32, {{"a", 5}}) == 20);
  CHECK(eval("shl(a, 31)", DType::i32, {{"a", 1}}) == -2147483648.0);
  CHECK(eval("shl(a, 32) + shl(a, 1000)", DType::i32, {{"a", 7}}) == 0);
  CHECK(eval("shl(a, 63)", DType::i64, {{"a", 1}}) == -9223372036854775808.0);
  CHECK(eval("shl(a, 64)", DType::i64, {{"a", 1}}) == 0);
  CHECK(eval("shl(a, 1)", DType::u8, {{"a", 200}}) == 144);
  CHECK(eval("shl(a, 8)", DType::u8, {{"a", 255}}) == 0);
  CHECK(eval("shr(a, 3)", DType::u8, {{"a", 255}}) == 31);
  CHECK(eval("shr(a, 1) + shr(a, 40)", DType::i32, {{"a", -7}}) == -5);  // floor(-7 / 2) = -4, then -1
  CHECK(eval("shr(a, 200)", DType::i64, {{"a", 9}}) == 0);
  CHECK(eval("shl(a, 0 - 3) + shr(a, 0 - 3)", DType::i64, {{"a", 9}}) == 18);  // a count below 0 counts as 0
  CHECK(eval("pi", DType::f64, v) == Approx(3.141592653589793));
  CHECK(eval("e", DType::f64, v) == Approx(2.718281828459045));
  CHECK(std::isinf(eval("inf", DType::f64, v)));
  CHECK(std::isnan(eval("nan", DType::f32, v)));
  CHECK(eval("isnan(nan) && isinf(-inf) && isfinite(a) && !isnan(1)", DType::f32, v) == 1);
  CHECK(eval("sign(-0.0)", DType::f64, v) == 0);
  // f32 kernels compute in float: 0.1 is the float nearest to 0.1.
  CHECK(eval("0.1", DType::f32, v) == static_cast<double>(0.1f));
  CHECK(eval("0.1", DType::f64, v) == 0.1);
  CHECK(eval("x", DType::f32, v) == 0.25);
  CHECK(eval("a + 16777217", DType::f32, {{"a", 0}}) == 16777216);
  // A missing value is reported.
  CHECK_THROWS_AS(eval("a + b", DType::f32, {{"a", 1}}), std::out_of_range);
}

TEST_CASE("expr: C++ emission", "[expr][cpp]") {
  // f32 stays in float: float literals and float overloads.
  CHECK(cpp("a * 2 + b", DType::f32) == "a[i] * 2.0f + b[i]");
  CHECK(cpp("a * 0.1", DType::f32) == "a[i] * 0.1f");
  CHECK(cpp("a * 0.1", DType::f64) == "a[i] * 0.1");
  CHECK(cpp("exp(-a)", DType::f32) == "wfgen::rt::math::exp(-a[i])");
  CHECK(cpp("a > 0 ? a : alpha * expm1(a)", DType::f32) == "a[i] > 0.0f ? a[i] : alpha * std::expm1(a[i])");
  CHECK(cpp("1e-5 + a", DType::f32) == "1e-05f + a[i]");
  CHECK(cpp("pi * a", DType::f32) == "3.1415927f * a[i]");
  CHECK(cpp("pi * a", DType::f64) == "3.141592653589793 * a[i]");
  CHECK(cpp("max(a, -inf)", DType::f32) == "wfgen::rt::math::max(a[i], -std::numeric_limits<float>::infinity())");
  CHECK(cpp("sigmoid(a)", DType::f64) == "wfgen::rt::math::sigmoid(a[i])");
  CHECK(cpp("a + n", DType::f32) == "a[i] + static_cast<float>(n)");
  CHECK(cpp("x * a", DType::f32) == "static_cast<float>(x[i]) * a[i]");
  CHECK(cpp("m", DType::f32) == "static_cast<float>(static_cast<std::int64_t>(m[i]))");
  // Bool and int results are cast to the element type.
  CHECK(cpp("a < b", DType::f32) == "static_cast<float>(a[i] < b[i])");
  CHECK(cpp("7 / 2", DType::f64) ==
        "static_cast<double>(wfgen::rt::math::idiv(std::int64_t{7}, std::int64_t{2}))");
  // Integer arithmetic goes through the wrap-around helpers.
  CHECK(cpp("a / b", DType::i32) == "wfgen::rt::math::idiv(a[i], b[i])");
  CHECK(cpp("a % 3 + 1", DType::i32) == "wfgen::rt::math::add(wfgen::rt::math::imod(a[i], 3), 1)");
  CHECK(cpp("-a", DType::i64) == "wfgen::rt::math::neg(a[i])");
  CHECK(cpp("a + 1", DType::i64) == "wfgen::rt::math::add(a[i], std::int64_t{1})");
  CHECK(cpp("a + b", DType::u8) ==
        "static_cast<std::uint8_t>(wfgen::rt::math::add(static_cast<std::int32_t>(a[i]), "
        "static_cast<std::int32_t>(b[i])))");
  CHECK(cpp("a * alpha", DType::i32) ==
        "wfgen::rt::math::to_int<std::int32_t>(static_cast<double>(a[i]) * alpha)");
  CHECK(cpp("floor(a)", DType::i32) == "a[i]");
  // Negative literals stay literals.
  CHECK(cpp("clamp(a, -1, 2)", DType::f32) == "wfgen::rt::math::clamp(a[i], -1.0f, 2.0f)");
  CHECK(cpp("a - -2", DType::f64) == "a[i] - -2.0");
  CHECK(cpp("a * -3", DType::i32) == "wfgen::rt::math::mul(a[i], -3)");
  CHECK(cpp("-(-3) + a", DType::i64) == "wfgen::rt::math::add(wfgen::rt::math::neg(std::int64_t{-3}), a[i])");
  CHECK(cpp("-(-3) * a", DType::f32) == "static_cast<float>(wfgen::rt::math::neg(std::int64_t{-3})) * a[i]");
  CHECK(cpp("select(a > b, a, b)", DType::i32) == "a[i] > b[i] ? a[i] : b[i]");
  // Parentheses where C++ needs them (and around && in || and nested ?:).
  CHECK(cpp("-(-a)", DType::f32) == "-(-a[i])");
  CHECK(cpp("a - (b - c)", DType::f64) == "a[i] - (b[i] - c[i])");
  CHECK(cpp("(a + b) * c", DType::f64) == "(a[i] + b[i]) * c[i]");
  CHECK(cpp("flag || a < b && b < c", DType::f32) == "static_cast<float>(flag || (a[i] < b[i] && b[i] < c[i]))");
  CHECK(cpp("(flag ? a : b) * 2", DType::f64) == "(flag ? a[i] : b[i]) * 2.0");
  // A math namespace alias and name callbacks that are not simple.
  EmitContext ctx;
  ctx.dtype = DType::i32;
  ctx.math = "wm";
  ctx.name = [](const std::string& n) { return "p_" + n + "[i * s[0] + 1]"; };
  CHECK(to_cpp(compile("-a", DType::i32, env_for(DType::i32)), ctx) == "wm::neg(p_a[i * s[0] + 1])");
  ctx.name = [](const std::string& n) { return "*p_" + n; };
  CHECK(to_cpp(compile("-a", DType::i32, env_for(DType::i32)), ctx) == "wm::neg((*p_a))");
  ctx.name = [](const std::string& n) { return "p[0] + " + n + "[1]"; };
  CHECK(to_cpp(compile("a * 2", DType::i32, env_for(DType::i32)), ctx) == "wm::mul((p[0] + a[1]), 2)");
  // Deterministic.
  CHECK(cpp("clamp(a, -1, 2) * sigmoid(b)", DType::f32) == cpp("clamp(a, -1, 2) * sigmoid(b)", DType::f32));
}

TEST_CASE("expr: queries for later passes", "[expr][queries]") {
  Expr e = parse("b * a + exp(b) * pi + c / alpha");
  CHECK(names_used(e) == std::vector<std::string>{"b", "a", "c", "alpha"});
  CHECK(names_used(compile("b * a + pi", DType::f32, env_for(DType::f32))) == std::vector<std::string>{"b", "a"});
  CHECK(is_constant(parse("2 * pi + 1")));
  CHECK_FALSE(is_constant(parse("2 * a")));
  CHECK(is_cheap(parse("max(a, 0) * 2 + abs(b)")));
  CHECK_FALSE(is_cheap(parse("a + exp(b)")));
  CHECK(cost(parse("a + b")) == 1);
  CHECK(cost(parse("exp(a) + b")) == 21);
  CHECK(cost(parse("a / b")) > cost(parse("a * b")));
  CHECK(depth(parse("a")) == 1);
  CHECK(depth(parse("(a + b) * c")) == 3);
  Expr fused = substitute(parse("y * 2 + y"), {{"y", parse("a + b")}});
  CHECK(fused.str() == "(a + b) * 2 + (a + b)");
  CHECK(fused.args[1].offset == 8);
  CHECK(tree(compile(fused.str(), DType::f32, env_for(DType::f32))) ==
        tree(compile("(a + b) * 2 + (a + b)", DType::f32, env_for(DType::f32))));
  CHECK(type_name(Type::Bool) == std::string("bool"));
  CHECK(cpp_type(DType::u8) == "std::uint8_t");
}

// --- compile and run -----------------------------------------------------------------

namespace {

struct Row {
  double a, b, c;
  std::int64_t m;
  double alpha;
  std::int64_t n;
  bool flag;
};

std::vector<Row> rows_for(DType d) {
  const std::int64_t i64min = std::numeric_limits<std::int64_t>::min();
  const std::int64_t i64max = std::numeric_limits<std::int64_t>::max();
  switch (d) {
    case DType::f32:
    case DType::f64:
      return {{1.5, -2.25, 0.5, 7, 0.5, 3, true},
              {-0.75, 3, 2, 200, -1.25, -2, false},
              {0, 0, -1, 0, 2, 0, true},
              {2, 0.001, 7.5, 255, 0.1, 5, false},
              {-3.5, -3.5, 100, 1, -0.3, -7, true},
              {0.1, 1e-7, -0.2, 128, 3.7, 1, false}};
    case DType::i32:
      return {{7, -2, 3, 7, 0.5, 3, true},
              {-2147483648.0, -1, 0, 200, -1.25, -2, false},
              {2147483647, 2, -3, 0, 2, 0, true},
              {0, 0, 5, 255, 0.1, 5, false},
              {-9, 4, 100000, 1, -0.3, -7, true}};
    case DType::i64:
      return {{7, -2, 3, 7, 0.5, 3, true},
              {static_cast<double>(i64min), -1, 0, 200, -1.25, -2, false},
              {static_cast<double>(i64max), 2, -3, 0, 2, 0, true},
              {0, 0, 5, 255, 0.1, 5, false},
              {-9, 4, 3000000000.0, 1, -0.3, -7, true}};
    case DType::u8:
      return {{7, 2, 3, 7, 0.5, 3, true},
              {255, 1, 0, 200, -1.25, -2, false},
              {200, 100, 250, 0, 2, 0, true},
              {0, 0, 5, 255, 0.1, 5, false},
              {9, 4, 128, 1, -0.3, -7, true}};
  }
  return {};
}

// Exact value of an integer element given as a double (i64 extremes included).
std::int64_t int_of(double v) {
  if (v >= 9.2233720368547758e18) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(v);
}

std::string int_literal(std::int64_t v) {
  if (v == std::numeric_limits<std::int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string float_type(DType d) { return d == DType::f32 ? "float" : "double"; }

std::string element_literal(DType d, double v) {
  if (is_float(d)) return "static_cast<" + cpp_type(d) + ">(" + hex_double(v) + ")";
  return "static_cast<" + cpp_type(d) + ">(" + int_literal(int_of(v)) + ")";
}

std::map<std::string, Value> values_of(DType d, const Row& r) {
  auto el = [&](double v) { return is_float(d) ? Value::of_float(v) : Value::of_int(int_of(v)); };
  return {{"a", el(r.a)},
          {"b", el(r.b)},
          {"c", el(r.c)},
          {"m", Value::of_int(r.m)},
          {"x", Value::of_float(r.a * 0.75)},
          {"alpha", Value::of_float(r.alpha)},
          {"n", Value::of_int(r.n)},
          {"flag", Value::of_bool(r.flag)}};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("expr: generated C++ compiles, runs and matches the interpreter", "[expr][cpp][run]") {
  const char* exprs[] = {
      "a + b * c",
      "a - b - c",
      "(a - b) * -c",
      "a / b",
      "a % b",
      "a * 2 + 1",
      "a / 2",
      "-a",
      "- -a + -(-b)",
      "abs(a)",
      "min(a, b)",
      "max(a, c)",
      "clamp(a, -1, 2)",
      "sign(b)",
      "a > b ? a : b",
      "select(a < 0, -a, a * 3)",
      "a == b || !(a < c)",
      "a != 0 && b / a > 1",
      "a * alpha",
      "a + n",
      "flag ? a : b",
      "m + a",
      "m * 3 - a",
      "floor(a / 3)",
      "ceil(a * 0.5)",
      "round(a * alpha)",
      "a * b * c * a",
      "(a + 1) / (b - b)",
      "a % (c - c)",
      "a / (n + 2 - n - 1 - 1)",
      "exp(a * 0.1)",
      "log(abs(a) + 1)",
      "log1p(abs(b)) + expm1(c * 0.01)",
      "sqrt(abs(a)) + rsqrt(abs(a) + 1)",
      "sin(a) + cos(b) * tan(c * 0.1)",
      "tanh(a) + sigmoid(b) + erf(c)",
      "pow(abs(a), 1.5) + fmod(a, b)",
      "isnan(a / b) ? 0 : a / b",
      "isinf(a / b) || isfinite(c)",
      "a > 0 ? a : alpha * expm1(a)",
      "pi * a + e",
      "max(a, -inf)",
      "a < b == b < c",
      "1 / 3 + a",
      "7 % 3 * a",
      "a - -b",
      "a * 1e-5 + .5",
      "n % 2 == 0 ? a : b",
      "1e30 * a",
      "a > 1",
      "m",
      "abs(n) - n * a",
      "x * a + x",
      "clamp(a * alpha, 0, 200)",
      "a * 100000 * 100000",
      "shl(a, c) + shr(a, c)",
      "shl(m, n) - shr(a, b)",
  };
  struct Case {
    std::string text;
    DType dtype;
    Expr expr;
  };
  std::vector<Case> cases;
  int skipped = 0;
  for (DType d : kAllDTypes) {
    for (const char* t : exprs) {
      try {
        cases.push_back({t, d, compile(t, d, env_for(d))});
      } catch (const TypeError&) {
        ++skipped;  // e.g. exp on an integer kernel, % on floats
      }
    }
  }
  REQUIRE(cases.size() > 200);

  // One C++ file: per dtype a table of input rows; per case a function that
  // runs the generated expression on every row and prints the results
  // (integers exactly, floats as the bits of a double).
  std::ostringstream src;
  src << "#include <cstdint>\n#include <cstdio>\n#include <cstring>\n#include <cmath>\n#include <limits>\n"
         "#include \"wfgen/kernel_math.hpp\"\n\n"
         "static int opaque(int v) { volatile int x = v; return x; }\n"
         "static void out_i(int k, int r, long long v) { std::printf(\"%d %d %lld\\n\", k, r, v); }\n"
         "static void out_f(int k, int r, double v) {\n"
         "  unsigned long long bits; std::memcpy(&bits, &v, sizeof bits);\n"
         "  std::printf(\"%d %d %llu\\n\", k, r, bits);\n}\n\n";
  for (DType d : kAllDTypes) {
    std::string dn = rt::dtype_name(d), ft = float_type(d), t = cpp_type(d);
    src << "struct Row_" << dn << " { " << t << " a, b, c; std::uint8_t m; double x; " << ft
        << " alpha; std::int64_t n; bool flag; };\n";
    src << "static Row_" << dn << " rows_" << dn << "[] = {\n";
    for (const Row& r : rows_for(d)) {
      src << "  {" << element_literal(d, r.a) << ", " << element_literal(d, r.b) << ", " << element_literal(d, r.c)
          << ", " << r.m << ", " << hex_double(r.a * 0.75) << ", static_cast<" << ft << ">(" << hex_double(r.alpha)
          << "), " << int_literal(r.n) << ", " << (r.flag ? "true" : "false") << "},\n";
    }
    src << "};\n";
  }
  EmitContext ctx;
  ctx.name = [](const std::string& n) { return "row." + n; };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::string dn = rt::dtype_name(c.dtype);
    ctx.dtype = c.dtype;
    src << "\n// " << c.text << " (" << dn << ")\nstatic void case_" << k << "() {\n"
        << "  for (int r = 0; r < int(sizeof rows_" << dn << " / sizeof rows_" << dn << "[0]); ++r) {\n"
        << "    const Row_" << dn << " row = rows_" << dn << "[opaque(r)];\n"
        << "    const " << cpp_type(c.dtype) << " result = " << to_cpp(c.expr, ctx) << ";\n"
        << "    " << (is_float(c.dtype) ? "out_f" : "out_i") << "(" << k << ", r, result);\n  }\n}\n";
  }
  src << "\nint main() {\n";
  for (std::size_t k = 0; k < cases.size(); ++k) src << "  case_" << k << "();\n";
  src << "  return 0;\n}\n";

  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("wfgen_test_expr_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path cpp_file = dir / "exprs.cpp", exe = dir / "exprs", out = dir / "out.txt", log = dir / "log.txt";
  {
    std::ofstream f(cpp_file);
    f << src.str();
  }
  // -Wno-type-limits: `a < 0` on u8 elements is vacuous, and GCC says so.
  // UBSan (with float-cast-overflow) proves the generated code has no
  // undefined behaviour on these inputs: division by zero, INT_MIN / -1,
  // overflow and saturating casts are all exercised.
  std::string compile_cmd = "c++ -std=c++20 -O1 -Wall -Wextra -Werror -Wno-type-limits -fsanitize=undefined,float-cast-overflow "
                            "-fno-sanitize-recover=all -I\"" WFGEN_SOURCE_DIR "/runtime/include\" \"" +
                            cpp_file.string() + "\" -o \"" + exe.string() + "\" > \"" + log.string() + "\" 2>&1";
  int rc = std::system(compile_cmd.c_str());
  INFO("compiler output:\n" << read_file(log) << "\nsource: " << cpp_file.string());
  REQUIRE(rc == 0);
  rc = std::system(("\"" + exe.string() + "\" > \"" + out.string() + "\" 2> \"" + log.string() + "\"").c_str());
  INFO("program stderr:\n" << read_file(log));
  REQUIRE(rc == 0);

  std::istringstream results(read_file(out));
  std::size_t compared = 0;
  std::string line;
  while (std::getline(results, line)) {
    std::istringstream ls(line);
    std::size_t k = 0;
    int r = 0;
    std::string value;
    ls >> k >> r >> value;
    REQUIRE(k < cases.size());
    const Case& c = cases[k];
    const Row row = rows_for(c.dtype).at(static_cast<std::size_t>(r));
    Value want = evaluate_exact(c.expr, c.dtype, values_of(c.dtype, row));
    ctx.dtype = c.dtype;
    INFO(c.text << " for " << rt::dtype_name(c.dtype) << ", row " << r << "\nC++: " << to_cpp(c.expr, ctx));
    if (is_float(c.dtype)) {
      unsigned long long bits = std::stoull(value);
      double got = 0;
      std::memcpy(&got, &bits, sizeof got);
      REQUIRE(want.type == Type::Float);
      if (std::isnan(want.f) || std::isnan(got)) {
        CHECK(std::isnan(want.f));
        CHECK(std::isnan(got));
      } else if (got != want.f) {
        double tol = c.dtype == DType::f32 ? 1e-6 : 1e-14;
        CHECK(std::abs(got - want.f) <= tol * std::max(1.0, std::abs(want.f)));
      }
    } else {
      REQUIRE(want.type == Type::Int);
      CHECK(std::stoll(value) == want.i);
    }
    ++compared;
  }
  std::size_t expected_rows = 0;
  for (const auto& c : cases) expected_rows += rows_for(c.dtype).size();
  CHECK(compared == expected_rows);
  CHECK(skipped > 0);
  fs::remove_all(dir);
}
