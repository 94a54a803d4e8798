// ONNX import, second half: each operator of the graph as body statements
// over the stdlib's nodes and models (elementwise math, matmuls,
// reductions, shapes), or a constant when its inputs are all known: the
// dispatch (import_node) on the rows of operator_table.cpp, and the rows'
// handlers. The layers (convolution, pooling, normalisation, losses) are in
// layers.cpp.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/tensors.hpp"
#include "wfgen/onnx/windows.hpp"
#include "wfgen/support/diagnostics.hpp"

namespace wfgen::onnx_import::detail {

std::string Importer::binary(const onnx::NodeProto& node, const Value& a, const Value& b, const std::string& op) {
  if (a.literal && b.literal) unsupported(node, "both operands are constants");
  if (op == "/" && a.literal) return a.body + " * " + b.body + " ** -1.0";
  if (op == "**" && a.literal) unsupported(node, "a constant base with a tensor exponent");
  return a.body + " " + op + " " + b.body;
}

void Importer::import_node(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    fail("cannot import operator " + node.op_type() + " of domain '" + node.domain() + "'" +
         (node.name().empty() ? "" : " (node '" + node.name() + "')") + ": only the default ONNX domain is supported");
  }
  if (node.output_size() < 1) unsupported(node, "it has no output");
  if (fold(node)) return;
  const OperatorRow* row = find_operator(node.op_type());
  // Reached with an input computed at run time (constant inputs were folded above).
  static const std::set<std::string> kValueShaped = {"NonZero", "Unique", "Compress", "Range", "StringSplit"};
  if (!row && kValueShaped.count(node.op_type())) {
    unsupported(node, "the shape of its output depends on the values of an input computed at run time; wfgen's shapes are "
                      "known when generating code (it imports " + node.op_type() + " only when its inputs are constants, folded)");
  }
  if (!row) {
    std::string names;
    for (const auto& name : supported_operators()) names += (names.empty() ? "" : ", ") + name;
    unsupported(node, "the operator is not supported (supported: " + names + ")");
  }
  if (opset_ < row->since || opset_ > row->until) {
    unsupported(node, "wfgen imports " + node.op_type() + " in opsets " + opset_range(*row) + " only");
  }
  check_dtypes(node, *row);
  (this->*row->handler)(node, *row);
  // Where a handler reads its attributes before refusing others, it said so
  // first; this catches the attributes of a handler that reads none.
  only_attributes(node, row->attributes);
}

void Importer::import_unary(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant");
  define(node, 0, std::string(row.param) + "(" + x.body + ")", x.dims);
}

void Importer::import_arithmetic(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0), y = operand(node, 1);
  define(node, 0, binary(node, x, y, std::string(row.param)), broadcast(x.dims, y.dims));
}

// 1.0 where true, else 0.0 (the stdlib's eq, lt, ...).
void Importer::import_compare(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0), y = operand(node, 1);
  if (x.literal && y.literal) unsupported(node, "both operands are constants");
  // The body compares tensors only: a scalar constant becomes a one-element
  // parameter, broadcast like any other.
  // Operands of an integer type compare in it; the result is a bool (stored as u8).
  const std::string dtype = x.literal ? y.dtype : x.dtype;
  auto as_tensor = [&](const Value& v, int k) {
    if (!v.literal) return v.body;
    return as_dtype(float_parameter(node, node.output(0) + "_operand" + std::to_string(k), {1}, floats_of(*constant(node.input(k)))),
                    dtype);
  };
  define(node, 0, "to_bool(" + as_tensor(x, 0) + " " + std::string(row.param) + " " + as_tensor(y, 1) + ")", broadcast(x.dims, y.dims),
         "bool");
}

// On computed BOOLs (u8 0 / 1): And is a * b, Or a + b - a * b, Xor a != b,
// Not 1 - a (each broadcasting), all in u8.
void Importer::import_logic(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const std::string& op = node.op_type();
  Value x = operand(node, 0);
  if (op == "Not") {
    if (x.literal) unsupported(node, "its operand is a constant");
    define(node, 0, "1 - " + as_dtype(x, "bool"), x.dims, "bool");
    return;
  }
  Value y = operand(node, 1);
  if (x.literal || y.literal) unsupported(node, "a constant operand");
  const std::string a = as_dtype(x, "bool"), b = as_dtype(y, "bool");
  const std::string expr = op == "And" ? a + " * " + b : op == "Or" ? a + " + " + b + " - " + a + " * " + b : a + " != " + b;
  define(node, 0, expr, broadcast(x.dims, y.dims), "bool");
}

// A constant 0, 1, ..., n-1 laid along `axis` of a rank-`rank` parameter
// (size 1 on the other axes), n the axis's size in `x`.
Value Importer::positions(const onnx::NodeProto& node, const Value& x, std::int64_t axis, const std::string& suffix) {
  const auto n = (*x.dims)[static_cast<std::size_t>(axis)];
  if (!n) unsupported(node, "an axis of size unknown when importing");
  std::vector<std::int64_t> dims(x.dims->size(), 1);
  dims[static_cast<std::size_t>(axis)] = *n;
  std::vector<float> iota(static_cast<std::size_t>(*n));
  for (std::size_t k = 0; k < iota.size(); ++k) iota[k] = static_cast<float>(k);
  return float_parameter(node, node.output(0) + suffix, dims, iota);
}

// The index of the first largest (smallest) element along the axis, as f32
// (the stdlib's argmax). select_last_index = 1: the largest position where
// x equals its extreme, max((x == max(x)) * positions) (NaN-free inputs).
void Importer::import_arg_extreme(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", 0), rank);
  const bool keep = attr_int(node, "keepdims", 1) != 0;
  Dims out = *x.dims;
  if (keep) out[static_cast<std::size_t>(axis)] = 1;
  else out.erase(out.begin() + axis);
  if (out.empty()) unsupported(node, "a result of rank 0");
  const std::string args = ", axis=" + std::to_string(axis) + ", keepdims=";
  if (attr_int(node, "select_last_index", 0) != 0) {
    const std::string extreme = row.param == "argmax" ? "max" : "min";
    const Value pos = positions(node, x, axis, "_positions");
    define(node, 0, "to_i64(max((" + x.body + " == " + extreme + "(" + x.body + args + "true)) * " + pos.body + args + (keep ? "true" : "false") + "))",
           out, "i64");
    return;
  }
  // The stdlib's argmax gives the index in X's dtype: the result is INT64.
  define(node, 0, "to_i64(" + std::string(row.param) + "(" + x.body + args + (keep ? "true" : "false") + "))", out, "i64");
}

