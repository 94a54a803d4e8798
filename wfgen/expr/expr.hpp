// The element-wise expression language of kernel bodies.
//
// An implementation spec writes its kernel body as an expression over the
// elements of its inputs and its constructor arguments, e.g.
//
//   elementwise: "x > 0 ? x : alpha * expm1(x)"
//
// Specs are untrusted, so the text is never pasted into C++. It is
//   1. parsed into a tree (parse, throws ParseError),
//   2. type-checked for one kernel dtype and an environment of names
//      (check, throws TypeError; returns a typed tree with the implicit
//      int -> float conversions made explicit),
//   3. printed to C++ from the tree (to_cpp), or run by the reference
//      interpreter (evaluate) that has the same semantics as the C++.
//
//   expr::Env env{{"x", expr::Binding::element(rt::DType::f32)},
//                 {"alpha", expr::Binding::scalar(expr::Type::Float)}};
//   expr::Expr e = expr::compile("x > 0 ? x : alpha * expm1(x)", rt::DType::f32, env);
//   expr::EmitContext ctx{rt::DType::f32, [](const std::string& n) {
//                           return n == "x" ? "x[i]" : n; }};
//   expr::to_cpp(e, ctx);  // "x[i] > 0.0f ? x[i] : alpha * std::expm1(x[i])"
//
// The language (grammar, types, functions, errors) is described in
// docs/expressions.md. The function table lives in expr.cpp, one line per
// function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// The runtime's include directory is not on wfgen_expr's include path; the
// header is found relative to this file.
#include "wfgen/runtime_types.hpp"

namespace wfgen::expr {

// --- errors ----------------------------------------------------------------------

// An error at a byte range of the expression text. The message starts
// lowercase and has no trailing period; the caller (the spec loader) turns
// offset/length into file:line:col and a caret.
class Error : public std::runtime_error {
 public:
  Error(std::string message, std::size_t offset, std::size_t length)
      : std::runtime_error(std::move(message)), offset_(offset), length_(length == 0 ? 1 : length) {}
  std::size_t offset() const { return offset_; }
  std::size_t length() const { return length_; }

 private:
  std::size_t offset_;
  std::size_t length_;
};

// The text is not a well-formed expression (syntax, unknown function, arity).
class ParseError : public Error {
 public:
  using Error::Error;
};

// The expression is well-formed but not valid for this dtype and environment.
class TypeError : public Error {
 public:
  using Error::Error;
};

// --- types and names ---------------------------------------------------------------

// The three value types of the language. In C++, Bool is `bool`; Float is the
// kernel's float type (float for f32 kernels, double otherwise); Int is
// std::int32_t for i32 and u8 kernels, std::int64_t otherwise.
enum class Type : std::uint8_t { Bool, Int, Float };

// "bool", "int", "float".
const char* type_name(Type t);

// What a name of the environment stands for.
struct Binding {
  enum class Kind : std::uint8_t {
    Element,   // an element of an input tensor of `dtype`
    Scalar,    // a constructor argument of `type`
    Constant,  // pi, e, inf, nan (set by check, never in an Env)
  };
  Kind kind = Kind::Element;
  rt::DType dtype = rt::DType::f32;  // Element
  Type type = Type::Float;           // the language type of the name

  // An element of dtype d: Float for f32/f64, Int for i32/i64/u8.
  static Binding element(rt::DType d);
  static Binding scalar(Type t);
};

// Names visible to an expression. Names of the environment shadow the
// constants pi, e, inf and nan.
using Env = std::map<std::string, Binding>;

// --- the tree ------------------------------------------------------------------------

// Operators and node kinds, in one list. kOpCount is checked against every
// table indexed by Op.
enum class Op : std::uint8_t {
  BoolLit, IntLit, FloatLit, Name,
  Neg, Not,
  Mul, Div, Mod, Add, Sub,
  Lt, Le, Gt, Ge, Eq, Ne,
  And, Or,
  Cond,     // c ? a : b
  Call,     // f(args...)
  Convert,  // implicit int -> float, inserted by check(); never parsed
};
inline constexpr int kOpCount = 22;

// Built-in functions; the table (name, arity, type rule, C++, interpreter) is
// in expr.cpp.
enum class Fn : std::uint8_t {
  Abs, Exp, Log, Log1p, Expm1, Sqrt, Rsqrt, Sin, Cos, Tan, Tanh, Sigmoid, Erf,
  Pow, Fmod, Min, Max, Select, Floor, Ceil, Round, Sign, Clamp, Isnan, Isinf, Isfinite,
  Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Shl, Shr,
};
inline constexpr int kFnCount = 36;

// "+", "&&", "?:", "-" (Neg), "call"...
const char* op_spelling(Op op);
// "exp", "select"...
const char* fn_name(Fn fn);
int fn_arity(Fn fn);
// The function named `name`, if any.
std::optional<Fn> find_function(std::string_view name);

struct Expr {
  Op op = Op::IntLit;
  Fn fn = Fn::Abs;          // Call
  std::string text;         // Name: the name; IntLit/FloatLit: the spelling
  std::int64_t ivalue = 0;  // IntLit, BoolLit (0/1)
  double fvalue = 0;        // FloatLit (as a double); constants after check
  std::vector<Expr> args;   // operands, in source order
  std::size_t offset = 0;   // the node's range in the expression text
  std::size_t length = 0;

