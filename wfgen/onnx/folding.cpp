// Folding: ONNX operators computed when importing, on constants (the
// shape and index arithmetic of exported graphs and ONNX's expanded
// functions): one table (fold_table), which every handler reaches through
// Importer::fold (tensors.hpp).
//
// The arithmetic is the stdlib's: an element-wise operator is folded with
// the kernel of the stdlib node its handler writes (stdlib_fold.hpp: the
// node's expression run by the expression language's interpreter in the
// constant's dtype), and so are the steps of the reductions (add, mul,
// maximum, minimum; the reduce kernels themselves are C++ text of the
// emitter, with no interpreter to run). What keeps its own code here is what
// has no stdlib node: the index and layout arithmetic (Shape, Size, Gather,
// Concat, Slice, Range, Transpose, Reshape, Expand, Tile, Trilu, EyeLike,
// ConstantOfShape, CumSum's running order, its steps the stdlib's add) and
// BitShift of the unsigned types wider than UINT8 (UINT8's is the stdlib's
// shl and shr). Mod folds as its run-time statements over stdlib nodes (fmod
// on floats); Pow of integers (the stdlib's pow has float kernels only) with its f64
// kernel, cast back toward zero.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "wfgen/onnx/operator_table.hpp"
#include "wfgen/onnx/stdlib_fold.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import {

namespace {

// The most elements a folded constant may have (folding is for shapes and
// indices; a larger constant is computed at run time, or refused).
constexpr std::int64_t kMaxFolded = std::int64_t{1} << 24;

// The product of `dims` when each is >= 0 and it is at most kMaxFolded; else -1.
std::int64_t folded_count(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) {
    if (d < 0 || (d > 0 && n > kMaxFolded / d)) return -1;
    n *= d;
  }
  return n;
}

// A small dense tensor of numbers, the element type kept.
struct Nd {
  std::vector<std::int64_t> dims;
  std::vector<double> v;
  int type = onnx::TensorProto::FLOAT;
};

bool to_nd(const onnx::TensorProto& t, Nd& out) {
  out.dims.assign(t.dims().begin(), t.dims().end());
  out.type = t.data_type();
  if (!numbers_of(t, out.v)) return false;
  return static_cast<std::int64_t>(out.v.size()) == element_count(t);
}

