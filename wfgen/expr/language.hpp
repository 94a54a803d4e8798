// The tables of the element-wise expression language that its stages
// share: the lexer, parser and type checker (expr.cpp), the C++ printer
// (to_cpp.cpp) and the reference interpreter (evaluate.cpp). Internal to
// wfgen_expr; expr.hpp is the public header.
#pragma once

#include <cstdint>

#include "wfgen/expr/expr.hpp"

namespace wfgen::expr::detail {

// Precedence levels, as in C (higher binds tighter).
constexpr int kPrimary = 100, kUnary = 90, kMul = 80, kAdd = 70, kRel = 60, kEq = 50, kAnd = 40,
              kOr = 30, kCond = 20;

struct OpInfo {
  const char* spelling;
  int prec;
  int cost;
};
const OpInfo& info(Op op);

// How a function's argument and result types are found.
enum class Rule : std::uint8_t {
  Float,      // floating-point math: needs a float dtype; int arguments become float; float result
  Numeric,    // int or float, arguments unified; result of that type
  Select,     // select(bool, T, T) -> T
  Predicate,  // a test on a float (int arguments become float) -> bool
  Integer,    // int arguments only (no implicit conversion from float); int result
};

using RealFn = double (*)(const double* args, bool f32);
using IntFn = std::int64_t (*)(const std::int64_t* args);

// Calls f in the kernel's float type (float for f32 kernels) and widens the
// result, so the interpreter uses the same float overloads as the kernel.
template <class F>
double real_call(const double* a, bool f32, F f) {
  if (f32) {
    return static_cast<double>(f(static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(a[2])));
  }
  return static_cast<double>(f(a[0], a[1], a[2]));
}

struct FnInfo {
  const char* name;
  int arity;
  Rule rule;
  int cost;
  const char* cpp_float;
  const char* cpp_int;
  RealFn real;
  IntFn integer;
};
// The row of kFunctions (expr.cpp, one line per function).
const FnInfo& info(Fn fn);

// Bits of the Int type of a kernel: 32 for i32 and u8 kernels, else 64.
int int_bits(rt::DType d);
bool ident_start(char c);
bool ident_char(char c);
// Float value of a literal in the kernel's float type.
double float_value(const Expr& lit, rt::DType dtype);

}  // namespace wfgen::expr::detail
