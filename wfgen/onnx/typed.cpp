// Integer and bool values of an import: INT64, INT32 and BOOL tensors computed
// at run time are tensors of their own dtype in the body (i64, i32, u8), the
// graph inputs among them a build's typed_inputs. Each handler says what
// dtype its result has (define()); a change of dtype is an explicit cast
// node of the stdlib (to_f32, to_i64, to_bool...), and a node is refused
// where its row does not list the type of a computed input (check_dtypes).
#include <onnx/onnx_pb.h>

#include <memory>
#include <string>

#include "wfgen/onnx/importer.hpp"
#include "wfgen/onnx/tensors.hpp"

namespace wfgen::onnx_import::detail {

std::optional<std::string> Importer::dtype_of_type(int elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return std::string();
    case onnx::TensorProto::INT64: return std::string("i64");
    case onnx::TensorProto::INT32: return std::string("i32");
    case onnx::TensorProto::BOOL: return std::string("u8");
    default: return std::nullopt;
  }
}

std::string Importer::type_name(const std::string& dtype) const {
  if (dtype == "i64") return "INT64";
  if (dtype == "i32") return "INT32";
  if (dtype == "u8") return "BOOL";
  return f64_ ? "DOUBLE" : "FLOAT";
}

std::string Importer::as_dtype(const Value& v, const std::string& dtype) const {
  if (v.literal || v.dtype == dtype) return v.body;
  if (dtype.empty()) return std::string(f64_ ? "to_f64(" : "to_f32(") + v.body + ")";
  return std::string(dtype == "u8" ? "to_bool(" : "to_" + dtype + "(") + v.body + ")";
}

// The types a row takes are ONNX's names in its `dtypes` (FLOAT stands for
// DOUBLE too in an f64 model). Inputs the row needs as constants are folded,
// not computed, and are not checked here.
void Importer::check_dtypes(const onnx::NodeProto& node, const OperatorRow& row) const {
  if (row.dtypes.empty()) return;
  for (int k = 0; k < node.input_size(); ++k) {
    if (node.input(k).empty() || (k < 32 && (row.constant_inputs >> k & 1u) && opset_ >= row.constants_since)) continue;
    auto it = values_.find(node.input(k));
    std::string name;
    if (it != values_.end()) {
      if (it->second.literal) continue;
      name = type_name(it->second.dtype);
    } else if (const onnx::TensorProto* t = constant(node.input(k))) {
      std::optional<std::string> d = dtype_of_type(t->data_type());
      if (!d) continue;  // operand() refuses it, naming its type
      name = type_name(*d);
    } else {
      continue;
    }
    const std::string list = " " + std::string(row.dtypes) + " ";
    const std::string want = name == "DOUBLE" ? "FLOAT" : name;
    if (list.find(" " + want + " ") == std::string::npos) {
      unsupported(node, "its input '" + node.input(k) + "' is " + name + "; wfgen imports " + node.op_type() + " on " +
                            std::string(row.dtypes) + " tensors");
    }
  }
}

// Indices computed at run time: the stdlib's gather reads them in the data's
// dtype (a cast where they differ). A negative index counts from the end: the
// rows of idx and of idx + n are both gathered and added, one of the two
// always out of range, which gather makes a row of zeros.
void Importer::gather_computed(const onnx::NodeProto& node, const Value& x, std::int64_t axis) {
  const Value idx = operand(node, 1);
  if (idx.dtype != "i64" && idx.dtype != "i32") {
    unsupported(node, "indices of type " + type_name(idx.dtype) + " (INT64 or INT32 indices)");
  }
  if (!idx.dims) unsupported(node, "indices of unknown rank");
  if (idx.dims->empty()) unsupported(node, "a scalar index computed at run time");
  const std::int64_t rank = static_cast<std::int64_t>(x.dims->size());
  const std::int64_t n = *(*x.dims)[static_cast<std::size_t>(axis)];
  const auto [moved, rest] = axis_first(x, axis);
  const std::optional<std::int64_t> width = product(rest, 0, rest.size());
  if (!width) unsupported(node, "data with a dim known only at run time besides the gathered axis");
  const std::string table = identifier(node.output(0) + "_table", "table");
  line(table + " = " + moved + ".reshape(" + std::to_string(n) + ", " + std::to_string(*width) + ")", node.op_type() + " table");
  const std::string ids = identifier(node.output(0) + "_ids", "ids");
  line(ids + " = " + as_dtype(idx, x.dtype), node.op_type() + " indices");
  std::string expr = "(gather(" + table + ", " + ids + ") + gather(" + table + ", " + ids + " + " + std::to_string(n) + "))";
  Dims gathered = *idx.dims;
  gathered.insert(gathered.end(), rest.begin(), rest.end());
  expr += ".reshape(" + reshape_args(node, gathered) + ")";
  if (axis != 0) {
    const auto q = static_cast<std::int64_t>(idx.dims->size());
    std::string perm;
    for (std::int64_t k = 0; k < axis; ++k) perm += (perm.empty() ? "" : ", ") + std::to_string(q + k);
    for (std::int64_t k = 0; k < q; ++k) perm += ", " + std::to_string(k);
    for (std::int64_t k = axis; k < rank - 1; ++k) perm += ", " + std::to_string(q + k);
    expr += ".permute(" + perm + ")";
  }
  Dims out(x.dims->begin(), x.dims->begin() + axis);
  out.insert(out.end(), idx.dims->begin(), idx.dims->end());
  out.insert(out.end(), x.dims->begin() + axis + 1, x.dims->end());
  define(node, 0, expr, out, x.dtype);
}