// Hardmax (opset 13: along one axis) as argmax's index compared with a
// constant 0, 1, ..., n-1 laid along the axis: 1.0 at the first largest
// element only, as ONNX's Hardmax (argmax picks the first).
void Importer::import_hardmax(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", -1), rank);
  const Value pos = positions(node, x, axis, "_positions");
  define(node, 0, "argmax(" + x.body + ", axis=" + std::to_string(axis) + ", keepdims=true) == " + pos.body, x.dims);
}

// Identity, and Dropout at inference (its training_mode a constant false).
void Importer::import_identity(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  const bool mask = node.op_type() == "Dropout" && node.output_size() == 2 && !node.output(1).empty();
  if (!mask) need_one_output(node);
  if (node.op_type() == "Dropout" && node.input_size() > 2 && !node.input(2).empty()) {
    const onnx::TensorProto* t = constant(node.input(2));
    // Training with a constant ratio of 0 keeps every element: no random draw.
    const onnx::TensorProto* ratio = node.input(1).empty() ? nullptr : constant(node.input(1));
    const bool keeps_all = ratio && element_count(*ratio) == 1 && floats_of(*ratio) == std::vector<float>{0.0f};
    if (!keeps_all && (!t || !(t->int32_data_size() + t->int64_data_size() + static_cast<int>(t->raw_data().size()) == 0 ||
                               ints_of(*t) == std::vector<std::int64_t>{0} || (t->raw_data().size() == 1 && t->raw_data()[0] == 0)))) {
      unsupported(node, "training_mode must be a constant false, or the ratio a constant 0 (wfgen draws no random numbers)");
    }
  }
  Value x = operand(node, 0);
  if (mask && x.literal) unsupported(node, "a constant input with its mask output");
  define(node, 0, x.literal ? x.body : x.body + " * 1.0", x.dims);
  // At inference every element is kept: the BOOL mask is all true (1.0),
  // written from x so that it has x's shape (isnan is 0 or 1, never NaN).
  if (mask) define(node, 1, "isnan(" + x.body + ") * 0.0 + 1.0", x.dims);
}

void Importer::import_reciprocal(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  define(node, 0, x.body + " ** -1.0", x.dims);
}

void Importer::import_activation(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  const std::string f = activation(node);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant");
  define(node, 0, f, x.dims);
}

void Importer::import_prelu(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0), slope = operand(node, 1);
  if (x.literal) unsupported(node, "its operand is a constant");
  define(node, 0, "relu(" + x.body + ") - " + slope.body + " * relu(neg(" + x.body + "))", broadcast(x.dims, slope.dims));
}

// constant_of() refuses the attributes it cannot read, with its own message.
void Importer::import_constant(const onnx::NodeProto& node, const OperatorRow&) {
  need_one_output(node);
  std::string why;
  std::unique_ptr<onnx::TensorProto> t = constant_of(node, why);
  if (!t) unsupported(node, why);
  keep_constant(node.output(0), std::move(t));
}

void Importer::import_folded(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  for (int k = 0; k < node.input_size(); ++k) {
    const std::string& in = node.input(k);
    if (!in.empty() && !values_.count(in) && !constant(in)) {
      refuse_deferred(node, in);
      unsupported(node, "its input '" + in + "' is computed by no earlier node");
    }
  }
  unsupported(node, "an input computed at run time (wfgen folds " + node.op_type() + " into a constant when importing)");
}

void Importer::import_where(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value c = condition(node), a = operand(node, 1), b = operand(node, 2);
  if (a.literal && b.literal) unsupported(node, "both branches are constants");
  const std::optional<Dims> out = broadcast(c.dims, broadcast(a.dims, b.dims));
  // select computes in the branches' dtype: the condition is cast to it.
  const std::string dtype = a.literal ? b.dtype : a.dtype;
  // select takes operands of one shape: a smaller one (masked_fill's mask
  // of [1 1 T T], its -inf of rank 0) is broadcast to the result's first.
  auto full = [&](const Value& v) {
    const std::string body = as_dtype(v, dtype);
    if (v.literal || !out || !v.dims || *v.dims == *out) return body;
    return (body == v.body ? body : "(" + body + ")") + ".broadcast_to(" + reshape_args(node, *out) + ")";
  };
  define(node, 0, "select(" + full(c) + ", " + full(a) + ", " + full(b) + ")", out, dtype);
}

void Importer::import_expand(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::vector<std::int64_t> shape = int_constant(node, 1, "its shape");
  Dims want;
  for (auto d : shape) want.push_back(d);
  std::optional<Dims> out = broadcast(x.dims, want);
  if (!out) unsupported(node, "the rank of its input is unknown");
  define(node, 0, x.body + ".broadcast_to(" + reshape_args(node, *out) + ")", out);
}

void Importer::import_global_pool(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  if (rank < 3) unsupported(node, "an input of rank " + std::to_string(rank) + " (expected N C D...)");
  std::string expr = x.body;
  Dims d = *x.dims;
  for (std::int64_t a = rank - 1; a >= 2; --a) {
    expr = std::string(row.param) + "(" + expr + ", axis=" + std::to_string(a) + ", keepdims=true)";
    d[static_cast<std::size_t>(a)] = 1;
  }
  define(node, 0, expr, d);
}