std::unique_ptr<onnx::TensorProto> from_nd(const Nd& n, std::string& why) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::DOUBLE);
  for (auto d : n.dims) t.add_dims(d);
  for (double x : n.v) t.add_double_data(x);
  return cast_constant(t, n.type, why);
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> s(dims.size(), 1);
  for (std::size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

std::int64_t attr_int(const onnx::NodeProto& node, const std::string& name, std::int64_t dflt) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

std::vector<std::int64_t> attr_ints(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

std::vector<std::int64_t> ints(const Nd& n) { return {n.v.begin(), n.v.end()}; }

// numpy broadcasting of several constants through `f`, which gets one
// element of each operand (Where's three).
bool broadcast_n(const std::vector<const Nd*>& ops, Nd& out, const std::function<double(const double*)>& f) {
  std::size_t r = 0;
  for (const Nd* n : ops) r = std::max(r, n->dims.size());
  auto dim = [&](const Nd& n, std::size_t k) { return k + n.dims.size() < r ? 1 : n.dims[k + n.dims.size() - r]; };
  out.dims.assign(r, 1);
  for (std::size_t k = 0; k < r; ++k) {
    for (const Nd* n : ops) {
      const std::int64_t d = dim(*n, k);
      if (d != 1 && out.dims[k] != 1 && d != out.dims[k]) return false;
      if (d != 1) out.dims[k] = d;
    }
  }
  const auto so = strides_of(out.dims);
  const std::int64_t total = folded_count(out.dims);
  if (total < 0) return false;
  out.v.assign(static_cast<std::size_t>(total), 0.0);
  std::vector<double> args(ops.size());
  for (std::int64_t i = 0; i < total; ++i) {
    for (std::size_t o = 0; o < ops.size(); ++o) {
      std::int64_t at = 0, stride = 1;
      for (std::size_t k = r; k-- > 0;) {
        const std::int64_t d = dim(*ops[o], k);
        if (d != 1) at += ((i / so[k]) % out.dims[k]) * stride;
        stride *= d;
      }
      args[o] = ops[o]->v[static_cast<std::size_t>(at)];
    }
    out.v[static_cast<std::size_t>(i)] = f(args.data());
  }
  return true;
}

// numpy broadcasting of two constants through `f`.
bool broadcast(const Nd& a, const Nd& b, Nd& out, const std::function<double(double, double)>& f) {
  return broadcast_n({&a, &b}, out, [&f](const double* v) { return f(v[0], v[1]); });
}

// The ONNX operators whose result is BOOL whatever their operands' type.
bool bool_result(const std::string& op) {
  static const std::set<std::string> ops = {"Equal", "Less",  "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN",
                                            "IsInf", "And",   "Or",      "Xor",         "Not"};
  return ops.count(op) != 0;
}

// The stdlib node `node`'s element-wise kernel on constants (numpy
// broadcasting), computed in the ONNX element type `type`, into `out`, for
// the ONNX operator `op`.
bool apply(const std::string& op, const std::string& node, const std::vector<const Nd*>& operands, int type, Nd& out, std::string& why,
           const std::map<std::string, double>& args = {}) {
  const StdlibKernel k = stdlib_kernel(node, type, args, why);
  if (!k) return false;
  if (k.operands != operands.size()) return why = "the stdlib's " + node + " takes " + std::to_string(k.operands) + " operands", false;
  if (!broadcast_n(operands, out, k.fn))
    return why = "the constant operands of " + op + " do not broadcast, or broadcast to more than 2^24 elements", false;
  out.type = type;
  return true;
}

// An element-wise operator its handler writes as one stdlib call (its
// row's parameter: stdlib_node_of) on constants, in its first operand's
// type; the variadic Max, Min and Sum two operands at a time, as the
// handler's calls.
bool fold_stdlib_call(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                      std::string& why) {
  const std::string& op = node.op_type();
  for (const auto* t : in)
    if (!t) return false;
  const std::string stdlib_node = stdlib_node_of(op);
  const bool floating = x[0].type == onnx::TensorProto::FLOAT || x[0].type == onnx::TensorProto::DOUBLE;
  // Pow of integers: the stdlib's pow has float kernels only; its f64
  // kernel, the result cast back toward zero (exact below 2^53).
  const int type = op == "Pow" && !floating ? onnx::TensorProto::DOUBLE : x[0].type;
  if (x.size() == 1) {
    if (!apply(op, stdlib_node, {&x[0]}, type, out, why)) return false;
  } else {
    for (std::size_t k = 1; k < x.size(); ++k) {
      const Nd acc = k == 1 ? x[0] : out;
      if (!apply(op, stdlib_node, {&acc, &x[k]}, type, out, why)) return false;
    }
  }
  out.type = bool_result(op) ? onnx::TensorProto::BOOL : x[0].type;
  return true;
}

// And, Or, Xor and Not on BOOL constants: import_logic's statements on u8
// (a * b, a + b - a * b, a != b, 1 - a) with the stdlib's kernels.
bool fold_logic(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                std::string& why) {
  const std::string& op = node.op_type();
  constexpr int kBool = onnx::TensorProto::BOOL;
  if (op == "Not") return apply(op, "rsub_scalar", {&x[0]}, kBool, out, why, {{"value", 1.0}});
  if (in.size() != 2 || !in[1]) return false;
  if (op == "And") return apply(op, "mul", {&x[0], &x[1]}, kBool, out, why);
  if (op == "Xor") return apply(op, "ne", {&x[0], &x[1]}, kBool, out, why);
  Nd sum, product;
  return apply(op, "add", {&x[0], &x[1]}, kBool, sum, why) && apply(op, "mul", {&x[0], &x[1]}, kBool, product, why) &&
         apply(op, "sub", {&sum, &product}, kBool, out, why);
}

// Range of constant scalars: start + k * delta for k below
// ceil((limit - start) / delta) (index arithmetic: no stdlib node).
bool fold_range(const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out, std::string& why) {
  if (in.size() < 3 || !in[1] || !in[2] || x[0].v.size() != 1 || x[1].v.size() != 1 || x[2].v.size() != 1) return false;
  const double start = x[0].v[0], limit = x[1].v[0], delta = x[2].v[0];
  if (delta == 0) return why = "Range with a delta of 0", false;
  const double n = std::max(0.0, std::ceil((limit - start) / delta));
  if (!(n <= static_cast<double>(kMaxFolded))) return why = "Range of more than 2^24 elements", false;
  out.v.clear();
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k) out.v.push_back(start + static_cast<double>(k) * delta);
  out.dims = {static_cast<std::int64_t>(out.v.size())};
  return true;
}

// A negative axis counted from the end of `rank` axes.
std::int64_t axis_of(std::int64_t a, std::int64_t rank) { return a < 0 ? a + rank : a; }

// Concat of constants along its axis, into `out` (a copy of x[0]); false
// when it cannot be folded (`why` says why).
bool fold_concat(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                 std::string& why) {
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  const std::int64_t axis = axis_of(attr_int(node, "axis", 0), rank);
  if (axis < 0 || axis >= rank) return why = "Concat axis out of range", false;
  out.dims[static_cast<std::size_t>(axis)] = 0;
  std::int64_t outer = 1;
  for (std::int64_t k = 0; k < axis; ++k) outer *= x[0].dims[static_cast<std::size_t>(k)];
  out.v.clear();
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (!in[k] || x[k].dims.size() != x[0].dims.size()) return why = "Concat of constants of different ranks", false;
    for (std::int64_t a = 0; a < rank; ++a)
      if (a != axis && x[k].dims[static_cast<std::size_t>(a)] != x[0].dims[static_cast<std::size_t>(a)])
        return why = "Concat of constants whose sizes differ on axis " + std::to_string(a), false;
    out.dims[static_cast<std::size_t>(axis)] += x[k].dims[static_cast<std::size_t>(axis)];
  }
  for (std::int64_t o = 0; o < outer; ++o)
    for (const auto& t : x) {
      const std::size_t chunk = t.v.size() / static_cast<std::size_t>(std::max<std::int64_t>(outer, 1));
      out.v.insert(out.v.end(), t.v.begin() + static_cast<std::ptrdiff_t>(o * chunk), t.v.begin() + static_cast<std::ptrdiff_t>((o + 1) * chunk));
    }
  return true;
}

