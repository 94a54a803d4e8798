// `wfgen import`, in its own library: it links the ONNX protobuf classes
// (Debian's libonnx-dev), which the rest of wfgen does not need.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "wfgen/cli/commands.hpp"

namespace wfgen::cli {

struct ImportOptions {
  std::filesystem::path model;   // the .onnx file
  std::filesystem::path output;  // the spec to write
  std::filesystem::path params;  // the parameter file; default: the spec's name with .wfparams
  std::string name;              // model and build name; default: the spec's file name without extension
  std::vector<std::string> dims;  // NAME=SIZE for dim_params
  std::filesystem::path freeze_dir;  // sample inputs (input_<k>.pb) for inputs needed as constants
  bool keep_integer_inputs = false;  // with freeze_dir: integer and bool inputs stay typed inputs
  bool no_winograd = false;          // every Conv as im2col + matmul
  std::vector<std::string> devices;  // the build's devices, in order of preference; empty: cpu
  std::string max_data;  // the limit of the tensors' data: "8GiB", "512MiB", a number of bytes; "" the default
  bool quiet = false;
  bool list_operators = false;  // print the graph's operator types, write nothing
  bool supported_operators = false;  // print the importer's operator table (no model read), write nothing
};
// Writes the spec and the parameter file, or nothing on an error (exit 2).
int import_onnx(const ImportOptions& options, Streams io);

}  // namespace wfgen::cli