// Opset 20: approximate "none" is the exact erf GELU, the stdlib's gelu;
// "tanh" is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void Importer::import_gelu(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its operand is a constant");
  const std::string approximate = attr(node, "approximate") ? attr(node, "approximate")->s() : "none";
  if (approximate == "none") {
    define(node, 0, "gelu(" + x.body + ")", x.dims);
  } else if (approximate == "tanh") {
    define(node, 0, x.body + " * (tanh((" + x.body + " + " + x.body + " * " + x.body + " * " + x.body +
                        " * 0.044715) * 0.7978845608028654) + 1.0) * 0.5", x.dims);
  } else {
    unsupported(node, "approximate = '" + approximate + "'");
  }
}

void Importer::import_leaky_relu(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  define(node, 0, "leaky_relu(" + x.body + ", negative_slope=" + format_float(attr_float(node, "alpha", 0.01f)) + ")", x.dims);
}

// Max, Min (`row.param` the body function), Sum and Mean (`+`) of any number
// of operands, broadcasting.
void Importer::import_variadic(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  // maximum and minimum are node calls: each operand broadcast to the
  // result's dims, a scalar constant (Min(x, 0) of ONNX's expanded
  // functions) a parameter in the computed operands' dtype (full_operand).
  std::vector<Value> v;
  std::optional<std::string> dtype;
  std::optional<Dims> dims;
  for (int k = 0; k < node.input_size(); ++k) {
    v.push_back(operand(node, k));
    if (!v.back().literal && !dtype) dtype = v.back().dtype;
    dims = k == 0 ? v[0].dims : broadcast(dims, v.back().dims);
  }
  if (!dtype) unsupported(node, "only constant operands");
  const bool plus = row.param == "+";
  std::string expr;
  for (int k = 0; k < node.input_size(); ++k) {
    if (plus && v[static_cast<std::size_t>(k)].literal) unsupported(node, "a constant operand");
    const std::string term = plus ? v[static_cast<std::size_t>(k)].body : full_operand(node, k, v[static_cast<std::size_t>(k)], *dtype, dims);
    if (k == 0) expr = term;
    else if (plus) expr = expr + " + " + term;
    else expr = std::string(row.param) + "(" + expr + ", " + term + ")";
  }
  if (node.op_type() == "Mean" && node.input_size() > 1) expr = "(" + expr + ") * " + format_float(1.0f / static_cast<float>(node.input_size()));
  if (node.input_size() == 1) expr += " * 1.0";
  define(node, 0, expr, dims, *dtype);
}

void Importer::import_matmul(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value a = operand(node, 0), b = operand(node, 1);
  std::int64_t ra = rank_of(node, a), rb = rank_of(node, b);
  if (ra < 2 || rb < 2) unsupported(node, "1-D operands (ranks " + std::to_string(ra) + " and " + std::to_string(rb) + ")");
  Dims d = *broadcast(Dims(a.dims->begin(), a.dims->end() - 2), Dims(b.dims->begin(), b.dims->end() - 2));
  d.push_back((*a.dims)[ra - 2]);
  d.push_back((*b.dims)[rb - 1]);
  define(node, 0, a.body + " @ " + b.body, d);
}

void Importer::import_gemm(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value a = operand(node, 0), b = operand(node, 1);
  if (rank_of(node, a) != 2 || rank_of(node, b) != 2) unsupported(node, "operands that are not matrices");
  bool ta = attr_int(node, "transA", 0) != 0, tb = attr_int(node, "transB", 0) != 0;
  float alpha = attr_float(node, "alpha", 1.0f), beta = attr_float(node, "beta", 1.0f);
  std::string expr = a.body + (ta ? ".T" : "") + " @ " + b.body + (tb ? ".T" : "");
  if (alpha != 1.0f) expr = "(" + expr + ") * " + format_float(alpha);
  Dims d{(*a.dims)[ta ? 1 : 0], (*b.dims)[tb ? 0 : 1]};
  if (node.input_size() > 2 && !node.input(2).empty() && beta != 0.0f) {
    Value c = operand(node, 2);
    std::string cterm = beta == 1.0f ? c.body : (c.literal ? format_float(beta * std::stof(c.body)) : c.body + " * " + format_float(beta));
    expr += " + " + cterm;
  }
  define(node, 0, expr, d);
}

void Importer::import_softmax(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  std::int64_t axis = axis_in(node, attr_int(node, "axis", opset_ >= 13 ? -1 : 1), rank);
  const std::string fn(row.param);
  if (opset_ >= 13 || axis == rank - 1) {
    define(node, 0, fn + "(" + x.body + ", axis=" + std::to_string(axis) + ")", x.dims);
    return;
  }
  // Before opset 13 the input is seen as a matrix: the dims before axis
  // by the dims from axis on, normalised over each row.
  const Dims& d = *x.dims;
  Dims matrix{product(d, 0, static_cast<std::size_t>(axis)), product(d, static_cast<std::size_t>(axis), d.size())};
  define(node, 0, fn + "(" + x.body + ".reshape(" + reshape_args(node, matrix) + "), axis=-1).reshape(" + reshape_args(node, d) + ")",
         x.dims);
}

void Importer::import_transpose(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  std::vector<std::int64_t> perm = attr_ints(node, "perm").value_or(std::vector<std::int64_t>{});
  if (perm.empty())
    for (std::int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<std::int64_t>(perm.size()) != rank) unsupported(node, "perm has " + std::to_string(perm.size()) + " axes for rank " + std::to_string(rank));
  std::string args;
  Dims d;
  for (auto p : perm) {
    p = axis_in(node, p, rank);
    args += (args.empty() ? "" : ", ") + std::to_string(p);
    d.push_back((*x.dims)[static_cast<std::size_t>(p)]);
  }
  define(node, 0, x.body + ".permute(" + args + ") * 1.0", d);
}