// Gather of a constant with constant indices, into `out` (a copy of x[0]).
bool fold_gather(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                 std::string& why) {
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  if (in.size() < 2 || !in[1]) return false;
  const std::int64_t axis = axis_of(attr_int(node, "axis", 0), rank);
  if (axis < 0 || axis >= rank) return why = "Gather axis out of range", false;
  const std::int64_t n = x[0].dims[static_cast<std::size_t>(axis)];
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t k = 0; k < axis; ++k) outer *= x[0].dims[static_cast<std::size_t>(k)];
  for (std::int64_t k = axis + 1; k < rank; ++k) inner *= x[0].dims[static_cast<std::size_t>(k)];
  out.dims.clear();
  out.dims.insert(out.dims.end(), x[0].dims.begin(), x[0].dims.begin() + axis);
  out.dims.insert(out.dims.end(), x[1].dims.begin(), x[1].dims.end());
  out.dims.insert(out.dims.end(), x[0].dims.begin() + axis + 1, x[0].dims.end());
  out.v.clear();
  for (std::int64_t o = 0; o < outer; ++o)
    for (double id : x[1].v) {
      std::int64_t i = static_cast<std::int64_t>(id);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return why = "a Gather index out of range", false;
      const auto from = x[0].v.begin() + static_cast<std::ptrdiff_t>((o * n + i) * inner);
      out.v.insert(out.v.end(), from, from + static_cast<std::ptrdiff_t>(inner));
    }
  return true;
}

std::string attr_string(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.s();
  return "";
}

// The bits of an unsigned type (BitShift's), 0 for the others.
int unsigned_bits(int type) {
  switch (type) {
    case onnx::TensorProto::UINT8: return 8;
    case onnx::TensorProto::UINT16: return 16;
    case onnx::TensorProto::UINT32: return 32;
    case onnx::TensorProto::UINT64: return 64;
    default: return 0;
  }
}

// Mod of constants: import_mod's statements with the stdlib's kernels. t is
// C's remainder (fmod 1: the dividend's sign), the stdlib's fmod on floats,
// a - a / b * b on integers; fmod 0 (Python's %, the divisor's sign) adds b
// where t is not 0 and its sign is not b's: t + b * abs(sign(t)) * (sign(t) != sign(b)).
bool fold_mod_in(const Nd& a, const Nd& b, bool fmod, bool floating, int type, Nd& out, std::string& why) {
  Nd q, qb, t;
  if (floating ? !apply("Mod", "fmod", {&a, &b}, type, t, why)
               : !apply("Mod", "div", {&a, &b}, type, q, why) || !apply("Mod", "mul", {&q, &b}, type, qb, why) ||
                     !apply("Mod", "sub", {&a, &qb}, type, t, why))
    return false;
  if (fmod) return out = std::move(t), true;
  Nd st, sb, mag, differ, step, scaled;
  return apply("Mod", "sign", {&t}, type, st, why) && apply("Mod", "sign", {&b}, type, sb, why) && apply("Mod", "abs", {&st}, type, mag, why) &&
         apply("Mod", "ne", {&st, &sb}, type, differ, why) && apply("Mod", "mul", {&b, &mag}, type, step, why) &&
         apply("Mod", "mul", {&step, &differ}, type, scaled, why) && apply("Mod", "add", {&t, &scaled}, type, out, why);
}

