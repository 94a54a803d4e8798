// Models of old opsets (PyTorch's first exporters wrote opset 6) are
// upgraded with ONNX's own version converter rather than imported through
// per-opset variants of each operator: one importer, for opsets 7 and newer.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace wfgen::onnx_import {

// The opset an older model is converted to: the converter's adapters reach
// it from opset 1 and every operator the importer maps exists there.
inline constexpr int kUpgradeOpset = 13;

// The first line of a libonnx exception's message, printable ASCII only
// (at most 400 characters): what an error quotes of the checker, the
// converter and shape inference.
std::string onnx_error_line(const char* what);

// Converts `model` (its default-domain opset `from` below the
// operator table's kFirstOpset; names
// already escaped, tensors already checked) in place to kUpgradeOpset with
// libonnx's version converter, after ONNX's checker has accepted it (the
// converter assumes a valid model). Throws UserError naming `path` and the
// two opsets when either refuses.
void upgrade_opset(onnx::ModelProto& model, const std::string& path, int from);

}  // namespace wfgen::onnx_import