// Activations written with the stdlib's element-wise nodes; "" for other ops.
std::string Importer::activation(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  auto x = [&] { return operand(node, 0).body; };
  // e^min(x, 0) - 1, the negative part of the exponential units.
  auto expm1_neg = [&](const std::string& v, float scale) {
    std::string inner = v + " - relu(" + v + ")";
    if (scale != 1.0f) inner = "(" + inner + ") * " + format_float(1.0f / scale);
    return "(exp(" + inner + ") - 1.0)";
  };
  if (op == "Elu") {
    std::string v = x();
    return "relu(" + v + ") + " + expm1_neg(v, 1.0f) + " * " + format_float(attr_float(node, "alpha", 1.0f));
  }
  if (op == "Celu") {
    std::string v = x();
    float alpha = attr_float(node, "alpha", 1.0f);
    if (alpha == 0.0f) unsupported(node, "alpha = 0");
    return "relu(" + v + ") + " + expm1_neg(v, alpha) + " * " + format_float(alpha);
  }
  if (op == "Selu") {
    std::string v = x();
    float alpha = attr_float(node, "alpha", 1.67326319217681884765625f), gamma = attr_float(node, "gamma", 1.05070102214813232421875f);
    return "(relu(" + v + ") + " + expm1_neg(v, 1.0f) + " * " + format_float(alpha) + ") * " + format_float(gamma);
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    std::string v = x();
    float alpha = op == "HardSwish" ? 1.0f / 6.0f : attr_float(node, "alpha", 0.2f);
    float beta = op == "HardSwish" ? 0.5f : attr_float(node, "beta", 0.5f);
    // max(0, min(1, alpha x + beta)) = relu(t - relu(t - 1)), t = alpha x + beta.
    std::string t = "(" + v + " * " + format_float(alpha) + " + " + format_float(beta) + ")";
    std::string hs = "relu(" + t + " - relu(" + t + " - 1.0))";
    return op == "HardSwish" ? v + " * " + hs : hs;
  }
  if (op == "Softsign") {
    std::string v = x();
    return v + " * (abs(" + v + ") + 1.0) ** -1.0";
  }
  if (op == "Shrink") {
    // x - bias above lambd, x + bias below -lambd, else 0: the two relus
    // give x -+ lambd there, and the steps (sign of a relu: 0 or 1) add
    // +-(lambd - bias).
    std::string v = x();
    const float lambd = attr_float(node, "lambd", 0.5f), bias = attr_float(node, "bias", 0.0f);
    if (lambd < 0.0f) unsupported(node, "lambd = " + format_float(lambd) + " (negative)");
    const std::string l = format_float(lambd), d = format_float(lambd - bias);
    const std::string up = "relu(" + v + " - " + l + ")", down = "relu(neg(" + v + ") - " + l + ")";
    return up + " - " + down + " + (sign(" + up + ") - sign(" + down + ")) * " + d;
  }
  if (op == "ThresholdedRelu") {
    // relu(sign(x - alpha)) is 1 where x > alpha, else 0: x - alpha is 0
    // only where x == alpha (IEEE subtraction with subnormals).
    std::string v = x();
    return v + " * relu(sign(" + v + " - " + format_float(attr_float(node, "alpha", 1.0f)) + "))";
  }
  if (op == "IsInf") {
    std::string v = x();
    const bool neg = attr_int(node, "detect_negative", 1) != 0, pos = attr_int(node, "detect_positive", 1) != 0;
    if (!neg && !pos) unsupported(node, "detect_negative = 0 and detect_positive = 0 (every output false)");
    if (neg && pos) return "isinf(" + v + ")";
    return "isinf(" + v + ") * relu(sign(" + (pos ? v : "neg(" + v + ")") + "))";
  }
  return "";
}

// A node whose inputs are all known when importing (ONNX's expanded
// functions compute shapes and indices this way, from Shape): its output
// becomes a constant. False when the node computes at run time.
bool Importer::fold(const onnx::NodeProto& node) {
  if (node.output_size() != 1) return false;
  if ((node.op_type() == "Shape" || node.op_type() == "Size") && node.input_size() == 1 && values_.count(node.input(0))) {
    fold_dims_of(node);
    return true;
  }
  std::vector<const onnx::TensorProto*> in;
  for (const auto& name : node.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    const onnx::TensorProto* t = values_.count(name) ? nullptr : constant(name);
    if (!t) {
      std::unique_ptr<onnx::TensorProto> known = propagated(node);
      if (!known && deferred_.count(name) && inferred_.data.count(node.output(0))) {
        // Shape arithmetic on a shape with a run-time dim (x.size(0)):
        // deferred too, a Reshape's shape where one dim is unknown.
        deferred_[node.output(0)] = deferred_.at(name);
        return true;
      }
      if (!known) return false;
      keep_constant(node.output(0), std::move(known));
      return true;
    }
    in.push_back(t);
  }
  std::string why;
  std::unique_ptr<onnx::TensorProto> t = fold_constants(node, in, opset_, why);
  if (!t) {
    if (!why.empty()) unsupported(node, why);
    return false;
  }
  check_folded(node, *t);
  keep_constant(node.output(0), std::move(t));
  return true;
}

// Where's condition: a computed tensor (non-zero is true), or a BOOL or
// numeric constant, made a FLOAT parameter of 0s and 1s.
Value Importer::condition(const onnx::NodeProto& node) {
  const std::string& name = node.input(0);
  if (!values_.count(name) && constant(name) && constant(name)->data_type() != onnx::TensorProto::FLOAT) {
    std::string why;
    std::unique_ptr<onnx::TensorProto> t = cast_constant(*constant(name), onnx::TensorProto::FLOAT, why);
    if (!t) unsupported(node, why);
    keep_constant(name + "_as_float", std::move(t));
    return operand_named(node, name + "_as_float");
  }
  return operand(node, 0);
}

