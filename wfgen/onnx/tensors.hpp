// ONNX TensorProto helpers of the importer: reading the values of an
// initializer, the tensor of a Constant node, and folding a Cast of a
// constant. Everything here works on constants known when importing; values
// computed at run time are the importer's (onnx_import.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wfgen::onnx_import {

// The element count its dims give.
std::int64_t element_count(const onnx::TensorProto& t);

// The values of an INT64 or INT32 tensor (empty for other types).
std::vector<std::int64_t> ints_of(const onnx::TensorProto& t);

// The values of a FLOAT tensor.
std::vector<float> floats_of(const onnx::TensorProto& t);

// The values of a numeric tensor (FLOAT, DOUBLE, the integer types, BOOL) as
// doubles; false for other types (strings, FLOAT16, complex).
bool numbers_of(const onnx::TensorProto& t, std::vector<double>& out);

// The tensor a Constant node defines (its `value`, `value_float(s)` or
// `value_int(s)` attribute), named after its output; null with the reason
// in `why` for the forms wfgen does not take (sparse, strings).
std::unique_ptr<onnx::TensorProto> constant_of(const onnx::NodeProto& node, std::string& why);

// `t` converted to the element type `to` (ONNX's Cast: float to integer
// truncates toward zero, anything non-zero to BOOL is true); null with the
// reason in `why` when either type is not numeric.
std::unique_ptr<onnx::TensorProto> cast_constant(const onnx::TensorProto& t, int to, std::string& why);

}  // namespace wfgen::onnx_import

namespace wfgen::onnx_import {

// The axes [first, end) of an input of rank `rank` that Shape returns (its
// start and end attributes, negative ones from the end, clamped to the rank).
std::pair<std::int64_t, std::int64_t> shape_range(const onnx::NodeProto& node, std::int64_t rank);

// Computes `node` when every input is a constant (folding.cpp: one table of
// each folded operator's semantics, which every handler reaches through
// Importer::fold): the shape and index
// arithmetic of ONNX's expanded functions (Shape's results fed through
// Gather, Concat, Unsqueeze, Add, ...). `in` holds the inputs (null for an
// empty, optional one); `shape_of` gives Shape's input dims when the input
// is a computed value whose dims are known. Returns null when the operator
// is not one folded here (`why` empty) or when folding fails (`why` says why).
std::unique_ptr<onnx::TensorProto> fold_constants(const onnx::NodeProto& node, const std::vector<const onnx::TensorProto*>& in,
                                                  int opset, std::string& why);

}  // namespace wfgen::onnx_import
