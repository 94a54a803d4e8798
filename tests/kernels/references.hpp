// Naive references for every node of the standard library (stdlib/nodes.yaml),
// written independently of wfgen: explicit loops over row-major copies, in
// double for float dtypes and in int64 for integer dtypes, with the integer
// semantics of the expression language modelled exactly (kernel_math.hpp):
//  - + - * and unary minus wrap around (two's complement); u8 is computed in
//    int32 and cast back, i.e. modulo 256;
//  - integer division truncates, x / 0 == 0, MIN / -1 == MIN;
//  - a float constructor argument makes the expression a double; the result is
//    converted to an integer dtype by truncation with saturation, NaN -> 0;
//  - comparisons give 1 or 0 in the kernel's dtype.
// A node missing from kNodeRefs fails the coverage test in test_kernels.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace kt {

// ---------------------------------------------------------------------------
// Integer semantics

inline std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// The value of v modulo 2^bits of the dtype, as that dtype.
inline std::int64_t wrap(DType t, std::uint64_t v) {
  switch (t) {
    case DType::u8: return static_cast<std::int64_t>(v & 0xffu);
    case DType::i32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    default: return static_cast<std::int64_t>(v);
  }
}

// x * 2^n wrapped (left) or floor(x / 2^n) (right), by n single steps; a
// count below 0 counts as 0, and after 64 steps nothing changes any more.
inline std::int64_t shift_naive(DType t, std::int64_t x, std::int64_t n, bool left) {
  std::int64_t v = x;
  for (std::int64_t k = 0; k < n && k < 64; ++k) v = left ? wrap(t, u(v) * 2) : (v - (v & 1)) / 2;
  return v;
}

inline std::int64_t int_min(DType t) {
  switch (t) {
    case DType::u8: return 0;
    case DType::i32: return std::numeric_limits<std::int32_t>::min();
    default: return std::numeric_limits<std::int64_t>::min();
  }
}

inline std::int64_t int_max(DType t) {
  switch (t) {
    case DType::u8: return 255;
    case DType::i32: return std::numeric_limits<std::int32_t>::max();
    default: return std::numeric_limits<std::int64_t>::max();
  }
}

// Float to integer dtype: truncate toward zero, saturate, NaN -> 0.
inline std::int64_t sat(DType t, double x) {
  if (std::isnan(x)) return 0;
  if (x <= static_cast<double>(int_min(t))) return int_min(t);
  if (x >= static_cast<double>(int_max(t))) return int_max(t);
  return static_cast<std::int64_t>(std::trunc(x));
}

inline std::int64_t int_div(DType t, std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(t, 0 - u(a));
  return wrap(t, u(a / b));
}

// ---------------------------------------------------------------------------
// Value domains: which random inputs suit an operand.

enum class Dom {
  Any,       // floats in [-3, 3]; integers mostly in [-20, 20], sometimes extreme (wrap-around)
  Discrete,  // few distinct values (k/4, small ints, extremes): ties for comparisons and arg-reductions
  Positive,  // (0.01, 10]: log, sqrt
  PowBase,   // [0.1, 3]
  Log1p,     // (-0.9, 5]
  Exp,       // [-10, 10]
  Wide,      // [-25, 25]: sigmoid, tanh, softplus (both branches)
  Divisor,   // floats away from 0 with either sign; integers in [-5, 5] including 0 and -1
  Cond,      // mostly 0 or 1, some other nonzero values
  Sum,       // like Any, but i64 stays below 2^40 (the kernel's int64 accumulator must not overflow)
  Small,     // [-4, 4] for i32/i64 (GEMM accumulates in the element type); u8 any; floats [-3, 3]
  Huge,      // [-1000, 1000]: logits whose exp overflows unless the row's max is subtracted first
  Ties,      // four values for floats, [-2, 2] (u8: [0, 2]) and some extremes for integers: most pool windows tie
  Unit,      // (-0.98, 0.98): asin, acos, atanh (defined on [-1, 1]); tan away from its poles
  AboveOne,  // [1.02, 10]: acosh (defined from 1)
  NonFinite, // NaN, +-inf and a few ordinary values: isnan, isinf
};

inline double gen_float(Dom d, Rng& rng) {
  switch (d) {
    case Dom::Discrete: return static_cast<double>(rand_int(rng, -8, 8)) / 4.0;
    case Dom::Positive: return 0.01 + rng.uniform01() * 9.99;
    case Dom::PowBase: return rng.uniform(0.1, 3.0);
    case Dom::Log1p: return rng.uniform(-0.9, 5.0);
    case Dom::Exp: return rng.uniform(-10.0, 10.0);
    case Dom::Wide: return rng.uniform(-25.0, 25.0);
    case Dom::Huge: return rng.uniform(-1000.0, 1000.0);
    case Dom::Unit: return rng.uniform(-0.98, 0.98);
    case Dom::AboveOne: return rng.uniform(1.02, 10.0);
    case Dom::NonFinite: {
      static constexpr double kVals[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                         -std::numeric_limits<double>::infinity(), 0.0, 1.5, -2.0};
      return pick(kVals, rng);
    }
    case Dom::Ties: {
      static constexpr double kVals[] = {-1.5, -0.25, 0.5, 2.0};
      return pick(kVals, rng);
    }
    case Dom::Divisor: return (rng.next_u64() & 1 ? 1.0 : -1.0) * rng.uniform(0.25, 4.0);
    case Dom::Cond: {
      static constexpr double kVals[] = {0.0, 0.0, 1.0, 1.0, -2.5, 0.25};
      return pick(kVals, rng);
    }
    default: return rng.uniform(-3.0, 3.0);
  }
}

inline std::int64_t extreme(DType t, Rng& rng) {
  switch (rng.next_u64() % 5) {
    case 0: return int_min(t);
    case 1: return int_max(t);
    case 2: return int_min(t) + 1;
    case 3: return int_max(t) - 1;
    default: return wrap(t, rng.next_u64());
  }
}

inline std::int64_t gen_int(Dom d, DType t, Rng& rng) {
  const bool u8 = t == DType::u8;
  switch (d) {
    case Dom::Discrete:
      if (rng.uniform01() < 0.1) return extreme(t, rng);
      return u8 ? rand_int(rng, 0, 3) : rand_int(rng, -3, 3);
    case Dom::Divisor:
      if (rng.uniform01() < 0.05) return extreme(t, rng);
      return u8 ? rand_int(rng, 0, 5) : rand_int(rng, -5, 5);
    case Dom::Cond: {
      static constexpr std::int64_t kVals[] = {0, 0, 1, 1, 7, 2};
      return pick(kVals, rng);
    }
    case Dom::Ties:
      if (rng.uniform01() < 0.1) return extreme(t, rng);
      return u8 ? rand_int(rng, 0, 2) : rand_int(rng, -2, 2);
    case Dom::Small:
      if (u8) return rand_int(rng, 0, 255);
      return rand_int(rng, -4, 4);
    case Dom::Sum:
      if (t == DType::i64) return rand_int(rng, -(std::int64_t{1} << 40), std::int64_t{1} << 40);
      if (rng.uniform01() < 0.3) return extreme(t, rng);
      return u8 ? rand_int(rng, 0, 255) : rand_int(rng, -20, 20);
    default:
      if (rng.uniform01() < 0.15) return extreme(t, rng);
      return u8 ? rand_int(rng, 0, 255) : rand_int(rng, -20, 20);
  }
}

inline void fill_random(const Tensor& t, Dom d, Rng& rng) {
  const DType dt = t.dtype();
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
    if (is_int(dt)) put(t, idx, 0, gen_int(d, dt, rng));
    else put(t, idx, gen_float(d, rng), 0);
  });
}

// ---------------------------------------------------------------------------
// The table

enum class Kind {
  Unary, Binary, Select, Fill, Reduce, Matmul, Gather, OneHot, Im2col, Transpose, Permute,
  ScatterAdd,  // DOUT[m d] IDX[m] LIKE[n d] OUT[n d]
  Col2im,      // COL[N C kh kw ho wo] LIKE[N C H W] OUT[N C H W]
  CausalMask,  // X[~ i j] OUT[~ i j], with a float argument
  ScaledSoftmax,  // X[~ i j] OUT[~ i j], with a float (scale) and a bool (causal) argument
  LayerNorm,           // X[~ f] G[f] B[f] OUT[~ f], with a float (eps) argument
  LayerNormGrad,       // DOUT[~ f] X[~ f] G[f] OUT[~ f], with a float (eps) argument
  LayerNormParamGrad,  // DOUT[n f] X[n f] OUT[f], with a float (eps) and a bool (beta) argument
  ExtremeMask, // X[~ i] OUT[~ i], with a bool argument
  Concat,      // A[~ i] B[~ j] OUT[~ k], k = i + j
  CrossEntropy,  // LOGITS[~ c] TARGET[~ c] OUT[~ 1]
  Optimizer,     // P G M (V): updates P, M (and V) in place; the tensors are NodeRef::dom's
  Depthwise,     // X[N C H W] W[C k_h k_w] OUT[N C ho wo], with im2col's eight arguments
  Winograd,      // X[N C H W] W[M C 3 3] OUT[N M ho wo], with two int arguments (pad_h pad_w)
  MaxPool,       // X[N C H W] OUT[N C ho wo], with six int arguments (k_h k_w stride_h stride_w pad_h pad_w)
  MaxPoolGrad,   // DOUT[N C ho wo] X[N C H W] OUT[N C H W], the same six
  MaxPoolPick,   // D[N C H W] X[N C H W] OUT[N C ho wo], the same six
  Cast,          // X[~] OUT[~]: OUT of the node's out_dtype (to_f32, to_i64, to_bool...)
  CumSum,        // X[~ i] OUT[~ i], with two bool arguments (exclusive, reverse)
};
enum class Red { None, Sum, Mean, Max, Min, ArgMax, ArgMin, InvCount };
enum class Opt { None, Sgd, Adam, AdamW };