// Concat of computed tensors (all-constant ones are folded): the stdlib's
// concat, two operands at a time, along the axis (1 before opset 4).
void Importer::import_concat(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  if (opset_ >= 4 && !attr(node, "axis")) unsupported(node, "it has no 'axis' attribute");
  std::vector<Value> parts;
  for (int k = 0; k < node.input_size(); ++k) {
    if (node.input(k).empty()) continue;
    parts.push_back(operand(node, k));
    if (parts.back().literal) unsupported(node, "a scalar operand (Concat joins tensors of rank 1 or more)");
  }
  if (parts.empty()) unsupported(node, "it has no input");
  const std::int64_t rank = rank_of(node, parts[0]);
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", 1), rank);
  Dims out = *parts[0].dims;
  std::string expr = parts[0].body;
  for (std::size_t k = 1; k < parts.size(); ++k) {
    if (rank_of(node, parts[k]) != rank) {
      unsupported(node, "inputs of ranks " + std::to_string(rank) + " and " + std::to_string(rank_of(node, parts[k])));
    }
    const Dims& d = *parts[k].dims;
    for (std::size_t a = 0; a < d.size(); ++a) {
      auto& o = out[a];
      if (static_cast<std::int64_t>(a) == axis) o = o && d[a] ? std::optional<std::int64_t>(*o + *d[a]) : std::nullopt;
      else if (o && d[a] && *o != *d[a]) unsupported(node, "inputs of sizes " + std::to_string(*o) + " and " + std::to_string(*d[a]) + " on axis " + std::to_string(a));
      else if (!o) o = d[a];
    }
    expr = "concat(" + expr + ", " + parts[k].body + ", axis=" + std::to_string(axis) + ")";
  }
  define(node, 0, parts.size() == 1 ? expr + " * 1.0" : expr, out);
}

// Split along an axis of known size into parts given by `split` (an
// attribute before opset 13, a constant input after), `num_outputs` (opset
// 18: equal parts, the last smaller) or the number of outputs (equal parts):
// each output the view x.narrow(axis, start, length).
void Importer::import_split(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", 0), rank);
  const auto& size = (*x.dims)[static_cast<std::size_t>(axis)];
  if (!size) unsupported(node, "splitting axis " + std::to_string(axis) + ", whose size is known only at run time");
  const std::int64_t outputs = node.output_size();
  std::vector<std::int64_t> parts;
  if (opset_ < 13) parts = attr_ints(node, "split").value_or(std::vector<std::int64_t>{});
  else if (node.input_size() > 1 && !node.input(1).empty()) parts = int_constant(node, 1, "its split");
  if (parts.empty()) {
    const std::int64_t n = attr(node, "num_outputs") ? attr_int(node, "num_outputs", outputs) : outputs;
    if (n != outputs) unsupported(node, "num_outputs = " + std::to_string(n) + " with " + std::to_string(outputs) + " outputs");
    // ONNX: equal parts of ceil(size / n), the last one smaller when n does not divide size.
    const std::int64_t each = (*size + n - 1) / n;
    for (std::int64_t k = 0, left = *size; k < n; ++k, left -= each) parts.push_back(std::max<std::int64_t>(0, std::min(each, left)));
    if (!attr(node, "num_outputs") && *size % n != 0) unsupported(node, "an axis of " + std::to_string(*size) + " in " + std::to_string(n) + " equal parts");
  }
  if (static_cast<std::int64_t>(parts.size()) != outputs) {
    unsupported(node, std::to_string(parts.size()) + " split sizes for " + std::to_string(outputs) + " outputs");
  }
  std::int64_t total = 0;
  for (auto p : parts) {
    if (p < 0) unsupported(node, "a negative split size");
    if (p > *size - total) unsupported(node, "split sizes that add up to more than the axis size " + std::to_string(*size));
    total += p;
  }
  if (total != *size) unsupported(node, "split sizes that add up to " + std::to_string(total) + ", not the axis size " + std::to_string(*size));
  std::int64_t start = 0;
  for (int k = 0; k < outputs; ++k) {
    const std::int64_t n = parts[static_cast<std::size_t>(k)];
    if (n == 0) unsupported(node, "an empty output (split size 0)");
    Dims out = *x.dims;
    out[static_cast<std::size_t>(axis)] = n;
    if (!node.output(k).empty()) {
      define(node, k, x.body + ".narrow(" + std::to_string(axis) + ", " + std::to_string(start) + ", " + std::to_string(n) + ")", out);
    }
    start += n;
  }
}

// Trilu: X times a constant mask of its last two axes, 1 where the element
// is kept (upper: j - i >= k, lower: j - i <= k), broadcast over the rest.
void Importer::import_trilu(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  if (rank < 2) unsupported(node, "an input of rank " + std::to_string(rank) + " (Trilu needs at least 2)");
  const auto& rows = (*x.dims)[static_cast<std::size_t>(rank - 2)];
  const auto& cols = (*x.dims)[static_cast<std::size_t>(rank - 1)];
  if (!rows || !cols) unsupported(node, "a matrix whose size is known only at run time");
  if (*rows == 0 || *cols == 0) unsupported(node, "an empty matrix");
  // The mask is written into the parameter file: keep it to a sane size.
  constexpr std::int64_t kMaxMask = std::int64_t{1} << 24;
  if (*rows > kMaxMask / *cols) unsupported(node, "a " + std::to_string(*rows) + " x " + std::to_string(*cols) + " matrix (its mask would have more than 2^24 elements)");
  std::int64_t k = 0;
  if (node.input_size() > 1 && !node.input(1).empty()) {
    const std::vector<std::int64_t> kk = int_constant(node, 1, "its k");
    if (kk.size() != 1) unsupported(node, "a k of " + std::to_string(kk.size()) + " values");
    k = kk[0];
  }
  const bool upper = attr_int(node, "upper", 1) != 0;
  std::vector<float> mask;
  for (std::int64_t i = 0; i < *rows; ++i)
    for (std::int64_t j = 0; j < *cols; ++j) mask.push_back(upper ? (j - i >= k ? 1.0f : 0.0f) : (j - i <= k ? 1.0f : 0.0f));
  const Value m = float_parameter(node, node.output(0) + "_mask", {*rows, *cols}, mask);
  define(node, 0, x.body + " * " + m.body, x.dims);
}

