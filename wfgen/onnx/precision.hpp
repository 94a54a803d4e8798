// DOUBLE models. The importer computes every value of the body in one
// floating type, the build's dtype; a model whose floating tensors are all
// DOUBLE is imported with the same code as a FLOAT one and built as f64.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

namespace wfgen::onnx_import {

// When every floating tensor type of `model` (graph inputs, outputs and
// value_info, initializers, Constant values, Cast targets) is DOUBLE and
// there is at least one: rewrites those types to FLOAT in place, so the
// importer reads the model as it reads a FLOAT one, and returns true with
// the exact values of the DOUBLE initializers and Constants in `doubles`
// (by tensor name), which the f64 parameters and literals are written from.
// False, and `model` untouched, otherwise (a FLOAT model, or one that mixes
// FLOAT and DOUBLE: the importer refuses the DOUBLE tensors as before).
// Subgraphs (If, Loop, Scan bodies) are not looked into.
bool double_as_float(onnx::ModelProto& model, std::map<std::string, std::vector<double>>& doubles);

// `t` (DOUBLE, checked) as FLOAT, its exact values saved as doubles[name]
// (a frozen input of a DOUBLE model).
void to_float(onnx::TensorProto& t, const std::string& name, std::map<std::string, std::vector<double>>& doubles);

// The shortest text that reads back as the same double ("0.1", "2.0").
std::string format_double(double v);

}  // namespace wfgen::onnx_import