// The narrow and unsigned integer types compute in i64, as the stdlib has no
// sign of u8 (the run-time path maps INT64 and INT32 only); FLOAT and DOUBLE
// in their own dtype.
bool fold_mod(const Nd& a, const Nd& b, bool fmod, Nd& out, std::string& why) {
  const bool floating = a.type == onnx::TensorProto::FLOAT || a.type == onnx::TensorProto::DOUBLE;
  const int type = floating || a.type == onnx::TensorProto::INT32 ? a.type : onnx::TensorProto::INT64;
  if (!fold_mod_in(a, b, fmod, floating, type, out, why)) return false;
  out.type = a.type;
  return true;
}

// Mod and BitShift on constants. Mod as the run-time statements (fold_mod).
// BitShift of UINT8 with the stdlib's shl and shr (import_bitshift's nodes);
// of UINT16, UINT32 and UINT64, which have no run-time dtype, here (a left
// shift wrapping at the type's width).
bool fold_integer(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                  std::string& why) {
  const std::string& op = node.op_type();
  if (in.size() < 2 || !in[1]) return false;
  if (op == "Mod") return fold_mod(x[0], x[1], attr_int(node, "fmod", 0) != 0, out, why);
  const int bits = unsigned_bits(x[0].type);
  const std::string direction = attr_string(node, "direction");
  if (bits == 0 || (direction != "LEFT" && direction != "RIGHT"))
    return why = "BitShift of " + onnx::TensorProto::DataType_Name(x[0].type) + " with direction '" + direction + "'", false;
  const bool left = direction == "LEFT";
  if (x[0].type == onnx::TensorProto::UINT8 && x[1].type == onnx::TensorProto::UINT8)
    return apply(op, left ? "shl" : "shr", {&x[0], &x[1]}, onnx::TensorProto::UINT8, out, why);
  const std::function<double(double, double)> f = [left, bits](double a, double b) {
    if (b >= bits) return 0.0;
    return left ? std::fmod(std::ldexp(a, static_cast<int>(b)), std::ldexp(1.0, bits)) : std::floor(std::ldexp(a, -static_cast<int>(b)));
  };
  if (!broadcast(x[0], x[1], out, f))
    return why = "the constant operands of " + op + " do not broadcast, or broadcast to more than 2^24 elements", false;
  out.type = x[0].type;
  return true;
}

// CumSum of a constant along its (constant) axis, exclusive and reverse as
// asked: the stdlib cumsum's running sum, each step the stdlib's add in the
// constant's type (an f32 sum rounds at each add, as the f32 kernel's).
bool fold_cumsum(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                 std::string& why) {
  if (in.size() < 2 || !in[1] || x[1].v.size() != 1) return false;
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  const std::int64_t axis = axis_of(ints_of(*in[1]).at(0), rank);
  if (axis < 0 || axis >= rank) return why = "CumSum axis out of range", false;
  const StdlibKernel add = stdlib_kernel("add", x[0].type, {}, why);
  if (!add) return false;
  const bool exclusive = attr_int(node, "exclusive", 0) != 0, reverse = attr_int(node, "reverse", 0) != 0;
  const std::int64_t n = x[0].dims[static_cast<std::size_t>(axis)], stride = strides_of(x[0].dims)[static_cast<std::size_t>(axis)];
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(x[0].v.size()); ++i) {
    if ((i / stride) % n != 0) continue;  // not the first element of its line
    double sum = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const auto at = static_cast<std::size_t>(i + (reverse ? n - 1 - k : k) * stride);
      const double step[2] = {sum, x[0].v[at]};
      if (!exclusive) sum = add.fn(step);
      out.v[at] = sum;
      if (exclusive) sum = add.fn(step);
    }
  }
  return true;
}

// Trilu of a constant: the elements of its last two axes on and above (upper)
// or on and below the k-th diagonal kept, the others 0.
bool fold_trilu(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                std::string& why) {
  if (x[0].dims.size() < 2) return why = "Trilu of a constant of rank below 2", false;
  const std::int64_t k = in.size() > 1 && in[1] ? ints_of(*in[1]).at(0) : 0;
  const bool upper = attr_int(node, "upper", 1) != 0;
  const std::int64_t cols = x[0].dims.back(), rows = x[0].dims[x[0].dims.size() - 2];
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.v.size()); ++i) {
    const std::int64_t col = i % cols, row = (i / cols) % rows;
    if (upper ? col - row < k : col - row > k) out.v[static_cast<std::size_t>(i)] = 0;
  }
  return true;
}

// One axis of a Slice: its first index, step and count; false when the step is 0.
bool slice_axis(std::int64_t d, std::int64_t start, std::int64_t end, std::int64_t step, std::int64_t& first, std::int64_t& count) {
  if (step == 0) return false;
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, d);
    end = std::clamp<std::int64_t>(end, 0, d);
    count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<std::int64_t>(start, -1, d - 1);
    end = std::clamp<std::int64_t>(end, -1, d - 1);
    count = start > end ? (start - end - step - 1) / -step : 0;
  }
  first = start;
  return true;
}

