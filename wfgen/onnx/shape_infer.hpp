// The shapes of a model's values, and the values of its shape arithmetic
// (Shape -> Gather -> Concat -> ...), from libonnx's shape inference with
// data propagation (onnx/shape_inference/implementation.h) rather than
// re-derived here: the importer checks its own trace against them and
// takes what they know that the trace does not.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wfgen::onnx_import {

// Known dims, nullopt for a symbolic one.
using InferredDims = std::vector<std::optional<std::int64_t>>;

struct InferredValue {
  int type = 0;                       // TensorProto::DataType, 0 when not inferred
  std::optional<InferredDims> dims;   // nullopt: rank unknown
};

struct Inference {
  std::map<std::string, InferredValue> values;  // every value_info and graph output ONNX inferred
  // Data propagation's results: the elements of an INT64 value of at most
  // one axis (shapes, dims, indices), each known or symbolic. A scalar's
  // one element is here too (its rank is in `values`).
  std::map<std::string, InferredDims> data;
  // Why ONNX's checker or shape inference refused the model ("" when they
  // did not). The importer says it once it has read every node, so that a
  // node it refuses itself is named in its own words first.
  std::string refused;
};

// Runs ONNX's checker of nodes, then shape inference (types checked, errors thrown,
// data propagation on) on a copy of `model` whose inputs' dim params in
// `fixed` (--dim) are those sizes and whose initializers include `frozen`
// (inputs made constants). FLOAT and other non-integer initializers go in
// without their data, which inference never reads. When either refuses the
// model, `refused` says so, naming `path` (and the node as ONNX names it).
// Nothing is inferred for a model newer than this libonnx (its opset, or an
// operator it has no schema of): its shapes are wfgen's own.
Inference infer_shapes(const onnx::ModelProto& model, const std::map<std::string, std::int64_t>& fixed,
                       const std::vector<const onnx::TensorProto*>& frozen, const std::string& path);

}  // namespace wfgen::onnx_import