// Slice with constant starts, ends, axes and steps (attributes before
// opset 10, inputs after) as the body's x[a:b:c, ...], on axes of known size.
void Importer::import_slice(const onnx::NodeProto& node, const OperatorRow& row) {
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its input is a constant");
  const std::int64_t rank = rank_of(node, x);
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (opset_ < 10) {
    only_attributes(node, row.attributes);
    starts = attr_ints(node, "starts").value_or(std::vector<std::int64_t>{});
    ends = attr_ints(node, "ends").value_or(std::vector<std::int64_t>{});
    axes = attr_ints(node, "axes").value_or(std::vector<std::int64_t>{});
  } else {
    only_attributes(node, "");
    starts = int_constant(node, 1, "its starts");
    ends = int_constant(node, 2, "its ends");
    axes = int_constant(node, 3, "its axes");
    steps = int_constant(node, 4, "its steps");
  }
  if (axes.empty())
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    unsupported(node, "starts, ends, axes and steps of different lengths");
  }
  std::vector<std::string> items(static_cast<std::size_t>(rank), ":");
  Dims out = *x.dims;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::int64_t a = axis_in(node, axes[k], rank);
    const auto& dim = (*x.dims)[static_cast<std::size_t>(a)];
    if (!dim) unsupported(node, "slicing axis " + std::to_string(a) + ", whose size is known only at run time");
    if (steps[k] <= 0) unsupported(node, "step " + std::to_string(steps[k]) + " (wfgen's slices step forward)");
    auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + *dim : i, 0, *dim); };
    const std::int64_t b = clamp(starts[k]), e = clamp(ends[k]);
    const std::int64_t n = e > b ? (e - b + steps[k] - 1) / steps[k] : 0;
    if (n == 0) unsupported(node, "an empty result on axis " + std::to_string(a));
    items[static_cast<std::size_t>(a)] = std::to_string(b) + ":" + std::to_string(e) + (steps[k] == 1 ? "" : ":" + std::to_string(steps[k]));
    out[static_cast<std::size_t>(a)] = n;
  }
  std::string sub;
  for (const auto& i : items) sub += (sub.empty() ? "" : ", ") + i;
  define(node, 0, x.body + "[" + sub + "]", out);
}

// A constant known when importing (a Constant node, a folded Cast): an
// initializer from here on.
void Importer::keep_constant(const std::string& name, std::unique_ptr<onnx::TensorProto> t) {
  t->set_name(name);
  initializers_[name] = t.get();
  frozen_.push_back(std::move(t));
}

// A FLOAT constant made while importing (indices, masks, one-hot targets,
// a scalar widened to a tensor): kept as a parameter, and its body value.
Value Importer::float_parameter(const onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& dims,
                                const std::vector<float>& values) {
  auto t = std::make_unique<onnx::TensorProto>();
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  keep_constant(name, std::move(t));
  return operand_named(node, name);
}

// Cast and CastLike: folded when the input is a constant; on a computed
// tensor a cast node to FLOAT (DOUBLE), INT64, INT32, UINT8 or BOOL. To UINT8
// a float goes toward zero and saturates at [0, 255] (ONNX leaves out of
// range values undefined), an integer wraps modulo 256, as numpy's astype.
void Importer::import_cast(const onnx::NodeProto& node, const OperatorRow& row) {
  const bool like = node.op_type() == "CastLike";
  only_attributes(node, row.attributes);
  int to = onnx::TensorProto::FLOAT;
  if (!like) {
    const auto* a = attr(node, "to");
    if (!a) unsupported(node, "it has no 'to' attribute");
    to = static_cast<int>(a->i());
  } else if (node.input_size() < 2 || node.input(1).empty()) {
    unsupported(node, "input 1 (target_type) is missing");
  } else if (!values_.count(node.input(1))) {
    const onnx::TensorProto* target = constant(node.input(1));
    if (!target) unsupported(node, "its input '" + node.input(1) + "' is computed by no earlier node");
    to = target->data_type();
  }
  const std::string& in = node.input_size() > 0 ? node.input(0) : std::string();
  if (!values_.count(in) && constant(in)) {
    std::string why;
    std::unique_ptr<onnx::TensorProto> t = cast_constant(*constant(in), to, why);
    if (!t) unsupported(node, why);
    keep_constant(node.output(0), std::move(t));
    return;
  }
  Value x = operand(node, 0);
  // DOUBLE is the float dtype of an f64 model (FLOAT after precision.hpp's pass).
  const std::optional<std::string> dtype = dtype_of_type(to == onnx::TensorProto::DOUBLE && f64_ ? onnx::TensorProto::FLOAT : to);
  if (!dtype) {
    unsupported(node, "a cast of a computed tensor to " + onnx::TensorProto::DataType_Name(to) +
                          "; wfgen's ONNX import computes in FLOAT, INT64, INT32, UINT8 and BOOL");
  }
  if (x.literal) {
    if (!dtype->empty()) unsupported(node, "a cast of a constant number to " + onnx::TensorProto::DataType_Name(to));
    values_[node.output(0)] = x;
    return;
  }
  define(node, 0, *dtype == x.dtype ? x.body + " * 1.0" : as_dtype(x, *dtype), x.dims, *dtype);
}

void Importer::need_one_output(const onnx::NodeProto& node) const {
  int real = 0;
  for (const auto& o : node.output()) real += !o.empty();
  if (real > 1) unsupported(node, "it has " + std::to_string(real) + " outputs; wfgen imports the first 1");
}

