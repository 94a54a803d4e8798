// Integer and bool values of an import: INT64, INT32, UINT8 and BOOL tensors
// computed at run time are tensors of their own dtype in the body (i64, i32,
// u8, and u8 holding 0 / 1 for BOOL), the graph inputs among them a build's
// typed_inputs. The importer keeps BOOL ("bool") apart from UINT8 ("u8"):
// the same storage, but a cast to one is to_bool (non-zero is 1), to the
// other to_u8 (the number, wrapped or saturated). Each handler says what
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
    case onnx::TensorProto::BOOL: return std::string("bool");
    case onnx::TensorProto::UINT8: return std::string("u8");
    default: return std::nullopt;
  }
}

std::string Importer::storage_dtype(const std::string& dtype) { return dtype == "bool" ? "u8" : dtype; }

std::string Importer::type_name(const std::string& dtype) const {
  if (dtype == "i64") return "INT64";
  if (dtype == "i32") return "INT32";
  if (dtype == "bool") return "BOOL";
  if (dtype == "u8") return "UINT8";
  return f64_ ? "DOUBLE" : "FLOAT";
}

std::string Importer::as_dtype(const Value& v, const std::string& dtype) const {
  if (v.literal || v.dtype == dtype) return v.body;
  if (dtype.empty()) return std::string(f64_ ? "to_f64(" : "to_f32(") + v.body + ")";
  return "to_" + dtype + "(" + v.body + ")";  // to_i64, to_i32, to_u8, to_bool
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
  // gather reads the indices in the data's dtype: u8 would make them 0 / 1 (BOOL) or wrap them at 256 (UINT8).
  if (storage_dtype(x.dtype) == "u8") unsupported(node, "indices computed at run time into " + type_name(x.dtype) + " data");
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
    // numbers_of, not floats_of: the literal may be an integer constant (Mod's, BitShift's count).
    std::vector<double> number;
    if (!numbers_of(*t, number) || number.size() != 1) unsupported(node, "its input '" + node.input(k) + "' is no one-number constant");
    p->add_float_data(static_cast<float>(number[0]));
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

// BitShift: ONNX defines it on the unsigned types, of which the body has
// UINT8 (u8); its left shift wraps at 256 (the u8 kernel's final cast). The
// operands are broadcast to the result's dims (full_operand: shl is a node call).
void Importer::import_bitshift(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const onnx::AttributeProto* a = attr(node, "direction");
  const std::string direction = a ? a->s() : std::string();
  if (direction != "LEFT" && direction != "RIGHT") unsupported(node, "direction '" + escape_name(direction) + "' (LEFT or RIGHT)");
  const Value x = operand(node, 0), n = operand(node, 1);
  if (x.literal && n.literal) unsupported(node, "both operands are constants");
  const std::string dtype = x.literal ? n.dtype : x.dtype;
  if (dtype != "u8") unsupported(node, "operands of type " + type_name(dtype) + " (UINT8 is mapped)");
  const std::optional<Dims> dims = broadcast(x.dims, n.dims);
  const std::string shifted = full_operand(node, 0, x, dtype, dims), count = full_operand(node, 1, n, dtype, dims);
  define(node, 0, std::string(direction == "LEFT" ? "shl(" : "shr(") + shifted + ", " + count + ")", dims, dtype);
}

// QuantizeLinear to UINT8: y = saturate(round(x / scale) + zero_point),
// halves to even (ONNX), the sum saturated at [0, 255] by to_u8 (exact:
// round_even's result is whole). One scale and zero point for the whole
// tensor (a per-axis scale is refused); no zero point is 0, a UINT8 one.
void Importer::import_quantize_linear(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  need_one_output(node);
  const Value x = operand(node, 0), scale = operand(node, 1);
  if (x.literal) unsupported(node, "a constant input x");
  if (!x.dtype.empty()) unsupported(node, "an input x of type " + type_name(x.dtype) + " (FLOAT is mapped)");
  if (!scale.literal && (!scale.dims || product(*scale.dims, 0, scale.dims->size()) != 1))
    unsupported(node, "a scale of more than one element (per-axis quantization)");
  std::string sum = "round_even(" + binary(node, x, scale, "/") + ")";
  if (node.input_size() > 2 && !node.input(2).empty()) {
    const Value zero = operand(node, 2);
    if (!zero.literal && zero.dtype != "u8") unsupported(node, "a zero point of type " + type_name(zero.dtype) + " (UINT8 is mapped)");
    if (!zero.literal && (!zero.dims || product(*zero.dims, 0, zero.dims->size()) != 1))
      unsupported(node, "a zero point of more than one element (per-axis quantization)");
    if (const onnx::TensorProto* t = constant(node.input(2)); zero.literal && t && t->data_type() != onnx::TensorProto::UINT8)
      unsupported(node, "a zero point of type " + onnx::TensorProto::DataType_Name(t->data_type()) + " (UINT8 is mapped)");
    sum += " + " + (zero.literal ? zero.body : as_dtype(zero, ""));
  }
  define(node, 0, "to_u8(" + sum + ")", x.dims, "u8");
}

// DynamicQuantizeLinear: ONNX's own function body, statement for statement
// (so the f32 roundings are the reference's): the range of x widened to hold
// 0, scale = range / 255, the zero point -min / scale clipped to [0, 255]
// and rounded (halves to even) as UINT8, then QuantizeLinear's formula.
// min(a, 0) is -relu(-a), max(a, 0) relu(a), the clip relu(v - relu(v - 255)).
void Importer::import_dynamic_quantize_linear(const onnx::NodeProto& node, const OperatorRow& row) {
  only_attributes(node, row.attributes);
  const Value x = operand(node, 0);
  if (x.literal || !x.dtype.empty()) unsupported(node, "an input x that is not a computed FLOAT tensor");
  if (!x.dims || x.dims->empty()) unsupported(node, "an input x of unknown rank or of rank 0");
  const std::string flat = x.body + (x.dims->size() == 1 ? "" : ".reshape(-1)");
  const std::string lo = identifier(node.output(0) + "_min", "min"), hi = identifier(node.output(0) + "_max", "max");
  line(lo + " = 0.0 - relu(0.0 - min(" + flat + ", axis=0, keepdims=false))", node.op_type() + " min(x) widened to 0");
  line(hi + " = relu(max(" + flat + ", axis=0, keepdims=false))", node.op_type() + " max(x) widened to 0");
  const std::string scale = identifier(node.output(0) + "_scale", "scale"), start = identifier(node.output(0) + "_zero_fp", "zero_fp");
  line(scale + " = (" + hi + " - " + lo + ") / 255.0", node.op_type() + " scale");
  line(start + " = 0.0 - " + lo + " / " + scale, node.op_type() + " zero point before clipping");
  const std::string zero = "to_u8(round_even(relu(" + start + " - relu(" + start + " - 255.0))))";
  const bool wants_scale = node.output_size() > 1 && !node.output(1).empty();
  const bool wants_zero = node.output_size() > 2 && !node.output(2).empty();
  if (wants_scale) define(node, 1, scale + " * 1.0", Dims{}, "");
  std::string zero_body;
  if (wants_zero) {
    define(node, 2, zero, Dims{}, "u8");
    zero_body = values_.at(node.output(2)).body;
  } else {
    zero_body = identifier(node.output(0) + "_zero", "zero");
    line(zero_body + " = " + zero, node.op_type() + " zero point");
  }
  define(node, 0, "to_u8(round_even(" + x.body + " / " + scale + ") + to_f32(" + zero_body + "))", x.dims, "u8");
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