  // Set by check():
  std::optional<rt::DType> checked_for;  // the kernel dtype it was checked for
  Type type = Type::Float;               // the node's value type
  Binding binding;                       // Name: what it refers to

  bool checked() const { return checked_for.has_value(); }
  // The expression in the language's own syntax, minimal parentheses,
  // implicit conversions not shown. parse(e.str()) gives back e.
  std::string str() const;
};

// --- the stages ------------------------------------------------------------------------

// Parses an expression. Function names and arities are checked here.
// Throws ParseError.
Expr parse(std::string_view text);

// Type-checks a parsed expression for a kernel of element type `dtype`.
// Returns the typed tree (every node's `type` set, names bound, int -> float
// promotions as Convert nodes). Throws TypeError.
Expr check(const Expr& e, rt::DType dtype, const Env& env);

// parse + check.
Expr compile(std::string_view text, rt::DType dtype, const Env& env);

// How names are spelled in the generated kernel.
struct EmitContext {
  rt::DType dtype = rt::DType::f32;  // must be the dtype the tree was checked for
  // The C++ expression for a name of the environment. Its C++ type must be
  // the element type of the Element's dtype (float, double, std::int32_t,
  // std::int64_t, std::uint8_t); for a Scalar: Int std::int64_t, Float the
  // kernel's float type (float for f32 kernels, else double), Bool bool.
  std::function<std::string(const std::string& name)> name;
  // Namespace of the helpers of runtime/include/wfgen/kernel_math.hpp, so an
  // emitter can shorten it with a namespace alias.
  std::string math = "wfgen::rt::math";
};

// C++ source for a checked expression: a C++ expression whose type is the
// kernel's element type (a final static_cast where the value's type differs).
// Deterministic; needs <cmath>, <limits> and wfgen/kernel_math.hpp.
std::string to_cpp(const Expr& e, const EmitContext& ctx);

// The C++ spelling of a dtype's element type: "float", "std::int32_t"...
std::string cpp_type(rt::DType d);

// A value of the reference interpreter. Int and Bool are exact.
struct Value {
  Type type = Type::Float;
  std::int64_t i = 0;  // Int; Bool as 0/1
  double f = 0;        // Float

  static Value of_bool(bool b) { return {Type::Bool, b ? 1 : 0, 0}; }
  static Value of_int(std::int64_t v) { return {Type::Int, v, 0}; }
  static Value of_float(double v) { return {Type::Float, 0, v}; }
  double as_double() const { return type == Type::Float ? f : static_cast<double>(i); }
};

// Runs a checked expression with the semantics of the generated C++ and
// converts the result to the kernel's dtype as the kernel does: the result
// is Int (exact) for integer dtypes, Float for f32/f64. Floats are computed in
// the kernel's float type (f32 kernels round every float operation to float).
// Every name of the environment used must have a value; an element's value is
// first converted to its dtype. Throws std::out_of_range for a missing value.
Value evaluate_exact(const Expr& e, rt::DType dtype, const std::map<std::string, Value>& values);

// evaluate_exact with double inputs and result (exact for |integers| < 2^53).
double evaluate(const Expr& e, rt::DType dtype, const std::map<std::string, double>& values);

// --- queries for later passes ---------------------------------------------------------

// Names of the environment the expression reads, each once, in order of first
// appearance. On an unchecked tree the constant names pi, e, inf and nan are
// left out; on a checked tree, names bound to constants.
std::vector<std::string> names_used(const Expr& e);

// Replaces names by expressions (on parsed, unchecked trees; for fusing one
// kernel body into another: substitute(parse("y * 2"), {{"y", parse("a + b")}})
// is (a + b) * 2). Offsets of the inserted nodes are those of the replaced name.
Expr substitute(const Expr& e, const std::map<std::string, Expr>& replacements);

// True when no name of the environment is read (only literals and constants).
bool is_constant(const Expr& e);

// True when every function used is cheap (no transcendental function):
// arithmetic, comparisons, select, min/max/abs/clamp/sign/floor/ceil/round.
bool is_cheap(const Expr& e);

// A rough cost in "simple operations" (add = 1, divide = 4, exp/log... = 20),
// so a fusion pass can avoid duplicating expensive subexpressions.
int cost(const Expr& e);

// How many nodes deep the tree is (1 for a literal).
int depth(const Expr& e);

}  // namespace wfgen::expr
