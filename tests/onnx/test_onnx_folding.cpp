// Folding on constants (wfgen/onnx/folding.cpp) computes what the kernels
// the importer maps each operator to compute at run time: each mapped
// element-wise operator folded on FLOAT, DOUBLE and INT64 constants against
// a naive computation written here (in the type's arithmetic, f32 kernels
// through wfgen's own float math of kernel_math.hpp), with the edge cases
// where ONNX, C++ and a fold in double part ways.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "wfgen/kernel_math.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace {

namespace oi = wfgen::onnx_import;
namespace M = wfgen::rt::math;
using onnx::TensorProto;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TensorProto tensor(int type, const std::vector<double>& v, std::vector<std::int64_t> dims = {}) {
  TensorProto t;
  t.set_data_type(type);
  if (dims.empty()) dims = {static_cast<std::int64_t>(v.size())};
  for (auto d : dims) t.add_dims(d);
  for (double x : v) {
    switch (type) {
      case TensorProto::FLOAT: t.add_float_data(static_cast<float>(x)); break;
      case TensorProto::DOUBLE: t.add_double_data(x); break;
      case TensorProto::INT64: t.add_int64_data(static_cast<std::int64_t>(x)); break;
      default: t.add_int32_data(static_cast<std::int32_t>(x)); break;  // INT32, BOOL
    }
  }
  return t;
}

struct Folded {
  std::vector<double> v;
  std::vector<std::int64_t> dims;
  int type = 0;
  std::string why;  // set when folding failed
};

// `op` folded on `inputs`, with integer attributes `ints`.
Folded fold(const std::string& op, const std::vector<TensorProto>& inputs, const std::vector<std::pair<std::string, std::int64_t>>& ints = {},
            int opset = 13) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.add_output("y");
  std::vector<const TensorProto*> in;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    node.add_input("x" + std::to_string(k));
    in.push_back(&inputs[k]);
  }
  // Each attribute holds its value both as an int and as a list of one
  // (keepdims is read as the one, axes as the other).
  for (const auto& [name, value] : ints) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
    a->add_ints(value);
  }
  Folded out;
  const auto t = oi::fold_constants(node, in, opset, out.why);
  if (!t) return out;
  REQUIRE(oi::numbers_of(*t, out.v));
  out.dims.assign(t->dims().begin(), t->dims().end());
  out.type = t->data_type();
  return out;
}

// Equal, NaN equal to NaN, -0.0 unequal to 0.0 (exact: folding is the kernel's arithmetic).
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

void check_values(const Folded& got, const std::vector<double>& want) {
  INFO("folding failed: " << got.why);
  REQUIRE(got.v.size() == want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    INFO("element " << k << ": got " << got.v[k] << ", want " << want[k]);
    CHECK(same(got.v[k], want[k]));
  }
}

// The inputs of the element-wise checks, with halves, negatives, zeros and NaN for the float types.
const std::vector<double> kFloatA = {-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.75, 0.1, 1e8, kNaN, 7.0};
const std::vector<double> kFloatB = {2.0, -3.0, 0.25, 1.0, 0.5, kNaN, -2.5, 3.75, 0.2, 1.0, 1.0, -0.0};
const std::vector<double> kIntA = {-7, 7, -7, 7, 0, 5, -1, 9, 100, -100, 3, -3};
const std::vector<double> kIntB = {2, -2, -2, 2, 3, 0, 5, 9, 7, 7, -1, 1};

// `f` applied element by element in the type's arithmetic: f32 rounds the
// result of each operation (f is given floats), f64 in double, i64 on integers.
std::vector<double> naive2(int type, const std::vector<double>& a, const std::vector<double>& b,
                           const std::function<double(double, double)>& f64, const std::function<float(float, float)>& f32,
                           const std::function<std::int64_t(std::int64_t, std::int64_t)>& i64) {
  std::vector<double> out;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (type == TensorProto::FLOAT) out.push_back(f32(static_cast<float>(a[k]), static_cast<float>(b[k])));
    else if (type == TensorProto::DOUBLE) out.push_back(f64(a[k], b[k]));
    else out.push_back(static_cast<double>(i64(static_cast<std::int64_t>(a[k]), static_cast<std::int64_t>(b[k]))));
  }
  return out;
}