// Element-wise references: x[] are the inputs in DSL order, s the float
// constructor argument (0 when the node has none).
using FloatFn = double (*)(const double* x, double s);
using IntFn = std::int64_t (*)(const std::int64_t* x, double s, DType t);

struct NodeRef {
  std::string_view node;
  Kind kind;
  std::vector<Dom> dom = {};  // per input, in DSL order
  FloatFn f = nullptr;        // element-wise, float dtypes
  IntFn i = nullptr;          // element-wise, integer dtypes
  std::vector<double> scalars = {};  // values tried for the node's float argument
  Red red = Red::None;
  // Element-wise, floats: the magnitude the kernel's rounding error scales
  // with, where the result can cancel to much less than its terms (the
  // tolerance is then rtol * mag + atol instead of rtol * |result| + atol).
  FloatFn mag = nullptr;
  Opt opt = Opt::None;
  std::vector<const char*> names = {};  // tensor names in DSL order, when not the kind's generic ones
};

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Unary: return "unary";
    case Kind::Binary: return "binary";
    case Kind::Select: return "select";
    case Kind::Fill: return "fill";
    case Kind::Reduce: return "reduce";
    case Kind::Matmul: return "matmul";
    case Kind::Gather: return "gather";
    case Kind::OneHot: return "one_hot";
    case Kind::Im2col: return "im2col";
    case Kind::ScatterAdd: return "scatter-add";
    case Kind::Col2im: return "col2im";
    case Kind::Depthwise: return "depthwise";
    case Kind::Winograd: return "winograd";
    case Kind::CausalMask: return "causal-mask";
    case Kind::ScaledSoftmax: return "scaled-softmax";
    case Kind::LayerNorm: return "layer-norm";
    case Kind::LayerNormGrad: return "layer-norm-grad";
    case Kind::LayerNormParamGrad: return "layer-norm-param-grad";
    case Kind::ExtremeMask: return "extreme-mask";
    case Kind::Concat: return "concat";
    case Kind::Transpose: return "transpose";
    case Kind::Permute: return "permute";
    case Kind::CrossEntropy: return "cross-entropy";
    case Kind::Optimizer: return "optimizer";
    case Kind::MaxPool: return "max-pool";
    case Kind::MaxPoolGrad: return "max-pool-grad";
    case Kind::MaxPoolPick: return "max-pool-pick";
    case Kind::Cast: return "cast";
    case Kind::CumSum: return "cumsum";
  }
  return "?";
}

// Tensors and constructor arguments an erased kernel of this kind takes
// (KernelEntry::n_tensors / n_scalars); -1: depends on the node.
inline int kind_tensors(Kind k) {
  switch (k) {
    case Kind::Unary: return 2;
    case Kind::Binary: return 3;
    case Kind::Select: return 4;
    case Kind::Fill: return 1;
    case Kind::Reduce: return 2;
    case Kind::Matmul: return 3;
    case Kind::Gather: return 3;
    case Kind::OneHot: return 2;
    case Kind::Im2col: return 2;
    case Kind::ScatterAdd: return 4;
    case Kind::Col2im: return 3;
    case Kind::Depthwise: return 3;
    case Kind::Winograd: return 3;
    case Kind::CausalMask: return 2;
    case Kind::ScaledSoftmax: return 2;
    case Kind::LayerNorm: return 4;
    case Kind::LayerNormGrad: return 4;
    case Kind::LayerNormParamGrad: return 3;
    case Kind::Cast: return 2;
    case Kind::CumSum: return 2;
    case Kind::ExtremeMask: return 2;
    case Kind::Concat: return 3;
    case Kind::Transpose: return 2;  // the input, and the slot the result view is written to
    case Kind::Permute: return 2;
    case Kind::CrossEntropy: return 3;
    case Kind::Optimizer: return -1;  // 3 for sgd (P G M), 4 for adam/adamw (P G M V)
    case Kind::MaxPool: return 2;
    case Kind::MaxPoolGrad: return 3;
    case Kind::MaxPoolPick: return 3;
  }
  return -1;
}

inline const double kArith[] = {2.5, -1.25, 0.375, 3.0, -300.5, 1e10};