// Slice of a constant (starts, ends, axes and steps: attributes before opset
// 10, constant inputs after), negative steps included.
bool fold_slice(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                int opset, std::string& why) {
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    starts = attr_ints(node, "starts"), ends = attr_ints(node, "ends"), axes = attr_ints(node, "axes");
  } else {
    if (in.size() < 3 || !in[1] || !in[2]) return false;
    starts = ints_of(*in[1]), ends = ints_of(*in[2]);
    if (in.size() > 3 && in[3]) axes = ints_of(*in[3]);
    if (in.size() > 4 && in[4]) steps = ints_of(*in[4]);
  }
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  for (std::size_t k = 0; axes.empty() && k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return why = "Slice's starts, ends, axes and steps differ in length", false;
  std::vector<std::int64_t> first(x[0].dims.size(), 0), step(x[0].dims.size(), 1), count = x[0].dims;
  for (std::size_t j = 0; j < starts.size(); ++j) {
    const std::int64_t a = axis_of(axes[j], rank);
    if (a < 0 || a >= rank) return why = "Slice axis out of range", false;
    const auto ua = static_cast<std::size_t>(a);
    step[ua] = steps[j];
    if (!slice_axis(x[0].dims[ua], starts[j], ends[j], steps[j], first[ua], count[ua])) return why = "Slice with a step of 0", false;
  }
  const auto src = strides_of(x[0].dims), dst = strides_of(count);
  out.dims = count;
  out.v.assign(static_cast<std::size_t>(folded_count(count)), 0.0);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.v.size()); ++i) {
    std::int64_t at = 0;
    for (std::size_t k = 0; k < count.size(); ++k) at += (first[k] + ((i / dst[k]) % count[k]) * step[k]) * src[k];
    out.v[static_cast<std::size_t>(i)] = x[0].v[static_cast<std::size_t>(at)];
  }
  return true;
}

// ConstantOfShape of a constant shape: its value (default a FLOAT 0) repeated.
bool fold_constant_of_shape(const onnx::NodeProto& node, const std::vector<Nd>& x, Nd& out, std::string& why) {
  double value = 0;
  int type = onnx::TensorProto::FLOAT;
  for (const auto& a : node.attribute()) {
    if (a.name() != "value") continue;
    Nd v;
    if (!to_nd(a.t(), v) || v.v.size() != 1) return why = "ConstantOfShape's value is not one number", false;
    value = v.v[0];
    type = v.type;
  }
  out.dims = ints(x[0]);
  const std::int64_t total = folded_count(out.dims);
  if (total < 0) return why = "ConstantOfShape with a negative dim or more than 2^24 elements", false;
  out.v.assign(static_cast<std::size_t>(total), value);
  out.type = type;
  return true;
}


// The coordinates of flat index `i` of `dims` (strides `s`).
std::vector<std::int64_t> coordinates(std::int64_t i, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> c(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) c[k] = (i / s[k]) % dims[k];
  return c;
}

// Transpose of a constant by `perm` (default: the axes reversed).
bool fold_transpose(const onnx::NodeProto& node, const std::vector<Nd>& x, Nd& out, std::string& why) {
  const std::size_t rank = x[0].dims.size();
  std::vector<std::int64_t> perm = attr_ints(node, "perm");
  if (perm.empty())
    for (std::size_t k = rank; k-- > 0;) perm.push_back(static_cast<std::int64_t>(k));
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) return why = "Transpose's perm has " + std::to_string(perm.size()) + " axes, its input " + std::to_string(rank), false;
  for (auto& p : perm) {
    p = axis_of(p, static_cast<std::int64_t>(rank));
    if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(p)]) return why = "Transpose's perm is not a permutation", false;
    seen[static_cast<std::size_t>(p)] = true;
  }
  for (std::size_t k = 0; k < rank; ++k) out.dims[k] = x[0].dims[static_cast<std::size_t>(perm[k])];
  const auto src = strides_of(x[0].dims), dst = strides_of(out.dims);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.v.size()); ++i) {
    const auto c = coordinates(i, out.dims, dst);
    std::int64_t at = 0;
    for (std::size_t k = 0; k < rank; ++k) at += c[k] * src[static_cast<std::size_t>(perm[k])];
    out.v[static_cast<std::size_t>(i)] = x[0].v[static_cast<std::size_t>(at)];
  }
  return true;
}

