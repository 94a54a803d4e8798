// The stdlib's element-wise kernels on constants (stdlib_fold.hpp): the
// embedded stdlib's node, its `elementwise:` expression compiled for the
// constants' dtype, and expr::evaluate_exact, the interpreter with the
// semantics of the C++ the kernel is generated from (the kernel's float
// type, integers wrapping to its Int type).
#include "wfgen/onnx/stdlib_fold.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "wfgen/expr/expr.hpp"
#include "wfgen/onnx/operator_table.hpp"
#include "wfgen/spec/spec.hpp"
#include "wfgen/trace/trace.hpp"

namespace wfgen::onnx_import {

namespace {

// The stdlib alone, loaded the first time a fold needs it.
const spec::Spec& stdlib_spec() {
  static const spec::Spec s = spec::load_with_stdlib({});
  return s;
}

// The kernel dtype an ONNX element type computes in (stdlib_fold.hpp).
std::optional<rt::DType> kernel_dtype(int onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return rt::DType::f32;
    case onnx::TensorProto::DOUBLE: return rt::DType::f64;
    case onnx::TensorProto::INT32: return rt::DType::i32;
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8: return rt::DType::u8;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64: return rt::DType::i64;
    default: return std::nullopt;
  }
}

// An integer constant's value (a UINT64 beyond INT64's range saturates).
std::int64_t to_int64(double x) {
  if (x >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
  if (x <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(x);
}

expr::Type scalar_type(spec::ArgType t) {
  switch (t) {
    case spec::ArgType::Float: return expr::Type::Float;
    case spec::ArgType::Bool: return expr::Type::Bool;
    default: return expr::Type::Int;
  }
}

// The stdlib's cpu element-wise implementation of `node_name`, or null.
const spec::Impl* elementwise_impl(const spec::Spec& s, std::string_view node_name) {
  for (const spec::Impl* i : s.impls_of(node_name))
    if (i->device == "cpu" && i->kind == spec::BodyKind::Elementwise) return i;
  return nullptr;
}

// A compiled kernel expression and what it reads.
struct Kernel {
  expr::Expr e;
  rt::DType dtype = rt::DType::f32;
  std::vector<std::string> operands;     // the node's tensor inputs, in order
  std::map<std::string, expr::Value> values;  // the scalar arguments; operands set per element
  std::vector<expr::Value*> slots;            // the operands' entries of values, in order
};

}  // namespace

StdlibKernel stdlib_kernel(std::string_view node_name, int onnx_type, const std::map<std::string, double>& args, std::string& why) {
  const spec::Spec& s = stdlib_spec();
  const spec::Node* node = s.find_node(node_name);
  const std::optional<rt::DType> dt = kernel_dtype(onnx_type);
  const std::string type_name = onnx::TensorProto::DataType_Name(onnx_type);
  if (!dt) return why = "constants of type " + type_name + " (no stdlib kernel computes them)", StdlibKernel{};
  const spec::Impl* impl = elementwise_impl(s, node_name);
  if (!node || !impl) return why = "the stdlib has no element-wise kernel '" + std::string(node_name) + "'", StdlibKernel{};
  if (std::find(impl->dtypes.begin(), impl->dtypes.end(), *dt) == impl->dtypes.end())
    return why = "constants of type " + type_name + ": the stdlib's " + node->name + " has no " + rt::dtype_name(*dt) + " kernel to fold them with", StdlibKernel{};
  auto k = std::make_shared<Kernel>();
  k->dtype = *dt;
  expr::Env env;
  for (const auto& a : node->args) {
    if (a.type == spec::ArgType::Ints || a.type == spec::ArgType::Floats) continue;
    env[a.name] = expr::Binding::scalar(scalar_type(a.type));
    const auto given = args.find(a.name);
    if (given == args.end()) return why = "no value for the argument '" + a.name + "' of the stdlib's " + node->name, StdlibKernel{};
    k->values[a.name] = scalar_type(a.type) == expr::Type::Float ? expr::Value::of_float(given->second)
                                                                   : expr::Value::of_int(to_int64(given->second));
  }
  // The tensor inputs: the where line's inputs that are not outputs written in place (OUT).
  for (const auto& in : node->where.inputs) {
    const bool written = std::any_of(node->where.outputs.begin(), node->where.outputs.end(), [&](const auto& o) { return o.name == in.name; });
    if (in.name && !written) {
      k->operands.push_back(*in.name);
      env[*in.name] = expr::Binding::element(*dt);
    }
  }
  k->e = expr::compile(impl->elementwise.value, *dt, env);
  for (const auto& name : k->operands) k->slots.push_back(&k->values[name]);
  const bool integer = *dt != rt::DType::f32 && *dt != rt::DType::f64;
  const std::size_t operands = k->operands.size();
  return {[k, integer](const double* v) {
            for (std::size_t o = 0; o < k->slots.size(); ++o)
              *k->slots[o] = integer ? expr::Value::of_int(to_int64(v[o])) : expr::Value::of_float(v[o]);
            return expr::evaluate_exact(k->e, k->dtype, k->values).as_double();
          },
          operands};
}

std::string stdlib_node_of(std::string_view op_type) {
  const detail::OperatorRow* row = detail::find_operator(op_type);
  // Mean's handler scales the sum by 1 / n: not one call.
  if (!row || row->param.empty() || op_type == "Mean") return "";
  if (std::isalpha(static_cast<unsigned char>(row->param.front())) == 0) return std::string(trace::tensor_operator_node(row->param));
  if (elementwise_impl(stdlib_spec(), row->param)) return std::string(row->param);
  return "";  // argmax, softmax, mean (GlobalAveragePool): not element-wise
}

}  // namespace wfgen::onnx_import