using D = Dom;
inline const std::vector<NodeRef>& node_refs() {
  static const std::vector<NodeRef> kNodeRefs = {
      // --- binary element-wise
      {"add", Kind::Binary, {D::Any, D::Any}, [](const double* x, double) { return x[0] + x[1]; },
       [](const std::int64_t* x, double, DType t) { return wrap(t, u(x[0]) + u(x[1])); }},
      {"sub", Kind::Binary, {D::Any, D::Any}, [](const double* x, double) { return x[0] - x[1]; },
       [](const std::int64_t* x, double, DType t) { return wrap(t, u(x[0]) - u(x[1])); }},
      {"mul", Kind::Binary, {D::Any, D::Any}, [](const double* x, double) { return x[0] * x[1]; },
       [](const std::int64_t* x, double, DType t) { return wrap(t, u(x[0]) * u(x[1])); }},
      {"div", Kind::Binary, {D::Any, D::Divisor}, [](const double* x, double) { return x[0] / x[1]; },
       [](const std::int64_t* x, double, DType t) { return int_div(t, x[0], x[1]); }},
      // C's fmod by its definition, a - trunc(a / b) * b, in double: exact for f32 operands (Divisor keeps b away
      // from 0, Any keeps |a / b| small), the sign of a, -0.0 compared equal to 0.
      {"fmod", Kind::Binary, {D::Any, D::Divisor}, [](const double* x, double) { return x[0] - std::trunc(x[0] / x[1]) * x[1]; },
       nullptr},
      {"pow", Kind::Binary, {D::PowBase, D::Any}, [](const double* x, double) { return std::exp(x[1] * std::log(x[0])); },
       nullptr},
      {"maximum", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] > x[1] ? x[0] : x[1]; },
       [](const std::int64_t* x, double, DType) { return x[0] > x[1] ? x[0] : x[1]; }},
      {"minimum", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] < x[1] ? x[0] : x[1]; },
       [](const std::int64_t* x, double, DType) { return x[0] < x[1] ? x[0] : x[1]; }},
      // Shifts, integers only: x doubled (halved, rounding down) n times, one
      // step at a time; counts mostly in [-20, 20] with extremes (u8: 0..255).
      {"shl", Kind::Binary, {D::Any, D::Any}, nullptr, [](const std::int64_t* x, double, DType t) { return shift_naive(t, x[0], x[1], true); }},
      {"shr", Kind::Binary, {D::Any, D::Any}, nullptr, [](const std::int64_t* x, double, DType t) { return shift_naive(t, x[0], x[1], false); }},
      {"eq", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] == x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] == x[1]}; }},
      {"ne", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] != x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] != x[1]}; }},
      {"lt", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] < x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] < x[1]}; }},
      {"le", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] <= x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] <= x[1]}; }},
      {"gt", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] > x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] > x[1]}; }},
      {"ge", Kind::Binary, {D::Discrete, D::Discrete}, [](const double* x, double) { return x[0] >= x[1] ? 1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] >= x[1]}; }},

      // --- element-wise with a float argument `value`
      {"add_scalar", Kind::Unary, {D::Any}, [](const double* x, double s) { return x[0] + s; },
       [](const std::int64_t* x, double s, DType t) { return sat(t, static_cast<double>(x[0]) + s); },
       {std::begin(kArith), std::end(kArith)}},
      {"sub_scalar", Kind::Unary, {D::Any}, [](const double* x, double s) { return x[0] - s; },
       [](const std::int64_t* x, double s, DType t) { return sat(t, static_cast<double>(x[0]) - s); },
       {std::begin(kArith), std::end(kArith)}},
      {"rsub_scalar", Kind::Unary, {D::Any}, [](const double* x, double s) { return s - x[0]; },
       [](const std::int64_t* x, double s, DType t) { return sat(t, s - static_cast<double>(x[0])); },
       {std::begin(kArith), std::end(kArith)}},
      {"mul_scalar", Kind::Unary, {D::Any}, [](const double* x, double s) { return x[0] * s; },
       [](const std::int64_t* x, double s, DType t) { return sat(t, static_cast<double>(x[0]) * s); },
       {std::begin(kArith), std::end(kArith)}},
      {"div_scalar", Kind::Unary, {D::Any}, [](const double* x, double s) { return x[0] / s; }, nullptr,
       {2.5, -0.375, 3.0, 0.0, 1e-3}},
      {"pow_scalar", Kind::Unary, {D::PowBase}, [](const double* x, double s) { return std::exp(s * std::log(x[0])); },
       nullptr, {2.0, 0.5, -1.5, 3.0, 0.0}},
      {"leaky_relu", Kind::Unary, {D::Any}, [](const double* x, double s) { return x[0] >= 0 ? x[0] : s * x[0]; },
       nullptr, {0.01, 0.125, 0.0, -0.5}},

      // --- unary element-wise
      {"neg", Kind::Unary, {D::Any}, [](const double* x, double) { return -x[0]; },
       [](const std::int64_t* x, double, DType t) { return wrap(t, 0 - u(x[0])); }},
      {"abs", Kind::Unary, {D::Any}, [](const double* x, double) { return std::fabs(x[0]); },
       [](const std::int64_t* x, double, DType t) { return x[0] < 0 ? wrap(t, 0 - u(x[0])) : x[0]; }},
      {"exp", Kind::Unary, {D::Exp}, [](const double* x, double) { return std::exp(x[0]); }, nullptr},
      {"log", Kind::Unary, {D::Positive}, [](const double* x, double) { return std::log(x[0]); }, nullptr},
      {"log1p", Kind::Unary, {D::Log1p}, [](const double* x, double) { return std::log1p(x[0]); }, nullptr},
      {"sqrt", Kind::Unary, {D::Positive}, [](const double* x, double) { return std::sqrt(x[0]); }, nullptr},
      {"sin", Kind::Unary, {D::Any}, [](const double* x, double) { return std::sin(x[0]); }, nullptr},
      {"cos", Kind::Unary, {D::Any}, [](const double* x, double) { return std::cos(x[0]); }, nullptr},
      // tanh x = (1 - e^-2x) / (1 + e^-2x), written for |x| so it never overflows
      {"tanh", Kind::Unary, {D::Wide},
       [](const double* x, double) {
         const double e = std::exp(-2.0 * std::fabs(x[0]));
         return std::copysign((1.0 - e) / (1.0 + e), x[0]);
       },
       nullptr},
      {"sigmoid", Kind::Unary, {D::Wide},
       [](const double* x, double) {
         return x[0] >= 0 ? 1.0 / (1.0 + std::exp(-x[0])) : std::exp(x[0]) / (1.0 + std::exp(x[0]));
       },
       nullptr},
      {"relu", Kind::Unary, {D::Any}, [](const double* x, double) { return x[0] > 0 ? x[0] : 0.0; },
       [](const std::int64_t* x, double, DType) { return x[0] > 0 ? x[0] : std::int64_t{0}; }},
      {"erf", Kind::Unary, {D::Any}, [](const double* x, double) { return std::erf(x[0]); }, nullptr},
      {"gelu", Kind::Unary, {D::Any},
       [](const double* x, double) { return x[0] * 0.5 * std::erfc(-x[0] / std::sqrt(2.0)); }, nullptr},
      // ln(1 + e^x) straight from the definition (inputs stay within +-25, so
      // e^x does not overflow a double): the kernel's stable form must match
      // it to full precision in f32 and f64.
      {"softplus", Kind::Unary, {D::Wide},
       [](const double* x, double) { return std::log1p(std::exp(x[0])); },
       nullptr},
      // The inverse trigonometric and hyperbolic functions from their
      // logarithmic definitions, not through the std:: functions the kernels call.
      {"tan", Kind::Unary, {D::Unit}, [](const double* x, double) { return std::sin(x[0]) / std::cos(x[0]); }, nullptr},
      {"asin", Kind::Unary, {D::Unit},
       [](const double* x, double) { return std::atan2(x[0], std::sqrt(1.0 - x[0] * x[0])); }, nullptr},
      {"acos", Kind::Unary, {D::Unit},
       [](const double* x, double) { return std::atan2(std::sqrt(1.0 - x[0] * x[0]), x[0]); }, nullptr},
      {"atan", Kind::Unary, {D::Wide}, [](const double* x, double) { return std::atan2(x[0], 1.0); }, nullptr},
      {"sinh", Kind::Unary, {D::Exp}, [](const double* x, double) { return (std::exp(x[0]) - std::exp(-x[0])) / 2; },
       nullptr},
      {"cosh", Kind::Unary, {D::Exp}, [](const double* x, double) { return (std::exp(x[0]) + std::exp(-x[0])) / 2; },
       nullptr},
      // ln(x + sqrt(x^2 + 1)) cancels for negative x: written for |x|, odd.
      {"asinh", Kind::Unary, {D::Wide},
       [](const double* x, double) {
         const double a = std::fabs(x[0]);
         return std::copysign(std::log(a + std::sqrt(a * a + 1.0)), x[0]);
       },
       nullptr},
      {"acosh", Kind::Unary, {D::AboveOne},
       [](const double* x, double) { return std::log(x[0] + std::sqrt(x[0] * x[0] - 1.0)); }, nullptr},
      {"atanh", Kind::Unary, {D::Unit},
       [](const double* x, double) { return 0.5 * std::log((1.0 + x[0]) / (1.0 - x[0])); }, nullptr},
      // x tanh(ln(1 + e^x)) from the definition (|x| <= 25: e^x fits a double).
      {"mish", Kind::Unary, {D::Wide},
       [](const double* x, double) { return x[0] * std::tanh(std::log1p(std::exp(x[0]))); }, nullptr},
      // Rounding from the definitions: the whole numbers around x and their distances.
      {"floor", Kind::Unary, {D::Discrete},
       [](const double* x, double) {
         const double t = std::trunc(x[0]);
         return t > x[0] ? t - 1 : t;
       },
       nullptr},
      {"ceil", Kind::Unary, {D::Discrete},
       [](const double* x, double) {
         const double t = std::trunc(x[0]);
         return t < x[0] ? t + 1 : t;
       },
       nullptr},
      // Discrete's k/4 holds every half of [-2, 2]: -1.5 -> -2, -0.5 -> -0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2.
      {"round_even", Kind::Unary, {D::Discrete},
       [](const double* x, double) {
         const double lo = std::trunc(x[0]) - (std::trunc(x[0]) > x[0] ? 1 : 0), d = x[0] - lo;
         if (d < 0.5) return lo;
         if (d > 0.5) return lo + 1;
         return std::fmod(lo, 2.0) == 0 ? lo : lo + 1;
       },
       nullptr},
      {"isnan", Kind::Unary, {D::NonFinite}, [](const double* x, double) { return x[0] != x[0] ? 1.0 : 0.0; }, nullptr},
      {"isinf", Kind::Unary, {D::NonFinite},
       [](const double* x, double) { return x[0] == x[0] && (x[0] - x[0]) != 0 ? 1.0 : 0.0; }, nullptr},
      {"square", Kind::Unary, {D::Any}, [](const double* x, double) { return x[0] * x[0]; },
       [](const std::int64_t* x, double, DType t) { return wrap(t, u(x[0]) * u(x[0])); }},
      {"copy", Kind::Unary, {D::Any}, [](const double* x, double) { return x[0]; },
       [](const std::int64_t* x, double, DType) { return x[0]; }},

      // --- helpers of the backward passes (Discrete X: zeros hit the X > 0 boundary)
      {"sign", Kind::Unary, {D::Discrete}, [](const double* x, double) { return x[0] > 0 ? 1.0 : x[0] < 0 ? -1.0 : 0.0; },
       [](const std::int64_t* x, double, DType) { return std::int64_t{x[0] > 0} - std::int64_t{x[0] < 0}; }},
      // torch's threshold_backward: the gradient passes where X > 0 only (not at 0)
      {"relu_grad", Kind::Binary, {D::Any, D::Discrete}, [](const double* x, double) { return x[1] > 0 ? x[0] : 0.0; },
       [](const std::int64_t* x, double, DType) { return x[1] > 0 ? x[0] : std::int64_t{0}; }, {}, Red::None, nullptr,
       Opt::None, {"DOUT", "X", "OUT"}},
      {"leaky_relu_grad", Kind::Binary, {D::Any, D::Discrete},
       [](const double* x, double s) { return x[1] > 0 ? x[0] : s * x[0]; }, nullptr, {0.01, 0.125, 0.0, -0.5},
       Red::None, nullptr, Opt::None, {"DOUT", "X", "OUT"}},
      // d/dx x Phi(x) = Phi(x) + x phi(x). It crosses 0 near x = -0.75, where
      // the two terms cancel; the kernel also forms Phi as (1 + erf) / 2, which
      // cancels for negative x. Its error scales with those terms, not with the result.
      // d/dx x tanh(sp(x)) = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = ln(1 + e^x).
      {"mish_grad", Kind::Binary, {D::Any, D::Wide},
       [](const double* x, double) {
         const double t = std::tanh(std::log1p(std::exp(x[1])));
         return x[0] * (t + x[1] / (1.0 + std::exp(-x[1])) * (1.0 - t * t));
       },
       nullptr, {}, Red::None,
       // the two terms cancel near x = -1.2: the error scales with them
       [](const double* x, double) {
         const double t = std::tanh(std::log1p(std::exp(x[1])));
         return std::fabs(x[0]) * (std::fabs(t) + std::fabs(x[1]) / (1.0 + std::exp(-x[1])) * (1.0 - t * t));
       },
       Opt::None, {"DOUT", "X", "OUT"}},
      {"gelu_grad", Kind::Binary, {D::Any, D::Any},
       [](const double* x, double) {
         const double Phi = 0.5 * std::erfc(-x[1] / std::sqrt(2.0));
         const double phi = std::exp(-0.5 * x[1] * x[1]) / std::sqrt(2.0 * std::numbers::pi);
         return x[0] * (Phi + x[1] * phi);
       },
       nullptr, {}, Red::None,
       [](const double* x, double) {
         const double phi = std::exp(-0.5 * x[1] * x[1]) / std::sqrt(2.0 * std::numbers::pi);
         return std::fabs(x[0]) * (0.5 * (1.0 + std::fabs(std::erf(x[1] / std::sqrt(2.0)))) + std::fabs(x[1]) * phi);
       },
       Opt::None, {"DOUT", "X", "OUT"}},

      // --- fill and select
      {"fill", Kind::Fill, {}, [](const double*, double s) { return s; },
       [](const std::int64_t*, double s, DType t) { return sat(t, s); },
       {1.5, -2.75, 300.0, 1e10, std::numeric_limits<double>::quiet_NaN(), -7.0}},
      {"select", Kind::Select, {D::Cond, D::Any, D::Any},
       [](const double* x, double) { return x[0] != 0 ? x[1] : x[2]; },
       [](const std::int64_t* x, double, DType) { return x[0] != 0 ? x[1] : x[2]; }},

      // --- reductions along the last axis
      {"sum", Kind::Reduce, {D::Sum}, nullptr, nullptr, {}, Red::Sum},
      {"mean", Kind::Reduce, {D::Sum}, nullptr, nullptr, {}, Red::Mean},
      {"max", Kind::Reduce, {D::Discrete}, nullptr, nullptr, {}, Red::Max},
      {"min", Kind::Reduce, {D::Discrete}, nullptr, nullptr, {}, Red::Min},
      {"argmax", Kind::Reduce, {D::Discrete}, nullptr, nullptr, {}, Red::ArgMax},
      {"argmin", Kind::Reduce, {D::Discrete}, nullptr, nullptr, {}, Red::ArgMin},
      {"inv_count", Kind::Reduce, {D::Any}, nullptr, nullptr, {}, Red::InvCount},

      // --- the rest
      {"matmul", Kind::Matmul, {D::Small, D::Small}},
      {"gather", Kind::Gather, {D::Any}},
      {"one_hot", Kind::OneHot, {}},
      {"im2col", Kind::Im2col, {D::Any}},
      {"col2im", Kind::Col2im, {D::Any, D::Any}},
      {"depthwise_conv2d", Kind::Depthwise, {D::Any, D::Any}, nullptr, nullptr, {}, Red::None, nullptr, Opt::None,
       {"X", "W", "OUT"}},
      {"winograd_conv2d", Kind::Winograd, {D::Any, D::Any}, nullptr, nullptr, {}, Red::None, nullptr, Opt::None,
       {"X", "W", "OUT"}},
      {"scatter_add", Kind::ScatterAdd, {D::Any}},
      {"causal_mask", Kind::CausalMask, {D::Any}, nullptr, nullptr, {-1e30, 0.0, 2.5}},
      // The scales: attention's 1/sqrt(16), none, and a negative one (the max of scale * X is then at X's min).
      {"scaled_softmax", Kind::ScaledSoftmax, {D::Any}, nullptr, nullptr, {0.25, 1.0, -1.5}},
      // The eps values: the stdlib's default, and one that dominates a row's variance of values in [-3, 3].
      {"layer_norm", Kind::LayerNorm, {D::Any, D::Any, D::Any}, nullptr, nullptr, {1e-5, 0.5}},
      {"layer_norm_grad", Kind::LayerNormGrad, {D::Any, D::Any, D::Any}, nullptr, nullptr, {1e-5, 0.5}},
      {"layer_norm_param_grad", Kind::LayerNormParamGrad, {D::Any, D::Any}, nullptr, nullptr, {1e-5, 0.5}},
      // Discrete values: rows with ties, where only the first extreme gets the 1.
      {"extreme_mask", Kind::ExtremeMask, {D::Discrete}},
      // X: four values (floats), so most windows tie and only the first
      // largest may win; DOUT and D: any values, so a wrong winner shows.
      {"max_pool", Kind::MaxPool, {D::Ties}},
      {"max_pool_grad", Kind::MaxPoolGrad, {D::Any, D::Ties}},
      {"max_pool_pick", Kind::MaxPoolPick, {D::Any, D::Ties}},
      {"concat_last", Kind::Concat, {D::Any, D::Any}},
      // Integers: i64 below 2^40 (no overflow in a row), i32 with extremes (wrap-around).
      {"cumsum", Kind::CumSum, {D::Sum}},
      // Wide floats (and, set by the builder, NaN and +-1e30); integers with extremes (wrap-around).
      {"to_f32", Kind::Cast, {D::Wide}},
      {"to_f64", Kind::Cast, {D::Wide}},
      {"to_i32", Kind::Cast, {D::Wide}},
      {"to_i64", Kind::Cast, {D::Wide}},
      {"to_u8", Kind::Cast, {D::Wide}},
      {"to_bool", Kind::Cast, {D::Cond}},
      {"transpose", Kind::Transpose, {D::Any}},
      {"permute", Kind::Permute, {D::Any}},
      // Any targets, not just probabilities: the loss is linear in TARGET, and
      // negative or unnormalised rows catch a kernel that assumes sum(TARGET) = 1.
      {"softmax_cross_entropy", Kind::CrossEntropy, {D::Wide, D::Any}, nullptr, nullptr, {}, Red::None, nullptr,
       Opt::None, {"LOGITS", "TARGET", "OUT"}},
      // V is a running mean of squares: never negative.
      {"sgd", Kind::Optimizer, {D::Any, D::Any, D::Any}, nullptr, nullptr, {}, Red::None, nullptr, Opt::Sgd,
       {"P", "G", "M"}},
      {"adam", Kind::Optimizer, {D::Any, D::Any, D::Any, D::Positive}, nullptr, nullptr, {}, Red::None, nullptr,
       Opt::Adam, {"P", "G", "M", "V"}},
      {"adamw", Kind::Optimizer, {D::Any, D::Any, D::Any, D::Positive}, nullptr, nullptr, {}, Red::None, nullptr,
       Opt::AdamW, {"P", "G", "M", "V"}},
  };
  return kNodeRefs;
}