// Expand of a constant to a constant shape (numpy broadcasting both ways).
bool fold_expand(const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out, std::string& why) {
  if (in.size() < 2 || !in[1]) return false;
  Nd ones;
  ones.dims = ints(x[1]);
  const std::int64_t n = folded_count(ones.dims);
  if (n < 0) return why = "Expand to a negative dim or more than 2^24 elements", false;
  ones.v.assign(static_cast<std::size_t>(n), 1.0);
  if (!broadcast_n({&x[0], &ones}, out, [](const double* v) { return v[0]; }))
    return why = "Expand's shape does not broadcast with its input, or to more than 2^24 elements", false;
  out.type = x[0].type;
  return true;
}

// Tile of a constant by constant repeats.
bool fold_tile(const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out, std::string& why) {
  if (in.size() < 2 || !in[1]) return false;
  const std::vector<std::int64_t> repeats = ints(x[1]);
  if (repeats.size() != x[0].dims.size()) return why = "Tile's repeats are not one per axis of its input", false;
  for (std::size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] < 0) return why = "Tile with a negative repeat", false;
    out.dims[k] = x[0].dims[k] * repeats[k];
  }
  const std::int64_t n = folded_count(out.dims);
  if (n < 0) return why = "Tile to more than 2^24 elements", false;
  const auto src = strides_of(x[0].dims), dst = strides_of(out.dims);
  out.v.assign(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto c = coordinates(i, out.dims, dst);
    std::int64_t at = 0;
    for (std::size_t k = 0; k < c.size(); ++k) at += (c[k] % x[0].dims[k]) * src[k];
    out.v[static_cast<std::size_t>(i)] = x[0].v[static_cast<std::size_t>(at)];
  }
  return true;
}

// Flatten of a constant: [d0 .. d(axis-1)] and the rest, two axes.
bool fold_flatten(const onnx::NodeProto& node, const std::vector<Nd>& x, Nd& out, std::string& why) {
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  const std::int64_t a = attr_int(node, "axis", 1);
  if (a < -rank || a > rank) return why = "Flatten axis out of range", false;
  const std::int64_t axis = a < 0 ? a + rank : a;
  std::int64_t outer = 1;
  for (std::int64_t k = 0; k < axis; ++k) outer *= x[0].dims[static_cast<std::size_t>(k)];
  out.dims = {outer, outer ? static_cast<std::int64_t>(x[0].v.size()) / outer : 0};
  return true;
}

// ReduceSum, ReduceMean, ReduceMax, ReduceMin and ReduceProd of a constant:
// axes an attribute, or an input (ReduceSum from opset 13, the others from
// 18); none: every axis, or none with noop_with_empty_axes.
bool fold_reduce(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                 int opset, std::string& why) {
  const std::string& op = node.op_type();
  const bool axes_input = opset >= (op == "ReduceSum" ? 13 : 18);
  std::vector<std::int64_t> axes = axes_input ? (in.size() > 1 && in[1] ? ints(x[1]) : std::vector<std::int64_t>{}) : attr_ints(node, "axes");
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  if (axes.empty() && axes_input && attr_int(node, "noop_with_empty_axes", 0) != 0) return true;
  std::vector<bool> reduced(static_cast<std::size_t>(rank), axes.empty());
  for (auto a : axes) {
    a = axis_of(a, rank);
    if (a < 0 || a >= rank) return why = op + " axis out of range", false;
    reduced[static_cast<std::size_t>(a)] = true;
  }
  std::vector<std::int64_t> kept = x[0].dims;  // the reduced axes as 1
  for (std::int64_t k = 0; k < rank; ++k)
    if (reduced[static_cast<std::size_t>(k)]) kept[static_cast<std::size_t>(k)] = 1;
  const auto src = strides_of(x[0].dims), dst = strides_of(kept);
  const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(folded_count(kept), 0));
  const bool extreme = op == "ReduceMax" || op == "ReduceMin";
  if (extreme && x[0].v.empty()) return why = op + " of an empty constant", false;
  // Each element combined with its row's value so far by the stdlib's
  // element-wise kernel in the constant's type: the reduce kernels' steps
  // (their f32 sums round at each add, their max and min keep a NaN).
  const std::string combine = op == "ReduceProd" ? "mul" : op == "ReduceMax" ? "maximum" : op == "ReduceMin" ? "minimum" : "add";
  const StdlibKernel step = stdlib_kernel(combine, x[0].type, {}, why);
  if (!step) return false;
  std::vector<double> acc(n, op == "ReduceProd" ? 1.0 : 0.0);
  std::vector<bool> first(n, true);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(x[0].v.size()); ++i) {
    const auto c = coordinates(i, x[0].dims, src);
    std::int64_t at = 0;
    for (std::size_t k = 0; k < c.size(); ++k) at += (reduced[k] ? 0 : c[k]) * dst[k];
    double& a = acc[static_cast<std::size_t>(at)];
    const double pair[2] = {a, x[0].v[static_cast<std::size_t>(i)]};
    a = first[static_cast<std::size_t>(at)] ? pair[1] : step.fn(pair);
    first[static_cast<std::size_t>(at)] = false;
  }
  if (op == "ReduceMean") {  // the sum divided by the count, with the stdlib's div in the constant's type (mean's epilogue)
    const StdlibKernel div = stdlib_kernel("div", x[0].type, {}, why);
    if (!div) return false;
    const double count = static_cast<double>(x[0].v.size()) / static_cast<double>(std::max<std::size_t>(n, 1));
    for (double& a : acc) {
      const double pair[2] = {a, count};
      a = count > 0 ? div.fn(pair) : NAN;
    }
  }
  out.v = std::move(acc);
  out.dims.clear();
  for (std::int64_t k = 0; k < rank; ++k)
    if (!reduced[static_cast<std::size_t>(k)] || attr_int(node, "keepdims", 1) != 0) out.dims.push_back(kept[static_cast<std::size_t>(k)]);
  return true;
}