std::string Importer::full_operand(const onnx::NodeProto& node, int k, const Value& v, const std::string& dtype,
                                   const std::optional<Dims>& out) {
  if (!out) unsupported(node, "operands of unknown rank");
  std::string base = v.body, body = as_dtype(v, dtype);
  if (v.literal) {
    const onnx::TensorProto* t = constant(node.input(k));
    if (!t) unsupported(node, "its input '" + node.input(k) + "' is no constant");
    // Not float_parameter: a parameter of rank 0 would read back as a literal.
    auto p = std::make_unique<onnx::TensorProto>();
    p->set_data_type(onnx::TensorProto::FLOAT);
    for (std::size_t d = 0; d < out->size(); ++d) p->add_dims(1);
    p->add_float_data(floats_of(*t).at(0));
    const std::string name = node.output(0) + "_operand" + std::to_string(k);
    keep_constant(name, std::move(p));
    const Value param = parameter(name, constant(name));
    base = param.body;
    body = as_dtype(param, dtype);
    if (*param.dims == *out) return body;
  } else if (!v.dims || *v.dims == *out) {
    return body;
  }
  return (body == base ? body : "(" + body + ")") + ".broadcast_to(" + reshape_args(node, *out) + ")";
}

// t is C's remainder, the sign of a (fmod = 1): the stdlib's fmod on floats,
// t = a - (a / b) * b on integers (the stdlib's i64/i32 div, toward zero).
// fmod = 0 is Python's and numpy's mod (the sign of b): b is added where t is
// not 0 and its sign is not b's (ONNX asks fmod = 1 of floats; its reference,
// numpy.mod, computes this form). The operands are broadcast to the
// result's dims (full_operand: fmod is a node call).
void Importer::import_mod(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const std::int64_t fmod = attr_int(node, "fmod", 0);
  Value a = operand(node, 0), b = operand(node, 1);
  if (a.literal && b.literal) unsupported(node, "both operands are constants");
  const std::string dtype = a.literal ? b.dtype : a.dtype;
  const bool floating = dtype.empty();
  if (!floating && dtype != "i64" && dtype != "i32")
    unsupported(node, "operands of type " + type_name(dtype) + " (FLOAT, DOUBLE, INT64 and INT32 are mapped)");
  const std::optional<Dims> dims = broadcast(a.dims, b.dims);
  const std::string x = full_operand(node, 0, a, dtype, dims), y = full_operand(node, 1, b, dtype, dims);
  const std::string remainder = floating ? "fmod(" + x + ", " + y + ")" : x + " - " + x + " / " + y + " * " + y;
  if (fmod != 0) {
    define(node, 0, remainder, dims, dtype);
    return;
  }
  const std::string t = identifier(node.output(0) + "_rem", "rem");
  line(t + " = " + remainder, node.op_type() + " remainder toward zero");
  define(node, 0, t + " + " + y + " * abs(sign(" + t + ")) * (sign(" + t + ") != sign(" + y + "))", dims, dtype);
}

// Pow: the result has x's type (ONNX). A float x takes an integer exponent
// cast to its dtype (small integers are exact). An integer x is raised in
// f64 and cast back toward zero (numpy's power, then astype; the stdlib's
// pow has float kernels only): exact while the result is below 2^53.
void Importer::import_pow(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const Value x = operand(node, 0), y = operand(node, 1);
  const std::optional<Dims> dims = broadcast(x.dims, y.dims);
  const bool integer_base = !x.literal && (x.dtype == "i64" || x.dtype == "i32");
  if (!integer_base) {
    Value exponent = y;
    if (!y.literal) exponent.body = as_dtype(y, "");
    define(node, 0, binary(node, x, exponent, "**"), dims, x.literal ? std::string() : x.dtype);
    return;
  }
  const bool f64_exponent = y.literal || (f64_ && y.dtype.empty());
  const std::string exponent = f64_exponent ? y.body : "to_f64(" + y.body + ")";
  define(node, 0, "to_" + x.dtype + "(to_f64(" + x.body + ") ** " + exponent + ")", dims, x.dtype);
}

}  // namespace wfgen::onnx_import::detail