inline const NodeRef* find_ref(std::string_view node) {
  for (const NodeRef& r : node_refs())
    if (r.node == node) return &r;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Tolerances. Floats: |got - expected| <= rtol * scale + atol, where scale is
// |expected| for element-wise nodes and the sum of the magnitudes of the
// terms, times sqrt(n) + 1, for sums, means and matrix products of n terms.

struct Tol {
  double rtol, atol;
};
inline Tol tol_for(DType t) {
  if (t == DType::f32) return {1e-5, 1e-6};
  return {1e-12, 1e-14};
}

// ---------------------------------------------------------------------------
// References of the nodes that are not element-wise. Inputs are row-major
// Dense copies of the kernel's operands; `t` is the kernel's dtype.

inline Expected ref_elementwise(const NodeRef& r, const std::vector<Dense>& in, const Shape& out_shape, double s,
                                DType t) {
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  const std::int64_t n = numel_of(out_shape);
  const Tol tol = tol_for(t);
  if (!is_int(t)) e.tol.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    if (is_int(t)) {
      std::int64_t x[3] = {};
      for (std::size_t a = 0; a < in.size(); ++a) x[a] = in[a].i[static_cast<std::size_t>(k)];
      e.val.i[static_cast<std::size_t>(k)] = r.i(x, s, t);
    } else {
      double x[3] = {};
      for (std::size_t a = 0; a < in.size(); ++a) x[a] = in[a].f[static_cast<std::size_t>(k)];
      const double v = r.f(x, s);
      e.val.f[static_cast<std::size_t>(k)] = v;
      e.tol[static_cast<std::size_t>(k)] = tol.rtol * (r.mag ? r.mag(x, s) : std::fabs(v)) + tol.atol;
    }
  }
  return e;
}

// The dtype a cast node writes: its name's suffix.
inline DType cast_target(std::string_view node) {
  if (node == "to_f32") return DType::f32;
  if (node == "to_f64") return DType::f64;
  if (node == "to_i32") return DType::i32;
  if (node == "to_i64") return DType::i64;
  return DType::u8;  // to_u8, to_bool
}