template <class T>
T nan_max(T a, T b) { return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a < b ? b : a); }
template <class T>
T nan_min(T a, T b) { return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (b < a ? b : a); }

}  // namespace

TEST_CASE("folded binary operators compute in the constants' type: f32 rounds, i64 divides toward zero, Max and Min keep NaN", "[onnx][fold]") {
  for (int type : {TensorProto::FLOAT, TensorProto::DOUBLE, TensorProto::INT64}) {
    const bool ints = type == TensorProto::INT64;
    const auto& a = ints ? kIntA : kFloatA;
    const auto& b = ints ? kIntB : kFloatB;
    const TensorProto ta = tensor(type, a), tb = tensor(type, b);
    DYNAMIC_SECTION(TensorProto::DataType_Name(type)) {
      auto both = [&](const std::string& op, auto f) {
        INFO(op);
        const Folded got = fold(op, {ta, tb});
        CHECK(got.type == type);
        check_values(got, naive2(type, a, b, f, f, [&](std::int64_t x, std::int64_t y) { return static_cast<std::int64_t>(f(x, y)); }));
      };
      both("Add", [](auto x, auto y) { return x + y; });
      both("Sub", [](auto x, auto y) { return x - y; });
      both("Mul", [](auto x, auto y) { return x * y; });
      // Integers: C++'s division toward zero (-7 / 2 is -3, ONNX's), a
      // division by 0 gives 0 (the stdlib's div; ONNX leaves it undefined).
      both("Div", [](auto x, auto y) {
        if constexpr (std::is_integral_v<decltype(x)>) return y == 0 ? decltype(x){0} : x / y;
        else return x / y;
      });
      both("Max", [](auto x, auto y) {
        if constexpr (std::is_integral_v<decltype(x)>) return x < y ? y : x;
        else return nan_max(x, y);
      });
      both("Min", [](auto x, auto y) {
        if constexpr (std::is_integral_v<decltype(x)>) return y < x ? y : x;
        else return nan_min(x, y);
      });
      for (const auto& [op, cmp] : std::vector<std::pair<std::string, std::function<bool(double, double)>>>{
               {"Equal", [](double x, double y) { return x == y; }}, {"Less", [](double x, double y) { return x < y; }},
               {"Greater", [](double x, double y) { return x > y; }}, {"LessOrEqual", [](double x, double y) { return x <= y; }},
               {"GreaterOrEqual", [](double x, double y) { return x >= y; }}}) {
        INFO(op);
        const Folded got = fold(op, {ta, tb});
        CHECK(got.type == TensorProto::BOOL);
        std::vector<double> want;
        for (std::size_t k = 0; k < a.size(); ++k) want.push_back(cmp(a[k], b[k]) ? 1.0 : 0.0);
        check_values(got, want);
      }
    }
  }
  // NaN in either operand of Max and Min, and variadic Max: NaN (ONNX's,
  // numpy's); the stdlib's max(A, B) alone kept a NaN of A only.
  check_values(fold("Max", {tensor(TensorProto::FLOAT, {1, kNaN}), tensor(TensorProto::FLOAT, {kNaN, 1})}), {kNaN, kNaN});
  check_values(fold("Min", {tensor(TensorProto::DOUBLE, {1, kNaN}), tensor(TensorProto::DOUBLE, {kNaN, 1})}), {kNaN, kNaN});
  check_values(fold("Max", {tensor(TensorProto::INT64, {1, 5}), tensor(TensorProto::INT64, {4, 2}), tensor(TensorProto::INT64, {3, 9})}), {4, 9});
}

