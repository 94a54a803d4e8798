// The stdlib's element-wise kernels run on constants while importing: an
// ONNX operator folded on constants computes what the kernel the importer
// maps it to computes at run time (the same expression, run by the
// expression language's reference interpreter in the kernel's dtype), so
// that folding is no second copy of the operators' semantics.
// Internal to wfgen/onnx (folding.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace wfgen::onnx_import {

// One element of a result from one element of each operand, in the order of
// the stdlib node's inputs. Values travel as doubles: integers exactly up to
// 2^53 (the folds' shapes and indices), floats as the kernel's float type.
using ElementFn = std::function<double(const double* operands)>;

struct StdlibKernel {
  ElementFn fn;                 // empty: no kernel
  std::size_t operands = 0;     // how many operands fn reads
  explicit operator bool() const { return static_cast<bool>(fn); }
};

// The element-wise kernel of the stdlib node `node` (its `elementwise:`
// expression, the cpu device) for operands of the ONNX element type
// `onnx_type`, its constructor arguments given by `args`. The kernel's dtype
// is the type's (FLOAT f32, DOUBLE f64, INT64 i64, INT32 i32, BOOL and UINT8
// u8); the narrow integer types the stdlib has no kernels for compute in i64
// (their cast back refuses a result outside their range). Empty, with `why`
// set, when the node has no element-wise kernel of that dtype.
StdlibKernel stdlib_kernel(std::string_view node, int onnx_type, const std::map<std::string, double>& args, std::string& why);

// The stdlib node the importer's handler writes for the element-wise ONNX
// operator `op_type` with one stdlib call (its operator table row's
// parameter: a node's name, as "round_even" for Round, or a body operator,
// as "+" for Add, which the body calls "add" on tensors); "" for the others.
std::string stdlib_node_of(std::string_view op_type);

}  // namespace wfgen::onnx_import