// X as `to`, value by value, written out naively: bool (u8, `boolean`: to_bool) is X != 0 (NaN
// too); float to integer (to_u8 too) toward zero, saturated, NaN 0; integer to integer
// modulo 2^bits; to a float the nearest (exact: compared without tolerance).
inline Expected ref_cast(const Dense& x, DType to, bool boolean) {
  Expected e{Dense::make(x.shape, is_int(to)), {}};
  for (std::size_t k = 0; k < static_cast<std::size_t>(numel_of(x.shape)); ++k) {
    const double f = x.is_int ? static_cast<double>(x.i[k]) : x.f[k];
    if (to == DType::u8 && boolean) {
      e.val.i[k] = x.is_int ? (x.i[k] != 0 ? 1 : 0) : (f != 0.0 || std::isnan(f) ? 1 : 0);
    } else if (to == DType::u8) {
      if (x.is_int) e.val.i[k] = ((x.i[k] % 256) + 256) % 256;
      else if (std::isnan(f) || f <= 0.0) e.val.i[k] = 0;
      else if (f >= 255.0) e.val.i[k] = 255;
      else e.val.i[k] = static_cast<std::int64_t>(std::trunc(f));
    } else if (to == DType::i32 || to == DType::i64) {
      const double lo = to == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
      const std::int64_t lo_i = to == DType::i32 ? INT32_MIN : INT64_MIN, hi_i = to == DType::i32 ? INT32_MAX : INT64_MAX;
      if (x.is_int) e.val.i[k] = to == DType::i32 ? static_cast<std::int32_t>(x.i[k]) : x.i[k];
      else if (std::isnan(f)) e.val.i[k] = 0;
      else if (f <= lo) e.val.i[k] = lo_i;
      else if (f >= -lo) e.val.i[k] = hi_i;
      else e.val.i[k] = static_cast<std::int64_t>(std::trunc(f));
    } else if (to == DType::f32) {
      e.val.f[k] = x.is_int ? static_cast<double>(static_cast<float>(x.i[k])) : static_cast<double>(static_cast<float>(f));
    } else {
      e.val.f[k] = f;
    }
  }
  return e;
}

// X[~ i] -> OUT[~ 1]. Integer sums accumulate exactly and wrap to the dtype;
// integer means truncate toward zero. Empty rows: sum 0, mean 0 for integers
// and NaN (0/0) for floats, max/min the identity (-inf/+inf, or the dtype's
// limits), argmax/argmin 0, inv_count +inf (1/0). inv_count ignores X's
// values: OUT = 1 / i, correctly rounded, so its tolerance is rtol * OUT.
inline Expected ref_reduce(Red red, const Dense& X, DType t) {
  Shape out_shape = X.shape;
  out_shape.back() = 1;
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  const std::int64_t n = X.shape.back();
  const std::int64_t rows = numel_of(out_shape);
  const Tol tol = tol_for(t);
  if (!is_int(t)) e.tol.assign(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t base = row * n;
    if (is_int(t)) {
      std::int64_t v = 0;
      switch (red) {
        case Red::Sum:
        case Red::Mean: {
          std::uint64_t acc = 0;
          for (std::int64_t j = 0; j < n; ++j) acc += u(X.i[static_cast<std::size_t>(base + j)]);
          const auto total = static_cast<std::int64_t>(acc);  // exact for the inputs used here
          v = red == Red::Sum ? wrap(t, acc) : (n > 0 ? total / n : 0);
          break;
        }
        case Red::Max:
          v = int_min(t);
          for (std::int64_t j = 0; j < n; ++j) v = std::max(v, X.i[static_cast<std::size_t>(base + j)]);
          break;
        case Red::Min:
          v = int_max(t);
          for (std::int64_t j = 0; j < n; ++j) v = std::min(v, X.i[static_cast<std::size_t>(base + j)]);
          break;
        case Red::ArgMax:
        case Red::ArgMin:
          for (std::int64_t j = 1; j < n; ++j) {
            const std::int64_t a = X.i[static_cast<std::size_t>(base + j)], b = X.i[static_cast<std::size_t>(base + v)];
            if (red == Red::ArgMax ? a > b : a < b) v = j;
          }
          break;
        case Red::InvCount:  // float dtypes only
        case Red::None: break;
      }
      e.val.i[static_cast<std::size_t>(row)] = v;
    } else {
      double v = 0, mag = 0;
      switch (red) {
        case Red::Sum:
        case Red::Mean:
          for (std::int64_t j = 0; j < n; ++j) {
            v += X.f[static_cast<std::size_t>(base + j)];
            mag += std::fabs(X.f[static_cast<std::size_t>(base + j)]);
          }
          if (red == Red::Mean) {
            v = n > 0 ? v / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
            mag = n > 0 ? mag / static_cast<double>(n) : 0;
          }
          break;
        case Red::Max:
          v = -std::numeric_limits<double>::infinity();
          for (std::int64_t j = 0; j < n; ++j) v = std::max(v, X.f[static_cast<std::size_t>(base + j)]);
          break;
        case Red::Min:
          v = std::numeric_limits<double>::infinity();
          for (std::int64_t j = 0; j < n; ++j) v = std::min(v, X.f[static_cast<std::size_t>(base + j)]);
          break;
        case Red::ArgMax:
        case Red::ArgMin: {
          std::int64_t best = 0;
          for (std::int64_t j = 1; j < n; ++j) {
            const double a = X.f[static_cast<std::size_t>(base + j)], b = X.f[static_cast<std::size_t>(base + best)];
            if (red == Red::ArgMax ? a > b : a < b) best = j;
          }
          v = static_cast<double>(best);
          break;
        }
        case Red::InvCount: v = n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::infinity(); break;
        case Red::None: break;
      }
      e.val.f[static_cast<std::size_t>(row)] = v;
      e.tol[static_cast<std::size_t>(row)] =
          red == Red::InvCount
              ? (n > 0 ? tol.rtol * v : 0.0)
              : tol.rtol * (std::sqrt(static_cast<double>(n)) + 1.0) * mag + tol.atol * (mag > 0 ? 1.0 : 0.0);
    }
  }
  return e;
}

// C[b.. i k] = sum_j A[b.. i j] B[b.. j k]; A and B already have C's batch
// shape (broadcast operands are read through their views). Integers wrap.
inline Expected ref_matmul(const Dense& A, const Dense& B, const Shape& c_shape, DType t) {
  Expected e{Dense::make(c_shape, is_int(t)), {}};
  const std::size_t r = c_shape.size();
  const std::int64_t M = c_shape[r - 2], N = c_shape[r - 1], K = A.shape[r - 1];
  const std::int64_t batches = numel_of(Shape(c_shape.begin(), c_shape.end() - 2));
  const Tol tol = tol_for(t);
  if (!is_int(t)) e.tol.assign(static_cast<std::size_t>(numel_of(c_shape)), 0.0);
  for (std::int64_t b = 0; b < batches; ++b) {
    for (std::int64_t i = 0; i < M; ++i) {
      for (std::int64_t k = 0; k < N; ++k) {
        const std::size_t c = static_cast<std::size_t>((b * M + i) * N + k);
        if (is_int(t)) {
          std::uint64_t acc = 0;
          for (std::int64_t j = 0; j < K; ++j)
            acc += u(A.i[static_cast<std::size_t>((b * M + i) * K + j)]) * u(B.i[static_cast<std::size_t>((b * K + j) * N + k)]);
          e.val.i[c] = wrap(t, acc);
        } else {
          double acc = 0, mag = 0;
          for (std::int64_t j = 0; j < K; ++j) {
            const double p = A.f[static_cast<std::size_t>((b * M + i) * K + j)] * B.f[static_cast<std::size_t>((b * K + j) * N + k)];
            acc += p;
            mag += std::fabs(p);
          }
          e.val.f[c] = acc;
          e.tol[c] = tol.rtol * (std::sqrt(static_cast<double>(K)) + 1.0) * mag + tol.atol;
        }
      }
    }
  }
  return e;
}

// An index element: valid when it is a whole number in [0, n).
inline std::int64_t ref_index(const Dense& idx, std::int64_t k, std::int64_t n) {
  if (idx.is_int) {
    const std::int64_t v = idx.i[static_cast<std::size_t>(k)];
    return v >= 0 && v < n ? v : -1;
  }
  const double v = idx.f[static_cast<std::size_t>(k)];
  return v >= 0 && v < static_cast<double>(n) && v == std::floor(v) ? static_cast<std::int64_t>(v) : -1;
}

// OUT[.., :] = W[IDX[..], :], zeros for an index out of range.
inline Expected ref_gather(const Dense& W, const Dense& IDX, DType t) {
  const std::int64_t rows = W.shape[0], d = W.shape[1];
  Shape out_shape = IDX.shape;
  out_shape.push_back(d);
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  for (std::int64_t p = 0; p < IDX.numel(); ++p) {
    const std::int64_t row = ref_index(IDX, p, rows);
    for (std::int64_t j = 0; j < d; ++j) {
      const std::size_t o = static_cast<std::size_t>(p * d + j);
      if (is_int(t)) e.val.i[o] = row < 0 ? 0 : W.i[static_cast<std::size_t>(row * d + j)];
      else e.val.f[o] = row < 0 ? 0.0 : W.f[static_cast<std::size_t>(row * d + j)];
    }
  }
  return e;
}

// OUT[.., k] = 1 where IDX[..] == k, else 0.
inline Expected ref_one_hot(const Dense& IDX, std::int64_t classes, DType t) {
  Shape out_shape = IDX.shape;
  out_shape.push_back(classes);
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  for (std::int64_t p = 0; p < IDX.numel(); ++p) {
    const std::int64_t hot = ref_index(IDX, p, classes);
    for (std::int64_t k = 0; k < classes; ++k) {
      const std::size_t o = static_cast<std::size_t>(p * classes + k);
      if (is_int(t)) e.val.i[o] = k == hot ? 1 : 0;
      else e.val.f[o] = k == hot ? 1.0 : 0.0;
    }
  }
  return e;
}