TEST_CASE("folded unary operators are the stdlib kernels': Round halves to even, f32 math as the f32 kernel computes it", "[onnx][fold]") {
  const std::vector<double> halves = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4, 2.6, -2.6};
  for (int type : {TensorProto::FLOAT, TensorProto::DOUBLE}) {
    check_values(fold("Round", {tensor(type, halves)}), {-2, -2, -0.0, 0, 2, 2, 4, 2, 3, -3});
    check_values(fold("Floor", {tensor(type, {-1.5, 1.5})}), {-2, 1});
    check_values(fold("Ceil", {tensor(type, {-1.5, 1.5})}), {-1, 2});
    check_values(fold("Sign", {tensor(type, {-3, 0, 2})}), {-1, 0, 1});
    check_values(fold("Relu", {tensor(type, {-3, 0, 2})}), {0, 0, 2});
  }
  // The f32 kernels compute in float with wfgen's own exp and sigmoid: a
  // fold in double rounded to float differs from them in the last bit for
  // about half of these inputs.
  std::vector<double> x, sigmoid, exp, sqrt, reciprocal, pow;
  for (float v = -8; v < 8; v += 0.37f) {
    x.push_back(v);
    sigmoid.push_back(M::sigmoid(v));
    exp.push_back(M::exp(v));
    sqrt.push_back(std::sqrt(v));
    reciprocal.push_back(std::pow(v, -1.0f));
    pow.push_back(std::pow(v, 1.5f));
  }
  const TensorProto tx = tensor(TensorProto::FLOAT, x);
  check_values(fold("Sigmoid", {tx}), sigmoid);
  check_values(fold("Exp", {tx}), exp);
  check_values(fold("Sqrt", {tx}), sqrt);
  check_values(fold("Reciprocal", {tx}), reciprocal);
  check_values(fold("Pow", {tx, tensor(TensorProto::FLOAT, {1.5}, {1})}), pow);
  // Integers: Neg, Abs, Sign and Relu of INT64 compute in i64.
  const TensorProto ti = tensor(TensorProto::INT64, {-7, 0, 9});
  check_values(fold("Neg", {ti}), {7, 0, -9});
  check_values(fold("Abs", {ti}), {7, 0, 9});
  check_values(fold("Sign", {ti}), {-1, 0, 1});
  check_values(fold("Relu", {ti}), {0, 0, 9});
  // What a stdlib kernel does not compute is refused by name, not computed another way.
  // Pow of integers: the stdlib's f64 pow, cast back toward zero.
  const Folded pow_int = fold("Pow", {ti, tensor(TensorProto::INT64, {2}, {1})});
  CHECK(pow_int.type == TensorProto::INT64);
  check_values(pow_int, {49, 0, 81});
  check_values(fold("Pow", {tensor(TensorProto::INT32, {3, -2}), tensor(TensorProto::INT32, {3, -1})}), {27, 0});
  CHECK_THAT(fold("Sqrt", {ti}).why, Catch::Contains("the stdlib's sqrt has no i64 kernel"));
}