// Unsqueeze (axes into the result's rank) and Squeeze (the given axes, or
// every axis of size 1) of a constant; axes an input from opset 13.
bool fold_squeeze(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                  int opset, std::string& why) {
  std::vector<std::int64_t> axes = opset >= 13 ? (in.size() > 1 && in[1] ? ints(x[1]) : std::vector<std::int64_t>{}) : attr_ints(node, "axes");
  const auto rank = static_cast<std::int64_t>(x[0].dims.size());
  if (node.op_type() == "Unsqueeze") {
    const std::int64_t r = rank + static_cast<std::int64_t>(axes.size());
    for (auto& a : axes) a = axis_of(a, r);
    std::sort(axes.begin(), axes.end());
    for (auto a : axes) {
      if (a < 0 || a > static_cast<std::int64_t>(out.dims.size())) return why = "Unsqueeze axis out of range", false;
      out.dims.insert(out.dims.begin() + a, 1);
    }
    return true;
  }
  std::vector<std::int64_t> kept;
  for (std::int64_t k = 0; k < rank; ++k) {
    bool drop = axes.empty() ? x[0].dims[static_cast<std::size_t>(k)] == 1 : false;
    for (auto a : axes) drop = drop || axis_of(a, rank) == k;
    if (!drop) kept.push_back(x[0].dims[static_cast<std::size_t>(k)]);
  }
  out.dims = kept;
  return true;
}

// Reshape of a constant (0 copies the input's dim unless allowzero, one -1 inferred).
bool fold_reshape(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in, const std::vector<Nd>& x, Nd& out,
                  std::string& why) {
  if (in.size() < 2 || !in[1]) return false;
  std::vector<std::int64_t> shape = ints(x[1]);
  std::int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0 && attr_int(node, "allowzero", 0) == 0) shape[k] = k < x[0].dims.size() ? x[0].dims[k] : 0;
    if (shape[k] == -1) infer = static_cast<std::int64_t>(k);
    else known *= shape[k];
  }
  if (infer >= 0) shape[static_cast<std::size_t>(infer)] = known ? static_cast<std::int64_t>(x[0].v.size()) / known : 0;
  if (folded_count(shape) != static_cast<std::int64_t>(x[0].v.size()))
    return why = "a Reshape of a constant of " + std::to_string(x[0].v.size()) + " elements to a shape that does not hold them", false;
  out.dims = shape;
  return true;
}

// Shape and Size of a constant (a computed value's are the importer's, from its dims).
bool fold_shape(const onnx::NodeProto& node, const std::vector<Nd>& x, Nd& out) {
  out.type = onnx::TensorProto::INT64;
  if (node.op_type() == "Size") {
    out.v = {static_cast<double>(x[0].v.size())};
    out.dims.clear();
    return true;
  }
  const auto [start, end] = shape_range(node, static_cast<std::int64_t>(x[0].dims.size()));
  out.v.assign(x[0].dims.begin() + start, x[0].dims.begin() + std::max(start, end));
  out.dims = {static_cast<std::int64_t>(out.v.size())};
  return true;
}

// EyeLike of a constant of rank 2: ones where column - row == k; its dtype
// attribute's type, or the input's.
bool fold_eye_like(const onnx::NodeProto& node, const std::vector<Nd>& x, Nd& out, std::string& why) {
  if (x[0].dims.size() != 2) return why = "EyeLike of an input of rank " + std::to_string(x[0].dims.size()) + " (2 only)", false;
  const std::int64_t k = attr_int(node, "k", 0), cols = x[0].dims[1];
  for (std::size_t e = 0; e < out.v.size(); ++e)
    out.v[e] = static_cast<std::int64_t>(e) % cols - static_cast<std::int64_t>(e) / cols == k ? 1.0 : 0.0;
  out.type = static_cast<int>(attr_int(node, "dtype", x[0].type));
  return true;
}