void Importer::import_reshape(const onnx::NodeProto& node, const OperatorRow& row) {
  const std::string& op = node.op_type();
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  const Dims& in = *x.dims;
  Dims d;
  if (op == "Reshape") {
    only_attributes(node, row.attributes);
    std::vector<std::int64_t> shape = reshape_shape(node);
    bool allowzero = attr_int(node, "allowzero", 0) != 0;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 0 && !allowzero) {
        if (static_cast<std::int64_t>(k) >= rank) unsupported(node, "shape copies axis " + std::to_string(k) + " of a rank " + std::to_string(rank) + " input");
        d.push_back(in[k]);
      } else if (shape[k] < -1) {
        unsupported(node, "shape holds " + std::to_string(shape[k]));
      } else {
        d.push_back(shape[k] == -1 ? std::nullopt : std::optional<std::int64_t>(shape[k]));
      }
    }
    // The -1 is what the other dims leave of the input's size, when those
    // are known but for axes copied by a 0 (a run-time batch cancels): a
    // later Shape of the result (a stacked RNN's) reads it.
    if (auto minus = std::find(shape.begin(), shape.end(), -1); minus != shape.end()) {
      const auto at = static_cast<std::size_t>(minus - shape.begin());
      auto copied = [&](std::size_t k) { return k < shape.size() && shape[k] == 0 && !allowzero; };
      std::optional<std::int64_t> total = 1, others = 1;
      for (std::size_t k = 0; k < in.size(); ++k)
        if (!copied(k)) total = total && in[k] ? std::optional<std::int64_t>(*total * *in[k]) : std::nullopt;
      for (std::size_t k = 0; k < d.size(); ++k)
        if (k != at && !copied(k)) others = others && d[k] ? std::optional<std::int64_t>(*others * *d[k]) : std::nullopt;
      if (total && others && *others > 0 && *total % *others == 0) d[at] = *total / *others;
    }
  } else if (op == "Flatten") {
    only_attributes(node, row.attributes);
    // Flatten's axis is in [-rank, rank]: a negative one counts from rank.
    std::int64_t a = attr_int(node, "axis", 1);
    if (a < -rank || a > rank) unsupported(node, "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    std::size_t axis = static_cast<std::size_t>(a < 0 ? a + rank : a);
    d = {product(in, 0, axis), product(in, axis, in.size())};
  } else {
    only_attributes(node, row.attributes);
    std::vector<std::int64_t> axes = opset_ >= 13 ? int_constant(node, 1, "axes") : attr_ints(node, "axes").value_or(std::vector<std::int64_t>{});
    if (op == "Squeeze") {
      std::set<std::int64_t> drop;
      for (auto a : axes) {
        std::int64_t k = axis_in(node, a, rank);
        if (in[static_cast<std::size_t>(k)] && *in[static_cast<std::size_t>(k)] != 1) {
          unsupported(node, "axis " + std::to_string(a) + " has size " + std::to_string(*in[static_cast<std::size_t>(k)]) + ", not 1");
        }
        drop.insert(k);
      }
      if (axes.empty()) {
        for (std::int64_t k = 0; k < rank; ++k) {
          auto v = in[static_cast<std::size_t>(k)];
          if (!v) unsupported(node, "squeezing every size-1 axis of an input with run-time dims");
          if (*v == 1) drop.insert(k);
        }
      }
      for (std::int64_t k = 0; k < rank; ++k)
        if (!drop.count(k)) d.push_back(in[static_cast<std::size_t>(k)]);
    } else {
      std::int64_t out_rank = rank + static_cast<std::int64_t>(axes.size());
      std::set<std::int64_t> add;
      for (auto a : axes) add.insert(axis_in(node, a, out_rank));
      if (add.size() != axes.size()) unsupported(node, "axes repeat an axis");
      std::size_t src = 0;
      for (std::int64_t k = 0; k < out_rank; ++k) d.push_back(add.count(k) ? std::optional<std::int64_t>(1) : in[src++]);
    }
  }
  // A reshape is a view of its input, as in the body language.
  define(node, 0, x.body + ".reshape(" + reshape_args(node, d) + ")", d);
}

void Importer::import_reduce(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  std::int64_t rank = rank_of(node, x);
  bool keep = attr_int(node, "keepdims", 1) != 0;
  std::vector<std::int64_t> axes;
  if (node.op_type() == "ReduceSum" && opset_ >= 13) axes = int_constant(node, 1, "axes");
  else axes = attr_ints(node, "axes").value_or(std::vector<std::int64_t>{});
  if (axes.empty()) {
    if (attr_int(node, "noop_with_empty_axes", 0) != 0) {
      define(node, 0, x.body + " * 1.0", x.dims, x.dtype);
      return;
    }
    for (std::int64_t k = 0; k < rank; ++k) axes.push_back(k);
  }
  std::set<std::int64_t, std::greater<>> sorted;
  for (auto a : axes) sorted.insert(axis_in(node, a, rank));
  const std::string& op = node.op_type();
  if (op == "ReduceProd") {
    define(node, 0, product_over(node, x, sorted, keep), reduced_dims(*x.dims, sorted, keep), x.dtype);
    return;
  }
  std::string fn = op == "ReduceMean" ? "mean" : op == "ReduceMax" ? "max" : op == "ReduceMin" ? "min" : "sum";
  // ReduceL1 sums |x|, L2 and SumSquare x * x, LogSumExp e^x; L2, LogSum
  // and LogSumExp take a function of the sum afterwards.
  std::string expr = op == "ReduceL1" ? "abs(" + x.body + ")"
                   : (op == "ReduceL2" || op == "ReduceSumSquare") ? x.body + " * " + x.body
                   : op == "ReduceLogSumExp" ? "exp(" + x.body + ")"
                   : x.body;
  Dims d = *x.dims;
  // Highest axis first, so the lower ones keep their numbers when dropped.
  for (auto a : sorted) {
    expr = fn + "(" + expr + ", axis=" + std::to_string(a) + ", keepdims=" + (keep ? "true" : "false") + ")";
    if (keep) d[static_cast<std::size_t>(a)] = 1;
    else d.erase(d.begin() + a);
  }
  if (op == "ReduceL2") expr = "sqrt(" + expr + ")";
  if (op == "ReduceLogSum" || op == "ReduceLogSumExp") expr = "log(" + expr + ")";
  define(node, 0, expr, d, x.dtype);
}