TEST_CASE("folded logic, Where, Mod and reductions: BOOL truth tables, the condition in the branches' type, f32 sums rounding at each add", "[onnx][fold]") {
  const TensorProto p = tensor(TensorProto::BOOL, {0, 0, 1, 1}), q = tensor(TensorProto::BOOL, {0, 1, 0, 1});
  for (const auto& [op, want] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"And", {0, 0, 0, 1}}, {"Or", {0, 1, 1, 1}}, {"Xor", {0, 1, 1, 0}}}) {
    INFO(op);
    const Folded got = fold(op, {p, q});
    CHECK(got.type == TensorProto::BOOL);
    check_values(got, want);
  }
  check_values(fold("Not", {p}), {1, 1, 0, 0});
  const Folded where = fold("Where", {p, tensor(TensorProto::INT64, {1, 2, 3, 4}), tensor(TensorProto::INT64, {-1}, {1})});
  CHECK(where.type == TensorProto::INT64);
  check_values(where, {-1, -1, 3, 4});
  // Mod: fmod 0 takes the divisor's sign (Python's %), fmod 1 the dividend's (C's).
  const TensorProto a = tensor(TensorProto::INT64, {-7, 7, -7, 7, 6}), b = tensor(TensorProto::INT64, {3, -3, -3, 3, 3});
  check_values(fold("Mod", {a, b}), {2, -2, -1, 1, 0});
  check_values(fold("Mod", {a, b}, {{"fmod", 1}}), {-1, 1, -1, 1, 0});
  const Folded mod_u8 = fold("Mod", {tensor(TensorProto::UINT8, {7, 200}), tensor(TensorProto::UINT8, {3, 7})});
  CHECK(mod_u8.type == TensorProto::UINT8);
  check_values(mod_u8, {1, 4});
  // By 0: what the run-time statements give (a - a / 0 * 0 is a; ONNX leaves it undefined).
  check_values(fold("Mod", {tensor(TensorProto::INT64, {-7, 7}), tensor(TensorProto::INT64, {0}, {1})}), {-7, 7});
  check_values(fold("Mod", {tensor(TensorProto::DOUBLE, {-7.5, 7.5}), tensor(TensorProto::DOUBLE, {2}, {1})}, {{"fmod", 1}}), {-1.5, 1.5});
  // Floats: the stdlib's fmod in the constants' dtype, and fmod 0 (numpy.mod, ONNX's reference) the divisor's sign from it.
  const TensorProto fa = tensor(TensorProto::FLOAT, {-7.5, 7.5, -7.5, 7.5, 6}), fb = tensor(TensorProto::FLOAT, {2, -2, -2, 2, 3});
  check_values(fold("Mod", {fa, fb}, {{"fmod", 1}}), {-1.5, 1.5, -1.5, 1.5, 0});
  check_values(fold("Mod", {fa, fb}), {0.5, -0.5, -1.5, 1.5, 0});
  // f32: 2^24 + 1 + 1 added in float stays 2^24 (each add rounds half to
  // even); in double it would be 2^24 + 2.
  const TensorProto big = tensor(TensorProto::FLOAT, {16777216, 1, 1}, {1, 3});
  check_values(fold("ReduceSum", {big, tensor(TensorProto::INT64, {1}, {1})}, {{"keepdims", 0}}), {16777216});
  check_values(fold("ReduceSum", {tensor(TensorProto::DOUBLE, {16777216, 1, 1}, {1, 3}), tensor(TensorProto::INT64, {1}, {1})}, {{"keepdims", 0}}),
               {16777218});
  // The mean of integers divides toward zero, as the i64 kernel.
  check_values(fold("ReduceMean", {tensor(TensorProto::INT64, {1, 2, -1, -2}, {2, 2})}, {{"axes", 1}, {"keepdims", 0}}), {1, -1});
  const Folded max_nan = fold("ReduceMax", {tensor(TensorProto::FLOAT, {1, kNaN, 3, 2}, {2, 2})}, {{"keepdims", 0}}, 13);
  check_values(max_nan, {kNaN});
  check_values(fold("ReduceMin", {tensor(TensorProto::INT64, {4, -2, 3, 2}, {2, 2})}, {{"keepdims", 1}}, 13), {-2});
  check_values(fold("ReduceProd", {tensor(TensorProto::INT64, {4, -2, 3, 2}, {2, 2})}, {{"keepdims", 1}}, 13), {-48});
}

TEST_CASE("folded CumSum runs in the constant's type: f32 rounds at each add, INT32 stays INT32, exclusive and reverse", "[onnx][fold]") {
  const TensorProto axis = tensor(TensorProto::INT64, {0}, {1});
  // 2^24 + 1 rounds back to 2^24 in f32 (half to even); a sum in double would end at 2^24 + 2.
  check_values(fold("CumSum", {tensor(TensorProto::FLOAT, {16777216, 1, 1}), axis}), {16777216, 16777216, 16777216});
  check_values(fold("CumSum", {tensor(TensorProto::DOUBLE, {16777216, 1, 1}), axis}), {16777216, 16777217, 16777218});
  const Folded i32 = fold("CumSum", {tensor(TensorProto::INT32, {7, -2, 5}), axis});
  CHECK(i32.type == TensorProto::INT32);
  check_values(i32, {7, 5, 10});
  // Along axis 1 of [2 3], exclusive and reverse: y[i, j] = the sum of x[i, k] over k > j.
  check_values(fold("CumSum", {tensor(TensorProto::INT64, {1, 2, 3, 4, 5, 6}, {2, 3}), tensor(TensorProto::INT64, {1}, {1})},
                    {{"exclusive", 1}, {"reverse", 1}}),
               {5, 3, 0, 11, 6, 0});
}