struct Conv {
  std::int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// COL[n c i j y x] = X[n c (y*sh - ph + i*dh) (x*sw - pw + j*dw)], 0 outside X.
inline Expected ref_im2col(const Dense& X, const Shape& col_shape, const Conv& p, DType t) {
  Expected e{Dense::make(col_shape, is_int(t)), {}};
  const std::int64_t H = X.shape[2], W = X.shape[3];
  std::size_t o = 0;
  for (std::int64_t n = 0; n < col_shape[0]; ++n)
    for (std::int64_t c = 0; c < col_shape[1]; ++c)
      for (std::int64_t i = 0; i < col_shape[2]; ++i)
        for (std::int64_t j = 0; j < col_shape[3]; ++j)
          for (std::int64_t y = 0; y < col_shape[4]; ++y)
            for (std::int64_t x = 0; x < col_shape[5]; ++x, ++o) {
              const std::int64_t iy = y * p.sh - p.ph + i * p.dh, ix = x * p.sw - p.pw + j * p.dw;
              const bool in = iy >= 0 && iy < H && ix >= 0 && ix < W;
              const std::int64_t src = ((n * X.shape[1] + c) * H + iy) * W + ix;
              if (is_int(t)) e.val.i[o] = in ? X.i[static_cast<std::size_t>(src)] : 0;
              else e.val.f[o] = in ? X.f[static_cast<std::size_t>(src)] : 0.0;
            }
  return e;
}

// OUT[n c y x] = the sum over i, j of W[c i j] X[n c (y*sh - ph + i*dh) (x*sw - pw + j*dw)], 0 outside X.
inline Expected ref_depthwise(const Dense& X, const Dense& W, const Shape& out_shape, const Conv& p, DType t) {
  Expected e{Dense::make(out_shape, false), {}};
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(numel_of(out_shape)), 0.0);
  const std::int64_t C = out_shape[1], H = X.shape[2], Wd = X.shape[3];
  std::size_t o = 0;
  for (std::int64_t n = 0; n < out_shape[0]; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t y = 0; y < out_shape[2]; ++y)
        for (std::int64_t x = 0; x < out_shape[3]; ++x, ++o) {
          double sum = 0.0, mag = 0.0;
          for (std::int64_t i = 0; i < p.kh; ++i)
            for (std::int64_t j = 0; j < p.kw; ++j) {
              const std::int64_t iy = y * p.sh - p.ph + i * p.dh, ix = x * p.sw - p.pw + j * p.dw;
              if (iy < 0 || iy >= H || ix < 0 || ix >= Wd) continue;
              const double term = W.f[static_cast<std::size_t>((c * p.kh + i) * p.kw + j)] *
                                  X.f[static_cast<std::size_t>(((n * C + c) * H + iy) * Wd + ix)];
              sum += term;
              mag += std::fabs(term);
            }
          e.val.f[o] = sum;
          e.tol[o] = tol.rtol * 4 * mag + tol.atol;
        }
  return e;
}

// The output (n, m, y, x) of a 3 x 3 stride-1 convolution of C channels of
// H x W with padding (ph, pw), summed in double by the definition (taps
// outside X skipped), and the sum of its terms' magnitudes; xat(n, c, iy,
// ix) and wat(m, c, i, j) read X and W.
template <class XAt, class WAt>
std::pair<double, double> conv3x3_sum(const XAt& xat, const WAt& wat, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t n,
                                      std::int64_t m, std::int64_t y, std::int64_t x, std::int64_t ph, std::int64_t pw) {
  double sum = 0.0, mag = 0.0;
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 3; ++j) {
        const std::int64_t iy = y - ph + i, ix = x - pw + j;
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
        const double term = wat(m, c, i, j) * xat(n, c, iy, ix);
        sum += term;
        mag += std::fabs(term);
      }
  return {sum, mag};
}

// OUT[n m y x] = the sum over c, i < 3, j < 3 of W[m c i j] X[n c (y - ph + i) (x - pw + j)], 0 outside X
// (a 3 x 3 stride-1 convolution, winograd_conv2d). The tolerance scales with the sum of the terms'
// magnitudes: Winograd's transforms (F(4 x 4, 3 x 3): coefficients up to 8 and 1/24) round about
// 50 times as much as the direct sum.
inline Expected ref_conv3x3(const Dense& X, const Dense& W, const Shape& out_shape, std::int64_t ph, std::int64_t pw, DType t) {
  Expected e{Dense::make(out_shape, false), {}};
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(numel_of(out_shape)), 0.0);
  const std::int64_t C = X.shape[1], H = X.shape[2], Wd = X.shape[3];
  auto xat = [&](std::int64_t n, std::int64_t c, std::int64_t iy, std::int64_t ix) {
    return X.f[static_cast<std::size_t>(((n * C + c) * H + iy) * Wd + ix)];
  };
  auto wat = [&](std::int64_t m, std::int64_t c, std::int64_t i, std::int64_t j) {
    return W.f[static_cast<std::size_t>(((m * C + c) * 3 + i) * 3 + j)];
  };
  std::size_t o = 0;
  for (std::int64_t n = 0; n < out_shape[0]; ++n)
    for (std::int64_t m = 0; m < out_shape[1]; ++m)
      for (std::int64_t y = 0; y < out_shape[2]; ++y)
        for (std::int64_t x = 0; x < out_shape[3]; ++x, ++o) {
          const auto [sum, mag] = conv3x3_sum(xat, wat, C, H, Wd, n, m, y, x, ph, pw);
          e.val.f[o] = sum;
          e.tol[o] = tol.rtol * 50 * mag + tol.atol;
        }
  return e;
}

// OUT[k, j] = the sum of DOUT[p, j] over every p with IDX[p] = k (in range).
inline Expected ref_scatter_add(const Dense& DOUT, const Dense& IDX, std::int64_t rows, DType t) {
  const std::int64_t d = DOUT.shape[1];
  Expected e{Dense::make({rows, d}, is_int(t)), {}};
  const Tol tol = tol_for(t);
  std::vector<double> mag(static_cast<std::size_t>(rows * d), 0.0);
  if (!is_int(t)) e.tol.assign(static_cast<std::size_t>(rows * d), 0.0);
  for (std::int64_t p = 0; p < IDX.numel(); ++p) {
    const std::int64_t k = ref_index(IDX, p, rows);
    if (k < 0) continue;
    for (std::int64_t j = 0; j < d; ++j) {
      const std::size_t o = static_cast<std::size_t>(k * d + j), src = static_cast<std::size_t>(p * d + j);
      if (is_int(t)) {
        e.val.i[o] = wrap(t, u(e.val.i[o]) + u(DOUT.i[src]));
      } else {
        e.val.f[o] += DOUT.f[src];
        mag[o] += std::fabs(DOUT.f[src]);
      }
    }
  }
  if (!is_int(t))
    for (std::size_t o = 0; o < mag.size(); ++o) e.tol[o] = tol.rtol * 4 * mag[o] + tol.atol;
  return e;
}

// OUT[n c h w] = the sum of COL[n c i j y x] over every (i j y x) whose patch
// reads (h w): im2col's adjoint, from its definition.
inline Expected ref_col2im(const Dense& COL, const Shape& out_shape, const Conv& p, DType t) {
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  const Tol tol = tol_for(t);
  const std::int64_t H = out_shape[2], W = out_shape[3];
  std::vector<double> mag(static_cast<std::size_t>(numel_of(out_shape)), 0.0);
  if (!is_int(t)) e.tol.assign(mag.size(), 0.0);
  std::size_t c_at = 0;
  for (std::int64_t n = 0; n < COL.shape[0]; ++n)
    for (std::int64_t c = 0; c < COL.shape[1]; ++c)
      for (std::int64_t i = 0; i < COL.shape[2]; ++i)
        for (std::int64_t j = 0; j < COL.shape[3]; ++j)
          for (std::int64_t y = 0; y < COL.shape[4]; ++y)
            for (std::int64_t x = 0; x < COL.shape[5]; ++x, ++c_at) {
              const std::int64_t iy = y * p.sh - p.ph + i * p.dh, ix = x * p.sw - p.pw + j * p.dw;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              const std::size_t o = static_cast<std::size_t>(((n * out_shape[1] + c) * H + iy) * W + ix);
              if (is_int(t)) {
                e.val.i[o] = wrap(t, u(e.val.i[o]) + u(COL.i[c_at]));
              } else {
                e.val.f[o] += COL.f[c_at];
                mag[o] += std::fabs(COL.f[c_at]);
              }
            }
  if (!is_int(t))
    for (std::size_t o = 0; o < mag.size(); ++o) e.tol[o] = tol.rtol * 4 * mag[o] + tol.atol;
  return e;
}

// Max pooling: window (y x) of plane (n c) covers X[n c (y*sh - ph + i)
// (x*sw - pw + j)] for i < kh, j < kw, the positions inside X only.
struct Pool {
  std::int64_t kh, kw, sh, sw, ph, pw;
};