// What a fold is given: the node, its inputs (null for an absent optional
// one) and their values, and the opset. `out` starts as a copy of x[0].
struct FoldArgs {
  const onnx::NodeProto& node;
  const std::vector<const onnx::TensorProto*>& in;
  const std::vector<Nd>& x;
  int opset;
};
// False when the node is not folded; `why` says why when folding failed.
using Fold = std::function<bool(const FoldArgs&, Nd& out, std::string& why)>;

// Every operator folded on constants, one entry each: its semantics once.
const std::map<std::string, Fold>& fold_table() {
  static const std::map<std::string, Fold> table = [] {
    std::map<std::string, Fold> t;
    // The element-wise operators the importer writes as one stdlib call.
    for (const detail::OperatorRow& row : detail::operator_table())
      if (!stdlib_node_of(row.name).empty())
        t[std::string(row.name)] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_stdlib_call(a.node, a.in, a.x, out, why); };
    for (const char* op : {"And", "Or", "Xor", "Not"})
      t[op] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_logic(a.node, a.in, a.x, out, why); };
    t["Reciprocal"] = [](const FoldArgs& a, Nd& out, std::string& why) {  // import_reciprocal's x ** -1.0
      return apply("Reciprocal", "pow_scalar", {&a.x[0]}, a.x[0].type, out, why, {{"value", -1.0}});
    };
    t["Where"] = [](const FoldArgs& a, Nd& out, std::string& why) {  // the condition in the branches' type, as import_where's
      return a.in.size() == 3 && a.in[1] && a.in[2] && apply("Where", "select", {&a.x[0], &a.x[1], &a.x[2]}, a.x[1].type, out, why);
    };
    t["Range"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_range(a.in, a.x, out, why); };
    t["Identity"] = [](const FoldArgs&, Nd&, std::string&) { return true; };
    for (const char* op : {"Unsqueeze", "Squeeze"})
      t[op] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_squeeze(a.node, a.in, a.x, out, a.opset, why); };
    t["Reshape"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_reshape(a.node, a.in, a.x, out, why); };
    t["Flatten"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_flatten(a.node, a.x, out, why); };
    t["Transpose"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_transpose(a.node, a.x, out, why); };
    t["Expand"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_expand(a.in, a.x, out, why); };
    t["Tile"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_tile(a.in, a.x, out, why); };
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
      t[op] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_reduce(a.node, a.in, a.x, out, a.opset, why); };
    for (const char* op : {"Mod", "BitShift"})
      t[op] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_integer(a.node, a.in, a.x, out, why); };
    t["CumSum"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_cumsum(a.node, a.in, a.x, out, why); };
    t["Trilu"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_trilu(a.node, a.in, a.x, out, why); };
    t["Slice"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_slice(a.node, a.in, a.x, out, a.opset, why); };
    t["Concat"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_concat(a.node, a.in, a.x, out, why); };
    t["Gather"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_gather(a.node, a.in, a.x, out, why); };
    for (const char* op : {"Shape", "Size"}) t[op] = [](const FoldArgs& a, Nd& out, std::string&) { return fold_shape(a.node, a.x, out); };
    t["EyeLike"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_eye_like(a.node, a.x, out, why); };
    t["ConstantOfShape"] = [](const FoldArgs& a, Nd& out, std::string& why) { return fold_constant_of_shape(a.node, a.x, out, why); };
    return t;
  }();
  return table;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> shape_range(const onnx::NodeProto& node, std::int64_t rank) {
  auto clamp_axis = [&](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + rank : a, 0, rank); };
  return {clamp_axis(attr_int(node, "start", 0)), clamp_axis(attr_int(node, "end", rank))};
}

std::unique_ptr<onnx::TensorProto> fold_constants(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in,
                                                  int opset, std::string& why) {
  const auto fold = fold_table().find(node.op_type());
  if (fold == fold_table().end() || in.empty() || !in[0]) return nullptr;
  std::vector<Nd> x(in.size());
  std::int64_t elements = 0;  // dims are checked (untrusted_data.cpp): no overflow here
  for (const auto* t : in) elements += t ? std::min(element_count(*t), kMaxFolded + 1) : 0;
  if (elements > kMaxFolded) return nullptr;  // large: not shape arithmetic, computed at run time (or refused)
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (in[k] && !to_nd(*in[k], x[k])) return nullptr;  // strings and the like: not folded
  }
  Nd out = x[0];
  if (!fold->second(FoldArgs{node, in, x, opset}, out, why)) return nullptr;
  return from_nd(out, why);
}

}  // namespace wfgen::onnx_import
