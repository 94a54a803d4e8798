// ONNX import: an ONNX model file -> a wfgen spec (one model with one `call:`
// body and a build) and a parameter file of its initializers.
//
// The importer only writes text the rest of wfgen reads like any user's spec:
// the graph's nodes become body statements in order, named after the ONNX
// values (mangled into body names where needed, the original kept in a
// comment), so the usual checks, fusion, memory planning and emission apply.
// Constant integer initializers that only give shapes or axes (Reshape's
// shape, Unsqueeze's axes, ...) are folded into the body text.
//
// What the stdlib cannot express is a UserError naming the operator (or the
// attribute value), the ONNX node's name, the opset and the .onnx file:
// never a silently different model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wfgen/runtime.hpp"

namespace wfgen::onnx_import {

struct Options {
  std::string name;                          // model and build name; "" derives it from the file name
  std::map<std::string, std::int64_t> dims;  // --dim batch=4: fixes a dim_param
  std::string params_file;                   // the parameter file the spec names (its path as written)
  // A folder of sample inputs in ONNX's test layout (input_<k>.pb, k the
  // position among the graph's inputs): graph inputs wfgen cannot take at
  // run time (not FLOAT, or read where a constant is needed: Reshape's shape,
  // axes, Clip's bounds) are frozen to these values. Empty: such inputs are errors.
  std::string freeze_dir;
  // With freeze_dir: INT64, INT32 and BOOL graph inputs that no node needs as
  // a constant stay inputs of their own dtype (the build's typed_inputs)
  // instead of being frozen (`wfgen import --keep-integer-inputs`).
  bool keep_integer_inputs = false;
  // The limit of all tensors' data together (initializers, constants, external
  // data, frozen inputs) and of the model file's size: past it, an error
  // before the memory is taken (`wfgen import --max-data`).
  std::uint64_t max_data_bytes = std::uint64_t{4} << 30;
  // The build's devices, in order of preference (`wfgen import --devices`):
  // "cpu", or "blas" then "cpu" (the matmuls through cblas).
  std::vector<std::string> devices = {"cpu"};
  // Whether a 3 x 3 stride-1 Conv on a large plane may run as
  // winograd_conv2d (fewer multiply-adds, fp32 rounding about 1e-6 of the
  // terms' magnitude instead of a direct sum's); false keeps every Conv on
  // im2col + matmul (`wfgen import --no-winograd`).
  bool winograd = true;
};

struct Imported {
  std::string spec;                       // the YAML text
  std::vector<std::string> param_names;   // the initializers kept as parameters, in the file's order
  std::vector<rt::Tensor> params;
  int opset = 0;                          // of the default ("ai.onnx") domain
  int statements = 0;                     // the lines of the `call:` body, the return included (the fuzz target checks them)
  std::vector<int> frozen_inputs;         // positions of the graph inputs frozen from freeze_dir
};

// Reads `path` (an ONNX ModelProto). Throws UserError.
Imported import_file(const std::string& path, const Options& options);

// Imports the ModelProto `bytes` as if read from `path` (which errors name,
// and whose folder external data is read from). Throws UserError.
Imported import_bytes(const std::string& bytes, const std::string& path, const Options& options);

// The operator types of a model's graph, in first-use order (a domain other
// than the default one prefixed: "com.microsoft.Gelu"). Throws UserError.
std::vector<std::string> operators_of(const std::string& path);

// The ONNX operators (default domain) import_file maps, sorted: the names
// of the importer's operator table (operator_table.cpp).
std::vector<std::string> supported_operators();

// That table, one line an operator, tab-separated, after a header line
// starting with '#': the name; the opsets it is imported in ("7+", "7-17");
// the attributes it reads (space-separated, "-" for none); the element types
// of its inputs computed at run time ("-": none); the inputs that must be
// constants ("1 2", "1 2 from opset 11", "-"); what it becomes in the body.
// `wfgen import --supported-operators` prints it (docs/onnx-conformance.md).
std::string supported_operators_tsv();

}  // namespace wfgen::onnx_import