// OUT[n c y x] = the largest element of the window, NaN if one is NaN, the
// dtype's lowest value (-inf for floats) when the window lies wholly in the
// padding.
inline Expected ref_max_pool(const Dense& X, const Shape& out_shape, const Pool& p, DType t) {
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  const std::int64_t C = X.shape[1], H = X.shape[2], W = X.shape[3];
  std::size_t o = 0;
  for (std::int64_t n = 0; n < out_shape[0]; ++n)
    for (std::int64_t c = 0; c < out_shape[1]; ++c)
      for (std::int64_t y = 0; y < out_shape[2]; ++y)
        for (std::int64_t x = 0; x < out_shape[3]; ++x, ++o) {
          std::int64_t vi = int_min(t);
          double vf = -std::numeric_limits<double>::infinity();
          for (std::int64_t i = 0; i < p.kh; ++i)
            for (std::int64_t j = 0; j < p.kw; ++j) {
              const std::int64_t iy = y * p.sh - p.ph + i, ix = x * p.sw - p.pw + j;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              const auto k = static_cast<std::size_t>(((n * C + c) * H + iy) * W + ix);
              if (is_int(t)) vi = std::max(vi, X.i[k]);
              else if (std::isnan(X.f[k]) || std::isnan(vf)) vf = std::numeric_limits<double>::quiet_NaN();
              else vf = std::max(vf, X.f[k]);
            }
          if (is_int(t)) e.val.i[o] = vi;
          else e.val.f[o] = vf;
        }
  return e;
}

// The row-major position in X of the winner of window (n c y x): scanning i,
// then j, its first NaN, else its first largest element; -1 for a window
// wholly in the padding.
inline std::int64_t ref_pool_winner(const Dense& X, std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x,
                                    const Pool& p) {
  const std::int64_t C = X.shape[1], H = X.shape[2], W = X.shape[3];
  std::int64_t best = -1;
  for (std::int64_t i = 0; i < p.kh; ++i)
    for (std::int64_t j = 0; j < p.kw; ++j) {
      const std::int64_t iy = y * p.sh - p.ph + i, ix = x * p.sw - p.pw + j;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
      const std::int64_t k = ((n * C + c) * H + iy) * W + ix;
      const auto ku = static_cast<std::size_t>(k);
      if (X.is_int) {
        if (best < 0 || X.i[ku] > X.i[static_cast<std::size_t>(best)]) best = k;
      } else {
        if (std::isnan(X.f[ku])) return k;
        if (best < 0 || X.f[ku] > X.f[static_cast<std::size_t>(best)]) best = k;
      }
    }
  return best;
}

// OUT[n c h w] = the sum of DOUT[n c y x] over the windows whose winner is
// (h w); the tolerance of a sum, as for col2im.
inline Expected ref_max_pool_grad(const Dense& DOUT, const Dense& X, const Pool& p, DType t) {
  Expected e{Dense::make(X.shape, is_int(t)), {}};
  const Tol tol = tol_for(t);
  std::vector<double> mag(static_cast<std::size_t>(X.numel()), 0.0);
  std::size_t d = 0;
  for (std::int64_t n = 0; n < DOUT.shape[0]; ++n)
    for (std::int64_t c = 0; c < DOUT.shape[1]; ++c)
      for (std::int64_t y = 0; y < DOUT.shape[2]; ++y)
        for (std::int64_t x = 0; x < DOUT.shape[3]; ++x, ++d) {
          const std::int64_t w = ref_pool_winner(X, n, c, y, x, p);
          if (w < 0) continue;
          const auto o = static_cast<std::size_t>(w);
          if (is_int(t)) {
            e.val.i[o] = wrap(t, u(e.val.i[o]) + u(DOUT.i[d]));
          } else {
            e.val.f[o] += DOUT.f[d];
            mag[o] += std::fabs(DOUT.f[d]);
          }
        }
  if (!is_int(t)) {
    e.tol.assign(mag.size(), 0.0);
    for (std::size_t o = 0; o < mag.size(); ++o) e.tol[o] = tol.rtol * 4 * mag[o] + tol.atol;
  }
  return e;
}

// OUT[n c y x] = D at the winner of window (y x) in X, 0 for a window wholly
// in the padding. Exact: the kernel only copies.
inline Expected ref_max_pool_pick(const Dense& D, const Dense& X, const Shape& out_shape, const Pool& p, DType t) {
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  std::size_t o = 0;
  for (std::int64_t n = 0; n < out_shape[0]; ++n)
    for (std::int64_t c = 0; c < out_shape[1]; ++c)
      for (std::int64_t y = 0; y < out_shape[2]; ++y)
        for (std::int64_t x = 0; x < out_shape[3]; ++x, ++o) {
          const std::int64_t w = ref_pool_winner(X, n, c, y, x, p);
          if (is_int(t)) e.val.i[o] = w < 0 ? 0 : D.i[static_cast<std::size_t>(w)];
          else e.val.f[o] = w < 0 ? 0.0 : D.f[static_cast<std::size_t>(w)];
        }
  return e;
}

// OUT[.. i j] = X[.. i j] where j <= i, else value (converted to the dtype).
inline Expected ref_causal_mask(const Dense& X, double value, DType t) {
  Expected e{Dense::make(X.shape, false), {}};
  const std::size_t r = X.shape.size();
  const std::int64_t rows = X.shape[r - 2], cols = X.shape[r - 1];
  const double v = t == DType::f32 ? static_cast<double>(static_cast<float>(value)) : value;
  for (std::int64_t k = 0; k < X.numel(); ++k) {
    const std::int64_t j = k % cols, i = (k / cols) % rows;
    e.val.f[static_cast<std::size_t>(k)] = j <= i ? X.f[static_cast<std::size_t>(k)] : v;
  }
  return e;
}

// OUT[.. i j] = exp(s x_j - max) / sum_k exp(s x_k - max) over the columns
// k <= i (causal) or all, 0 in the others; from the definition, in double.
// Tolerance: each exp's relative error and the rounding of s x in the
// dtype (an absolute error of |s x| eps in the exponent), summed over the row.
inline Expected ref_scaled_softmax(const Dense& X, double scale, bool causal, DType t) {
  Expected e{Dense::make(X.shape, false), {}};
  const std::size_t r = X.shape.size();
  const std::int64_t rows = X.shape[r - 2], cols = X.shape[r - 1];
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(X.numel()), 0.0);
  for (std::int64_t row = 0; cols > 0 && row < X.numel() / cols; ++row) {
    const std::int64_t i = row % rows, n = causal ? std::min(i + 1, cols) : cols;
    const auto z = [&](std::int64_t j) { return scale * X.f[static_cast<std::size_t>(row * cols + j)]; };
    double mx = -std::numeric_limits<double>::infinity(), big = 0;
    for (std::int64_t j = 0; j < n; ++j) mx = std::max(mx, z(j));
    double se = 0;
    for (std::int64_t j = 0; j < n; ++j) se += std::exp(z(j) - mx), big = std::max(big, std::fabs(z(j)));
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t o = static_cast<std::size_t>(row * cols + j);
      const double y = j < n ? std::exp(z(j) - mx) / se : 0.0;
      e.val.f[o] = y;
      e.tol[o] = j < n ? tol.rtol * (std::sqrt(static_cast<double>(n)) + 2.0) * (1.0 + 2.0 * big) * y + tol.atol * 1e-2 : 0.0;
    }
  }
  return e;
}

// OUT[.. j] = 1 at the first largest (or smallest) element of each row, else 0.
inline Expected ref_extreme_mask(const Dense& X, bool largest, DType t) {
  Expected e{Dense::make(X.shape, is_int(t)), {}};
  const std::int64_t n = X.shape.empty() ? 1 : X.shape.back();
  const std::int64_t rows = n == 0 ? 0 : X.numel() / n;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < n; ++j) {
      const std::size_t a = static_cast<std::size_t>(r * n + j), b = static_cast<std::size_t>(r * n + best);
      const bool better = is_int(t) ? (largest ? X.i[a] > X.i[b] : X.i[a] < X.i[b]) : (largest ? X.f[a] > X.f[b] : X.f[a] < X.f[b]);
      if (better) best = j;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const std::size_t o = static_cast<std::size_t>(r * n + j);
      if (is_int(t)) e.val.i[o] = j == best ? 1 : 0;
      else e.val.f[o] = j == best ? 1.0 : 0.0;
    }
  }
  return e;
}

// OUT[.., 0] = -sum_k TARGET[.., k] log_softmax(LOGITS[.., :])_k, from the
// definition: log_softmax_k = z_k - max - log(sum_j exp(z_j - max)) (the max
// keeps exp in range for logits far beyond +-88). A class whose target is 0
// adds nothing, even where its logit is -inf (a masked class: 0 log 0 = 0).
// An empty class axis gives NaN, like mean's 0/0: the log-sum-exp of no
// classes is -inf, and the loss 0 * -inf.
// Tolerance as for sums: the loss is a sum of the terms t_k (lse - z_k).
inline Expected ref_softmax_cross_entropy(const Dense& Z, const Dense& T, DType t) {
  Shape out_shape = Z.shape;
  out_shape.back() = 1;
  Expected e{Dense::make(out_shape, false), {}};
  const std::int64_t n = Z.shape.back();
  const std::int64_t rows = numel_of(out_shape);
  const Tol tol = tol_for(t);
  e.tol.assign(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto z = [&](std::int64_t k) { return Z.f[static_cast<std::size_t>(row * n + k)]; };
    const auto tg = [&](std::int64_t k) { return T.f[static_cast<std::size_t>(row * n + k)]; };
    if (n == 0) {
      e.val.f[static_cast<std::size_t>(row)] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < n; ++k) mx = std::max(mx, z(k));
    double se = 0;
    for (std::int64_t k = 0; k < n; ++k) se += std::exp(z(k) - mx);
    const double log_se = std::log(se);
    double loss = 0, mag = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      if (tg(k) == 0) continue;
      const double log_softmax = z(k) - mx - log_se;
      loss -= tg(k) * log_softmax;
      mag += std::fabs(tg(k)) * (std::fabs(mx + log_se) + std::fabs(z(k)));
    }
    e.val.f[static_cast<std::size_t>(row)] = loss;
    e.tol[static_cast<std::size_t>(row)] =
        tol.rtol * (std::sqrt(static_cast<double>(n)) + 1.0) * mag + tol.atol * (mag > 0 ? 1.0 : 0.0);
  }
  return e;
}