void Importer::import_clip(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  Value x = operand(node, 0);
  std::optional<float> lo, hi;
  if (opset_ < 11) {
    if (attr(node, "min")) lo = attr_float(node, "min", 0.0f);
    if (attr(node, "max")) hi = attr_float(node, "max", 0.0f);
  } else {
    Value bound[3];
    bool computed = false;
    for (int k : {1, 2}) {
      if (k >= node.input_size() || node.input(k).empty()) continue;
      bound[k] = operand(node, k);
      if (bound[k].literal) (k == 1 ? lo : hi) = std::stof(bound[k].body);
      else computed = true;
    }
    if (computed) {
      // A bound computed at run time (a graph input): min(max(x, lo), hi)
      // with the stdlib's maximum and minimum, broadcasting; as ONNX, hi
      // wins where lo > hi.
      std::string expr = x.body;
      for (int k : {1, 2}) {
        if (bound[k].body.empty()) continue;
        const Value b = bound[k].literal ? float_parameter(node, node.output(0) + (k == 1 ? "_min" : "_max"), {1}, {std::stof(bound[k].body)})
                                         : bound[k];
        if (b.dims && std::any_of(b.dims->begin(), b.dims->end(), [](const auto& d) { return d != 1; }))
          unsupported(node, "a bound that is not a scalar");
        expr = std::string(k == 1 ? "maximum(" : "minimum(") + expr + ", " + b.body + ")";
      }
      define(node, 0, expr, x.dims);
      return;
    }
  }
  // max(x, lo) = lo + relu(x - lo); min(x, hi) = x - relu(x - hi).
  std::string expr = x.body;
  if (hi) expr = expr + " - relu(" + expr + " - " + format_float(*hi) + ")";
  if (lo) expr = "relu(" + expr + " - " + format_float(*lo) + ") + " + format_float(*lo);
  if (!lo && !hi) expr += " * 1.0";
  define(node, 0, expr, x.dims);
}

// `operand` for a value named `name` (a constant the importer made) in the
// error messages of `node`.
Value Importer::operand_named(const onnx::NodeProto& node, const std::string& name) {
  onnx::NodeProto renamed = node;
  if (renamed.input_size() == 0) renamed.add_input(name);
  else renamed.set_input(0, name);
  return operand(renamed, 0);
}

AxisFirst axis_first(const Value& x, std::int64_t axis) {
  const std::int64_t rank = static_cast<std::int64_t>(x.dims->size());
  AxisFirst out{x.body, {}};
  for (std::int64_t k = 0; k < rank; ++k)
    if (k != axis) out.rest.push_back((*x.dims)[static_cast<std::size_t>(k)]);
  if (axis != 0) {
    std::string perm = std::to_string(axis);
    for (std::int64_t k = 0; k < rank; ++k)
      if (k != axis) perm += ", " + std::to_string(k);
    out.body = x.body + ".permute(" + perm + ")";
  }
  return out;
}

// Gather of a computed tensor with constant indices (negative ones counted
// from the end). A scalar index is a subscript, x[:, i]; other indices go to
// the stdlib's gather (rows of a 2-D table): the axis moved first, the rest
// flattened, the indices a FLOAT constant, the result put back in ONNX's order
// x.dims[:axis] + indices.dims + x.dims[axis+1:].
void Importer::import_gather(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  Value x = operand(node, 0);
  if (x.literal) unsupported(node, "its data is a constant");
  const std::int64_t rank = rank_of(node, x);
  const std::int64_t axis = axis_in(node, attr_int(node, "axis", 0), rank);
  const auto& n = (*x.dims)[static_cast<std::size_t>(axis)];
  if (!n) unsupported(node, "gathering along axis " + std::to_string(axis) + ", whose size is known only at run time");
  if (node.input_size() >= 2 && values_.count(node.input(1))) {
    gather_computed(node, x, axis);
    return;
  }
  if (node.input_size() < 2 || !constant(node.input(1))) unsupported(node, "input 1 (indices) is missing");
  const onnx::TensorProto& it = *constant(node.input(1));
  std::vector<std::int64_t> idx = ints_of(it);
  if (idx.empty() && element_count(it) != 0) unsupported(node, "indices of type " + onnx::TensorProto::DataType_Name(it.data_type()));
  for (auto& i : idx) {
    if (i < -*n || i >= *n) unsupported(node, "index " + std::to_string(i) + " outside [" + std::to_string(-*n) + ", " + std::to_string(*n) + ")");
    if (i < 0) i += *n;
  }
  if (idx.empty()) unsupported(node, "no indices");
  Dims out(x.dims->begin(), x.dims->begin() + axis);
  for (auto d : it.dims()) out.push_back(d);
  out.insert(out.end(), x.dims->begin() + axis + 1, x.dims->end());
  if (it.dims_size() == 0) {
    std::string sub;
    for (std::int64_t k = 0; k < rank; ++k) sub += (k ? ", " : "") + (k == axis ? std::to_string(idx[0]) : std::string(":"));
    define(node, 0, x.body + "[" + sub + "]", out);
    return;
  }
  // The axis first: [n, the other axes in order].
  const auto [moved, rest] = axis_first(x, axis);
  const Value ids = float_parameter(node, node.output(0) + "_indices", {it.dims().begin(), it.dims().end()},
                                    {idx.begin(), idx.end()});
  const std::optional<std::int64_t> width = product(rest, 0, rest.size());
  if (!width) unsupported(node, "data with a dim known only at run time besides the gathered axis");
  // gather(W [n width], IDX [idx dims]) -> [idx dims, width]
  std::string expr = "gather(" + moved + ".reshape(" + std::to_string(*n) + ", " + std::to_string(*width) + "), " + ids.body + ")";
  Dims gathered;
  for (auto d : it.dims()) gathered.push_back(d);
  gathered.insert(gathered.end(), rest.begin(), rest.end());
  expr += ".reshape(" + reshape_args(node, gathered) + ")";
  if (axis != 0) {
    // [idx dims, x.dims[:axis], x.dims[axis+1:]] -> [x.dims[:axis], idx dims, x.dims[axis+1:]]
    const std::int64_t q = it.dims_size();
    std::string perm;
    for (std::int64_t k = 0; k < axis; ++k) perm += (perm.empty() ? "" : ", ") + std::to_string(q + k);
    for (std::int64_t k = 0; k < q; ++k) perm += ", " + std::to_string(k);
    for (std::int64_t k = axis; k < rank - 1; ++k) perm += ", " + std::to_string(q + k);
    expr += ".permute(" + perm + ")";
  }
  define(node, 0, expr, out);
}

}  // namespace wfgen::onnx_import::detail