// ---------------------------------------------------------------------------
// Optimizers: one step of torch.optim.SGD / Adam / AdamW (single-tensor
// versions), element by element.

struct OptParams {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;  // sgd (lr, weight_decay: all)
  bool nesterov = false;
  double beta1 = 0, beta2 = 0, eps = 0;  // adam, adamw
  std::int64_t step = 1;
};

// The node's arguments in stdlib/nodes.yaml order: the erased kernel's ScalarArg array.
inline std::vector<std::pair<std::string_view, double>> opt_args(Opt o, const OptParams& p) {
  if (o == Opt::Sgd)
    return {{"lr", p.lr}, {"momentum", p.momentum}, {"dampening", p.dampening},
            {"weight_decay", p.weight_decay}, {"nesterov", p.nesterov ? 1.0 : 0.0}, {"step", static_cast<double>(p.step)}};
  return {{"lr", p.lr}, {"beta1", p.beta1}, {"beta2", p.beta2}, {"eps", p.eps}, {"weight_decay", p.weight_decay},
          {"step", static_cast<double>(p.step)}};
}

// Settings tried, one per case (cycled). SGD: plain; momentum at its first
// step (M <- g, undampened) and later; dampening; nesterov (which torch only
// allows without dampening); weight decay. Adam: torch's defaults; beta^step
// near 1 (step 1: the bias corrections matter most) and underflowing to 0
// (step 1e5); beta = 0; a large eps.
inline const OptParams kSgdParams[] = {
    {.lr = 0.1},
    {.lr = 0.01, .momentum = 0.9, .step = 1},
    {.lr = 0.01, .momentum = 0.9, .step = 3},
    {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .step = 2},
    {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true, .step = 1},
    {.lr = 0.3, .momentum = 0.5, .weight_decay = 0.1, .nesterov = true, .step = 7},
    {.lr = 1e-3, .weight_decay = 0.25, .step = 4},
};
inline const OptParams kAdamParams[] = {
    {.lr = 1e-3, .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1},
    {.lr = 1e-2, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 2},
    {.lr = 0.1, .weight_decay = 0.05, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-3, .step = 10},
    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1000},
    {.lr = 3e-4, .weight_decay = 0.2, .beta1 = 0.0, .beta2 = 0.0, .eps = 1e-6, .step = 1},
    {.lr = 1e-3, .weight_decay = 0.01, .beta1 = 0.99, .beta2 = 0.9999, .eps = 1e-8, .step = 100000},
};

// in: P G M (V), row-major, of one shape; returns the expected P, M (and V).
// The kernel takes its float arguments in its dtype (the erased entry casts
// them), so they are rounded the same way here: in f32, 1 - beta2 for beta2 =
// 0.999 is 1 - 0.99900001 = 0.00099999, 1.3e-5 away from 0.001.
// Tolerances: every value carries the magnitude of its terms (the rounding
// error of a sum scales with it, as for the reductions); through a quotient
// relative errors add, and v = beta2 V + (1 - beta2) g^2 inherits g's
// relative error twice.
inline std::vector<Expected> ref_optimizer(Opt o, const std::vector<Dense>& in, const OptParams& p0, DType t) {
  const auto hp = [t](double v) { return t == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v; };
  const double lr = hp(p0.lr), mom = hp(p0.momentum), damp = hp(p0.dampening), wd = hp(p0.weight_decay);
  const double b1 = hp(p0.beta1), b2 = hp(p0.beta2), eps = hp(p0.eps);
  const std::int64_t step = p0.step;
  const Shape& shape = in[0].shape;
  const std::size_t n = static_cast<std::size_t>(numel_of(shape));
  const bool adam = o != Opt::Sgd;
  std::vector<Expected> out(adam ? 3 : 2, Expected{Dense::make(shape, false), std::vector<double>(n, 0.0)});
  Expected &P1 = out[0], &M1 = out[1];
  const Tol tol = tol_for(t);
  const double c1 = 1.0 - std::pow(b1, static_cast<double>(step)), c2 = 1.0 - std::pow(b2, static_cast<double>(step));
  for (std::size_t k = 0; k < n; ++k) {
    const double P = in[0].f[k], G = in[1].f[k], M = in[2].f[k];
    double p = P, mag_p = std::fabs(P), m = M, mag_m = 0;
    if (!adam) {
      double g = G + wd * P, mag_g = std::fabs(G) + std::fabs(wd * P);
      if (mom != 0) {  // without momentum M is not touched
        if (step == 1) {
          m = g;
          mag_m = mag_g;
        } else {
          m = mom * M + (1 - damp) * g;
          mag_m = std::fabs(mom * M) + std::fabs(1 - damp) * mag_g;
        }
        if (p0.nesterov) {
          g += mom * m;
          mag_g += std::fabs(mom) * mag_m;
        } else {
          g = m;
          mag_g = mag_m;
        }
      }
      p = P - lr * g;
      mag_p += std::fabs(lr) * mag_g;
    } else {
      double g = G, mag_g = std::fabs(G);
      if (o == Opt::AdamW) {  // decoupled weight decay, before the step
        p = P * (1 - lr * wd);
        mag_p *= 1 + std::fabs(lr * wd);
      } else {
        g += wd * P;
        mag_g += std::fabs(wd * P);
      }
      const double V = in[3].f[k];
      m = b1 * M + (1 - b1) * g;
      mag_m = std::fabs(b1 * M) + std::fabs(1 - b1) * mag_g;
      const double v = b2 * V + (1 - b2) * g * g;
      const double mag_v = std::fabs(b2 * V) + std::fabs(1 - b2) * mag_g * mag_g;
      const double m_hat = m / c1, d = std::sqrt(v / c2) + eps, update = m_hat / d;
      p -= lr * update;
      mag_p += std::fabs(lr) * ((mag_m / c1) / d + std::fabs(update) * (1.0 + (v > 0 ? mag_v / v : 0.0)));
      out[2].val.f[k] = v;
      out[2].tol[k] = tol.rtol * mag_v + tol.atol;
    }
    P1.val.f[k] = p;
    P1.tol[k] = tol.rtol * mag_p + tol.atol;
    M1.val.f[k] = m;
    M1.tol[k] = mag_m > 0 ? tol.rtol * mag_m + tol.atol : 0.0;
  }
  return out;
}

// OUT[.. j] = the sum of X[.. k] over k <= j (k < j when exclusive; k >= j,
// k > j when reverse), from the definition: each output its own sum, not a
// running one. Integers wrap; floats' tolerance as a sum of j + 1 terms.
inline Expected ref_cumsum(const Dense& X, bool exclusive, bool reverse, DType t) {
  Expected e{Dense::make(X.shape, is_int(t)), {}};
  const std::int64_t n = X.shape.back();
  const std::int64_t rows = n == 0 ? 0 : X.numel() / n;
  const Tol tol = tol_for(t);
  if (!is_int(t)) e.tol.assign(static_cast<std::size_t>(X.numel()), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      std::uint64_t acc = 0;
      double v = 0, mag = 0, terms = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        const bool in = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
        if (!in) continue;
        const std::size_t a = static_cast<std::size_t>(r * n + k);
        if (is_int(t)) acc += u(X.i[a]);
        else v += X.f[a], mag += std::fabs(X.f[a]), terms += 1;
      }
      const std::size_t o = static_cast<std::size_t>(r * n + j);
      if (is_int(t)) {
        e.val.i[o] = wrap(t, acc);
      } else {
        e.val.f[o] = v;
        e.tol[o] = tol.rtol * (std::sqrt(terms) + 1.0) * mag + tol.atol * (mag > 0 ? 1.0 : 0.0);
      }
    }
  return e;
}

// OUT[.. :i] = A, OUT[.. i:] = B: the rows of A and B one after the other.
inline Expected ref_concat(const Dense& A, const Dense& B, DType t) {
  const std::int64_t i = A.shape.back(), j = B.shape.back();
  Shape out_shape = A.shape;
  out_shape.back() = i + j;
  Expected e{Dense::make(out_shape, is_int(t)), {}};
  const std::int64_t rows = i + j == 0 ? 0 : numel_of(out_shape) / (i + j);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < i + j; ++c) {
      const std::size_t o = static_cast<std::size_t>(r * (i + j) + c);
      const Dense& src = c < i ? A : B;
      const std::size_t k = static_cast<std::size_t>(c < i ? r * i + c : r * j + (c - i));
      if (is_int(t)) e.val.i[o] = src.i[k];
      else e.val.f[o] = src.f[k];
    }
  return e;
}

}  // namespace kt
